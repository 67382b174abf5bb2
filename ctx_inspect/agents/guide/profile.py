"""The settings of seed 001's generic recipe (``astuces/03-context-management.md`` in the
BaseAgent repository). No real tool runs it; the names are the recipe's constants."""

from __future__ import annotations

import math
from typing import ClassVar, Literal

from pydantic import model_validator

from ctx_inspect.core.profiles import Profile, Ratio, Tokens
from ctx_inspect.core.window import LimitParts


class GuideProfile(Profile):
    name: str = "guide"
    agent: Literal["guide"] = "guide"
    description: str = "The BaseAgent guide's generic recipe: prune at 70%, compact at 85% of 180k"
    # MAX_CONTEXT_TOKENS: the window the recipe measures against
    context_window: Tokens = 180_000
    # its estimate_tokens: len // 4 + 1 per non-empty content part
    estimator: str = "guide"
    # PRUNE_THRESHOLD: above this x window (strictly), stage 1 prunes all but the last 5 outputs
    prune_ratio: Ratio = 0.70
    # COMPACT_THRESHOLD: above this x window, stage 2 keeps the last 2, then AI compaction
    compact_ratio: Ratio = 0.85
    # CRITICAL_THRESHOLD: declared by the recipe, never used
    critical_ratio: Ratio = 0.95
    # prune_tool_outputs(keep_last=5): tool outputs stage 1 leaves whole
    keep_last_first: Tokens = 5
    # prune_tool_outputs(keep_last=2): tool outputs stage 2 leaves whole
    keep_last_second: Tokens = 2
    # compact_messages: system + summary + the last 4 messages
    keep_recent_messages: Tokens = 4
    # middle_out_truncate(max_bytes=50000): a tool output's limit, in characters
    truncate_max_bytes: Tokens = 50_000

    threshold_strict: ClassVar[bool] = True
    warning_field: ClassVar[str] = "prune_ratio"

    @model_validator(mode="after")
    def _ordered(self) -> GuideProfile:
        if not self.prune_ratio <= self.compact_ratio <= self.critical_ratio:
            raise ValueError("prune_ratio <= compact_ratio <= critical_ratio must hold")
        return self

    def limit_parts(self) -> LimitParts:
        return LimitParts(window=self.context_window, buffer=0, max_output=0)

    def threshold(self) -> int:
        return math.floor(self.context_window * self.compact_ratio)  # current > max × 0.85

    def prune_above(self) -> int:
        """Stage 1 (prune, keep 5) runs when tokens > this: ``current > max × 0.70``."""
        return math.floor(self.context_window * self.prune_ratio)

    def prune_threshold(self) -> int | None:
        return self.prune_above()

    def critical_above(self) -> int:
        return math.floor(self.context_window * self.critical_ratio)

    def warning_threshold(self) -> int:
        # The first count at which stage 1 (prune, keep 5) fires: strictly above 70%.
        # In floating point 180000 × 0.7 is 125999.99999999999, so that is 126,000.
        return self.prune_above() + 1

    def derived(self) -> dict[str, object]:
        return {"prune_above": self.prune_above(), "critical_above": self.critical_above()}
