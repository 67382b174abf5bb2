"""The dashboard as a user drives it: open saved files, follow a growing file, move the cursor,
switch views, sessions and themes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from ctx_inspect.app.config import build_profile
from ctx_inspect.app.demo import demo_batches
from ctx_inspect.core.window import Zone
from ctx_inspect.formats.native import write_events
from ctx_inspect.ui.app import InspectorApp, OpenRequest
from ctx_inspect.ui.widgets.counters_panel import CountersPanel
from ctx_inspect.ui.widgets.timeline_view import TimelineView
from ctx_inspect.ui.widgets.zone_gauge import ZoneGauge

DATA = Path(__file__).parents[1] / "data"


def request(*paths: Path, follow: bool = False, profile: str | None = None) -> OpenRequest:
    return OpenRequest(
        paths=tuple(paths),
        profile_for=lambda spec: build_profile(profile, default=spec.default_profile),
        follow=follow,
        format_name="native" if follow else None,
    )


async def wait_for(pilot, condition, timeout: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, "timed out waiting for the app"
        await pilot.pause(0.05)


def demo_file(tmp_path: Path, steps: int | None = None) -> Path:
    path = tmp_path / "run.jsonl"
    with path.open("w") as fh:
        write_events([], fh)
        for i, batch in enumerate(demo_batches()):
            if steps is not None and i >= steps:
                break
            write_events(batch, fh, header=False)
    return path


async def test_open_a_saved_file_shows_its_last_step(tmp_path: Path) -> None:
    path = demo_file(tmp_path)
    app = InspectorApp(request(path, profile="aiagent"))
    async with app.run_test(size=(140, 44)) as pilot:
        await wait_for(pilot, lambda: app.state is not None and not app.loading)
        state = app.state
        assert state is not None
        last = len(state.steps())
        assert state.step() == last
        gauge = app.screen.query_one(ZoneGauge)
        assert gauge.percent is not None
        expected = state.steps()[-1].tokens
        assert f"{expected:,}" in str(gauge.summary())
        timeline = app.screen.query_one(TimelineView)
        assert timeline.cursor == last
        markers = {m for p in timeline.points for m in p.markers}
        assert {"compaction", "prune", "dropped", "final_turn"} <= markers


async def test_cursor_moves_update_every_panel(tmp_path: Path) -> None:
    path = demo_file(tmp_path)
    app = InspectorApp(request(path, profile="aiagent"))
    async with app.run_test(size=(140, 44)) as pilot:
        await wait_for(pilot, lambda: app.state is not None and not app.loading)
        state = app.state
        assert state is not None
        await pilot.press("comma", "comma")
        await pilot.pause()
        step = state.step()
        assert step == len(state.steps()) - 2
        counters = app.screen.query_one(CountersPanel)
        assert counters.counters is not None and counters.counters.step == step
        # jump to the previous compaction, then the next final turn
        await pilot.press("less_than_sign")
        await pilot.pause()
        compaction_steps = [p.step for p in state.points() if "compaction" in p.markers]
        now = state.step()
        assert now is not None and now == compaction_steps[-1]
        gauge = app.screen.query_one(ZoneGauge)
        assert f"{state.steps()[now - 1].tokens:,}" in str(gauge.summary())
        await pilot.press("k")  # compaction -> final turn
        await pilot.press("greater_than_sign")
        await pilot.pause()
        finals = [p.step for p in state.points() if "final_turn" in p.markers]
        assert state.step() == finals[0]


async def test_follow_a_growing_file_stays_at_the_live_end(tmp_path: Path) -> None:
    path = demo_file(tmp_path, steps=3)
    app = InspectorApp(request(path, follow=True, profile="aiagent"))

    def requests() -> int:
        return len(app.state.session.steps) if app.state is not None else 0

    async with app.run_test(size=(140, 44)) as pilot:
        await wait_for(pilot, lambda: requests() == 3)
        batches = list(demo_batches())
        with path.open("a") as fh:
            for batch in batches[3:8]:
                write_events(batch, fh, header=False)
        state = app.state
        assert state is not None
        await wait_for(pilot, lambda: requests() == 8)
        last = len(state.steps())  # the requests, and the build-up of the next one
        await wait_for(pilot, lambda: app.screen.query_one(TimelineView).cursor == last)
        assert state.cursor is None  # still attached to the live end
        # moving back pauses; more data does not move the cursor
        await pilot.press("comma")
        await pilot.pause()
        assert state.step() == last - 1
        with path.open("a") as fh:
            write_events(batches[8], fh, header=False)
        await wait_for(pilot, lambda: requests() == 9)
        assert state.step() == last - 1
        await pilot.press("g")
        await pilot.pause()
        assert state.step() == len(state.steps()) and state.cursor is None


async def test_views_sessions_and_themes_switch(tmp_path: Path) -> None:
    first = demo_file(tmp_path)
    second = tmp_path / "chat.json"
    second.write_text(
        json.dumps([{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}])
    )
    app = InspectorApp(request(first, second))
    async with app.run_test(size=(140, 44)) as pilot:
        await wait_for(pilot, lambda: len(app.states) == 2 and not app.loading)
        assert app.active == 0
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert app.active == 1 and app.state is not None
        assert app.state.loaded.format.name == "openai-chat"
        await pilot.press("2")
        await pilot.pause()
        assert app.current_mode == "messages"
        await pilot.press("3")
        await pilot.pause()
        assert app.current_mode == "events"
        await pilot.press("1")
        await pilot.pause()
        before = app.theme
        await pilot.press("t")
        await pilot.pause()
        assert app.theme != before
        assert app.theme in {"ctx-dark", "ctx-light", "ctx-high-contrast"}


async def test_a_file_that_cannot_be_opened_is_shown_not_raised(tmp_path: Path) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("just some notes, no agent here\n")
    app = InspectorApp(request(bad))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.load_error is not None)
        assert app.load_error is not None and "unknown format" in app.load_error
        assert app.state is None


async def test_zone_gauge_follows_the_profile(tmp_path: Path) -> None:
    path = demo_file(tmp_path)
    app = InspectorApp(request(path, profile="aiagent"))
    async with app.run_test(size=(140, 44)) as pilot:
        await wait_for(pilot, lambda: app.state is not None and not app.loading)
        state = app.state
        assert state is not None
        profile = state.profile
        zones = {p.zone for p in state.points()}
        assert Zone.WARNING in zones
        for point in state.points():
            assert point.zone is profile.zone(point.peak)
