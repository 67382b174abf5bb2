"""Snapshots of the four dashboard widgets together, 100x30, deterministic data."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.widgets import Footer

from ctx_inspect.core.counters import Counters
from ctx_inspect.core.model import GuardStatus
from ctx_inspect.core.window import LimitParts, Zone
from ctx_inspect.ui.themes import DEFAULT_THEME, load_themes
from ctx_inspect.ui.widgets.counters_panel import CountersPanel
from ctx_inspect.ui.widgets.header_bar import HeaderBar
from ctx_inspect.ui.widgets.timeline_points import TimelinePoint
from ctx_inspect.ui.widgets.timeline_view import TimelineView
from ctx_inspect.ui.widgets.zone_gauge import ZoneGauge

SnapCompare = Callable[..., bool]
WINDOW, WARNING, THRESHOLD = 200_000, 100_000, 150_000
PARTS = LimitParts(window=WINDOW, buffer=8_192, max_output=50_000)


def zone_of(tokens: int) -> Zone:
    return Zone.SAFE if tokens < WARNING else Zone.WARNING if tokens < THRESHOLD else Zone.OVERFLOW


def timeline(count: int = 60) -> list[TimelinePoint]:
    """A context that grows, is compacted every 20 steps, and ends in a forced final turn."""
    points, tokens = [], 6_000
    for step in range(1, count + 1):
        markers: set[str] = set()
        tokens += 8_000
        if step % 20 == 0:
            tokens //= 3
            markers.add("compaction")
        if step % 7 == 0:
            markers.add("dropped")
        if step == 45:
            markers.add("prune")
        if step == count:
            tokens += 60_000
            markers |= {"final_turn"}
        points.append(
            TimelinePoint(step, tokens, tokens + 2_000, zone_of(tokens), frozenset(markers))
        )
    return points


STATES: dict[str, dict[str, Any]] = {
    "safe": {
        "gauge": {"tokens": 42_500, "zone": Zone.SAFE, "origin": "exact"},
        "counters": Counters(
            12, 36_000, 0, 6_500, 2_048, 0, 42_500, 141_808, PARTS,
            GuardStatus.OK, Zone.SAFE, False,
        ),
        "header": {"follow": None, "what_if": None},
        "cursor": 12,
    },
    "warning": {
        "gauge": {"tokens": 131_000, "zone": Zone.WARNING, "origin": "reported"},
        "counters": Counters(
            27, 120_000, 1_350, 30_000, 4_096, 0, 151_350, 141_808, PARTS,
            GuardStatus.FINAL, Zone.OVERFLOW, True,
        ),
        "header": {"follow": "following", "what_if": None},
        "cursor": 40,
    },
    "overflow": {
        "gauge": {"tokens": 210_000, "zone": Zone.OVERFLOW, "origin": "estimated"},
        "counters": Counters(
            60, 150_000, 0, 55_000, 4_096, 5_000, 210_000, 141_808, PARTS,
            GuardStatus.FINAL, Zone.OVERFLOW, True,
        ),
        "header": {"follow": "paused (cursor moved)", "what_if": "pruned step 45"},
        "cursor": 60,
    },
}  # fmt: skip


class WidgetsApp(App[None]):
    def __init__(self, state: dict[str, Any]) -> None:
        super().__init__()
        self.state = state

    def on_load(self) -> None:
        for theme in load_themes().values():
            self.register_theme(theme)
        self.theme = DEFAULT_THEME

    def compose(self) -> ComposeResult:
        yield HeaderBar()
        yield ZoneGauge()
        yield CountersPanel()
        yield TimelineView()
        yield Footer()

    def on_mount(self) -> None:
        state = self.state
        self.query_one(HeaderBar).update_header(
            file="/home/user/runs/2024-11-21/agent-session.jsonl",
            format="native",
            profile="ai-agent",
            model="gpt-4o",
            window=WINDOW,
            tokenizer="o200k_base",
            **state["header"],
        )
        self.query_one(ZoneGauge).update_gauge(
            window=WINDOW,
            warning=WARNING,
            threshold=THRESHOLD,
            effective_limit=141_808,
            **state["gauge"],
        )
        self.query_one(CountersPanel).update_counters(state["counters"])
        view = self.query_one(TimelineView)
        view.set_points(timeline(), window=WINDOW, warning=WARNING, threshold=THRESHOLD)
        view.cursor = state["cursor"]
        view.focus()


@pytest.mark.parametrize("state", list(STATES))
def test_widgets(snap_compare: SnapCompare, state: str) -> None:
    assert snap_compare(WidgetsApp(STATES[state]), terminal_size=(100, 30))
