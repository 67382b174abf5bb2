"""Tune: settings validated as typed, a re-run compared with the original, a sweep table."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Static, TextArea

from ctx_inspect.core.profiles import make_profile
from ctx_inspect.ui.screens.sweep_form import SweepForm
from ctx_inspect.ui.screens.tune_screen import TuneScreen
from ctx_inspect.ui.settings_form import Setting, as_sets, field_text, parse_value, settings_of
from ctx_inspect.ui.widgets.curve_compare import CurveCompare, CurvePoint
from tests.ui.test_diff_screen import SIZE, loaded, make_chat, open_app, wait_for


def test_a_text_setting_shows_its_controls_and_reads_them_back() -> None:
    value = "enc\x1b]0;t\x07\u202e"
    shown = field_text(value)
    assert shown == "enc␛]0;t␇⟨U+202E⟩"
    assert parse_value(Setting("encoding", str, True), shown) == value
    assert field_text(12_000) == "12000" and field_text(None) == ""


async def tuned(pilot: Pilot[None]) -> TuneScreen:
    app = pilot.app
    await pilot.press("U")
    await wait_for(pilot, lambda: isinstance(app.screen, TuneScreen))
    screen = app.screen
    assert isinstance(screen, TuneScreen)
    await wait_for(pilot, lambda: screen.result is not None)  # the first replay, unchanged
    return screen


async def type_into(pilot: Pilot[None], screen: TuneScreen, name: str, value: str) -> None:
    field = screen.query_one(f"#set-{name}", Input)
    field.focus()
    field.value = value
    await pilot.pause()


def test_settings_form_data() -> None:
    profile = make_profile("generic", {})
    names = [s.name for s in settings_of(profile)]
    assert "compact_ratio" in names and "context_window" in names
    assert "warning_ratio" not in names  # generic places its warning with another setting
    assert "name" not in names and "agent" not in names
    assert parse_value(Setting("x", int, False), "200_000") == 200_000
    assert parse_value(Setting("x", int, True), " ") is None
    assert parse_value(Setting("x", bool, False), "yes") is True
    for setting, raw in ((Setting("x", int, False), "1.5"), (Setting("x", float, False), "nan")):
        try:
            parse_value(setting, raw)
        except ValueError:
            continue
        raise AssertionError(f"{raw!r} accepted")
    sets = as_sets(make_profile("opencode", {"context_window": 1000, "auto": False}))
    assert sets == ("auto=false", "context_window=1000")


async def test_invalid_value_shows_the_error_and_blocks_the_rerun(tmp_path: Path) -> None:
    app = open_app(make_chat(tmp_path / "chat.jsonl"))
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        screen = await tuned(pilot)
        first = screen.result
        await type_into(pilot, screen, "compact_ratio", "1.5")
        assert screen.tuned is None
        error = screen.query_one("#err-compact_ratio", Static)
        assert error.has_class("shown")
        assert "less than or equal to 1" in str(error.render())
        await type_into(pilot, screen, "context_window", "lots")
        assert "expected an integer" in str(screen.query_one("#err-context_window").render())
        screen.action_rerun()
        await pilot.pause(0.2)
        assert screen.result is first  # nothing was replayed
        assert any("fix the invalid settings" in n.message for n in app._notifications)
        # fixing the fields clears the errors
        await type_into(pilot, screen, "context_window", "128000")
        await type_into(pilot, screen, "compact_ratio", "0.9")
        assert screen.tuned is not None and screen.errors == {}
        assert not screen.query_one("#err-compact_ratio").has_class("shown")


async def test_valid_change_reruns_and_compares(tmp_path: Path) -> None:
    app = open_app(make_chat(tmp_path / "chat.jsonl"))
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        screen = await tuned(pilot)
        assert screen.original is not None and screen.result is screen.original
        await type_into(pilot, screen, "compact_ratio", "0.5")
        assert screen.changes == {"compact_ratio": 0.5}
        first = screen.result
        await pilot.press("enter")  # enter in a field re-runs
        await wait_for(pilot, lambda: screen.result is not first)
        original, result = screen.original, screen.result
        assert original is not None and result is not None
        assert len(result.decisions) != len(original.decisions)
        curves = screen.query_one(CurveCompare)
        assert [p.step for p in curves.original] == [s.step for s in original.steps]
        assert any(p.markers for p in curves.tuned)
        readout = str(screen.query_one("#tune-readout", Static).render())
        assert "tuned (compact_ratio=0.5)" in readout and "differ at" in readout


async def test_sweep_of_three_combinations_fills_a_sortable_table(tmp_path: Path) -> None:
    app = open_app(make_chat(tmp_path / "chat.jsonl"))
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        screen = await tuned(pilot)
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, SweepForm))
        form = app.screen
        form.query_one(TextArea).text = "bogus_setting=1,2"
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert isinstance(app.screen, SweepForm)
        assert "bogus_setting" in str(form.query_one("#sweep-error", Static).render())
        form.query_one(TextArea).text = "compact_ratio=0.5,0.7,0.9"
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: app.screen is screen)
        await wait_for(pilot, lambda: len(screen.sweep_rows) == 3, timeout=120)
        await pilot.pause()
        table = screen.query_one("#sweep-table", DataTable)
        assert table.row_count == 3
        assert [r.settings["compact_ratio"] for r in screen.sweep_rows] == [0.5, 0.7, 0.9]
        assert "rows 3 / 3" in str(screen.query_one("#sweep-count", Static).render())

        table.focus()
        await pilot.press("o")  # sort by the first column, then by the next
        assert screen.sort_column == "setting:compact_ratio"
        await pilot.press("o")
        assert screen.sort_column == "compactions"
        prunes = [str(table.get_row_at(i)[2]) for i in range(3)]
        key = next(k for k in table.columns if k.value == "prunes")
        index = list(table.columns).index(key)
        for _ in range(2):  # a header click sorts by it, a second click reverses
            screen.on_data_table_header_selected(
                DataTable.HeaderSelected(table, key, index, Text("prunes"))
            )
        assert screen.sort_column == "prunes" and screen.sort_reverse
        values = [int(str(table.get_row_at(i)[2]).replace(",", "")) for i in range(3)]
        assert values == sorted(values, reverse=True)
        assert sorted(prunes) == sorted(str(v) for v in values)


class CurveApp(App[None]):
    def compose(self) -> ComposeResult:
        yield CurveCompare()


async def test_curve_compare_groups_steps_to_fit_and_keeps_markers() -> None:
    original = [
        CurvePoint(s, s * 10, frozenset({"prune"} if s == 500 else ())) for s in range(1, 1001)
    ]
    tuned = [
        CurvePoint(s, s * 5, frozenset({"compaction"} if s == 999 else ())) for s in range(1, 1001)
    ]
    app = CurveApp()
    async with app.run_test(size=(80, 12)) as pilot:
        curves = app.query_one(CurveCompare)
        assert "no replay yet" in str(curves.render())
        curves.set_curves(original, tuned, threshold=6000)
        await pilot.pause()
        columns, cell = curves.columns(80 - 9)
        assert len(columns) == 71 and cell == 1
        assert columns[-1].original == 10_000 and columns[-1].tuned == 5000
        assert any("prune" in c.original_markers for c in columns)
        assert "compaction" in columns[-1].tuned_markers
        lines = str(curves.render()).split("\n")
        assert len(lines) == 12
        assert lines[-2].startswith("original") and "P" in lines[-2]
        assert lines[-1].startswith("tuned") and lines[-1].rstrip().endswith("C")
        assert "step 1" in lines[-3] and "step 1000" in lines[-3]
        assert "threshold 6,000" in lines[0]
