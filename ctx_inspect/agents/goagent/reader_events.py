"""``goagent-events``: the Go agent's ``--mode json`` (and RPC mode) stdout.

The session header line, then one ``AgentEvent`` per line (``type``, ``eventAt`` in UnixNano,
``message``, ``toolResults``, ``toolCallId``, ``toolName``, ``args``, ``result``, ``isError``,
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
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ctx_inspect.agents.goagent.figures import (
    FIGURE_LABEL,
    RECOVERY,
    AgentFigures,
    kept_block,
    tool_output_change,
)
from ctx_inspect.agents.goagent.merge import merge_run
from ctx_inspect.agents.goagent.messages import SUMMARY_PREFIX
from ctx_inspect.agents.goagent.records import (
    EVENT_TYPES,
    EVENTS_FORMAT,
    convert_message,
    go_usage,
    header_info,
    is_header,
    load_record,
    make_summary,
    nano_time,
    sample_head,
)
from ctx_inspect.core.model import (
    Compacted,
    ContextMeasured,
    Event,
    LogLine,
    Message,
    MessageAdded,
    RequestRejected,
    RequestSent,
    Role,
    SourceSpan,
    Usage,
    UsageReported,
)
from ctx_inspect.formats.base import LineParser
from ctx_inspect.formats.chat_common import as_int, as_str, type_name
from ctx_inspect.formats.registry import FormatSpec, Head, register


@dataclass
class _HeldStart:
    info: dict[str, Any]
    timestamp: str | None
    figure: int | None  # the agent's figure when it decided (auto-compaction)


class GoEventsParser(LineParser):
    """``--mode json`` / RPC stdout: AgentEvent lines after the session header."""

    format_name = EVENTS_FORMAT

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
        if is_header(obj):
            out.append(header_info(obj, timestamp).model_copy(update={"span": span}))
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
            message = make_summary(f"L{span.line}-summary", SUMMARY_PREFIX + summary, timestamp)
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
        obj = load_record(data.rstrip(b"\r\n"))
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
                return [make_summary(f"L{span.line}-summary", SUMMARY_PREFIX + summary, timestamp)]
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


def sniff_events(head: Head) -> float:
    sample = sample_head(head)
    if sample.events == 0 or sample.entries > sample.events:
        return 0.0
    return 0.95 if sample.header else 0.9


EVENTS_SPEC = register(
    FormatSpec(
        name=EVENTS_FORMAT,
        description="Go agent 'ai' (tiancaiamao/ai): --mode json / RPC event stream",
        reads="stdout of `ai --mode json` or RPC mode (JSON Lines, session header first)",
        parser=GoEventsParser,
        sniff=sniff_events,
        default_profile="goagent",
        stream_merge=merge_run,
    )
)
