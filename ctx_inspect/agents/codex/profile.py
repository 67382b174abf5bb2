"""Codex CLI's settings (transcripts.md 2.3; the 0.169 rules from codex-rs), under the names of
its own ``config.toml``."""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, model_validator

from ctx_inspect.core.profiles import Profile, Tokens
from ctx_inspect.core.window import LimitParts


class CodexProfile(Profile):
    """Codex's settings under the names of its own ``config.toml`` (``model_context_window``,
    ``model_auto_compact_token_limit``); ``auto_compact_token_limit`` is still accepted."""

    name: str = "codex"
    agent: Literal["codex"] = "codex"
    description: str = (
        "OpenAI Codex CLI: 258,400 effective window, auto-compaction at 90% of 272,000"
    )
    # what token_count reports as model_context_window: effective_window_percent of the model's
    # window (95% of 272,000)
    context_window: Tokens = 258_400
    # Codex's estimate of an item: its serialized bytes / 4, rounded up
    estimator: str = "codex"
    # GPT-5-family models: the tokenizer of exact counts
    encoding: str | None = "o200k_base"
    # effective_context_window_percent: the share of the model's window Codex uses and reports
    effective_window_percent: Annotated[int, Field(gt=0, le=100)] = 95
    # BASELINE_TOKENS: what the "% context left" figure leaves out of both sides
    baseline_tokens: Tokens = 12_000
    # config.toml's model_context_window (the model's whole window); None = from context_window
    model_context_window: Tokens | None = None
    # config.toml's model_auto_compact_token_limit; None (or 0) = 90% of the model's window
    model_auto_compact_token_limit: int | None = None

    setting_aliases: ClassVar[Mapping[str, str]] = types.MappingProxyType(
        {"auto_compact_token_limit": "model_auto_compact_token_limit"}
    )

    @model_validator(mode="before")
    @classmethod
    def _window_from_config(cls, data: Any) -> Any:
        """``model_context_window`` is the configured window; Codex reports and uses
        ``effective_window_percent`` of it (``context_window``)."""
        if not isinstance(data, dict) or data.get("model_context_window") is None:
            return data
        configured = data["model_context_window"]
        percent = data.get("effective_window_percent", 95)
        if type(configured) is not int or type(percent) is not int:
            return data  # the field validators say what is wrong
        effective = configured * percent // 100
        window = data.get("context_window")
        if window is not None and window != effective:
            raise ValueError(
                f"context_window {window} is not {percent}% of model_context_window "
                f"{configured} ({effective}); set one of them"
            )
        return {**data, "context_window": effective}

    def measure_basis(self) -> str:
        return "anchor"  # the latest total_tokens plus Codex's estimate of what came since

    def nominal_window(self) -> int:
        """The model's whole window, before effective_window_percent."""
        if self.model_context_window is not None:
            return self.model_context_window
        return self.context_window * 100 // self.effective_window_percent

    def limit_parts(self) -> LimitParts:
        return LimitParts(window=self.context_window, buffer=0, max_output=0)

    def threshold(self) -> int:
        """``model_auto_compact_token_limit``, never above 90% of the model's window (a limit
        of 0 or less counts as unset), as Codex's ``auto_compact_token_limit()``."""
        default = self.nominal_window() * 9 // 10
        limit = self.model_auto_compact_token_limit
        if limit is None or limit <= 0:
            return default
        return min(limit, default)

    def percent_left(self, tokens: int) -> float:
        """Codex's "% context left" (unrounded; the TUI rounds it to an integer)."""
        effective = self.context_window - self.baseline_tokens
        if effective <= 0:
            return 0.0
        used = max(0, tokens - self.baseline_tokens)
        return 100.0 * max(0, effective - used) / effective

    def percent_base(self) -> int:
        return self.context_window - self.baseline_tokens

    def percent_of_limit(self, tokens: int) -> float:
        return 100.0 - self.percent_left(tokens)

    def derived(self) -> dict[str, object]:
        return {"nominal_window": self.nominal_window()}
