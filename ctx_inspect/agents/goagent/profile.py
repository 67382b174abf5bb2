"""The Go agent "ai" (tiancaiamao/ai, seed 003) as a profile: its settings with their defaults
at commit 7bc6f19, from ``pkg/compact/compact.go`` (``Config``), ``pkg/agent/loop.go``,
``pkg/agent/tool_summary.go`` and ``pkg/agent/tool_output.go`` (``ToolOutputLimits``).

Each setting's comment names the agent's own field. The window is in none of the agent's files
(it comes from ``models.json``): it is 0 (unknown) until the user gives it, and the limit then
falls back to ``max_tokens``.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from ctx_inspect.core.profiles import Profile, Tokens
from ctx_inspect.core.window import LimitParts

NAME = "goagent"
# ``ReserveTokens`` when it is 0 or less (compact.go's default reserve)
DEFAULT_RESERVE = 16_384


class GoAgentProfile(Profile):
    """tiancaiamao/ai's compaction, tool-result summaries and tool-output limits."""

    name: str = NAME
    agent: Literal["goagent"] = "goagent"
    description: str = "tiancaiamao/ai (Go): compact when tokens >= window − 16384 (else 8000)"
    # the compactor's ``contextWindow`` (the model's window from models.json); 0 = unknown
    context_window: Tokens = 0
    # models.json's contextWindow: in none of the agent's files
    unrecorded_settings: ClassVar[tuple[str, ...]] = ("context_window",)
    # ``estimateMessageTokens``: ceil(UTF-8 bytes / 4) of a message's text, thinking, tool calls
    estimator: str = NAME
    # ``ReserveTokens``: kept free below the window (0 or less means the default, 16,384)
    reserve_tokens: Tokens = DEFAULT_RESERVE
    # ``MaxTokens``: the limit when the window is unknown (or not larger than the reserve)
    max_tokens: Tokens = 8_000
    # ``MaxMessages``: compact at this many messages, only when there is no token limit
    max_messages: Tokens = 50
    # ``KeepRecent``: the newest messages a compaction keeps when ``keep_recent_tokens`` is 0
    keep_recent: Tokens = 5
    # ``KeepRecentTokens``: the newest messages' estimates a compaction keeps, clamped to half
    # the limit
    keep_recent_tokens: Tokens = 20_000
    # ``ToolCallCutoff``: visible tool results beyond it are archived and summarized (0 = off)
    tool_call_cutoff: Tokens = 10
    # ``ToolSummaryStrategy``: how an archived tool result is summarized (``llm`` falls back to
    # the heuristic text when the model's summary fails; ``off``: no summaries)
    tool_summary_strategy: Literal["llm", "heuristic", "off"] = "llm"
    # ``AutoCompact``: compaction at a turn's end when the estimate reaches the limit
    auto_compact: bool = True
    # session: what the json and RPC modes run (``Session.Compact``: the session file is
    # compacted, cut at a user message after the previous compaction); in_memory: the
    # library's ``Compactor.Compact``
    compactor: Literal["session", "in_memory"] = "session"
    # loop.go: compactions (and retries) per prompt after the provider refuses a request as
    # too long
    max_compaction_recoveries: Tokens = 1
    # ``ToolOutputLimits.MaxLines``: lines of a tool output kept
    tool_output_max_lines: Tokens = 2_000
    # ``ToolOutputLimits.MaxBytes``: UTF-8 bytes of a tool output kept
    tool_output_max_bytes: Tokens = 50 * 1024
    # ``ToolOutputLimits.MaxChars``: runes of a tool output kept
    tool_output_max_chars: Tokens = 200 * 1024
    # ``ToolOutputLimits.LargeOutputThreshold``: an output of more runes is spilled to a file
    tool_output_large_threshold: Tokens = 200 * 1024
    # ``ToolOutputLimits.TruncateMode``: keep the head, or the head and the tail, of the lines
    tool_output_truncate_mode: Literal["head", "head_tail"] = "head_tail"
    # tool_summary.go: runes of a tool output given to the model for its summary
    tool_summary_input_chars: Tokens = 12_000
    # tool_summary.go: runes of the model's summary kept
    tool_summary_output_runes: Tokens = 1_200
    # tool_summary.go ``fallbackToolSummary``: runes of the heuristic excerpt (head and tail)
    tool_summary_heuristic_runes: Tokens = 800
    # compact.go ``projectMessagesForSummary``: runes of each tool result in the compaction's
    # input
    summary_tool_result_runes: Tokens = 1_800

    def effective_reserve(self) -> int:
        return self.reserve_tokens if self.reserve_tokens > 0 else DEFAULT_RESERVE

    def limit_parts(self) -> LimitParts:
        reserve = self.effective_reserve()
        if self.context_window > 0 and self.context_window - reserve > 0:
            return LimitParts(window=self.context_window, buffer=reserve, max_output=0)
        return LimitParts(window=self.max_tokens, buffer=0, max_output=0)

    def threshold(self) -> int:
        return self.limit_parts().effective  # EffectiveTokenLimit

    def has_threshold(self) -> bool:
        return self.threshold() > 0

    def limit_source(self) -> str:
        reserve = self.effective_reserve()
        if self.context_window > 0 and self.context_window - reserve > 0:
            return "context_window"
        return "max_tokens" if self.max_tokens > 0 else "none"

    def compacts_on_messages(self, message_count: int) -> bool:
        """The fallback trigger: message count, used only when there is no token limit."""
        return not self.has_threshold() and message_count >= self.max_messages

    def effective_keep_recent_tokens(self) -> int:
        if self.keep_recent_tokens <= 0:
            return 0
        half = self.threshold() // 2
        return min(self.keep_recent_tokens, half) if half > 0 else self.keep_recent_tokens

    def derived(self) -> dict[str, object]:
        return {
            "effective_reserve": self.effective_reserve(),
            "limit_source": self.limit_source(),
            "effective_keep_recent_tokens": self.effective_keep_recent_tokens(),
        }
