"""Claude Code's profile: its window, output reserve and auto-compact rules, by version.

The rules are data (``CLAUDE_CODE_AUTOCOMPACT``, one per minor version; transcripts.md 1.7 and
the real runs of 2.1.329); the profile picks one by its ``version``, which the loader takes from
the session file unless the user sets it. The sources of every default are in this package's
README.md.
"""

from __future__ import annotations

import math
import re
import types
from collections.abc import Mapping
from typing import Annotated, ClassVar, Literal, NamedTuple

from pydantic import Field, field_validator

from ctx_inspect.core.profiles import Profile, Tokens
from ctx_inspect.core.window import LimitParts

WINDOW_1M = 1_000_000  # the window of a model whose name ends in [1m]
WINDOW = 200_000  # the window of every other model


class AutocompactRule(NamedTuple):
    """How one Claude Code version decides to compact."""

    buffer_tokens: int  # subtracted from the base
    base_excludes_output: bool  # base = window − min(max output, cap), else the whole window
    # the figure compared: the latest response's usage (prompt + output), plus (True) the
    # agent's estimate of every message after that response's first record
    counts_since_answer: bool
    # from this patch on, an unset auto-compact window ("auto") means no threshold at all: the
    # agent sends, the provider refuses a prompt that is too long, and it compacts then
    auto_window_reactive_from: int | None
    reactive_compaction: bool  # compacts after the provider refuses a prompt as too long
    source: str


CLAUDE_CODE_AUTOCOMPACT: Mapping[str, AutocompactRule] = types.MappingProxyType(
    {
        "2.1": AutocompactRule(
            13_000,
            True,
            True,
            120,
            True,
            "getAutoCompactThreshold (anthropics/claude-code#31806): window − min(max output, "
            "20000) − 13000, window = min(model window, --autocompact / autoCompactWindow / "
            "CLAUDE_CODE_AUTO_COMPACT_WINDOW); 2.1.329 with the window unset compacts only after "
            "a 'prompt is too long' refusal (real runs); 'auto' mode from 2.1.120 (changelog)",
        ),
        "2.0": AutocompactRule(
            45_000,
            False,
            False,
            None,
            False,
            "/context showed an 'Autocompact buffer' of ~45k (22.5% of 200k) above the "
            "threshold; a 2.0.64 session auto-compacted at preTokens 156,953, the last "
            "response's prompt + output (155,459 + 1,494)",
        ),
    }
)

_VERSION = re.compile(r"^\s*(\d+)\.(\d+)(?:\.(\d+))?")


def claude_code_rule_key(version: str) -> str | None:
    """The ``CLAUDE_CODE_AUTOCOMPACT`` key for a Claude Code version, None when none applies."""
    match = _VERSION.match(version)
    if match is None:
        return None
    key = f"{match.group(1)}.{match.group(2)}"
    return key if key in CLAUDE_CODE_AUTOCOMPACT else None


AutocompactWindow = Annotated[int, Field(gt=0)] | Literal["auto"]


class ClaudeCodeProfile(Profile):
    """Claude Code, by version (the session's own ``version`` when the file records it).

    With an auto-compact window (``--autocompact``, ``autoCompactWindow``,
    ``CLAUDE_CODE_AUTO_COMPACT_WINDOW``; ``autocompact_window`` here) Claude Code checks before
    every request: the figure (the latest usage plus its estimate since) against
    ``min(window, autocompact_window) − min(max output, 20,000) − 13,000``. With the window
    unset ("auto"), 2.1.120 and later have no threshold: a request the provider refuses as too
    long (more than the model's window) is compacted after the refusal. What ``limit_parts``
    composes is always the limit acted on: window − output reserve − buffer = threshold.
    """

    name: str = "claude-code"
    agent: Literal["claude-code"] = "claude-code"
    description: str = (
        "Claude Code: auto-compact at window − output reserve − buffer, or after the "
        "provider refuses a prompt that is too long (by version and auto-compact window)"
    )
    # the model's window: 1,000,000 for [1m] models, else the stream's
    # modelUsage.contextWindow when a file gives it
    context_window: Tokens = WINDOW
    # roughTokenCountEstimation: Math.round(length / 4) per content block (``estimate.py``)
    estimator: str = "claude-code"
    # the model's max output: the api-request lines' max_tokens, the stream's
    # modelUsage.maxOutputTokens
    max_output_tokens: Tokens = 32_000
    output_reserve_cap: Tokens = 20_000  # min(max output, 20000) is reserved
    # the version that picks the rule (CLAUDE_CODE_AUTOCOMPACT): the file's ``version``
    version: str = "2.1"
    # --autocompact N, autoCompactWindow, CLAUDE_CODE_AUTO_COMPACT_WINDOW; "auto" = unset
    autocompact_window: AutocompactWindow = "auto"
    autocompact_buffer_tokens: Tokens | None = None  # None = the rule's buffer, by version
    # CLAUDE_AUTOCOMPACT_PCT_OVERRIDE, a percent of the base; it can only lower the threshold
    autocompact_pct_override: Annotated[float, Field(gt=0, le=100)] | None = None
    warning_buffer_tokens: Tokens = 20_000  # the "context low" warning, below the threshold
    # time-based micro-compaction: behind a server-side flag that reports of Claude Code's
    # source give as off by default; no real session shows one
    time_based_microcompact: bool = False

    warning_field: ClassVar[str] = "warning_buffer_tokens"
    # no Claude Code file records these: a replay says it assumed them
    unrecorded_settings: ClassVar[tuple[str, ...]] = (
        "autocompact_window",
        "autocompact_pct_override",
    )

    @field_validator("version")
    @classmethod
    def _known_version(cls, value: str) -> str:
        if claude_code_rule_key(value) is None:
            known = ", ".join(CLAUDE_CODE_AUTOCOMPACT)
            raise ValueError(f"no auto-compact rule for version {value!r}; known: {known}")
        return value

    @staticmethod
    def window_for_model(model: str | None) -> int:
        return WINDOW_1M if model and "[1m]" in model.lower() else WINDOW

    def rule(self) -> AutocompactRule:
        key = claude_code_rule_key(self.version)
        assert key is not None  # checked by the validator
        return CLAUDE_CODE_AUTOCOMPACT[key]

    def patch(self) -> int:
        match = _VERSION.match(self.version)
        return int(match.group(3)) if match and match.group(3) else 0

    def proactive(self) -> bool:
        """Whether this version, so configured, compacts at a threshold before a request (else
        only after the provider refuses one)."""
        start = self.rule().auto_window_reactive_from
        return self.autocompact_window != "auto" or start is None or self.patch() < start

    def compact_window(self) -> int:
        """The window the threshold is computed on: the model's, or the auto-compact window
        when that is smaller."""
        window = self.autocompact_window
        return self.context_window if window == "auto" else min(self.context_window, window)

    def output_reserve(self) -> int:
        return min(self.max_output_tokens, self.output_reserve_cap)

    def hard_limit(self) -> int:
        """Where Claude Code stops taking input: the model's window less the output reserve."""
        return max(0, self.context_window - self.output_reserve())

    def provider_limit(self) -> int:
        """The largest prompt the provider accepts: the model's window."""
        return self.context_window

    def autocompact_buffer(self) -> int:
        if self.autocompact_buffer_tokens is not None:
            return self.autocompact_buffer_tokens
        return self.rule().buffer_tokens

    def autocompact_base(self) -> int:
        window = self.compact_window()
        if not self.rule().base_excludes_output:
            return window
        return max(0, window - self.output_reserve())

    def autocompact_threshold(self) -> int:
        base = self.autocompact_base()
        default = max(0, base - self.autocompact_buffer())
        if self.autocompact_pct_override is None:
            return default
        # CLAUDE_AUTOCOMPACT_PCT_OVERRIDE: Math.min(floor(base × pct / 100), default)
        return min(math.floor(base * (self.autocompact_pct_override / 100)), default)

    def limit_parts(self) -> LimitParts:
        if not self.proactive():
            return LimitParts(window=self.provider_limit(), buffer=0, max_output=0)
        window = self.compact_window()
        threshold = self.autocompact_threshold()
        reserve = self.output_reserve() if self.rule().base_excludes_output else 0
        reserve = min(reserve, window)
        return LimitParts(window=window, buffer=window - reserve - threshold, max_output=reserve)

    def threshold(self) -> int:
        return self.autocompact_threshold() if self.proactive() else self.provider_limit()

    def strict_threshold(self) -> bool:
        return not self.proactive()  # the provider refuses "N tokens > window maximum"

    def measure_basis(self) -> str:
        return "usage+estimate" if self.rule().counts_since_answer else "usage"

    def warning_threshold(self) -> int:
        return max(0, self.threshold() - self.warning_buffer_tokens)

    def percent_base(self) -> int:
        return self.context_window  # /context and the statusline: tokens / window

    def derived(self) -> dict[str, object]:
        return {
            "mode": "threshold" if self.proactive() else "reactive (after a refusal)",
            "output_reserve": self.output_reserve(),
            "hard_limit": self.hard_limit(),
            "provider_limit": self.provider_limit(),
            "autocompact_window_used": self.compact_window(),
            "autocompact_buffer": self.autocompact_buffer(),
            "autocompact_base": self.autocompact_base(),
            "autocompact_threshold": self.autocompact_threshold(),
            "measure": self.measure_basis(),
            "autocompact_rule": self.rule().source,
        }
