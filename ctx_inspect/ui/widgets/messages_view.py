"""The messages of a session as a virtualised table, and ``RowTable``, the base it shares with
``EventsView``.

Rows come from a provider (``set_source(count, row_at)``), never from a list of widgets: only the
visible rows are fetched, and they are kept in a bounded LRU keyed by ``(version, index)``. The
header line stays fixed while the rows scroll under it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.color import Color, ColorParseError
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ctx_inspect.ui import plain


class IndexedRow(Protocol):
    @property
    def index(self) -> int: ...


R = TypeVar("R", bound=IndexedRow)
Column = tuple[str, int, str]  # title, width in cells, "left" / "right"


class RowTable(ScrollView, Generic[R], can_focus=True):
    """A fixed header line over ``row_count`` rows fetched on demand; a reversed cursor row."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "row-table--header",
        "row-table--cursor",
        "row-table--dim",
    }
    DEFAULT_CSS = """
    RowTable {
        overflow-x: hidden;
        overflow-y: auto;
        & > .row-table--header { text-style: bold; background: $panel; }
        & > .row-table--cursor { text-style: reverse; }
        & > .row-table--dim { color: $text-muted; }
        &:focus { background-tint: $foreground 5%; }
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor_up", "Up", show=False),
        Binding("down", "cursor_down", "Down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home", "first", "First", show=False),
        Binding("end", "last", "Last", show=False),
        Binding("enter", "select", "Select", show=False),
    ]
    CACHE_SIZE: ClassVar[int] = 1024
    STRIP_CACHE_SIZE: ClassVar[int] = 256  # rendered rows
    EMPTY_TEXT: ClassVar[str] = "nothing to show"

    cursor: reactive[int] = reactive(0)
    """The cursor's row (a position in the displayed rows)."""

    class RowHighlighted(Message):
        """The user moved the cursor onto the row of ``index`` (the row's own index), shown at
        ``position`` among the displayed rows."""

        def __init__(self, table: RowTable[Any], index: int, position: int) -> None:
            super().__init__()
            self.table = table
            self.index = index
            self.position = position

        @property
        def control(self) -> RowTable[Any]:
            return self.table

    class RowSelected(Message):
        """The user pressed enter (or double-clicked) on the row of ``index``."""

        def __init__(self, table: RowTable[Any], index: int, position: int) -> None:
            super().__init__()
            self.table = table
            self.index = index
            self.position = position

        @property
        def control(self) -> RowTable[Any]:
            return self.table

    def __init__(
        self,
        *,
        follow_tail: bool = False,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.follow_tail = follow_tail
        """When rows are appended (a larger count, same version), keep the view at the end."""
        self._count = 0
        self._row_at: Callable[[int], R] | None = None
        self._version = 0
        self._cache: LRUCache[tuple[int, int], R] = LRUCache(self.CACHE_SIZE)
        self._strips: LRUCache[tuple[object, ...], Strip] = LRUCache(self.STRIP_CACHE_SIZE)
        self._frame: _Frame | None = None

    # -- data ------------------------------------------------------------------------------

    @property
    def count(self) -> int:
        """Rows in the source."""
        return self._count

    @property
    def row_count(self) -> int:
        """Rows displayed (the source's, or fewer when a subclass filters)."""
        return self._count

    def source_index(self, position: int) -> int:
        """The source index (``row_at``'s argument) of the displayed row at ``position``."""
        return position

    @property
    def cursor_index(self) -> int | None:
        """The ``index`` of the row under the cursor, or None when no row is shown."""
        return self.row(self.cursor).index if self.row_count else None

    def set_source(self, count: int, row_at: Callable[[int], R], *, version: int = 0) -> None:
        """Show ``count`` rows; ``row_at(i)`` is called only for rows that become visible.

        Bump ``version`` when existing rows change; the same version with a larger count means
        rows were appended (cached rows stay valid).
        """
        old_count, old_rows = self._count, self.row_count
        was_at_end = old_rows == 0 or self.cursor >= old_rows - 1
        version_changed = version != self._version
        if version_changed or count < old_count:
            self._cache.clear()
            self._strips.clear()
        self._count, self._row_at, self._version = max(0, count), row_at, version
        self._source_changed(old_count, version_changed)
        self._rows_changed()
        if self.follow_tail and count > old_count:
            if was_at_end:
                self.cursor = self.row_count - 1
            self.scroll_to(y=self.max_scroll_y, animate=False, immediate=True, force=True)

    def row(self, position: int) -> R:
        """The row displayed at ``position``, through the cache."""
        assert self._row_at is not None
        index = self.source_index(position)
        key = (self._version, index)
        cached = self._cache.get(key)
        if cached is None:
            cached = self._row_at(index)
            self._cache.set(key, cached)
        return cached

    def _source_changed(self, old_count: int, version_changed: bool) -> None:
        """Hook for subclasses: the source was replaced or grew."""

    def _rows_changed(self) -> None:
        """The displayed rows changed: new virtual size, cursor clamped, repaint."""
        self._update_virtual_size()
        self.cursor = self.validate_cursor(self.cursor)
        self.refresh()

    def _update_virtual_size(self) -> None:
        self.virtual_size = Size(self.scrollable_content_region.width, self.row_count + 1)

    # -- cursor ----------------------------------------------------------------------------

    def validate_cursor(self, value: int) -> int:
        return max(0, min(value, self.row_count - 1))

    def watch_cursor(self) -> None:
        self._scroll_to_cursor()

    @property
    def visible_rows(self) -> int:
        """Rows that fit under the header."""
        return max(0, self.scrollable_content_region.height - 1)

    def _scroll_to_cursor(self) -> None:
        page = self.visible_rows
        if page <= 0:
            return
        top = self.scroll_offset.y
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False, immediate=True, force=True)
        elif self.cursor >= top + page:
            self.scroll_to(y=self.cursor - page + 1, animate=False, immediate=True, force=True)

    def _move(self, position: int) -> None:
        """A cursor move made by the user: posts ``RowHighlighted`` when the row changes."""
        before = self.cursor
        self.cursor = self.validate_cursor(position)
        if self.row_count and self.cursor != before:
            self.post_message(self.RowHighlighted(self, self.row(self.cursor).index, self.cursor))

    def action_cursor_up(self) -> None:
        self._move(self.cursor - 1)

    def action_cursor_down(self) -> None:
        self._move(self.cursor + 1)

    def action_page_up(self) -> None:
        page = max(1, self.visible_rows)
        self.scroll_to(y=self.scroll_offset.y - page, animate=False, immediate=True, force=True)
        self._move(self.cursor - page)

    def action_page_down(self) -> None:
        page = max(1, self.visible_rows)
        self.scroll_to(y=self.scroll_offset.y + page, animate=False, immediate=True, force=True)
        self._move(self.cursor + page)

    def action_first(self) -> None:
        self._move(0)

    def action_last(self) -> None:
        self._move(self.row_count - 1)

    def action_select(self) -> None:
        if self.row_count:
            self.post_message(self.RowSelected(self, self.row(self.cursor).index, self.cursor))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y == 0:
            return
        position = self.scroll_offset.y + offset.y - 1
        if position < self.row_count:
            self._move(position)
            if event.chain == 2:
                self.action_select()

    def on_resize(self) -> None:
        self._update_virtual_size()
        self._scroll_to_cursor()

    # -- rendering -------------------------------------------------------------------------

    def theme_style(self, *names: str) -> Style:
        """A foreground style from the first theme variable of ``names`` that is defined."""
        frame = self._frame
        if frame is not None and names in frame.theme_styles:
            return frame.theme_styles[names]
        style = Style()
        variables = self.app.theme_variables
        for name in names:
            value = variables.get(name)
            if not value:
                continue
            try:
                style = Style(color=Color.parse(value).rich_color)
            except ColorParseError:
                continue
            break
        if frame is not None:
            frame.theme_styles[names] = style
        return style

    def columns(self, width: int) -> list[Column]:
        raise NotImplementedError

    def header_status(self, room: int) -> str:
        """Text shown right-aligned at the end of the header line, in at most ``room`` cells."""
        return ""

    def row_cells(self, row: R) -> list[tuple[str, Style | str]]:
        raise NotImplementedError

    def row_dimmed(self, row: R) -> bool:
        return False

    def _line(self, cells: list[tuple[str, Style | str]], columns: list[Column]) -> Text:
        text = Text(no_wrap=True, end="")
        for (value, style), (_title, width, align) in zip(cells, columns, strict=False):
            text.append(plain.fit(value, width, align=align), style)
            text.append(" ")
        return text

    def _header(self, width: int) -> Text:
        columns = self.columns(width)
        text = self._line([(title, "") for title, _w, _a in columns], columns)
        text.rstrip()
        room = width - text.cell_len - 1
        status = plain.one_line(self.header_status(room)) if room > 0 else ""
        if status and cell_len(status) <= room:
            text.append(" " * (width - text.cell_len - cell_len(status)) + status)
        return text

    def render_lines(self, crop: Region) -> list[Strip]:
        """Render with what every line shares (width, styles, columns) worked out once."""
        self._frame = self._new_frame()
        try:
            return super().render_lines(crop)
        finally:
            self._frame = None

    def _new_frame(self) -> _Frame:
        width = self.scrollable_content_region.width
        return _Frame(
            theme=self.app.theme,
            width=width,
            base=self.rich_style,
            cursor=self.get_component_rich_style("row-table--cursor"),
            dim=self.get_component_rich_style("row-table--dim"),
            columns=self.columns(width),
        )

    def render_line(self, y: int) -> Strip:
        frame = self._frame or self._new_frame()
        width, base = frame.width, frame.base
        if y == 0:
            text = self._header(width)
            text.stylize_before(self.get_component_rich_style("row-table--header"))
        else:
            position = self.scroll_offset.y + y - 1
            if position >= self.row_count:
                if position == 0:
                    text = Text(f" {self.EMPTY_TEXT}", no_wrap=True, end="")
                    text.stylize(frame.dim)
                else:
                    return Strip.blank(width, base)
            else:
                return self._row_strip(position, frame)
        text.stylize_before(base)
        strip = Strip(text.render(self.app.console), text.cell_len)
        return strip.crop_extend(0, width, base)

    def _row_strip(self, position: int, frame: _Frame) -> Strip:
        """One row's line (cached: moving the cursor redraws two rows, not the page)."""
        row = self.row(position)
        is_cursor = position == self.cursor
        key = (self._version, row.index, is_cursor, frame.key)
        strip = self._strips.get(key)
        if strip is not None:
            return strip
        dimmed = self.row_dimmed(row)
        row_style = frame.base
        if dimmed:
            row_style += frame.dim
        if is_cursor:
            row_style += frame.cursor
        segments: list[Segment] = []
        run = ""  # cells in the row's own style, joined
        for (value, style), (_title, size, align) in zip(
            self.row_cells(row), frame.columns, strict=False
        ):
            fitted = plain.fit(value, size, align=align)
            if not style:
                run += fitted + " "
                continue
            if run:
                segments.append(Segment(run, row_style))
            segments.append(Segment(fitted, frame.cell_style(style, dimmed, is_cursor)))
            run = " "
        if run:
            segments.append(Segment(run, row_style))
        strip = Strip(segments).crop_extend(0, frame.width, frame.base)
        self._strips.set(key, strip)
        return strip


class _Frame:
    """What every line of one render shares."""

    __slots__ = ("_styles", "base", "columns", "cursor", "dim", "key", "theme_styles", "width")

    def __init__(
        self,
        *,
        theme: str,
        width: int,
        base: Style,
        cursor: Style,
        dim: Style,
        columns: list[Column],
    ) -> None:
        self.width, self.base, self.cursor, self.dim = width, base, cursor, dim
        self.columns = columns
        self.key = (theme, width, base, cursor, dim, tuple(columns))
        self.theme_styles: dict[tuple[str, ...], Style] = {}
        self._styles: dict[tuple[Style | str, bool, bool], Style] = {}

    def cell_style(self, style: Style | str, dimmed: bool, cursor: bool) -> Style:
        """A cell's style over the row's: the base, the cell's, dimmed, then the cursor."""
        key = (style, dimmed, cursor)
        combined = self._styles.get(key)
        if combined is None:
            combined = self.base + (Style.parse(style) if isinstance(style, str) else style)
            if dimmed:
                combined += self.dim
            if cursor:
                combined += self.cursor
            self._styles[key] = combined
        return combined


@dataclass(frozen=True)
class MessageRow:
    index: int
    role: str
    kind: str
    tokens: int
    share: float  # of the window, 0-1+
    running: int  # running total in context
    flags: str  # comma-joined: pruned, archived, summary, dropped, removed, hidden
    origin: str  # reported / exact / estimated
    tool: str | None
    in_context: bool


ORIGIN_LETTERS: dict[str, str] = {"reported": "R", "exact": "X", "estimated": "E"}
ORIGIN_LEGENDS = (
    "O: R=reported X=exact E=estimated",
    "R=reported X=exact E=estimated",
    "R=reported X=exact E=est.",
    "R=rep X=exact E=est",
    "R=rep X=ex E=est",
)
# flag -> theme variables to colour it with, the first one defined wins
FLAG_COLOURS: dict[str, tuple[str, ...]] = {
    "dropped": ("marker-drop", "error"),
    "pruned": ("marker-prune", "warning"),
    "summary": ("marker-compaction", "accent"),
    "archived": ("marker-compaction", "accent"),
    "removed": ("marker-reset", "secondary"),
}


class MessagesView(RowTable[MessageRow]):
    """Every message of a session: index, role, kind, tool, tokens, share, running total,
    flags and origin. Rows out of context are dimmed."""

    EMPTY_TEXT = "no messages"

    class RowHighlighted(RowTable.RowHighlighted):
        """The user moved the cursor onto message ``index``."""

    class RowSelected(RowTable.RowSelected):
        """The user pressed enter on message ``index``."""

    def columns(self, width: int) -> list[Column]:
        number = max(3, len(str(self._count)))
        fixed = [
            ("#", number, "right"),
            ("role", 9, "left"),
            ("kind", 12, "left"),
        ]
        figures = [
            ("tokens", 9, "right"),
            ("O", 1, "left"),
            ("share", 6, "right"),
            ("running", 9, "right"),
        ]
        used = sum(w for _t, w, _a in fixed + figures) + len(fixed) + len(figures) + 2
        room = max(0, width - used)
        tool = max(4, min(18, room * 2 // 5))
        flags = max(5, room - tool)
        return [*fixed, ("tool", tool, "left"), *figures, ("flags", flags, "left")]

    def header_status(self, room: int) -> str:
        return next((legend for legend in ORIGIN_LEGENDS if len(legend) <= room), "")

    def row_cells(self, row: MessageRow) -> list[tuple[str, Style | str]]:
        first_flag = row.flags.split(",", 1)[0].strip()
        flag_style = self.theme_style(*FLAG_COLOURS.get(first_flag, ()))
        return [
            (str(row.index + 1), ""),
            (row.role, ""),
            (row.kind, ""),
            (row.tool or "", ""),
            (f"{row.tokens:,}", ""),
            (ORIGIN_LETTERS.get(row.origin, "?"), ""),
            (f"{row.share * 100:.1f}%", ""),
            (f"{row.running:,}", ""),
            (row.flags, flag_style),
        ]

    def row_dimmed(self, row: MessageRow) -> bool:
        return not row.in_context
