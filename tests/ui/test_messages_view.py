"""MessagesView: a virtualised table; only visible rows are fetched; cursor moves post messages."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.app import App, ComposeResult
from textual.color import Color
from textual.geometry import Offset

from ctx_inspect.ui.widgets.messages_view import MessageRow, MessagesView

WIDTH, HEIGHT = 100, 30
ADVERSARIAL_TOOL = "[b]x[/b]\x1b[31m\x07"


def make_row(index: int) -> MessageRow:
    return MessageRow(
        index=index,
        role=("system", "user", "assistant", "tool")[index % 4],
        kind="tool_result" if index % 4 == 3 else "message",
        tokens=1_000 + index,
        share=0.123,
        running=12_345 + index,
        flags="pruned" if index % 5 == 0 else "",
        origin=("reported", "exact", "estimated")[index % 3],
        tool=ADVERSARIAL_TOOL if index % 4 == 3 else None,
        in_context=index % 7 != 6,
    )


class CountingSource:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, index: int) -> MessageRow:
        self.calls += 1
        return make_row(index)


class ViewApp(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, int]] = []

    def compose(self) -> ComposeResult:
        yield MessagesView()

    def on_messages_view_row_highlighted(self, message: MessagesView.RowHighlighted) -> None:
        self.seen.append(("highlighted", message.index))

    def on_messages_view_row_selected(self, message: MessagesView.RowSelected) -> None:
        self.seen.append(("selected", message.index))


def style(segment: Segment) -> Style:
    assert segment.style is not None
    return segment.style


def line(view: MessagesView, y: int) -> str:
    return "".join(segment.text for segment in view.render_line(y))


async def test_header_columns_and_row_formatting() -> None:
    app = ViewApp()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        view = app.query_one(MessagesView)
        view.set_source(100, make_row)
        await pilot.pause()
        header = line(view, 0)
        for title in ("#", "role", "kind", "tool", "tokens", "O", "share", "running", "flags"):
            assert f" {title} " in f" {header} "
        assert "R=rep X=exact E=est" in header  # the origin letters have a legend
        first = line(view, 1)
        assert first.split()[:7] == ["1", "system", "message", "1,000", "R", "12.3%", "12,345"]
        assert "pruned" in first
        assert line(view, 2).split()[4] == "X"
        assert view.virtual_size.height == 101  # the rows and the header
        assert view.virtual_size.width <= view.size.width  # no horizontal scrolling


async def test_keys_move_the_cursor_and_post_highlighted() -> None:
    app = ViewApp()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        view = app.query_one(MessagesView)
        view.set_source(200, make_row)
        view.focus()
        await pilot.pause()
        await pilot.press("down", "down")
        assert view.cursor == 2
        await pilot.press("up")
        assert view.cursor == 1
        await pilot.press("pagedown")
        page = view.visible_rows
        assert page == HEIGHT - 1
        assert view.cursor == 1 + page
        await pilot.press("pageup")
        assert view.cursor == 1
        await pilot.press("end")
        assert view.cursor == 199
        assert view.scroll_offset.y == view.max_scroll_y
        assert line(view, HEIGHT - 1).split()[0] == "200"
        await pilot.press("home")
        assert view.cursor == 0 and view.scroll_offset.y == 0
        await pilot.press("up")  # already at the top: no message
        await pilot.press("enter")
        await pilot.pause()
        assert app.seen == [
            ("highlighted", 1),
            ("highlighted", 2),
            ("highlighted", 1),
            ("highlighted", 1 + page),
            ("highlighted", 1),
            ("highlighted", 199),
            ("highlighted", 0),
            ("selected", 0),
        ]


async def test_header_stays_fixed_while_scrolling() -> None:
    app = ViewApp()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        view = app.query_one(MessagesView)
        view.set_source(1_000, make_row)
        view.focus()
        await pilot.pause()
        header = line(view, 0)
        await pilot.press("pagedown", "pagedown")
        assert view.scroll_offset.y > 0
        assert line(view, 0) == header
        top = view.scroll_offset.y
        assert line(view, 1).split()[0] == str(top + 1)


async def test_click_moves_the_cursor_and_double_click_selects() -> None:
    app = ViewApp()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        view = app.query_one(MessagesView)
        view.set_source(50, make_row)
        await pilot.pause()
        await pilot.click(MessagesView, offset=Offset(10, 4))
        assert view.cursor == 3
        await pilot.click(MessagesView, offset=Offset(10, 0))  # the header: nothing
        assert view.cursor == 3
        await pilot.double_click(MessagesView, offset=Offset(10, 6))
        await pilot.pause()
        assert view.cursor == 5
        assert ("highlighted", 3) in app.seen
        assert app.seen[-1] == ("selected", 5)


async def test_a_million_rows_fetch_only_what_is_visible() -> None:
    app = ViewApp()
    source = CountingSource()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        view = app.query_one(MessagesView)
        view.set_source(1_000_000, source)
        view.focus()
        await pilot.pause()
        screen = HEIGHT
        assert source.calls <= 2 * screen
        for _ in range(20):
            before = source.calls
            await pilot.press("pagedown")
            await pilot.pause()
            assert source.calls - before <= 2 * screen
        await pilot.press("end")
        await pilot.pause()
        assert view.cursor == 999_999
        assert line(view, HEIGHT - 1).split()[0] == "1000000"
        assert source.calls <= 25 * 2 * screen
        assert len(view._cache) <= view.CACHE_SIZE
        assert view.virtual_size.height == 1_000_001


async def test_rows_are_cached_by_version() -> None:
    app = ViewApp()
    source = CountingSource()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        view = app.query_one(MessagesView)
        view.set_source(100, source)
        await pilot.pause()
        calls = source.calls
        view.refresh()
        await pilot.pause()
        assert source.calls == calls  # a repaint does not fetch again
        view.set_source(100, source, version=1)
        await pilot.pause()
        assert source.calls == 2 * calls  # a new version does


async def test_follow_tail_stays_at_the_end() -> None:
    app = ViewApp()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        view = app.query_one(MessagesView)
        view.follow_tail = True
        view.set_source(10, make_row)
        await pilot.pause()
        view.cursor = 9
        view.set_source(500, make_row)
        await pilot.pause()
        assert view.scroll_offset.y == view.max_scroll_y > 0
        assert view.cursor == 499
        assert line(view, HEIGHT - 1).split()[0] == "500"
        view.set_source(800, make_row)
        await pilot.pause()
        assert view.scroll_offset.y == view.max_scroll_y
        assert line(view, HEIGHT - 1).split()[0] == "800"

        view.follow_tail = False
        view.set_source(900, make_row)
        await pilot.pause()
        assert view.scroll_offset.y < view.max_scroll_y
        assert view.cursor == 799


async def test_shrinking_source_clamps_the_cursor() -> None:
    app = ViewApp()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        view = app.query_one(MessagesView)
        view.set_source(100, make_row)
        view.cursor = 90
        view.set_source(20, make_row, version=2)
        await pilot.pause()
        assert view.cursor == 19
        view.set_source(0, make_row, version=3)
        await pilot.pause()
        assert view.cursor == 0
        assert "no messages" in line(view, 1)


async def test_cursor_is_reversed_and_rows_out_of_context_are_dimmed() -> None:
    app = ViewApp()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        view = app.query_one(MessagesView)
        view.set_source(10, make_row)
        await pilot.pause()
        cursor_styles = {style(seg).reverse for seg in view.render_line(1) if seg.text.strip()}
        assert cursor_styles == {True}
        normal = style(next(seg for seg in view.render_line(2) if seg.text.strip()))
        dimmed = style(next(seg for seg in view.render_line(7) if seg.text.strip()))  # index 6
        assert not normal.reverse
        assert dimmed.color != normal.color


async def test_adversarial_tool_names_are_shown_verbatim() -> None:
    app = ViewApp()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        view = app.query_one(MessagesView)
        view.set_source(10, make_row)
        await pilot.pause()
        strip = view.render_line(4)  # index 3: a tool result
        text = "".join(segment.text for segment in strip)
        assert "[b]x[/b]␛[31m␇" in text
        assert "\x1b" not in text
        assert all(segment.style is None or segment.style.link is None for segment in strip)


class ThemedApp(ViewApp):
    def get_theme_variable_defaults(self) -> dict[str, str]:
        return {"marker-prune": "#ff00ff"}


async def test_flags_take_marker_colours_from_the_theme() -> None:
    app = ThemedApp()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        view = app.query_one(MessagesView)
        view.set_source(10, make_row)
        await pilot.pause()
        pruned = next(seg for seg in view.render_line(6) if "pruned" in seg.text)  # index 5
        assert pruned.style is not None and pruned.style.color is not None
        assert Color.from_rich_color(pruned.style.color) == Color.parse("#ff00ff")


async def test_without_marker_variables_colours_fall_back() -> None:
    app = ViewApp()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        view = app.query_one(MessagesView)
        assert "marker-prune" not in app.theme_variables
        style = view.theme_style("marker-prune", "warning")
        assert style.color is not None
        assert Color.from_rich_color(style.color) == Color.parse(app.theme_variables["warning"])
        assert view.theme_style("no-such-variable").color is None
        await pilot.pause()


async def test_moving_the_cursor_redraws_its_two_rows_only() -> None:
    app = ViewApp()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        view = app.query_one(MessagesView)
        view.set_source(100, make_row)
        view.focus()
        await pilot.pause()
        before = [view.render_line(y) for y in range(1, 8)]
        await pilot.press("down", "down")
        await pilot.pause()
        after = [view.render_line(y) for y in range(1, 8)]
        redrawn = [
            y for y, (old, new) in enumerate(zip(before, after, strict=True), 1) if old is not new
        ]
        assert redrawn == [1, 3]  # the row the cursor left and the one it is on
        assert after[2].text == before[2].text
        assert style(next(iter(after[2]))).reverse and not style(next(iter(before[2]))).reverse
        # a theme with other colours draws the rows again
        flagged = view.render_line(1)
        app.theme = "textual-light"
        await pilot.pause()
        assert view.render_line(1) is not flagged and view.render_line(1).text == flagged.text
        # a new version of the rows draws them again
        view.set_source(100, lambda i: make_row(i + 1), version=1)
        await pilot.pause()
        assert view.render_line(2).text.split()[0] == "3"
