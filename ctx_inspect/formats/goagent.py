"""The Go agent "ai" (tiancaiamao/ai, seed 003): its event stream, its log file, its session tree.

``goagent-events`` reads the stdout of ``--mode json`` (and the RPC mode): the session header
line, then one ``AgentEvent`` per line (``type``, ``eventAt`` in UnixNano, ``message``,
``toolResults``, ``toolCallId``, ``toolName``, ``args``, ``result``, ``isError``,
``assistantMessageEvent``, ``compaction``). A message enters the context once: at its
``message_end`` (user and assistant messages; an assistant message is a model response, so a
``RequestSent`` and its ``usage`` come first) or, for a tool result, at ``tool_execution_end``
(the agent's own session writer appends exactly these). Starts, updates, deltas and turn / agent
boundaries become short ``LogLine`` events. A ``compaction_start`` and its ``compaction_end``
make one ``Compacted``: ``before`` / ``after`` are message COUNTS and fields are ``omitempty``
(an absent ``after`` is 0, an absent ``auto`` false); the trigger is the event's ``trigger``
(``context_limit_recovery`` on the recovery path) or ``auto``; an ``error`` means it failed.
The event names no messages: the new list is a summary and what the session had written from a
user message on, so the retained messages are the newest ``after - 1`` that start at one (what
followed them had not reached the session, and the agent's list lost it). A start whose end
never came is closed as failed by the next start (at the end of the input it may still be
running, and is left as its ``LogLine``). An auto-compaction's ``tokens_before`` is the figure
the agent compared with its limit (``EstimateContextTokens``: the last usage total plus
bytes / 4 of the messages after it), which is also given at every turn's end as a
``ContextMeasured``. A context-limit recovery stands for a request the provider refused (a
``RequestSent`` and a ``RequestRejected``), as does a turn that ended without an answer. A
tool result with the agent's truncation notice is a ``ToolOutputChanged``. HEAD's fields
``type`` (``major`` / ``mini``), ``summary``, ``tokens_before``, ``tokens_after`` are read when
present: a major summary becomes a SUMMARY message; a ``mini`` compaction only truncates tool
outputs, so it retains every message.

``goagent-log`` reads ``~/.ai/ai-<pid>.log``: ``[LEVEL] 2006-01-02T15:04:05.999 file.go:N
"<prefix><message>" key=value ...`` (values ``%q``-quoted when they hold spaces, quotes or
backslashes; no time zone). The compaction messages of one attempt (``[Agent] Auto-compacting``,
``[Compact] Compressing messages``, ``[Compact] Generated summary``, ``[Compact] Compressed to
messages``, ``[Agent] Auto-compact successful`` / ``failed``, ``Compaction recovery failed``)
make one ``Compacted`` at the line that ends it; an attempt that does not start with
``Auto-compacting`` came from the recovery path (``context_limit_recovery``; a manual compact
through RPC looks the same in the log). With ``--debug``, ``[Loop] Sending messages to LLM`` is
a request and the loop's own ``compaction_start`` / ``compaction_end`` events (``[Agent] Got
event``) a recovery, which stands for a refused request; ``Error streaming response`` with a
context-length error is a refusal with the provider's figures. Every other line, and each line
inside an attempt, is a ``LogLine``.

``goagent-session`` reads the session tree ``~/.ai/sessions/--<cwd>--/<id>.jsonl`` (HEAD:
``.../<uuid>/messages.jsonl``): a header ``{"type": "session", "version": 1, "id", ...}``, then
entries ``message`` / ``compaction`` / ``branch_summary`` / ``session_info`` whose ``id`` and
``parentId`` form a tree. The agent's context is the path from the newest leaf (the last entry);
read incrementally, each entry whose parent is not the previous entry switches branch: a
``ContextReset`` (reason ``branch``) back to the newest message both branches share, then copies
(ids ``<entry>@<n>``) of the target branch's messages that were not in context. A ``compaction``
entry is a ``Compacted`` (``tokensBefore``; the entries from ``firstKeptEntryId`` on the path
are retained; its trigger is not recorded) and the summary message the agent replays; a
``branch_summary`` is a summary message too. The writer is asynchronous: a compaction entry
waits for the message entries written after it that the agent made before it (by their
``message.timestamp``), which it then leaves out, as the agent's list did. The agent's figure is
given when each turn ends, as for the stdout. The legacy layout (one AgentMessage per line, no
header) is read as a linear chain. A ``--<cwd>--`` folder (or ``~/.ai/sessions``) opens each
of its session files.

Messages (all three formats): role ``user`` / ``assistant`` / ``toolResult`` (TOOL, kind
TOOL_RESULT), blocks ``text`` / ``image`` / ``toolCall`` / ``thinking``, ``metadata``
(``agentVisible: false`` means not sent to the model; ``kind`` ``tool_result_archived`` is
ARCHIVED and hidden, ``tool_summary`` is TOOL_SUMMARY), assistant ``usage`` (``input`` without
the cache, ``output``, ``cacheRead``, ``cacheWrite``, ``totalTokens``; none is reported for
``stopReason`` aborted / error, nor when every figure is 0).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from ctx_inspect.core.estimate import estimate_message, utf8_len
from ctx_inspect.core.model import (
    TRIGGER_NOT_RECORDED,
    Compacted,
    ContextMeasured,
    ContextReset,
    Event,
    LogLine,
    Message,
    MessageAdded,
    MessageKind,
    Part,
    PartType,
    RequestRejected,
    RequestSent,
    Role,
    SessionInfo,
    SourceSpan,
    ToolOutputAction,
    ToolOutputChanged,
    Usage,
    UsageReported,
)
from ctx_inspect.core.policies.goagent import LINES_MARKER, recorded_cut
from ctx_inspect.formats.base import LineParser, decode_text, shown
from ctx_inspect.formats.chat_common import (
    as_int,
    as_str,
    compact_json,
    iso_time,
    type_name,
    unknown_part,
)
from ctx_inspect.formats.registry import HEAD_BYTES, FormatSpec, Head, folder_problem, register

ROLES: dict[str, Role] = {"user": Role.USER, "assistant": Role.ASSISTANT, "toolResult": Role.TOOL}
COMPACTION_PREFIX = (
    "The conversation history before this point was compacted into the following summary:"
    "\n\n<summary>\n"
)
BRANCH_PREFIX = (
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
)
SUMMARY_SUFFIX = "\n</summary>"
REBUILT_SUMMARY_PREFIX = "[Previous conversation summary]\n\n"  # compact.go's rebuilt context
NO_USAGE_STOPS = frozenset({"aborted", "error"})
EVENT_TYPES = frozenset(
    {
        "agent_start",
        "agent_end",
        "turn_start",
        "turn_end",
        "message_start",
        "message_end",
        "message_update",
        "tool_execution_start",
        "tool_execution_end",
        "text_delta",
        "tool_call_delta",
        "thinking_delta",
        "compaction_start",
        "compaction_end",
        "loop_guard_triggered",
        "tool_call_recovery",
        "error",
        "llm_retry",
    }
)
ENTRY_TYPES = frozenset({"message", "compaction", "branch_summary", "session_info"})
BODY_BUDGET_CHARS = 64 * 1024 * 1024  # message bodies kept for re-adding on a branch switch
MAX_FOLDER_FILES = 2000  # files looked at in one sessions folder


# ------------------------------------------------------------------------------------------
# Shared conversion


def nano_time(value: Any) -> str | None:
    """A UnixNano timestamp as ISO 8601 in UTC (microseconds)."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    seconds, nanos = divmod(value, 1_000_000_000)
    try:
        moment = datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.replace(microsecond=nanos // 1000).isoformat()


def go_usage(raw: dict[str, Any]) -> Usage | None:
    """An assistant message's usage; None when aborted / failed or when every figure is 0."""
    stop = raw.get("stopReason")
    if isinstance(stop, str) and stop in NO_USAGE_STOPS:  # a list would not even hash
        return None
    usage = raw.get("usage")
    if not isinstance(usage, dict):
        return None
    total = as_int(usage.get("totalTokens"))
    result = Usage(
        input=as_int(usage.get("input")),
        output=as_int(usage.get("output")),
        cache_read=as_int(usage.get("cacheRead")),
        cache_write=as_int(usage.get("cacheWrite")),
        total=total or None,
    )
    if not (result.input or result.output or result.cache_read or result.cache_write or total):
        return None
    return result


def _block(block: Any, role: Role, raw: dict[str, Any]) -> Part:
    if not isinstance(block, dict):
        return unknown_part(block)
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        if role is Role.TOOL:
            return Part(
                type=PartType.TOOL_RESULT,
                text=block["text"],
                tool_name=as_str(raw.get("toolName")),
                call_id=as_str(raw.get("toolCallId")),
                is_error=raw.get("isError") is True,
            )
        return Part(type=PartType.TEXT, text=block["text"])
    if kind == "thinking" and isinstance(block.get("thinking"), str):
        return Part(type=PartType.THINKING, text=block["thinking"])
    if kind == "toolCall":
        args = block.get("arguments")
        return Part(
            type=PartType.TOOL_CALL,
            tool_name=as_str(block.get("name")),
            call_id=as_str(block.get("id")),
            arguments=compact_json(args) if args is not None else "",
        )
    if kind == "image":
        data = block.get("data")
        return Part(
            type=PartType.IMAGE,
            media_type=as_str(block.get("mimeType")),
            data_bytes=len(data) if isinstance(data, str) else 0,
        )
    return unknown_part(block)


def convert_message(raw: Any, message_id: str, timestamp: str | None = None) -> Message | str:
    """An AgentMessage as a Message, or the reason it cannot be read."""
    if not isinstance(raw, dict):
        return f"message is {type_name(raw)}, not an object"
    role_name = raw.get("role")
    role = ROLES.get(role_name) if isinstance(role_name, str) else None
    if role is None:
        return f"unknown role {shown(role_name)}"
    content = raw.get("content")
    if content is not None and not isinstance(content, list):
        return f"content is {type_name(content)}, not a list of blocks"
    parts = [_block(block, role, raw) for block in content or ()]
    if role is Role.TOOL and not any(p.type is PartType.TOOL_RESULT for p in parts):
        parts.insert(0, _block({"type": "text", "text": ""}, role, raw))
    metadata = raw.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    visible = metadata.get("agentVisible") is not False
    meta_kind = metadata.get("kind")
    if meta_kind == "tool_result_archived":
        kind, visible = MessageKind.ARCHIVED, False
    elif meta_kind == "tool_summary":
        kind = MessageKind.TOOL_SUMMARY
    elif role is Role.TOOL:
        kind = MessageKind.TOOL_RESULT
    elif (
        role is Role.ASSISTANT
        and parts
        and all(p.type in (PartType.TOOL_CALL, PartType.THINKING) for p in parts)
    ):
        kind = (
            MessageKind.TOOL_CALL
            if any(p.type is PartType.TOOL_CALL for p in parts)
            else MessageKind.MESSAGE
        )
    else:
        kind = MessageKind.MESSAGE
    return Message(
        id=message_id,
        role=role,
        kind=kind,
        parts=tuple(parts),
        visible=visible,
        timestamp=iso_time(raw.get("timestamp")) or timestamp,
        model=as_str(raw.get("model")),
    )


def _summary_message(
    message_id: str, text: str, timestamp: str | None, kind: MessageKind = MessageKind.SUMMARY
) -> Message:
    return Message(
        id=message_id,
        role=Role.USER,
        kind=kind,
        parts=(Part(type=PartType.TEXT, text=text),),
        timestamp=timestamp,
    )


def _header_info(obj: dict[str, Any], timestamp: str | None) -> SessionInfo:
    extra: dict[str, Any] = {}
    for key, name in (
        ("cwd", "cwd"),
        ("parentSession", "parent_session"),
        ("version", "session_version"),
        ("gitCommit", "git_commit"),
        ("lastCompactionId", "last_compaction_id"),
    ):
        if obj.get(key) not in (None, ""):
            extra[name] = obj[key]
    return SessionInfo(
        agent="goagent",
        session_id=as_str(obj.get("id")),
        version=as_str(obj.get("gitVersion")),
        extra=extra,
        timestamp=as_str(obj.get("timestamp")) or timestamp,
    )


def _is_header(obj: dict[str, Any]) -> bool:
    return obj.get("type") == "session"


def _load_record(line: bytes) -> Any:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        try:
            return orjson.loads(line.decode("utf-8", "replace"))
        except orjson.JSONDecodeError:
            return None


# ------------------------------------------------------------------------------------------
# The agent's own figure, tool-output notices and provider refusals (all three readers)

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


_INSTANT = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?"
    r"\s*(Z|[+-]\d{2}:?\d{2})?$"
)


def instant_ns(text: str | None) -> int | None:
    """An ISO 8601 / RFC 3339 time as nanoseconds since the epoch, to the nanosecond (the
    session writes nanoseconds); a time without a zone is read as UTC."""
    if not text:
        return None
    match = _INSTANT.match(text.strip())
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(match[i]) for i in range(1, 7))
    try:
        moment = datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    except ValueError:
        return None
    nanos = int((match[7] or "0")[:9].ljust(9, "0"))
    zone = match[8]
    offset = 0
    if zone and zone != "Z":
        digits = zone[1:].replace(":", "")
        offset = (int(digits[:2]) * 60 + int(digits[2:])) * 60 * (1 if zone[0] == "+" else -1)
    return (int(moment.timestamp()) - offset) * 1_000_000_000 + nanos


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
        self.of[message.id] = (total, estimate_message("goagent", message), cuttable)

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
        tokens_after=estimate_message("goagent", message),
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


# ------------------------------------------------------------------------------------------
# goagent-events


@dataclass
class _HeldStart:
    info: dict[str, Any]
    timestamp: str | None
    figure: int | None  # the agent's figure when it decided (auto-compaction)


class GoEventsParser(LineParser):
    """``--mode json`` / RPC stdout: AgentEvent lines after the session header."""

    format_name = "goagent-events"

    def __init__(self, source: int = 0, path: str = "") -> None:
        super().__init__(source, path)
        self._results: set[str] = set()  # tool call ids whose result message was added
        self._live: list[str] = []  # visible message ids in context, oldest first
        self._figures = AgentFigures()
        self._start: _HeldStart | None = None
        self._measured = False  # the agent's figure was given for the current turn
        self._request_failed = False  # the latest model request got no answer

    def parse_line(self, line: bytes, span: SourceSpan) -> Iterable[Event]:
        out: list[Event] = []
        obj = self.load_json(line, span, out)
        if not isinstance(obj, dict):
            if obj is not None or not out:
                out.append(self.issue(span, f"not an event object ({type_name(obj)})", line))
            return out
        etype = obj.get("type")
        if not isinstance(etype, str) or not etype:
            out.append(self.issue(span, "no event type", line))
            return out
        timestamp = nano_time(obj.get("eventAt"))
        if _is_header(obj):
            out.append(_header_info(obj, timestamp).model_copy(update={"span": span}))
        elif etype == "message_end":
            self._message_end(obj, span, timestamp, line, out)
        elif etype == "tool_execution_end":
            self._tool_end(obj, span, timestamp, line, out)
        elif etype == "compaction_start":
            self._compaction_start(obj, span, timestamp, out)
        elif etype == "compaction_end":
            self._compaction_end(obj, span, timestamp, out)
        elif etype == "turn_end":
            self._turn_end(obj, span, timestamp, out)
        else:
            out.append(self._log(etype, obj, span, timestamp))
        return out

    # -- messages --------------------------------------------------------------------------

    def _message_end(
        self,
        obj: dict[str, Any],
        span: SourceSpan,
        timestamp: str | None,
        line: bytes,
        out: list[Event],
    ) -> None:
        raw = obj.get("message")
        if not isinstance(raw, dict):
            out.append(self.issue(span, "message_end without a message object", line))
            return
        call_id = as_str(raw.get("toolCallId"))
        if raw.get("role") == "toolResult" and call_id in self._results:
            out.append(
                LogLine(text=f"message_end (tool result {call_id}, already read)", span=span)
            )
            return
        message = convert_message(raw, f"L{span.line}", timestamp)
        if isinstance(message, str):
            out.append(self.issue(span, f"message_end: {message}", line))
            return
        usage = None
        if message.role is Role.ASSISTANT:
            out.append(RequestSent(model=message.model, timestamp=timestamp, span=span))
            self._request_failed = False
            self._measured = False  # a new turn
            usage = go_usage(raw)
            if usage is not None:
                out.append(
                    UsageReported(usage=usage, model=message.model, timestamp=timestamp, span=span)
                )
        elif message.role is Role.USER:
            self._request_failed = False
        if message.role is Role.TOOL and call_id:
            self._results.add(call_id)
        self._add(message, span, timestamp, out, usage)

    def _tool_end(
        self,
        obj: dict[str, Any],
        span: SourceSpan,
        timestamp: str | None,
        line: bytes,
        out: list[Event],
    ) -> None:
        name = as_str(obj.get("toolName"))
        result = obj.get("result")
        call_id = as_str(obj.get("toolCallId"))
        if not isinstance(result, dict):
            out.append(
                LogLine(text=f"tool_execution_end {name or ''} (no result)".strip(), span=span)
            )
            return
        call_id = call_id or as_str(result.get("toolCallId"))
        if call_id is not None and call_id in self._results:
            out.append(LogLine(text=f"tool_execution_end {call_id} (already read)", span=span))
            return
        message = convert_message(_tool_result(obj, result), f"L{span.line}", timestamp)
        if isinstance(message, str):
            out.append(self.issue(span, f"tool_execution_end: {message}", line))
            return
        if call_id:
            self._results.add(call_id)
        self._add(message, span, timestamp, out)
        change = tool_output_change(message, timestamp)
        if change is not None:
            out.append(change.model_copy(update={"span": span}))

    def _add(
        self,
        message: Message,
        span: SourceSpan,
        timestamp: str | None,
        out: list[Event],
        usage: Usage | None = None,
    ) -> None:
        out.append(MessageAdded(message=message, timestamp=timestamp, span=span))
        if message.visible:
            self._live.append(message.id)
            self._figures.note(message, usage)

    def _measure(self, timestamp: str | None, span: SourceSpan, out: list[Event]) -> int | None:
        """The figure the agent compares with its limit at a turn's end (once per turn)."""
        figure = self._figures.figure(self._live)
        if not self._measured and figure is not None:
            out.append(
                ContextMeasured(tokens=figure, label=FIGURE_LABEL, timestamp=timestamp, span=span)
            )
        self._measured = True
        return figure

    def _turn_end(
        self, obj: dict[str, Any], span: SourceSpan, timestamp: str | None, out: list[Event]
    ) -> None:
        if not isinstance(obj.get("message"), dict) and not self._request_failed:
            # the turn's model request got no answer (the log says why)
            out.append(RequestSent(timestamp=timestamp, span=span))
            out.append(
                LogLine(
                    text="model request failed: no response (the agent's log has the error)",
                    level="ERROR",
                    timestamp=timestamp,
                    span=span,
                )
            )
            self._request_failed = True
        self._measure(timestamp, span, out)
        out.append(self._log("turn_end", obj, span, timestamp))

    # -- compaction ------------------------------------------------------------------------

    def _compaction_start(
        self, obj: dict[str, Any], span: SourceSpan, timestamp: str | None, out: list[Event]
    ) -> None:
        self._flush_start(out)
        info = obj.get("compaction")
        info = info if isinstance(info, dict) else {}
        figure = None
        if info.get("trigger") == RECOVERY:
            # the provider refused the loop's latest request as too long
            if not self._request_failed:
                out.append(RequestSent(timestamp=timestamp, span=span))
                out.append(
                    RequestRejected(
                        reason="the provider refused the request as too long "
                        "(the agent started its context-limit recovery)",
                        timestamp=timestamp,
                        span=span,
                    )
                )
            self._request_failed = True
        else:
            figure = self._measure(timestamp, span, out)
        self._start = _HeldStart(info=info, timestamp=timestamp, figure=figure)
        text = f"compaction_start ({as_int(info.get('before'))} messages)"
        out.append(LogLine(text=text, tag="compaction", timestamp=timestamp, span=span))

    def _compaction_end(
        self, obj: dict[str, Any], span: SourceSpan, timestamp: str | None, out: list[Event]
    ) -> None:
        info = obj.get("compaction")
        info = info if isinstance(info, dict) else {}
        held = self._start
        self._start = None
        start = held.info if held is not None else {}
        merged = {**start, **{k: v for k, v in info.items() if v not in (None, "", 0, False)}}
        if merged.get("trigger") == RECOVERY and not merged.get("error"):
            self._request_failed = False  # the loop sends its compacted list again
        out.append(self._compacted(merged, timestamp, span, held.figure if held else None))
        summary = as_str(merged.get("summary"))
        if summary and merged.get("type") != "mini" and not merged.get("error"):
            message = _summary_message(
                f"L{span.line}-summary", REBUILT_SUMMARY_PREFIX + summary, timestamp
            )
            self._add(message, span, timestamp, out)

    def _compacted(
        self,
        info: dict[str, Any],
        timestamp: str | None,
        span: SourceSpan | None,
        figure: int | None = None,
    ) -> Compacted:
        before = as_int(info.get("before"))
        after = as_int(info.get("after"))
        error = as_str(info.get("error"))
        mini = info.get("type") == "mini"
        if error:
            retained: list[str] = []  # a failed compaction removes nothing
        elif mini:
            retained = list(self._live)
        elif "type" in info:
            # HEAD's in-memory compaction: a summary, then the newest messages
            keep = max(0, after - 1)
            retained = self._live[len(self._live) - keep :] if keep else []
        else:
            # the session's compaction: a summary, then the messages kept after it
            retained = kept_block(self._live, max(0, after - 1), self._figures.cuttable)
        if not error:
            self._live = retained
        tokens_before = as_int(info.get("tokens_before")) or figure or None
        tokens_after = as_int(info.get("tokens_after")) or None
        return Compacted(
            trigger=as_str(info.get("trigger")) or "auto",
            messages_before=before,
            messages_after=None if error else after,
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            summary=as_str(info.get("summary")),
            retained_ids=tuple(retained),
            failed=bool(error),
            error=error,
            timestamp=timestamp,
            span=span,
        )

    def _flush_start(self, out: list[Event]) -> None:
        """A compaction_start whose compaction_end never came before the next start: that
        attempt did not finish. (At the end of the input a held start is left alone: the
        compaction may still be running.)"""
        if self._start is None:
            return
        held = self._start
        self._start = None
        info = {**held.info, "error": "no compaction_end (the attempt did not finish)"}
        out.append(self._compacted(info, held.timestamp, None, held.figure))

    # -- everything else -------------------------------------------------------------------

    def _log(
        self, etype: str, obj: dict[str, Any], span: SourceSpan, timestamp: str | None
    ) -> LogLine:
        level = None
        detail = ""
        if etype == "tool_execution_start":
            detail = as_str(obj.get("toolName")) or ""
        elif etype == "message_update":
            update = obj.get("assistantMessageEvent")
            detail = as_str(update.get("type")) or "" if isinstance(update, dict) else ""
        elif etype == "agent_end":
            messages = obj.get("messages")
            detail = f"({len(messages)} messages)" if isinstance(messages, list) else ""
        elif etype in ("error", "llm_retry"):
            level = "ERROR" if etype == "error" else "WARN"
            detail = (as_str(obj.get("error")) or "")[:200]
        elif etype not in EVENT_TYPES:
            detail = "(not an agent event)"
        text = f"{etype} {detail}".strip()
        return LogLine(text=text, level=level, timestamp=timestamp, span=span)

    def messages_at(self, data: bytes, span: SourceSpan) -> list[Message]:
        obj = _load_record(data.rstrip(b"\r\n"))
        if not isinstance(obj, dict):
            return []
        etype = obj.get("type")
        timestamp = nano_time(obj.get("eventAt"))
        raw: Any = None
        if etype == "message_end":
            raw = obj.get("message")
        elif etype == "tool_execution_end" and isinstance(obj.get("result"), dict):
            raw = _tool_result(obj, obj["result"])
        elif etype == "compaction_end":
            info = obj.get("compaction")
            summary = as_str(info.get("summary")) if isinstance(info, dict) else None
            if summary:
                return [
                    _summary_message(
                        f"L{span.line}-summary", REBUILT_SUMMARY_PREFIX + summary, timestamp
                    )
                ]
            return []
        message = convert_message(raw, f"L{span.line}", timestamp)
        return [] if isinstance(message, str) else [message]


def _tool_result(event: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """A tool_execution_end's result message, with the event's own fields filled in."""
    raw = dict(result)
    raw.setdefault("role", "toolResult")
    if not raw.get("toolCallId") and event.get("toolCallId"):
        raw["toolCallId"] = event["toolCallId"]
    if not raw.get("toolName") and event.get("toolName"):
        raw["toolName"] = event["toolName"]
    if event.get("isError") is True:
        raw["isError"] = True
    return raw


@dataclass
class _Sample:
    header: bool = False
    events: int = 0
    entries: int = 0
    legacy: int = 0
    records: int = 0


def _sample(head: Head) -> _Sample:
    """What the complete lines of a head hold; when a long line is cut off after the header,
    the raw text past it tells events (``"eventAt":``) from entries (``"parentId":``)."""
    sample = _Sample()
    for line in head.lines[:100]:
        obj = _load_record(line.lstrip("\ufeff").encode())
        if not isinstance(obj, dict):
            continue
        sample.records += 1
        etype = obj.get("type")
        if etype == "session" and isinstance(obj.get("version"), int) and "id" in obj:
            sample.header = True
        elif etype in EVENT_TYPES and "eventAt" in obj:
            sample.events += 1
        elif etype in ENTRY_TYPES and "id" in obj and "parentId" in obj:
            sample.entries += 1
        elif (
            etype is None
            and isinstance(obj.get("role"), str)
            and obj["role"] in ROLES
            and isinstance(obj.get("content"), list)
            and isinstance(obj.get("timestamp"), int)
            and (obj.get("role") == "toolResult" or isinstance(obj.get("metadata"), dict))
        ):
            sample.legacy += 1
    if sample.header and sample.records == 1 and len(head.data) >= HEAD_BYTES:
        rest = head.text.split("\n", 1)[-1][:4096]
        if '"eventAt":' in rest:
            sample.events += 1
        elif '"parentId":' in rest:
            sample.entries += 1
    return sample


def sniff_events(head: Head) -> float:
    sample = _sample(head)
    if sample.events == 0 or sample.entries > sample.events:
        return 0.0
    return 0.95 if sample.header else 0.9


# ------------------------------------------------------------------------------------------
# goagent-log

# a ``%q`` body: runs of plain characters between escapes (``(?:[^"\\]|\\.)*`` matches the
# same texts, but steps through a group per character: 40 times slower on a long value)
_QUOTED_BODY = r'[^"\\]*(?:\\.[^"\\]*)*'
LOG_LINE = re.compile(
    r"^\[(?P<level>[A-Z]+(?:[+-]\d+)?)\] "
    r"(?P<ts>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,3})?)"
    r'(?: (?P<src>[^\s"]+:\d+))? '
    rf'"(?P<msg>{_QUOTED_BODY})"(?P<attrs>.*)$'
)
# a key starts after a blank (a lookbehind: ``\s+`` in the pattern would scan a run of blanks
# again from each of them, time growing with the square of the run's length)
_ATTR = re.compile(rf'(?<=\s)(?P<key>[^\s="]+)=(?P<value>"{_QUOTED_BODY}"|\S*)')
_GO_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{3}|.)")
_SIMPLE_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    '"': '"',
    "'": "'",
}
_COMPONENT = re.compile(r"^\[(?P<tag>[A-Za-z][\w-]*)\] ")


def go_unquote(body: str) -> str:
    """The text of a Go ``%q`` literal's body (without its quotes)."""

    def replace(match: re.Match[str]) -> str:
        code = match.group(1)
        if code[0] in "uU":
            value = int(code[1:], 16)
            return chr(value) if value <= 0x10FFFF else "\ufffd"
        if code[0] == "x" or (len(code) == 3 and code.isdigit()):
            value = int(code[1:], 16) if code[0] == "x" else int(code, 8)
            return chr(value) if value < 0x80 else "\ufffd"  # a lone byte of broken UTF-8
        return _SIMPLE_ESCAPES.get(code, code)

    return _GO_ESCAPE.sub(replace, body)


def log_attrs(text: str) -> dict[str, str]:
    attrs: dict[str, str] = {}
    for match in _ATTR.finditer(text):
        value = match["value"]
        if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
            value = go_unquote(value[1:-1])
        attrs[match["key"]] = value
    return attrs


@dataclass
class _Attempt:
    auto: bool
    before: int | None = None
    after: int | None = None
    compressed: bool = False
    timestamp: str | None = None
    recovery: bool = False  # opened by the debug log's compaction_start event of the loop


def _count(attrs: dict[str, str], key: str) -> int | None:
    try:
        return int(attrs[key])
    except (KeyError, ValueError):
        return None


class GoLogParser(LineParser):
    """The Go agent's log file: one ``Compacted`` per compaction attempt, the rest ``LogLine``."""

    format_name = "goagent-log"

    def __init__(self, source: int = 0, path: str = "") -> None:
        super().__init__(source, path)
        self._attempt: _Attempt | None = None
        # a refusal known from a recovery that started, told when the provider's own
        # message comes (a failed recovery) or when the loop goes on
        self._refusal: RequestRejected | None = None

    def parse_line(self, line: bytes, span: SourceSpan) -> Iterable[Event]:
        out: list[Event] = []
        text = decode_text(line, self, span, out)
        match = LOG_LINE.match(text)
        if match is None:
            out.append(self.issue(span, "not a log line of the Go agent", line))
            return out
        level = match["level"]
        timestamp = match["ts"]
        message = go_unquote(match["msg"])
        attrs = log_attrs(match["attrs"])
        if self._compaction(message, attrs, timestamp, span, out):
            return out
        body = message[5:] if message.startswith("[ai] ") else message
        component = _COMPONENT.match(body)
        summary = f"{body}{match['attrs']}".strip()
        out.append(
            LogLine(
                text=summary[:200],
                level=level,
                tag=component["tag"] if component else None,
                timestamp=timestamp,
                span=span,
            )
        )
        return out

    def _requests(
        self, message: str, attrs: dict[str, str], at: tuple[str, SourceSpan], out: list[Event]
    ) -> None:
        timestamp, span = at
        if message.endswith("[Loop] Sending messages to LLM"):
            self._tell_refusal(out)
            out.append(RequestSent(timestamp=timestamp, span=span))
        elif message.endswith("Error streaming response"):
            refusal = provider_refusal(attrs.get("error") or "", timestamp)
            if refusal is not None:
                self._refusal = None
                out.append(refusal.model_copy(update={"span": span}))
        elif message.endswith("[Agent] Got event"):
            kind = attrs.get("type")
            if kind == "compaction_start":
                # only the loop's own compaction (the recovery) passes through its events
                self._flush(out, ended=True)
                self._tell_refusal(out)
                self._attempt = _Attempt(auto=False, timestamp=timestamp, recovery=True)
                self._refusal = RequestRejected(
                    reason="the provider refused the request as too long "
                    "(the agent started its context-limit recovery)",
                    timestamp=timestamp,
                    span=span,
                )
            elif kind == "compaction_end" and self._attempt and self._attempt.recovery:
                attempt, self._attempt = self._attempt, None
                self._tell_refusal(out)
                attempt.compressed = True
                out.append(self._outcome(attempt, span, timestamp))

    def _tell_refusal(self, out: list[Event]) -> None:
        if self._refusal is not None:
            out.append(self._refusal)
            self._refusal = None

    def _compaction(
        self,
        message: str,
        attrs: dict[str, str],
        timestamp: str,
        span: SourceSpan,
        out: list[Event],
    ) -> bool:
        """Handle a compaction message, a model request (the debug log names each one) or
        the provider's refusal; False when the line is no outcome (a LogLine follows)."""
        self._requests(message, attrs, (timestamp, span), out)
        attempt = self._attempt
        if message.endswith("[Agent] Auto-compacting"):
            self._flush(out, ended=True)
            self._attempt = _Attempt(auto=True, before=_count(attrs, "beforeCount"))
            self._attempt.timestamp = timestamp
        elif message.endswith("[Compact] Compressing messages"):
            if attempt is None:
                attempt = self._attempt = _Attempt(auto=False, timestamp=timestamp)
            if attempt.before is None:
                attempt.before = _count(attrs, "count")
        elif message.endswith("[Compact] Generated summary"):
            if attempt is None:
                self._attempt = _Attempt(auto=False, timestamp=timestamp)
        elif message.endswith("[Compact] Compressed to messages"):
            if attempt is None:
                attempt = self._attempt = _Attempt(auto=False, timestamp=timestamp)
            attempt.after = _count(attrs, "count")
            attempt.compressed = True
            if not attempt.auto:
                self._attempt = None
                out.append(self._outcome(attempt, span, timestamp))
                return True
        elif message.endswith("[Agent] Auto-compact successful"):
            attempt = attempt or _Attempt(auto=True)
            self._attempt = None
            attempt.before = _count(attrs, "before") or attempt.before
            after = _count(attrs, "after")
            attempt.after = after if after is not None else attempt.after
            attempt.compressed = True
            out.append(self._outcome(attempt, span, timestamp))
            return True
        elif message.endswith("[Agent] Auto-compact failed"):
            attempt = attempt or _Attempt(auto=True)
            self._attempt = None
            out.append(self._outcome(attempt, span, timestamp, attrs.get("error") or "failed"))
            return True
        elif message.endswith("Compaction recovery failed"):
            attempt = attempt or _Attempt(auto=False)
            attempt.auto = False
            self._attempt = None
            out.append(self._outcome(attempt, span, timestamp, attrs.get("error") or "failed"))
            return True
        return False

    def _outcome(
        self,
        attempt: _Attempt,
        span: SourceSpan | None,
        timestamp: str | None,
        error: str | None = None,
    ) -> Compacted:
        return Compacted(
            trigger="auto" if attempt.auto else "context_limit_recovery",
            messages_before=attempt.before,
            messages_after=None if error else attempt.after,
            failed=error is not None,
            error=error,
            timestamp=timestamp or attempt.timestamp,
            span=span,
        )

    def _flush(self, out: list[Event], *, ended: bool) -> None:
        """An open attempt with no outcome line: done if it compressed, else (when another
        attempt started) failed without saying why; at the end of the input it may still run."""
        attempt = self._attempt
        if attempt is None:
            return
        self._attempt = None
        if attempt.compressed:
            out.append(self._outcome(attempt, None, attempt.timestamp))
        elif ended:
            out.append(self._outcome(attempt, None, attempt.timestamp, "no outcome in the log"))

    def end_of_input(self) -> Iterable[Event]:
        out: list[Event] = []
        self._tell_refusal(out)
        self._flush(out, ended=False)
        return out


def sniff_log(head: Head) -> float:
    lines = head.lines[:200]
    if not lines:
        return 0.0
    matched = sum(1 for line in lines if LOG_LINE.match(line))
    if matched == 0:
        return 0.0
    return 0.9 if matched * 2 >= len(lines) else 0.3


# ------------------------------------------------------------------------------------------
# goagent-session


@dataclass
class _Node:
    parent: str | None
    kind: str  # the entry type; "message" for legacy lines
    contributes: bool = False  # it puts a message in the agent's context list
    first_kept: str | None = None  # compaction entries


class GoSessionParser(LineParser):
    """The session tree JSONL, read incrementally along the agent's current branch."""

    format_name = "goagent-session"

    def __init__(self, source: int = 0, path: str = "") -> None:
        super().__init__(source, path)
        self._nodes: dict[str, _Node] = {}
        self._leaf: str | None = None
        self._live: list[str] = []  # emitted message ids in context, in emission order
        self._entry_of: dict[str, str] = {}  # copy id -> entry id
        self._copies: dict[str, list[str]] = {}  # entry id -> ids of its copies
        self._spans: dict[str, SourceSpan] = {}
        self._bodies: dict[str, Message] = {}
        self._body_chars = 0
        self._entries_seen = False
        self._figures = AgentFigures()
        self._unmeasured = False  # messages came since the agent's figure was last given
        self._turn_time: str | None = None  # when the latest of them was made
        self._turn_span: SourceSpan | None = None  # and where it is
        # a compaction entry waits for the messages the agent produced before it (the
        # session writer is asynchronous: they may be written after it)
        self._held: tuple[_Node, str, dict[str, Any], SourceSpan, str | None] | None = None

    # -- lines -----------------------------------------------------------------------------

    def parse_line(self, line: bytes, span: SourceSpan) -> Iterable[Event]:
        out: list[Event] = []
        if span.offset == 0 and line.startswith(b"\xef\xbb\xbf"):
            line = line[3:]
        obj = self.load_json(line, span, out)
        if not isinstance(obj, dict):
            if obj is not None or not out:
                out.append(self.issue(span, f"not a session entry ({type_name(obj)})", line))
            return out
        etype = obj.get("type")
        if etype == "session":
            info = _header_info(obj, None)
            extra = {**info.extra, "unrecorded": {"compaction": UNRECORDED_ATTEMPTS}}
            out.append(info.model_copy(update={"span": span, "extra": extra}))
            return out
        if self._held is not None and not self._produced_before_held(etype, obj):
            self._flush_held(out)
        if etype is None and "role" in obj:  # the legacy layout: one AgentMessage per line
            legacy_id = f"L{span.line}"
            self._entry(legacy_id, self._leaf, "message", obj, span, line, out, legacy=True)
            return out
        if not isinstance(etype, str) or not etype:
            out.append(self.issue(span, "no entry type", line))
            return out
        entry_id = as_str(obj.get("id"))
        if entry_id is None:
            out.append(self.issue(span, f"{etype} entry without an id", line))
            return out
        if entry_id in self._nodes:
            out.append(self.issue(span, f"duplicate entry id {entry_id}; skipped", line))
            return out
        parent = as_str(obj.get("parentId")) if "parentId" in obj else self._leaf
        if parent is None and etype == "branch_summary":
            from_id = as_str(obj.get("fromId"))
            parent = from_id if from_id != "root" else None
        self._entry(entry_id, parent, etype, obj, span, line, out)
        return out

    def _entry(
        self,
        entry_id: str,
        parent: str | None,
        etype: str,
        obj: dict[str, Any],
        span: SourceSpan,
        line: bytes,
        out: list[Event],
        *,
        legacy: bool = False,
    ) -> None:
        timestamp = as_str(obj.get("timestamp")) if not legacy else None
        produced = obj.get("message") if etype == "message" and not legacy else None
        if isinstance(produced, dict) and isinstance(produced.get("timestamp"), int):
            # when the agent made the message, not when the writer got to it
            timestamp = iso_time(produced["timestamp"]) or timestamp
        if parent is not None and parent not in self._nodes:
            out.append(
                self.issue(
                    span,
                    f"parent entry {parent} not found; read as following the previous entry",
                    line,
                )
            )
            parent = self._leaf
        if parent != self._leaf:
            self._switch(parent, span, timestamp, out)
        node = _Node(parent=parent, kind=etype)
        self._nodes[entry_id] = node
        self._leaf = entry_id
        if etype == "message":
            raw = obj if legacy else obj.get("message")
            message = convert_message(raw, entry_id, timestamp)
            if isinstance(message, str):
                out.append(self.issue(span, f"message entry {entry_id}: {message}", line))
                return
            usage = None
            if message.role is not Role.TOOL:
                self._measure(out)  # the previous turn ended here
            if message.role is Role.ASSISTANT and isinstance(raw, dict):
                out.append(RequestSent(model=message.model, timestamp=timestamp, span=span))
                usage = go_usage(raw)
                if usage is not None:
                    out.append(
                        UsageReported(
                            usage=usage, model=message.model, timestamp=timestamp, span=span
                        )
                    )
            self._contribute(node, entry_id, message, span, timestamp, out, usage)
            if message.role is Role.TOOL:
                change = tool_output_change(message, timestamp)
                if change is not None:
                    out.append(change.model_copy(update={"span": span}))
        elif etype == "compaction":
            node.first_kept = as_str(obj.get("firstKeptEntryId"))
            node.contributes = as_str(obj.get("summary")) is not None
            self._held = (node, entry_id, obj, span, timestamp)
        elif etype == "branch_summary":
            summary = as_str(obj.get("summary"))
            if summary:
                text = BRANCH_PREFIX + summary + SUMMARY_SUFFIX
                message = _summary_message(entry_id, text, timestamp)
                self._contribute(node, entry_id, message, span, timestamp, out)
            else:
                out.append(LogLine(text="branch_summary (empty)", timestamp=timestamp, span=span))
        elif etype == "session_info":
            extra = {k: obj[k] for k in ("name", "title") if as_str(obj.get(k))}
            out.append(SessionInfo(extra=extra, timestamp=timestamp, span=span))
        else:
            out.append(LogLine(text=f"{etype} entry", timestamp=timestamp, span=span))

    def _contribute(
        self,
        node: _Node,
        entry_id: str,
        message: Message,
        span: SourceSpan,
        timestamp: str | None,
        out: list[Event],
        usage: Usage | None = None,
    ) -> None:
        node.contributes = True
        self._spans[entry_id] = span
        size = len(message.text)
        if self._body_chars + size <= BODY_BUDGET_CHARS:
            self._bodies[entry_id] = message
            self._body_chars += size
        out.append(MessageAdded(message=message, timestamp=timestamp, span=span))
        self._live.append(entry_id)
        if message.visible:
            self._figures.note(message, usage)
            # a turn (a response, the tool results) ends where the agent measures again
            self._unmeasured |= message.role in (Role.ASSISTANT, Role.TOOL)
            self._turn_time = timestamp or self._turn_time
            self._turn_span = span

    # -- timing ----------------------------------------------------------------------------

    def _measure(self, out: list[Event]) -> None:
        """The figure the agent compared with its limit when its last turn ended (at the time
        of the turn's last message)."""
        if not self._unmeasured:
            return
        self._unmeasured = False
        figure = self._figures.figure(self._live, self._entry_id)
        if figure is not None:
            out.append(
                ContextMeasured(
                    tokens=figure,
                    label=FIGURE_LABEL,
                    timestamp=self._turn_time,
                    span=self._turn_span,
                )
            )

    def _produced_before_held(self, etype: Any, obj: dict[str, Any]) -> bool:
        """Whether a message entry written after the held compaction was produced before it
        (its ``message.timestamp``, in milliseconds, is earlier than the entry's)."""
        held = self._held
        if held is None or etype != "message":
            return False
        raw = obj.get("message")
        produced = raw.get("timestamp") if isinstance(raw, dict) else None
        compacted = instant_ns(held[4])
        if not isinstance(produced, int) or isinstance(produced, bool) or compacted is None:
            return False
        return produced < compacted // 1_000_000

    def _flush_held(self, out: list[Event]) -> None:
        held = self._held
        if held is None:
            return
        self._held = None
        node, entry_id, obj, span, timestamp = held
        self._measure(out)
        self._compaction(node, entry_id, obj, span, timestamp, out)

    def end_of_input(self) -> Iterable[Event]:
        out: list[Event] = []
        self._flush_held(out)
        self._measure(out)
        return out

    # -- the tree --------------------------------------------------------------------------

    def _path(self, leaf: str | None) -> list[str]:
        path: list[str] = []
        seen: set[str] = set()
        current = leaf
        while current is not None and current in self._nodes and current not in seen:
            seen.add(current)
            path.append(current)
            current = self._nodes[current].parent
        path.reverse()
        return path

    def _context(self, path: list[str]) -> list[str]:
        """The entries whose messages the agent sends at the end of ``path``, in its order."""

        def sends(entry: str) -> bool:
            node = self._nodes[entry]
            return node.contributes and node.kind != "compaction"

        last = None
        for index in range(len(path) - 1, -1, -1):
            if self._nodes[path[index]].kind == "compaction":
                last = index
                break
        if last is None:
            return [e for e in path if sends(e)]
        compaction = path[last]
        node = self._nodes[compaction]
        out = [compaction] if node.contributes else []
        kept = False
        for entry in path[:last]:
            kept = kept or entry == node.first_kept
            if kept and sends(entry):
                out.append(entry)
        out.extend(e for e in path[last + 1 :] if sends(e))
        return out

    def _entry_id(self, message_id: str) -> str:
        return self._entry_of.get(message_id, message_id)

    def _switch(
        self, parent: str | None, span: SourceSpan, timestamp: str | None, out: list[Event]
    ) -> None:
        """The next entry continues from ``parent``, not from the previous entry."""
        target = self._context(self._path(parent))
        wanted = set(target)
        keep = 0
        while keep < len(self._live) and self._entry_id(self._live[keep]) in wanted:
            keep += 1
        if keep < len(self._live):
            anchor = self._live[keep - 1] if keep else None
            out.append(
                ContextReset(keep_through=anchor, reason="branch", timestamp=timestamp, span=span)
            )
            self._live = self._live[:keep]
        self._readd(target, timestamp, out)
        self._leaf = parent

    def _readd(self, target: list[str], timestamp: str | None, out: list[Event]) -> None:
        """Copies of the ``target`` entries' messages that are not in context now."""
        present = {self._entry_id(m) for m in self._live}
        for entry in target:
            if entry in present:
                continue
            body = self._bodies.get(entry)
            if body is None:
                text = f"entry {entry} is back in context but its body was not kept; not re-added"
                out.append(LogLine(text=text, timestamp=timestamp))
                continue
            copies = self._copies.setdefault(entry, [])
            copy_id = f"{entry}@{len(copies) + 1}"
            copies.append(copy_id)
            self._entry_of[copy_id] = entry
            message = body.model_copy(update={"id": copy_id})
            out.append(MessageAdded(message=message, timestamp=timestamp, span=self._spans[entry]))
            self._live.append(copy_id)

    def _compaction(
        self,
        node: _Node,
        entry_id: str,
        obj: dict[str, Any],
        span: SourceSpan,
        timestamp: str | None,
        out: list[Event],
    ) -> None:
        node.first_kept = as_str(obj.get("firstKeptEntryId"))
        summary = as_str(obj.get("summary"))
        node.contributes = summary is not None
        kept = [e for e in self._context(self._path(entry_id)) if e != entry_id]
        wanted = set(kept)
        retained = [m for m in self._live if self._entry_id(m) in wanted]
        before = len(self._live)
        self._live = retained
        out.append(
            Compacted(
                trigger=TRIGGER_NOT_RECORDED,
                tokens_before=as_int(obj.get("tokensBefore")) or None,
                messages_before=before,
                messages_after=len(kept) + (1 if summary else 0),
                retained_ids=tuple(retained),
                timestamp=timestamp,
                span=span,
            )
        )
        self._readd(kept, timestamp, out)
        if summary is not None:
            text = COMPACTION_PREFIX + summary + SUMMARY_SUFFIX
            message = _summary_message(entry_id, text, timestamp)
            self._contribute(node, entry_id, message, span, timestamp, out)

    # -- bodies ----------------------------------------------------------------------------

    def messages_at(self, data: bytes, span: SourceSpan) -> list[Message]:
        line = data.rstrip(b"\r\n")
        if line.startswith(b"\xef\xbb\xbf"):
            line = line[3:]
        obj = _load_record(line)
        if not isinstance(obj, dict):
            return []
        etype = obj.get("type")
        entry_id = as_str(obj.get("id"))
        timestamp = as_str(obj.get("timestamp"))
        message: Message | str | None = None
        if etype is None and "role" in obj:
            message = convert_message(obj, f"L{span.line}")
        elif entry_id is None:
            return []
        elif etype == "message":
            message = convert_message(obj.get("message"), entry_id, timestamp)
        elif etype in ("compaction", "branch_summary"):
            summary = as_str(obj.get("summary"))
            if summary:
                prefix = COMPACTION_PREFIX if etype == "compaction" else BRANCH_PREFIX
                message = _summary_message(entry_id, prefix + summary + SUMMARY_SUFFIX, timestamp)
        if not isinstance(message, Message):
            return []
        copies = [message.model_copy(update={"id": c}) for c in self._copies.get(message.id, [])]
        return [message, *copies]


def _has_session_header(path: Path) -> bool | None:
    try:
        with path.open("rb") as fh:
            first = fh.readline(HEAD_BYTES)
    except OSError:
        return None  # cannot tell
    obj = _load_record(first.lstrip(b"\xef\xbb\xbf").strip())
    return (
        isinstance(obj, dict)
        and obj.get("type") == "session"
        and isinstance(obj.get("version"), int)
        and "id" in obj
    )


def _sessions_in(folder: Path) -> list[Path]:
    """The session files of one ``--<cwd>--`` folder: ``<id>.jsonl`` and ``<uuid>/messages.jsonl``
    (HEAD), each starting with a session header; oldest first."""
    try:
        found = [*folder.glob("*.jsonl"), *folder.glob("*/messages.jsonl")]
    except OSError:
        return []
    checked = [(p, _has_session_header(p)) for p in sorted(found)[:MAX_FOLDER_FILES] if p.is_file()]
    files = [p for p, header in checked if header]
    if files:  # among sessions, a file that cannot be read is kept: reading it says why
        files.extend(p for p, header in checked if header is None)

    def key(path: Path) -> tuple[float, str]:
        try:
            return (path.stat().st_mtime, str(path))
        except OSError:
            return (0.0, str(path))

    return sorted(files, key=key)


_CWD_FOLDER = re.compile(r"--.*--")  # ~/.ai/sessions/--<cwd>--


def expand_sessions(path: Path) -> list[Path]:
    """The session files of a ``--<cwd>--`` folder, or of every such folder under
    ``~/.ai/sessions``."""
    if not path.is_dir():
        return [path]
    files = _sessions_in(path)
    if files:
        return files
    out: list[Path] = []
    try:
        subdirs = sorted(p for p in path.iterdir() if p.is_dir())
    except OSError:
        return out
    for sub in subdirs[:MAX_FOLDER_FILES]:
        # a session folder that cannot be listed is named, so that reading it says why
        out.extend([sub] if folder_problem(sub) else _sessions_in(sub))
    return out


def sniff_session(head: Head) -> float:
    if head.is_dir:
        found = expand_sessions(head.path) if head.path.is_dir() else []
        # a session file, or a folder named as the agent names them that cannot be listed
        # (any other unreadable folder says nothing of whose sessions it holds)
        own = any(p.is_file() or _CWD_FOLDER.fullmatch(p.name) for p in found)
        return 0.9 if own else 0.0
    sample = _sample(head)
    if sample.events > sample.entries:
        return 0.0
    if sample.entries:
        return 0.95 if sample.header else 0.8
    if sample.header:
        return 0.7 if sample.records == 1 else 0.4
    if sample.legacy and sample.legacy * 2 >= sample.records:
        return 0.75
    return 0.0


# ------------------------------------------------------------------------------------------
# --merge of one run's stdout, log files and session files

MATCH_NS = 5 * 1_000_000_000  # a session's compaction entry and the stdout's outcome: 5 s
ZONE_STEP_NS = 15 * 60 * 1_000_000_000  # time zones differ by whole quarter hours
_LOG_PROMPT = "[Agent] Starting prompt"
_FAILED_REQUEST = "model request failed"


@dataclass
class _Timed:
    """An event of one stream with the instant it sorts at."""

    at: int
    rank: int  # 0: the stream that holds the conversation; then the others
    seq: float
    event: Event


def _instants(events: Sequence[Event], shift: int = 0) -> list[int]:
    """Each event's instant, carried forward (and never going back) from the events that have
    one, so that a stream keeps its own order."""
    out: list[int] = []
    last = 0
    for event in events:
        at = instant_ns(event.timestamp)
        if at is not None:
            last = max(last, at + shift)
        out.append(last)
    return out


def _zone_offset(pairs: Sequence[tuple[int, int]]) -> int:
    """How far a log's zone-less times are from UTC: the median gap between the log's records
    and the same moments elsewhere, to the nearest quarter hour (0 without any)."""
    if not pairs:
        return 0
    gaps = sorted(other - log for log, other in pairs)
    gap = gaps[len(gaps) // 2]
    return round(gap / ZONE_STEP_NS) * ZONE_STEP_NS


def _is_prompt_start(event: Event) -> bool:
    return isinstance(event, LogLine) and _LOG_PROMPT in event.text


def _log_offset(log: Sequence[Event], anchors: Sequence[Event]) -> int:
    """The zone offset of a log, from what it shares with the stdout or the session: its
    compaction outcomes, else the prompts it starts (the stdout's ``agent_start``)."""
    own = _instants(log)
    others = _instants(anchors)
    mine = [own[i] for i, e in enumerate(log) if isinstance(e, Compacted)]
    theirs = [others[i] for i, e in enumerate(anchors) if isinstance(e, Compacted)]
    if not theirs or not mine:
        mine = [own[i] for i, e in enumerate(log) if _is_prompt_start(e)]
        theirs = [
            others[i]
            for i, e in enumerate(anchors)
            if isinstance(e, LogLine) and e.text.startswith("agent_start")
        ]
    return _zone_offset(list(zip(mine, theirs, strict=False)))


def _nearest(at: int, candidates: Sequence[tuple[int, int]], used: set[int]) -> int | None:
    """The unused candidate (instant, position) nearest ``at``, within ``MATCH_NS``."""
    best: tuple[int, int] | None = None
    for when, position in candidates:
        gap = abs(when - at)
        if position not in used and gap <= MATCH_NS and (best is None or gap < best[0]):
            best = (gap, position)
    return None if best is None else best[1]


def _one_refusal_per_request(events: list[Event]) -> list[Event]:
    """A refused request is told once: the most informative of its refusals stays."""
    out: list[Event] = []
    told: int | None = None  # where the latest request's refusal is in ``out``
    for event in events:
        if isinstance(event, RequestSent):
            told = None
        elif isinstance(event, RequestRejected):
            if told is not None:
                kept = out[told]
                assert isinstance(kept, RequestRejected)
                if (event.tokens, event.limit) != (None, None) and (kept.tokens, kept.limit) == (
                    None,
                    None,
                ):
                    out[told] = event
                continue
            told = len(out)
        out.append(event)
    return out


def _add_session_history(timed: list[_Timed], sessions: Sequence[list[Event]]) -> None:
    """What a session file adds to a stdout: its history before this invocation, and the
    summary of each compaction the stdout shows."""
    # this invocation's first event (the header's time is the session's creation)
    start = min(
        (t.at for t in timed if t.at > 0 and not isinstance(t.event, SessionInfo)), default=0
    )
    done = [
        (t.at, position)
        for position, t in enumerate(timed)
        if isinstance(t.event, Compacted) and not t.event.failed
    ]
    used: set[int] = set()
    # the stdout's own messages (a prompt is made just before its run starts)
    shown = {_message_key(t.event) for t in timed if isinstance(t.event, MessageAdded)}
    for events in sessions:
        instants = _instants(events)
        compaction_at: int | None = None
        for seq, (at, event) in enumerate(zip(instants, events, strict=True)):
            if at < start:
                if not (isinstance(event, MessageAdded) and _message_key(event) in shown):
                    timed.append(_Timed(at, 1, seq, event))
                continue
            if isinstance(event, Compacted):
                compaction_at = at
            elif (
                compaction_at is not None
                and isinstance(event, MessageAdded)
                and event.message.kind is MessageKind.SUMMARY
            ):
                position = _nearest(compaction_at, done, used)
                compaction_at = None
                if position is not None:
                    used.add(position)
                    outcome = timed[position]
                    timed.append(_Timed(outcome.at, 0, outcome.seq + 0.5, event))


def _message_key(event: Event) -> tuple[str, str | None, str] | None:
    """A message as both the stdout and the session write it: role, time made, text."""
    if not isinstance(event, MessageAdded):
        return None
    message = event.message
    return message.role.value, message.timestamp, message.text


def _failed_requests(timed: Sequence[_Timed]) -> list[tuple[int, int]]:
    """The stdout's requests that got no answer: (instant, position)."""
    out: list[tuple[int, int]] = []
    for position, t in enumerate(timed):
        if not isinstance(t.event, RequestSent) or position + 1 >= len(timed):
            continue
        after = timed[position + 1].event
        if isinstance(after, RequestRejected) or (
            isinstance(after, LogLine) and after.text.startswith(_FAILED_REQUEST)
        ):
            out.append((t.at, position))
    return out


def _add_log(timed: list[_Timed], log: list[Event], base: list[Event], *, has_stdout: bool) -> None:
    """A log's records that the conversation's own stream does not hold."""
    instants = _instants(log, _log_offset(log, base))
    failed = _failed_requests(timed) if has_stdout else []
    compactions = [
        (t.at, position)
        for position, t in enumerate(timed)
        if isinstance(t.event, Compacted) and t.rank == 0
    ]
    told: set[int] = set()
    matched: set[int] = set()
    recovery: tuple[int, float] | None = None  # where the latest recovery attempt is
    for seq, (at, event) in enumerate(zip(instants, log, strict=True)):
        if isinstance(event, RequestSent):
            recovery = None
            continue  # the conversation's stream has every request
        if isinstance(event, RequestRejected):
            if has_stdout:
                # the loop logs the error just before it ends the turn: the refused request
                # is the stdout's next unanswered one
                request = next(
                    (p for when, p in failed if when >= at - MATCH_NS and p not in told), None
                )
                if request is not None:
                    told.add(request)
                    timed.append(_Timed(timed[request].at, 0, timed[request].seq + 0.25, event))
                    continue
            else:
                # the session has no record of a request nobody answered; it came before the
                # recovery the agent attempted (a failed one is logged before the error)
                sent = RequestSent(timestamp=event.timestamp, span=event.span)
                where = recovery or (at, seq - 0.5)
                timed.append(_Timed(where[0], 2, where[1], sent))
            recovery = None
            timed.append(_Timed(at, 2, seq, event))
            continue
        if isinstance(event, Compacted) and event.trigger == RECOVERY:
            recovery = (at, seq - 0.5)
        if isinstance(event, Compacted):
            if has_stdout:
                continue  # the stdout has every attempt, with its figure
            if not event.failed:
                position = _nearest(at, [c for c in compactions if c[1] not in matched], matched)
                if position is not None:
                    matched.add(position)
                    recorded = timed[position].event
                    assert isinstance(recorded, Compacted)
                    timed[position].event = recorded.model_copy(
                        update={
                            "trigger": event.trigger,
                            "messages_before": recorded.messages_before or event.messages_before,
                        }
                    )
                    continue
        timed.append(_Timed(at, 2, seq, event))


def merge_run(streams: Sequence[Sequence[Event]], names: Sequence[str]) -> list[Event] | None:
    """One session of a run's stdout, log files and session files.

    - With a stdout, it holds the conversation: every request, message and compaction attempt
      is taken from it once. A session file adds what came before this invocation (a resumed
      session's history) and the summaries of the compactions (the stdout does not show them);
      a log adds its lines and the provider's refusals, with their figures.
    - Without one, the session file holds the conversation; a log adds the compaction attempts
      the session does not record (failed ones), the trigger of those it does, and the refused
      requests.
    - A log's times carry no zone: it is placed by what it shares with the other streams.
    """
    named = list(zip(names, streams, strict=True))
    stdouts = [list(events) for name, events in named if name == EVENTS_SPEC.name]
    logs = [list(events) for name, events in named if name == LOG_SPEC.name]
    sessions = [list(events) for name, events in named if name == SESSION_SPEC.name]
    conversation = stdouts or sessions  # the stream that holds the conversation
    base = [e for events in conversation for e in events]
    timed = [
        _Timed(at, 0, i, e)
        for events in conversation
        for i, (at, e) in enumerate(zip(_instants(events), events, strict=True))
    ]
    if stdouts:
        _add_session_history(timed, sessions)
    for log in logs:
        _add_log(timed, log, base, has_stdout=bool(stdouts))
    timed.sort(key=lambda t: (t.at, t.rank, t.seq))
    events = [t.event for t in timed]
    if stdouts or logs:  # these record the attempts a session file does not
        events = [_attempts_recorded(e) for e in events]
    return _decided_on_the_figure(_one_refusal_per_request(events))


def _attempts_recorded(event: Event) -> Event:
    if isinstance(event, SessionInfo) and "unrecorded" in event.extra:
        extra = {k: v for k, v in event.extra.items() if k != "unrecorded"}
        return event.model_copy(update={"extra": extra})
    return event


def _decided_on_the_figure(events: list[Event]) -> list[Event]:
    """Each auto-compaction attempt with the figure the agent compared with its limit: the
    agent's own figure measured since the latest request (a session's ``tokensBefore`` is
    measured on the session's copy, which may lag behind the agent's list)."""
    figure: int | None = None
    out: list[Event] = []
    for event in events:
        if isinstance(event, RequestSent):
            figure = None
        elif isinstance(event, ContextMeasured) and event.label == FIGURE_LABEL:
            figure = event.tokens
        elif (
            isinstance(event, Compacted)
            and event.trigger == "auto"
            and figure is not None
            and event.tokens_before != figure
        ):
            event = event.model_copy(update={"tokens_before": figure})
        out.append(event)
    return out


# ------------------------------------------------------------------------------------------

EVENTS_SPEC = register(
    FormatSpec(
        name="goagent-events",
        description="Go agent 'ai' (tiancaiamao/ai): --mode json / RPC event stream",
        reads="stdout of `ai --mode json` or RPC mode (JSON Lines, session header first)",
        parser=GoEventsParser,
        sniff=sniff_events,
        default_profile="goagent",
        stream_merge=merge_run,
    )
)

LOG_SPEC = register(
    FormatSpec(
        name="goagent-log",
        description="Go agent 'ai' (tiancaiamao/ai): its log file",
        reads="~/.ai/ai-<pid>.log",
        parser=GoLogParser,
        sniff=sniff_log,
        default_profile="goagent",
        stream_merge=merge_run,
    )
)

SESSION_SPEC = register(
    FormatSpec(
        name="goagent-session",
        description="Go agent 'ai' (tiancaiamao/ai): session tree JSONL",
        reads=(
            "~/.ai/sessions/--<cwd>--/<id>.jsonl or .../<uuid>/messages.jsonl, a --<cwd>-- "
            "folder, or ~/.ai/sessions itself"
        ),
        parser=GoSessionParser,
        sniff=sniff_session,
        default_profile="goagent",
        expand=expand_sessions,
        folder=True,
        stream_merge=merge_run,
    )
)
