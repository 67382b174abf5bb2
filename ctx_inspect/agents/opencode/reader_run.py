"""OpenCode's ``opencode run --format json`` stdout: one JSON event per line.

Every line is ``{"type", "timestamp" (epoch ms), "sessionID", "part" | "error"}``, written as
the session's parts are updated:

- ``step_start``: a model request (``RequestSent``, its id the part's);
- ``text`` and ``reasoning`` (with ``--thinking``): finished parts of the request's answer; a
  text of another message is a user message OpenCode wrote itself (its ``synthetic``
  "Continue if you have next steps, ..." after an automatic compaction);
- ``tool_use``: a finished tool part with its full output (the call joins the answer, the
  output is a tool result);
- ``step_finish``: the request's ``tokens``: ``UsageReported``, with OpenCode's own count
  (``tokens.total``, else input + output + cache read + cache write) as the step's figure;
- ``error``: a session error; a provider's refusal of the prompt as too long becomes
  ``RequestRejected``, any other a log line;
- ``done`` (newer versions) and unknown types: log lines.

What the stream cannot show: the user's prompts, compaction requests, the tail a compaction
keeps, prunes (the database and the log hold them), and a run may end before its last answer
is written. The request answered right before a synthetic continuation was the summarisation
request of an automatic compaction, and the request sent right after a refusal that of an
overflow compaction: such a step gets a ``Compacted`` (its before the count that crossed, or
the refused prompt; its after the prompt of the next request that reports) and its usage is
kept apart, as for the database.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from ctx_inspect.agents.opencode.records import (
    count_label,
    opencode_count,
    opencode_usage,
    rejection,
    tool_messages,
)
from ctx_inspect.core.model import (
    Compacted,
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
    UsageReported,
)
from ctx_inspect.formats.base import LineParser
from ctx_inspect.formats.chat_common import as_str, compact_json, iso_time
from ctx_inspect.formats.registry import FormatSpec, Head, register

RUN_TYPES = frozenset({"step_start", "step_finish", "text", "reasoning", "tool_use", "error"})


@dataclass
class _Step:
    """One request of the stream, held until it is known whether it was a summarisation."""

    message_id: str | None
    start: list[Event] = field(default_factory=list)  # RequestSent
    parts: list[Part] = field(default_factory=list)
    results: list[Message] = field(default_factory=list)
    finish: list[Event] = field(default_factory=list)  # usage, count
    count: int | None = None  # OpenCode's count of the request (tokens.total, ...)
    prompt: int | None = None
    timestamp: str | None = None
    finished: bool = False
    compaction: Compacted | None = None  # the request was a compaction's summarisation


class OpenCodeRunParser(LineParser):
    """``opencode run --format json`` stdout (see the module docstring)."""

    format_name = "opencode-run"

    def __init__(self, source: int = 0, path: str = "") -> None:
        super().__init__(source, path)
        self._step: _Step | None = None  # the request being answered, or answered and held
        self._last_count: int | None = None  # OpenCode's count at the latest ordinary request
        self._refused: RequestRejected | None = None  # the latest request, refused as too long
        # what follows an automatic compaction, held until a request after it reports (its
        # prompt is the compaction's "after"); the compaction first
        self._held: list[Event] | None = None
        self._session: str | None = None
        self._named: set[str] = set()  # messages whose first request has been written

    def parse_line(self, line: bytes, span: SourceSpan) -> Iterable[Event]:
        out: list[Event] = []
        value = self.load_json(line, span, out)
        if value is None:
            if not out:
                out.append(self.issue(span, "not an OpenCode run event (null)", line))
            return out
        if not isinstance(value, dict) or not isinstance(value.get("type"), str):
            out.append(self.issue(span, "not an OpenCode run event (no type)", line))
            return out
        kind = value["type"]
        timestamp = iso_time(value.get("timestamp"))
        session = as_str(value.get("sessionID"))
        if session and session != self._session:
            self._session = session
            out.append(SessionInfo(agent="opencode", session_id=session, timestamp=timestamp))
        part = value.get("part")
        part = part if isinstance(part, dict) else {}
        message_id = as_str(part.get("messageID"))
        if kind == "step_start":
            self._release(out)
            self._step = _Step(
                message_id,
                start=[
                    RequestSent(request_id=as_str(part.get("id")), timestamp=timestamp, span=span)
                ],
                timestamp=timestamp,
            )
            refused, self._refused = self._refused, None
            if refused is not None:
                # what OpenCode sends after the provider refused a request: the overflow
                # compaction's summarisation
                before = refused.tokens if refused.tokens is not None else self._last_count
                self._step.compaction = Compacted(
                    trigger="overflow", tokens_before=before, timestamp=timestamp
                )
        elif kind in ("text", "reasoning") and self._answering(message_id):
            assert self._step is not None
            ptype = PartType.TEXT if kind == "text" else PartType.THINKING
            self._step.parts.append(Part(type=ptype, text=_text(part)))
        elif kind == "text":
            self._user_text(part, message_id, timestamp, out)
        elif kind == "tool_use" and self._answering(message_id):
            assert self._step is not None
            call, result = tool_messages(part, True, timestamp)
            self._step.parts.append(call)
            self._step.results.append(result)
        elif kind == "step_finish" and self._step is not None and not self._step.finished:
            self._finish(part, timestamp, span)
        elif kind == "error":
            self._release(out)
            self._emit([self._error(value.get("error"), timestamp, span)], out)
        else:
            text = compact_json(value)[:200]
            self._emit([LogLine(text=text, tag=kind, timestamp=timestamp, span=span)], out)
        return out

    def end_of_input(self) -> Iterable[Event]:
        out: list[Event] = []
        self._release(out)
        if self._held is not None:
            out.extend(self._held)
            self._held = None
        return out

    # -- steps -----------------------------------------------------------------------------

    def _emit(self, events: list[Event], out: list[Event]) -> None:
        if self._held is not None:
            self._held.extend(events)
        else:
            out.extend(events)

    def _answering(self, message_id: str | None) -> bool:
        step = self._step
        return step is not None and not step.finished and step.message_id in (None, message_id)

    def _finish(self, part: dict[str, Any], timestamp: str | None, span: SourceSpan) -> None:
        step = self._step
        assert step is not None
        step.finished = True
        usage = opencode_usage(part.get("tokens"))
        if usage is None:
            text = "step finished without token figures"
            step.finish = [LogLine(text=text, tag="step_finish", timestamp=timestamp, span=span)]
            return
        step.count = opencode_count(usage)
        step.prompt = usage.prompt_tokens
        step.finish = [
            UsageReported(
                usage=usage,
                request_id=_request_id(step),
                timestamp=timestamp,
                context_tokens=step.count,
                context_label=count_label(usage),
                span=span,
            )
        ]

    def _user_text(
        self, part: dict[str, Any], message_id: str | None, timestamp: str | None, out: list[Event]
    ) -> None:
        metadata = part.get("metadata")
        continuation = isinstance(metadata, dict) and metadata.get("compaction_continue") is True
        step = self._step
        if continuation and step is not None and step.finished and step.compaction is None:
            step.compaction = Compacted(
                trigger="auto", tokens_before=self._last_count, timestamp=step.timestamp
            )
        self._release(out)
        message = Message(
            id=message_id or as_str(part.get("id")) or f"user-{timestamp}",
            role=Role.USER,
            kind=MessageKind.ATTACHMENT if part.get("synthetic") is True else MessageKind.MESSAGE,
            parts=(Part(type=PartType.TEXT, text=_text(part)),),
            timestamp=timestamp,
        )
        self._emit([MessageAdded(message=message, timestamp=timestamp)], out)

    def _release(self, out: list[Event]) -> None:
        """Write the held request out, now that what follows it is known."""
        step = self._step
        if step is None:
            return
        self._step = None
        compaction = step.compaction
        summary = compaction is not None
        events: list[Event] = []
        if compaction is not None:
            if self._held is not None:  # an earlier compaction never saw a request after it
                out.extend(self._held)
            self._held = [compaction]
        events.extend(step.start)
        usage = [e for e in step.finish if isinstance(e, UsageReported)]
        if summary:
            # a summarisation request's usage is not the conversation's
            events.extend(
                e.model_copy(
                    update={"thread": "compaction", "context_tokens": None, "context_label": ""}
                )
                for e in usage
            )
        if step.parts:
            # a message's first request is the message (as the database reader names it)
            first = step.message_id is not None and step.message_id not in self._named
            if first:
                self._named.add(str(step.message_id))
            events.append(
                MessageAdded(
                    message=Message(
                        id=(step.message_id if first else _request_id(step))
                        or f"step-{step.timestamp}",
                        role=Role.ASSISTANT,
                        kind=_kind(step.parts, summary),
                        parts=tuple(step.parts),
                        visible=bool(step.parts),
                        timestamp=step.timestamp,
                    ),
                    timestamp=step.timestamp,
                )
            )
        if not summary:
            events.extend(usage)  # OpenCode's count covers the answer: given after it
        events.extend(e for e in step.finish if not isinstance(e, UsageReported))
        events.extend(MessageAdded(message=m, timestamp=m.timestamp) for m in step.results)
        self._emit(events, out)
        if summary or step.count is None:
            return
        self._last_count = step.count
        held = self._held
        if held is not None and isinstance(held[0], Compacted):
            # the first request after the compaction: its prompt is what the compaction left
            held[0] = held[0].model_copy(update={"tokens_after": step.prompt})
            out.extend(held)
            self._held = None

    def _error(self, error: Any, timestamp: str | None, span: SourceSpan) -> Event:
        refused = rejection(error)
        if refused is not None:
            self._refused = refused
            return refused.model_copy(update={"timestamp": timestamp, "span": span})
        name = error.get("name") if isinstance(error, dict) else None
        data = error.get("data") if isinstance(error, dict) else None
        said = data.get("message") if isinstance(data, dict) else None
        text = f"{name or 'error'}: {said}" if said else str(name or compact_json(error))
        return LogLine(text=text[:200], level="ERROR", tag="error", timestamp=timestamp, span=span)


def _request_id(step: _Step) -> str | None:
    for event in step.start:
        if isinstance(event, RequestSent):
            return event.request_id
    return None


def _kind(parts: list[Part], summary: bool) -> MessageKind:
    if summary:
        return MessageKind.SUMMARY
    has_text = any(p.type is PartType.TEXT for p in parts)
    has_calls = any(p.type is PartType.TOOL_CALL for p in parts)
    return MessageKind.TOOL_CALL if has_calls and not has_text else MessageKind.MESSAGE


def _text(part: dict[str, Any]) -> str:
    text = part.get("text")
    return text if isinstance(text, str) else ""


def sniff_run(head: Head) -> float:
    """JSON lines of run events: a ``type`` of the stream's, a ``sessionID`` and a ``part``
    (or an ``error``)."""
    lines = head.lines[:50]
    if not lines:
        return 0.0
    seen = 0
    for line in lines:
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            return 0.0
        if not isinstance(value, dict):
            return 0.0
        shaped = isinstance(value.get("part"), dict) or "error" in value
        if value.get("type") in RUN_TYPES and isinstance(value.get("sessionID"), str) and shaped:
            seen += 1
    return 0.95 if seen * 2 >= len(lines) else 0.0


RUN_SPEC = register(
    FormatSpec(
        name="opencode-run",
        description="OpenCode's `opencode run --format json` stdout (steps, tokens, tool output)",
        reads="the stdout of `opencode run --format json` (JSON lines: step_start, text, "
        "tool_use, step_finish, error)",
        parser=OpenCodeRunParser,
        sniff=sniff_run,
        default_profile="opencode",
    )
)
