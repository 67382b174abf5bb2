"""How full the window is: used tokens against the window, with the warning and overflow marks.

Also home of the small helpers every widget here uses to read colours from the app's theme
(``theme_color``, ``zone_color``): colours are never literal values in code, and a theme that
lacks one of our variables falls back to Textual's standard ones.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.color import Color as RichColor
from rich.style import Style
from rich.text import Text
from textual._context import NoActiveAppError
from textual.color import Color, ColorParseError
from textual.reactive import reactive
from textual.widget import Widget

from ctx_inspect.core.window import Zone

ZONE_VARIABLES: dict[Zone, tuple[str, ...]] = {
    Zone.SAFE: ("zone-safe", "success", "primary"),
    Zone.WARNING: ("zone-warning", "warning", "accent"),
    Zone.OVERFLOW: ("zone-overflow", "error", "secondary"),
}

_PARTIAL = "▏▎▍▌▋▊▉"  # 1/8 .. 7/8 of a cell, filled from the left


def theme_color(widget: Widget, *names: str) -> Color | None:
    """The first of the theme variables ``names`` that the app defines as a colour, or None."""
    try:
        variables = widget.app.theme_variables
    except NoActiveAppError:  # rendered outside an app: no theme, no colour
        return None
    for name in names:
        value = variables.get(name)
        if not value:
            continue
        try:
            color = Color.parse(value)
        except ColorParseError:
            continue
        if color.a < 1:  # translucent (e.g. $boost): as it shows over the background
            base = variables.get("background")
            try:
                color = Color.parse(base) + color if base else color.with_alpha(1)
            except ColorParseError:
                color = color.with_alpha(1)
        return color
    return None


def rich_color(widget: Widget, *names: str) -> RichColor | None:
    color = theme_color(widget, *names)
    return None if color is None else color.rich_color


def zone_color(widget: Widget, zone: Zone) -> RichColor | None:
    return rich_color(widget, *ZONE_VARIABLES[zone])


def badge(label: str, color: RichColor | None, widget: Widget) -> Text:
    """``label`` in reverse video over ``color``: prominent, and readable without colour."""
    if color is None:
        style = Style(reverse=True, bold=True)
    else:
        style = Style(color=rich_color(widget, "background"), bgcolor=color, bold=True)
    text = Text()
    text.append(f" {label} ", style)
    return text


@dataclass(frozen=True)
class GaugeReading:
    """What the gauge shows: used tokens, the window and its marks, the zone, where the figure
    came from, and the effective limit (ticked when it is not one of the marks)."""

    tokens: int = 0
    window: int = 0
    warning: int = 0
    threshold: int = 0
    zone: Zone = Zone.SAFE
    origin: str = ""
    effective_limit: int | None = None


class ZoneGauge(Widget):
    """Used tokens against the window: a text line, a bar with the thresholds marked, a scale."""

    DEFAULT_CSS = """
    ZoneGauge {
        text-wrap: nowrap;
        text-overflow: ellipsis;
        height: 3;
    }
    """

    reading: reactive[GaugeReading] = reactive(GaugeReading)

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.refresh())

    def update_gauge(
        self,
        *,
        tokens: int,
        window: int,
        warning: int,
        threshold: int,
        zone: Zone,
        origin: str,
        effective_limit: int | None = None,
    ) -> None:
        """Show these values (the owner computes them: ``GaugeReading``)."""
        self.reading = GaugeReading(
            tokens, window, warning, threshold, zone, origin, effective_limit
        )

    @property
    def percent(self) -> float | None:
        """Used share of the window in percent (unclamped), or None when the window is unknown."""
        r = self.reading
        return None if r.window <= 0 else r.tokens / r.window * 100

    def summary(self, width: int | None = None) -> Text:
        """The text line: zone, tokens / window, percentage, marks, origin; within ``width``
        the separators narrow first, then the limit and the marks are left to the bar."""
        r = self.reading
        line = badge(r.zone.value.upper(), zone_color(self, r.zone), self)
        marks: list[Text] = []
        if r.window <= 0:
            line.append(f"  {r.tokens:,} tokens")
            marks.append(Text("window unknown"))
        else:
            line.append(f"  {r.tokens:,} / {r.window:,} tokens  ")
            percent = r.tokens / r.window * 100
            if r.tokens > r.window:
                over = f"({percent:.1f}%) over the window by {r.tokens - r.window:,}"
                line.append(over, style=Style(bold=True))
            else:
                line.append(f"{percent:.1f}% of window")
            marks += [Text(f"warning {r.warning:,}"), Text(f"overflow {r.threshold:,}")]
            if self._shows_limit():
                marks.append(Text(f"limit {r.effective_limit:,}"))
        origin = [Text(r.origin, Style(italic=True))] if r.origin else []
        candidates = [("  ·  ", marks), (" · ", marks), (" · ", marks[:2]), (" · ", [])]
        for sep, kept in candidates:
            fitted = line + Text(sep).join([Text(""), *kept, *origin]) if kept or origin else line
            if width is None or fitted.cell_len <= width:
                return fitted
        return fitted

    def _shows_limit(self) -> bool:
        limit = self.reading.effective_limit
        return limit is not None and limit not in (self.reading.warning, self.reading.threshold)

    def render(self) -> Text:
        width = max(1, self.content_size.width)
        lines = [self.summary(width)]
        if self.reading.window > 0:
            lines += [self._bar(width), self._scale(width)]
        text = Text("\n", end="").join(lines)
        text.no_wrap = True
        text.overflow = "ellipsis"
        return text

    def _column(self, value: int, width: int) -> int | None:
        if value < 0 or value > self.reading.window:
            return None
        return min(width - 1, value * width // self.reading.window)

    def _marks(self, width: int) -> dict[int, tuple[str, RichColor | None, str]]:
        """Tick marks by column: glyph, colour, and the letter that names it on the scale."""
        marks: dict[int, tuple[str, RichColor | None, str]] = {}
        if self._shows_limit():
            assert self.reading.effective_limit is not None
            column = self._column(self.reading.effective_limit, width)
            if column is not None:
                marks[column] = ("╎", rich_color(self, "foreground"), "l")
        for value, zone, letter in (
            (self.reading.warning, Zone.WARNING, "w"),
            (self.reading.threshold, Zone.OVERFLOW, "o"),
        ):
            column = self._column(value, width)
            if column is not None and value > 0:
                marks[column] = ("┃", zone_color(self, zone), letter)
        return marks

    def _bar(self, width: int) -> Text:
        fill = zone_color(self, self.reading.zone)
        eighths = min(self.reading.tokens, self.reading.window) * width * 8 // self.reading.window
        full, part = divmod(max(0, eighths), 8)
        over = self.reading.tokens > self.reading.window
        fill_style = Style(color=fill)
        empty_style = Style(color=rich_color(self, "foreground"), dim=True)
        on_fill = Style(color=rich_color(self, "background"), bgcolor=fill, bold=True)
        marks = self._marks(width)
        bar = Text()
        for column in range(width):
            filled = column < full
            if column in marks:
                glyph, color, _letter = marks[column]
                bar.append(glyph, on_fill if filled else Style(color=color, bold=True))
            elif over and column == width - 1:
                bar.append("»", on_fill)
            elif filled:
                bar.append("█", fill_style)
            elif column == full and part:
                bar.append(_PARTIAL[part - 1], fill_style)
            else:
                bar.append("░", empty_style)
        return bar

    def _scale(self, width: int) -> Text:
        """0 and the window at the ends; w, o, l under the warning, overflow and limit ticks."""
        cells = [" "] * width
        for column, (_glyph, _color, letter) in self._marks(width).items():
            cells[column] = letter
        if cells[0] == " ":
            cells[0] = "0"
        end = f"{self.reading.window:,}"
        if width > len(end) + 2 and not "".join(cells[width - len(end) - 1 :]).strip():
            cells[width - len(end) :] = end
        return Text("".join(cells), style=Style(dim=True))
