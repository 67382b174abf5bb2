"""fifth: its profile, arithmetic, policy, explain knobs and readers, declared once."""

from __future__ import annotations

from ctx_inspect.core.agents import Agent, Knob, const, times
from ctx_inspect.core.estimate import FIFTH
from ctx_inspect.core.policies.fifth import POLICY
from ctx_inspect.core.profiles import FifthProfile

AGENT = Agent(
    "fifth",
    profile=FifthProfile,
    policy=POLICY,
    estimator=FIFTH,
    knobs=(
        Knob("capacity_trigger", +1, const(100)),
        Knob("level3_budget", +1, times(8, "level3_budget")),
    ),
    formats=("ctx_inspect.formats.fifth",),
)
