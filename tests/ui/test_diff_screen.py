"""Acting on a session: the action picker, the diff, apply as a what-if branch, undo, export."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Select, Static

from ctx_inspect.app.config import build_profile
from ctx_inspect.app.loader import open_inputs
from ctx_inspect.core.policies.base import ItemStatus
from ctx_inspect.core.profiles import make_profile
from ctx_inspect.ui.app import InspectorApp, OpenRequest
from ctx_inspect.ui.screens.action_picker import ActionPicker
from ctx_inspect.ui.screens.diff_screen import DiffScreen, ExportScreen, default_export_path
from ctx_inspect.ui.state import SessionState
from ctx_inspect.ui.widgets.header_bar import HeaderBar

SIZE = (120, 40)
DATA = Path(__file__).resolve().parents[1] / "data"
MARKUP = "[bold red]not markup[/bold red] \x1b[31mnot red\x1b[0m"


def make_chat(path: Path, rounds: int = 16, size: int = 20_000) -> Path:
    """A chat whose tool outputs are big enough for every generic action to fire."""
    lines: list[dict[str, object]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the failing test in src/app/main.py"},
    ]
    for i in range(rounds):
        call = f"call_{i}"
        command = json.dumps({"command": f"cat src/app/module_{i}.py"})
        lines.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {"name": "bash", "arguments": command},
                    }
                ],
            }
        )
        rows = [
            f"line {j}: def handler_{i}_{j}(): return read_config('/etc/app/conf_{i}.toml')"
            for j in range(size // 60)
        ]
        rows.insert(len(rows) // 2, MARKUP)  # where a middle-out truncation cuts
        body = "\n".join(rows) + f"\nValueError: bad value in module_{i}"
        lines.append({"role": "tool", "tool_call_id": call, "content": body})
    lines.append({"role": "assistant", "content": "Done: fixed src/app/main.py"})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def open_app(path: Path) -> InspectorApp:
    return InspectorApp(
        OpenRequest(
            paths=(path,),
            profile_for=lambda spec: build_profile(None, default=spec.default_profile),
        )
    )


async def wait_for(pilot: Pilot[None], ready: Callable[[], object], timeout: float = 30) -> None:
    """Let the app run until ``ready()`` is true (background workers included)."""
    waited = 0.0
    while not ready():
        assert waited < timeout, "timed out waiting for the app"
        await pilot.pause(0.05)
        waited += 0.05


async def loaded(pilot: Pilot[None]) -> SessionState:
    app = pilot.app
    assert isinstance(app, InspectorApp)
    # the whole file read, not only its first batch (a large or slow read shows that first)
    await wait_for(pilot, lambda: app.state is not None and not app.loading)
    await pilot.pause()
    state = app.state
    assert state is not None
    return state


async def preview(pilot: Pilot[None], key: str, profile: str | None = None) -> DiffScreen:
    """Press an action key, optionally choose another profile, compute: the diff screen."""
    app = pilot.app
    await pilot.press(key)
    await wait_for(pilot, lambda: isinstance(app.screen, ActionPicker))
    if profile is not None:
        app.screen.query_one(Select).value = profile
        await pilot.pause()
    await pilot.press("enter")
    await wait_for(pilot, lambda: isinstance(app.screen, DiffScreen))
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, DiffScreen)
    return screen


async def test_prune_diff_apply_and_undo(tmp_path: Path) -> None:
    path = make_chat(tmp_path / "chat.jsonl")
    original_bytes = path.read_bytes()
    app = open_app(path)
    async with app.run_test(size=SIZE) as pilot:
        state = await loaded(pilot)
        screen = await preview(pilot, "P")
        diff = screen.diff
        assert diff.action == "prune" and diff.fired
        assert diff.counts().get("pruned", 0) > 0
        assert diff.tokens_after < diff.tokens_before
        table = screen.query_one(DataTable)
        assert table.row_count == len(diff.messages)
        # the cursor starts on the first changed message, whose text diff is shown
        assert screen.selected is not None
        assert diff.messages[screen.selected].status is ItemStatus.PRUNED
        shown = str(screen.query_one("#diff-text", Static).render())
        assert diff.messages[screen.selected].id in shown
        totals = str(screen.query_one("#diff-totals", Static).render())
        assert f"{diff.tokens_before:,} → {diff.tokens_after:,}" in totals

        await pilot.press("a")
        await wait_for(pilot, lambda: not isinstance(app.screen, DiffScreen))
        await pilot.pause()
        assert len(state.branches) == 1
        label = state.what_if
        assert label is not None and label.startswith("what-if 1: prune")
        assert app.screen.query_one(HeaderBar).what_if == label
        assert path.read_bytes() == original_bytes  # the input is never written

        await pilot.press("u")
        await pilot.pause()
        assert state.branches == []
        assert app.screen.query_one(HeaderBar).what_if is None
        assert path.read_bytes() == original_bytes


async def test_compact_summarises_and_reports_what_survived(tmp_path: Path) -> None:
    path = make_chat(tmp_path / "chat.jsonl")
    app = open_app(path)
    async with app.run_test(size=SIZE) as pilot:
        state = await loaded(pilot)
        before = state.session.message_count
        screen = await preview(pilot, "C")
        diff = screen.diff
        counts = diff.counts()
        assert counts.get("summarized", 0) > 0 and counts.get("added", 0) == 1
        assert diff.messages_after < diff.messages_before
        survived = str(screen.query_one("#diff-survived", Static).render())
        assert "what survived" in survived and "identifier" in survived
        assert diff.survived.lost and "lost" in survived
        await pilot.press("a")
        await wait_for(pilot, lambda: not isinstance(app.screen, DiffScreen))
        assert state.what_if is not None and "compact" in state.what_if
        assert state.session.message_count != before or state.session is not state.original


async def test_truncate_with_another_agents_policy_then_discard(tmp_path: Path) -> None:
    path = make_chat(tmp_path / "chat.jsonl")
    app = open_app(path)
    async with app.run_test(size=SIZE) as pilot:
        state = await loaded(pilot)
        screen = await preview(pilot, "T", profile="baseagent")
        assert screen.preview.profile.name == "baseagent"
        assert screen.preview.profile.context_window == state.profile.context_window
        diff = screen.diff
        assert diff.action == "truncate" and diff.counts().get("truncated", 0) > 0
        row = diff.messages[screen.selected or 0]
        assert row.status is ItemStatus.TRUNCATED and row.text_diff
        await pilot.press("d")
        await wait_for(pilot, lambda: not isinstance(app.screen, DiffScreen))
        assert state.branches == []


async def test_transcript_text_is_shown_as_data(tmp_path: Path) -> None:
    path = make_chat(tmp_path / "chat.jsonl", rounds=16)
    app = open_app(path)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        screen = await preview(pilot, "T", profile="baseagent")
        text = screen.query_one("#diff-text", Static).render()
        plain = str(text)
        assert "[bold red]not markup[/bold red]" in plain  # markup displayed, not applied
        assert "\x1b" not in plain and "␛[31m" in plain  # escapes shown visibly


async def test_export_writes_a_readable_native_file(tmp_path: Path) -> None:
    path = make_chat(tmp_path / "chat.jsonl")
    out = tmp_path / "out" / "branch.jsonl"
    out.parent.mkdir()
    app = open_app(path)
    async with app.run_test(size=SIZE) as pilot:
        state = await loaded(pilot)
        await preview(pilot, "P")
        await pilot.press("a")
        await wait_for(pilot, lambda: not isinstance(app.screen, DiffScreen))
        await pilot.press("E")
        await wait_for(pilot, lambda: isinstance(app.screen, ExportScreen))
        field = app.screen.query_one(Input)
        assert field.value == default_export_path(state) == "./chat-whatif.jsonl"
        field.value = str(out)
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, ExportScreen))
        assert out.exists()
        [reread] = open_inputs(
            [out],
            lambda spec: build_profile(None, default=spec.default_profile),
            count_exact=False,
        )
        assert reread.format.name == "native"
        assert reread.session.message_count == state.session.message_count
        assert any("exported" in (n.title or "") for n in app._notifications)


async def test_an_exported_what_if_reopens_with_its_profile_and_window(tmp_path: Path) -> None:
    path = make_chat(tmp_path / "chat.jsonl")
    out = tmp_path / "branch.jsonl"
    app = InspectorApp(
        OpenRequest(
            paths=(path,),
            profile_for=lambda spec: build_profile(
                "baseagent", sets=["context_window=150000", "compact_ratio=0.7"]
            ),
        )
    )
    async with app.run_test(size=SIZE) as pilot:
        state = await loaded(pilot)
        await preview(pilot, "C")
        await pilot.press("a")
        await wait_for(pilot, lambda: not isinstance(app.screen, DiffScreen))
        state.export(out)

    def reopen(name: str | None = None, sets: tuple[str, ...] = ()) -> Any:
        [again] = open_inputs(
            [out],
            lambda spec: build_profile(name, sets=sets, default=spec.default_profile),
            count_exact=False,
        )
        return again.profile

    profile = reopen()
    assert (profile.name, profile.context_window) == ("baseagent", 150_000)
    assert profile.compact_ratio == 0.7
    # what the user says wins: another window, or another profile (which keeps the export's
    # window, the model's, but none of the other profile's settings)
    assert reopen(sets=("context_window=99000",)).context_window == 99_000
    other = reopen("generic")
    assert other.name == "generic" and other.context_window == 150_000
    assert (
        other.settings()["compact_ratio"] == make_profile("generic", {}).settings()["compact_ratio"]
    )


async def test_export_refuses_the_input_file(tmp_path: Path) -> None:
    path = make_chat(tmp_path / "chat.jsonl")
    original_bytes = path.read_bytes()
    app = open_app(path)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("E")
        await wait_for(pilot, lambda: isinstance(app.screen, ExportScreen))
        app.screen.query_one(Input).value = str(tmp_path / "." / "chat.jsonl")
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert isinstance(app.screen, ExportScreen)
        error = str(app.screen.query_one("#export-error", Static).render())
        assert "refused" in error
        assert path.read_bytes() == original_bytes
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, ExportScreen)


async def test_nothing_to_apply_and_undo_without_branch(tmp_path: Path) -> None:
    path = make_chat(tmp_path / "chat.jsonl")
    app = open_app(path)
    async with app.run_test(size=SIZE) as pilot:
        state = await loaded(pilot)
        await pilot.press("u")
        await pilot.pause()
        assert any("no what-if" in n.message for n in app._notifications)
        screen = await preview(pilot, "T")  # the generic profile sets no tool-output limit
        assert not screen.diff.fired
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, DiffScreen) and state.branches == []
