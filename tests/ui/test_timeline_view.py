"""TimelineView: cursor keys and clicks post CursorMoved, programmatic moves do not; the chart,
thresholds, markers and readout are rendered from the visible columns only."""

from __future__ import annotations

import pytest
from textual import events
from textual.app import App, ComposeResult
from textual.color import Color
from textual.geometry import Size
from textual.theme import Theme

from ctx_inspect.core.window import Zone
from ctx_inspect.ui.widgets.timeline_points import TimelinePoint, TimelinePoints
from ctx_inspect.ui.widgets.timeline_view import CACHE_LINES, TimelineView

WINDOW, WARNING, THRESHOLD = 100_000, 50_000, 75_000


def point(step: int, tokens: int, *markers: str, peak: int | None = None) -> TimelinePoint:
    zone = Zone.SAFE if tokens < WARNING else Zone.WARNING if tokens < THRESHOLD else Zone.OVERFLOW
    return TimelinePoint(step, tokens, peak or tokens, zone, frozenset(markers))


def ramp(count: int) -> list[TimelinePoint]:
    """Steps 1..count climbing to the window; a marker every tenth step, F at the end."""
    points = []
    for step in range(1, count + 1):
        markers = {10: ("compaction",), 20: ("prune", "dropped"), 30: ("reset",)}.get(step % 40, ())
        if step == count:
            markers = (*markers, "final_turn")
        points.append(point(step, step * WINDOW // count, *markers, peak=step * WINDOW // count))
    return points


class TimelineApp(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.moves: list[int] = []

    def compose(self) -> ComposeResult:
        yield TimelineView()

    def on_timeline_view_cursor_moved(self, message: TimelineView.CursorMoved) -> None:
        self.moves.append(message.step)


def text(view: TimelineView, y: int) -> str:
    return view.render_line(y).text


async def test_empty_view() -> None:
    app = TimelineApp()
    async with app.run_test(size=(80, 12)) as pilot:
        view = app.query_one(TimelineView)
        await pilot.pause()
        assert view.cursor is None
        assert text(view, 0).startswith("no steps yet")
        view.cursor = 5
        assert view.cursor is None
        assert view.next_marker("compaction", 1) is None


async def test_keys_move_the_cursor_and_post() -> None:
    app = TimelineApp()
    async with app.run_test(size=(80, 12)) as pilot:
        view = app.query_one(TimelineView)
        view.set_points(ramp(200), window=WINDOW, warning=WARNING, threshold=THRESHOLD)
        view.focus()
        await pilot.pause()
        assert view.cursor == 200 and app.moves == []
        await pilot.press("home")
        await pilot.press("right", "right", "shift+right", "left", "shift+left")
        await pilot.press("left")  # already at the first step: no move, no message
        await pilot.press("end")
        await pilot.pause()
        assert app.moves == [1, 2, 3, 13, 12, 2, 1, 200]
        assert view.cursor == 200


async def test_programmatic_cursor_does_not_post_and_snaps_to_a_step() -> None:
    app = TimelineApp()
    async with app.run_test(size=(80, 12)) as pilot:
        view = app.query_one(TimelineView)
        view.set_points(
            [point(2, 10), point(4, 20), point(8, 30)],
            window=WINDOW,
            warning=WARNING,
            threshold=THRESHOLD,
        )
        view.cursor = 4
        await pilot.pause()
        assert view.cursor == 4
        view.cursor = 5  # not a step: the next one
        assert view.cursor == 8
        view.cursor = 99
        assert view.cursor == 8
        view.cursor = None
        assert view.cursor == 8
        await pilot.pause()
        assert app.moves == []


async def test_click_selects_a_column() -> None:
    app = TimelineApp()
    async with app.run_test(size=(80, 12)) as pilot:
        view = app.query_one(TimelineView)
        view.set_points(ramp(20), window=WINDOW, warning=WARNING, threshold=THRESHOLD)
        await pilot.pause()
        assert view.virtual_size.width == 60  # 20 steps widened to 3 cells each
        await pilot.click(TimelineView, offset=(10, 5))  # column 10 // 3 -> the 4th step
        await pilot.pause()
        assert view.cursor == 4 and app.moves == [4]


async def test_set_points_keeps_the_cursor_on_its_step() -> None:
    app = TimelineApp()
    async with app.run_test(size=(80, 12)) as pilot:
        view = app.query_one(TimelineView)
        view.set_points(ramp(50), window=WINDOW, warning=WARNING, threshold=THRESHOLD)
        view.cursor = 17
        view.set_points(ramp(60), window=WINDOW, warning=WARNING, threshold=THRESHOLD)
        assert view.cursor == 17
        view.set_points(ramp(10), window=WINDOW, warning=WARNING, threshold=THRESHOLD)
        assert view.cursor == 10
        view.set_points([], window=WINDOW, warning=WARNING, threshold=THRESHOLD)
        assert view.cursor is None
        await pilot.pause()
        assert app.moves == []


async def test_append_points_extends_and_keeps_the_cursor() -> None:
    app = TimelineApp()
    async with app.run_test(size=(80, 12)) as pilot:
        view = app.query_one(TimelineView)
        view.append_points([point(1, 100)])
        assert view.cursor == 1  # the first point selects itself
        view.append_points([point(step, 100 * step) for step in range(2, 201)])
        await pilot.pause()
        assert view.cursor == 1 and len(view.points) == 200
        assert view.virtual_size == Size(200, 11)  # one row left for the scrollbar
        view.cursor = 200
        await pilot.pause()
        assert view.scroll_x == view.max_scroll_x == 120
        assert text(view, 0).startswith("step 200 · 20,000 tokens (peak 20,000) · safe")
        assert app.moves == []


async def test_next_marker() -> None:
    app = TimelineApp()
    async with app.run_test(size=(80, 12)):
        view = app.query_one(TimelineView)
        view.set_points(ramp(100), window=WINDOW, warning=WARNING, threshold=THRESHOLD)
        view.cursor = 15
        assert view.next_marker("compaction", 1) == 50
        assert view.next_marker("compaction", -1) == 10
        assert view.next_marker("prune", 1) == 20
        assert view.next_marker("final_turn", 1) == 100
        assert view.next_marker("final_turn", -1) is None
        view.cursor = 50
        assert view.next_marker("compaction", 1) == 90  # not the step it is on
        assert view.next_marker("compaction", -1) == 10
        try:
            view.next_marker("nonsense", 1)
        except ValueError as error:
            assert "nonsense" in str(error)
        else:
            raise AssertionError("an unknown marker name is an error")


async def test_chart_thresholds_markers_and_readout() -> None:
    app = TimelineApp()
    async with app.run_test(size=(60, 12)) as pilot:
        view = app.query_one(TimelineView)
        points = [point(1, 0), point(2, 25_000, "compaction"), point(3, 60_000, "prune")]
        points += [point(4, 100_000, "final_turn", "dropped"), point(5, 0, "reset")]
        view.set_points(points, window=WINDOW, warning=WARNING, threshold=THRESHOLD)
        view.cursor = 4
        await pilot.pause()
        height = view.scrollable_content_region.height
        assert height == 12 and view.virtual_size == Size(15, 12)
        rows = [text(view, y) for y in range(height)]
        assert rows[0].startswith("step 4 · 100,000 tokens (peak 100,000) · overflow · F D")
        chart = rows[1:-1]  # 10 rows of 8 eighths: 1,250 tokens per eighth
        assert [row[9:12] for row in chart] == ["███"] * 10  # step 4 fills the chart
        assert [row[3:6] for row in chart][-4:] == ["   ", "▄▄▄", "███", "███"]  # 2.5 rows
        assert chart[4][:3] == "┄┄┄" and chart[4][12:15] == "┄┄┄"  # warning line (row 6 of 10)
        assert chart[2][:3] == "┄┄┄"  # the overflow line, behind no bar
        assert chart[2][6:9] == "┄┄┄" and chart[4][6:9] == "███"  # a bar hides the line
        assert rows[-1][:15] == "   C  P  FD R  "
        # the cursor column is reversed on every chart and marker row
        for y in range(1, height):
            segments = list(view.render_line(y))
            covered = 0
            for segment in segments:
                if covered <= 9 < covered + segment.cell_length:
                    assert segment.style is not None and segment.style.reverse
                covered += segment.cell_length


async def test_cursor_scrolls_into_view() -> None:
    app = TimelineApp()
    async with app.run_test(size=(50, 10)) as pilot:
        view = app.query_one(TimelineView)
        view.set_points(ramp(500), window=WINDOW, warning=WARNING, threshold=THRESHOLD)
        view.focus()
        await pilot.pause()
        assert view.scroll_x == 450  # the cursor is on the last step
        await pilot.press("home")
        await pilot.pause()
        assert view.scroll_x == 0
        for _ in range(6):
            await pilot.press("shift+right")
        await pilot.pause()
        assert view.cursor == 61 and view.scroll_x == 61 - 50


async def test_a_hundred_thousand_steps_render_a_frame() -> None:
    app = TimelineApp()
    async with app.run_test(size=(120, 20)) as pilot:
        view = app.query_one(TimelineView)
        points = [
            point(step, step * 7 % WINDOW, *(("compaction",) if step % 1000 == 0 else ()))
            for step in range(1, 100_001)
        ]
        view.set_points(points, window=WINDOW, warning=WARNING, threshold=THRESHOLD)
        view.focus()
        await pilot.pause()
        assert view.virtual_size.width == 100_000
        assert text(view, 0).startswith("step 100000 · 0 tokens (peak 0) · safe · C")
        assert text(view, view.scrollable_content_region.height - 1).rstrip().endswith("C")
        await pilot.press("home", "shift+right")
        await pilot.pause()
        assert view.cursor == 11 and app.moves == [1, 11]
        assert view.next_marker("compaction", 1) == 1000
        for _ in range(40):
            await pilot.press("right")
        await pilot.pause()
        assert len(view._lines) <= CACHE_LINES


async def test_the_wheel_scrolls_sideways_without_moving_the_cursor() -> None:
    app = TimelineApp()
    async with app.run_test(size=(50, 10)) as pilot:
        view = app.query_one(TimelineView)
        view.set_points(ramp(500), window=WINDOW, warning=WARNING, threshold=THRESHOLD)
        view.cursor = 1
        await pilot.pause()
        assert view.scroll_x == 0
        view.post_message(events.MouseScrollDown(view, 5, 5, 0, 1, 0, False, False, False))
        await pilot.pause()
        assert view.scroll_x > 0 and view.scroll_y == 0
        assert view.cursor == 1 and app.moves == []


async def test_appending_off_screen_keeps_the_cached_lines() -> None:
    app = TimelineApp()
    async with app.run_test(size=(50, 10)) as pilot:
        view = app.query_one(TimelineView)
        view.set_points(ramp(100), window=WINDOW, warning=WARNING, threshold=THRESHOLD)
        view.cursor = 10
        await pilot.pause()
        before = [view.render_line(y) for y in range(8)]
        view.append_points([point(step, 1_000) for step in range(101, 121)])  # same scale
        await pilot.pause()
        assert all(view.render_line(y) is strip for y, strip in enumerate(before))
        view.append_points([point(121, 2 * WINDOW)])  # a new maximum rescales every column
        await pilot.pause()
        assert view.render_line(4) is not before[4]


async def test_a_theme_change_recolours_the_chart() -> None:
    app = TimelineApp()
    async with app.run_test(size=(50, 10)) as pilot:
        view = app.query_one(TimelineView)
        view.set_points([point(1, WINDOW)], window=WINDOW, warning=WARNING, threshold=THRESHOLD)
        await pilot.pause()

        def bar_colour() -> object:
            segment = next(s for s in view.render_line(4) if "█" in s.text)
            return segment.style.color if segment.style else None

        assert bar_colour() == Color.parse(app.theme_variables["error"]).rich_color
        app.register_theme(
            Theme("zones", primary="#123456", variables={"zone-overflow": "#00ff00"})
        )
        app.theme = "zones"
        await pilot.pause()
        assert bar_colour() == Color.parse("#00ff00").rich_color


async def test_set_points_with_the_same_prefix_is_an_append() -> None:
    app = TimelineApp()
    async with app.run_test(size=(50, 10)) as pilot:
        view = app.query_one(TimelineView)
        view.set_points(ramp(100), window=WINDOW, warning=WARNING, threshold=THRESHOLD)
        view.cursor = 10
        await pilot.pause()
        before = [view.render_line(y) for y in range(8)]
        view.set_points(ramp(100), window=WINDOW, warning=WARNING, threshold=THRESHOLD)
        await pilot.pause()
        assert all(view.render_line(y) is strip for y, strip in enumerate(before))
        longer = [*ramp(100), point(101, 500)]
        view.set_points(longer, window=WINDOW, warning=WARNING, threshold=THRESHOLD)
        assert len(view.points) == 101 and view.cursor == 10
        view.set_points(longer, window=WINDOW, warning=WARNING + 1, threshold=THRESHOLD)
        await pilot.pause()
        assert view.warning == WARNING + 1 and view.render_line(1) is not before[1]


async def test_the_readout_follows_the_cursor_within_the_visible_columns() -> None:
    app = TimelineApp()
    async with app.run_test(size=(80, 12)) as pilot:
        view = app.query_one(TimelineView)
        view.set_points(ramp(20), window=WINDOW, warning=WARNING, threshold=THRESHOLD)
        view.cursor = 4
        await pilot.pause()
        assert text(view, 0).startswith("step 4 · 20,000 tokens")
        view.cursor = 5  # no scrolling: the cached readout must not be reused
        await pilot.pause()
        assert text(view, 0).startswith("step 5 · 25,000 tokens")


def test_timeline_points_are_a_sequence_of_points() -> None:
    points = TimelinePoints(ramp(50))
    assert list(points) == ramp(50) and len(points) == 50
    assert points[-1] == ramp(50)[-1] and points[10:12] == ramp(50)[10:12]
    assert points[9].markers == frozenset({"compaction"}) and points[8].markers == frozenset()
    assert points.position(17) == 16 and points.position(0) is None and points.position(51) is None
    with pytest.raises(IndexError):
        points[50]


def test_timeline_points_tell_a_reader_what_changed() -> None:
    points = TimelinePoints(ramp(50))
    revision, seen = points.revision, len(points)
    assert points.changed_since(revision, seen) == 50  # nothing changed
    points.append(point(51, 10))
    assert points.changed_since(revision, seen) == 50  # appended after what was read
    points.truncate(40)
    for step in range(41, 60):
        points.append(point(step, 5))
    assert points.changed_since(revision, seen) == 40
    assert points.changed_since(revision, 30) == 30  # it had read less than that
    later = points.revision
    points.truncate(55)
    assert points.changed_since(later, len(points) + 4) == 55
    for _ in range(TimelinePoints.HISTORY + 1):  # too many changes to remember
        points.truncate(len(points) - 1)
        points.append(point(100, 1))
    assert points.changed_since(revision, seen) == 0
    copy = TimelinePoints()
    copy.copy_from(points)
    assert list(copy) == list(points)
    copy.copy_from(TimelinePoints(ramp(30)), 20)
    assert list(copy) == [*list(points)[:20], *ramp(30)[20:]]


async def test_set_points_reads_only_what_changed_in_timeline_points() -> None:
    app = TimelineApp()
    async with app.run_test(size=(50, 10)) as pilot:
        view = app.query_one(TimelineView)
        source = TimelinePoints(ramp(100))
        view.set_points(source, window=WINDOW, warning=WARNING, threshold=THRESHOLD)
        view.cursor = 10
        await pilot.pause()
        before = [view.render_line(y) for y in range(8)]
        source.truncate(99)  # the last step changed, off screen
        source.append(point(100, 2_000, "prune"))
        source.append(point(101, 3_000))
        view.set_points(source, window=WINDOW, warning=WARNING, threshold=THRESHOLD)
        await pilot.pause()
        assert list(view.points) == list(source) and view.cursor == 10
        assert view.next_marker("prune", 1) == 20 and view.next_marker("prune", -1) is None
        assert all(view.render_line(y) is strip for y, strip in enumerate(before))
        view.cursor = 100
        assert view.next_marker("prune", -1) == 60 and view.next_marker("prune", 1) is None
        source.truncate(5)  # a change in the columns on screen redraws them
        source.extend([point(step, 90_000) for step in range(6, 9)])
        view.set_points(source, window=WINDOW, warning=WARNING, threshold=THRESHOLD)
        view.cursor = 6
        await pilot.pause()
        assert list(view.points) == list(source) and len(view.points) == 8
        assert text(view, 0).startswith("step 6 · 90,000 tokens (peak 90,000) · overflow")
        assert view.virtual_size.width == 8 * 3
