"""CountersPanel: every counter written with its number, the projection, the limit, the status."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult

from ctx_inspect.core.counters import Counters
from ctx_inspect.core.model import GuardStatus
from ctx_inspect.core.window import LimitParts, Zone
from ctx_inspect.ui.widgets.counters_panel import CountersPanel

WIDTH = 100
PARTS = LimitParts(window=200_000, buffer=8_192, max_output=50_000)


def final_counters(extra: int = 0) -> Counters:
    return Counters(
        27, 120_000, 1_350, 30_000, 4_096, extra, 151_350 + extra, 141_808, PARTS,
        GuardStatus.FINAL, Zone.OVERFLOW, True,
    )  # fmt: skip


def derived_counters() -> Counters:
    return Counters(
        5, 40_000, 0, 10_000, 2_000, 0, 50_000, 141_808, PARTS, GuardStatus.OK, Zone.SAFE, False
    )


class CountersApp(App[None]):
    def compose(self) -> ComposeResult:
        yield CountersPanel()


def lines(panel: CountersPanel) -> list[str]:
    rendered = panel.render()
    assert isinstance(rendered, Text)
    return rendered.plain.split("\n")


async def test_no_counters_says_no_requests_yet() -> None:
    app = CountersApp()
    async with app.run_test(size=(WIDTH, 10)) as pilot:
        panel = app.query_one(CountersPanel)
        panel.update_counters(None)
        await pilot.pause()
        assert lines(panel) == ["no requests yet"]
        assert panel.size.height == 1


async def test_recorded_final_counters_written_out() -> None:
    app = CountersApp()
    async with app.run_test(size=(WIDTH, 10)) as pilot:
        panel = app.query_one(CountersPanel)
        panel.update_counters(final_counters())
        await pilot.pause()
        title, legend, bar, projection, composition = lines(panel)
        assert title.startswith(" FINAL ")
        assert "step 27" in title and "logged by the agent" in title and "overflow" in title
        for part in ("current 120,000", "pending 1,350", "new 30,000"):
            assert part in legend
        assert "schema 4,096 (not in projection)" in legend
        assert "extra" not in legend
        assert projection == "projected 151,350 / limit 141,808 (+9,542 over)"
        assert composition.startswith("limit = window 200,000 − buffer 8,192 − max output 50,000")
        assert panel.size.height == 5
        # the stacked bar: one glyph per segment, scaled to the projection, the limit ticked
        assert len(bar) == WIDTH
        assert bar.count("█") == round(120_000 / 151_350 * WIDTH)
        assert "▓" in bar and "▒" in bar and "─" not in bar
        assert bar.index("┃") == 141_808 * WIDTH // 151_350


async def test_extra_is_shown_when_not_zero() -> None:
    app = CountersApp()
    async with app.run_test(size=(WIDTH, 10)) as pilot:
        panel = app.query_one(CountersPanel)
        panel.update_counters(final_counters(extra=5_000))
        await pilot.pause()
        _, legend, bar, projection, _ = lines(panel)
        assert "extra 5,000" in legend and "░" in bar
        assert "(+14,542 over)" in projection


async def test_derived_ok_counters() -> None:
    app = CountersApp()
    async with app.run_test(size=(WIDTH, 10)) as pilot:
        panel = app.query_one(CountersPanel)
        panel.update_counters(derived_counters())
        await pilot.pause()
        title, legend, bar, projection, composition = lines(panel)
        assert title.startswith(" OK ") and "derived from the session" in title
        assert "pending 0" in legend
        assert projection == "projected 50,000 / limit 141,808 (91,808 left)"
        assert "┃" not in bar and bar.endswith("─")
        assert bar.count("█") == round(40_000 / 141_808 * WIDTH)
        assert composition.endswith("= 141,808")


async def test_skip_status_and_a_limit_that_differs_from_the_parts() -> None:
    app = CountersApp()
    async with app.run_test(size=(WIDTH, 10)) as pilot:
        panel = app.query_one(CountersPanel)
        counters = Counters(
            3, 1_000, 0, 500, 0, 0, 1_500, 100_000, PARTS, GuardStatus.SKIP, Zone.SAFE, True
        )
        panel.update_counters(counters)
        await pilot.pause()
        title, *_, composition = lines(panel)
        assert title.startswith(" SKIP ")
        assert "(the agent's limit: 100,000)" in composition
