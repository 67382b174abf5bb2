"""EventsView: filtering by text or exact topic, in slices that never block the UI."""

from __future__ import annotations

import asyncio

from textual import events, on
from textual.app import App, ComposeResult

from ctx_inspect.ui.widgets.events_view import EventRow, EventsFilter, EventsView, event_matcher

WIDTH, HEIGHT = 100, 30
KINDS = ("debug", "log", "guard", "compaction", "prune", "tool_output", "final_turn", "usage")


def make_event(position: int) -> EventRow:
    """Event indices are ten times the positions: the view must report the former."""
    kind = KINDS[position % len(KINDS)]
    topic = {"debug": "context-guard/evaluate", "log": "Context-Guard"}.get(kind, kind)
    if position % 16 == 8:
        topic = "context-guard/evaluate/extra"
    return EventRow(position * 10, position // 10, kind, topic, f"event {position}")


class CountingSource:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, position: int) -> EventRow:
        self.calls += 1
        return make_event(position)


class EventsApp(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.highlighted: list[int] = []
        self.selected: list[int] = []
        self.filtered: list[tuple[str, int, int]] = []

    def compose(self) -> ComposeResult:
        yield EventsFilter()
        yield EventsView()

    def on_events_view_row_highlighted(self, message: EventsView.RowHighlighted) -> None:
        self.highlighted.append(message.index)

    def on_events_view_row_selected(self, message: EventsView.RowSelected) -> None:
        self.selected.append(message.index)

    def on_events_view_filtered(self, message: EventsView.Filtered) -> None:
        self.filtered.append((message.text, message.matches, message.total))

    @on(EventsFilter.FilterChanged)
    def _filter(self, message: EventsFilter.FilterChanged) -> None:
        self.query_one(EventsView).set_filter(message.text)


def line(view: EventsView, y: int) -> str:
    return "".join(segment.text for segment in view.render_line(y))


async def wait_filtered(view: EventsView) -> None:
    for _ in range(2_000):
        if not view.filtering:
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the filter never finished")


def test_matcher_rules() -> None:
    row = EventRow(0, 1, "debug", "context-guard/evaluate", "")
    assert event_matcher("") is None and event_matcher("   ") is None
    for text in ("GUARD", "debug", "topic:context-guard/evaluate", "TOPIC: Context-Guard/Evaluate"):
        matcher = event_matcher(text)
        assert matcher is not None and matcher(row), text
    for text in ("topic:context-guard", "compaction", "topic:debug"):
        matcher = event_matcher(text)
        assert matcher is not None and not matcher(row), text


async def test_columns_and_navigation_report_event_indices() -> None:
    app = EventsApp()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        view = app.query_one(EventsView)
        view.set_source(100, make_event)
        view.focus()
        await pilot.pause()
        header = line(view, 0)
        for title in ("#", "step", "kind", "topic", "summary", "100 events"):
            assert title in header
        assert line(view, 2).split() == ["11", "0", "log", "Context-Guard", "event", "1"]
        await pilot.press("down", "down", "enter", "end")
        assert app.highlighted == [10, 20, 990]
        assert app.selected == [20]
        assert view.cursor == 99 and view.cursor_index == 990


async def test_filter_by_text_and_by_exact_topic() -> None:
    app = EventsApp()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        view = app.query_one(EventsView)
        view.set_source(160, make_event)
        await pilot.pause()

        view.set_filter("context-guard")  # topic contains, any case: debug, log, extra
        await wait_filtered(view)
        assert view.row_count == 40  # 20 debug (10 of them /extra) and 20 log
        assert all("context-guard" in view.row(i).topic.lower() for i in range(view.row_count))

        view.set_filter("topic:context-guard/evaluate")  # equality: not the /extra ones
        await wait_filtered(view)
        topics = {view.row(i).topic for i in range(view.row_count)}
        assert topics == {"context-guard/evaluate"}
        assert view.row_count == 10
        assert "10 of 160 events" in line(view, 0)

        view.set_filter("COMPACTION")  # kind contains
        await wait_filtered(view)
        assert view.row_count == 20
        assert {view.row(i).kind for i in range(view.row_count)} == {"compaction"}

        view.set_filter("no such thing")
        await wait_filtered(view)
        assert view.row_count == 0
        assert "no events" in line(view, 1)

        view.set_filter("")
        assert view.row_count == 160 and not view.filtering
        await pilot.pause()
        assert app.filtered == [
            ("context-guard", 40, 160),
            ("topic:context-guard/evaluate", 10, 160),
            ("COMPACTION", 20, 160),
            ("no such thing", 0, 160),
        ]


async def test_the_cursor_stays_on_its_event_across_filters() -> None:
    app = EventsApp()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        view = app.query_one(EventsView)
        view.set_source(160, make_event)
        await pilot.pause()
        view.cursor = 19  # position 19: a compaction
        view.set_filter("compaction")
        await wait_filtered(view)
        assert view.cursor_index == 190
        view.set_filter("")
        assert view.cursor == 19


async def test_the_filter_input_drives_the_view() -> None:
    app = EventsApp()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        view = app.query_one(EventsView)
        view.set_source(160, make_event)
        app.query_one(EventsFilter).focus()
        await pilot.press(*"topic:prune")
        await wait_filtered(view)
        assert view.filter_text == "topic:prune"
        assert view.row_count == 20


async def test_appended_events_are_filtered_too() -> None:
    app = EventsApp()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        view = app.query_one(EventsView)
        view.set_source(80, make_event)
        view.set_filter("topic:prune")
        await wait_filtered(view)
        assert view.row_count == 10
        view.set_source(160, make_event)
        await wait_filtered(view)
        assert view.row_count == 20
        assert [view.row(i).index for i in range(20)] == [(8 * k + 4) * 10 for k in range(20)]
        await pilot.pause()


async def test_filtering_a_million_events_shows_progress_and_does_not_block() -> None:
    app = EventsApp()
    source = CountingSource()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        view = app.query_one(EventsView)
        view.set_source(1_000_000, source)
        view.focus()
        await pilot.pause()
        source.calls = 0
        view.set_filter("compaction")
        assert source.calls < 200_000  # set_filter returned after one short slice
        progress = view.filter_progress
        assert progress is not None and 0 < progress < 1
        assert view.filtering

        # The UI keeps answering while the scan goes on: a key moves the cursor.
        app.post_message(events.Key("end", None))
        for _ in range(200):
            await asyncio.sleep(0.005)
            if app.highlighted:
                break
        assert view.filtering, "the key waited for the whole scan"
        assert app.highlighted and view.cursor > 0
        later = view.filter_progress
        assert later is not None and progress < later < 1
        assert "filtering… " in line(view, 0) and "% (" in line(view, 0)

        view.set_filter("")  # stops the scan
        assert not view.filtering and view.filter_progress is None
        calls = source.calls
        await asyncio.sleep(0.05)
        assert source.calls - calls < 1_000


def test_the_placeholders_topic_filter_finds_the_agents_topics() -> None:
    """`topic:context-guard/evaluate`, as the filter's placeholder suggests, keeps exactly the
    blocks ai-agent printed under that topic."""
    from pathlib import Path

    from ctx_inspect.app.config import build_profile
    from ctx_inspect.app.loader import load_session
    from ctx_inspect.formats import registry
    from ctx_inspect.ui.state import SessionState

    path = Path(__file__).parents[1] / "data" / "aiagent" / "debug.log"
    loaded = load_session(
        path, build_profile("aiagent"), format_spec=registry.detect(path), count_exact=False
    )
    state = SessionState(loaded)
    rows = [state.event_row(i) for i in range(len(state.event_indices()))]
    matcher = event_matcher("topic:context-guard/evaluate")
    assert matcher is not None
    printed = path.read_text().count("\ncontext-guard/evaluate {") + path.read_text().startswith(
        "context-guard/evaluate {"
    )
    assert printed > 0
    assert sum(1 for row in rows if matcher(row)) == printed
