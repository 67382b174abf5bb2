"""Reading a Claude Code transcript without bodies (``stats --no-exact``; the two
phases are ``formats.base``'s), and ``ClaudeCodeParser``, the session reader that does it.

A line is read in two phases: ``_scan_line`` parses it and keeps what the session keeps of it
(the message's text length, kind and tool, the line's ids, usage and log text, Claude Code's own
estimate of the message), alone, possibly in a worker process; ``apply_scanned`` then does what
spans lines (ids seen twice, the chain, responses, tool names) and gives the same events as the
full reader, messages as ``MessageEntry``. Shapes it does not cover (the session's first lines,
sidechains, compactions, Task/Agent calls and results, bad lines) are read by the full reader
(``reader_lines``).
"""

from __future__ import annotations

from typing import Any

import orjson

from ctx_inspect.agents.claude_code.estimate import claude_code_part, js_round_quarter
from ctx_inspect.agents.claude_code.reader_lines import LineReader
from ctx_inspect.agents.claude_code.records import (
    CALL_TYPES,
    ERROR_SUBTYPES,
    ESTIMATE_RULE,
    SESSION_FORMAT,
    SYNTHETIC_MODEL,
    TASK_TOOLS,
    attachment_pieces,
    attachment_text,
    document_part,
    image_part,
    metadata_text,
    result_content,
    shortened,
    text_or_none,
)
from ctx_inspect.core.model import (
    MessageKind,
    Role,
    SourceSpan,
)
from ctx_inspect.core.packed import LogEntry, RequestEntry, UsageEntry
from ctx_inspect.core.session import MessageEntry
from ctx_inspect.formats.base import Item
from ctx_inspect.formats.chat_common import compact_json

# ------------------------------------------------------------------------------------------
# Reading without bodies, phase one: a line to a record of plain values. What
# the record keeps of a message is what the session keeps: ``len(Message.text)``, its kind and
# tool; the cross-line parts (ids, the chain, responses, tool names) are done by
# ``ClaudeCodeParser.apply_scanned``. Shapes this does not cover come back as None and are read
# by the full reader.

_LOG, _SYSTEM, _ASSISTANT, _USER, _ATTACHMENT = range(5)
_KINDS = tuple(MessageKind)
_KIND_MESSAGE = _KINDS.index(MessageKind.MESSAGE)
_KIND_TOOL_CALL = _KINDS.index(MessageKind.TOOL_CALL)
_KIND_TOOL_RESULT = _KINDS.index(MessageKind.TOOL_RESULT)
_KIND_SUMMARY = _KINDS.index(MessageKind.SUMMARY)
_KIND_ATTACHMENT = _KINDS.index(MessageKind.ATTACHMENT)


_entry = tuple.__new__  # MessageEntry(*values) without its Python-level __new__


class _Declined(Exception):
    """A line the scanner leaves to the full reader."""


def _scan_line(line: memoryview) -> tuple[Any, ...] | None:
    """Phase one of reading a Claude Code line without bodies (``LineParser.scan_line``)."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    kind = obj.get("type")
    if not isinstance(kind, str):
        return None
    try:
        if kind == "assistant":
            return _scan_assistant(obj)
        if kind == "user":
            return _scan_user(obj)
        if kind == "system":
            return _scan_system(obj)
        if kind == "attachment":
            return _scan_attachment(obj)
        if kind == "api-request":
            return None  # its max_tokens is a session fact: the full reader
        return (_LOG, metadata_text(kind, obj, False), kind, text_or_none(obj.get("timestamp")))
    except _Declined:
        return None


def _envelope(obj: dict[str, Any]) -> tuple[bool, str | None, str | None, str | None]:
    """(sidechain, uuid, parent, timestamp) of a conversation line; ``parent`` is "" when it is
    neither a string nor null."""
    get = obj.get
    if get("subtype") == "compact_boundary":
        raise _Declined
    uuid = get("uuid")
    parent = get("parentUuid")
    ts = get("timestamp")
    return (
        get("isSidechain") is True,
        uuid if uuid and isinstance(uuid, str) else None,
        parent if parent is None or isinstance(parent, str) else "",
        ts if ts and isinstance(ts, str) else None,
    )


def _json_chars(value: Any) -> int:
    """``len(compact_json(value))``."""
    try:
        data = orjson.dumps(value)
    except TypeError:
        return len(compact_json(value))
    return len(data) if data.isascii() else len(data.decode())


# Claude Code's own estimate of a message (``estimate``), computed by the scanners from the same
# values as the parts the full reader makes.

_q = js_round_quarter  # Claude Code's estimate of one text: ``Math.round(length / 4)``


def _q_json(value: Any) -> int:
    """``_q(compact_json(value))``."""
    return _q(compact_json(value))


def _loose(block: Any) -> tuple[int, int]:
    """(characters, estimate) of the part ``loose_part`` makes of a content item that is not a
    block object."""
    if isinstance(block, str):
        return len(block), _q(block)
    return _json_chars(block), _q_json(block)


# ``len(Message.text)``: the text is its parts' non-empty pieces joined by newlines, so the
# scanners sum the pieces' sizes and count them: the length is ``size + pieces - 1``.


def _scan_assistant(obj: dict[str, Any]) -> tuple[Any, ...] | None:
    message = obj.get("message")
    if not isinstance(message, dict):
        return None
    sidechain, uuid, parent, ts = _envelope(obj)
    get = message.get
    model = get("model")
    if model == SYNTHETIC_MODEL:
        raise _Declined  # a local notice or an API error: the full reader
    key = get("id")
    if not key or not isinstance(key, str):
        key = text_or_none(obj.get("requestId"))
    usage: tuple[int, int, int, int] | None = None
    raw_usage = get("usage")
    if isinstance(raw_usage, dict):  # ``usage_key``, inlined
        u = raw_usage.get
        fresh, write, read, out = (
            u("input_tokens"),
            u("cache_creation_input_tokens"),
            u("cache_read_input_tokens"),
            u("output_tokens"),
        )
        if fresh is not None or out is not None:
            usage = (
                fresh if type(fresh) is int else 0,
                write if type(write) is int else 0,
                read if type(read) is int else 0,
                out if type(out) is int else 0,
            )
    content = get("content")
    size = pieces = rough = 0
    has_text = has_call = False
    tool: str | None = None
    calls: list[tuple[str, str]] = []
    if isinstance(content, str):
        if content:
            size, pieces = len(content), 1
            has_text = not content.isspace()
            rough = _q(content)
    elif isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                n, estimate = _loose(block)
                rough += estimate
                has_text = has_text or (isinstance(block, str) and n > 0 and not block.isspace())
                if n:
                    size += n
                    pieces += 1
                continue
            btype = text_or_none(block.get("type"))  # a list would not even hash
            if btype == "text" or btype == "thinking":
                body = block.get(btype)
                if body and isinstance(body, str):
                    size += len(body)
                    pieces += 1
                    has_text = has_text or (btype == "text" and not body.isspace())
                    rough += _q(body)
            elif btype in CALL_TYPES:
                has_call = True
                name = block.get("name")
                named = name if name and isinstance(name, str) else ""
                if named:
                    if name in TASK_TOOLS:
                        raise _Declined  # its prompt links a sidechain: the full reader
                    size += len(named)
                    pieces += 1
                    if tool is None:
                        tool = named
                    call_id = block.get("id")
                    if call_id and isinstance(call_id, str):
                        calls.append((call_id, named))
                raw = block.get("input")
                if raw is not None:
                    arguments = compact_json(raw)
                    size += len(arguments)
                    pieces += 1
                    rough += _q(named + (arguments or "{}"))
                else:
                    rough += _q(named + "{}")
            elif btype == "redacted_thinking":
                data = block.get("data")
                rough += (len(data) + 2) // 4 if isinstance(data, str) and data else 0
            else:
                size += _json_chars(block)
                pieces += 1
                rough += _q_json(block)
    return (
        _ASSISTANT,
        sidechain,
        uuid,
        parent,
        ts,
        model if model and isinstance(model, str) else None,
        key,
        usage,
        size + pieces - 1 if pieces else 0,
        _KIND_TOOL_CALL if has_call and not has_text else _KIND_MESSAGE,
        tool,
        calls,
        rough,
    )


def _scan_user(obj: dict[str, Any]) -> tuple[Any, ...] | None:
    message = obj.get("message")
    if not isinstance(message, dict):
        return None
    sidechain, uuid, parent, ts = _envelope(obj)
    content = message.get("content")
    size = pieces = rough = 0
    results: list[str] = []
    if isinstance(content, str):
        if content:
            size, pieces = len(content), 1
            rough = _q(content)
    elif isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                n, estimate = _loose(block)
                rough += estimate
                if n:
                    size += n
                    pieces += 1
                continue
            btype = block.get("type")
            if btype == "tool_result":
                call_id = block.get("tool_use_id")
                if call_id and isinstance(call_id, str):
                    results.append(call_id)
                result = block.get("content")
                if isinstance(result, str):
                    if result:
                        size += len(result)
                        pieces += 1
                        rough += _q(result)
                elif result is not None:
                    n, k = _result_pieces(result)
                    size += n
                    pieces += k
                    rough += _result_rough(result)
            elif btype == "text":
                text = block.get("text")
                if text and isinstance(text, str):
                    size += len(text)
                    pieces += 1
                    rough += _q(text)
            elif btype == "image":
                rough += claude_code_part(image_part(block))
            else:
                if btype == "document":
                    part = document_part(block)
                    n = len(part.text)
                    rough += claude_code_part(part)
                else:
                    n = _json_chars(block)
                    rough += _q_json(block)
                if n:
                    size += n
                    pieces += 1
    get = obj.get
    if results:
        meta = get("toolUseResult")
        if isinstance(meta, dict) and text_or_none(meta.get("agentId")) is not None:
            raise _Declined  # names the sub-agent it ran: the full reader
    if get("isCompactSummary") is True:
        kind = _KIND_SUMMARY
    elif results:
        kind = _KIND_TOOL_RESULT
    elif get("isMeta") is True:
        kind = _KIND_ATTACHMENT
    else:
        kind = _KIND_MESSAGE
    return (
        _USER,
        sidechain,
        uuid,
        parent,
        ts,
        size + pieces - 1 if pieces else 0,
        kind,
        results,
        rough,
    )


def _result_rough(content: Any) -> int:
    """Claude Code's estimate of the parts ``LineReader._result_parts`` makes of a tool
    result's content that is neither a string nor null."""
    text, extra = result_content(content)
    return _q(text) + sum(map(claude_code_part, extra))


def _result_pieces(content: Any) -> tuple[int, int]:
    """(size, pieces) of the parts ``LineReader._result_parts`` makes of a tool result's
    content that is neither a string nor null."""
    if not isinstance(content, list):
        return _json_chars(content), 1
    size = texts = 0
    extra: list[int] = []
    for item in content:
        if isinstance(item, dict):
            itype = item.get("type")
            if itype == "text":
                size += len(text_or_none(item.get("text")) or "")
                texts += 1
            elif itype == "document":
                extra.append(len(document_part(item).text))
            elif itype != "image":
                extra.append(_json_chars(item))
        elif isinstance(item, str):
            size += len(item)
            texts += 1
        elif item is not None:
            extra.append(_json_chars(item))
    joined = size + texts - 1 if texts else 0  # the result part: its texts joined by newlines
    size, pieces = (joined, 1) if joined else (0, 0)
    for n in extra:
        if n:
            size += n
            pieces += 1
    return size, pieces


def _scan_system(obj: dict[str, Any]) -> tuple[Any, ...] | None:
    subtype = text_or_none(obj.get("subtype"))
    if subtype == "microcompact_boundary" or subtype in ERROR_SUBTYPES:
        return None
    sidechain, uuid, parent, ts = _envelope(obj)
    level = text_or_none(obj.get("level"))
    if subtype in ("api_error", "error"):
        level = "error"
    content = obj.get("content")
    label = subtype or "system"
    text = f"{label}: {shortened(content)}" if isinstance(content, str) and content else label
    return (_SYSTEM, sidechain, uuid, parent, ts, text, level)


def _scan_attachment(obj: dict[str, Any]) -> tuple[Any, ...] | None:
    att = obj.get("attachment")
    atype = text_or_none(att.get("type")) if isinstance(att, dict) else None
    sidechain, uuid, parent, ts = _envelope(obj)
    text = attachment_text(obj, att if isinstance(att, dict) else {}, atype)
    return (
        _ATTACHMENT,
        sidechain,
        uuid,
        parent,
        ts,
        len(text) if text is not None else None,
        atype,
        sum(map(_q, attachment_pieces(obj, text))) if text is not None else 0,
    )


class ClaudeCodeParser(LineReader):
    """Reads one Claude Code session file (or one sub-agent file) as it grows: the full reader,
    and the fast path when the session keeps no bodies."""

    format_name = SESSION_FORMAT

    # -- reading without bodies, phase two ----------------------------------------------------

    two_phase = True
    scan_line = staticmethod(_scan_line)
    entry_estimate_rule = ESTIMATE_RULE

    def apply_scanned(self, record: Any, span: SourceSpan, out: list[Item]) -> bool:
        """A record of ``_scan_line`` to events and a ``MessageEntry``: what ``parse_line``
        makes of the line, its message without a body. Declines (False) while the session's facts
        are still looked for, and for a sidechain line of a session file."""
        if self._facts_budget and (not self._info_sent or self._facts_missing):
            return False
        tag = record[0]
        if tag == _LOG:
            text, kind = self._shared(record[1]), self._shared(record[2])
            out.append(_log_entry(text, kind, record[3], span))
            return True
        if record[1] and not self._subagent_file:
            return False  # a sidechain: its thread is decided by the full reader
        uuid: str | None = record[2]
        parent: str | None = record[3]
        ts: str | None = record[4]
        if tag == _SYSTEM:
            if uuid is not None:
                self._enter_node(uuid, parent, False, False, span, out)
            out.append(_log_entry(record[5], "system", ts, span, record[6]))
            return True
        mid = self._id_of(uuid, span.line)
        if tag == _USER and self._pending_link:
            self._flush_links(span, out)
        node = self._enter_node(uuid, parent, tag == _USER, False, span, out) if uuid else -1
        if tag == _ASSISTANT:
            _, _, _, _, _, model, key, usage, chars, kind, tool, calls, rough = record
            if model is not None:
                model = self._shared(model)
            synthetic = model == SYNTHETIC_MODEL
            if not synthetic:
                if model is not None and model != self._model:
                    self._model_info(model, span, out)
                self._response_entries(key, usage, model, span, ts, out)
            names = self._tool_names
            shared = self._shared
            for call_id, name in calls:
                names[call_id] = shared(name)
            role = Role.ASSISTANT
            message_kind = MessageKind.META if synthetic else _KINDS[kind]
            visible = not synthetic
            if tool is not None:
                tool = shared(tool)
        elif tag == _USER:
            _, _, _, _, _, chars, kind, results, rough = record
            tool = None
            if results:
                names = self._tool_names
                for call_id in results:
                    tool = names.get(call_id)
                    if tool:
                        break
                else:
                    tool = None
                given = self._results
                for call_id in results:
                    given[call_id] = mid
            role = Role.USER
            message_kind = _KINDS[kind]
            visible = True
        else:  # _ATTACHMENT
            chars = record[5]
            rough = record[7]
            if chars is None:
                text = self._shared(f"attachment {record[6] or '?'}")
                out.append(_log_entry(text, "attachment", ts, span))
                return True
            role = Role.USER
            message_kind = MessageKind.ATTACHMENT
            tool = None
            visible = True
        if node >= 0:
            self._node_message[node] = mid
        out.append(
            _entry(
                MessageEntry,
                (
                    mid,
                    role,
                    message_kind,
                    visible,
                    "main",
                    tool,
                    chars,
                    None,
                    span.source,
                    span.offset,
                    span.length,
                    span.line,
                    rough if self.entry_estimates else None,
                ),
            )
        )
        return True

    def _response_entries(
        self,
        key: str | None,
        usage: tuple[int, int, int, int] | None,
        model: str | None,
        span: SourceSpan,
        ts: str | None,
        out: list[Item],
    ) -> None:
        """``_response_of`` in the main thread, its events as entries (``core.packed``)."""
        request, report = self._response_step(key, usage, "main")
        where = (span.source, span.offset, span.length, span.line)
        if request:
            out.append(_entry(RequestEntry, (ts, *where, model, key, "main", False, False)))
        if report:
            assert usage is not None
            counts = (usage[0], usage[2], usage[1], usage[3], 0, None, False)
            out.append(_entry(UsageEntry, (ts, *where, *counts, model, key, "main", None, "")))


def _log_entry(
    text: str, tag: str, ts: str | None, span: SourceSpan, level: str | None = None
) -> LogEntry:
    """``log_event`` as an entry (``core.packed``)."""
    where = (span.source, span.offset, span.length, span.line)
    entry: LogEntry = _entry(LogEntry, (ts, *where, text, level, tag))
    return entry
