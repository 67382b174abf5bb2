"""goagent: the Go agent "ai" (tiancaiamao/ai), declared once.

- ``profile.py``: its settings with their defaults (``GoAgentProfile``);
- ``estimate.py``: its token arithmetic (``estimateMessageTokens``);
- ``policy.py``: its context management as a policy, built from ``messages.py`` (the texts it
  reads and writes), ``tool_output.py`` (its tool-output limits and their notices),
  ``trigger.py`` (when it compacts, where it cuts) and ``compaction.py`` (its compactors);
- its readers: ``reader_events.py`` (the ``--mode json`` stdout), ``reader_log.py`` (its log
  file) and ``reader_session.py`` (its session tree), on ``records.py`` (its messages and
  records) and ``figures.py`` (its own figure, notices and refusals), with ``merge.py`` (the
  ``--merge`` of one run's streams);
- ``README.md``: what ctx-inspect reads of it, its settings, and how faithful replay is.
"""

from __future__ import annotations

from ctx_inspect.agents.goagent.estimate import RULE
from ctx_inspect.agents.goagent.policy import POLICY
from ctx_inspect.agents.goagent.profile import NAME, GoAgentProfile
from ctx_inspect.core.agents import Agent, Knob, const, times

AGENT = Agent(
    NAME,
    profile=GoAgentProfile,
    policy=POLICY,
    estimator=RULE,
    knobs=(
        Knob("reserve_tokens", -1, const(0)),
        Knob("max_tokens", +1, times(64, "max_tokens")),
        Knob("context_window", +1, const(2_000_000)),
        Knob("tool_output_max_bytes", -1, const(1024)),
    ),
    formats=(
        "ctx_inspect.agents.goagent.reader_events",
        "ctx_inspect.agents.goagent.reader_log",
        "ctx_inspect.agents.goagent.reader_session",
    ),
)
