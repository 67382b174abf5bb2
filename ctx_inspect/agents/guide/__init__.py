"""guide: its profile, arithmetic, policy, explain knobs and readers, declared once."""

from __future__ import annotations

from ctx_inspect.core.agents import Agent, Knob, const, times
from ctx_inspect.core.estimate import GUIDE
from ctx_inspect.core.policies.guide import POLICY
from ctx_inspect.core.profiles import GuideProfile

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
