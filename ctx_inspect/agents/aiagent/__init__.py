"""aiagent: its profile, arithmetic, policy, explain knobs and readers, declared once."""

from __future__ import annotations

from ctx_inspect.core.agents import Agent, Knob, const, times
from ctx_inspect.core.estimate import AIAGENT
from ctx_inspect.core.policies.aiagent import POLICY
from ctx_inspect.core.profiles import AiAgentProfile

AGENT = Agent(
    "aiagent",
    profile=AiAgentProfile,
    policy=POLICY,
    estimator=AIAGENT,
    knobs=(
        Knob("buffer_tokens", -1, const(0)),
        Knob("max_output_tokens", -1, const(256), derived="max_output"),
        Knob("tool_response_max_bytes", -1, const(512)),
        Knob("context_window", +1, times(8)),
    ),
    formats=("ctx_inspect.formats.aiagent",),
)
