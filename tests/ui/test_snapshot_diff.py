"""Snapshot of the diff screen: a prune of a generated chat, 120x40."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from ctx_inspect.ui.screens.diff_screen import DiffScreen
from tests.ui.test_diff_screen import SIZE, loaded, make_chat, open_app, preview, wait_for


def test_snapshot_diff(snap_compare: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the header shows the path as given: keep it the same
    make_chat(tmp_path / "chat.jsonl")
    app = open_app(Path("chat.jsonl"))

    async def run_before(pilot: Pilot[None]) -> None:
        await loaded(pilot)
        screen = await preview(pilot, "P")
        await wait_for(pilot, lambda: isinstance(app.screen, DiffScreen))
        assert screen.diff.fired

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
