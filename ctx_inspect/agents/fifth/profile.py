"""Fifth's context manager settings (seed 004, ``examples/context-manager/main.fs``).

Fifth keeps messages in SQLite at four levels (system 1, user and assistant 3, tool output 4)
with a budget per level; its total counts levels 1 to 3 only, and it compresses when the
integer capacity ``total × 100 / total-budget`` is above the trigger.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, model_validator

from ctx_inspect.core.estimate import ceil_div
from ctx_inspect.core.profiles import Profile, Tokens
from ctx_inspect.core.window import LimitParts

TOTAL_BUDGET = 16_000  # total-budget
LEVEL_BUDGETS: Mapping[int, int] = types.MappingProxyType({1: 2_000, 2: 4_000, 3: 8_000})
COUNTED_LEVELS: tuple[int, ...] = (1, 2, 3)  # level 4 (tool output) is stored, never counted


class FifthProfile(Profile):
    """Fifth's budgets and its compression: ``ctx-auto-compress`` compresses level 3 (then 2)
    when the capacity is above ``capacity_trigger``; nothing in Fifth calls it."""

    name: str = "fifth"
    agent: Literal["fifth"] = "fifth"
    description: str = "Fifth (Forth) context manager: level budgets, compress above 80% of 16k"
    context_window: Tokens = TOTAL_BUDGET  # always equal to total_budget
    estimator: str = "fifth"  # estimate-tokens / count-tokens
    encoding: str | None = "cl100k_base"  # count-tokens-exact uses tiktoken cl100k_base
    level1_budget: Tokens = LEVEL_BUDGETS[1]  # level1-budget: permanent (system)
    level2_budget: Tokens = LEVEL_BUDGETS[2]  # level2-budget: session (summaries, decisions)
    level3_budget: Tokens = LEVEL_BUDGETS[3]  # level3-budget: working (user, assistant)
    total_budget: Tokens = TOTAL_BUDGET  # total-budget: what the capacity is a percentage of
    # capacity-trigger: ctx-auto-compress acts when the capacity is above it (percent, strict >)
    capacity_trigger: Annotated[int, Field(ge=0, le=100)] = 80
    # age-threshold: only messages older than this (in whole minutes) are compressed
    age_threshold_seconds: Tokens = 300
    compress_batch: Tokens = 10  # LIMIT 10 in ctx-get-old-messages: messages per summary
    summary_max_tokens: Tokens = 500  # the summariser's max_tokens (claude-3-haiku)
    exact_count_min_bytes: Tokens = 1_000  # count-tokens: tiktoken only above this size
    auto_compress: bool = False  # ctx-auto-compress exists but nothing calls it

    LEVELS: ClassVar[Mapping[str, int]] = types.MappingProxyType(
        {"system": 1, "developer": 1, "user": 3, "assistant": 3, "tool": 4}
    )
    COUNTED_LEVELS: ClassVar[tuple[int, ...]] = COUNTED_LEVELS

    @model_validator(mode="before")
    @classmethod
    def _window_is_total(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        window, total = data.get("context_window"), data.get("total_budget")
        if window is not None and total is not None and window != total:
            raise ValueError(
                "context_window and total_budget are the same figure for fifth; set one"
            )
        if window is not None and total is None:
            return {**data, "total_budget": window}
        if total is not None and window is None:
            return {**data, "context_window": total}
        return data

    def limit_parts(self) -> LimitParts:
        return LimitParts(window=self.total_budget, buffer=0, max_output=0)

    def threshold(self) -> int:
        # ctx-capacity = total × 100 / total-budget (integer division) > capacity-trigger,
        # i.e. capacity >= trigger + 1: tokens >= ceil((trigger + 1) × budget / 100).
        return ceil_div((self.capacity_trigger + 1) * self.total_budget, 100)

    def has_threshold(self) -> bool:
        return self.total_budget > 0

    def capacity(self, tokens: int) -> int:
        """The integer percentage ``stats`` prints and ``ctx-auto-compress`` tests."""
        return tokens * 100 // self.total_budget if self.total_budget > 0 else 0

    def level_for_role(self, role: str) -> int:
        return self.LEVELS.get(str(role), 3)

    def counts_toward_capacity(self, role: str) -> bool:
        """Level-4 tool output is stored but never counted in the total."""
        return self.level_for_role(role) in self.COUNTED_LEVELS

    def level_budgets(self) -> dict[int, int]:
        return {1: self.level1_budget, 2: self.level2_budget, 3: self.level3_budget}

    def derived(self) -> dict[str, object]:
        return {"capacity_at_threshold": self.capacity(self.threshold())}
