"""Snapshots of the three views over the demo run, at a fixed size, the cursor on one step."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ctx_inspect.app.config import build_profile
from ctx_inspect.app.demo import write_demo_session
from ctx_inspect.ui.app import InspectorApp, OpenRequest

SIZE = (130, 42)


@pytest.fixture
def demo_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> InspectorApp:
    monkeypatch.chdir(tmp_path)  # the header shows a short relative path
    write_demo_session(Path("demo-run.jsonl"))
    return InspectorApp(
        OpenRequest(
            paths=(Path("demo-run.jsonl"),), profile_for=lambda spec: build_profile("aiagent")
        )
    )


def prepare(*keys: str):
    async def run_before(pilot) -> None:
        app = pilot.app
        for _ in range(400):
            if app.state is not None and not app.loading:
                break
            await asyncio.sleep(0.05)
        assert app.state is not None
        app.state.move(20)  # the step right after the compaction
        app.changed()
        await pilot.pause()
        for key in keys:
            await pilot.press(key)
        await pilot.pause(0.3)

    return run_before


def test_dashboard(snap_compare, demo_app: InspectorApp) -> None:
    assert snap_compare(demo_app, terminal_size=SIZE, run_before=prepare())


def test_messages(snap_compare, demo_app: InspectorApp) -> None:
    assert snap_compare(demo_app, terminal_size=SIZE, run_before=prepare("2", "end"))


def test_events(snap_compare, demo_app: InspectorApp) -> None:
    assert snap_compare(demo_app, terminal_size=SIZE, run_before=prepare("3"))
