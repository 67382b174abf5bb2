"""ZoneGauge: numbers written as text; the bar proportional, clamped, with visible ticks."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult
from textual.color import Color

from ctx_inspect.core.window import Zone
from ctx_inspect.ui.widgets.zone_gauge import ZoneGauge, theme_color, zone_color

WIDTH = 100


class GaugeApp(App[None]):
    def compose(self) -> ComposeResult:
        yield ZoneGauge()


def lines(gauge: ZoneGauge) -> list[str]:
    rendered = gauge.render()
    assert isinstance(rendered, Text)
    return rendered.plain.split("\n")


async def test_text_line_names_zone_numbers_and_origin() -> None:
    app = GaugeApp()
    async with app.run_test(size=(WIDTH, 5)) as pilot:
        gauge = app.query_one(ZoneGauge)
        gauge.update_gauge(
            tokens=73_264,
            window=131_072,
            warning=72_090,
            threshold=90_112,
            zone=Zone.WARNING,
            origin="reported",
        )
        await pilot.pause()
        text = lines(gauge)[0]
        assert text.startswith(" WARNING ")
        for part in (
            "73,264 / 131,072 tokens",
            "55.9% of window",
            "warning 72,090",
            "overflow 90,112",
            "reported",
        ):
            assert part in text
        assert gauge.percent is not None and round(gauge.percent, 1) == 55.9
        assert gauge.size.height == 3


async def test_bar_is_proportional_with_ticks_at_the_thresholds() -> None:
    app = GaugeApp()
    async with app.run_test(size=(WIDTH, 5)) as pilot:
        gauge = app.query_one(ZoneGauge)
        gauge.update_gauge(
            tokens=50_000,
            window=100_000,
            warning=25_000,
            threshold=75_000,
            zone=Zone.SAFE,
            origin="exact",
        )
        await pilot.pause()
        _, bar, scale = lines(gauge)
        assert len(bar) == WIDTH
        assert bar[25] == "┃" and bar[75] == "┃"  # the warning tick sits over the fill
        assert bar.count("█") == 49 and bar.count("░") == 49
        assert scale.startswith("0") and scale.endswith("100,000")
        assert scale[25] == "w" and scale[75] == "o"
        # the tick over the fill is drawn on the zone colour, so it stays visible
        rendered = gauge.render()
        assert isinstance(rendered, Text)
        start = len(lines(gauge)[0]) + 1
        style = rendered.get_style_at_offset(app.console, start + 25)
        assert style.bgcolor == zone_color(gauge, Zone.SAFE)


async def test_effective_limit_gets_its_own_tick_when_different() -> None:
    app = GaugeApp()
    async with app.run_test(size=(WIDTH, 5)) as pilot:
        gauge = app.query_one(ZoneGauge)
        gauge.update_gauge(
            tokens=10_000,
            window=100_000,
            warning=50_000,
            threshold=80_000,
            zone=Zone.SAFE,
            origin="estimated",
            effective_limit=70_000,
        )
        await pilot.pause()
        text, bar, scale = lines(gauge)
        assert "limit 70,000" in gauge.summary().plain
        assert "limit" not in text  # too long for 100 cells: the tick and its letter remain
        assert text.endswith("10.0% of window · warning 50,000 · overflow 80,000 · estimated")
        assert bar[70] == "╎" and scale[70] == "l"
        gauge.update_gauge(
            tokens=10_000,
            window=100_000,
            warning=50_000,
            threshold=80_000,
            zone=Zone.SAFE,
            origin="estimated",
            effective_limit=80_000,
        )
        await pilot.pause()
        text, bar, _ = lines(gauge)
        assert "limit" not in gauge.summary().plain and "╎" not in bar


async def test_over_the_window_clamps_the_bar_and_says_so() -> None:
    app = GaugeApp()
    async with app.run_test(size=(WIDTH, 5)) as pilot:
        gauge = app.query_one(ZoneGauge)
        gauge.update_gauge(
            tokens=210_000,
            window=200_000,
            warning=150_000,
            threshold=180_000,
            zone=Zone.OVERFLOW,
            origin="reported",
        )
        await pilot.pause()
        text, bar, _ = lines(gauge)
        assert text.startswith(" OVERFLOW ")
        assert "210,000 / 200,000 tokens  (105.0%) over the window by 10,000 · " in text
        assert text.endswith(" · reported") and len(text) <= WIDTH
        assert len(bar) == WIDTH and "░" not in bar and bar.endswith("»")


async def test_zero_window_says_unknown_and_draws_no_bar() -> None:
    app = GaugeApp()
    async with app.run_test(size=(WIDTH, 5)) as pilot:
        gauge = app.query_one(ZoneGauge)
        gauge.update_gauge(
            tokens=1_234, window=0, warning=0, threshold=0, zone=Zone.SAFE, origin="exact"
        )
        await pilot.pause()
        assert lines(gauge) == [" SAFE   1,234 tokens  ·  window unknown  ·  exact"]
        assert gauge.percent is None


async def test_colours_fall_back_to_standard_theme_variables() -> None:
    app = GaugeApp()
    async with app.run_test(size=(WIDTH, 5)):
        gauge = app.query_one(ZoneGauge)
        assert "zone-safe" not in app.theme_variables
        assert theme_color(gauge, "zone-safe", "success") == Color.parse(
            app.theme_variables["success"]
        )
        assert (
            zone_color(gauge, Zone.OVERFLOW) == Color.parse(app.theme_variables["error"]).rich_color
        )


class ThemedApp(GaugeApp):
    def get_theme_variable_defaults(self) -> dict[str, str]:
        return {"zone-safe": "#123456"}


async def test_colours_come_from_the_zone_variables_when_defined() -> None:
    app = ThemedApp()
    async with app.run_test(size=(WIDTH, 5)):
        gauge = app.query_one(ZoneGauge)
        assert zone_color(gauge, Zone.SAFE) == Color.parse("#123456").rich_color


def test_no_app_no_colour() -> None:
    assert theme_color(ZoneGauge(), "zone-safe", "success") is None
