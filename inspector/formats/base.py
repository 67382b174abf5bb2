"""The parser protocol every input format implements.

A parser is fed bytes chunk by chunk (a whole file, or a live file as it grows) and returns
events. It never raises on bad data: what it cannot read becomes a ``ParseIssue`` with the file,
line, byte offset, reason and an excerpt. Parsers of line-oriented formats derive from
``LineParser``, which splits lines, tracks offsets and line numbers, holds a partial last line
until it is complete, skips over-long lines with bounded memory and flags invalid UTF-8.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any, ClassVar, TypeVar

import orjson
from pydantic import BaseModel

from inspector.core.model import Event, Message, MessageAdded, ParseIssue, SourceSpan

EXCERPT_CHARS = 120
DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024

M = TypeVar("M", bound=BaseModel)


# ------------------------------------------------------------------------------------------
# Building models from values the caller made itself

_new = object.__new__
_setattr = object.__setattr__


_SHAPES: dict[type[BaseModel], tuple[set[str], list[bool]]] = {}


def trusted(cls: type[M], data: dict[str, Any]) -> M:
    """``cls(**data)`` without validation, for values the caller made itself and knows to be
    valid, ``data`` holding every field of ``cls`` in field order.

    What ``model_construct`` does, without its per-field Python loop, and with one shared
    ``model_fields_set`` per class. Readers use it on their hot path. The first object of each
    class is compared with the validated one; should they differ (the model gained a field, or
    another pydantic), that class is validated from then on.
    """
    shape = _SHAPES.get(cls)
    if shape is None:
        shape = _SHAPES[cls] = (set(cls.model_fields), [])
    fields_set, checked = shape
    if checked and not checked[0]:
        return cls(**data)
    obj = _new(cls)
    _setattr(obj, "__dict__", data)
    _setattr(obj, "__pydantic_fields_set__", fields_set)
    _setattr(obj, "__pydantic_extra__", None)
    _setattr(obj, "__pydantic_private__", None)
    if not checked:
        same = _same(obj, cls, data)
        checked.append(same)
        if not same:
            return cls(**data)
    return obj


def _same(obj: BaseModel, cls: type[BaseModel], values: dict[str, Any]) -> bool:
    try:
        reference = cls(**values)
        return (
            obj == reference
            and list(obj.__dict__) == list(reference.__dict__)
            and obj.model_fields_set == reference.model_fields_set
            and repr(obj) == repr(reference)
        )
    except Exception:
        return False


_SPAN_FIELDS = {"source", "offset", "length", "line"}
_span_trusted: bool | None = None


def make_span(source: int, offset: int, length: int, line: int) -> SourceSpan:
    """``SourceSpan(source=..., offset=..., length=..., line=...)``, built without validation
    (one per input line: the hot path of every line reader). Checked like ``trusted``."""
    global _span_trusted
    if _span_trusted is False:
        return SourceSpan(source=source, offset=offset, length=length, line=line)
    span = _new(SourceSpan)
    _setattr(span, "__dict__", {"source": source, "offset": offset, "length": length, "line": line})
    _setattr(span, "__pydantic_fields_set__", _SPAN_FIELDS)
    _setattr(span, "__pydantic_extra__", None)
    _setattr(span, "__pydantic_private__", None)
    if _span_trusted is None:
        values = {"source": source, "offset": offset, "length": length, "line": line}
        _span_trusted = _same(span, SourceSpan, values)
        if not _span_trusted:
            return SourceSpan(**values)
    return span


def excerpt(data: bytes | str, limit: int = EXCERPT_CHARS) -> str:
    """A short, printable excerpt of a bad record (control characters made visible)."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    text = text[:limit]
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


class Parser(ABC):
    """Turns the bytes of one input into events, incrementally."""

    format_name: ClassVar[str] = ""

    def __init__(self, source: int = 0, path: str = "") -> None:
        self.source = source
        self.path = path

    @abstractmethod
    def feed(self, data: bytes) -> list[Event]:
        """Consume the next bytes of the input; return the events now complete."""

    @abstractmethod
    def finish(self) -> list[Event]:
        """The input has ended (or is saved and complete): flush whatever is held."""

    def reset(self) -> None:
        """The input was truncated or replaced: start again from its first byte."""
        self.__init__(self.source, self.path)  # type: ignore[misc]

    def messages_at(self, data: bytes, span: SourceSpan) -> list[Message]:
        """Re-read the messages recorded at ``span`` (``data`` holds exactly its bytes).

        Used to read bodies back lazily. The default parses the record with a fresh parser.
        """
        fresh = type(self)(self.source, self.path)
        events = [*fresh.feed(data + b"\n"), *fresh.finish()]
        return [e.message for e in events if isinstance(e, MessageAdded)]

    def issue(self, span: SourceSpan, reason: str, raw: bytes | str = b"") -> ParseIssue:
        return ParseIssue(
            file=self.path,
            line=span.line,
            offset=span.offset,
            reason=reason,
            excerpt=excerpt(raw),
            span=span,
        )


class LineParser(Parser):
    """A parser for inputs made of lines (JSON Lines, log files)."""

    max_line_bytes: ClassVar[int] = DEFAULT_MAX_LINE_BYTES

    def __init__(self, source: int = 0, path: str = "") -> None:
        super().__init__(source, path)
        self._offset = 0  # absolute offset of the first byte not yet consumed into a line
        self._line_no = 0
        self._pending: list[bytes] = []  # pieces of the partial last line
        self._pending_len = 0
        self._skipping = False  # inside an over-long line that is being skipped

    # -- line splitting -------------------------------------------------------------------

    def feed(self, data: bytes) -> list[Event]:
        out: list[Event] = []
        start = 0
        find = data.find
        while True:
            nl = find(b"\n", start)
            if nl < 0:
                break
            piece = data[start:nl]
            if self._pending or self._skipping:
                self._hold(piece)
                line = b"".join(self._pending)
                length = self._pending_len
                skipped = self._skipping
                self._pending = []
                self._pending_len = 0
                self._skipping = False
            else:
                line, length, skipped = piece, len(piece), False
            self._emit_line(line, length, skipped, out)
            self._offset += length + 1
            start = nl + 1
        if start < len(data):
            self._hold(data[start:])
        return out

    def finish(self) -> list[Event]:
        out: list[Event] = []
        if self._pending or self._skipping:
            line = b"".join(self._pending)
            length = self._pending_len
            skipped = self._skipping
            self._pending = []
            self._pending_len = 0
            self._skipping = False
            self._emit_line(line, length, skipped, out)
            self._offset += length
        out.extend(self.end_of_input())
        return out

    @property
    def held_bytes(self) -> int:
        """Bytes of an incomplete last line being held back."""
        return self._pending_len

    def _hold(self, piece: bytes) -> None:
        self._pending_len += len(piece)
        if self._skipping:
            return
        if self._pending_len > self.max_line_bytes:
            self._pending = []
            self._skipping = True
            return
        self._pending.append(piece)

    def _emit_line(self, line: bytes, length: int, skipped: bool, out: list[Event]) -> None:
        self._line_no += 1
        span = make_span(self.source, self._offset, length, self._line_no)
        if skipped:
            out.append(
                self.issue(
                    span,
                    f"line too long ({length} bytes, limit {self.max_line_bytes}); skipped",
                )
            )
            return
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line.strip():
            return
        try:
            out.extend(self.parse_line(line, span))
        except Exception as exc:  # a parser bug must not lose the rest of the file
            out.append(self.issue(span, f"unreadable record ({type(exc).__name__}: {exc})", line))

    def messages_at(self, data: bytes, span: SourceSpan) -> list[Message]:
        """Re-read one line's messages with a fresh parser, keeping the line's own span (ids
        derived from line numbers or offsets come out as they did the first time)."""
        fresh = type(self)(self.source, self.path)
        line = data.rstrip(b"\r\n")
        events: list[Event] = []
        try:
            events.extend(fresh.parse_line(line, span))
        except Exception:
            return []
        events.extend(fresh.end_of_input())
        return [e.message for e in events if isinstance(e, MessageAdded)]

    # -- hooks for subclasses -------------------------------------------------------------

    @abstractmethod
    def parse_line(self, line: bytes, span: SourceSpan) -> Iterable[Event]:
        """Turn one complete, non-blank line (without its newline) into events."""

    def end_of_input(self) -> Iterable[Event]:
        """Events that can only be produced once the input has ended (e.g. pending groups)."""
        return ()

    def load_json(self, line: bytes, span: SourceSpan, out: list[Event]) -> Any:
        """Parse a JSON line; on failure append a ParseIssue and return None.

        Invalid UTF-8 is replaced (and flagged) rather than rejected.
        """
        try:
            return orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                text = line.decode("utf-8", "replace")
                try:
                    value = orjson.loads(text)
                except orjson.JSONDecodeError:
                    pass
                else:
                    out.append(self.issue(span, "invalid UTF-8 replaced with U+FFFD", line))
                    return value
            out.append(self.issue(span, f"not valid JSON ({exc.msg})", line))
            return None


def decode_text(line: bytes, parser: Parser, span: SourceSpan, out: list[Event]) -> str:
    """Decode a text line; invalid UTF-8 is replaced and flagged as a parse issue."""
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        out.append(parser.issue(span, "invalid UTF-8 replaced with U+FFFD", line))
        return line.decode("utf-8", "replace")


class DocumentParser(Parser):
    """A parser for inputs that are one JSON document: bytes are held until the input ends."""

    max_document_bytes: ClassVar[int] = 1024 * 1024 * 1024

    def __init__(self, source: int = 0, path: str = "") -> None:
        super().__init__(source, path)
        self._chunks: list[bytes] = []
        self._size = 0

    def feed(self, data: bytes) -> list[Event]:
        self._size += len(data)
        if self._size <= self.max_document_bytes:
            self._chunks.append(data)
        return []

    def finish(self) -> list[Event]:
        span = SourceSpan(source=self.source, offset=0, length=self._size, line=1)
        if self._size > self.max_document_bytes:
            return [self.issue(span, f"document too large ({self._size} bytes); not read")]
        data = b"".join(self._chunks)
        self._chunks = []
        out: list[Event] = []
        if not data.strip():
            return out
        value = _load_document(data, self, span, out)
        if value is not None:
            out.extend(self.parse_document(value, span))
        return out

    @abstractmethod
    def parse_document(self, value: Any, span: SourceSpan) -> Iterable[Event]:
        """Turn the parsed document into events."""


def _load_document(data: bytes, parser: Parser, span: SourceSpan, out: list[Event]) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        try:
            return orjson.loads(data.decode("utf-8", "replace"))
        except orjson.JSONDecodeError:
            out.append(parser.issue(span, f"not valid JSON ({exc.msg})", data[:200]))
            return None
