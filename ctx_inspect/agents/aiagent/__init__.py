"""netdata ai-agent: its profile, arithmetic, guard, policy, explain knobs and readers.

- ``profile.py``: the settings (``AiAgentProfile``) with the agent's defaults;
- ``estimate.py``: its token arithmetic (``AIAGENT``) and the tool-schema estimate;
- ``guard.py``: its ``ContextGuard`` as immutable arithmetic; ``truncation.py``: its size cap
  on a tool output; ``policy.py``: both as a policy (it forces a final turn, never prunes or
  compacts);
- the readers: ``reader_debug.py`` (CONTEXT_DEBUG stdout), ``reader_log.py`` (logfmt stderr),
  ``reader_console.py`` (console stderr), the last two reading records through
  ``interpreter.py`` and ``log_guard.py``; ``values.py`` what they share; ``merge.py`` the
  streams of one run merged;
- ``README.md``: the agent's page (its settings, its figures, how replay agrees with real runs).
"""

from __future__ import annotations

from ctx_inspect.agents.aiagent.estimate import AIAGENT
from ctx_inspect.agents.aiagent.policy import POLICY
from ctx_inspect.agents.aiagent.profile import AiAgentProfile
from ctx_inspect.core.agents import Agent, Knob, const, times

AGENT = Agent(
    "aiagent",
    profile=AiAgentProfile,
    policy=POLICY,
    estimator=AIAGENT,
    knobs=(
        Knob("buffer_tokens", -1, const(0)),
        Knob("max_output_tokens", -1, const(256), derived="max_output"),
        Knob("tool_response_max_bytes", -1, const(512)),
        Knob("context_window", +1, times(8)),
    ),
    formats=(
        "ctx_inspect.agents.aiagent.reader_debug",
        "ctx_inspect.agents.aiagent.reader_log",
        "ctx_inspect.agents.aiagent.reader_console",
    ),
)
