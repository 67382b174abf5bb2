"""The context curve over steps: a virtualised column chart with thresholds, markers and a cursor.

One column per step (up to 3 cells when the steps are fewer than the cells). Rows: a readout at
the top, the chart, and a marker row (C compaction, P prune, D dropped, F final turn, R reset).
Only the visible columns are rendered; lines are cached in a bounded LRU. Points are kept as
columns (``timeline_points.TimelinePoints``), not as an object per step.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from itertools import accumulate
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ctx_inspect.core.window import Zone
from ctx_inspect.ui.widgets.timeline_points import (
    MARKERS,
    NO_MARKERS,
    PRIORITY,
    ZONES,
    TimelinePoint,
    TimelinePoints,
    marker_letters,
)
from ctx_inspect.ui.widgets.zone_gauge import ZONE_VARIABLES, rich_color, theme_color

BLOCKS = " ▁▂▃▄▅▆▇█"
CACHE_LINES = 512
WHEEL_STEP = 4  # cells per wheel notch
_StyleMap = dict[str, Style]
_Cells = list[tuple[str, Style | None]]  # (glyphs, style) left to right
_Heights = tuple[list[int], list[int], list[str]]  # per column: tokens, peak (eighths), zone


class TimelineView(ScrollView, can_focus=True):
    """Tokens (full) and peak (light) per step, threshold lines, markers, and a step cursor."""

    DEFAULT_CSS = """
    TimelineView {
        height: 1fr;
        min-height: 5;
        overflow-x: auto;
        overflow-y: hidden;
        scrollbar-size-horizontal: 1;
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left", "move(-1)", "Step −1", key_display="←"),
        Binding("right", "move(1)", "Step +1", key_display="→"),
        Binding("shift+left", "move(-10)", "−10", key_display="⇧←"),
        Binding("shift+right", "move(10)", "+10", key_display="⇧→"),
        Binding("home", "edge(0)", "First"),
        Binding("end", "edge(1)", "Last"),
    ]

    class CursorMoved(Message):
        """The user moved the cursor to ``step``. One waiting in the queue stands for the ones
        posted after it (a held arrow key): the last step is what counts."""

        def __init__(self, step: int) -> None:
            super().__init__()
            self.step = step

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, TimelineView.CursorMoved)

    cursor: reactive[int | None] = reactive[int | None](None)

    def __init__(
        self, *, name: str | None = None, id: str | None = None, classes: str | None = None
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._data = TimelinePoints()
        self._tops = array("q")  # the highest token count (peak or tokens) up to each point
        self._marked: dict[str, list[int]] = {name: [] for name in MARKERS}
        self._source: TimelinePoints | None = None  # what the data was last copied from
        self._source_revision = 0
        self._cached_last = 0  # points up to this position are drawn in the cached lines
        self._heights_cache: tuple[tuple[int | float, ...], _Heights] | None = None
        self.window = self.warning = self.threshold = 0
        self._version = 0
        self._cw = 1
        self._styles: _StyleMap | None = None
        self._plain: LRUCache[tuple[int, ...], Strip] = LRUCache(CACHE_LINES)
        self._lines: LRUCache[tuple[int | None, ...], Strip] = LRUCache(CACHE_LINES)

    @property
    def points(self) -> Sequence[TimelinePoint]:
        return self._data

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._invalidate())

    def set_points(
        self, points: Sequence[TimelinePoint], *, window: int, warning: int, threshold: int
    ) -> None:
        """Replace the data (points in step order); the cursor stays on its step if it exists.

        Points that are unchanged since the last call are not read again: for a
        ``TimelinePoints`` given again, its own record of changes tells which; for another
        sequence, the same points plus new ones at the end (a live refresh) are an append.
        """
        data, count = self._data, len(self._data)
        same_frame = (window, warning, threshold) == (self.window, self.warning, self.threshold)
        start = 0
        if isinstance(points, TimelinePoints):
            if same_frame and points is self._source:
                start = points.changed_since(self._source_revision, count)
            self._source, self._source_revision = points, points.revision
            if same_frame and start == count == len(points):
                return  # nothing changed
            before = self._frame_key()
            data.copy_from(points, start)
        else:
            self._source = None
            if same_frame and count and len(points) >= count and list(points[:count]) == list(data):
                self.append_points(points[count:])
                return
            before = self._frame_key()
            data.truncate(0)
            for point in points:
                data.append(point)
        self._derive(start)
        if not same_frame or start == 0:
            self.window, self.warning, self.threshold = window, warning, threshold
            keep = self.cursor if data.position(self.cursor) is not None else None
            self._invalidate()
            self.cursor = keep if keep is not None else (data.steps[-1] if data else None)
            self._show_cursor()
        else:
            self._redraw_from(start, before)

    def append_points(self, points: Sequence[TimelinePoint]) -> None:
        """Add points after the last one (live follow); unchanged visible lines stay cached."""
        if not points:
            return
        start, before = len(self._data), self._frame_key()
        for point in points:
            self._data.append(point)
        self._source = None
        self._derive(start)
        self._redraw_from(start, before)

    def _frame_key(self) -> tuple[int, int]:
        return self._scale(), self._column_width()

    def _derive(self, start: int) -> None:
        """Bring the highest count and the marked positions up to date from ``start`` on."""
        data = self._data
        del self._tops[start:]
        top = self._tops[-1] if self._tops else 0
        self._tops.extend(
            accumulate(map(max, data.peaks[start:], data.tokens[start:]), max, initial=top)
        )
        del self._tops[start]  # the initial value
        for marked in self._marked.values():
            del marked[bisect_left(marked, start) :]
        markers = data.markers
        changed: Iterable[int]
        if len(markers) < len(data) - start:
            changed = sorted(p for p in markers if p >= start)
        else:  # few new points: look them up rather than walk every marked one
            changed = (p for p in range(start, len(data)) if p in markers)
        for position in changed:
            for name in markers[position]:
                if name in self._marked:
                    self._marked[name].append(position)

    def _redraw_from(self, start: int, before: tuple[int, int]) -> None:
        """Points from ``start`` on changed (the frame did not): redraw what shows them."""
        data = self._data
        if self._frame_key() != before or start < self._cached_last:
            self._invalidate()
        else:
            self._resize_virtual()
            self.refresh()
        if data.position(self.cursor) is None:
            self.cursor = data.steps[-1] if data else None

    def _invalidate(self) -> None:
        self._version += 1
        self._cached_last = 0
        self._styles = None
        self._plain.clear()
        self._lines.clear()
        self._resize_virtual()
        self.refresh()

    def _scale(self) -> int:
        return max(1, self.window, self._tops[-1] if self._tops else 0)

    def _column_width(self) -> int:
        count, width = len(self._data), self.content_region.width
        return 1 if count == 0 or width <= count else min(3, width // count)

    def _resize_virtual(self) -> None:
        """One column per step; as tall as the view (minus the scrollbar when it shows)."""
        self._cw = self._column_width()
        wide = len(self._data) * self._cw
        region = self.content_region
        bar = self.styles.scrollbar_size_horizontal if wide > region.width else 0
        self.virtual_size = Size(wide, max(0, region.height - bar))

    def on_resize(self, _event: events.Resize) -> None:
        self._invalidate()
        self.call_after_refresh(self._show_cursor)

    # -- the cursor -------------------------------------------------------------------------

    def validate_cursor(self, step: int | None) -> int | None:
        steps = self._data.steps
        if not steps:
            return None
        if step is None:
            return steps[-1]
        return steps[min(len(steps) - 1, bisect_left(steps, step))]

    def watch_cursor(self) -> None:
        self._show_cursor()

    def _show_cursor(self) -> None:
        """Scroll horizontally just enough to keep the cursor's column in view."""
        width = self.scrollable_content_region.width
        position = self._data.position(self.cursor)
        if position is None or width <= 0:
            return
        left = position * self._cw
        if left < self.scroll_x:
            self.scroll_to(x=left, animate=False)
        elif left + self._cw > self.scroll_x + width:
            self.scroll_to(x=left + self._cw - width, animate=False)

    def _select(self, index: int) -> None:
        """A move by the user: set the cursor and tell the owner."""
        steps = self._data.steps
        if not steps:
            return
        step = steps[max(0, min(len(steps) - 1, index))]
        if step != self.cursor:
            self.cursor = step
            self.post_message(self.CursorMoved(step))

    def action_move(self, delta: int) -> None:
        position = self._data.position(self.cursor)
        current = 0 if self.cursor is None else len(self._data) if position is None else position
        self._select(current + delta)

    def action_edge(self, last: int) -> None:
        self._select(len(self._data) - 1 if last else 0)

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self._wheel(event, WHEEL_STEP)

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self._wheel(event, -WHEEL_STEP)

    def _wheel(self, event: events.MouseEvent, cells: int) -> None:
        """No vertical scrolling here: the plain wheel scrolls sideways (as shift+wheel does)."""
        if not (event.shift or event.ctrl) and self.allow_horizontal_scroll:
            self.scroll_relative(x=cells, animate=False)
            event.stop()

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or not self._data:
            return
        index = (offset.x + int(self.scroll_x)) // self._cw
        if index < len(self._data):
            self._select(index)

    def next_marker(self, kind: str, direction: int) -> int | None:
        """The step of the next (direction > 0) or previous point marked ``kind``, or None."""
        if kind not in MARKERS:
            raise ValueError(f"unknown marker {kind!r}; known: {', '.join(MARKERS)}")
        marked, steps = self._marked[kind], self._data.steps
        here = self._data.position(self.cursor)
        if here is None:
            here = -1
        if direction > 0:
            position = bisect_right(marked, here)
            return steps[marked[position]] if position < len(marked) else None
        position = bisect_left(marked, here) - 1
        return steps[marked[position]] if position >= 0 else None

    # -- rendering --------------------------------------------------------------------------

    def _get_styles(self) -> _StyleMap:
        if self._styles is None:
            background = theme_color(self, "background")
            styles: _StyleMap = {}
            for zone, names in ZONE_VARIABLES.items():
                full = theme_color(self, *names)
                light = full.blend(background, 0.55) if full and background else full
                styles[f"{zone}"] = Style(color=full and full.rich_color)
                styles[f"{zone}-light"] = Style(color=light and light.rich_color, dim=not light)
                styles[f"{zone}-both"] = Style(
                    color=full and full.rich_color, bgcolor=light and light.rich_color
                )
            styles["warning-line"] = Style(color=rich_color(self, *ZONE_VARIABLES[Zone.WARNING]))
            styles["overflow-line"] = Style(color=rich_color(self, *ZONE_VARIABLES[Zone.OVERFLOW]))
            for name, (_letter, names) in MARKERS.items():
                styles[name] = Style(color=rich_color(self, *names), bold=True)
            self._styles = styles
        return self._styles

    def render_line(self, y: int) -> Strip:
        region = self.scrollable_content_region
        width, height = region.width, region.height
        scroll_x = int(self.scroll_x)
        last = min(len(self._data), -(-(scroll_x + width) // self._cw))
        shown = last  # the points this line draws end here
        key: tuple[int, ...] = (y, scroll_x, width, height, self._version, last)
        if height >= 3 and y == 0:  # the readout tells of the cursor's point
            position = self._data.position(self.cursor)
            shown = max(last, position + 1 if position is not None else 0)
            key = (*key, -1 if position is None else position)
        strip = self._lines.get((*key, self.cursor))
        if strip is None:
            base = self._plain.get(key)  # the line without the cursor: moving it reuses these
            if base is None:
                base = self._plain[key] = self._build_line(y, width, height, scroll_x, last)
            strip = self._lines[(*key, self.cursor)] = self._highlight(y, height, base, scroll_x)
            self._cached_last = max(self._cached_last, shown)
        return strip

    def _highlight(self, y: int, height: int, strip: Strip, scroll_x: int) -> Strip:
        """``strip`` with the cursor's column reversed (not on the readout line)."""
        width = strip.cell_length
        position = self._data.position(self.cursor)
        if position is None or (height >= 3 and y == 0):
            return strip
        left = position * self._cw - scroll_x
        if left + self._cw <= 0 or left >= width:
            return strip
        cuts = [max(0, left), min(width, left + self._cw), width]
        before, middle, after = (
            strip.divide(cuts) if cuts[0] else [Strip([]), *strip.divide(cuts[1:])]
        )
        return Strip.join([before, middle.apply_style(Style(reverse=True)), after])

    def _build_line(self, y: int, width: int, height: int, scroll_x: int, last: int) -> Strip:
        framed = height >= 3
        if framed and y == 0:
            text = self.readout(width)
            text.truncate(width, overflow="ellipsis", pad=True)
            return Strip(text.render(self.app.console), width).apply_style(self.rich_style)
        first, cw, styles = scroll_x // self._cw, self._cw, self._get_styles()
        cells: _Cells
        if framed and y == height - 1:
            markers = self._data.markers.get
            cells = []
            for position in range(first, last):
                cells.extend(self._marker_cells(markers(position, NO_MARKERS), cw, styles))
        else:
            chart = height - 2 if framed else height
            row = chart - 1 - (y - 1 if framed else y)  # counted from the bottom of the chart
            cells = self._chart_cells(first, last, cw, styles, chart, row)
        segments: list[Segment] = []  # runs of cells in one style make one segment
        run: list[str] = []
        run_style: Style | None = None
        for glyphs, style in cells:
            if style is not run_style and run:
                segments.append(Segment("".join(run), run_style))
                run = []
            run.append(glyphs)
            run_style = style
        if run:
            segments.append(Segment("".join(run), run_style))
        offset = scroll_x - first * cw
        strip = Strip(segments).crop(offset, offset + width).adjust_cell_length(width)
        return strip.apply_style(self.rich_style)

    @staticmethod
    def _marker_cells(markers: frozenset[str], cw: int, styles: _StyleMap) -> _Cells:
        """A point's marker letters (most important first, as many as fit), each its colour."""
        names = [name for name in PRIORITY if name in markers][:cw] if markers else []
        cells: _Cells = [(MARKERS[name][0], styles[name]) for name in names]
        if len(names) < cw:
            cells.append((" " * (cw - len(names)), None))
        return cells

    def _heights(self, first: int, last: int, chart: int) -> _Heights:
        """For the points from ``first`` to ``last``: tokens and peak in eighths of a cell of a
        chart ``chart`` cells high, and the zone (made once per frame, for every chart row)."""
        key = (self._version, first, last, chart, self._scale())
        if self._heights_cache is not None and self._heights_cache[0] == key:
            return self._heights_cache[1]
        per = self._scale() / (chart * 8)  # tokens per eighth of a cell

        def eighths(value: int) -> int:
            return max(1, int(value / per)) if value > 0 else 0

        data = self._data
        heights: _Heights = (
            [eighths(v) for v in data.tokens[first:last]],
            [eighths(v) for v in data.peaks[first:last]],
            [ZONES[code].value for code in data.zones[first:last]],
        )
        self._heights_cache = (key, heights)
        return heights

    def _chart_cells(
        self, first: int, last: int, cw: int, styles: _StyleMap, chart: int, row: int
    ) -> _Cells:
        """One row of the chart: tokens in full colour over peak in light colour, then lines."""
        per = self._scale() / (chart * 8)  # tokens per eighth of a cell
        blank: tuple[str, Style | None] = (" " * cw, None)
        for value, name in ((self.warning, "warning-line"), (self.threshold, "overflow-line")):
            if 0 < value <= self._scale() and min(chart - 1, int(value / per) // 8) == row:
                blank = ("┄" * cw, styles[name])
        floor = row * 8
        full = {z.value: ("█" * cw, styles[z.value]) for z in ZONES}
        cells: _Cells = []
        for high, top, zone in zip(*self._heights(first, last, chart), strict=True):
            tokens = high - floor
            if tokens >= 8:
                cells.append(full[zone])
                continue
            peak = top - floor
            if tokens > 0:
                style = styles[f"{zone}-both"] if peak > tokens else styles[zone]
                cells.append((BLOCKS[tokens] * cw, style))
            elif peak > 0:
                cells.append((BLOCKS[min(8, peak)] * cw, styles[f"{zone}-light"]))
            else:
                cells.append(blank)
        return cells

    def readout(self, width: int | None = None) -> Text:
        """The top line: the cursor's step, tokens, peak, zone and markers; then as much of the
        legend (threshold lines, marker letters) as fits in ``width``."""
        position = self._data.position(self.cursor)
        if position is None:
            return Text("no steps yet", Style(dim=True, italic=True))
        point = self._data[position]
        styles = self._get_styles()
        text = Text(f"step {point.step} · {point.tokens:,} tokens (peak {point.peak:,}) · ")
        text.append(point.zone.value, styles[point.zone.value] + Style(bold=True))
        letters = " ".join(marker_letters(point.markers))
        if letters:
            text.append(f" · {letters}")
        legend = [
            Text.assemble(("┄", styles["warning-line"]), f" warning {self.warning:,}"),
            Text.assemble(("┄", styles["overflow-line"]), f" overflow {self.threshold:,}"),
        ]
        for name, (letter, _names) in MARKERS.items():
            legend.append(Text.assemble((letter, styles[name]), f" {name.replace('_', ' ')}"))
        gap = "    "
        for item in legend:
            if width is not None and text.cell_len + len(gap) + item.cell_len > width:
                break
            text.append(gap)
            text.append_text(item)
            gap = "  "
        return text
