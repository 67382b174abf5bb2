"""opencode: its profile, arithmetic, policy, explain knobs and readers, declared once."""

from __future__ import annotations

from ctx_inspect.core.agents import Agent, Knob, const, times
from ctx_inspect.core.estimate import OPENCODE
from ctx_inspect.core.policies.opencode import POLICY
from ctx_inspect.core.profiles import OpenCodeProfile

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
        "ctx_inspect.formats.opencode",
        "ctx_inspect.formats.opencode_run",
        "ctx_inspect.formats.opencode_data",
    ),
)
