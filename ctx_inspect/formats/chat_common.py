"""Shared machinery for the two chat-message formats (OpenAI Chat Completions, Anthropic Messages).

Both formats come in the same containers: a bare JSON array of messages, a request body
``{"messages": [...]}``, JSON Lines with one message (or one API response) per line, and JSON
Lines with one conversation per line. ``ChatParser`` decides between line mode (incremental, every
event carries the span of its line) and document mode (buffered, parsed when the input ends) from
the first record, numbers messages and conversations, and emits the step events the same way for
both formats. Subclasses only turn one raw message into a ``Converted`` message.

The head sampler both sniffers use is ``formats.chat_sniff``; reading a JSON document cut in
the middle, ``formats.json_prefix``.
"""

from __future__ import annotations

import re
from abc import abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import orjson

from ctx_inspect.core.model import (
    Event,
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
    Usage,
    UsageReported,
)
from ctx_inspect.formats.base import EXCERPT_CHARS, LineParser, excerpt
from ctx_inspect.formats.base import compact_json as compact_json  # where the readers import it

BOM = b"\xef\xbb\xbf"
DECIDE_MAX_LINES = 5  # unreadable leading lines looked past before settling on document mode
LINE_ORIENTED_SAMPLE = 200  # lines checked to tell a broken document from JSON Lines

Mode = Literal["undecided", "lines", "document"]

# ------------------------------------------------------------------------------------------
# Small value helpers


def as_str(value: Any) -> str | None:
    """A non-empty string, or None."""
    return value if isinstance(value, str) and value else None


def as_int(value: Any) -> int:
    """A token figure: ints (and integral floats) as they are, anything else 0."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return 0


def iso_time(value: Any) -> str | None:
    """A timestamp as text: strings as they are, epoch seconds (or milliseconds) as ISO 8601."""
    if isinstance(value, str):
        return value or None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    seconds = float(value)
    if seconds > 1e11:  # milliseconds
        seconds /= 1000.0
    try:
        return datetime.fromtimestamp(seconds, UTC).isoformat()
    except (OverflowError, OSError, ValueError):
        return None


def data_url(url: str) -> tuple[str | None, int]:
    """Media type and payload size of a ``data:`` URL; ``(None, len(url))`` for other URLs."""
    if url.startswith("data:"):
        head, sep, payload = url.partition(",")
        if sep:
            media = head[5:].split(";", 1)[0]
            return media or None, len(payload)
    return None, len(url)


def type_name(value: Any) -> str:
    """The JSON name of a value's type, for parse-issue reasons."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def text_part(text: str) -> Part:
    return Part(type=PartType.TEXT, text=text)


def unknown_part(block: Any) -> Part:
    """A block we do not know: kept whole, as its JSON text, so nothing is lost."""
    return Part(type=PartType.ATTACHMENT, text=compact_json(block))


def kind_for(role: Role, parts: Iterable[Part]) -> MessageKind:
    """Tool results are TOOL_RESULT; an assistant message with tool calls and no text, TOOL_CALL."""
    has_call = has_text = False
    for part in parts:
        if part.type is PartType.TOOL_RESULT and role is not Role.ASSISTANT:
            return MessageKind.TOOL_RESULT  # (an assistant's server-tool results are its output)
        if part.type is PartType.TOOL_CALL:
            has_call = True
        elif part.type is PartType.TEXT and part.text.strip():
            has_text = True
    if role is Role.TOOL:
        return MessageKind.TOOL_RESULT
    if role is Role.ASSISTANT and has_call and not has_text:
        return MessageKind.TOOL_CALL
    return MessageKind.MESSAGE


def tools_info(tools: Any) -> dict[str, Any]:
    """``tool_count`` and ``tools_chars`` (compact JSON characters) of a request's tool list."""
    if not isinstance(tools, list):
        return {}
    return {
        "tool_count": len(tools),
        "tools_chars": sum(len(compact_json(tool)) for tool in tools),
    }


def is_conversation(value: Any) -> bool:
    """An object holding ``messages``, or a nested array that starts with a message."""
    if isinstance(value, dict):
        return isinstance(value.get("messages"), list)
    return (
        isinstance(value, list)
        and bool(value)
        and isinstance(value[0], dict)
        and "role" in value[0]
    )


# ------------------------------------------------------------------------------------------
# What a subclass makes of one raw message


@dataclass
class Converted:
    role: Role
    parts: list[Part]
    kind: MessageKind | None = None  # None: derived from role and parts
    id: str | None = None
    name: str | None = None
    timestamp: str | None = None
    model: str | None = None
    usage: Usage | None = None  # only kept for assistant messages
    request_id: str | None = None


@dataclass
class Thread:
    """Numbering and step state of one conversation."""

    name: str = "main"
    prefix: str = ""  # prefix of generated message ids
    model: str | None = None
    count: int = 0
    last_request: str | None = None
    last_usage: Usage | None = None
    last_id: str | None = None
    repeats: int = 0


@dataclass
class _Where:
    """Where a raw message sits: a line span (line mode) or a path inside a document."""

    span: SourceSpan | None
    label: str = ""
    default_id: str | None = None  # the id to use when the format has none
    raw: Any = field(default=None, repr=False)


# ------------------------------------------------------------------------------------------
# The parser


class ChatParser(LineParser):
    """Reads chat messages from a JSON document or from JSON Lines, deciding from the first record.

    A first non-blank line that is a complete JSON object, either a record (``is_record``: a
    message or an API response) or a conversation (``{"messages": [...]}``), selects line mode:
    lines are read as they complete and each event carries its line's span. Anything else selects
    document mode: bytes are held and parsed at ``finish()``. A document that does not parse but
    whose lines mostly do is read as JSON Lines after all, so a bad first line does not lose the
    rest of the file.

    Ids: the format's own when it has them, else ``m<line>`` for message lines and ``m1``, ``m2``,
    ... in order within a document or a conversation (``conv<k>-m1``, ... when a file holds
    several conversations, each in its thread ``conv<k>``). The first conversation line is held
    back until a second one shows that there are several; a file with one is the ``main`` thread.
    """

    max_document_bytes = 1024 * 1024 * 1024

    def __init__(self, source: int = 0, path: str = "") -> None:
        super().__init__(source, path)
        self._mode: Mode = "undecided"
        self._buffer: list[bytes] = []
        self._size = 0
        self._first: bytes | None = None  # the first non-blank byte, once seen
        self._tool_names: dict[str, str] = {}  # call id -> tool name, for tool results
        self._main = Thread()
        self._conv_count = 0  # conversations seen in line mode
        self._held: tuple[Any, SourceSpan] | None = None  # the first conversation line
        self._conv_of_line: dict[int, int] = {}
        self._forced_conv: int | None = None  # set by messages_at (0: the only conversation)

    # -- hooks ----------------------------------------------------------------------------

    @abstractmethod
    def is_record(self, obj: dict[str, Any]) -> bool:
        """Whether a one-line JSON object is a record of this format (selects line mode)."""

    @abstractmethod
    def convert(self, raw: Any) -> Converted | str:
        """One raw message as a ``Converted``, or the reason it cannot be read."""

    def conversation_items(self, wrapper: dict[str, Any]) -> list[tuple[str, Any]]:
        """The raw messages of a conversation object, each with its label for parse issues."""
        messages = wrapper.get("messages")
        if not isinstance(messages, list):
            return []
        return [(f"messages[{i}]", raw) for i, raw in enumerate(messages)]

    def session_info(self, wrapper: dict[str, Any]) -> SessionInfo | None:
        """Facts a conversation object carries besides its messages (model, tools)."""
        model = as_str(wrapper.get("model"))
        extra = tools_info(wrapper.get("tools"))
        if model is None and not extra:
            return None
        return SessionInfo(model=model, extra=extra)

    # -- feeding --------------------------------------------------------------------------

    @property
    def mode(self) -> Mode:
        return self._mode

    def feed(self, data: bytes) -> list[Event]:
        if self._mode == "lines":
            return super().feed(data)
        if not data:
            return []
        self._size += len(data)
        if self._mode == "document":
            if self._size <= self.max_document_bytes:
                self._buffer.append(data)
            else:
                self._buffer = []
            return []
        self._buffer.append(data)
        if self._first is None:
            found = _FIRST_BYTE.search(data)
            if found is not None:
                self._first = found.group()
                if self._first == b"[":
                    return self._enter("document")
        # Only a completed line can change the decision: no re-join of a long first line per chunk.
        if b"\n" in data:
            mode = self._decide(final=False)
            if mode is not None:
                return self._enter(mode)
        return []

    def finish(self) -> list[Event]:
        out: list[Event] = []
        if self._mode == "undecided":
            out.extend(self._enter(self._decide(final=True) or "document"))
        if self._mode == "lines":
            out.extend(super().finish())
        else:
            out.extend(self._finish_document())
        return out

    def _decide(self, final: bool) -> Mode | None:
        data = b"".join(self._buffer)
        self._buffer = [data]
        pos = 3 if data.startswith(BOM) else 0
        looked = 0
        while True:
            found = _NON_BLANK.search(data, pos)
            if found is None:
                return "document" if final else None
            start = found.start()
            if data[start : start + 1] == b"[":
                return "document"
            nl = data.find(b"\n", start)
            if nl < 0:
                if not final:
                    return None
                nl = len(data)
            line = data[start:nl].rstrip(b"\r")
            value = loads_or_missing(line)
            if value is not MISSING:
                if isinstance(value, dict) and (self.is_record(value) or is_conversation(value)):
                    return "lines"
                return "document"
            if line.startswith(b"{"):
                return "document"  # a pretty-printed object
            looked += 1
            if looked >= DECIDE_MAX_LINES:
                return "document"
            pos = nl + 1

    def _enter(self, mode: Mode) -> list[Event]:
        self._mode = mode
        if mode != "lines":
            return []
        data = b"".join(self._buffer)
        self._buffer = []
        self._size = 0
        return super().feed(data)

    # -- line mode ------------------------------------------------------------------------

    def parse_line(self, line: bytes, span: SourceSpan) -> Iterable[Event]:
        out: list[Event] = []
        if span.offset == 0 and line.startswith(BOM):
            line = line[3:]
        value = self.load_json(line, span, out)
        if value is None:
            if not out:
                out.append(self.issue(span, "not a message (null)", line))
            return out
        if is_conversation(value):
            self._line_conversation(value, span, out)
        else:
            where = _Where(span, "", f"m{span.line}", line)
            self._message(value, self._main, where, out)
        return out

    def end_of_input(self) -> Iterable[Event]:
        out: list[Event] = []
        if self._held is not None:
            value, span = self._held
            self._held = None
            self._conversation(value, self._main, span, "", out)
        return out

    def _line_conversation(self, value: Any, span: SourceSpan, out: list[Event]) -> None:
        if self._forced_conv is not None:
            k = self._forced_conv
            thread = self._main if k == 0 else Thread(name=f"conv{k}", prefix=f"conv{k}-")
            self._conversation(value, thread, span, "", out)
            return
        self._conv_count += 1
        k = self._conv_count
        self._conv_of_line[span.line] = k
        if k == 1:
            self._held = (value, span)  # thread "main" unless a second conversation follows
            return
        if self._held is not None:
            held, held_span = self._held
            self._held = None
            self._conversation(held, Thread(name="conv1", prefix="conv1-"), held_span, "", out)
        self._conversation(value, Thread(name=f"conv{k}", prefix=f"conv{k}-"), span, "", out)

    def messages_at(self, data: bytes, span: SourceSpan) -> list[Message]:
        """Re-read the messages of one line, with the ids and threads the first read gave them."""
        fresh = type(self)(self.source, self.path)
        if self._mode == "lines":
            fresh._mode = "lines"
            fresh._line_no = max(span.line - 1, 0)
            fresh._offset = span.offset
            k = self._conv_of_line.get(span.line)
            fresh._forced_conv = 0 if k is None or self._conv_count <= 1 else k
        fresh._tool_names = self._tool_names
        events = [*fresh.feed(data + b"\n"), *fresh.finish()]
        return [e.message for e in events if isinstance(e, MessageAdded)]

    # -- document mode --------------------------------------------------------------------

    def _finish_document(self) -> list[Event]:
        size = self._size
        data = b"".join(self._buffer)
        self._buffer = []
        whole = SourceSpan(source=self.source, offset=0, length=size, line=1)
        if size > self.max_document_bytes:
            return [self.issue(whole, f"document too large ({size} bytes); not read")]
        if not data.strip():
            return []
        out: list[Event] = []
        body = data[3:] if data.startswith(BOM) else data
        try:
            value = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            value = self._load_replaced(body, out)
            if value is MISSING:
                if _line_oriented(body):
                    self._mode = "lines"
                    return [*LineParser.feed(self, data), *LineParser.finish(self)]
                at = (exc.lineno, exc.pos)
                out.append(self.issue(whole, f"not valid JSON ({exc.msg})", data[:200], at=at))
                return out
        out.extend(self._document(value, whole))
        return out

    def _load_replaced(self, body: bytes, out: list[Event]) -> Any:
        """Parse a document with invalid UTF-8 replaced, flagging where the first bad byte is."""
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as err:
            try:
                value = orjson.loads(body.decode("utf-8", "replace"))
            except orjson.JSONDecodeError:
                return MISSING
            bad = err.start
            line = body.count(b"\n", 0, bad) + 1
            out.append(
                ParseIssue(
                    file=self.path,
                    line=line,
                    offset=bad,
                    reason="invalid UTF-8 replaced with U+FFFD",
                    excerpt=excerpt(body[max(bad - 40, 0) : bad + 40]),
                )
            )
            return value
        return MISSING

    def _doc_issue(self, reason: str, raw: Any) -> ParseIssue:
        """An issue about one value of a document (a message that cannot be read): where it
        is in the document is not known."""
        return ParseIssue(file=self.path, reason=reason, excerpt=excerpt(self._shown(raw)))

    @staticmethod
    def _shown(raw: Any) -> bytes | str:
        return raw if isinstance(raw, bytes | str) else compact_json(raw)[: EXCERPT_CHARS * 2]

    def _document(self, value: Any, whole: SourceSpan) -> list[Event]:
        """The events of a document (``whole``: its span, for an issue about all of it)."""
        out: list[Event] = []
        if isinstance(value, list):
            conversations = sum(1 for item in value if is_conversation(item))
            single = conversations == 1 and len(value) == 1
            k = 0
            for i, item in enumerate(value):
                if is_conversation(item):
                    if single:
                        thread = self._main
                    else:
                        k += 1
                        thread = Thread(name=f"conv{k}", prefix=f"conv{k}-")
                    self._conversation(item, thread, None, f"[{i}].", out)
                else:
                    self._message(item, self._main, _Where(None, f"messages[{i}]"), out)
        elif isinstance(value, dict):
            if is_conversation(value):
                self._conversation(value, self._main, None, "", out)
            elif self.is_record(value):
                self._message(value, self._main, _Where(None, "document"), out)
            else:
                keys = ", ".join(list(value)[:8]) or "none"
                reason = f"no messages in this document (keys: {keys})"
                out.append(self.issue(whole, reason, self._shown(value)))
        else:
            reason = f"not a message list ({type_name(value)})"
            out.append(self.issue(whole, reason, self._shown(value)))
        return out

    # -- shared emission ------------------------------------------------------------------

    def _conversation(
        self, value: Any, thread: Thread, span: SourceSpan | None, label: str, out: list[Event]
    ) -> None:
        if isinstance(value, list):
            items = [(f"messages[{i}]", raw) for i, raw in enumerate(value)]
        else:
            info = self.session_info(value)
            if info is not None:
                thread.model = thread.model or info.model
                out.append(info.model_copy(update={"span": span}) if span else info)
            items = self.conversation_items(value)
        for item_label, raw in items:
            self._message(raw, thread, _Where(span, label + item_label), out)

    def _message(self, raw: Any, thread: Thread, where: _Where, out: list[Event]) -> None:
        try:
            converted = self.convert(raw)
        except Exception as exc:  # a reader bug must not lose the rest of the input
            converted = f"unreadable message ({type(exc).__name__}: {exc})"
        if isinstance(converted, str):
            reason = f"{where.label}: {converted}" if where.label else converted
            if where.span is not None:
                shown = where.raw if where.raw is not None else compact_json(raw)[:400]
                out.append(self.issue(where.span, reason, shown))
            else:
                out.append(self._doc_issue(reason, raw))
            return
        thread.count += 1
        msg_id = converted.id or where.default_id or f"{thread.prefix}m{thread.count}"
        if msg_id == thread.last_id:
            thread.repeats += 1
            msg_id = f"{msg_id}#{thread.repeats + 1}"
        else:
            thread.last_id = msg_id
            thread.repeats = 0
        role = converted.role
        message = Message(
            id=msg_id,
            role=role,
            kind=converted.kind or kind_for(role, converted.parts),
            parts=tuple(converted.parts),
            timestamp=converted.timestamp,
            model=converted.model,
            name=converted.name,
            thread=thread.name,
        )
        span = where.span
        if role is Role.ASSISTANT:
            rid = converted.request_id
            if rid is None or rid != thread.last_request:
                out.append(
                    RequestSent(
                        model=converted.model or thread.model,
                        request_id=rid,
                        thread=thread.name,
                        timestamp=converted.timestamp,
                        span=span,
                    )
                )
                thread.last_usage = None
            thread.last_request = rid
            usage = converted.usage
            if usage is not None and usage != thread.last_usage:
                out.append(
                    UsageReported(
                        usage=usage,
                        model=converted.model or thread.model,
                        request_id=rid,
                        thread=thread.name,
                        timestamp=converted.timestamp,
                        span=span,
                    )
                )
                thread.last_usage = usage
        out.append(MessageAdded(message=message, timestamp=converted.timestamp, span=span))

    # -- tool names -----------------------------------------------------------------------

    def remember_call(self, call_id: str | None, name: str | None) -> None:
        if call_id and name:
            self._tool_names[call_id] = name

    def tool_name_of(self, call_id: str | None) -> str | None:
        return self._tool_names.get(call_id) if call_id else None


_NON_BLANK = re.compile(rb"\S")
_FIRST_BYTE = re.compile(rb"[^\s\xef\xbb\xbf]")  # the first byte that is neither blank nor BOM
MISSING: Any = object()  # what ``loads_or_missing`` gives for a text that is not JSON


def loads_or_missing(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        try:
            return orjson.loads(data.decode("utf-8", "replace"))
        except orjson.JSONDecodeError:
            return MISSING


def _line_oriented(body: bytes) -> bool:
    """Whether a document that failed to parse is JSON Lines: most of its lines parse alone."""
    total = good = 0
    for raw in body.split(b"\n", LINE_ORIENTED_SAMPLE)[:LINE_ORIENTED_SAMPLE]:
        line = raw.strip()
        if not line:
            continue
        total += 1
        if isinstance(loads_or_missing(line), dict | list):
            good += 1
    return total > 0 and good * 2 >= total and good > 0
