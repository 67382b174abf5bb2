"""opencode: its profile, arithmetic, policy, explain knobs and readers, declared once."""

from __future__ import annotations

from inspector.core.agents import Agent, Knob, const, times
from inspector.core.estimate import OPENCODE
from inspector.core.policies.opencode import POLICY
from inspector.core.profiles import OpenCodeProfile

AGENT = Agent(
    "opencode",
    profile=OpenCodeProfile,
    policy=POLICY,
    estimator=OPENCODE,
    knobs=(
        Knob("output_limit", -1, const(1024)),
        Knob("context_window", +1, times(8)),
    ),
    formats=(
        "inspector.formats.opencode",
        "inspector.formats.opencode_run",
        "inspector.formats.opencode_data",
    ),
)
