"""A session: the ordered events of one agent run and the state derived at every step.

A *step* is one model request. The events before a request are that step's build-up; the
provider's usage for a request belongs to the request's own step. The session keeps a small
record per message (role, kind, flags, token figures, byte offsets) in columns, not the message
bodies: bodies are read back lazily through a bounded cache, so a large transcript stays small
in memory. Appends come in batches, so a live file can be followed.

A caller that needs no bodies (``stats --no-exact``) may have a reader hand the session a
``MessageEntry`` instead of a ``MessageAdded`` (``Parser.feed_entries``): the message's columns
only, its body read back by span when asked for. Both give the same record.
"""

from __future__ import annotations

import threading
from array import array
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import IntFlag
from typing import NamedTuple, Protocol, overload

from ctx_inspect.core.columns import ObjectColumn, widened
from ctx_inspect.core.model import (
    Compacted,
    ContextMeasured,
    ContextReset,
    DebugTopic,
    Event,
    FinalTurnForced,
    GuardEvaluated,
    LogLine,
    Marker,
    Message,
    MessageAdded,
    MessageKind,
    Origin,
    ParseIssue,
    Pruned,
    RequestRejected,
    RequestSent,
    Role,
    SessionInfo,
    SourceSpan,
    ToolOutputAction,
    ToolOutputChanged,
    Usage,
    UsageReported,
)
from ctx_inspect.core.packed import ENTRY_CLASSES, EventStore, LogEntry, RequestEntry, UsageEntry
from ctx_inspect.core.unvalidated import make_span, updated

MAIN_THREAD = "main"
PRUNED_MARKER = "[Old tool result content cleared]"
BODY_CACHE_SIZE = 4096
_PACK_THREAD_FROM = 64  # events of a thread from which its session packs them
_TO_MAIN = {"thread": MAIN_THREAD}

_ROLES = list(Role)
_KINDS = list(MessageKind)
_ROLE_CODE = {r: i for i, r in enumerate(_ROLES)}


def role_name(code: int) -> str:
    """The role stored as ``code`` in the session's columns."""
    return _ROLES[code].value


def kind_name(code: int) -> str:
    """The message kind stored as ``code`` in the session's columns."""
    return _KINDS[code].value


_KIND_CODE = {k: i for i, k in enumerate(_KINDS)}
# Event types (exactly these classes) that ``append`` stores with nothing else to note, and
# those that change nothing in the derived state.
_PLAIN: frozenset[type] = frozenset(
    {
        RequestSent,
        UsageReported,
        RequestRejected,
        LogLine,
        ContextMeasured,
        GuardEvaluated,
        Pruned,
        Compacted,
        ContextReset,
        ToolOutputChanged,
        FinalTurnForced,
        DebugTopic,
        Marker,
        *ENTRY_CLASSES,
    }
)
_INERT: frozenset[type] = frozenset(
    {LogLine, LogEntry, ParseIssue, SessionInfo, Marker, DebugTopic}
)
_QUIET_GAP = 64  # at most this many inert events between a request and its answer


class Flag(IntFlag):
    NONE = 0
    VISIBLE = 1  # sent to the model
    PRUNED = 2  # content cleared by a prune
    DROPPED = 4  # a tool output replaced because it did not fit
    TRUNCATED = 8
    REMOVED = 16  # taken out of context by a compaction
    INLINE = 32  # body kept in memory (no span to read it back from)


# The same bits as plain ints: IntFlag arithmetic is slow on the per-message paths.
_VISIBLE = int(Flag.VISIBLE)
_PRUNED = int(Flag.PRUNED)
_DROPPED = int(Flag.DROPPED)
_TRUNCATED = int(Flag.TRUNCATED)
_REMOVED = int(Flag.REMOVED)
_INLINE = int(Flag.INLINE)
_FLAGS: list[Flag] = []  # Flag(n) for every byte value, built on first use


def _flag(value: int) -> Flag:
    if not _FLAGS:
        _FLAGS.extend(Flag(n) for n in range(256))
    return _FLAGS[value]


_span = make_span  # a span from the table's own columns
# the columns a message taken from another session keeps as they are (``Session._take_rows``)
_TAKEN = (
    "role",
    "kind",
    "chars",
    "estimate",
    "exact",
    "reported",
    "source",
    "offset",
    "length",
    "line",
)
EventEntry = RequestEntry | UsageEntry | LogEntry  # events given by their fields (``core.packed``)


class _Live:
    """The indices of the messages in context: one byte per message, in index order (messages
    enter in the order they were added)."""

    __slots__ = ("bits", "count")

    def __init__(self) -> None:
        self.bits = bytearray()
        self.count = 0

    def reserve(self, size: int) -> None:
        if size > len(self.bits):
            self.bits.extend(bytes(max(size - len(self.bits), len(self.bits), 16)))

    def add(self, index: int) -> None:
        self.reserve(index + 1)
        if not self.bits[index]:
            self.bits[index] = 1
            self.count += 1

    def discard(self, index: int) -> None:
        if index < len(self.bits) and self.bits[index]:
            self.bits[index] = 0
            self.count -= 1

    def __contains__(self, index: int) -> bool:
        return index < len(self.bits) and self.bits[index] == 1

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[int]:
        find = self.bits.find
        at = find(1)
        while at >= 0:
            yield at
            at = find(1, at + 1)


class MessageEntry(NamedTuple):
    """A message known by its columns only: what a reader gives instead of a ``MessageAdded``
    when no body is wanted (``Parser.feed_entries``). The session records it exactly as it records
    the ``MessageAdded`` of the same message; the body is read back by span through the session's
    body reader when asked for (there must be one). Its estimate comes from ``chars`` through
    ``Session.estimate_chars`` when the session has one, else ``estimate`` when the reader gives
    it, else from the body read back."""

    id: str
    role: Role
    kind: MessageKind
    visible: bool
    thread: str
    tool_name: str | None  # ``Message.tool_name``
    chars: int  # ``len(Message.text)``
    tokens: int | None  # ``MessageAdded.tokens``: the format's own figure, reported
    source: int  # the span of the message's record
    offset: int
    length: int
    line: int
    # the agent's own estimate, when the reader computes it (``Parser.entry_estimates``)
    estimate: int | None = None


class Counter(Protocol):
    """A token counter (``ctx_inspect.core.tokens.TokenCounter`` is one)."""

    def count_batch(self, texts: Sequence[str]) -> list[int]: ...


Estimator = Callable[[Message], int]
CharsEstimator = Callable[[int], int]
BodyReader = Callable[[SourceSpan], Sequence[Message]]

# The per-message overhead added to a tokenizer's count of the text (role and separators).
MESSAGE_OVERHEAD = 3


class MessageRow(NamedTuple):
    """One message as ``Session.message_rows`` gives it."""

    position: int  # the message's index in the session
    kind: MessageKind
    sent_in_main: bool  # visible, in the main thread: what the main agent's model is sent
    estimate: int
    event_index: int


@dataclass(frozen=True, slots=True)
class MessageRecord:
    """What the session keeps about one message (a view over its columns)."""

    index: int
    id: str
    role: Role
    kind: MessageKind
    thread: str
    tool_name: str | None
    chars: int
    estimate: int
    exact: int | None
    reported: int | None
    flags: Flag
    step_added: int
    step_removed: int | None
    event_index: int
    span: SourceSpan | None

    @property
    def visible(self) -> bool:
        return bool(self.flags & Flag.VISIBLE)

    def tokens(self) -> tuple[int, Origin]:
        """This message's best token figure and where it came from."""
        if self.reported is not None:
            return self.reported, Origin.REPORTED
        if self.exact is not None:
            return self.exact, Origin.EXACT
        return self.estimate, Origin.ESTIMATED


@dataclass(slots=True)
class StepState:
    """The context as it was when one model request was sent (or, for the open step, now)."""

    step: int
    first_event: int
    last_event: int
    request_event: int | None = None
    messages: int = 0  # visible messages in context
    estimated: int = 0  # sum of the profile's estimates over those messages
    exact: int | None = None  # sum of exact counts, None until every one is known
    reported: int | None = None  # the provider's prompt size, or the agent's own figure
    reported_label: str = ""
    peak_reported: int | None = None  # the largest figure seen during the build-up
    usage: Usage | None = None
    guard: GuardEvaluated | None = None
    compactions: int = 0
    prunes: int = 0
    dropped: int = 0
    final_turn: bool = False
    # The latest figure reported at or before this step (``anchor_step``), and the sums of the
    # context's estimates and exact counts when it was reported: a step without a figure of its
    # own is that figure plus what entered or left the context since (``since``).
    anchor: int | None = None
    anchor_step: int = 0
    anchor_estimated: int = 0
    anchor_exact: int | None = None
    rejected: int = 0  # requests the provider refused because the prompt did not fit
    # where ``reported`` and ``anchor`` come from: the agent or provider (``REPORTED``), or an
    # estimate given as a figure (``ESTIMATED``: a what-if's replayed figures)
    reported_origin: Origin = Origin.REPORTED
    anchor_origin: Origin = Origin.REPORTED

    @property
    def tokens(self) -> int:
        return self.best()[0]

    @property
    def origin(self) -> Origin:
        return self.best()[1]

    @property
    def since(self) -> int:
        """The change in the context since the anchor figure, by the exact counts when both
        ends have them, else by the profile's estimates."""
        if self.exact is not None and self.anchor_exact is not None:
            return self.exact - self.anchor_exact
        return self.estimated - self.anchor_estimated

    def best(self) -> tuple[int, Origin]:
        """The step's figure: the one reported at this step; else the latest reported figure
        plus what was added since (a recount of the visible messages alone would leave out the
        system prompt and tool schemas); else the exact count; else the estimate."""
        if self.reported is not None:
            return self.reported, self.reported_origin
        if self.anchor is not None:
            # on an estimate given as a figure: an estimate still
            estimated = self.anchor_origin is not Origin.REPORTED
            return max(0, self.anchor + self.since), (
                Origin.ESTIMATED if estimated else Origin.ANCHORED
            )
        if self.exact is not None:
            return self.exact, Origin.EXACT
        return self.estimated, Origin.ESTIMATED

    def describe(self) -> str:
        """Where the step's figure came from, in words."""
        if self.reported is None and self.anchor is not None:
            since = self.since
            sign = "+" if since >= 0 else "-"
            basis = "exact" if self.exact is not None and self.anchor_exact is not None else "est."
            return (
                f"{self.anchor_origin.value} {self.anchor:,} at step {self.anchor_step} {sign} "
                f"{abs(since):,} {basis} since"
            )
        if self.reported is not None and self.reported_label:
            label = "provider usage" if self.reported_label == "usage" else self.reported_label
            return f"{self.reported_origin.value} ({label})"
        return self.best()[1].value

    @property
    def peak(self) -> int:
        """The highest figure of this step: at the request, or before a compaction shrank it."""
        if self.peak_reported is not None:
            return max(self.peak_reported, self.tokens)
        return self.tokens


_NONE = -(2**63)  # "no figure" in the step columns
_ORIGINS = (Origin.REPORTED, Origin.ESTIMATED, Origin.EXACT, Origin.ANCHORED)
_ORIGIN_CODES = {origin: code for code, origin in enumerate(_ORIGINS)}
COMPACTION_LABEL = "compaction"  # a step whose figure is a compaction's after


class StepFigures(NamedTuple):
    """A step's figures (``Session.step_figures``)."""

    step: int
    tokens: int  # ``StepState.tokens``
    peak: int  # ``StepState.peak``
    # False for the anchored figure (the last reported one plus an estimate since) of a request
    # that was not sent or that the provider refused: no size that was sent or reported
    sent: bool


def _int64(tokens: int) -> int:
    """A figure from the input as a 64-bit column holds it (no real figure is larger)."""
    return max(-(2**63) + 1, min(tokens, 2**63 - 1))


class StepTable(Sequence[StepState]):
    """The closed steps, column by column (a long session has hundreds of thousands). An item
    is a ``StepState`` made from the columns: a copy, changing it changes nothing here."""

    def __init__(self, store: EventStore) -> None:
        self._store = store  # where the usage reports are
        self.first_event = array("i")
        self.last_event = array("i")
        self.request_event = array("i")  # -1: none
        self.messages = array("i")
        self.estimated = array("q")
        self.exact = array("q")
        self.reported = array("q")
        self.peak_reported = array("q")
        self.label = array("B")  # widened past 256 labels (they come from the input)
        self.labels: list[str] = []
        self._label_code: dict[str, int] = {}
        self.usage_row = array("i")  # the usage's row in the store's columns, -1 for none
        self._usage_given: dict[int, Usage] = {}  # usage of reports the store kept as given
        self.guard = ObjectColumn()  # GuardEvaluated or None, per step (mostly None)
        self.compactions = array("i")
        self.prunes = array("i")
        self.dropped = array("i")
        self.final_turn = array("B")
        self.anchor = array("q")
        self.anchor_step = array("i")
        self.anchor_estimated = array("q")
        self.anchor_exact = array("q")
        self.rejected = array("i")
        # the origins of ``reported`` and ``anchor`` (``_ORIGIN_CODES``, reported + 4 x anchor)
        self.origins = array("B")

    def __len__(self) -> int:
        return len(self.first_event)

    def _label(self, text: str) -> int:
        code = self._label_code.get(text)
        if code is None:
            code = self._label_code[text] = len(self.labels)
            self.labels.append(text)
            if code >= 1 << (8 * self.label.itemsize):
                self.label = widened(self.label)
        return code

    def append(self, state: StepState) -> None:
        if state.step != len(self) + 1:
            raise ValueError(f"step {state.step} after {len(self)} steps")
        self.first_event.append(state.first_event)
        self.last_event.append(state.last_event)
        self.request_event.append(-1 if state.request_event is None else state.request_event)
        self.messages.append(state.messages)
        self.estimated.append(state.estimated)
        self.exact.append(_NONE if state.exact is None else state.exact)
        self.reported.append(_NONE if state.reported is None else _int64(state.reported))
        peak = state.peak_reported
        self.peak_reported.append(_NONE if peak is None else _int64(peak))
        self.label.append(self._label(state.reported_label))
        self.usage_row.append(-1)
        if state.usage is not None:
            self._usage_given[len(self.usage_row) - 1] = state.usage
        self.guard.append(state.guard)
        self.compactions.append(state.compactions)
        self.prunes.append(state.prunes)
        self.dropped.append(state.dropped)
        self.final_turn.append(state.final_turn)
        self.anchor.append(_NONE if state.anchor is None else _int64(state.anchor))
        self.anchor_step.append(state.anchor_step)
        self.anchor_estimated.append(state.anchor_estimated)
        self.anchor_exact.append(_NONE if state.anchor_exact is None else state.anchor_exact)
        self.rejected.append(state.rejected)
        self.origins.append(
            _ORIGIN_CODES[state.reported_origin] + 4 * _ORIGIN_CODES[state.anchor_origin]
        )

    def set_usage(self, i: int, row: int, given: Usage | None, reported: int, label: str) -> None:
        """Step ``i``'s usage: row ``row`` of the store's usage columns, else ``given``."""
        self.usage_row[i] = row
        if row < 0 and given is not None:
            self._usage_given[i] = given
        else:
            self._usage_given.pop(i, None)
        self.reported[i] = _int64(reported)
        self.label[i] = self._label(label)
        self.origins[i] &= ~3  # reported by the provider or the agent

    def _state(self, i: int) -> StepState:
        request = self.request_event[i]
        exact = self.exact[i]
        reported = self.reported[i]
        peak = self.peak_reported[i]
        anchor = self.anchor[i]
        anchor_exact = self.anchor_exact[i]
        return StepState(
            i + 1,
            self.first_event[i],
            self.last_event[i],
            None if request < 0 else request,
            self.messages[i],
            self.estimated[i],
            None if exact == _NONE else exact,
            None if reported == _NONE else reported,
            self.labels[self.label[i]],
            None if peak == _NONE else peak,
            self._usage(i),
            self.guard[i],
            self.compactions[i],
            self.prunes[i],
            self.dropped[i],
            bool(self.final_turn[i]),
            None if anchor == _NONE else anchor,
            self.anchor_step[i],
            self.anchor_estimated[i],
            None if anchor_exact == _NONE else anchor_exact,
            self.rejected[i],
            _ORIGINS[self.origins[i] & 3],
            _ORIGINS[self.origins[i] >> 2],
        )

    @overload
    def __getitem__(self, index: int) -> StepState: ...

    @overload
    def __getitem__(self, index: slice) -> list[StepState]: ...

    def __getitem__(self, index: int | slice) -> StepState | list[StepState]:
        if isinstance(index, slice):
            return [self._state(i) for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("step index out of range")
        return self._state(index)

    def __iter__(self) -> Iterator[StepState]:
        return map(self._state, range(len(self)))

    def _usage(self, i: int) -> Usage | None:
        row = self.usage_row[i]
        if row >= 0:
            return self._store.usage(row)
        return self._usage_given.get(i)

    def tokens(self, i: int) -> int:
        """``self[i].tokens`` without making the step."""
        reported = self.reported[i]
        if reported != _NONE:
            return reported
        exact = self.exact[i]
        if self.anchor[i] != _NONE:
            anchor_exact = self.anchor_exact[i]
            if exact != _NONE and anchor_exact != _NONE:
                since = exact - anchor_exact
            else:
                since = self.estimated[i] - self.anchor_estimated[i]
            return max(0, self.anchor[i] + since)
        return exact if exact != _NONE else self.estimated[i]

    def peak(self, i: int) -> int:
        """``self[i].peak`` without making the step."""
        tokens = self.tokens(i)
        peak = self.peak_reported[i]
        return tokens if peak == _NONE else max(peak, tokens)

    def figures(self) -> Iterator[StepFigures]:
        """The figures of every step, without making them."""
        for i, (reported, peak, anchor, rejected) in enumerate(
            zip(self.reported, self.peak_reported, self.anchor, self.rejected, strict=True)
        ):
            tokens = self.tokens(i)
            # a refused request reported nothing: an anchored figure is no size that was sent
            unsent = rejected and peak == _NONE and reported == _NONE and anchor != _NONE
            yield StepFigures(
                i + 1, tokens, tokens if peak == _NONE or peak < tokens else peak, not unsent
            )


@dataclass
class SourceInfo:
    path: str
    format: str


@dataclass
class _Running:
    """Derivation state carried from event to event."""

    live: _Live = field(default_factory=_Live)  # message indices in context, in order
    estimated: int = 0
    exact: int = 0
    exact_unknown: int = 0
    reported: int | None = None
    reported_label: str = ""
    peak_reported: int | None = None
    guard: GuardEvaluated | None = None
    compactions: int = 0
    prunes: int = 0
    dropped: int = 0
    final_turn: bool = False
    anchor: int | None = None  # see ``StepState.anchor``
    anchor_step: int = 0
    anchor_estimated: int = 0
    anchor_exact: int | None = None
    reported_origin: Origin = Origin.REPORTED
    anchor_origin: Origin = Origin.REPORTED
    compaction_request: bool = False  # the latest request was the agent's summarisation call


class StringColumn(Sequence[str]):
    """Strings kept end to end in one buffer, each made again when read (a million short ids as
    ``str`` objects would cost ~60 MB; here they cost their UTF-8 bytes and four more)."""

    def __init__(self) -> None:
        self._data = bytearray()
        self._ends = array("i")  # widened past 2 GiB of text

    def __len__(self) -> int:
        return len(self._ends)

    def append(self, text: str) -> None:
        self._data += text.encode("utf-8", "surrogatepass")
        try:
            self._ends.append(len(self._data))
        except OverflowError:
            self._ends = widened(self._ends)
            self._ends.append(len(self._data))

    def truncate(self, count: int) -> None:
        """Keep the first ``count`` strings."""
        del self._data[self._ends[count - 1] if count else 0 :]
        del self._ends[count:]

    def extend(self, texts: Iterable[str]) -> None:
        for text in texts:
            self.append(text)

    def _at(self, i: int) -> str:
        start = self._ends[i - 1] if i else 0
        return self._data[start : self._ends[i]].decode("utf-8", "surrogatepass")

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self._at(i) for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("string index out of range")
        return self._at(index)

    def __iter__(self) -> Iterator[str]:
        return map(self._at, range(len(self)))


class MessageTable:
    """Column storage for per-message records. The columns in ``NARROW`` start narrow and are
    widened (``widen``) when a number does not fit: a message of more than 2 GiB, more than
    65,535 threads (a file of a conversation per line), 32,767 tool names."""

    NARROW = ("thread", "tool", "chars", "length", "line")

    def __init__(self) -> None:
        self.ids = StringColumn()
        self._index_of: dict[str, int] | None = None  # built on the first lookup by id
        self.role = array("b")
        self.kind = array("b")
        self.flags = array("B")
        self.thread = array("H")
        self.tool = array("h")  # -1: none
        self.chars = array("i")
        self.estimate = array("i")
        self.exact = array("i")  # -1: unknown
        self.reported = array("i")  # -1: none
        self.step_added = array("i")
        self.step_removed = array("i")  # -1: still in context
        self.event_index = array("i")
        self.source = array("h")  # -1: no span
        self.offset = array("q")
        self.length = array("i")
        self.line = array("i")
        self.threads: list[str] = []
        self._thread_code: dict[str, int] = {}
        self.tools: list[str] = []
        self._tool_code: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.ids)

    def columns(self) -> dict[str, array[int]]:
        """Every number column, by name."""
        return {name: value for name, value in vars(self).items() if isinstance(value, array)}

    def truncate(self, count: int) -> None:
        """Keep the first ``count`` rows (undoes a row that did not fit)."""
        self.ids.truncate(count)
        for column in self.columns().values():
            del column[count:]
        self._index_of = None  # rebuilt when next asked for

    def widen(self) -> None:
        """Widen each narrow column one step (OverflowError when all are 64-bit already)."""
        narrow = [name for name in self.NARROW if getattr(self, name).typecode != "q"]
        if not narrow:
            raise OverflowError("a number does not fit 64 bits")
        for name in narrow:
            setattr(self, name, widened(getattr(self, name)))

    @property
    def index_of(self) -> dict[str, int]:
        """Message id -> index (the last message with that id). Built when first asked for:
        many sessions never look a message up by id, and the map is the table's largest part."""
        if self._index_of is None:
            self._index_of = dict(zip(self.ids, range(len(self.ids)), strict=True))
        return self._index_of

    def intern_thread(self, name: str) -> int:
        code = self._thread_code.get(name)
        if code is None:
            code = self._thread_code[name] = len(self.threads)
            self.threads.append(name)
        return code

    def intern_tool(self, name: str | None) -> int:
        if name is None:
            return -1
        code = self._tool_code.get(name)
        if code is None:
            code = self._tool_code[name] = len(self.tools)
            self.tools.append(name)
        return code


class Session:
    """Ordered events of one run, with the state at every step."""

    def __init__(
        self,
        *,
        estimator: Estimator | None = None,
        counter: Counter | None = None,
        count_exact: bool = False,
        body_reader: BodyReader | None = None,
        cache_size: int = BODY_CACHE_SIZE,
        estimate_chars: CharsEstimator | None = None,
        pack_events: bool = False,
    ) -> None:
        """``pack_events``: keep the frequent plain events column by column (``EventStore``),
        for a session kept open (the dashboard, a followed file), at some cost in reading."""
        self.estimator: Estimator = estimator or _chars4
        # ``estimator`` as a function of ``len(message.text)``, when that is all it depends on:
        # lets a ``MessageEntry`` be estimated without its body.
        self.estimate_chars: CharsEstimator | None = estimate_chars
        if estimator is None and estimate_chars is None:
            self.estimate_chars = _chars4_of_length
        self.counter = counter
        self.count_exact = count_exact and counter is not None
        self.tokenized = True  # whether estimates may use a tokenizer (off for --no-exact)
        self.body_reader = body_reader
        self.sources: list[SourceInfo] = []
        self.table = MessageTable()
        # Every event as a code: a message event is its table index (>= 0); any other event
        # is ``-1 - k`` for ``self._store.get(k)``.
        self._events = array("i")
        self._store = EventStore(pack=pack_events)
        self._non_message = array("i")  # indices of the events that are not messages
        self._of_type: dict[type, array[int]] = {}  # the same, by event class
        self._inline: dict[int, Message] = {}
        self._bodies: OrderedDict[int, Message] = OrderedDict()
        self._bodies_lock = threading.Lock()
        self._cache_size = cache_size
        self.steps = StepTable(self._store)  # closed steps (each has its request)
        self.issues: list[int] = []  # event indices of parse issues
        self.info: dict[str, object] = {}
        self._run = _Running()
        self._open = StepState(step=1, first_event=0, last_event=-1)
        self._marker_estimate_: int | None = None
        self._marker_exact: int | None = None

    def sibling(self, *, pack_events: bool | None = None) -> Session:
        """An empty session configured like this one (estimates, counting, body reader, event
        storage unless ``pack_events`` says otherwise), with the same sources."""
        new = Session(
            estimator=self.estimator,
            counter=self.counter,
            count_exact=self.count_exact,
            body_reader=self.body_reader,
            cache_size=self._cache_size,
            estimate_chars=self.estimate_chars,
            pack_events=self._store.pack if pack_events is None else pack_events,
        )
        new.tokenized = self.tokenized
        new._marker_estimate_ = self._marker_estimate_
        new.sources = [SourceInfo(info.path, info.format) for info in self.sources]
        return new

    @property
    def _marker_estimate(self) -> int:
        """The estimate of a pruned message's marker (made when first needed: a file of many
        threads makes many sessions)."""
        if self._marker_estimate_ is None:
            self._marker_estimate_ = self.estimator(_marker_message())
        return self._marker_estimate_

    # -- reading ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._events)

    @property
    def message_count(self) -> int:
        return len(self.table)

    def event(self, index: int) -> Event:
        code = self._events[index]
        if code >= 0:
            return self._message_event(code)
        return self._store.get(-1 - code)

    def events(self, start: int = 0, stop: int | None = None) -> Iterator[Event]:
        stop = len(self._events) if stop is None else stop
        for i in range(start, stop):
            yield self.event(i)

    def raw_events(self, start: int = 0) -> Iterator[Event | int]:
        """Events in order from ``start``, message events as their table indices (cheap; no
        body reads)."""
        obj = self._store.get
        codes = self._events if start <= 0 else self._events[start:]
        for code in codes:
            yield code if code >= 0 else obj(-1 - code)

    def non_message_indices(self) -> array[int]:
        """The indices of the events that are not messages, in order (the session's own array:
        read it, do not change it)."""
        return self._non_message

    def non_message_events(self) -> Iterator[tuple[int, Event]]:
        return zip(self._non_message, map(self._store.get, range(len(self._store))), strict=True)

    def events_of(self, *classes: type[Event]) -> Iterator[tuple[int, Event]]:
        """``(index, event)`` of the non-message events that are instances of ``classes``, in
        order, without walking the others."""
        picked = [
            indices
            for kind, indices in self._of_type.items()
            if issubclass(ENTRY_CLASSES.get(kind, kind), classes)
        ]
        if not picked:
            return iter(())
        if len(picked) == 1:
            order: Iterable[int] = picked[0]
        else:
            order = sorted(i for indices in picked for i in indices)
        codes, obj = self._events, self._store.get
        return ((i, obj(-1 - codes[i])) for i in order)

    def record(self, index: int) -> MessageRecord:
        t = self.table
        tool = t.tool[index]
        source = t.source[index]
        exact = t.exact[index]
        reported = t.reported[index]
        removed = t.step_removed[index]
        span = (
            _span(source, t.offset[index], t.length[index], t.line[index]) if source >= 0 else None
        )
        return MessageRecord(
            index=index,
            id=t.ids[index],
            role=_ROLES[t.role[index]],
            kind=_KINDS[t.kind[index]],
            thread=t.threads[t.thread[index]],
            tool_name=t.tools[tool] if tool >= 0 else None,
            chars=t.chars[index],
            estimate=t.estimate[index],
            exact=exact if exact >= 0 else None,
            reported=reported if reported >= 0 else None,
            flags=_flag(t.flags[index]),
            step_added=t.step_added[index],
            step_removed=removed if removed >= 0 else None,
            event_index=t.event_index[index],
            span=span,
        )

    def records(self) -> Iterator[MessageRecord]:
        t = self.table
        ids, role, kind, threads, thread = t.ids, t.role, t.kind, t.threads, t.thread
        tools, tool, chars, estimate, exact = t.tools, t.tool, t.chars, t.estimate, t.exact
        reported, flags, added, removed = t.reported, t.flags, t.step_added, t.step_removed
        event_index, source, offset, length, line = (
            t.event_index,
            t.source,
            t.offset,
            t.length,
            t.line,
        )
        for i in range(len(t)):
            code = tool[i]
            where = source[i]
            n_exact = exact[i]
            n_reported = reported[i]
            gone = removed[i]
            yield MessageRecord(
                i,
                ids[i],
                _ROLES[role[i]],
                _KINDS[kind[i]],
                threads[thread[i]],
                tools[code] if code >= 0 else None,
                chars[i],
                estimate[i],
                n_exact if n_exact >= 0 else None,
                n_reported if n_reported >= 0 else None,
                _flag(flags[i]),
                added[i],
                gone if gone >= 0 else None,
                event_index[i],
                _span(where, offset[i], length[i], line[i]) if where >= 0 else None,
            )

    def message_rows(self) -> Iterator[MessageRow]:
        """Every message's index, kind, whether it is sent to the model in the main thread,
        estimate and event index, as plain tuples: what one pass over every message needs
        (a replay), without making a record (its id, flags, span) per message."""
        t = self.table
        kind, thread, flags = t.kind, t.thread, t.flags
        estimate, event_index = t.estimate, t.event_index
        main = t.threads.index(MAIN_THREAD) if MAIN_THREAD in t.threads else -1
        visible = int(Flag.VISIBLE)
        for i in range(len(t)):
            yield MessageRow(
                i,
                _KINDS[kind[i]],
                thread[i] == main and bool(flags[i] & visible),
                estimate[i],
                event_index[i],
            )

    def body(self, index: int) -> Message:
        """The full message, read back from its input when it is not held in memory."""
        inline = self._inline.get(index)
        if inline is not None:
            return inline
        with self._bodies_lock:  # a replay in a worker thread reads while the screen does
            cached = self._bodies.get(index)
            if cached is not None:
                self._bodies.move_to_end(index)
                return cached
        message = self._read_body(index)
        with self._bodies_lock:
            self._bodies[index] = message
            if len(self._bodies) > self._cache_size:
                self._bodies.popitem(last=False)
        return message

    def _read_body(self, index: int) -> Message:
        t = self.table
        mid = t.ids[index]
        source = t.source[index]
        if source >= 0 and self.body_reader is not None:
            span = _span(source, t.offset[index], t.length[index], t.line[index])
            for message in self.body_reader(span):
                if message.id == mid:
                    return message
        return Message(id=mid, role=_ROLES[t.role[index]], kind=_KINDS[t.kind[index]])

    def _message_event(self, index: int) -> MessageAdded:
        rec = self.record(index)
        return MessageAdded(
            message=self.body(index),
            tokens=rec.reported,
            tokens_origin=Origin.REPORTED if rec.reported is not None else None,
            span=rec.span,
        )

    def step_at(self, event_index: int) -> int:
        """The step an event belongs to."""
        last_events = self.steps.last_event
        lo = bisect_left(last_events, event_index)
        if lo < len(last_events):
            return lo + 1
        return self._open.step

    def open_step_shown(self) -> bool:
        """Whether the open build-up counts as a step of its own: it holds a message, a figure
        or a decision (a log of figures alone, with no messages, ends at its last request)."""
        state, run = self._open, self._run
        if state.last_event < state.first_event:
            return False
        if not self.steps:
            return True
        t = self.table
        return bool(
            (len(t) and t.step_added[len(t) - 1] == state.step)
            or run.reported is not None
            or run.peak_reported is not None
            or run.guard is not None
            or run.compactions
            or run.prunes
            or run.dropped
            or run.final_turn
        )

    def step_count(self) -> int:
        """How many steps ``all_steps`` holds, without making them."""
        return len(self.steps) + self.open_step_shown()

    def state_of(self, step: int) -> StepState | None:
        """``all_steps()[step - 1]`` (1-based), without making the others."""
        if 0 < step <= len(self.steps):
            return self.steps[step - 1]
        if step == len(self.steps) + 1 and self.open_step_shown():
            return self.live_state()
        return None

    def step_figures(self) -> Iterator[StepFigures]:
        """The figures of each of ``all_steps()``, without making them (a long session has
        hundreds of thousands)."""
        yield from self.steps.figures()
        if self.open_step_shown():
            state = self.live_state()
            unsent = state.peak_reported is None and state.origin is Origin.ANCHORED
            yield StepFigures(state.step, state.tokens, state.peak, not unsent)

    def all_steps(self) -> list[StepState]:
        """Closed steps, plus the open build-up step when it is shown (``open_step_shown``)."""
        if self.open_step_shown():
            return [*self.steps, self.live_state()]
        return list(self.steps)

    def live_state(self) -> StepState:
        """The state now: the open step's build-up, as if a request were sent."""
        state = StepState(
            step=self._open.step,
            first_event=self._open.first_event,
            last_event=self._open.last_event,
        )
        self._fill(state)
        return state

    # -- appending -------------------------------------------------------------------------

    def add_source(self, path: str, format_name: str) -> int:
        self.sources.append(SourceInfo(path=path, format=format_name))
        return len(self.sources) - 1

    def append(
        self,
        events: Iterable[Event | MessageEntry | EventEntry],
        exact_counts: Sequence[int] | None = None,
    ) -> int:
        """Add a batch of events (or message entries) in order; returns how many were added.

        ``exact_counts``, when given, are the tokenizer's counts of the batch's messages in
        order (computed elsewhere, e.g. in a loading thread), so the session counts none itself.
        """
        batch = events if isinstance(events, list) else list(events)
        return self._append(batch, exact_counts)

    def _append(
        self,
        batch: Sequence[Event | MessageEntry | EventEntry | int],
        exact_counts: Sequence[int] | None = None,
        parent: Session | None = None,
    ) -> int:
        """``append``; an int in ``batch`` is the message of that index in ``parent``, taken
        over with its columns (``thread_sessions``)."""
        first_message = len(self.table)
        next_message = first_message  # the table index of the batch's next message
        add_message = self._add_message
        stored = self._events
        store = stored.append
        keep = self._store.add
        first_object = len(self._store)
        fresh: list[Event | EventEntry] = []  # the batch's other events, as given
        note = self._non_message.append
        of_type = self._of_type
        # messages not yet in the table (added column-wise): entries, or rows of ``parent``
        entries: list[MessageEntry] = []
        rows: list[int] = []
        entry_events: list[int] = []  # their event indices
        for event in batch:
            kind = type(event)
            if kind is MessageEntry or kind is int:
                if rows if kind is MessageEntry else entries:
                    self._add_pending(entries, rows, entry_events, parent)
                entry_events.append(len(stored))
                store(next_message)
                next_message += 1
                (entries if kind is MessageEntry else rows).append(event)  # type: ignore[arg-type]
                continue
            if kind is MessageAdded or (kind not in _PLAIN and isinstance(event, MessageAdded)):
                if entry_events:  # table rows stay in the order of their events
                    self._add_pending(entries, rows, entry_events, parent)
                add_message(event)  # type: ignore[arg-type]
                next_message += 1
                continue
            index = len(stored)
            note(index)
            store(-1 - first_object - len(fresh))
            keep(event)  # type: ignore[arg-type]
            fresh.append(event)  # type: ignore[arg-type]
            same = of_type.get(kind)
            if same is None:
                same = of_type[kind] = array("i")
            same.append(index)
            if kind not in _PLAIN:
                if isinstance(event, ParseIssue):
                    self.issues.append(index)
                elif isinstance(event, SessionInfo):
                    self._note_info(event)
        if entry_events:
            self._add_pending(entries, rows, entry_events, parent)
        self._store.flush()
        if exact_counts is not None:
            exact = self.table.exact
            for offset, count in enumerate(exact_counts):
                exact[first_message + offset] = count + MESSAGE_OVERHEAD
        elif self.count_exact:
            self._count_new(first_message, batch)
        self._derive(len(self._events) - len(batch), fresh, first_object)
        return len(batch)

    def _add_message(self, event: MessageAdded) -> None:
        message = event.message
        t = self.table
        index = len(t)
        mid = message.id
        try:
            t.ids.append(mid)
            if t._index_of is not None:
                t._index_of[mid] = index
            t.role.append(_ROLE_CODE[message.role])
            t.kind.append(_KIND_CODE[message.kind])
            flags = _VISIBLE if message.visible else 0
            span = event.span
            if span is None or self.body_reader is None:
                flags |= _INLINE
                self._inline[index] = message
            t.flags.append(flags)
            thread = t._thread_code.get(message.thread)
            t.thread.append(thread if thread is not None else t.intern_thread(message.thread))
            t.tool.append(t.intern_tool(message.tool_name))
            t.chars.append(len(message.text))
            t.estimate.append(self.estimator(message))
            t.exact.append(-1)
            t.reported.append(_clamp(event.tokens) if event.tokens is not None else -1)
            t.step_added.append(0)
            t.step_removed.append(-1)
            t.event_index.append(len(self._events))
            if span is not None:
                t.source.append(span.source)
                t.offset.append(span.offset)
                t.length.append(span.length)
                t.line.append(span.line)
            else:
                t.source.append(-1)
                t.offset.append(0)
                t.length.append(0)
                t.line.append(0)
        except OverflowError:  # a narrow column: widen it, then add the row again
            t.truncate(index)
            t.widen()
            self._add_message(event)
            return
        self._events.append(index)

    def _add_pending(
        self,
        entries: list[MessageEntry],
        rows: list[int],
        event_index: list[int],
        parent: Session | None,
    ) -> None:
        """Record the messages ``_append`` holds back (entries, or rows of ``parent``) and empty
        the lists."""
        if entries:
            self._add_entries(entries, event_index)
        else:
            assert parent is not None
            self._take_rows(parent, rows, event_index)
        entries.clear()
        rows.clear()
        event_index.clear()

    def _take_rows(self, parent: Session, rows: list[int], event_index: list[int]) -> None:
        """Record messages ``rows`` of ``parent`` as messages of this session's main thread,
        with their columns (estimates, exact counts, reported figures, spans), column by
        column: no body is read. ``event_index``: where each one's event is."""
        src = parent.table
        t = self.table
        first = len(t)
        count = len(rows)
        try:
            t.ids.extend(map(src.ids.__getitem__, rows))
            if t._index_of is not None:
                t._index_of.update(zip(t.ids[first:], range(first, first + count), strict=True))
            for name in _TAKEN:
                getattr(t, name).fromlist(list(map(getattr(src, name).__getitem__, rows)))
            flags = [bits & (_VISIBLE | _INLINE) for bits in map(src.flags.__getitem__, rows)]
            t.flags.fromlist(flags)
            t.thread.fromlist([t.intern_thread(MAIN_THREAD)] * count)
            tools = [src.tool[row] for row in rows]
            t.tool.fromlist([-1 if tool < 0 else t.intern_tool(src.tools[tool]) for tool in tools])
            t.step_added.fromlist([0] * count)
            t.step_removed.fromlist([-1] * count)
            t.event_index.fromlist(event_index)
        except OverflowError:  # a narrow column: widen it, then add the rows again
            t.truncate(first)
            t.widen()
            self._take_rows(parent, rows, event_index)
            return
        for index, row, bits in zip(range(first, first + count), rows, flags, strict=True):
            if bits & _INLINE:
                message = parent._inline[row]
                self._inline[index] = updated(message, _TO_MAIN)

    def thread_sessions(self) -> Iterator[tuple[str, Session]]:
        """A session per thread other than the main one (a sub-agent, a sidechain, each
        conversation of a file that holds one per line), in the order the threads first have a
        message, each with the thread's messages and events as its own main thread.

        One pass over the events, then each session is made when the iteration reaches it. The
        messages keep their columns (estimates, exact counts, spans): no body is read back."""
        t = self.table
        main = t._thread_code.get(MAIN_THREAD, -1)
        if all(code == main for code in range(len(t.threads))):
            return
        code_of = t._thread_code
        # each thread's events, as the codes of ``_events``
        codes: list[array[int] | None] = [array("i") for _ in t.threads]
        thread_of = t.thread
        store = self._store
        for code in self._events:
            if code >= 0:
                thread = thread_of[code]
            else:
                name = store.thread_of(-1 - code)
                if name is None or name == MAIN_THREAD:
                    continue
                thread = code_of.get(name, main)
            if thread != main:
                codes[thread].append(code)  # type: ignore[union-attr]
        get = store.get
        for thread, name in enumerate(t.threads):
            mine = codes[thread]
            if thread == main or mine is None:
                continue
            codes[thread] = None  # let it go as soon as its session is made
            # a short thread (a conversation of an evaluation output) keeps its few events as
            # given: packing them would cost more time, and empty columns more memory
            sub = self.sibling(pack_events=self._store.pack and len(mine) >= _PACK_THREAD_FROM)
            sub._append([c if c >= 0 else _rethread(get(-1 - c)) for c in mine], parent=self)
            yield name, sub

    def _add_entries(self, entries: list[MessageEntry], event_index: list[int]) -> None:
        """Record messages known by their columns (see ``MessageEntry``), column by column: the
        same records as ``_add_message`` makes of their ``MessageAdded``. ``event_index``: where
        each one's event is (already stored)."""
        t = self.table
        first = len(t)
        count = len(entries)
        (
            ids,
            roles,
            kinds,
            visible,
            threads,
            tools,
            chars,
            tokens,
            sources,
            offsets,
            lengths,
            lines,
            estimates,
        ) = zip(*entries, strict=True)
        estimate_chars = self.estimate_chars
        from_bodies = False
        try:
            # ``fromlist`` sizes a column once (``extend`` from a sequence grows it value by value)
            t.ids.extend(ids)
            if t._index_of is not None:
                t._index_of.update(zip(ids, range(first, first + count), strict=True))
            t.role.fromlist(list(map(_ROLE_CODE.__getitem__, roles)))
            t.kind.fromlist(list(map(_KIND_CODE.__getitem__, kinds)))
            t.flags.fromlist([_VISIBLE if v else 0 for v in visible])
            thread_code = t._thread_code
            t.thread.fromlist(
                [
                    code if (code := thread_code.get(name)) is not None else t.intern_thread(name)
                    for name in threads
                ]
            )
            tool_code = t._tool_code
            t.tool.fromlist(
                [
                    -1
                    if name is None
                    else code
                    if (code := tool_code.get(name)) is not None
                    else t.intern_tool(name)
                    for name in tools
                ]
            )
            t.chars.fromlist(list(chars))
            if estimate_chars is not None:
                t.estimate.fromlist(list(map(estimate_chars, chars)))
            elif None not in estimates:
                t.estimate.fromlist(list(estimates))
            else:
                t.estimate.extend(array("i", [0]) * count)  # filled below, from the bodies
                from_bodies = True
            t.exact.extend(array("i", [-1]) * count)
            t.reported.fromlist([-1 if n is None else _clamp(n) for n in tokens])
            t.step_added.extend(array("i", [0]) * count)
            t.step_removed.extend(array("i", [-1]) * count)
            t.event_index.fromlist(event_index)
            t.source.fromlist(list(sources))
            t.offset.fromlist(list(offsets))
            t.length.fromlist(list(lengths))
            t.line.fromlist(list(lines))
        except OverflowError:  # a narrow column: widen it, then add the rows again
            t.truncate(first)
            t.widen()
            self._add_entries(entries, event_index)
            return
        if from_bodies:  # the estimate needs the body
            for index in range(first, first + count):
                t.estimate[index] = self.estimator(self.body(index))

    def _count_new(
        self, start: int, batch: Sequence[Event | MessageEntry | EventEntry | int]
    ) -> None:
        assert self.counter is not None
        texts: list[str] = []
        counted: list[int] = []  # the indices of ``texts``
        index = start
        exact = self.table.exact
        for e in batch:
            if isinstance(e, MessageAdded):
                texts.append(e.message.text)
            elif type(e) is MessageEntry or (type(e) is int and exact[index] < 0):
                texts.append(self.body(index).text)
            elif type(e) is not int:
                continue
            else:  # a message taken over with its count
                index += 1
                continue
            counted.append(index)
            index += 1
        counts = self.counter.count_batch(texts)
        for at, count in zip(counted, counts, strict=True):
            exact[at] = count + MESSAGE_OVERHEAD

    def set_exact(self, counts: dict[int, int]) -> None:
        """Fill in exact counts (message index -> tokens) computed elsewhere, then re-derive."""
        for index, count in counts.items():
            self.table.exact[index] = count
        self.rederive()

    def _note_info(self, event: SessionInfo) -> None:
        for key in ("model", "context_window", "agent", "version", "session_id"):
            value = getattr(event, key)
            if value is not None:
                self.info[key] = value
        self.info.update(event.extra)

    # -- derivation ------------------------------------------------------------------------

    def rederive(self) -> None:
        """Recompute every step from the events (after counts or settings changed)."""
        self.steps = StepTable(self._store)
        self._run = _Running()
        self._open = StepState(step=1, first_event=0, last_event=-1)
        t = self.table
        for i in range(len(t)):
            t.flags[i] &= ~(_PRUNED | _REMOVED | _DROPPED | _TRUNCATED)
            t.step_removed[i] = -1
        self._derive(0)

    def _derive(
        self, start: int, fresh: Sequence[Event | EventEntry] = (), first_fresh: int = -1
    ) -> None:
        """Derive the state through the events from ``start`` on. ``fresh``: the non-message
        events just appended, as given (the store's from ``first_fresh`` on): none is made
        again."""
        run = self._run
        t = self.table
        events = self._events
        store = self._store
        kind_of = store.kind_of
        if first_fresh < 0:
            first_fresh = len(store)
        run.live.reserve(len(t))
        live_bits = run.live.bits
        flags = t.flags
        thread_of = t.thread
        step_added = t.step_added
        main = t._thread_code.get(MAIN_THREAD, -1)
        count_in = self._count_in
        estimate = t.estimate
        exact = t.exact
        step = self._open.step
        live = run.live
        end = len(events)
        for index in range(start, end):
            item = events[index]
            if item >= 0:  # a message (``_count_in`` inlined for the unpruned ones)
                step_added[item] = step
                bits = flags[item]
                if bits & _VISIBLE and thread_of[item] == main and not live_bits[item]:
                    live_bits[item] = 1
                    live.count += 1
                    if bits & _PRUNED:
                        count_in(item, +1)
                    else:
                        run.estimated += estimate[item]
                        tokens = exact[item]
                        if tokens >= 0:
                            run.exact += tokens
                        else:
                            run.exact_unknown += 1
                continue
            self._open.last_event = index
            k = -1 - item
            if k >= first_fresh:
                event = fresh[k - first_fresh]
                if type(event) in _INERT:
                    continue
            elif kind_of(k) in _INERT:
                continue
            else:
                event = store.get(k)
            self._event(event, index)
            step = self._open.step
            live = run.live
            live_bits = live.bits
        if end > start:
            self._open.last_event = end - 1

    def _event(self, event: Event | EventEntry, index: int) -> None:
        """Derive the state after one event that is not a message."""
        run = self._run
        if isinstance(event, RequestEntry):  # events given by their fields (``core.packed``)
            if event.thread == MAIN_THREAD:
                self._close_step(index)
                run.compaction_request = event.compaction
            return
        if isinstance(event, UsageEntry):
            self._usage_reported(event, index)
            return
        if isinstance(event, RequestSent):
            if event.thread == MAIN_THREAD:
                self._close_step(index)
                run.compaction_request = event.compaction
        elif isinstance(event, UsageReported):
            self._usage_reported(event, index)
        elif isinstance(event, RequestRejected):
            if event.thread == MAIN_THREAD and self.steps:
                # the refusal answers the latest request, like its usage would have
                last = len(self.steps) - 1
                self.steps.rejected[last] += 1
                self._answer_belongs_to_request(index)
                if event.tokens is not None:
                    peak = self.steps.peak_reported[last]
                    if peak == _NONE or event.tokens > peak:
                        self.steps.peak_reported[last] = _int64(event.tokens)
        elif isinstance(event, ContextMeasured):
            self._measure(event.tokens, event.label or "agent", origin=event.origin)
        elif isinstance(event, GuardEvaluated):
            # once a final turn is forced, the step keeps the evaluation that forced it (a
            # later one describes the final request the decision made)
            if not (run.final_turn and run.guard is not None):
                run.guard = event
        elif isinstance(event, Compacted):
            if (
                event.thread == MAIN_THREAD
                and run.compaction_request
                and self.steps
                and self._open.first_event == index
            ):
                # the answer to the agent's summarisation call: it belongs to the call's step
                # (whose figure is the context that was summarised); what it left is the next
                self._answer_belongs_to_request(index)
                last = len(self.steps) - 1
                self.steps.compactions[last] += 1
                if event.tokens_before is not None:
                    peak = self.steps.peak_reported[last]
                    if peak == _NONE or event.tokens_before > peak:
                        self.steps.peak_reported[last] = _int64(event.tokens_before)
                if not event.failed:
                    self._compact(event)
                    if event.tokens_after is not None:
                        self._measure(event.tokens_after, COMPACTION_LABEL)
                return
            if event.thread == MAIN_THREAD and not event.failed:
                self._compact(event)
            if event.tokens_before is not None:
                self._measure(event.tokens_before, COMPACTION_LABEL, peak_only=True)
            if event.tokens_after is not None and not event.failed:
                self._measure(event.tokens_after, COMPACTION_LABEL)
            run.compactions += 1
        elif isinstance(event, ContextReset):
            if event.thread == MAIN_THREAD:
                self._reset(event)
        elif isinstance(event, Pruned):
            if event.applied:
                for mid in event.message_ids:
                    self._prune(mid)
                if event.tokens_before is not None:
                    self._measure(event.tokens_before, "prune", peak_only=True)
                # a prune for one request only (a pruned copy is sent, the agent's list is
                # kept) leaves the context as it was: its "after" is the event's, not the step's
                if event.tokens_after is not None and event.persistent:
                    self._measure(event.tokens_after, "prune")
                run.prunes += 1
        elif isinstance(event, ToolOutputChanged):
            self._tool_output(event)
        elif isinstance(event, FinalTurnForced):
            run.final_turn = True
            if event.projected_tokens is not None and event.thread == MAIN_THREAD:
                # the figure that crossed is the step's peak, whatever enforcing left counted
                self._measure(event.projected_tokens, "final turn", peak_only=True)

    def _usage_reported(self, event: UsageReported | UsageEntry, index: int) -> None:
        if event.thread != MAIN_THREAD or not self.steps:
            return
        # usage answers the latest request: it belongs to that request's step
        run = self._run
        steps = self.steps
        last = len(steps) - 1
        k = -1 - self._events[index]
        row = self._store.usage_row(k)
        if isinstance(event, UsageReported):
            given: Usage | None = event.usage
        elif row < 0:  # an entry the store could not pack: kept as its event
            stored = self._store.get(k)
            assert isinstance(stored, UsageReported)
            given = stored.usage
        else:
            given = None
        if given is not None:
            prompt = given.prompt_tokens
        else:
            assert isinstance(event, UsageEntry)
            prompt = event.prompt_tokens
        context = event.context_tokens
        if context is not None:
            # the agent's own figure for its context once the request was answered: it
            # covers what the build-up holds so far (the answer among it)
            steps.set_usage(last, row, given, context, event.context_label or "usage")
            self._answer_belongs_to_request(index)
            self._set_anchor(
                context,
                last + 1,
                run.estimated,
                run.exact if run.exact_unknown == 0 and run.live else None,
            )
            return
        steps.set_usage(last, row, given, prompt, "usage")
        self._answer_belongs_to_request(index)
        if prompt > 0:
            exact = steps.exact[last]
            self._set_anchor(
                prompt, last + 1, steps.estimated[last], None if exact == _NONE else exact
            )

    def _answer_belongs_to_request(self, index: int) -> None:
        """An answer to the latest request (its usage, its refusal) at the head of the next
        build-up belongs to the request's own step (log lines of other processes in between
        go with it)."""
        first = self._open.first_event
        if first == index or (index - first <= _QUIET_GAP and self._quiet(first, index)):
            self._open.first_event = index + 1
            self.steps.last_event[len(self.steps) - 1] = index

    def _quiet(self, start: int, stop: int) -> bool:
        """Whether the events in [start, stop) change nothing (log lines, debug topics)."""
        events, kind_of = self._events, self._store.kind_of
        return all(events[i] < 0 and kind_of(-1 - events[i]) in _INERT for i in range(start, stop))

    def _set_anchor(
        self,
        tokens: int,
        step: int,
        estimated: int,
        exact: int | None,
        origin: Origin = Origin.REPORTED,
    ) -> None:
        run = self._run
        run.anchor = tokens
        run.anchor_step = step
        run.anchor_estimated = estimated
        run.anchor_exact = exact
        run.anchor_origin = origin

    def _measure(
        self, tokens: int, label: str, *, peak_only: bool = False, origin: Origin = Origin.REPORTED
    ) -> None:
        """A figure given in the build-up (the agent's own, a compaction's before or after):
        the step's, and the anchor of the steps after it; ``origin``: the figure's own (an
        estimate given as a figure stays one)."""
        run = self._run
        if not peak_only:
            run.reported = tokens
            run.reported_label = label
            run.reported_origin = origin
            self._set_anchor(
                tokens,
                self._open.step,
                run.estimated,
                run.exact if run.exact_unknown == 0 and run.live else None,
                origin,
            )
        if run.peak_reported is None or tokens > run.peak_reported:
            run.peak_reported = tokens

    def _count_in(self, index: int, sign: int) -> None:
        run = self._run
        t = self.table
        pruned = t.flags[index] & _PRUNED
        run.estimated += sign * (self._marker_estimate if pruned else t.estimate[index])
        exact = t.exact[index]
        if pruned:
            exact = self._marker_tokens_exact()
        if exact >= 0:
            run.exact += sign * exact
        else:
            run.exact_unknown += sign

    def _marker_tokens_exact(self) -> int:
        if self._marker_exact is None:
            if self.counter is None:
                self._marker_exact = -1
            else:
                self._marker_exact = self.counter.count_batch([PRUNED_MARKER])[0] + MESSAGE_OVERHEAD
        return self._marker_exact

    def _compact(self, event: Compacted) -> None:
        run = self._run
        t = self.table
        retained = set(event.retained_ids)
        system_code = _ROLE_CODE[Role.SYSTEM]
        live = run.live
        for index in live:
            if t.ids[index] in retained or (event.keep_system and t.role[index] == system_code):
                continue
            self._count_in(index, -1)
            t.flags[index] |= _REMOVED
            t.step_removed[index] = self._open.step
            live.discard(index)

    def _reset(self, event: ContextReset) -> None:
        """Drop what was added after ``keep_through`` (everything when it is None)."""
        run = self._run
        t = self.table
        anchor = t.index_of.get(event.keep_through) if event.keep_through else None
        if event.keep_through is not None and anchor is None:
            return  # the point to go back to was never seen: keep the context as it is
        if event.keep_through is None:
            run.anchor = None  # a new conversation: no earlier figure describes it
        system_code = _ROLE_CODE[Role.SYSTEM]
        live = run.live
        for index in live:
            if (anchor is not None and index <= anchor) or (
                event.keep_system and t.role[index] == system_code
            ):
                continue
            self._count_in(index, -1)
            t.flags[index] |= _REMOVED
            t.step_removed[index] = self._open.step
            live.discard(index)

    def _prune(self, message_id: str) -> None:
        index = self.table.index_of.get(message_id)
        if index is None or self.table.flags[index] & _PRUNED:
            return
        live = index in self._run.live
        if live:
            self._count_in(index, -1)
        self.table.flags[index] |= _PRUNED
        if live:
            self._count_in(index, +1)

    def _tool_output(self, event: ToolOutputChanged) -> None:
        run = self._run
        if event.action is ToolOutputAction.DROPPED:
            run.dropped += 1
        if event.message_id is None:
            return
        index = self.table.index_of.get(event.message_id)
        if index is None:
            return
        flag = {
            ToolOutputAction.DROPPED: Flag.DROPPED,
            ToolOutputAction.TRUNCATED: Flag.TRUNCATED,
            ToolOutputAction.SPILLED: Flag.TRUNCATED,
        }[event.action]
        self.table.flags[index] |= flag

    def _fill(self, state: StepState) -> None:
        run = self._run
        state.messages = len(run.live)
        state.estimated = run.estimated
        state.exact = run.exact if run.exact_unknown == 0 and run.live else None
        state.reported = run.reported
        state.reported_label = run.reported_label
        state.peak_reported = run.peak_reported
        state.guard = run.guard
        state.compactions = run.compactions
        state.prunes = run.prunes
        state.dropped = run.dropped
        state.final_turn = run.final_turn
        state.anchor = run.anchor
        state.anchor_step = run.anchor_step
        state.anchor_estimated = run.anchor_estimated
        state.anchor_exact = run.anchor_exact
        state.reported_origin = run.reported_origin
        state.anchor_origin = run.anchor_origin

    def _close_step(self, request_index: int) -> None:
        state = self._open
        state.request_event = request_index
        state.last_event = request_index
        self._fill(state)
        self.steps.append(state)
        run = self._run
        run.reported = None
        run.reported_label = ""
        run.reported_origin = Origin.REPORTED
        run.peak_reported = None
        run.guard = None
        run.compactions = run.prunes = run.dropped = 0
        run.final_turn = False
        self._open = StepState(
            step=state.step + 1, first_event=request_index + 1, last_event=request_index
        )

    # -- questions -------------------------------------------------------------------------

    def in_context(self, step: int | None = None) -> list[int]:
        """Indices of the messages visible to the model at ``step`` (default: now)."""
        t = self.table
        if step is None:
            return list(self._run.live)
        out = []
        main = t._thread_code.get(MAIN_THREAD)
        for i in range(len(t)):
            if t.step_added[i] > step or not t.flags[i] & _VISIBLE or t.thread[i] != main:
                continue
            removed = t.step_removed[i]
            if removed >= 0 and removed <= step:
                continue
            out.append(i)
        return out


_INT32_MAX = 2**31 - 1


def _clamp(tokens: int) -> int:
    """A token figure from the input as the 32-bit columns hold it (no real figure is larger)."""
    return tokens if 0 <= tokens <= _INT32_MAX else (_INT32_MAX if tokens > 0 else -1)


def _rethread(event: Event) -> Event:
    """A non-message event of a thread as an event of the main thread."""
    moved: Event = updated(event, _TO_MAIN)
    return moved


def _chars4(message: Message) -> int:
    return -(-len(message.text) // 4)


def _chars4_of_length(chars: int) -> int:
    return -(-chars // 4)


def _marker_message() -> Message:
    from ctx_inspect.core.model import Part, PartType

    return Message(
        id="marker",
        role=Role.TOOL,
        kind=MessageKind.TOOL_RESULT,
        parts=(Part(type=PartType.TOOL_RESULT, text=PRUNED_MARKER),),
    )
