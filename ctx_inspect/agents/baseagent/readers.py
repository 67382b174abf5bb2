"""BaseAgent's two formats as ctx-inspect lists and detects them: its stderr log and its stdout,
each of which ``merge.py`` merges with the other (``--merge``)."""

from __future__ import annotations

from ctx_inspect.agents.baseagent.merge import merge_run
from ctx_inspect.agents.baseagent.reader_events import BaseAgentEventsParser, sniff_events
from ctx_inspect.agents.baseagent.reader_log import BaseAgentLogParser, sniff_log
from ctx_inspect.formats.registry import FormatSpec, register

LOG_SPEC = register(
    FormatSpec(
        name=BaseAgentLogParser.format_name,
        description="BaseAgent (SuperAgent) stderr log: [HH:MM:SS] [loop|compaction] lines",
        reads="stderr of BaseAgent's agent.py (*.log)",
        parser=BaseAgentLogParser,
        sniff=sniff_log,
        default_profile="baseagent",
        module=__name__,  # the module that registers them (their order in detection)
        stream_merge=merge_run,
    )
)
EVENTS_SPEC = register(
    FormatSpec(
        name=BaseAgentEventsParser.format_name,
        description="BaseAgent (SuperAgent) stdout JSONL events (thread/turn/item)",
        reads="stdout of BaseAgent's agent.py (*.jsonl)",
        parser=BaseAgentEventsParser,
        sniff=sniff_events,
        default_profile="baseagent",
        module=__name__,
        stream_merge=merge_run,
    )
)
