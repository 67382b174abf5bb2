"""generic: its profile, arithmetic, policy, explain knobs and readers, declared once."""

from __future__ import annotations

from inspector.core.agents import Agent, Knob, const, times
from inspector.core.policies.generic import POLICY
from inspector.core.profiles import GenericProfile

AGENT = Agent(
    "generic",
    profile=GenericProfile,
    policy=POLICY,
    knobs=(
        Knob("compact_ratio", +1, const(1.0), step=0.01),
        Knob("context_window", +1, times(8)),
    ),
)
