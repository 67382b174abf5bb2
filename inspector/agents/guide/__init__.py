"""guide: its profile, arithmetic, policy, explain knobs and readers, declared once."""

from __future__ import annotations

from inspector.core.agents import Agent, Knob, const, times
from inspector.core.estimate import GUIDE
from inspector.core.policies.guide import POLICY
from inspector.core.profiles import GuideProfile

AGENT = Agent(
    "guide",
    profile=GuideProfile,
    policy=POLICY,
    estimator=GUIDE,
    knobs=(
        Knob("compact_ratio", +1, const(0.99), step=0.01),
        Knob("context_window", +1, times(8)),
    ),
)
