"""goagent: its profile, arithmetic, policy, explain knobs and readers, declared once."""

from __future__ import annotations

from ctx_inspect.core.agents import Agent, Knob, const, times
from ctx_inspect.core.estimate import GOAGENT
from ctx_inspect.core.policies.goagent import POLICY
from ctx_inspect.core.profiles import GoAgentProfile

AGENT = Agent(
    "goagent",
    profile=GoAgentProfile,
    policy=POLICY,
    estimator=GOAGENT,
    knobs=(
        Knob("reserve_tokens", -1, const(0)),
        Knob("max_tokens", +1, times(64, "max_tokens")),
        Knob("context_window", +1, const(2_000_000)),
        Knob("tool_output_max_bytes", -1, const(1024)),
    ),
    formats=("ctx_inspect.formats.goagent",),
)
