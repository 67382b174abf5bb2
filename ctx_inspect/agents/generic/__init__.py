"""generic: its profile, arithmetic, policy, explain knobs and readers, declared once."""

from __future__ import annotations

from ctx_inspect.core.agents import Agent, Knob, const, times
from ctx_inspect.core.policies.generic import POLICY
from ctx_inspect.core.profiles import GenericProfile

AGENT = Agent(
    "generic",
    profile=GenericProfile,
    policy=POLICY,
    knobs=(
        Knob("compact_ratio", +1, const(1.0), step=0.01),
        Knob("context_window", +1, times(8)),
    ),
)
