"""OpenHands event streams and evaluation output.

Inputs read:

- an event stream as a JSON array of events, or as JSON Lines with one event per line;
- a session folder ``~/.openhands/sessions/<sid>/`` (or its ``events/`` folder) holding one
  event per file, ``events/<n>.json``: read whole (a snapshot, ``folder=True``), in number order;
- evaluation and resolver output, JSON Lines with one record per line (``instance_id`` or
  ``issue``, ``history``, ``metrics``). Each record is a run of its own; one file cannot be
  split into several sessions, so each record is its own thread ``instance-<instance_id>``
  (``instance-<issue number>`` for resolver records, ``instance-<line>`` when neither exists)
  within one session, with message ids prefixed by the thread name.

Events (``id``, ``timestamp``, ``source``, ``message``, then ``action`` + ``args`` or
``observation`` + ``content`` / ``extras`` / ``cause``; older resolver output flattens ``args``
into the event and has no ``id`` or ``source``) become:

- ``system`` action: the SYSTEM message (``args.content``); its ``tools`` give ``tool_count`` /
  ``tools_chars`` and ``openhands_version`` the version.
- ``message`` action: a user message, or an assistant message (model output) from the agent.
- every other agent action (``run``, ``read``, ``edit``, ``think``, ``finish``, ``browse``,
  ``run_ipython``, MCP calls ...): an assistant TOOL_CALL message. With
  ``tool_call_metadata.model_response`` (a raw ``chat.completion``), the first action of each
  response gets ``RequestSent`` + ``UsageReported`` (OpenAI usage: ``prompt_tokens`` is the whole
  prompt) and the response's text; the other actions of the same response
  (``total_calls_in_response``) add only their tool call. Without it, every agent action is a
  request of its own, its ``thought`` being the text.
- observations: TOOL_RESULT messages (``content``, tool name and call id from
  ``tool_call_metadata``); ``error`` without a tool call is a user message (OpenHands sends it
  so); ``recall`` (workspace context, microagent knowledge) is a user ATTACHMENT;
  ``agent_condensation`` a SUMMARY.
- ``condensation`` action (``forgotten_event_ids``, or ``forgotten_events_start_id`` ..
  ``forgotten_events_end_id``): ``Compacted`` keeping exactly the messages still in context whose
  events were not forgotten (tracked here), then ``summary`` as a SUMMARY message. Trigger
  "manual" after a ``condensation_request``, else "auto".
- ``recall`` and ``change_agent_state`` actions, ``condensation_request``,
  ``agent_state_changed`` and ``null`` observations: ``LogLine`` (never sent to the model).
- ``llm_metrics`` (accumulated usage) and a record's ``metrics``: ``SessionInfo`` extra, never
  context (the per-call figures come from each ``model_response``).

One format, one module, longer than most: every container above holds the same events, and the
reader, the session-folder snapshot and the sniffer all read that one vocabulary (the list
above). Most of the length is the event kinds themselves, one method each; split by container
or by kind, each part would need the others' knowledge of the events.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ctx_inspect.core.model import (
    Compacted,
    Event,
    LogLine,
    Message,
    MessageAdded,
    MessageKind,
    ParseIssue,
    Part,
    PartType,
    RequestSent,
    Role,
    SessionInfo,
    SourceSpan,
    UsageReported,
)
from ctx_inspect.formats.base import LineParser, excerpt
from ctx_inspect.formats.chat_common import (
    as_str,
    compact_json,
    kind_for,
    text_part,
    type_name,
)
from ctx_inspect.formats.json_prefix import parse_prefix
from ctx_inspect.formats.openai_chat import openai_usage
from ctx_inspect.formats.registry import FormatSpec, Head, SnapshotSession, register

NOT_SENT_ACTIONS = frozenset(
    {"recall", "change_agent_state", "condensation_request", "null", "pause", "resume"}
)
NOT_SENT_OBSERVATIONS = frozenset({"agent_state_changed", "null", "user_rejected_placeholder"})
EVENT_META_KEYS = frozenset(
    {
        "id",
        "timestamp",
        "source",
        "message",
        "action",
        "observation",
        "cause",
        "tool_call_metadata",
        "llm_metrics",
        "timeout",
        "thought",
        "is_confirmed",
        "action_risk",
        "security_risk",
        "keep_prompt",
        "hidden",
    }
)
RECORD_KEYS = ("instance_id", "issue", "instruction", "metrics")
DIGITS = re.compile(r"\d+")


@dataclass
class _Thread:
    name: str = "main"
    prefix: str = ""
    model: str | None = None
    live: dict[str, str] = field(default_factory=dict)  # event key -> message id, in order
    last_response: str | None = None
    condense_requested: bool = False
    metrics_seen: Any = None
    count: int = 0


def is_event(value: Any) -> bool:
    return isinstance(value, dict) and ("action" in value or "observation" in value)


def is_record(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("history"), list)
        and any(key in value for key in RECORD_KEYS)
    )


class OpenHandsParser(LineParser):
    format_name = "openhands"

    def __init__(self, source: int = 0, path: str = "") -> None:
        super().__init__(source, path)
        self._mode = "undecided"  # then "lines" or "document"
        self._doc: list[tuple[bytes, SourceSpan]] = []
        self._main = _Thread()
        self._records = 0
        self._seen_model: str | None = None
        # Shared with the fresh parsers of messages_at, so a re-read gives the same messages.
        self._first_of_response: dict[tuple[str, str], str] = {}
        self._tool_names: dict[str, str] = {}
        self._thread_owner: dict[str, int] = {}  # record thread name -> its line (or number)

    # -- lines and documents ----------------------------------------------------------------

    def parse_line(self, line: bytes, span: SourceSpan) -> Iterable[Event]:
        out: list[Event] = []
        if line.startswith(b"\xef\xbb\xbf"):
            line = line[3:]
        if self._mode == "document":
            self._doc.append((line, span))
            return out
        if self._mode == "undecided":
            stripped = line.lstrip()
            try:
                orjson.loads(line)
            except orjson.JSONDecodeError:
                if stripped[:1] in (b"[", b"{"):
                    try:
                        line.decode("utf-8")
                    except UnicodeDecodeError:
                        pass  # a one-line record with bad bytes: read as a line below
                    else:
                        self._mode = "document"
                        self._doc.append((line, span))
                        return out
            self._mode = "lines"
        value = self.load_json(line, span, out)
        if value is None:
            if not out:
                out.append(self.issue(span, "not an event (null)", line))
            return out
        self._value(value, span, out, line)
        return out

    def end_of_input(self) -> Iterable[Event]:
        if self._mode != "document":
            return ()
        out: list[Event] = []
        lines = self._doc
        self._doc = []
        data = b"\n".join(line for line, _ in lines)
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            value = self._replaced(data, lines, out)
            if value is None:
                out.extend(self._broken_document(lines, exc))
                return out
        self._document(value, _whole(lines), out)
        return out

    def _replaced(
        self, data: bytes, lines: list[tuple[bytes, SourceSpan]], out: list[Event]
    ) -> Any:
        """The document with invalid UTF-8 replaced (and flagged), or None."""
        try:
            data.decode("utf-8")
            return None
        except UnicodeDecodeError:
            pass
        try:
            value = orjson.loads(data.decode("utf-8", "replace"))
        except orjson.JSONDecodeError:
            return None
        for line, span in lines:
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                out.append(self.issue(span, "invalid UTF-8 replaced with U+FFFD", line))
                break
        return value

    def _broken_document(
        self, lines: list[tuple[bytes, SourceSpan]], exc: orjson.JSONDecodeError
    ) -> list[Event]:
        """A document that does not parse: JSON Lines after all when most lines parse alone,
        else one issue where the parser stopped."""
        good = sum(1 for line, _ in lines if _loads(line) is not None)
        if good * 2 >= len(lines) and good > 0:
            out: list[Event] = []
            self._mode = "lines"
            for line, span in lines:
                value = self.load_json(line, span, out)
                if value is not None:
                    self._value(value, span, out, line)
            return out
        pos = exc.pos
        where = lines[-1]
        for line, span in lines:
            if pos <= len(line):
                where = (line, span)
                break
            pos -= len(line) + 1
        at = (where[1].line, where[1].offset + pos)
        return [self.issue(_whole(lines), f"not valid JSON ({exc.msg})", where[0], at=at)]

    def messages_at(self, data: bytes, span: SourceSpan) -> list[Message]:
        """Re-read one line (an event or a record) with the ids the first read gave it."""
        fresh = type(self)(self.source, self.path)
        fresh._mode = "lines"
        fresh._line_no = max(span.line - 1, 0)
        fresh._offset = span.offset
        fresh._first_of_response = self._first_of_response
        fresh._tool_names = self._tool_names
        fresh._thread_owner = self._thread_owner
        events = [*fresh.feed(data + b"\n"), *fresh.finish()]
        return [e.message for e in events if isinstance(e, MessageAdded)]

    # -- values ---------------------------------------------------------------------------

    def _value(self, value: Any, span: SourceSpan, out: list[Event], raw: bytes) -> None:
        if is_record(value):
            self._record(value, span, out)
        elif is_event(value):
            self._event(value, self._main, f"L{span.line}", span, out)
        elif isinstance(value, list) and any(is_event(item) for item in value):
            for index, item in enumerate(value):
                if is_event(item):
                    self._event(item, self._main, f"L{span.line}.{index}", span, out)
                else:
                    out.append(self.issue(span, f"[{index}]: not an OpenHands event", raw))
        else:
            reason = (
                f"not an OpenHands event ({type_name(value)})"
                if not isinstance(value, dict)
                else f"not an OpenHands event (keys: {', '.join(list(value)[:6]) or 'none'})"
            )
            out.append(self.issue(span, reason, raw))

    def _document(self, value: Any, whole: SourceSpan, out: list[Event]) -> None:
        if isinstance(value, dict) and is_record(value):
            self._record(value, None, out)
            return
        if isinstance(value, dict) and is_event(value):
            value = [value]
        if not isinstance(value, list):
            reason = f"not an OpenHands event list ({type_name(value)})"
            out.append(self.issue(whole, reason, _show(value)))
            return
        for index, item in enumerate(value):
            if is_record(item):
                self._record(item, None, out)
            elif is_event(item):
                self._event(item, self._main, f"i{index}", None, out)
            else:
                out.append(self._doc_issue(f"[{index}]: not an OpenHands event", item))

    def read_events(self, values: list[tuple[str, Any]]) -> list[Event]:
        """Events read from separate files (a session folder), in order."""
        out: list[Event] = []
        for label, value in values:
            if is_event(value):
                self._event(value, self._main, label, None, out)
            else:
                out.append(
                    ParseIssue(file=label, reason="not an OpenHands event", excerpt=_show(value))
                )
        return out

    def _doc_issue(self, reason: str, value: Any) -> ParseIssue:
        return ParseIssue(file=self.path, reason=reason, excerpt=_show(value))

    # -- evaluation records -----------------------------------------------------------------

    def _record(self, value: dict[str, Any], span: SourceSpan | None, out: list[Event]) -> None:
        self._records += 1
        ident = as_str(value.get("instance_id"))
        issue = value.get("issue")
        if ident is None and isinstance(issue, dict) and issue.get("number") is not None:
            ident = str(issue["number"])
        where = span.line if span is not None else self._records
        if ident is None:
            ident = str(where)
        name = f"instance-{ident}"
        if self._thread_owner.setdefault(name, where) != where:  # the same instance again
            name = f"{name}@{where}"
        thread = _Thread(name=name, prefix=f"{name}:")
        metadata = value.get("metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        llm = metadata.get("llm_config")
        thread.model = as_str(llm.get("model")) if isinstance(llm, dict) else None
        extra: dict[str, Any] = {}
        metrics = value.get("metrics")
        if isinstance(metrics, dict):
            summary = {
                key: metrics[key]
                for key in ("accumulated_cost", "accumulated_token_usage")
                if key in metrics
            }
            usages = metrics.get("token_usages")
            if isinstance(usages, list):
                summary["calls"] = len(usages)
            costs = metrics.get("costs")
            if isinstance(costs, list):
                summary["cost_entries"] = len(costs)
            extra["metrics"] = summary
        for key in ("agent_class", "max_iterations"):
            if metadata.get(key) is not None:
                extra[key] = metadata[key]
        if value.get("error") is not None:
            extra["error"] = value["error"]
        out.append(
            SessionInfo(
                agent="openhands",
                model=thread.model,
                extra={f"run[{thread.name}]": extra},
                span=span,
            )
        )
        history = value.get("history")
        assert isinstance(history, list)
        for index, event in enumerate(history):
            if isinstance(event, list):  # very old output: [action, observation] pairs
                for k, item in enumerate(event):
                    if is_event(item):
                        self._event(item, thread, f"i{index}.{k}", span, out, record=True)
                continue
            if not is_event(event):
                reason = f"{thread.name} history[{index}]: not an OpenHands event"
                if span is not None:
                    out.append(self.issue(span, reason, _show(event)))
                else:
                    out.append(self._doc_issue(reason, event))
                continue
            self._event(event, thread, f"i{index}", span, out, record=True)
        if thread.metrics_seen is not None:
            out.append(
                SessionInfo(extra={f"llm_metrics[{thread.name}]": thread.metrics_seen}, span=span)
            )

    # -- one event ------------------------------------------------------------------------

    def _event(
        self,
        ev: dict[str, Any],
        thread: _Thread,
        fallback: str,
        span: SourceSpan | None,
        out: list[Event],
        *,
        record: bool = False,
    ) -> None:
        raw_id = ev.get("id")
        key = str(raw_id) if isinstance(raw_id, int | str) and raw_id != "" else fallback
        msg_id = f"{thread.prefix}e{key}" if key == str(raw_id) else f"{thread.prefix}{key}"
        ts = as_str(ev.get("timestamp"))
        self._metrics(ev, thread, span, ts, out, record)
        if "action" in ev:
            self._action(ev, thread, key, msg_id, span, ts, out)
        else:
            self._observation(ev, thread, key, msg_id, span, ts, out)

    def _metrics(
        self,
        ev: dict[str, Any],
        thread: _Thread,
        span: SourceSpan | None,
        ts: str | None,
        out: list[Event],
        record: bool,
    ) -> None:
        metrics = ev.get("llm_metrics")
        if not isinstance(metrics, dict):
            return
        summary = {
            k: metrics[k] for k in ("accumulated_cost", "accumulated_token_usage") if k in metrics
        }
        if not summary or summary == thread.metrics_seen:
            return
        thread.metrics_seen = summary
        if not record:
            key = "llm_metrics" if thread.name == "main" else f"llm_metrics[{thread.name}]"
            out.append(SessionInfo(extra={key: summary}, timestamp=ts, span=span))

    def _action(
        self,
        ev: dict[str, Any],
        thread: _Thread,
        key: str,
        msg_id: str,
        span: SourceSpan | None,
        ts: str | None,
        out: list[Event],
    ) -> None:
        action = ev.get("action")
        action = action if isinstance(action, str) else "unknown"
        args = ev.get("args")
        if not isinstance(args, dict):
            args = {k: v for k, v in ev.items() if k not in EVENT_META_KEYS}
            if "thought" in ev:
                args["thought"] = ev["thought"]
        source = _source(ev, action, args)
        if action == "system":
            self._system(ev, args, thread, key, msg_id, span, ts, out)
            return
        if action == "condensation":
            self._condensation(args, thread, key, msg_id, span, ts, out)
            return
        if action == "condensation_request":
            thread.condense_requested = True
        if action in NOT_SENT_ACTIONS or source not in ("agent", "user"):
            out.append(_log(f"action {action}", action, ts, span, thread))
            return
        if source == "user":
            if action != "message":
                out.append(_log(f"user action {action}", action, ts, span, thread))
                return
            text = _text(args.get("content"), ev.get("message"))
            parts = [text_part(text), *_images(args)]
            message = Message(
                id=msg_id, role=Role.USER, parts=tuple(parts), timestamp=ts, thread=thread.name
            )
            self._add(message, key, thread, span, ts, out)
            return
        self._agent_output(ev, action, args, thread, key, msg_id, span, ts, out)

    def _system(
        self,
        ev: dict[str, Any],
        args: dict[str, Any],
        thread: _Thread,
        key: str,
        msg_id: str,
        span: SourceSpan | None,
        ts: str | None,
        out: list[Event],
    ) -> None:
        extra: dict[str, Any] = {}
        tools = args.get("tools")
        if isinstance(tools, list):
            extra["tool_count"] = len(tools)
            extra["tools_chars"] = sum(len(compact_json(tool)) for tool in tools)
        elif isinstance(tools, str) and tools:
            extra["tools_chars"] = len(tools)
        if args.get("agent_class") is not None:
            extra["agent_class"] = args["agent_class"]
        if thread.name != "main" and extra:
            extra = {f"tools[{thread.name}]": extra}
        out.append(
            SessionInfo(
                agent="openhands",
                version=as_str(args.get("openhands_version")),
                extra=extra,
                timestamp=ts,
                span=span,
            )
        )
        text = _text(args.get("content"), ev.get("message"))
        message = Message(
            id=msg_id,
            role=Role.SYSTEM,
            parts=(text_part(text),),
            timestamp=ts,
            thread=thread.name,
        )
        self._add(message, key, thread, span, ts, out)

    def _agent_output(
        self,
        ev: dict[str, Any],
        action: str,
        args: dict[str, Any],
        thread: _Thread,
        key: str,
        msg_id: str,
        span: SourceSpan | None,
        ts: str | None,
        out: list[Event],
    ) -> None:
        meta = ev.get("tool_call_metadata")
        meta = meta if isinstance(meta, dict) else {}
        response = meta.get("model_response")
        response = response if isinstance(response, dict) else {}
        rid = as_str(response.get("id"))
        model = as_str(response.get("model")) or thread.model
        first = True
        if rid is not None:
            owner = self._first_of_response.setdefault((thread.name, rid), key)
            first = owner == key
        if rid is None or rid != thread.last_response:
            out.append(
                RequestSent(
                    model=model, request_id=rid, thread=thread.name, timestamp=ts, span=span
                )
            )
            usage = openai_usage(response.get("usage"))
            if usage is not None:
                out.append(
                    UsageReported(
                        usage=usage,
                        model=model,
                        request_id=rid,
                        thread=thread.name,
                        timestamp=ts,
                        span=span,
                    )
                )
        thread.last_response = rid
        if model:
            self._seen_model = model
        parts: list[Part] = []
        choice_message = _choice_message(response)
        if first:
            text = as_str(choice_message.get("content")) if choice_message else None
            if text is None:
                thought = args.get("thought")
                text = thought if isinstance(thought, str) and thought else None
            if text is None and action in ("message", "finish"):
                text = _text(args.get("content", args.get("final_thought")), ev.get("message"))
            if text:
                parts.append(text_part(text))
        if action == "message":
            if not parts:
                parts.append(text_part(_text(args.get("content"), ev.get("message"))))
            parts.extend(_images(args))
        else:
            parts.append(self._call_part(action, args, meta, choice_message))
        message = Message(
            id=msg_id,
            role=Role.ASSISTANT,
            kind=kind_for(Role.ASSISTANT, parts),
            parts=tuple(parts),
            timestamp=ts,
            model=model,
            thread=thread.name,
        )
        self._add(message, key, thread, span, ts, out)

    def _call_part(
        self,
        action: str,
        args: dict[str, Any],
        meta: dict[str, Any],
        choice_message: dict[str, Any] | None,
    ) -> Part:
        call_id = as_str(meta.get("tool_call_id"))
        name = as_str(meta.get("function_name")) or action
        arguments: str | None = None
        calls = choice_message.get("tool_calls") if choice_message else None
        if isinstance(calls, list):
            for call in calls:
                if isinstance(call, dict) and call.get("id") == call_id:
                    function = call.get("function")
                    if isinstance(function, dict):
                        value = function.get("arguments")
                        arguments = value if isinstance(value, str) else compact_json(value)
                    break
        if arguments is None:
            arguments = compact_json({k: v for k, v in args.items() if k != "thought"})
        if call_id:
            self._tool_names.setdefault(call_id, name)
        return Part(type=PartType.TOOL_CALL, tool_name=name, call_id=call_id, arguments=arguments)

    def _observation(
        self,
        ev: dict[str, Any],
        thread: _Thread,
        key: str,
        msg_id: str,
        span: SourceSpan | None,
        ts: str | None,
        out: list[Event],
    ) -> None:
        obs = ev.get("observation")
        obs = obs if isinstance(obs, str) else "unknown"
        if obs in NOT_SENT_OBSERVATIONS:
            out.append(_log(f"observation {obs}", obs, ts, span, thread))
            return
        content = ev.get("content")
        text = (
            content
            if isinstance(content, str)
            else ""
            if content is None
            else compact_json(content)
        )
        meta = ev.get("tool_call_metadata")
        meta = meta if isinstance(meta, dict) else {}
        call_id = as_str(meta.get("tool_call_id"))
        if obs == "recall":
            extras = ev.get("extras")
            shown = (
                {k: v for k, v in extras.items() if v not in (None, "", [], {})}
                if isinstance(extras, dict)
                else {}
            )
            body = compact_json(shown) if shown else text
            message = Message(
                id=msg_id,
                role=Role.USER,
                kind=MessageKind.ATTACHMENT,
                parts=(text_part(body),),
                timestamp=ts,
                thread=thread.name,
            )
        elif obs == "agent_condensation":
            message = Message(
                id=msg_id,
                role=Role.USER,
                kind=MessageKind.SUMMARY,
                parts=(text_part(text),),
                timestamp=ts,
                thread=thread.name,
            )
        elif obs == "error" and call_id is None:
            message = Message(
                id=msg_id,
                role=Role.USER,
                parts=(text_part(text),),
                timestamp=ts,
                thread=thread.name,
            )
        else:
            name = (
                as_str(meta.get("function_name"))
                or (self._tool_names.get(call_id) if call_id else None)
                or obs
            )
            part = Part(
                type=PartType.TOOL_RESULT,
                text=text,
                tool_name=name,
                call_id=call_id,
                is_error=obs == "error" or ev.get("success") is False,
            )
            message = Message(
                id=msg_id,
                role=Role.TOOL,
                kind=MessageKind.TOOL_RESULT,
                parts=(part,),
                timestamp=ts,
                thread=thread.name,
            )
        self._add(message, key, thread, span, ts, out)

    def _condensation(
        self,
        args: dict[str, Any],
        thread: _Thread,
        key: str,
        msg_id: str,
        span: SourceSpan | None,
        ts: str | None,
        out: list[Event],
    ) -> None:
        forgotten: set[str] = set()
        ids = args.get("forgotten_event_ids")
        if isinstance(ids, list):
            forgotten.update(str(i) for i in ids if isinstance(i, int | str))
        start = args.get("forgotten_events_start_id")
        end = args.get("forgotten_events_end_id")
        if isinstance(start, int) and isinstance(end, int) and end >= start:
            forgotten.update(
                k for k in thread.live if DIGITS.fullmatch(k) and start <= int(k) <= end
            )
        before = len(thread.live)
        thread.live = {k: m for k, m in thread.live.items() if k not in forgotten}
        summary = args.get("summary")
        out.append(
            Compacted(
                trigger="manual" if thread.condense_requested else "auto",
                messages_before=before,
                messages_after=len(thread.live),
                retained_ids=tuple(thread.live.values()),
                keep_system=False,
                timestamp=ts,
                span=span,
                thread=thread.name,
            )
        )
        thread.condense_requested = False
        if isinstance(summary, str) and summary:
            message = Message(
                id=f"{msg_id}.summary",
                role=Role.USER,
                kind=MessageKind.SUMMARY,
                parts=(text_part(summary),),
                timestamp=ts,
                thread=thread.name,
            )
            self._add(message, f"{key}.summary", thread, span, ts, out)

    def _add(
        self,
        message: Message,
        key: str,
        thread: _Thread,
        span: SourceSpan | None,
        ts: str | None,
        out: list[Event],
    ) -> None:
        if message.visible:
            thread.live[key] = message.id
        out.append(MessageAdded(message=message, timestamp=ts, span=span))


def _source(ev: dict[str, Any], action: str, args: dict[str, Any]) -> str:
    source = ev.get("source")
    if isinstance(source, str):
        return source
    if action == "message":  # flattened resolver output names no source
        return "agent" if args.get("wait_for_response") is True else "user"
    return "agent"


def _text(value: Any, fallback: Any) -> str:
    if isinstance(value, str) and value:
        return value
    if isinstance(fallback, str):
        return fallback
    return "" if value is None else compact_json(value)


def _images(args: dict[str, Any]) -> list[Part]:
    urls = args.get("image_urls", args.get("images_urls"))
    if not isinstance(urls, list):
        return []
    return [
        Part(type=PartType.IMAGE, data_bytes=len(url) if isinstance(url, str) else 0)
        for url in urls
    ]


def _choice_message(response: dict[str, Any]) -> dict[str, Any] | None:
    choices = response.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        message = choices[0].get("message")
        if isinstance(message, dict):
            return message
    return None


def _log(text: str, tag: str, ts: str | None, span: SourceSpan | None, thread: _Thread) -> LogLine:
    shown = text if thread.name == "main" else f"{thread.name}: {text}"
    return LogLine(text=shown, tag=tag, timestamp=ts, span=span)


def _show(value: Any) -> str:
    return excerpt(compact_json(value)[:400])


def _whole(lines: list[tuple[bytes, SourceSpan]]) -> SourceSpan:
    """The span of a document made of these lines (one at least)."""
    first, last = lines[0][1], lines[-1][1]
    length = last.offset + last.length - first.offset
    return SourceSpan(source=first.source, offset=first.offset, length=length, line=first.line)


def _loads(line: bytes) -> Any:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return None


# ------------------------------------------------------------------------------------------
# Session folders


def events_folder(path: Path) -> Path | None:
    """The folder of ``<n>.json`` event files: ``path/events`` or ``path`` itself."""
    for folder in (path / "events", path):
        if folder.is_dir() and any(
            DIGITS.fullmatch(p.stem) and p.suffix == ".json" for p in _limited(folder)
        ):
            return folder
    return None


def _limited(folder: Path, limit: int = 200) -> list[Path]:
    out: list[Path] = []
    for child in folder.iterdir():
        out.append(child)
        if len(out) >= limit:
            break
    return out


def snapshot(path: Path) -> list[SnapshotSession]:
    """A session folder read whole; a file given here is read with the stream parser."""
    if path.is_file():
        parser = OpenHandsParser(0, str(path))
        with path.open("rb") as fh:
            events = [*parser.feed(fh.read()), *parser.finish()]
        return [SnapshotSession(label="", events=events)]
    folder = events_folder(path)
    if folder is None:
        return []
    files = sorted(
        (p for p in folder.iterdir() if p.suffix == ".json" and DIGITS.fullmatch(p.stem)),
        key=lambda p: int(p.stem),
    )
    parser = OpenHandsParser(0, str(folder))
    values: list[tuple[str, Any]] = []
    issues: list[Event] = []
    for file in files:
        try:
            data = file.read_bytes()
        except OSError as exc:
            issues.append(ParseIssue(file=str(file), reason=f"cannot read ({exc.strerror or exc})"))
            continue
        value = _loads(data)
        if value is None:
            value = _loads(data.decode("utf-8", "replace").encode())
            if value is None:
                issues.append(
                    ParseIssue(file=str(file), reason="not valid JSON", excerpt=excerpt(data[:200]))
                )
                continue
            issues.append(ParseIssue(file=str(file), reason="invalid UTF-8 replaced with U+FFFD"))
        values.append((str(file), value))
    events = [*issues, *parser.read_events(values)]
    label = folder.parent.name if folder.name == "events" else folder.name
    return [SnapshotSession(label=label, events=events)]


# ------------------------------------------------------------------------------------------
# Sniffing


def sniff(head: Head) -> float:
    if head.is_dir:
        try:
            return 0.9 if events_folder(head.path) is not None else 0.0
        except OSError:
            return 0.0
    text = head.text.lstrip("\ufeff").lstrip()
    if text[:1] not in ("[", "{"):
        return 0.0
    first_line = text.split("\n", 1)[0]
    value = _loads(first_line.encode()) if text[:1] == "{" else None
    if value is None:
        value = parse_prefix(text, max_depth=4)
    items = value if isinstance(value, list) else [value]
    items = [item for item in items[:20] if isinstance(item, dict)]
    if not items:
        return 0.0
    first = items[0]
    if _event_like(first):
        return 0.95
    history = first.get("history")
    if isinstance(history, list) and any(key in first for key in RECORD_KEYS):
        events = [e for e in history[:5] if isinstance(e, dict)]
        if not events or any(is_event(e) for e in events):
            return 0.9
    return 0.0


def _event_like(value: dict[str, Any]) -> bool:
    return "id" in value and "source" in value and ("action" in value or "observation" in value)


SPEC = register(
    FormatSpec(
        name="openhands",
        description="OpenHands event streams, session folders and evaluation output",
        reads=(
            "event lists (*.json), events as JSON Lines, ~/.openhands/sessions/<sid>/events/, "
            "evaluation / resolver output.jsonl"
        ),
        parser=OpenHandsParser,
        sniff=sniff,
        default_profile="generic",
        snapshot=snapshot,
        folder=True,
    )
)
