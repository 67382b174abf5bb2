"""The parser protocol every input format implements.

A parser is fed bytes chunk by chunk (a whole file, or a live file as it grows) and returns
events. It never raises on bad data: what it cannot read becomes a ``ParseIssue`` with the file,
line, byte offset, reason and an excerpt. Parsers of line-oriented formats derive from
``LineParser``, which splits lines, tracks offsets and line numbers, holds a partial last line
until it is complete, skips over-long lines with bounded memory and flags invalid UTF-8.

Reading without bodies. A caller that keeps no message bodies (the loader for ``stats
--no-exact``) feeds with ``feed_entries``: messages may then come as ``MessageEntry`` records
(columns only) instead of ``MessageAdded``. A line parser may split that per-line work in two
phases: ``scan_line`` (one line's bytes to a small record of plain values, seeing no other line,
so it can run in another process) and ``apply_scanned`` (records to events and entries, in
order, with the parser's state). A line that either declines is read by ``parse_line`` as
usual.

``read_file`` reads a whole file and picks how: fed chunk by chunk here, or, without bodies and
for a large file, scanned on two cores (``formats.parallel_read``, a reading strategy beside
this protocol: the parsers know nothing of it).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar, cast

import orjson
from pydantic import BaseModel

from ctx_inspect.core.model import Event, Message, MessageAdded, ParseIssue, SourceSpan
from ctx_inspect.core.packed import LogEntry, RequestEntry, UsageEntry
from ctx_inspect.core.session import MessageEntry
from ctx_inspect.core.unvalidated import build, make_span
from ctx_inspect.formats import parallel_read

EXCERPT_CHARS = 120
DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024

M = TypeVar("M", bound=BaseModel)


# ------------------------------------------------------------------------------------------
# Building models from values the caller made itself

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
    obj: M = build(cls, data, fields_set)
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


def excerpt(data: bytes | str, limit: int = EXCERPT_CHARS) -> str:
    """A short, printable excerpt of a bad record (control characters made visible)."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    text = text[:limit]
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def compact_json(value: Any) -> str:
    """The compact JSON text of a value (no spaces, non-ASCII kept), as a model would see it;
    values nested deeper than the encoders go (a hostile input's) are written without
    recursion."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # past 64-bit integers, nested past 255 levels, not JSON types
        pass
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    except RecursionError:
        return _flat_json(value)


def _flat_json(value: Any) -> str:
    """``compact_json`` of ``value`` with a stack of its own in place of recursion."""
    out: list[str] = []
    todo: list[tuple[bool, Any]] = [(False, value)]  # (written as is, a text or a value)
    while todo:
        literal, item = todo.pop()
        if literal:
            out.append(item)
        elif isinstance(item, dict):
            todo.append((True, "}"))
            entries = list(item.items())
            for index in range(len(entries) - 1, -1, -1):
                key, inner = entries[index]
                todo.append((False, inner))
                comma = "," if index else ""
                todo.append((True, comma + json.dumps(str(key), ensure_ascii=False) + ":"))
            todo.append((True, "{"))
        elif isinstance(item, list | tuple):
            todo.append((True, "]"))
            for index in range(len(item) - 1, -1, -1):
                todo.append((False, item[index]))
                if index:
                    todo.append((True, ","))
            todo.append((True, "["))
        else:
            out.append(json.dumps(item, ensure_ascii=False, default=str))
    return "".join(out)


def shown(value: Any, limit: int = 60, *, quoted: bool = True) -> str:
    """A short text of a value read from an input, for a parse issue's reason: a string
    (quoted unless not ``quoted``), anything else as compact JSON, cut to ``limit`` characters
    (``repr`` or ``str`` of a value nested deeply would exhaust the recursion)."""
    if not isinstance(value, str):
        value = compact_json(value)
    elif quoted:
        value = repr(value)
    text: str = value
    return text if len(text) <= limit else text[: limit - 3] + "..."


# what ``feed_entries`` gives: events, and messages (and frequent events) maybe as entries
Item = Event | MessageEntry | RequestEntry | UsageEntry | LogEntry
ScannedLine = tuple[int, int, Any]  # a line's offset, length and ``scan_line`` record


class EventSink(Protocol):
    """Where a reader's helpers put events: a ``list[Event]`` or a ``list[Item]``."""

    def append(self, event: Event, /) -> None: ...

    def extend(self, events: Iterable[Event], /) -> None: ...


class Parser(ABC):
    """Turns the bytes of one input into events, incrementally."""

    format_name: ClassVar[str] = ""
    # The estimate rule whose figure ``apply_scanned`` can give with each ``MessageEntry``
    # (``MessageEntry.estimate``), and whether it is asked to (the session estimates with it).
    entry_estimate_rule: ClassVar[str | None] = None
    entry_estimates: bool = False

    def __init__(self, source: int = 0, path: str = "") -> None:
        self.source = source
        self.path = path

    @abstractmethod
    def feed(self, data: bytes) -> list[Event]:
        """Consume the next bytes of the input; return the events now complete."""

    @abstractmethod
    def finish(self) -> list[Event]:
        """The input has ended (or is saved and complete): flush whatever is held."""

    def feed_entries(self, data: bytes) -> list[Item]:
        """``feed`` for a caller that keeps no message bodies: a message may come as a
        ``MessageEntry`` (its columns, no body) instead of a ``MessageAdded``. The default gives
        what ``feed`` gives."""
        return cast(list[Item], self.feed(data))

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

    def issue(
        self,
        span: SourceSpan,
        reason: str,
        raw: bytes | str = b"",
        *,
        at: tuple[int, int] | None = None,
    ) -> ParseIssue:
        """An issue about the bytes of ``span``; ``at`` (line, offset) is where in them the
        problem is when not at their start (where a whole document stopped parsing: the span
        is the whole document, none of whose bytes were read)."""
        line, offset = at if at is not None else (span.line, span.offset)
        return ParseIssue(
            file=self.path,
            line=line,
            offset=offset,
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

    def _emit_line(self, line: bytes, length: int, skipped: bool, out: EventSink) -> None:
        self._line_no += 1
        span = make_span(self.source, self._offset, length, self._line_no)
        if skipped:
            out.append(self._too_long(span))
            return
        self._read_line(line, span, out)

    def _too_long(self, span: SourceSpan) -> ParseIssue:
        return self.issue(
            span, f"line too long ({span.length} bytes, limit {self.max_line_bytes}); skipped"
        )

    def _read_line(self, line: bytes, span: SourceSpan, out: EventSink) -> None:
        """One complete line (not over-long) read the usual way, by ``parse_line``."""
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line.strip():
            return
        try:
            out.extend(self.parse_line(line, span))
        except Exception as exc:  # a parser bug must not lose the rest of the file
            out.append(self._record_issue(span, exc, line))

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

    # -- reading in two phases (bodies off) -----------------------------------------------

    # Whether ``scan_line`` and ``apply_scanned`` are implemented (see the module's docstring).
    two_phase: ClassVar[bool] = False

    @staticmethod
    def scan_line(line: memoryview) -> Any:
        """Phase one: one line's bytes (without its newline) to a record made of plain values
        (str, int, float, bool, None, tuples and lists of them), or None to have the line read by
        ``parse_line``. Sees no other line and no parser state: it may run in another process."""
        return None

    def apply_scanned(self, record: Any, span: SourceSpan, out: list[Item]) -> bool:
        """Phase two, in line order: a record of ``scan_line`` to events (and ``MessageEntry``
        records), with the parser's state. Returns False, having changed nothing, to have the
        line read by ``parse_line`` instead."""
        return False

    def _applied(self, record: Any, span: SourceSpan, out: list[Item]) -> bool:
        """``apply_scanned``, a failure becoming a parse issue (a reader bug must not lose the
        rest of the file) in place of whatever the record had given."""
        mark = len(out)
        try:
            return self.apply_scanned(record, span, out)
        except Exception as exc:
            del out[mark:]
            out.append(self._record_issue(span, exc))
            return True

    def _record_issue(self, span: SourceSpan, exc: Exception, line: bytes = b"") -> ParseIssue:
        return self.issue(span, f"unreadable record ({type(exc).__name__}: {exc})", line)

    def feed_entries(self, data: bytes) -> list[Item]:
        """Two-phase parsers: each complete line is scanned and applied (or read by
        ``parse_line`` when either declines); the splitting is ``feed``'s."""
        if not self.two_phase:
            return cast(list[Item], self.feed(data))
        out: list[Item] = []
        start = 0
        find = data.find
        view = memoryview(data)
        scan = self.scan_line
        apply = self._applied
        source = self.source
        while True:
            nl = find(b"\n", start)
            if nl < 0:
                break
            if self._pending or self._skipping:
                self._hold(data[start:nl])
                line = b"".join(self._pending)
                length = self._pending_len
                skipped = self._skipping
                self._pending = []
                self._pending_len = 0
                self._skipping = False
                self._emit_line(line, length, skipped, out)
            else:
                length = nl - start
                self._line_no += 1
                span = make_span(source, self._offset, length, self._line_no)
                try:
                    record = scan(view[start:nl]) if self._offset else None  # line 1: a BOM?
                except Exception:  # read by ``parse_line``, as ``scan_chunk`` has it
                    record = None
                if record is None or not apply(record, span, out):
                    self._read_line(data[start:nl], span, out)
            self._offset += length + 1
            start = nl + 1
        if start < len(data):
            self._hold(data[start:])
        return out

    def feed_scanned(
        self, records: Iterable[ScannedLine], read: Callable[[int, int], bytes]
    ) -> list[Item]:
        """Apply the records ``scan_line`` made of the next complete lines (elsewhere, e.g. in
        a worker process), in order; a line declined is read back with ``read(offset, length)``.
        Nothing may be held (a partial line) when called."""
        out: list[Item] = []
        apply = self.apply_scanned
        source = self.source
        limit = self.max_line_bytes
        line = self._line_no
        for offset, length, record in records:
            line += 1
            self._line_no = line
            self._offset = offset + length + 1
            span = make_span(source, offset, length, line)
            if record is not None and offset:
                mark = len(out)
                try:
                    if apply(record, span, out):
                        continue
                except Exception as exc:  # a reader bug must not lose the rest of the file
                    del out[mark:]
                    out.append(self._record_issue(span, exc))
                    continue
            if length > limit:
                out.append(self._too_long(span))
            else:
                self._read_line(read(offset, length), span, out)
        return out

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
            where = (exc.lineno, exc.pos)
            out.append(parser.issue(span, f"not valid JSON ({exc.msg})", data[:200], at=where))
            return None


# ------------------------------------------------------------------------------------------
# Reading a whole file

READ_CHUNK = 1 << 20


def read_file(
    parser: Parser,
    path: Path,
    *,
    bodies: bool = True,
    chunk_size: int = READ_CHUNK,
    parallel: bool | None = None,
) -> Iterator[list[Item]]:
    """What ``parser`` makes of the whole file at ``path`` (as it is when read, and what was
    appended by the time it is read), batch by batch; ``finish`` is left to the caller. Without
    ``bodies`` the parser is fed with ``feed_entries``.

    The strategy: without bodies, a two-phase line parser reads a large file on two cores when
    ``parallel_read.chosen`` says so (``parallel``: force it on or off; see that module), the
    rest of the file (a partial last line, what grew meanwhile) then fed here; otherwise the
    file is fed here chunk by chunk. Both give the same items.
    """
    covered = 0  # where the complete lines scanned on two cores end
    if (
        not bodies
        and isinstance(parser, LineParser)
        and parser.two_phase
        and parser.max_line_bytes >= chunk_size
        and parallel_read.chosen(path, parallel)
    ):
        covered = yield from parallel_read.read_scanned(parser, path)
    yield from _read_from(parser, path, covered, chunk_size, bodies)


def _read_from(
    parser: Parser, path: Path, start: int, chunk_size: int, bodies: bool
) -> Iterator[list[Item]]:
    feed = cast(Callable[[bytes], list[Item]], parser.feed) if bodies else parser.feed_entries
    with path.open("rb") as fh:
        if start:
            fh.seek(start)
        while True:
            chunk = fh.read(chunk_size)
            if not chunk:
                return
            yield feed(chunk)
