"""The session's events other than messages, kept compactly.

A long transcript holds a request and a usage report (or a context figure, or a log line) for
every few messages. As pydantic objects each costs about a kilobyte (the object, its field dict,
its fields-set, its span and its usage, each with their own numbers), which at a million
messages is most of the session's memory. The store keeps the events of these frequent, plain
kinds column by column (numbers in arrays, the few distinct strings once) and makes the object
again when asked: equal to the one added, field for field, with the same fields-set. Any other
event, or one of these kinds that does not fit the columns, is kept as it was given.
"""

from __future__ import annotations

from array import array
from typing import Any

from inspector.core.model import (
    ContextMeasured,
    Event,
    LogLine,
    RequestSent,
    SourceSpan,
    Usage,
    UsageReported,
)

PACKED_CLASSES: tuple[type[Any], ...] = (RequestSent, UsageReported, ContextMeasured, LogLine)
_CODE: dict[type, int] = {cls: code for code, cls in enumerate(PACKED_CLASSES)}
_USAGE_NAMES = tuple(Usage.model_fields)
_USAGE_COUNTS = ("input", "cache_read", "cache_write", "output", "reasoning")
# string fields with few distinct values, kept once per store
_INTERNED = frozenset({"thread", "model", "level", "tag", "label"})
_NO_TOTAL = -(2**63)
_SOURCE_LIMIT = 2**15

_new = object.__new__
_setattr = object.__setattr__
_SHARED_SETS: dict[frozenset[str], set[str]] = {}


def shared_set(fields: set[str]) -> set[str]:
    """One set object for every model with these fields set (the models are frozen: pydantic
    copies the set before it changes one, in ``model_copy``)."""
    key = frozenset(fields)
    shared = _SHARED_SETS.get(key)
    if shared is None:
        shared = _SHARED_SETS[key] = set(key)
    return shared


def build(cls: type[Any], data: dict[str, Any], fields: set[str]) -> Any:
    """A model from values it was validated with before (no validation again)."""
    model = _new(cls)
    _setattr(model, "__dict__", data)
    _setattr(model, "__pydantic_fields_set__", fields)
    _setattr(model, "__pydantic_extra__", None)
    _setattr(model, "__pydantic_private__", None)
    return model


_SPAN_SET = shared_set({"source", "offset", "length", "line"})
_span_checked: list[bool] = []  # whether building spans without validation gives the same


def make_span(source: int, offset: int, length: int, line: int) -> SourceSpan:
    """``SourceSpan(source=..., offset=..., length=..., line=...)`` without validation (one per
    input line and per body read back). Checked once against the validating constructor; on a
    difference it validates from then on."""
    if _span_checked and not _span_checked[0]:
        return SourceSpan(source=source, offset=offset, length=length, line=line)
    data = {"source": source, "offset": offset, "length": length, "line": line}
    span: SourceSpan = build(SourceSpan, data, _SPAN_SET)
    if not _span_checked:
        reference = SourceSpan(**data)
        _span_checked.append(
            span == reference
            and repr(span) == repr(reference)
            and span.model_fields_set == reference.model_fields_set
        )
        if not _span_checked[0]:
            return reference
    return span


def _plain(model: Any) -> bool:
    return model.__pydantic_extra__ is None and model.__pydantic_private__ is None


_UNSET = object()


class _Values:
    """A column of objects that is often one object throughout (``None``, ``"main"``, a shared
    fields-set): kept as that object and a count until another one comes."""

    __slots__ = ("_count", "_items", "_only")

    def __init__(self) -> None:
        self._items: list[Any] | None = None
        self._only: Any = _UNSET
        self._count = 0

    def append(self, value: Any) -> None:
        items = self._items
        if items is not None:
            items.append(value)
        elif value is self._only:
            self._count += 1
        elif not self._count:
            self._only, self._count = value, 1
        else:
            self._items = [self._only] * self._count
            self._items.append(value)

    def __getitem__(self, row: int) -> Any:
        items = self._items
        if items is not None:
            return items[row]
        if not 0 <= row < self._count:
            raise IndexError("row out of range")
        return self._only

    def __len__(self) -> int:
        return len(self._items) if self._items is not None else self._count


class _UsageColumns:
    def __init__(self) -> None:
        self.fields_set = _Values()
        self.counts = {name: array("q") for name in _USAGE_COUNTS}
        self.total = array("q")
        self.includes = array("B")

    def add(self, usage: Usage) -> int:
        """Keep ``usage``: its row. Raises OverflowError or TypeError (nothing kept) when a
        number does not fit."""
        values = usage.__dict__
        row = len(self.includes)
        total = values["total"]
        try:
            for name, column in self.counts.items():
                column.append(values[name])
            self.total.append(_NO_TOTAL if total is None else total)
        except (OverflowError, TypeError):
            self.truncate(row)
            raise
        self.includes.append(values["input_includes_cache"])
        self.fields_set.append(shared_set(usage.__pydantic_fields_set__))
        return row

    def truncate(self, row: int) -> None:
        for column in (*self.counts.values(), self.total, self.includes):
            del column[row:]

    def get(self, row: int) -> Usage:
        total = self.total[row]
        data: dict[str, Any] = {name: column[row] for name, column in self.counts.items()}
        data["total"] = None if total == _NO_TOTAL else total
        data["input_includes_cache"] = bool(self.includes[row])
        usage: Usage = build(Usage, data, self.fields_set[row])
        return usage


class _Columns:
    """The events of one packed class, field by field."""

    def __init__(self, cls: type[Any]) -> None:
        self.cls = cls
        self.names = tuple(cls.model_fields)
        self.type_value: str = cls.model_fields["type"].default
        self.objects = [n for n in self.names if n not in ("span", "type", "usage")]
        self.values: dict[str, _Values] = {name: _Values() for name in self.objects}
        self.fields_set = _Values()
        self.source = array("h")  # -1: no span
        self.offset = array("q")
        self.length = array("q")
        self.line = array("q")
        self.usage = _UsageColumns() if "usage" in self.names else None
        self.usage_row = array("i")

    def fits(self, event: Any) -> bool:
        """Whether ``event`` has the shape the columns keep (its numbers are checked as they
        go in: ``add`` says when one does not fit)."""
        if not _plain(event):
            return False
        values = event.__dict__
        if len(values) != len(self.names):
            return False
        span = values.get("span")
        if span is not None and (
            type(span) is not SourceSpan
            or not _plain(span)
            or type(span.source) is not int
            or not 0 <= span.source < _SOURCE_LIMIT
        ):
            return False
        if self.usage is None:
            return True
        usage = values.get("usage")
        return (
            type(usage) is Usage
            and _plain(usage)
            and type(usage.input_includes_cache) is bool
            and (usage.total is None or (type(usage.total) is int and usage.total != _NO_TOTAL))
        )

    def add(self, event: Any, strings: dict[str, str]) -> int | None:
        """Keep ``event`` (which ``fits``): its row, or None (and nothing kept) when one of its
        numbers does not fit a column."""
        row = len(self.source)
        values = event.__dict__
        try:
            span = values["span"]
            if span is None:
                self.source.append(-1)
                self.offset.append(0)
                self.length.append(0)
                self.line.append(0)
            else:
                self.source.append(span.source)
                self.offset.append(span.offset)
                self.length.append(span.length)
                self.line.append(span.line)
            if self.usage is not None:
                self.usage_row.append(self.usage.add(values["usage"]))
        except (OverflowError, TypeError):
            self._truncate(row)
            return None
        self.fields_set.append(shared_set(event.__pydantic_fields_set__))
        columns = self.values
        for name in self.objects:
            value = values[name]
            if name in _INTERNED and type(value) is str:
                value = strings.setdefault(value, value)
            columns[name].append(value)
        return row

    def _truncate(self, row: int) -> None:
        for column in (self.source, self.offset, self.length, self.line):
            del column[row:]
        if self.usage is not None:
            if len(self.usage_row) > row:
                del self.usage_row[row:]
            self.usage.truncate(len(self.usage_row))

    def get(self, row: int) -> Any:
        data: dict[str, Any] = {}
        for name in self.names:
            if name == "span":
                source = self.source[row]
                data[name] = (
                    None
                    if source < 0
                    else make_span(source, self.offset[row], self.length[row], self.line[row])
                )
            elif name == "type":
                data[name] = self.type_value
            elif name == "usage":
                assert self.usage is not None
                data[name] = self.usage.get(self.usage_row[row])
            else:
                data[name] = self.values[name][row]
        return build(self.cls, data, self.fields_set[row])


class EventStore:
    """Events in the order they were added; ``get(k)`` is the k-th one. With ``pack`` off,
    every event is kept as given (quicker to add, for sessions read once and let go)."""

    def __init__(self, *, pack: bool = True) -> None:
        self.pack = pack
        self._given: dict[int, Event] = {}  # the events kept as given, by position
        self._kind = array("b")  # the packed class's code, -1 when kept as given
        self._row = array("i")
        self._columns = [_Columns(cls) for cls in PACKED_CLASSES]
        self._strings: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._kind)

    def add(self, event: Event) -> None:
        code = _CODE.get(type(event), -1) if self.pack else -1
        if code >= 0:
            columns = self._columns[code]
            if columns.fits(event):
                row = columns.add(event, self._strings)
                if row is not None:
                    self._row.append(row)
                    self._kind.append(code)
                    return
        self._given[len(self._kind)] = event
        self._row.append(-1)
        self._kind.append(-1)

    def get(self, k: int) -> Event:
        code = self._kind[k]
        if code < 0:
            return self._given[k]
        made: Event = self._columns[code].get(self._row[k])
        return made

    def kind_of(self, k: int) -> type[Any]:
        """The k-th event's class, without making it."""
        code = self._kind[k]
        return PACKED_CLASSES[code] if code >= 0 else type(self._given[k])

    def packed(self, k: int) -> bool:
        return self._kind[k] >= 0

    def usage_row(self, k: int) -> int:
        """The row of the k-th event's usage in the usage columns (-1 when kept as given)."""
        code = self._kind[k]
        if code < 0 or PACKED_CLASSES[code] is not UsageReported:
            return -1
        return self._columns[code].usage_row[self._row[k]]

    def usage(self, row: int) -> Usage:
        columns = self._columns[_CODE[UsageReported]].usage
        assert columns is not None
        return columns.get(row)
