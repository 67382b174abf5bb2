"""codex: its profile, arithmetic, policy, explain knobs and readers, declared once."""

from __future__ import annotations

from ctx_inspect.core.agents import Agent, Knob, times
from ctx_inspect.core.estimate import CODEX
from ctx_inspect.core.policies.codex import POLICY
from ctx_inspect.core.profiles import CodexProfile

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
        "ctx_inspect.formats.codex",
        "ctx_inspect.formats.codex_exec",
    ),
)
