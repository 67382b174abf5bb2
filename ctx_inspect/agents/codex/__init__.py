"""codex: OpenAI Codex CLI, declared once.

``profile.py`` its settings (under its ``config.toml`` names), ``estimate.py`` its token
arithmetic, ``policy.py`` its auto-compaction, ``reader.py`` its rollout files (with ``items.py``,
the response items as messages, and ``compaction.py``, a compaction as the rollout records it),
``reader_exec.py`` the ``codex exec --json`` stdout; ``README.md`` says what is read and how
replay agrees with real runs.
"""

from __future__ import annotations

from ctx_inspect.agents.codex.estimate import RULE
from ctx_inspect.agents.codex.policy import POLICY
from ctx_inspect.agents.codex.profile import CodexProfile
from ctx_inspect.core.agents import Agent, Knob, times

AGENT = Agent(
    "codex",
    profile=CodexProfile,
    policy=POLICY,
    estimator=RULE,
    knobs=(
        Knob("model_auto_compact_token_limit", +1, times(1.0), derived="threshold"),
        Knob("context_window", +1, times(8)),
    ),
    formats=(
        "ctx_inspect.agents.codex.reader",
        "ctx_inspect.agents.codex.reader_exec",
    ),
)
