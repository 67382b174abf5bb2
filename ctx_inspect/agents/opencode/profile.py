"""OpenCode 1.18's settings: ``packages/opencode/src/session/compaction.ts``, ``overflow.ts``,
``prompt.ts`` (checked on real runs of ``opencode-ai`` 1.18.33).

OpenCode compacts when the **last answered request's** count (``tokens.total``) reaches its usable
window, not strictly: usable is the input limit less ``compaction.reserved`` when the model has
an input limit, else the context limit less the max output. Its prune is opt-in
(``compaction.prune``) and runs once when a prompt loop ends, whatever the size.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import Field

from ctx_inspect.core.model import Pruned
from ctx_inspect.core.profiles import Profile, Tokens
from ctx_inspect.core.window import LimitParts

if TYPE_CHECKING:
    from ctx_inspect.core.session import Session


class OpenCodeProfile(Profile):
    """OpenCode's compaction and prune settings, named as in its code and configuration."""

    name: str = "opencode"
    agent: Literal["opencode"] = "opencode"
    description: str = (
        "OpenCode 1.18: compaction when the last request's tokens.total reaches usable = window "
        "− max output (or input − reserved), keeping a verbatim tail; prune opt-in"
    )
    # model.limit.context: OpenCode takes it from its model list or the config and writes it to
    # none of its files, so this default is ours, not the agent's (pass the model's own limit)
    context_window: Tokens = 200_000
    estimator: str = "opencode"  # Token.estimate: Math.round(length / 4), UTF-16 units
    output_limit: Tokens = 32_000  # model.limit.output (0 = unknown)
    output_token_max: Tokens = 32_000  # OUTPUT_TOKEN_MAX
    input_limit: Tokens | None = None  # model.limit.input
    reserved: Tokens | None = None  # compaction.reserved; None = min(20000, max output)
    compaction_buffer: Tokens = 20_000  # COMPACTION_BUFFER
    auto: bool = True  # compaction.auto
    prune: bool = False  # compaction.prune: off unless the config turns it on
    prune_protect: Tokens = 40_000  # PRUNE_PROTECT (strict >)
    prune_minimum: Tokens = 20_000  # PRUNE_MINIMUM (strict >)
    # the prune skips the newest outputs until this many user messages have been passed
    protect_last_turns: Tokens = 2
    # PRUNE_PROTECTED_TOOLS: outputs of these tools are neither counted nor pruned
    protected_tools: tuple[str, ...] = Field(default=("skill",), strict=False)
    # compaction.preserve_recent_tokens; None = min(15000, max(2000, floor(usable × 0.25)))
    preserve_recent_tokens: Tokens | None = None
    tail_turns: Tokens = 2  # compaction.tail_turns: user turns the verbatim tail may span
    preserve_recent_min: Tokens = 2_000  # MIN_PRESERVE_RECENT_TOKENS
    preserve_recent_max: Tokens = 15_000  # MAX_PRESERVE_RECENT_TOKENS
    summary_tool_output_chars: Tokens = 2_000  # tool results in the summarisation request

    unrecorded_settings: ClassVar[tuple[str, ...]] = ("output_limit", "input_limit")

    def max_output(self) -> int:
        # ProviderTransform.maxOutputTokens: min(model output limit, OUTPUT_TOKEN_MAX) || max
        return min(self.output_limit, self.output_token_max) or self.output_token_max

    def reserved_tokens(self) -> int:
        if self.reserved is not None:
            return self.reserved
        return min(self.compaction_buffer, self.max_output())

    def usable(self) -> int:
        if self.input_limit:  # JavaScript truthiness: 0 counts as unset
            return max(0, self.input_limit - self.reserved_tokens())
        return max(0, self.context_window - self.max_output())

    def limit_parts(self) -> LimitParts:
        if self.input_limit:
            return LimitParts(window=self.input_limit, buffer=self.reserved_tokens(), max_output=0)
        return LimitParts(window=self.context_window, buffer=0, max_output=self.max_output())

    def threshold(self) -> int:
        return self.usable()

    def has_threshold(self) -> bool:
        return self.context_window > 0  # isOverflow returns false when the context limit is 0

    def percent_base(self) -> int:
        return self.context_window  # the TUI shows tokens against model.limit.context

    def prune_threshold(self) -> int | None:
        return None  # prune runs at the end of every turn, whatever the size

    def preserve_recent(self) -> int:
        """The verbatim tail's budget in tokens (``preserveRecentBudget``)."""
        if self.preserve_recent_tokens is not None:
            return self.preserve_recent_tokens
        quarter = self.usable() // 4
        return min(self.preserve_recent_max, max(self.preserve_recent_min, quarter))

    def derived(self) -> dict[str, object]:
        return {
            "max_output": self.max_output(),
            "reserved_tokens": self.reserved_tokens(),
            "usable": self.usable(),
            "preserve_recent": self.preserve_recent(),
        }

    def settings_shown(self, session: Session) -> dict[str, object]:
        # OpenCode 1.18 prunes (and logs its attempts) only with compaction.prune on
        if any(True for _ in session.events_of(Pruned)):
            return {"prune": True}
        return {}
