"""Debug topics and log events as a virtualised, filterable table.

Filtering never blocks the UI: the matching indices are computed in slices of a few
milliseconds on timer ticks, the rows found so far are shown at once, and the header says
``filtering… 45%`` until the scan is done. ``EventsFilter`` is the input that drives it: the
owner forwards its ``FilterChanged`` to ``EventsView.set_filter``::

    @on(EventsFilter.FilterChanged)
    def _filter_events(self, event: EventsFilter.FilterChanged) -> None:
        self.query_one(EventsView).set_filter(event.text)
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from rich.style import Style
from textual.message import Message
from textual.timer import Timer
from textual.widgets import Input

from ctx_inspect.ui.widgets.messages_view import Column, RowTable

TOPIC_PREFIX = "topic:"


@dataclass(frozen=True)
class EventRow:
    index: int
    step: int
    kind: str  # debug, log, guard, compaction, prune, tool_output, final_turn, usage, ...
    topic: str  # e.g. "context-guard/evaluate", a log tag, or the kind
    summary: str  # one line


# kind -> theme variables to colour it with, the first one defined wins
KIND_COLOURS: dict[str, tuple[str, ...]] = {
    "compaction": ("marker-compaction", "accent"),
    "prune": ("marker-prune", "warning"),
    "tool_output": ("marker-drop", "error"),
    "final_turn": ("marker-final", "error"),
    "reset": ("marker-reset", "secondary"),
    "rejected": ("marker-final", "error"),
    "issue": ("error",),
}


def event_matcher(text: str) -> Callable[[EventRow], bool] | None:
    """The predicate of a filter text, or None for no filter.

    ``topic:NAME`` keeps the rows whose topic equals NAME; any other text keeps the rows whose
    topic or kind contains it. Both ignore case.
    """
    text = text.strip()
    if not text:
        return None
    if text.lower().startswith(TOPIC_PREFIX):
        wanted = text[len(TOPIC_PREFIX) :].strip().casefold()
        return lambda row: row.topic.casefold() == wanted
    needle = text.casefold()
    return lambda row: needle in row.topic.casefold() or needle in row.kind.casefold()


class EventsView(RowTable[EventRow]):
    """Events: index, step, kind, topic and a one-line summary; ``set_filter`` narrows them.

    ``cursor`` is a position among the displayed rows; ``RowHighlighted.index`` and
    ``cursor_index`` are the rows' ``EventRow.index`` (the event index).
    """

    EMPTY_TEXT = "no events"
    SLICE_SECONDS: ClassVar[float] = 0.008
    TICK_SECONDS: ClassVar[float] = 0.001

    class RowHighlighted(RowTable.RowHighlighted):
        """The user moved the cursor onto event ``index``."""

    class RowSelected(RowTable.RowSelected):
        """The user pressed enter on event ``index``."""

    class Filtered(Message):
        """A filter finished: ``matches`` of ``total`` events are shown."""

        def __init__(self, text: str, matches: int, total: int) -> None:
            super().__init__()
            self.text = text
            self.matches = matches
            self.total = total

    def __init__(
        self,
        *,
        follow_tail: bool = False,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(follow_tail=follow_tail, name=name, id=id, classes=classes)
        self.filter_text = ""
        self._matcher: Callable[[EventRow], bool] | None = None
        self._matches: list[int] | None = None  # None: no filter, every event shown
        self._scan_next = 0  # the next source index to test
        self._scan_end = 0
        self._scan_start = 0
        self._keep_source: int | None = None  # the source row to put the cursor back on
        self._timer: Timer | None = None

    # -- filtered rows -----------------------------------------------------------------------

    @property
    def row_count(self) -> int:
        return self._count if self._matches is None else len(self._matches)

    def source_index(self, position: int) -> int:
        return position if self._matches is None else self._matches[position]

    def _cursor_source(self) -> int | None:
        return self.source_index(self.cursor) if self.row_count else None

    @property
    def filtering(self) -> bool:
        return self._scan_next < self._scan_end

    @property
    def filter_progress(self) -> float | None:
        """How much of the scan is done (0-1) while a filter runs, else None."""
        if not self.filtering:
            return None
        span = max(1, self._scan_end - self._scan_start)
        return (self._scan_next - self._scan_start) / span

    def set_filter(self, text: str) -> None:
        """Show only the events whose topic or kind contains ``text`` (case-insensitive), or with
        ``topic:NAME`` whose topic is NAME; an empty text shows every event."""
        text = text.strip()
        if text == self.filter_text:
            return
        self._keep_source = self._cursor_source()
        self.filter_text = text
        self._matcher = event_matcher(text)
        self._matches = None if self._matcher is None else []
        self._scan(0)
        if self._matcher is None and self._keep_source is not None:
            self.cursor, self._keep_source = self._keep_source, None

    def _source_changed(self, old_count: int, version_changed: bool) -> None:
        if self._matches is None:
            return
        if version_changed or self._count < old_count:
            self._keep_source = self._cursor_source()
            self._matches.clear()
            self._scan(0)
        elif self.filtering:
            self._scan_end = self._count  # the running scan goes on to the new events
        elif self._count > old_count:
            self._scan(old_count)

    def _scan(self, start: int) -> None:
        """(Re)start the scan at ``start`` up to the current count; a first slice runs now."""
        self._scan_start = self._scan_next = start
        self._scan_end = self._count if self._matcher is not None else start
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self._rows_changed()
        if self.filtering:
            self._filter_slice()

    def _filter_slice(self) -> None:
        """Test events for ``SLICE_SECONDS``; schedule the next slice or finish."""
        self._timer = None
        matcher, matches, row_at = self._matcher, self._matches, self._row_at
        if matcher is None or matches is None or row_at is None:
            return
        cache, version = self._cache, self._version
        deadline = time.perf_counter() + self.SLICE_SECONDS
        index, end = self._scan_next, self._scan_end
        while index < end:
            stop = min(end, index + 512)
            for i in range(index, stop):
                row = cache.get((version, i)) or row_at(i)
                if matcher(row):
                    matches.append(i)
            index = stop
            if time.perf_counter() > deadline:
                break
        self._scan_next = index
        self._place_kept_event()
        self._rows_changed()
        if self.filtering:
            self._timer = self.set_timer(self.TICK_SECONDS, self._filter_slice)
        else:
            self.post_message(self.Filtered(self.filter_text, len(matches), self._count))

    def _place_kept_event(self) -> None:
        """Once the scan has passed the event the cursor was on, put the cursor on it (or on
        the next match after it)."""
        keep, matches = self._keep_source, self._matches
        if keep is None or matches is None:
            return
        position = bisect_left(matches, keep)
        if position < len(matches) or not self.filtering:
            self._keep_source = None
            self.cursor = self.validate_cursor(position)

    def _move(self, position: int) -> None:
        self._keep_source = None  # the user moved: the filter no longer places the cursor
        super()._move(position)

    # -- rendering ---------------------------------------------------------------------------

    def columns(self, width: int) -> list[Column]:
        number = max(3, len(str(self._count)))
        used = number + 5 + 11 + 5
        room = max(0, width - used)
        topic = max(6, min(32, room * 2 // 5))
        return [
            ("#", number, "right"),
            ("step", 5, "right"),
            ("kind", 11, "left"),
            ("topic", topic, "left"),
            ("summary", max(5, room - topic), "left"),
        ]

    def header_status(self, room: int) -> str:
        progress = self.filter_progress
        if progress is not None:
            return f"filtering… {int(progress * 100)}% ({len(self._matches or ()):,} found)"
        if self._matches is not None:
            return f"{len(self._matches):,} of {self._count:,} events"
        return f"{self._count:,} events"

    def row_cells(self, row: EventRow) -> list[tuple[str, Style | str]]:
        return [
            (str(row.index + 1), ""),
            (str(row.step), ""),
            (row.kind, self.theme_style(*KIND_COLOURS.get(row.kind, ()))),
            (row.topic, ""),
            (row.summary, ""),
        ]


class EventsFilter(Input):
    """The filter box of the events view: posts ``FilterChanged`` as the user types."""

    DEFAULT_CSS = """
    EventsFilter { height: 3; }
    """

    class FilterChanged(Message):
        """The filter text changed (already stripped); forward it to ``EventsView.set_filter``."""

        def __init__(self, events_filter: EventsFilter, text: str) -> None:
            super().__init__()
            self.events_filter = events_filter
            self.text = text

        @property
        def control(self) -> EventsFilter:
            return self.events_filter

    def __init__(
        self,
        value: str = "",
        *,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(
            value,
            placeholder="filter: text in topic or kind, or topic:NAME",
            name=name,
            id=id,
            classes=classes,
        )

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input is self:
            self.post_message(self.FilterChanged(self, event.value.strip()))
