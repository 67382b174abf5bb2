"""The guard's counters at one step: current, pending, new and schema against the limit."""

from __future__ import annotations

from rich.color import Color as RichColor
from rich.style import Style
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from ctx_inspect.core.counters import Counters
from ctx_inspect.core.model import GuardStatus
from ctx_inspect.ui.widgets.zone_gauge import badge, rich_color, zone_color

# Each segment of the stacked bar: name, glyph (so colour is not the only carrier), theme colours.
SEGMENTS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("current", "█", ("counter-current", "primary")),
    ("pending", "▓", ("counter-pending", "secondary")),
    ("new", "▒", ("counter-new", "accent")),
    ("extra", "░", ("counter-extra", "foreground")),
)

STATUS_VARIABLES: dict[GuardStatus, tuple[str, ...]] = {
    GuardStatus.OK: ("success", "primary"),
    GuardStatus.SKIP: ("warning", "accent"),
    GuardStatus.FINAL: ("error", "warning"),
}


class CountersPanel(Widget):
    """The guard's counters, their stacked bar against the limit, the projection and the status."""

    DEFAULT_CSS = """
    CountersPanel {
        text-wrap: nowrap;
        text-overflow: ellipsis;
        height: auto;
        min-height: 1;
    }
    """

    counters: reactive[Counters | None] = reactive(None, layout=True)
    """The counters shown (None: no request yet)."""

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.refresh())

    def update_counters(self, counters: Counters | None) -> None:
        """Show ``counters`` (None: no request yet)."""
        self.counters = counters

    def _values(self, counters: Counters) -> list[tuple[str, int, str, RichColor | None]]:
        values = {
            "current": counters.current,
            "pending": counters.pending,
            "new": counters.new,
            "extra": counters.extra,
        }
        return [
            (label, values[label], glyph, rich_color(self, *names))
            for label, glyph, names in SEGMENTS
            if label != "extra" or counters.extra
        ]

    def render(self) -> Text:
        counters = self.counters
        if counters is None:
            return Text("no requests yet", style=Style(dim=True, italic=True), end="")
        width = max(1, self.content_size.width)
        lines = [
            self._title(counters),
            self._legend(counters),
            self._bar(counters, width),
            self._projection(counters),
            self._composition(counters),
        ]
        text = Text("\n", end="").join(lines)
        text.no_wrap = True
        text.overflow = "ellipsis"
        return text

    def _title(self, counters: Counters) -> Text:
        status = counters.status
        line = badge(status.value.upper(), rich_color(self, *STATUS_VARIABLES[status]), self)
        source = "logged by the agent" if counters.recorded else "derived from the session"
        line.append(f"  step {counters.step}  ·  counters {source}  ·  zone ")
        line.append(counters.zone.value, Style(color=zone_color(self, counters.zone), bold=True))
        return line

    def _legend(self, counters: Counters) -> Text:
        line = Text()
        for label, value, glyph, color in self._values(counters):
            line.append(glyph, Style(color=color))
            line.append(f" {label} {value:,}   ")
        line.append(f"schema {counters.schema:,} (not in projection)", Style(dim=True))
        return line

    def _bar(self, counters: Counters, width: int) -> Text:
        """The stacked segments against max(limit, projected); the limit ticked when exceeded."""
        values = self._values(counters)
        total = sum(value for _label, value, _glyph, _color in values)
        scale = max(counters.limit, total)
        bar = Text()
        if scale <= 0:
            return bar
        cumulative = 0
        start = 0
        for _label, value, glyph, color in values:
            cumulative += value
            end = min(width, round(cumulative * width / scale))
            if end > start:
                bar.append(glyph * (end - start), Style(color=color))
            start = max(start, end)
        if start < width:
            bar.append("─" * (width - start), Style(dim=True))
        if 0 < counters.limit < total:
            column = min(width - 1, counters.limit * width // scale)
            tick = Style(color=rich_color(self, "error", "warning"), bgcolor=None, bold=True)
            bar = bar[:column] + Text("┃", tick) + bar[column + 1 :]
        return bar

    def _projection(self, counters: Counters) -> Text:
        line = Text(f"projected {counters.projected:,} / limit {counters.limit:,} ")
        over = counters.over_by
        if over > 0:
            line.append(f"(+{over:,} over)", Style(color=rich_color(self, "error"), bold=True))
        else:
            line.append(f"({-over:,} left)")
        return line

    def _composition(self, counters: Counters) -> Text:
        parts = counters.parts
        line = Text(
            f"limit = window {parts.window:,} − buffer {parts.buffer:,} "
            f"− max output {parts.max_output:,} = {parts.effective:,}",
            style=Style(dim=True),
        )
        if parts.effective != counters.limit:
            line.append(f"  (the agent's limit: {counters.limit:,})")
        return line
