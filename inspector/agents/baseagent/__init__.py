"""baseagent: its profile, arithmetic, policy, explain knobs and readers, declared once."""

from __future__ import annotations

from inspector.core.agents import Agent, Knob, const, times
from inspector.core.estimate import BASEAGENT
from inspector.core.policies.baseagent import POLICY
from inspector.core.profiles import BaseAgentProfile

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
    formats=("inspector.formats.baseagent",),
)
