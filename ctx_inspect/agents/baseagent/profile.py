"""BaseAgent's settings (seed 000): the module constants of its ``src/core/compaction.py``.

The context keys of ``src/config/defaults.py`` ``CONFIG`` are not wired to the compaction code;
these constants are what the agent runs with (checked on real runs of bcb9023). We let them be
overridden to answer "what if", which the real agent does not.
"""

from __future__ import annotations

import math
from typing import Annotated, ClassVar, Literal

from pydantic import Field

from ctx_inspect.core.profiles import Profile, Ratio, Tokens
from ctx_inspect.core.window import LimitParts

# compaction.py ``OUTPUT_TOKEN_MAX``: the output reserve, usable = window - this. Its log prints
# the usable window only, so the reader adds this to give the window.
OUTPUT_TOKEN_MAX = 32_000


class BaseAgentProfile(Profile):
    name: str = "baseagent"
    agent: Literal["baseagent"] = "baseagent"
    description: str = "BaseAgent (SuperAgent): chars/4 estimate, compaction above 85% of 168k"
    # MODEL_CONTEXT_LIMIT: the model's whole window
    context_window: Tokens = 200_000
    # estimate_message_tokens: chars / 4 per part, 1,000 per image, 4 per message
    estimator: str = "baseagent"
    # OUTPUT_TOKEN_MAX: kept for the answer; usable = context_window - output_reserve
    output_reserve: Tokens = OUTPUT_TOKEN_MAX
    # AUTO_COMPACT_THRESHOLD: overflow when the estimate is strictly above this x usable
    compact_ratio: Ratio = 0.85
    # PRUNE_PROTECT: tool output becomes prunable once the running total (newest first) is
    # strictly above it
    prune_protect: Tokens = 40_000
    # PRUNE_MINIMUM: the prune runs only if strictly more than this is recoverable
    prune_minimum: Tokens = 20_000
    # prune_old_tool_outputs(protect_last_turns=2): user turns whose tool outputs are never pruned
    protect_last_turns: Tokens = 2
    # run_compaction(max_tokens=4096): the summary's budget
    summary_max_tokens: Tokens = 4096
    # CONFIG["max_output_tokens"]: a tool output above it is middle-out truncated as it arrives
    tool_output_max_tokens: Tokens = 2500
    # truncate.py APPROX_BYTES_PER_TOKEN: the tool-output limit is in UTF-8 bytes / this
    tool_output_bytes_per_token: Annotated[int, Field(gt=0)] = 4
    # CONFIG["max_iterations"]: loop iterations (model requests) before the agent stops
    max_iterations: Tokens = 200

    threshold_strict: ClassVar[bool] = True

    def usable(self) -> int:
        return max(0, self.context_window - self.output_reserve)

    def limit_parts(self) -> LimitParts:
        return LimitParts(window=self.context_window, buffer=0, max_output=self.output_reserve)

    def threshold(self) -> int:
        # is_overflow: total > usable * 0.85, computed in floating point like the agent.
        return math.floor(self.usable() * self.compact_ratio)

    def threshold_formula(self) -> str:
        return (
            f"{self.compact_ratio} x (window {self.context_window:,} - output reserve "
            f"{self.output_reserve:,} = {self.usable():,}), acting above it"
        )

    def derived(self) -> dict[str, object]:
        return {"usable": self.usable(), "tool_output_max_bytes": self.tool_output_max_bytes()}

    def tool_output_max_bytes(self) -> int:
        return self.tool_output_max_tokens * self.tool_output_bytes_per_token
