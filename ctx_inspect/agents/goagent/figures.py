"""The Go agent's own figure, its tool-output notices and the provider's refusals, as its three
readers give them.

At each turn's end (and before an auto-compaction) the agent compares ``EstimateContextTokens``
with its limit: the last usage total of its list plus bytes / 4 of the messages after it
(``AgentFigures`` keeps what each message adds, as the readers see them enter the list). A tool
result with the agent's truncation notice is a ``ToolOutputChanged``; a provider error the
agent recognises as a context-length error is a ``RequestRejected``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from ctx_inspect.agents.goagent.estimate import message_tokens
from ctx_inspect.agents.goagent.tool_output import LINES_MARKER, recorded_cut
from ctx_inspect.core.estimate import utf8_len
from ctx_inspect.core.model import (
    Message,
    MessageKind,
    PartType,
    RequestRejected,
    Role,
    ToolOutputAction,
    ToolOutputChanged,
    Usage,
)

FIGURE_LABEL = "agent: last usage total + later messages, bytes/4"
# llm/errors.go looksLikeContextLengthExceeded
CONTEXT_NEEDLES = (
    "context length",
    "context window",
    "contextwindow",
    "maximum context",
    "max context",
    "context limit",
    "too many tokens",
    "maximum number of tokens",
    "prompt is too long",
    "token limit exceeded",
    "contextlength",
    "context_window_exceeded",
    "contextwindowexceeded",
    "finishreasonlength",
    "context_length_exceeded",
)
_PROVIDER_LIMIT = re.compile(r"maximum context length is (\d[\d,]*) tokens", re.IGNORECASE)
_PROVIDER_TOKENS = re.compile(
    r"(?:resulted in|requested|prompt is too long:?) (\d[\d,]*) tokens", re.IGNORECASE
)
RECOVERY = "context_limit_recovery"
UNRECORDED_ATTEMPTS = (
    "the session file keeps the compactions that succeeded: an attempt that failed here "
    "would not show (the stdout and the log do)"
)


def usage_total(usage: Usage | None) -> int:
    """``usageTotalTokens``: the total, else the sum of its parts."""
    if usage is None:
        return 0
    if usage.total:
        return usage.total
    return usage.input + usage.output + usage.cache_read + usage.cache_write


class AgentFigures:
    """What ``EstimateContextTokens`` needs of each message in the agent's list: the usage
    total of an assistant message it can anchor on (0 for any other message), the message's
    own estimate (``estimateMessageTokens``: its bytes / 4, rounded up) and whether a
    compaction can cut at it (a user message or a summary)."""

    def __init__(self) -> None:
        self.of: dict[str, tuple[int, int, bool]] = {}

    def note(self, message: Message, usage: Usage | None = None) -> None:
        total = usage_total(usage) if message.role is Role.ASSISTANT and message.visible else 0
        cuttable = message.role is Role.USER and message.kind in (
            MessageKind.MESSAGE,
            MessageKind.SUMMARY,
        )
        self.of[message.id] = (total, message_tokens(message), cuttable)

    def figure(self, live: Sequence[str], key: Callable[[str], str] = str) -> int | None:
        """The agent's figure over ``live`` (the agent's list, oldest first): the last usage
        total plus the estimates of the messages after it, else every message's estimate."""
        trailing = 0
        of = self.of
        for mid in reversed(live):
            total, estimate, _ = of.get(key(mid), (0, 0, False))
            if total > 0:
                return total + trailing
            trailing += estimate
        return trailing if live else None

    def cuttable(self, mid: str) -> bool:
        return self.of.get(mid, (0, 0, False))[2]


def kept_block(live: Sequence[str], count: int, cuttable: Callable[[str], bool]) -> list[str]:
    """The messages a session compaction kept, ``count`` of them: the session writer keeps
    a (possibly lagging) prefix of the agent's list, and the compaction keeps the part of it
    from a message it can cut at; the newest such block of ``count`` messages (what follows it
    in the agent's list had not reached the session yet, and is lost)."""
    if count <= 0:
        return []
    if count >= len(live):
        return list(live)
    for start in range(len(live) - count, -1, -1):
        if cuttable(live[start]):
            return list(live[start : start + count])
    return list(live[len(live) - count :])


def tool_output_change(message: Message, timestamp: str | None) -> ToolOutputChanged | None:
    """What the agent's tool-output limits did to a tool result, from the notice it wrote."""
    text = "".join(p.text for p in message.parts if p.type in (PartType.TEXT, PartType.TOOL_RESULT))
    cut = recorded_cut(text)
    if cut is None and LINES_MARKER.search(text) is None:
        return None
    return ToolOutputChanged(
        action=ToolOutputAction.SPILLED if cut and cut.spilled else ToolOutputAction.TRUNCATED,
        tool=message.tool_name,
        message_id=message.id,
        tokens=cut.total_tokens if cut else None,
        tokens_after=message_tokens(message),
        original_bytes=cut.total_bytes if cut and not cut.spilled else None,
        final_bytes=utf8_len(text),
        replacement=cut.spill_path if cut else None,
        timestamp=timestamp,
    )


def _figure(text: str | None) -> int | None:
    return int(text.replace(",", "")) if text else None


def provider_refusal(error: str, timestamp: str | None = None) -> RequestRejected | None:
    """A provider error that says the prompt did not fit, as the agent recognises it."""
    lowered = error.lower()
    if not any(needle in lowered for needle in CONTEXT_NEEDLES):
        return None
    limit = _PROVIDER_LIMIT.search(error)
    tokens = _PROVIDER_TOKENS.search(error)
    return RequestRejected(
        reason=error[:300],
        code="context_length_exceeded",
        tokens=_figure(tokens[1]) if tokens else None,
        limit=_figure(limit[1]) if limit else None,
        timestamp=timestamp,
    )
