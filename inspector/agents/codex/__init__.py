"""codex: its profile, arithmetic, policy, explain knobs and readers, declared once."""

from __future__ import annotations

from inspector.core.agents import Agent, Knob, times
from inspector.core.estimate import CODEX
from inspector.core.policies.codex import POLICY
from inspector.core.profiles import CodexProfile

AGENT = Agent(
    "codex",
    profile=CodexProfile,
    policy=POLICY,
    estimator=CODEX,
    knobs=(
        Knob("model_auto_compact_token_limit", +1, times(1.0), derived="threshold"),
        Knob("context_window", +1, times(8)),
    ),
    formats=(
        "inspector.formats.codex",
        "inspector.formats.codex_exec",
    ),
)
