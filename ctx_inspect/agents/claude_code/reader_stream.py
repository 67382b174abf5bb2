"""Claude Code's ``--output-format stream-json`` stdout (``claude -p ... --verbose``).

A format of its own (one module per format): the lines are the session transcript's assistant
and user lines with snake_case envelopes (``session_id``, ``parent_tool_use_id``, ``agent_id``),
no tree, a ``system``/``init`` line per invocation, ``system`` lines of the CLI's own
(``status`` compacting, ``compact_boundary`` with ``compact_metadata.pre_tokens``,
``task_started``, ``api_retry``) and a final ``result`` whose ``modelUsage`` gives the model's
window and max output as the CLI resolved them. The reading itself is the session reader's
(``reader.ClaudeCodeParser`` with ``stream_json``): only the envelope differs. Sub-agent lines
(those with ``parent_tool_use_id``) get the thread ``agent-<agent_id>``.

``--merge`` of a run's streams (the session file, its sub-agent files, this stdout, one per
invocation) is ``merge.merge_streams``: one session, each record once.
"""

from __future__ import annotations

from typing import Any

from ctx_inspect.agents.claude_code.merge import merge_streams
from ctx_inspect.agents.claude_code.reader import ClaudeCodeParser, parsed_head
from ctx_inspect.agents.claude_code.records import BOM, STREAM_TYPES
from ctx_inspect.formats.registry import FormatSpec, Head, register


class ClaudeCodeStreamParser(ClaudeCodeParser):
    """The CLI's ``--output-format stream-json`` stdout: same lines, snake_case envelopes."""

    format_name = "claude-code-stream"
    stream_json = True
    two_phase = False  # the scanner reads session files' envelopes only


def _is_stream_line(obj: Any) -> bool:
    if not isinstance(obj, dict) or obj.get("type") not in STREAM_TYPES:
        return False
    if not isinstance(obj.get("session_id"), str) or "sessionId" in obj:
        return False
    if obj.get("type") == "system":
        return (obj.get("subtype") == "init" and "claude_code_version" in obj) or "uuid" in obj
    return "parent_tool_use_id" in obj or obj.get("type") == "result"


def sniff_stream(head: Head) -> float:
    if head.is_dir or not head.data.lstrip(BOM).lstrip().startswith(b"{"):
        return 0.0
    parsed = parsed_head(head)
    if not parsed:
        return 0.0
    first = parsed[0]
    hits = sum(1 for o in parsed if _is_stream_line(o))
    if hits == 0:
        return 0.0
    if (
        isinstance(first, dict)
        and first.get("subtype") == "init"
        and "claude_code_version" in first
    ):
        return 0.95
    return 0.9 if hits * 2 >= len(parsed) else 0.5


STREAM_SPEC = register(
    FormatSpec(
        name="claude-code-stream",
        description="Claude Code's --output-format stream-json stdout (JSONL)",
        reads="the stdout of `claude -p --output-format stream-json`, saved as *.jsonl",
        parser=ClaudeCodeStreamParser,
        sniff=sniff_stream,
        default_profile="claude-code",
        stream_merge=merge_streams,
    )
)
