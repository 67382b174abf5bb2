"""netdata ai-agent's settings (seed 002, ``src/context-guard.ts``), with the agent's defaults.

ai-agent neither prunes nor compacts: its ``ContextGuard`` projects the next request against a
limit per target (``window − buffer − max output``) and forces a final turn when nothing fits
(``guard.py`` holds the arithmetic, ``policy.py`` the decisions). The profile is that limit, the
agent's tokenizer choice, and the size cap its tools put on an output.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, field_validator

from ctx_inspect.core.profiles import Profile, Tokens
from ctx_inspect.core.window import LimitParts

# ContextGuard's defaults when neither the agent file nor the model gives a window or a buffer
DEFAULT_CONTEXT_WINDOW_TOKENS = 131_072
DEFAULT_CONTEXT_BUFFER_TOKENS = 8_192


class AiAgentProfile(Profile):
    """The guard's limit of one target (``max(0, window − buffer − max output)``), acting when
    the projection is above it (``limit > 0 && projected > limit``)."""

    name: str = "aiagent"
    agent: Literal["aiagent"] = "aiagent"
    description: str = "netdata ai-agent: guard blocks when projected > window − buffer − output"
    # the model's window (``contextWindow`` per model in ``.ai-agent.json``), else the guard's
    # ``DEFAULT_CONTEXT_WINDOW_TOKENS``
    context_window: Tokens = DEFAULT_CONTEXT_WINDOW_TOKENS
    estimator: str = "aiagent"  # tokenizer-registry.ts + ContextGuard.estimateTokens
    # ``contextWindowBufferTokens``: kept free below the window (DEFAULT_CONTEXT_BUFFER_TOKENS)
    buffer_tokens: Tokens = DEFAULT_CONTEXT_BUFFER_TOKENS
    # ``maxOutputTokens``: the reply's reserve; None = floor(window / 4) (computeMaxOutputTokens)
    max_output_tokens: Tokens | None = None
    # estimateToolSchemaTokens: the tool schemas' estimate is multiplied by this, rounded up
    tool_schema_factor: Annotated[float, Field(gt=0)] = 2.09
    # ``tokenizer``: "approximate" (ceil(length / 4)) or "tiktoken:<encoding or model>"
    tokenizer: str = "approximate"
    # ``defaults.toolResponseMaxBytes``: a tool output is cut to this many UTF-8 bytes before
    # the guard reserves its tokens (0 = no cap)
    tool_response_max_bytes: Tokens = 12_288

    threshold_strict: ClassVar[bool] = True

    @field_validator("tokenizer")
    @classmethod
    def _tokenizer(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("tokenizer must not be empty (use 'approximate')")
        return value

    def measure_basis(self) -> str:
        return "guard"  # the projection its guard logged at the request's preflight

    def max_output(self) -> int:
        if self.max_output_tokens is not None:
            return self.max_output_tokens
        return max(0, self.context_window // 4)

    def limit(self) -> int:
        return self.limit_parts().effective

    def limit_parts(self) -> LimitParts:
        return LimitParts(
            window=self.context_window, buffer=self.buffer_tokens, max_output=self.max_output()
        )

    def threshold(self) -> int:
        return self.limit()

    def has_threshold(self) -> bool:
        return self.limit() > 0  # a zero limit never blocks

    def blocked(self, projected: int) -> bool:
        return self.over_threshold(projected)

    def percent_base(self) -> int:
        return self.context_window

    def percent_of_limit(self, tokens: int) -> float:
        # "LLM request prepared [... = P% of W]": (expected + buffer + max output) / window.
        if self.context_window <= 0:
            return 0.0
        return 100.0 * (tokens + self.buffer_tokens + self.max_output()) / self.context_window

    def uses_counter(self) -> bool:
        return self.tokenizer.strip().lower() != "approximate"

    def counter_encoding(self) -> str | None:
        if self.encoding is not None:
            return self.encoding
        value = self.tokenizer.strip()
        if value.lower().startswith("tiktoken:"):
            return value[len("tiktoken:") :].strip() or None
        return None

    def derived(self) -> dict[str, object]:
        return {"max_output": self.max_output(), "limit": self.limit()}
