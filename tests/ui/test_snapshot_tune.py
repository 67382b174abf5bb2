"""Snapshot of the tune screen: compact_ratio lowered and replayed, 120x40."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input

from ctx_inspect.ui.screens.tune_screen import TuneScreen
from tests.ui.test_diff_screen import SIZE, loaded, make_chat, open_app, wait_for


def test_snapshot_tune(snap_compare: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the header shows the path as given
    make_chat(tmp_path / "chat.jsonl")
    app = open_app(Path("chat.jsonl"))

    async def run_before(pilot: Pilot[None]) -> None:
        await loaded(pilot)
        await pilot.press("U")
        await wait_for(pilot, lambda: isinstance(app.screen, TuneScreen))
        screen = app.screen
        assert isinstance(screen, TuneScreen)
        await wait_for(pilot, lambda: screen.result is not None)
        first = screen.result
        screen.query_one("#set-compact_ratio", Input).value = "0.5"
        await pilot.pause()
        screen.action_rerun()
        await wait_for(pilot, lambda: screen.result is not first)
        screen.set_focus(None)  # no blinking cursor in the picture
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
