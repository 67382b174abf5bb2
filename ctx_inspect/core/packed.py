"""The session's events other than messages, kept compactly.

A long transcript holds a request and a usage report (or a context figure, or a log line) for
every few messages. As pydantic objects each costs about a kilobyte (the object, its field dict,
its fields-set, its span and its usage, each with their own numbers), which at a million
messages is most of the session's memory. The store keeps the events of these frequent, plain
kinds column by column (numbers in arrays, the few distinct strings once) and makes the object
again when asked: equal to the one added, field for field, with the same fields-set. Any other
event, or one of these kinds that does not fit the columns, is kept as it was given.

Events wait in a list until ``EventStore.flush`` (a session flushes after each batch) and are
packed a batch at a time: a few C loops per field for the batch, not a few dozen Python steps
per event. A reader that makes no bodies (``Parser.feed_entries``) may give an event of these
kinds as an entry instead (``RequestEntry``, ``UsageEntry``, ``LogEntry``: its fields as a tuple,
the span's four numbers in place of the span), so the event is never made unless asked for.
"""

from __future__ import annotations

from array import array
from itertools import groupby, repeat
from operator import attrgetter, is_, itemgetter
from typing import Any, NamedTuple

from ctx_inspect.core.columns import ObjectColumn, widened
from ctx_inspect.core.model import (
    ContextMeasured,
    Event,
    LogLine,
    RequestSent,
    SourceSpan,
    Usage,
    UsageReported,
)
from ctx_inspect.core.unvalidated import always_plain, build, is_plain, make_span, shared_set


class RequestEntry(NamedTuple):
    """A ``RequestSent`` with every field set, its span as four numbers (``source`` >= 0)."""

    timestamp: str | None
    source: int
    offset: int
    length: int
    line: int
    model: str | None
    request_id: str | None
    thread: str
    final_turn: bool
    compaction: bool


class UsageEntry(NamedTuple):
    """A ``UsageReported`` with every field set (and every field of its ``Usage``)."""

    timestamp: str | None
    source: int
    offset: int
    length: int
    line: int
    input: int
    cache_read: int
    cache_write: int
    output: int
    reasoning: int
    total: int | None
    input_includes_cache: bool
    model: str | None
    request_id: str | None
    thread: str
    context_tokens: int | None
    context_label: str

    @property
    def prompt_tokens(self) -> int:
        """``Usage.prompt_tokens`` of the usage it stands for."""
        if self.input_includes_cache:
            return self.input + self.cache_write
        return self.input + self.cache_read + self.cache_write


class LogEntry(NamedTuple):
    """A ``LogLine`` with every field set, its span as four numbers (``source`` >= 0)."""

    timestamp: str | None
    source: int
    offset: int
    length: int
    line: int
    text: str
    level: str | None
    tag: str | None


PACKED_CLASSES: tuple[type[Any], ...] = (RequestSent, UsageReported, ContextMeasured, LogLine)
# each entry class and the event class it stands for
ENTRY_CLASSES: dict[type[Any], type[Any]] = {
    RequestEntry: RequestSent,
    UsageEntry: UsageReported,
    LogEntry: LogLine,
}
_CODE: dict[type, int] = {cls: code for code, cls in enumerate(PACKED_CLASSES)}
_ENTRY_CODE: dict[type, int] = {entry: _CODE[cls] for entry, cls in ENTRY_CLASSES.items()}
_ENTRY_OF: dict[type, type] = {cls: entry for entry, cls in ENTRY_CLASSES.items()}
_USAGE_COUNTS = ("input", "cache_read", "cache_write", "output", "reasoning")
_SPAN_NAMES = ("source", "offset", "length", "line")
# string fields with few distinct values, kept once per store
_INTERNED = frozenset({"thread", "model", "level", "tag", "label"})
_NO_TOTAL = -(2**63)
_SOURCE_LIMIT = 2**15

_DICT = attrgetter("__dict__")
_EXTRA = attrgetter("__pydantic_extra__")
_PRIVATE = attrgetter("__pydantic_private__")
_FIELDS_SET = attrgetter("__pydantic_fields_set__")
_SPAN = itemgetter("span")
_USAGE = itemgetter("usage")
_SPAN_NUMBERS = itemgetter(*_SPAN_NAMES)
_SPAN_GETTERS = tuple(itemgetter(name) for name in _SPAN_NAMES)
_USAGE_GETTERS = tuple(itemgetter(name) for name in _USAGE_COUNTS)
_TOTAL = itemgetter("total")
_INCLUDES = itemgetter("input_includes_cache")
_NO_SPAN_NUMBERS = (-1, 0, 0, 0)
_NONE_TYPE = type(None)
_SPANS_PLAIN = always_plain(SourceSpan)
_USAGES_PLAIN = always_plain(Usage)
_USAGE_FIELDS = shared_set(set(Usage.model_fields))


def _all_plain(models: list[Any]) -> bool:
    """``is_plain`` of every model, in one pass of C loops."""
    count = len(models)
    return (
        list(map(_EXTRA, models)).count(None) == count
        and list(map(_PRIVATE, models)).count(None) == count
    )


def _all_ints(values: Any) -> bool:
    return set(map(type, values)) == {int}


def _interned(values: Any, strings: dict[str, str]) -> Any:
    """``values`` with each string replaced by the store's equal one (None when a value is
    neither a string nor None: such a column is not packed)."""
    first = values[0]
    if all(map(is_, values, repeat(first))):
        if type(first) is str:
            return [strings.setdefault(first, first)] * len(values)
        return values if first is None else None
    if not set(map(type, values)) <= {str, _NONE_TYPE}:
        return None
    return list(map(strings.setdefault, values, values))


class _Spans:
    """Spans as four number columns (source -1: no span); lengths and line numbers 32-bit
    until one does not fit."""

    def __init__(self) -> None:
        self.source = array("h")
        self.offset = array("q")
        self.length = array("i")
        self.line = array("i")

    def extend(self, columns: tuple[Any, Any, Any, Any]) -> bool:
        """Keep the spans whose numbers are ``columns`` (source, offset, length, line), or none
        (and say so) when one does not fit."""
        row = len(self.source)
        try:
            for array_, values in zip(self._arrays(), columns, strict=True):
                array_.fromlist(values if type(values) is list else list(values))
        except TypeError:
            self.truncate(row)
            return False
        except OverflowError:
            self.truncate(row)
            if self.length.typecode == "q":
                return False
            self.length, self.line = widened(self.length), widened(self.line)
            return self.extend(columns)
        return True

    def _arrays(self) -> tuple[array[int], array[int], array[int], array[int]]:
        return self.source, self.offset, self.length, self.line

    def truncate(self, row: int) -> None:
        for array_ in self._arrays():
            del array_[row:]

    def get(self, row: int) -> SourceSpan | None:
        source = self.source[row]
        if source < 0:
            return None
        return make_span(source, self.offset[row], self.length[row], self.line[row])


def _span_columns(spans: list[Any]) -> tuple[Any, Any, Any, Any] | None:
    """The number columns of ``spans`` (None: no span), or None when one is not a span the
    columns keep."""
    kinds = set(map(type, spans))  # (``list.count(None)`` would call each model's __eq__)
    if kinds == {_NONE_TYPE}:
        count = len(spans)
        return [-1] * count, [0] * count, [0] * count, [0] * count
    missing = _NONE_TYPE in kinds
    real = [span for span in spans if span is not None] if missing else spans
    if set(map(type, real)) != {SourceSpan} or not (_SPANS_PLAIN or _all_plain(real)):
        return None
    values = list(map(_DICT, real))
    if missing:
        numbers = [_NO_SPAN_NUMBERS if s is None else _SPAN_NUMBERS(s.__dict__) for s in spans]
        columns = tuple(map(list, zip(*numbers, strict=True)))
    else:
        columns = tuple(list(map(get, values)) for get in _SPAN_GETTERS)
    sources = list(map(_SPAN_GETTERS[0], values))
    if not all(map(_all_ints, columns)) or not (min(sources) >= 0 and max(sources) < _SOURCE_LIMIT):
        return None
    return columns  # type: ignore[return-value]


class _UsageColumns:
    """Usages, field by field (the total ``_NO_TOTAL`` when there is none)."""

    def __init__(self) -> None:
        self.fields_set = ObjectColumn()
        self.counts = {name: array("i") for name in _USAGE_COUNTS}  # widened when one is big
        self.total = array("q")
        self.includes = array("B")

    def __len__(self) -> int:
        return len(self.includes)

    def extend(self, counts: list[Any], totals: Any, includes: Any, sets: Any) -> bool:
        """Keep usages given field by field: the five count columns, the totals (None: none),
        whether each input counts the cache, and the fields-set of each (a list) or of all;
        all or none (and say so)."""
        if not all(map(_all_ints, counts)) or set(map(type, includes)) != {bool}:
            return False
        if all(map(is_, totals, repeat(None))):
            totals = [_NO_TOTAL] * len(totals)
        elif not set(map(type, totals)) <= {int, _NONE_TYPE} or _NO_TOTAL in totals:
            return False
        else:
            totals = [_NO_TOTAL if total is None else total for total in totals]
        row = len(self)
        try:
            for name, values in zip(_USAGE_COUNTS, counts, strict=True):
                self.counts[name].fromlist(values)
            self.total.fromlist(totals)
        except OverflowError:
            self.truncate(row)
            if all(column.typecode == "q" for column in self.counts.values()):
                return False
            self.counts = {name: widened(column) for name, column in self.counts.items()}
            return self.extend(counts, totals, includes, sets)
        self.includes.fromlist(list(includes))
        if isinstance(sets, list):
            self.fields_set.extend(sets)
        else:
            self.fields_set.extend_same(sets, len(totals))
        return True

    def extend_models(self, usages: list[Any]) -> bool:
        """Keep each of ``usages`` (``Usage`` models), or none (and say so)."""
        if set(map(type, usages)) != {Usage} or not (_USAGES_PLAIN or _all_plain(usages)):
            return False
        values = list(map(_DICT, usages))
        counts = [list(map(get, values)) for get in _USAGE_GETTERS]
        totals = list(map(_TOTAL, values))
        return self.extend(counts, totals, list(map(_INCLUDES, values)), _shared_sets(usages))

    def truncate(self, row: int) -> None:
        for column in (*self.counts.values(), self.total, self.includes):
            del column[row:]

    def get(self, row: int) -> Usage:
        data: dict[str, Any] = {name: column[row] for name, column in self.counts.items()}
        total = self.total[row]
        data["total"] = None if total == _NO_TOTAL else total
        data["input_includes_cache"] = bool(self.includes[row])
        usage: Usage = build(Usage, data, self.fields_set[row])
        return usage


def _shared_sets(models: list[Any]) -> list[set[str]] | set[str]:
    """The shared fields-set of each model (``shared_set``), or the one set when all are equal."""
    sets = list(map(_FIELDS_SET, models))
    if sets.count(sets[0]) == len(sets):
        return shared_set(sets[0])
    return list(map(shared_set, sets))


class _Layout(NamedTuple):
    """What the columns of a class need to know of it (worked out once per class)."""

    names: tuple[str, ...]  # its fields, in order
    type_value: str
    objects: tuple[str, ...]  # the fields kept as objects
    all_fields: set[str]  # the fields-set of the event an entry stands for
    plain: bool  # ``always_plain``
    entry: type[Any] | None  # the entry class that stands for its events


_LAYOUTS: dict[type[Any], _Layout] = {}
_BULK_MIN = 16  # fewer events of a class in a batch are kept one by one


class _Columns:
    """The events of one packed class, field by field: the span's numbers, the usage's fields,
    each other field as a ``ObjectColumn``."""

    def __init__(self, cls: type[Any]) -> None:
        self.cls = cls
        layout = _LAYOUTS.get(cls)
        if layout is None:
            names = tuple(cls.model_fields)
            layout = _LAYOUTS[cls] = _Layout(
                names,
                cls.model_fields["type"].default,
                tuple(n for n in names if n not in ("span", "type", "usage")),
                shared_set(set(names)),
                always_plain(cls),
                _ENTRY_OF.get(cls),
            )
        self.names, self.type_value, self.objects, self.all_fields, self.plain, self.entry = layout
        self.values: dict[str, ObjectColumn] = {name: ObjectColumn() for name in self.objects}
        self.fields_set = ObjectColumn()
        self.spans = _Spans()
        self.usage = _UsageColumns() if "usage" in self.names else None

    def __len__(self) -> int:
        return len(self.fields_set)

    def extend(self, items: list[Any], strings: dict[str, str]) -> list[bool]:
        """Keep each of ``items`` (events of the class, or entries standing for them) that has
        a shape the columns keep, in order: whether each was kept. A run of events or of
        entries is kept at once when all of it fits (the usual case), else one by one."""
        if len(items) < _BULK_MIN and not any(type(item) is self.entry for item in items):
            return [self._add(event, strings) for event in items]
        kept: list[bool] = []
        for kind, run in groupby(items, type):
            group = list(run)
            if (kind is self.entry and self._extend_entries(group, strings)) or (
                kind is not self.entry and self._extend_models(group, strings)
            ):
                kept.extend([True] * len(group))
            else:
                kept.extend([self._add(entry_event(item), strings) for item in group])
        return kept

    def _extend_models(self, events: list[Any], strings: dict[str, str]) -> bool:
        """Keep every one of ``events`` in a few C loops per field, or none (and say so)."""
        count = len(events)
        if not self.plain and not _all_plain(events):
            return False
        values = list(map(_DICT, events))
        if list(map(len, values)).count(len(self.names)) != count:
            return False
        spans = _span_columns(list(map(_SPAN, values)))
        if spans is None:
            return False
        objects = {name: list(map(itemgetter(name), values)) for name in self.objects}
        usages = list(map(_USAGE, values)) if self.usage is not None else []
        return self._keep(spans, objects, strings, usages, _shared_sets(events))

    def _extend_entries(self, entries: list[Any], strings: dict[str, str]) -> bool:
        """Keep every one of ``entries`` (one transposition and a C loop per field)."""
        fields = dict(zip(self.entry._fields, zip(*entries, strict=True), strict=True))  # type: ignore[union-attr]
        spans = (fields["source"], fields["offset"], fields["length"], fields["line"])
        if min(spans[0]) < 0:
            return False  # an entry has a span
        objects = {name: fields[name] for name in self.objects}
        usage = None
        if self.usage is not None:
            counts = [list(fields[name]) for name in _USAGE_COUNTS]
            usage = (counts, fields["total"], fields["input_includes_cache"], _USAGE_FIELDS)
        return self._keep(spans, objects, strings, usage, self.all_fields)

    def _keep(
        self,
        spans: tuple[Any, Any, Any, Any],
        objects: dict[str, Any],
        strings: dict[str, str],
        usage: Any,
        sets: list[set[str]] | set[str],
    ) -> bool:
        """Keep a batch given column by column, all of it or none (and say so). ``usage``: the
        ``Usage`` models, or their fields (see ``_UsageColumns.extend``)."""
        for name in _INTERNED.intersection(objects):
            interned = _interned(objects[name], strings)
            if interned is None:
                return False
            objects[name] = interned
        row = len(self)
        if not self.spans.extend(spans):
            return False
        if self.usage is not None:
            if isinstance(usage, tuple):
                done = self.usage.extend(*usage)
            else:
                done = self.usage.extend_models(usage)
            if not done:
                self.spans.truncate(row)
                return False
        for name, values in objects.items():
            self.values[name].extend(values)
        if isinstance(sets, list):
            self.fields_set.extend(sets)
        else:
            self.fields_set.extend_same(sets, len(spans[0]))
        return True

    def _add(self, event: Any, strings: dict[str, str]) -> bool:
        """Keep ``event`` alone, if it has a shape the columns keep (no extra or private values,
        no span or a span of a source the columns hold, numbers that fit)."""
        if not (self.plain or is_plain(event)):
            return False
        values = event.__dict__
        if len(values) != len(self.names):
            return False
        span = values["span"]
        numbers = _NO_SPAN_NUMBERS
        if span is not None:
            if type(span) is not SourceSpan or not (_SPANS_PLAIN or is_plain(span)):
                return False
            numbers = _SPAN_NUMBERS(span.__dict__)
            source = numbers[0]
            if type(source) is not int or not 0 <= source < _SOURCE_LIMIT:
                return False
            if not _all_ints(numbers):
                return False
        spans = ([numbers[0]], [numbers[1]], [numbers[2]], [numbers[3]])
        row = len(self)
        if not self.spans.extend(spans):
            return False
        if self.usage is not None and not self.usage.extend_models([values["usage"]]):
            self.spans.truncate(row)
            return False
        for name in self.objects:
            value = values[name]
            if type(value) is str and name in _INTERNED:
                value = strings.setdefault(value, value)
            self.values[name].append(value)
        self.fields_set.append(shared_set(event.__pydantic_fields_set__))
        return True

    def get(self, row: int) -> Any:
        data: dict[str, Any] = {}
        for name in self.names:
            if name == "span":
                data[name] = self.spans.get(row)
            elif name == "type":
                data[name] = self.type_value
            elif name == "usage":
                assert self.usage is not None
                data[name] = self.usage.get(row)
            else:
                data[name] = self.values[name][row]
        return build(self.cls, data, self.fields_set[row])


def entry_event(item: Any) -> Any:
    """The event an entry stands for (an event: itself)."""
    cls = ENTRY_CLASSES.get(type(item))
    if cls is None:
        return item
    fields = item._asdict()
    span = make_span(*(fields.pop(name) for name in _SPAN_NAMES))
    data: dict[str, Any] = {}
    for name in cls.model_fields:
        if name == "span":
            data[name] = span
        elif name == "type":
            data[name] = cls.model_fields["type"].default
        elif name == "usage":
            numbers = {key: fields.pop(key) for key in Usage.model_fields}
            data[name] = build(Usage, numbers, _USAGE_FIELDS)
        else:
            data[name] = fields[name]
    return build(cls, data, shared_set(set(cls.model_fields)))


class EventStore:
    """Events in the order they were added; ``get(k)`` is the k-th one. With ``pack`` off,
    events are kept as given (entries are always packed: they have no object to keep)."""

    def __init__(self, *, pack: bool = True) -> None:
        self.pack = pack
        self._given: dict[int, Event] = {}  # the events kept as given, by position
        self._kind = array("b")  # the packed class's code, -1 when kept as given
        self._row = array("i")  # the row in its class's columns (-1 until flushed)
        # made when the first event of their class comes (a session of a few messages, one of
        # thousands read from one file, would otherwise carry all of them empty)
        self._columns: list[_Columns | None] = [None] * len(PACKED_CLASSES)
        self._waiting: list[tuple[list[int], list[Any]] | None] = [None] * len(PACKED_CLASSES)
        self._strings: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._kind)

    def add(self, event: Event | RequestEntry | UsageEntry | LogEntry) -> None:
        kind = type(event)
        code = _CODE.get(kind, -1) if self.pack else -1
        if code < 0:
            code = _ENTRY_CODE.get(kind, -1)
        if code >= 0:
            waiting = self._waiting[code]
            if waiting is None:
                waiting = self._waiting[code] = ([], [])
            waiting[0].append(len(self._kind))
            waiting[1].append(event)
            self._row.append(-1)
            self._kind.append(code)
            return
        self._given[len(self._kind)] = event  # type: ignore[assignment]
        self._row.append(-1)
        self._kind.append(-1)

    def flush(self) -> None:
        """Pack what was added since the last flush."""
        for code, waiting in enumerate(self._waiting):
            if waiting is None:
                continue
            self._waiting[code] = None
            positions, items = waiting
            columns = self._columns[code]
            if columns is None:
                columns = self._columns[code] = _Columns(PACKED_CLASSES[code])
            row = len(columns)
            rows, kinds, given = self._row, self._kind, self._given
            kept = columns.extend(items, self._strings)
            for k, item, done in zip(positions, items, kept, strict=True):
                if done:
                    rows[k] = row
                    row += 1
                else:
                    kinds[k] = -1
                    given[k] = entry_event(item)

    def get(self, k: int) -> Event:
        code = self._kind[k]
        if code < 0:
            return self._given[k]
        row = self._row[k]
        if row < 0:
            self.flush()
            return self.get(k)
        columns = self._columns[code]
        assert columns is not None  # a row was kept in them
        made: Event = columns.get(row)
        return made

    def thread_of(self, k: int) -> str | None:
        """The k-th event's thread (None: its class has none), without making it."""
        code = self._kind[k]
        if code < 0:
            thread: str | None = getattr(self._given[k], "thread", None)
            return thread
        row = self._row[k]
        if row < 0:
            self.flush()
            return self.thread_of(k)
        columns = self._columns[code]
        assert columns is not None
        values = columns.values.get("thread")
        return None if values is None else values[row]

    def kind_of(self, k: int) -> type[Any]:
        """The k-th event's class, without making it."""
        code = self._kind[k]
        return PACKED_CLASSES[code] if code >= 0 else type(self._given[k])

    def packed(self, k: int) -> bool:
        self.flush()
        return self._kind[k] >= 0

    def usage_row(self, k: int) -> int:
        """The row of the k-th event's usage in the usage columns (-1 when kept as given)."""
        code = self._kind[k]
        if code < 0 or PACKED_CLASSES[code] is not UsageReported:
            return -1
        if self._row[k] < 0:
            self.flush()
            return self.usage_row(k)
        return self._row[k]

    def usage(self, row: int) -> Usage:
        columns = self._columns[_CODE[UsageReported]]
        assert columns is not None and columns.usage is not None
        return columns.usage.get(row)
