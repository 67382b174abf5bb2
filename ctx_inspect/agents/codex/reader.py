"""OpenAI Codex CLI rollouts: ``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``.

Every line is an envelope ``{"timestamp", "type", "payload"}`` (0.169 adds ``ordinal`` and, on
some response items, ``metadata``). What each record becomes:

- ``session_meta``: ``SessionInfo`` (session id, ``cli_version``, originator, provider, cwd, fork
  and parent ids). Its ``base_instructions`` (newer builds) are the system prompt sent with every
  request: one SYSTEM message, kept across compactions (its id is in ``retained_ids``). The older
  ``instructions`` field repeats the injected AGENTS.md message, so it is not added again.
- ``turn_context``: ``SessionInfo(model=...)`` when the model changes, else a ``LogLine``.
- ``response_item``: the Responses API items, i.e. exactly the context, as messages
  (``items.py``). A ``RequestSent`` goes before the first model output of each response; a
  response ends at user input, tool output, a usage record or a new turn.
- ``event_msg`` ``token_count``: ``UsageReported`` from ``info.last_token_usage`` (never the
  cumulative ``total_token_usage``), ``input_tokens`` being the whole prompt
  (``input_includes_cache``). A token_count that repeats the previous totals (Codex re-sends it
  at the start of a turn) or has ``info: null`` (rate limits only) is a ``LogLine``. A
  ``last_token_usage`` with zero input and output but a total is Codex's own estimate of the
  context (0.169 writes one after each compaction): ``ContextMeasured``, not a usage.
  ``model_context_window`` (here or on ``task_started``) gives ``SessionInfo(context_window)``.
- ``compacted``: ``Compacted`` (everything leaves except the base instructions), then the context
  it rebuilt (``compaction.py``, which also holds the records of a compaction under way).
  ``event_msg`` ``context_compacted`` (and 0.169's ``item_completed`` of a ``ContextCompaction``
  item) is a ``LogLine`` when the ``compacted`` line already told the story, else it is the
  ``Compacted``. The trigger is "manual" when the compaction is all its turn did (no user input,
  no tool output, no other model request, a turn started without ``turn_attribution``), else
  "auto". ``tokens_before`` is the prompt of the latest request.
- Every other ``event_msg`` (UI duplicates of the items), ``world_state``,
  ``token_usage_record`` (its ``response_id`` names the next usage's request) and unknown
  envelope types: a short ``LogLine`` tagged with the record type.

The legacy layout (mid-2025 and earlier) is read too: a bare ``{id, timestamp, instructions}``
first line, then bare response items and ``{"record_type": "state"}`` lines.

``codex exec --json`` stdout is another stream (``reader_exec.py``): its only usage is per turn,
summed over the turn's requests, so it says nothing about the context size; this sniffer gives
it 0. The reader is one state machine (a response's request, its usage and a compaction under
way decide together what a record is), so it stays one module past 600 lines.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from typing import Any

import orjson

from ctx_inspect.agents.codex.compaction import ESTIMATE_LABEL, HeldCompaction, holds, replacement
from ctx_inspect.agents.codex.items import KNOWN_ITEM_TYPES, ResponseItems
from ctx_inspect.core.model import (
    Compacted,
    ContextMeasured,
    Event,
    LogLine,
    Message,
    MessageAdded,
    MessageKind,
    RequestRejected,
    RequestSent,
    Role,
    SessionInfo,
    SourceSpan,
    Usage,
    UsageReported,
)
from ctx_inspect.formats.base import LineParser
from ctx_inspect.formats.chat_common import as_int, as_str, text_part, type_name
from ctx_inspect.formats.registry import FormatSpec, Head, register

ENVELOPE_TYPES = frozenset(
    {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
)
COMPACTION_MARKERS = frozenset({"context_compacted"})
TURN_END = frozenset({"task_complete", "turn_complete", "turn_aborted"})
CONTEXT_LABEL = "codex: last_token_usage.total_tokens"
WINDOW_SOURCE = (
    "Codex's token_count (model_context_window: effective_window_percent of the model's window)"
)
CONTEXT_EXCEEDED = "context_window_exceeded"
SESSION_META_HEAD = re.compile(r'"type"\s*:\s*"session_meta"')
PAYLOAD_HEAD = re.compile(r'"payload"\s*:\s*\{')


class CodexParser(LineParser):
    format_name = "codex"

    def __init__(self, source: int = 0, path: str = "") -> None:
        super().__init__(source, path)
        self._records = 0  # JSON objects read so far
        self._model: str | None = None
        self._model_changes: list[tuple[int, str]] = []  # (line, model), for re-reads
        self._window: int | None = None
        self._in_response = False
        self._requests = 0
        self._request_has_usage = False
        self._last_totals: tuple[Any, Any] | None = None
        self._last_prompt: int | None = None
        self._record_response: tuple[str, Any] | None = None  # token_usage_record: id, usage
        self._turn_requests = 0
        self._turn_input = False
        self._turn_attributed = False
        self._compaction_open: str | None = None  # "line" / "marker" since the last request
        self._held: HeldCompaction | None = None
        self._reported_usage: Any = None  # a usage record already given as UsageReported
        self._turn_rejected = False  # a context-window refusal was given for this turn
        self._instructions: tuple[str, str] | None = None  # (message id, text)
        # Shared with the fresh parsers of messages_at so re-reads give the same ids and names.
        self._items = ResponseItems()

    # -- lines ----------------------------------------------------------------------------

    def parse_line(self, line: bytes, span: SourceSpan) -> Iterable[Event]:
        out: list[Event] = []
        if line.startswith(b"\xef\xbb\xbf"):
            line = line[3:]
        obj = self.load_json(line, span, out)
        if obj is None:
            return out
        if not isinstance(obj, dict):
            out.append(self.issue(span, f"not a rollout record ({type_name(obj)})", line))
            return out
        self._records += 1
        kind = obj.get("type")
        payload = obj.get("payload")
        ts = as_str(obj.get("timestamp"))
        if self._held is not None:
            if holds(kind, payload, obj):
                self._dispatch(kind, payload, obj, line, span, ts, self._held.events)
                if self._held is not None and self._held.after is not None:
                    out.extend(self._flush_compaction())
                return out
            if kind == "event_msg" and isinstance(payload, dict):
                self._held.error = _error_text(payload)
            out.extend(self._flush_compaction())
        self._dispatch(kind, payload, obj, line, span, ts, out)
        return out

    def _dispatch(
        self,
        kind: Any,
        payload: Any,
        obj: dict[str, Any],
        line: bytes,
        span: SourceSpan,
        ts: str | None,
        out: list[Event],
    ) -> None:
        if isinstance(kind, str) and "payload" in obj:
            if not isinstance(payload, dict):
                out.append(self.issue(span, f"{kind} payload is {type_name(payload)}", line))
            elif kind == "response_item":
                self._response_item(payload, obj, span, ts, out)
            elif kind == "event_msg":
                self._event_msg(payload, span, ts, out)
            elif kind == "session_meta":
                self._session_meta(payload, span, ts, out)
            elif kind == "turn_context":
                self._turn_context(payload, span, ts, out)
            elif kind == "compacted":
                self._compacted(payload, span, ts, out)
            elif kind == "token_usage_record":
                self._usage_record(payload, span, ts, out)
                out.append(LogLine(text=kind, tag=kind, timestamp=ts, span=span))
            else:
                out.append(LogLine(text=kind, tag=kind, timestamp=ts, span=span))
            return
        # The legacy layout: a bare header, bare response items and state records.
        record_type = obj.get("record_type")
        if isinstance(record_type, str):
            out.append(LogLine(text=record_type, tag=record_type, timestamp=ts, span=span))
        elif isinstance(kind, str) and (kind in KNOWN_ITEM_TYPES or "role" in obj):
            self._response_item(obj, {}, span, ts, out)
        elif "id" in obj and "timestamp" in obj and not isinstance(kind, str):
            self._legacy_header(obj, span, ts, out)
        else:
            keys = ", ".join(list(obj)[:6]) or "none"
            out.append(self.issue(span, f"not a rollout record (keys: {keys})", line))

    def end_of_input(self) -> list[Event]:
        return self._flush_compaction() if self._held is not None else []

    def messages_at(self, data: bytes, span: SourceSpan) -> list[Message]:
        """Re-read one line with the ids and tool names the first read gave its messages."""
        fresh = type(self)(self.source, self.path)
        fresh._line_no = max(span.line - 1, 0)
        fresh._offset = span.offset
        fresh._items = self._items
        index = bisect.bisect_right(self._model_changes, (span.line, "\uffff")) - 1
        fresh._model = self._model_changes[index][1] if index >= 0 else None
        events = [*fresh.feed(data + b"\n"), *fresh.finish()]
        return [e.message for e in events if isinstance(e, MessageAdded)]

    # -- records --------------------------------------------------------------------------

    def _session_meta(
        self, p: dict[str, Any], span: SourceSpan, ts: str | None, out: list[Event]
    ) -> None:
        extra: dict[str, Any] = {}
        for key in (
            "originator",
            "model_provider",
            "cwd",
            "source",
            "thread_source",
            "forked_from_id",
            "parent_thread_id",
            "git",
        ):
            value = p.get(key)
            if value not in (None, "", {}, []):
                extra[key] = value
        window = p.get("context_window")
        window = as_int(window) or None
        if window:
            self._window = window
        out.append(
            SessionInfo(
                agent="codex",
                version=as_str(p.get("cli_version")),
                session_id=as_str(p.get("id")) or as_str(p.get("session_id")),
                context_window=window,
                extra=extra,
                timestamp=ts,
                span=span,
            )
        )
        base = p.get("base_instructions")
        text = base.get("text") if isinstance(base, dict) else base
        if (
            isinstance(text, str)
            and text
            and (self._instructions is None or text != self._instructions[1])
        ):
            msg_id = self._items.claim_id(None, span.line, 0, "instructions")
            self._instructions = (msg_id, text)
            message = Message(id=msg_id, role=Role.SYSTEM, parts=(text_part(text),), timestamp=ts)
            out.append(MessageAdded(message=message, timestamp=ts, span=span))

    def _legacy_header(
        self, obj: dict[str, Any], span: SourceSpan, ts: str | None, out: list[Event]
    ) -> None:
        extra: dict[str, Any] = {"layout": "legacy"}
        git = obj.get("git")
        if isinstance(git, dict):
            extra["git"] = git
        out.append(
            SessionInfo(
                agent="codex",
                session_id=as_str(obj.get("id")),
                extra=extra,
                timestamp=ts,
                span=span,
            )
        )

    def _turn_context(
        self, p: dict[str, Any], span: SourceSpan, ts: str | None, out: list[Event]
    ) -> None:
        self._in_response = False
        model = as_str(p.get("model"))
        if model and model != self._model:
            self._model = model
            self._model_changes.append((span.line, model))
            out.append(SessionInfo(model=model, timestamp=ts, span=span))
        else:
            out.append(LogLine(text="turn_context", tag="turn_context", timestamp=ts, span=span))

    def _usage_record(
        self, p: dict[str, Any], span: SourceSpan, ts: str | None, out: list[Event]
    ) -> None:
        """0.169 writes the usage of each response right after its output, before the tool
        outputs: given here, so Codex's figure covers exactly the response (what comes after
        it is what Codex adds its estimate of). The token_count that repeats it is a log line."""
        self._in_response = False
        response_id = as_str(p.get("response_id"))
        usage = p.get("usage")
        held = self._held
        if held is not None:
            if held.usage is None and isinstance(usage, dict):
                held.usage, held.usage_span, held.response_id = usage, span, response_id
            return
        if response_id:
            self._record_response = (response_id, usage)
        if not isinstance(usage, dict) or not (
            as_int(usage.get("input_tokens")) or as_int(usage.get("output_tokens"))
        ):
            return
        self._record_response = None
        self._reported_usage = usage
        self._give_usage(usage, response_id, span, ts, out)

    def _event_msg(
        self, p: dict[str, Any], span: SourceSpan, ts: str | None, out: list[Event]
    ) -> None:
        found = p.get("type")
        kind = found if isinstance(found, str) else None  # a list would not even hash
        tag = kind or "event_msg"
        if kind == "token_count":
            self._token_count(p, span, ts, out)
            return
        if kind in TURN_END or kind == "error":
            self._refused(p, span, ts, out)
        if kind == "task_started":
            self._in_response = False
            self._turn_requests = 0
            self._turn_input = False
            self._turn_rejected = False
            attribution = p.get("turn_attribution")
            self._turn_attributed = isinstance(attribution, dict) and bool(
                attribution.get("turn_trigger")
            )
            if self._note_window(p.get("model_context_window"), span, ts, out):
                return
        elif kind in TURN_END:
            self._in_response = False
            self._turn_requests = 0
            self._turn_input = False
            self._turn_attributed = False
        elif kind == "user_message":
            self._turn_input = True
            self._compaction_open = None
        item = p.get("item")
        marker = kind in COMPACTION_MARKERS or (
            kind == "item_completed"
            and isinstance(item, dict)
            and item.get("type") == "ContextCompaction"
        )
        if marker and self._compaction_open is None and self._held is None:
            out.append(self._compaction(span, ts))
            self._compaction_open = "marker"
            return
        level = "error" if kind in ("error", "stream_error") else None
        text = tag
        if kind == "error":
            message = p.get("message")
            if not isinstance(message, str):
                error = p.get("error")
                message = error.get("message") if isinstance(error, dict) else None
            if isinstance(message, str) and message:
                text = f"error: {message[:160]}"
        elif (
            kind == "item_completed"
            and isinstance(item, dict)
            and isinstance(item.get("type"), str)
        ):
            text = f"item_completed {item['type']}"
        out.append(LogLine(text=text, tag=tag, level=level, timestamp=ts, span=span))

    def _refused(
        self, p: dict[str, Any], span: SourceSpan, ts: str | None, out: list[Event]
    ) -> None:
        """A turn that ended because the model's context window was exceeded: the provider
        refused the request Codex had just sent (0.169 does not compact on this error; the
        turn ends with ``task_complete.error``, older builds write an ``error`` event)."""
        found = p.get("error")
        error: dict[str, Any] = found if isinstance(found, dict) else p
        if self._turn_rejected or not _context_exceeded(error.get("codex_error_info")):
            return
        self._turn_rejected = True
        message = error.get("message")
        self._request(ts, span, out, counted=True)
        self._in_response = False
        out.append(
            RequestRejected(
                reason=message if isinstance(message, str) else "",
                code=CONTEXT_EXCEEDED,
                model=self._model,
                timestamp=ts,
                span=span,
            )
        )

    def _note_window(self, value: Any, span: SourceSpan, ts: str | None, out: list[Event]) -> bool:
        window = as_int(value)
        if window <= 0 or window == self._window:
            return False
        self._window = window
        out.append(
            SessionInfo(
                context_window=window,
                extra={"context_window_source": WINDOW_SOURCE},
                timestamp=ts,
                span=span,
            )
        )
        return True

    def _token_count(
        self, p: dict[str, Any], span: SourceSpan, ts: str | None, out: list[Event]
    ) -> None:
        info = p.get("info")
        if info is None and "input_tokens" in p:  # very old builds: the usage itself
            info = {"last_token_usage": p}
        if not isinstance(info, dict):
            out.append(
                LogLine(
                    text="token_count (rate limits only)",
                    tag="token_count",
                    timestamp=ts,
                    span=span,
                )
            )
            return
        noted = self._note_window(info.get("model_context_window"), span, ts, out)
        last = info.get("last_token_usage")
        totals = (info.get("total_token_usage"), last)
        if not isinstance(last, dict) or (totals[0] is not None and totals == self._last_totals):
            if not noted:
                text = "token_count (repeated)" if isinstance(last, dict) else "token_count"
                out.append(LogLine(text=text, tag="token_count", timestamp=ts, span=span))
            return
        self._last_totals = totals
        prompt = as_int(last.get("input_tokens"))
        output = as_int(last.get("output_tokens"))
        total = as_int(last.get("total_tokens"))
        held = self._held
        if prompt == 0 and output == 0:
            if _filled(info):
                # after a context-window error Codex marks its window full: the figures are
                # its bookkeeping, not a size of the context
                text = "token_count (context marked full after a context-window error)"
                out.append(LogLine(text=text, tag="token_count", timestamp=ts, span=span))
            elif total <= 0:
                out.append(LogLine(text="token_count (empty)", tag="token_count", span=span))
            elif held is not None:
                held.after = (total, span, ts)  # Codex's estimate of the compacted context
                out.append(LogLine(text="token_count", tag="token_count", span=span))
            else:
                out.append(
                    ContextMeasured(
                        tokens=total,
                        limit=self._window,
                        label=ESTIMATE_LABEL,
                        timestamp=ts,
                        span=span,
                    )
                )
            return
        if held is not None:
            if held.usage is None:
                held.usage, held.usage_span = last, span
            out.append(LogLine(text="token_count", tag="token_count", timestamp=ts, span=span))
            return
        if self._reported_usage is not None and self._reported_usage == last:
            # the usage record of this response already gave it
            self._reported_usage = None
            out.append(LogLine(text="token_count", tag="token_count", timestamp=ts, span=span))
            return
        request_id = None
        if self._record_response is not None and self._record_response[1] == last:
            request_id = self._record_response[0]
        self._record_response = None
        self._give_usage(last, request_id, span, ts, out)

    def _give_usage(
        self,
        last: dict[str, Any],
        request_id: str | None,
        span: SourceSpan,
        ts: str | None,
        out: list[Event],
    ) -> None:
        """One response's usage: its prompt, and Codex's own figure for the context once it was
        answered (``total_tokens``: the prompt plus what the response added)."""
        self._in_response = False
        if self._requests == 0 or self._request_has_usage:
            # A usage whose response the rollout does not show: give it a request of its own.
            self._request(ts, span, out, counted=True)
        usage = _usage(last)
        self._last_prompt = usage.prompt_tokens
        self._request_has_usage = True
        total = as_int(last.get("total_tokens"))
        out.append(
            UsageReported(
                usage=usage,
                model=self._model,
                request_id=request_id,
                context_tokens=total if total > 0 else None,
                context_label=CONTEXT_LABEL if total > 0 else "",
                timestamp=ts,
                span=span,
            )
        )

    # -- compaction -----------------------------------------------------------------------

    def _trigger(self) -> str:
        """A compaction is the user's ``/compact`` when it is all its task did (no user input,
        no tool output, no other model request, a task started without ``turn_attribution``);
        else Codex's own (at its limit, before or during a turn)."""
        manual = self._turn_requests == 0 and not self._turn_input and not self._turn_attributed
        return "manual" if manual else "auto"

    def _compaction(self, span: SourceSpan, ts: str | None) -> Compacted:
        return Compacted(
            trigger=self._trigger(),
            tokens_before=self._last_prompt,
            retained_ids=self._retained(),
            keep_system=False,
            timestamp=ts,
            span=span,
        )

    def _flush_compaction(self) -> list[Event]:
        """The compaction under way, complete (or cut short: then a failed attempt)."""
        held = self._held
        if held is None:
            return []
        self._held = None
        self._requests += 1
        self._request_has_usage = held.usage is not None
        self._in_response = False
        usage = _usage(held.usage) if held.usage is not None else None
        if usage is not None:
            self._last_prompt = usage.prompt_tokens
        self._compaction_open = None if held.compacted is None else "line"
        return held.result(self._retained(), usage, self._window)

    def _retained(self) -> tuple[str, ...]:
        """What a compaction keeps: the base instructions."""
        return (self._instructions[0],) if self._instructions else ()

    def _compacted(
        self, p: dict[str, Any], span: SourceSpan, ts: str | None, out: list[Event]
    ) -> None:
        self._in_response = False
        held = self._held
        if held is not None:
            held.compacted = (span, ts)
            held.replacement = replacement(self._items, p, span, ts, self._model)
            out.append(LogLine(text="compacted", tag="compacted", timestamp=ts, span=span))
            return
        if self._compaction_open != "marker":
            out.append(self._compaction(span, ts))
        self._compaction_open = "line"
        out.extend(replacement(self._items, p, span, ts, self._model))

    # -- response items -------------------------------------------------------------------

    def _response_item(
        self,
        p: dict[str, Any],
        envelope: dict[str, Any],
        span: SourceSpan,
        ts: str | None,
        out: list[Event],
    ) -> None:
        message, is_output = self._items.convert(p, span.line, 0, ts, self._model)
        meta = envelope.get("metadata")
        if isinstance(meta, dict) and meta.get("compaction_output") is True:
            # Codex's summarisation request answered: the summary it wrote is not kept as is
            # (the compacted record puts it in the context), so it is not sent again
            hidden = message.model_copy(update={"visible": False, "kind": MessageKind.SUMMARY})
            if self._held is None:
                self._held = HeldCompaction(
                    trigger=self._trigger(), model=self._model, span=span, timestamp=ts
                )
            self._held.events.append(MessageAdded(message=hidden, timestamp=ts, span=span))
            return
        if is_output:
            if not self._in_response:
                self._request(ts, span, out, counted=True)
        elif message.visible:
            self._in_response = False
            if message.role is Role.TOOL or (
                message.role is Role.USER and message.kind is MessageKind.MESSAGE
            ):
                self._turn_input = True
                self._compaction_open = None
        out.append(MessageAdded(message=message, timestamp=ts, span=span))

    def _request(
        self, ts: str | None, span: SourceSpan, out: list[Event], *, counted: bool
    ) -> None:
        self._in_response = True
        self._requests += 1
        self._request_has_usage = False
        self._compaction_open = None
        if counted:
            self._turn_requests += 1
        out.append(RequestSent(model=self._model, timestamp=ts, span=span))


def _error_text(p: dict[str, Any]) -> str | None:
    """The message of an ``error`` event, or of a turn that ended with one."""
    error = p.get("error")
    message = error.get("message") if isinstance(error, dict) else p.get("message")
    if p.get("type") != "error" and not isinstance(error, dict):
        return None
    return message if isinstance(message, str) and message else None


def _usage(last: dict[str, Any]) -> Usage:
    total = as_int(last.get("total_tokens"))
    return Usage(
        input=as_int(last.get("input_tokens")),
        cache_read=as_int(last.get("cached_input_tokens")),
        output=as_int(last.get("output_tokens")),
        reasoning=as_int(last.get("reasoning_output_tokens")),
        total=total if "total_tokens" in last else None,
        input_includes_cache=True,
    )


def _filled(info: dict[str, Any]) -> bool:
    """Codex's bookkeeping after a context-window error: the session total set to the window
    (``fill_to_context_window``), the last usage holding only what that added."""
    window = as_int(info.get("model_context_window"))
    totals = info.get("total_token_usage")
    return window > 0 and isinstance(totals, dict) and as_int(totals.get("total_tokens")) == window


def _context_exceeded(info: Any) -> bool:
    """``codex_error_info`` naming a context-window error (a string, or a one-key object)."""
    if isinstance(info, dict):
        return CONTEXT_EXCEEDED in info
    return isinstance(info, str) and info == CONTEXT_EXCEEDED


# ------------------------------------------------------------------------------------------
# Sniffing


def sniff(head: Head) -> float:
    lines = head.lines
    if not lines:
        return 0.0
    first_line = lines[0].lstrip("\ufeff")
    try:
        first = orjson.loads(first_line)
    except orjson.JSONDecodeError:
        # A session_meta line longer than the head (big base instructions): look at its start.
        start = first_line[:1024]
        if (
            first_line.startswith("{")
            and SESSION_META_HEAD.search(start)
            and PAYLOAD_HEAD.search(start)
        ):
            return 0.95
        return 0.0
    if not isinstance(first, dict):
        return 0.0
    kind = first.get("type")
    if kind == "session_meta" and isinstance(first.get("payload"), dict):
        return 1.0
    if kind in ENVELOPE_TYPES and isinstance(first.get("payload"), dict):
        return 0.9  # a rollout whose first line is not the session_meta (cut or resumed)
    if kind is None and "id" in first and "timestamp" in first and "instructions" in first:
        if len(lines) < 2:
            return 0.8
        try:
            second = orjson.loads(lines[1])
        except orjson.JSONDecodeError:
            return 0.6
        if isinstance(second, dict) and (
            "record_type" in second or second.get("type") in KNOWN_ITEM_TYPES
        ):
            return 0.95
        return 0.6
    return 0.0


SPEC = register(
    FormatSpec(
        name="codex",
        description="OpenAI Codex CLI rollouts (session JSONL, including the legacy layout)",
        reads="~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl (and archived_sessions)",
        parser=CodexParser,
        sniff=sniff,
        default_profile="codex",
    )
)
