"""Snapshot of the explain screen: the dropped tool output of the ai-agent log, 120x40."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from ctx_inspect.ui.screens.explain_screen import ExplainScreen
from tests.ui.test_diff_screen import DATA, SIZE, loaded, open_app, wait_for


def test_snapshot_explain(snap_compare: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(DATA.parent.parent)  # the header shows the path as given
    app = open_app(Path("tests/data/aiagent/log.log"))

    async def run_before(pilot: Pilot[None]) -> None:
        await loaded(pilot)
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, ExplainScreen))
        screen = app.screen
        assert isinstance(screen, ExplainScreen)
        await wait_for(pilot, lambda: screen.complete)
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
