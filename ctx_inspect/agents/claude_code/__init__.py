"""claude-code: its profile, arithmetic, policy, explain knobs and readers, declared once."""

from __future__ import annotations

from ctx_inspect.agents.claude_code.estimate import CLAUDE_CODE
from ctx_inspect.agents.claude_code.policy import POLICY
from ctx_inspect.agents.claude_code.profile import ClaudeCodeProfile
from ctx_inspect.core.agents import Agent, Knob, const, times

AGENT = Agent(
    "claude-code",
    profile=ClaudeCodeProfile,
    policy=POLICY,
    estimator=CLAUDE_CODE,
    knobs=(
        Knob("autocompact_buffer_tokens", -1, const(0), derived="autocompact_buffer"),
        # a window set below the model's ("auto" has no threshold to move)
        Knob("autocompact_window", +1, times(1.0)),
        Knob("context_window", +1, times(8)),
    ),
    formats=(
        "ctx_inspect.agents.claude_code.reader",
        "ctx_inspect.agents.claude_code.reader_stream",
    ),
)
