"""baseagent: its profile, arithmetic, policy, explain knobs and readers, declared once."""

from __future__ import annotations

from ctx_inspect.core.agents import Agent, Knob, const, times
from ctx_inspect.core.estimate import BASEAGENT
from ctx_inspect.core.policies.baseagent import POLICY
from ctx_inspect.core.profiles import BaseAgentProfile

AGENT = Agent(
    "baseagent",
    profile=BaseAgentProfile,
    policy=POLICY,
    estimator=BASEAGENT,
    knobs=(
        Knob("compact_ratio", +1, const(1.0), step=0.01),
        Knob("output_reserve", -1, const(0)),
        Knob("context_window", +1, times(8)),
    ),
    formats=("ctx_inspect.formats.baseagent",),
)
