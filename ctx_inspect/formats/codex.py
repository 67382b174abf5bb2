"""OpenAI Codex CLI rollouts: ``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``.

Every line is an envelope ``{"timestamp", "type", "payload"}`` (0.169 adds ``ordinal`` and, on
some response items, ``metadata``). What each record becomes:

- ``session_meta``: ``SessionInfo`` (session id, ``cli_version``, originator, provider, cwd, fork
  and parent ids). Its ``base_instructions`` (newer builds) are the system prompt sent with every
  request: one SYSTEM message, kept across compactions (its id is in ``retained_ids``). The older
  ``instructions`` field repeats the injected AGENTS.md message, so it is not added again.
- ``turn_context``: ``SessionInfo(model=...)`` when the model changes, else a ``LogLine``.
- ``response_item``: the Responses API items, i.e. exactly the context. ``message`` (user /
  developer / system input, assistant output; user messages that are injected context such as
  ``<environment_context>`` or ``# AGENTS.md instructions`` are ATTACHMENT), ``reasoning``
  (THINKING), ``function_call`` / ``custom_tool_call`` / ``local_shell_call`` /
  ``web_search_call`` / ``tool_search_call`` / ``image_generation_call`` (TOOL_CALL), their
  ``*_output`` items (TOOL_RESULT), ``ghost_snapshot`` (META, not sent), ``compaction``
  (server-side compaction: an opaque SUMMARY), ``agent_message`` (inter-agent input). Unknown
  item types are kept as messages (``*_call`` as calls, ``*_output`` as results, else input).
  A ``RequestSent`` goes before the first model output of each response; a response ends at user
  input, tool output, a usage record or a new turn.
- ``event_msg`` ``token_count``: ``UsageReported`` from ``info.last_token_usage`` (never the
  cumulative ``total_token_usage``), ``input_tokens`` being the whole prompt
  (``input_includes_cache``). A token_count that repeats the previous totals (Codex re-sends it
  at the start of a turn) or has ``info: null`` (rate limits only) is a ``LogLine``. A
  ``last_token_usage`` with zero input and output but a total is Codex's own estimate of the
  context (0.169 writes one after each compaction): ``ContextMeasured``, not a usage.
  ``model_context_window`` (here or on ``task_started``) gives ``SessionInfo(context_window)``.
- ``compacted``: ``Compacted`` (everything leaves except the base instructions), then one message
  per ``replacement_history`` item (the compaction summary among them is SUMMARY), or one SUMMARY
  message with ``message`` when there is no replacement history. ``event_msg``
  ``context_compacted`` (and 0.169's ``item_completed`` of a ``ContextCompaction`` item) is a
  ``LogLine`` when the ``compacted`` line already told the story, else it is the ``Compacted``.
  The trigger is "manual" when the compaction is all its turn did (no user input, no tool output,
  no other model request, a turn started without ``turn_attribution``), else "auto".
  ``tokens_before`` is the prompt of the latest request.
- Every other ``event_msg`` (UI duplicates of the items), ``world_state``,
  ``token_usage_record`` (its ``response_id`` names the next usage's request) and unknown
  envelope types: a short ``LogLine`` tagged with the record type.

The legacy layout (mid-2025 and earlier) is read too: a bare ``{id, timestamp, instructions}``
first line, then bare response items and ``{"record_type": "state"}`` lines.

Message ids are the items' own ids; items without one get ``L<line>`` (``L<line>.<k>`` inside a
compaction's replacement history), and an id met again on a later line gets ``@L<line>`` added.

``codex exec --json`` stdout (``thread.started`` / ``item.completed`` / ``turn.completed``) is a
different stream and not read here: its only usage is per turn, summed over the turn's requests,
so it says nothing about the context size; the sniffer gives it 0.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from ctx_inspect.core.model import (
    Compacted,
    ContextMeasured,
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
    Usage,
    UsageReported,
)
from ctx_inspect.formats.base import LineParser
from ctx_inspect.formats.chat_common import (
    as_int,
    as_str,
    compact_json,
    data_url,
    text_part,
    type_name,
    unknown_part,
)
from ctx_inspect.formats.registry import FormatSpec, Head, register

ENVELOPE_TYPES = frozenset(
    {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
)
ROLES: dict[str, Role] = {
    "user": Role.USER,
    "assistant": Role.ASSISTANT,
    "developer": Role.DEVELOPER,
    "system": Role.SYSTEM,
}
TEXT_TYPES = frozenset(
    {"input_text", "output_text", "text", "summary_text", "reasoning_text", "refusal"}
)
CALL_NAMES = {
    "local_shell_call": "local_shell",
    "web_search_call": "web_search",
    "tool_search_call": "tool_search",
    "image_generation_call": "image_generation",
}
KNOWN_ITEM_TYPES = frozenset(
    {
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "ghost_snapshot",
        "compaction",
        "compaction_summary",
        "agent_message",
        *CALL_NAMES,
        "local_shell_call_output",
        "tool_search_output",
    }
)
COMPACTION_MARKERS = frozenset({"context_compacted"})
INJECTED = re.compile(r"\s*(<[A-Za-z_][\w -]*>|# AGENTS\.md instructions)")
SUMMARY_KIND = "compaction.summary"
TURN_END = frozenset({"task_complete", "turn_complete", "turn_aborted"})
CONTEXT_LABEL = "codex: last_token_usage.total_tokens"
ESTIMATE_LABEL = "codex: its estimate of the context"
WINDOW_SOURCE = (
    "Codex's token_count (model_context_window: effective_window_percent of the model's window)"
)
CONTEXT_EXCEEDED = "context_window_exceeded"
# Records written while a compaction is under way (its request, usage, result, the context it
# rebuilt): held until the compaction is complete, then given in order (see _HeldCompaction).
HELD_RECORDS = frozenset({"token_usage_record", "compacted", "world_state", "turn_context"})
HELD_EVENTS = frozenset(
    {"token_count", "thread_settings_applied", "context_compacted", "warning", "background_event"}
)
SESSION_META_HEAD = re.compile(r'"type"\s*:\s*"session_meta"')
PAYLOAD_HEAD = re.compile(r'"payload"\s*:\s*\{')


@dataclass
class _HeldCompaction:
    """A compaction under way: Codex's summarisation request (its output is marked
    ``compaction_output``), its usage, the ``compacted`` record and the estimate that follows.
    Given as: the request, the ``Compacted`` (so it answers the request: same step), the
    messages it put in the context, then the held records in their order."""

    trigger: str
    model: str | None
    span: SourceSpan
    timestamp: str | None
    events: list[Event] = field(default_factory=list)  # held, in order
    usage: dict[str, Any] | None = None
    usage_span: SourceSpan | None = None
    response_id: str | None = None
    replacement: list[MessageAdded] = field(default_factory=list)
    compacted: tuple[SourceSpan, str | None] | None = None
    after: tuple[int, SourceSpan, str | None] | None = None
    error: str | None = None


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
        self._held: _HeldCompaction | None = None
        self._reported_usage: Any = None  # a usage record already given as UsageReported
        self._turn_rejected = False  # a context-window refusal was given for this turn
        self._instructions: tuple[str, str] | None = None  # (message id, text)
        # Shared with the fresh parsers of messages_at so re-reads give the same ids and names.
        self._tool_names: dict[str, str] = {}
        self._id_owner: dict[str, tuple[int, int]] = {}

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
            if self._holds(kind, payload, obj):
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
        fresh._tool_names = self._tool_names
        fresh._id_owner = self._id_owner
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
            msg_id = self._claim_id(None, span.line, 0, "instructions")
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
        retained = (self._instructions[0],) if self._instructions else ()
        return Compacted(
            trigger=self._trigger(),
            tokens_before=self._last_prompt,
            retained_ids=retained,
            keep_system=False,
            timestamp=ts,
            span=span,
        )

    def _holds(self, kind: Any, payload: Any, obj: dict[str, Any]) -> bool:
        """Whether a record belongs to the compaction under way."""
        if not isinstance(payload, dict) or not isinstance(kind, str):
            return False
        if kind in HELD_RECORDS:
            return True
        if kind == "response_item":
            meta = obj.get("metadata")
            return isinstance(meta, dict) and meta.get("compaction_output") is True
        if kind != "event_msg":
            return False
        event = payload.get("type")
        if isinstance(event, str) and event in HELD_EVENTS:
            return True
        item = payload.get("item")
        return event in ("item_started", "item_completed") and (
            isinstance(item, dict) and item.get("type") == "ContextCompaction"
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
        request = RequestSent(
            model=held.model, compaction=True, timestamp=held.timestamp, span=held.span
        )
        usage = _usage(held.usage) if held.usage is not None else None
        retained = (self._instructions[0],) if self._instructions else ()
        failed = held.compacted is None
        span, ts = held.compacted if held.compacted is not None else (held.span, held.timestamp)
        compacted = Compacted(
            trigger=held.trigger,
            tokens_before=usage.prompt_tokens if usage is not None else None,
            tokens_after=None if failed or held.after is None else held.after[0],
            summary_tokens=usage.output if usage is not None and usage.output else None,
            retained_ids=retained,
            keep_system=False,
            added_ids=tuple(m.message.id for m in held.replacement),
            failed=failed,
            error=(held.error or "no compacted record followed the summary") if failed else None,
            timestamp=ts,
            span=span,
        )
        out: list[Event] = [request, compacted, *held.replacement, *held.events]
        if usage is not None:
            self._last_prompt = usage.prompt_tokens
            out.append(
                UsageReported(
                    usage=usage,
                    model=held.model,
                    request_id=held.response_id,
                    timestamp=held.timestamp,
                    span=held.usage_span,
                )
            )
        if not failed and held.after is not None:
            tokens, after_span, after_ts = held.after
            out.append(
                ContextMeasured(
                    tokens=tokens,
                    limit=self._window,
                    label=f"{ESTIMATE_LABEL} after compaction",
                    timestamp=after_ts,
                    span=after_span,
                )
            )
        self._compaction_open = None if failed else "line"
        return _in_time_order(out)

    def _compacted(
        self, p: dict[str, Any], span: SourceSpan, ts: str | None, out: list[Event]
    ) -> None:
        self._in_response = False
        held = self._held
        if held is not None:
            held.compacted = (span, ts)
            held.replacement = self._replacement(p, span, ts)
            out.append(LogLine(text="compacted", tag="compacted", timestamp=ts, span=span))
            return
        if self._compaction_open != "marker":
            out.append(self._compaction(span, ts))
        self._compaction_open = "line"
        out.extend(self._replacement(p, span, ts))

    def _replacement(
        self, p: dict[str, Any], span: SourceSpan, ts: str | None
    ) -> list[MessageAdded]:
        """The context a ``compacted`` record rebuilt: its replacement history (the summary
        among it), else its summary alone."""
        out: list[MessageAdded] = []
        summary = p.get("message")
        summary_text = summary if isinstance(summary, str) else ""
        history = p.get("replacement_history")
        if isinstance(history, list):
            for k, item in enumerate(history, start=1):
                if not isinstance(item, dict):
                    part = unknown_part(item)
                    msg_id = self._claim_id(None, span.line, k, "item")
                    message = Message(
                        id=msg_id,
                        role=Role.USER,
                        kind=MessageKind.ATTACHMENT,
                        parts=(part,),
                        timestamp=ts,
                    )
                    out.append(MessageAdded(message=message, timestamp=ts, span=span))
                    continue
                converted = self._convert(item, span.line, k, ts)
                message = converted[0]
                if message.kind is not MessageKind.SUMMARY and _is_summary(
                    item, message, summary_text
                ):
                    message = message.model_copy(update={"kind": MessageKind.SUMMARY})
                out.append(MessageAdded(message=message, timestamp=ts, span=span))
            return out
        if summary_text:
            msg_id = self._claim_id(None, span.line, 1, "summary")
            message = Message(
                id=msg_id,
                role=Role.USER,
                kind=MessageKind.SUMMARY,
                parts=(text_part(summary_text),),
                timestamp=ts,
            )
            out.append(MessageAdded(message=message, timestamp=ts, span=span))
        return out

    # -- response items -------------------------------------------------------------------

    def _response_item(
        self,
        p: dict[str, Any],
        envelope: dict[str, Any],
        span: SourceSpan,
        ts: str | None,
        out: list[Event],
    ) -> None:
        message, is_output = self._convert(p, span.line, 0, ts)
        meta = envelope.get("metadata")
        if isinstance(meta, dict) and meta.get("compaction_output") is True:
            # Codex's summarisation request answered: the summary it wrote is not kept as is
            # (the compacted record puts it in the context), so it is not sent again
            hidden = message.model_copy(update={"visible": False, "kind": MessageKind.SUMMARY})
            if self._held is None:
                self._held = _HeldCompaction(
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

    def _convert(
        self, p: dict[str, Any], line: int, index: int, ts: str | None
    ) -> tuple[Message, bool]:
        """One response item as a message, and whether it is model output."""
        kind = p.get("type")
        kind = kind if isinstance(kind, str) else "message"
        msg_id = self._claim_id(as_str(p.get("id")), line, index, "")
        role = Role.ASSISTANT
        msg_kind = MessageKind.MESSAGE
        parts: list[Part]
        visible = True
        output = False
        name: str | None = None
        if kind == "message":
            role_name = p.get("role")
            role = ROLES.get(role_name, Role.USER) if isinstance(role_name, str) else Role.USER
            parts = _content_parts(p.get("content"))
            output = role is Role.ASSISTANT
            if role is Role.USER and _injected(parts):
                msg_kind = MessageKind.ATTACHMENT
            if role is Role.USER and _has_kind(p, SUMMARY_KIND):
                msg_kind = MessageKind.SUMMARY
        elif kind == "reasoning":
            parts = _reasoning_parts(p)
            output = True
        elif (
            kind in ("function_call", "custom_tool_call")
            or kind in CALL_NAMES
            or (kind.endswith("_call") and kind not in KNOWN_ITEM_TYPES)
        ):
            parts = [self._call_part(kind, p)]
            msg_kind = MessageKind.TOOL_CALL
            output = True
        elif kind.endswith("_output"):
            role = Role.TOOL
            msg_kind = MessageKind.TOOL_RESULT
            parts = self._result_parts(p)
        elif kind == "ghost_snapshot":
            role = Role.USER
            msg_kind = MessageKind.META
            visible = False
            parts = [Part(type=PartType.ATTACHMENT, text=compact_json(p.get("ghost_commit")))]
        elif kind in ("compaction", "compaction_summary"):
            role = Role.ASSISTANT
            msg_kind = MessageKind.SUMMARY
            parts = [_opaque(p)]
        elif kind == "agent_message":
            role = Role.USER
            parts = _content_parts(p.get("content"))
            name = as_str(p.get("author"))
        else:  # an item type this reader does not know: kept whole, as input
            role_name = p.get("role")
            role = ROLES.get(role_name, Role.USER) if isinstance(role_name, str) else Role.USER
            msg_kind = MessageKind.ATTACHMENT
            parts = [unknown_part(p)]
        message = Message(
            id=msg_id,
            role=role,
            kind=msg_kind,
            parts=tuple(parts),
            visible=visible,
            timestamp=ts,
            model=self._model if output else None,
            name=name,
        )
        return message, output

    def _call_part(self, kind: str, p: dict[str, Any]) -> Part:
        call_id = as_str(p.get("call_id")) or as_str(p.get("id"))
        name = as_str(p.get("name")) or CALL_NAMES.get(kind) or kind.removesuffix("_call")
        if call_id:
            self._tool_names.setdefault(call_id, name)
        if kind == "function_call":
            args = p.get("arguments")
        elif kind == "custom_tool_call":
            args = p.get("input")
        elif kind in ("web_search_call", "local_shell_call"):
            args = p.get("action")
        elif kind == "image_generation_call":
            args = p.get("revised_prompt")
        else:
            args = p.get("arguments", p.get("action", p.get("input")))
        arguments = (
            args if isinstance(args, str) else compact_json(args) if args is not None else ""
        )
        data_bytes = 0
        result = p.get("result")
        if kind == "image_generation_call" and isinstance(result, str):
            data_bytes = len(result)
        return Part(
            type=PartType.TOOL_CALL,
            tool_name=name,
            call_id=call_id,
            arguments=arguments,
            data_bytes=data_bytes,
        )

    def _result_parts(self, p: dict[str, Any]) -> list[Part]:
        call_id = as_str(p.get("call_id"))
        tool_name = self._tool_names.get(call_id) if call_id else None
        output = p.get("output")
        is_error = False
        if "output" not in p and "tools" in p:  # tool_search_output
            output = compact_json(p.get("tools"))
        if isinstance(output, dict):
            is_error = output.get("success") is False
            output = output.get("content", output.get("body", compact_json(output)))
        texts: list[str] = []
        extras: list[Part] = []
        if isinstance(output, str):
            texts.append(output)
        elif isinstance(output, list):
            for part in _content_parts(output):
                if part.type is PartType.TEXT:
                    texts.append(part.text)
                else:
                    extras.append(part)
        elif output is not None:
            texts.append(compact_json(output))
        result = Part(
            type=PartType.TOOL_RESULT,
            text="\n".join(texts),
            tool_name=tool_name,
            call_id=call_id,
            is_error=is_error,
        )
        return [result, *extras]

    def _claim_id(self, own: str | None, line: int, index: int, label: str) -> str:
        """A session-unique id: the item's own when it is first met here, else line-based."""
        if own is None:
            base = f"L{line}" if index == 0 else f"L{line}.{index}"
            return f"{base}.{label}" if label else base
        where = (line, index)
        owner = self._id_owner.setdefault(own, where)
        if owner == where:
            return own
        return f"{own}@L{line}" if index == 0 else f"{own}@L{line}.{index}"


def _error_text(p: dict[str, Any]) -> str | None:
    """The message of an ``error`` event, or of a turn that ended with one."""
    error = p.get("error")
    message = error.get("message") if isinstance(error, dict) else p.get("message")
    if p.get("type") != "error" and not isinstance(error, dict):
        return None
    return message if isinstance(message, str) and message else None


def _in_time_order(events: list[Event]) -> list[Event]:
    """``events`` with no timestamp earlier than the one before (a compaction is given as its
    request and then its result, records written a moment apart: merged with another stream,
    ordering by time must keep them together)."""
    latest: str | None = None
    out: list[Event] = []
    for event in events:
        stamp = event.timestamp
        if stamp is not None and latest is not None and stamp < latest:
            event = event.model_copy(update={"timestamp": latest})
        elif stamp is not None:
            latest = stamp
        out.append(event)
    return out


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


def _content_parts(content: Any) -> list[Part]:
    if isinstance(content, str):
        return [text_part(content)] if content else []
    if not isinstance(content, list):
        return [] if content is None else [unknown_part(content)]
    parts: list[Part] = []
    for item in content:
        if item is None:
            continue
        if isinstance(item, str):
            parts.append(text_part(item))
            continue
        if not isinstance(item, dict):
            parts.append(unknown_part(item))
            continue
        kind = as_str(item.get("type"))
        text = item.get("text", item.get("refusal"))
        if kind in TEXT_TYPES and isinstance(text, str):
            parts.append(text_part(text))
        elif kind in ("input_image", "image_url", "output_image"):
            url = item.get("image_url")
            if isinstance(url, dict):
                url = url.get("url")
            media, size = data_url(url) if isinstance(url, str) else (None, 0)
            parts.append(Part(type=PartType.IMAGE, media_type=media, data_bytes=size))
        elif kind == "encrypted_content":
            parts.append(_opaque(item))
        else:
            parts.append(unknown_part(item))
    return parts


def _reasoning_parts(p: dict[str, Any]) -> list[Part]:
    texts: list[str] = []
    for key in ("summary", "content"):
        value = p.get(key)
        if isinstance(value, list):
            texts.extend(
                item["text"]
                for item in value
                if isinstance(item, dict) and isinstance(item.get("text"), str)
            )
        elif isinstance(value, str) and value:
            texts.append(value)
    encrypted = p.get("encrypted_content")
    size = len(encrypted) if isinstance(encrypted, str) else 0
    return [Part(type=PartType.THINKING, text="\n".join(texts), data_bytes=size)]


def _opaque(p: dict[str, Any]) -> Part:
    """Encrypted content: only its size is known."""
    encrypted = p.get("encrypted_content")
    size = len(encrypted) if isinstance(encrypted, str) else 0
    return Part(type=PartType.ATTACHMENT, data_bytes=size)


def _injected(parts: list[Part]) -> bool:
    first = next((p.text for p in parts if p.type is PartType.TEXT), None)
    return first is not None and INJECTED.match(first) is not None


def _has_kind(p: dict[str, Any], wanted: str) -> bool:
    meta = p.get("internal_chat_message_metadata_passthrough")
    kinds = meta.get("content_item_kinds") if isinstance(meta, dict) else None
    return isinstance(kinds, list) and wanted in kinds


def _is_summary(item: dict[str, Any], message: Message, summary: str) -> bool:
    if item.get("type") in ("compaction", "compaction_summary"):
        return True
    if message.role is not Role.USER or not summary:
        return False
    return message.text.strip() == summary.strip()


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
