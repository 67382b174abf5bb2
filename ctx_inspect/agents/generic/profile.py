"""The ``generic`` profile: ctx-inspect's neutral baseline for plain chat arrays and agents we
do not know. No agent behind it: its settings are ours."""

from __future__ import annotations

import math
from typing import ClassVar, Literal

from ctx_inspect.core.profiles import Profile, Ratio, Tokens, ceil_ratio
from ctx_inspect.core.window import LimitParts


class GenericProfile(Profile):
    name: str = "generic"
    agent: Literal["generic"] = "generic"
    description: str = "Plain chat arrays, unknown agents: warn at 70%, overflow above 90%"
    # a common window
    context_window: Tokens = 128_000
    # no agent's arithmetic: our tokenizer's count of each message, plus 3
    estimator: str = "exact"
    # kept for the answer: subtracted from the window when set
    max_output_tokens: Tokens = 0
    # the threshold, of the effective window (acting strictly above it)
    compact_ratio: Ratio = 0.90
    # where the warning zone starts, of the effective window ("safe below ~70%")
    warning_window_ratio: Ratio = 0.70

    threshold_strict: ClassVar[bool] = True
    warning_field: ClassVar[str] = "warning_window_ratio"

    def limit_parts(self) -> LimitParts:
        return LimitParts(window=self.context_window, buffer=0, max_output=self.max_output_tokens)

    def threshold(self) -> int:
        return math.floor(self.limit_parts().effective * self.compact_ratio)

    def warning_threshold(self) -> int:
        return min(
            ceil_ratio(self.warning_window_ratio, self.limit_parts().effective), self.threshold()
        )
