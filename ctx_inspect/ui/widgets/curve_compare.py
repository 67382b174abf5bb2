"""Two context curves over the same steps (original and tuned), with each one's markers.

The chart always fits the widget: steps are grouped into columns (the highest figure of a group is
drawn), so it costs the same for ten steps or a million. The tuned curve is drawn as blocks, the
original as a line over them (told apart without colour too); below, one marker row per curve
(C compaction, P prune, D dropped, F final turn, R reset) and a legend on top.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text
from textual.widget import Widget

from ctx_inspect.ui.widgets.timeline_points import MARKERS, PRIORITY
from ctx_inspect.ui.widgets.zone_gauge import rich_color

BLOCKS = " ▁▂▃▄▅▆▇█"
GUTTER = 9  # the left column: y-axis labels and the marker rows' names
ORIGINAL_COLOURS = ("secondary", "primary")
TUNED_COLOURS = ("accent", "primary")


@dataclass(frozen=True)
class CurvePoint:
    step: int
    tokens: int
    markers: frozenset[str] = frozenset()


@dataclass(frozen=True)
class _Column:
    original: int | None
    tuned: int | None
    original_markers: frozenset[str]
    tuned_markers: frozenset[str]


def short(value: int) -> str:
    """12,345 as 12.3k, 2,500,000 as 2.5M."""
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if value >= 10_000:
        return f"{value / 1000:.0f}k"
    if value >= 1000:
        return f"{value / 1000:.1f}k"
    return str(value)


class CurveCompare(Widget):
    """Original and tuned tokens per step, their markers, a threshold line and a legend."""

    DEFAULT_CSS = """
    CurveCompare {
        height: 1fr;
        min-height: 7;
        text-wrap: nowrap;
        text-overflow: clip;
    }
    """

    def __init__(
        self, *, name: str | None = None, id: str | None = None, classes: str | None = None
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.original: list[CurvePoint] = []
        self.tuned: list[CurvePoint] = []
        self.labels = ("original", "tuned")
        self.threshold: int | None = None

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.refresh())

    def set_curves(
        self,
        original: Sequence[CurvePoint],
        tuned: Sequence[CurvePoint],
        *,
        labels: tuple[str, str] = ("original", "tuned"),
        threshold: int | None = None,
    ) -> None:
        """Show these two curves (points in step order); ``threshold`` draws a dotted line."""
        self.original = list(original)
        self.tuned = list(tuned)
        self.labels = labels
        self.threshold = threshold
        self.refresh()

    # -- grouping --------------------------------------------------------------------------

    def columns(self, width: int) -> tuple[list[_Column], int]:
        """The columns to draw in ``width`` cells, and each one's width in cells."""
        steps = sorted({p.step for p in self.original} | {p.step for p in self.tuned})
        if not steps or width <= 0:
            return [], 1
        cell = max(1, min(3, width // len(steps)))
        groups = min(len(steps), width // cell)
        index = {step: i * groups // len(steps) for i, step in enumerate(steps)}
        original: list[int | None] = [None] * groups
        tuned: list[int | None] = [None] * groups
        o_marks: list[set[str]] = [set() for _ in range(groups)]
        t_marks: list[set[str]] = [set() for _ in range(groups)]
        for points, values, marks in (
            (self.original, original, o_marks),
            (self.tuned, tuned, t_marks),
        ):
            for p in points:
                g = index[p.step]
                current = values[g]
                values[g] = p.tokens if current is None else max(current, p.tokens)
                marks[g].update(p.markers)
        return [
            _Column(original[g], tuned[g], frozenset(o_marks[g]), frozenset(t_marks[g]))
            for g in range(groups)
        ], cell

    # -- drawing ---------------------------------------------------------------------------

    def render(self) -> Text:
        width = max(1, self.content_size.width)
        height = max(5, self.content_size.height)
        if not self.original and not self.tuned:
            return Text("no replay yet", style=Style(dim=True, italic=True), end="")
        columns, cell = self.columns(max(1, width - GUTTER))
        series, markers = self._legend()
        legend = [series + Text("   ") + markers]
        if legend[0].cell_len > width:
            legend = [series, markers]
        chart_rows = max(1, height - 3 - len(legend))
        top = max(
            [c.original or 0 for c in columns]
            + [c.tuned or 0 for c in columns]
            + [self.threshold or 0, 1]
        )
        lines = legend
        lines.extend(self._chart(columns, cell, chart_rows, top))
        lines.append(self._axis(columns, cell))
        lines.append(self._markers(self.labels[0], columns, cell, tuned=False))
        lines.append(self._markers(self.labels[1], columns, cell, tuned=True))
        text = Text("\n", end="").join(lines)
        text.no_wrap = True
        text.overflow = "crop"
        return text

    def _legend(self) -> tuple[Text, Text]:
        """The series (line, blocks, threshold) and the marker letters."""
        series = Text()
        series.append("━━", Style(color=rich_color(self, *ORIGINAL_COLOURS), bold=True))
        series.append(f" {self.labels[0]}   ")
        series.append("██", Style(color=rich_color(self, *TUNED_COLOURS)))
        series.append(f" {self.labels[1]}")
        if self.threshold is not None:
            series.append("   ")
            series.append("┄┄", self._threshold_style())
            series.append(f" threshold {self.threshold:,}")
        markers = Text()
        for name in PRIORITY:
            letter, colours = MARKERS[name]
            if markers:
                markers.append("  ")
            markers.append(letter, Style(color=rich_color(self, *colours), bold=True))
            markers.append(f" {name.replace('_', ' ')}")
        return series, markers

    def _threshold_style(self) -> Style:
        return Style(color=rich_color(self, "zone-overflow", "error"))

    def _chart(self, columns: list[_Column], cell: int, rows: int, top: int) -> list[Text]:
        line_style = Style(color=rich_color(self, *ORIGINAL_COLOURS), bold=True)
        tuned_color = rich_color(self, *TUNED_COLOURS)
        bar_style = Style(color=tuned_color)
        on_bar = Style(color=rich_color(self, *ORIGINAL_COLOURS), bgcolor=tuned_color, bold=True)
        threshold_style = self._threshold_style()
        threshold_row = self._row_of(self.threshold, rows, top) if self.threshold else None
        out: list[Text] = []
        for r in range(rows - 1, -1, -1):  # r: rows from the bottom
            label = short(top) if r == rows - 1 else ("0" if r == 0 else "")
            line = Text(f"{label:>{GUTTER - 1}} ", style=Style(dim=True))
            for column in columns:
                fill = (column.tuned or 0) * rows / top - r  # how much of this cell is bar
                glyph, style = " ", Style()
                if column.tuned is not None and fill >= 1:
                    glyph, style = "█", bar_style
                elif column.tuned is not None and fill > 0:
                    glyph, style = BLOCKS[max(1, round(fill * 8))], bar_style
                if column.original is not None and self._row_of(column.original, rows, top) == r:
                    style = on_bar if glyph == "█" else line_style
                    glyph = "━"
                elif glyph == " " and threshold_row == r:
                    glyph, style = "┄", threshold_style
                line.append(glyph * cell, style)
            out.append(line)
        return out

    @staticmethod
    def _row_of(value: int | None, rows: int, top: int) -> int:
        if not value:
            return 0
        return max(0, min(rows - 1, math.ceil(value * rows / top) - 1))

    def _axis(self, columns: list[_Column], cell: int) -> Text:
        steps = sorted({p.step for p in self.original} | {p.step for p in self.tuned})
        span = len(columns) * cell
        first, last = f"step {steps[0]}", f"step {steps[-1]}"
        if span >= len(first) + len(last) + 1:
            middle = " " * (span - len(first) - len(last))
            body = first + middle + last
        else:
            body = first[:span]
        return Text(" " * GUTTER + body, style=Style(dim=True))

    def _markers(self, label: str, columns: list[_Column], cell: int, *, tuned: bool) -> Text:
        name = label if len(label) < GUTTER else label[: GUTTER - 2] + "…"
        line = Text(f"{name:<{GUTTER - 1}} ", style=Style(dim=True))
        for column in columns:
            marks = column.tuned_markers if tuned else column.original_markers
            chosen = next((m for m in PRIORITY if m in marks), None)
            if chosen is None:
                line.append(
                    "·" if (column.tuned if tuned else column.original) is not None else " ",
                    Style(dim=True),
                )
                line.append(" " * (cell - 1))
                continue
            letter, colours = MARKERS[chosen]
            line.append(letter, Style(color=rich_color(self, *colours), bold=True))
            line.append(" " * (cell - 1))
        return line
