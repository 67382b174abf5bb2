"""Explain: the event at or before the cursor, its counters and limit, the avoiding settings."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Static

from ctx_inspect.ui.screens.explain_screen import ExplainScreen
from ctx_inspect.ui.screens.tune_screen import TuneScreen
from ctx_inspect.ui.widgets.counters_panel import CountersPanel
from tests.ui.test_diff_screen import DATA, SIZE, loaded, make_chat, open_app, wait_for


async def explained(pilot: Pilot[None]) -> ExplainScreen:
    app = pilot.app
    await pilot.press("x")
    await wait_for(pilot, lambda: isinstance(app.screen, ExplainScreen))
    screen = app.screen
    assert isinstance(screen, ExplainScreen)
    await wait_for(pilot, lambda: screen.complete)
    await pilot.pause()
    return screen


async def test_explain_names_the_tool_the_counters_and_an_avoiding_setting() -> None:
    app = open_app(DATA / "aiagent" / "log.log")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        screen = await explained(pilot)
        events = [e.event for e in screen.entries]
        assert events == ["dropped_tool_output", "final_turn"]
        title = str(screen.query_one("#explain-title", Static).render())
        assert "dropped tool output" in title and "fs__read" in title
        counters = screen.query_one(CountersPanel).counters
        assert counters is not None and counters.step == 2 and counters.over_by > 0
        limit = str(screen.query_one("#explain-limit", Static).render())
        assert "over by 9,542 tokens" in limit and "first over the limit at step 2" in limit
        avoid = screen.query_one("#explain-avoid", DataTable)
        settings = [str(avoid.get_row_at(i)[0]) for i in range(avoid.row_count)]
        assert "max_output_tokens" in settings
        assert "not avoidable by changing: buffer_tokens" in str(
            screen.query_one("#explain-unavoidable", Static).render()
        )

        await pilot.press("n")  # the other event of the same step
        title = str(screen.query_one("#explain-title", Static).render())
        assert "forced final turn" in title and "2 of 2" in title

        # enter on an avoiding setting: tune with it, pre-filled
        avoid.focus()
        avoid.move_cursor(row=settings.index("max_output_tokens"))
        value = screen.entries[screen.index].avoid[avoid.cursor_row]["value"]
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TuneScreen))
        tune = app.screen
        assert isinstance(tune, TuneScreen)
        assert tune.query_one("#set-max_output_tokens", Input).value == str(value)
        assert tune.changes == {"max_output_tokens": value}


async def test_nothing_at_or_before_the_cursor_names_the_next_event() -> None:
    app = open_app(DATA / "baseagent" / "typical.log")
    async with app.run_test(size=SIZE) as pilot:
        state = await loaded(pilot)
        state.move(1)
        screen = await explained(pilot)
        assert screen.entries == []
        title = str(screen.query_one("#explain-title", Static).render())
        assert "Nothing to explain at or before step 1" in title
        assert "next one is at step 2" in title
        assert not screen.query_one("#explain-details").display

        # the last step: the last iteration's prune, then its compaction (at the summarisation
        # call, step 7), are nearest
        state.move(None)
        app.changed()
        await pilot.pause()
        assert [(e.step, e.event) for e in screen.entries] == [(7, "prune"), (7, "compaction")]
        title = str(screen.query_one("#explain-title", Static).render())
        assert "step 7: prune" in title and "1 of 2 at this step" in title
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, ExplainScreen)


async def test_a_session_without_events(tmp_path: Path) -> None:
    app = open_app(make_chat(tmp_path / "chat.jsonl", rounds=2, size=600))
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        screen = await explained(pilot)
        assert screen.explanations == [] and screen.entries == []
        assert "Nothing to explain" in str(screen.query_one("#explain-title", Static).render())
