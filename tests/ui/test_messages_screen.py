"""The messages view in the app: the content pane follows the cursor once it rests, so a burst
of page-downs paints the table at each key and shows the last message, not every one."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctx_inspect.app.config import build_profile
from ctx_inspect.core.model import Event, Message, MessageAdded, Part, PartType, RequestSent, Role
from ctx_inspect.formats.native import write_events
from ctx_inspect.ui.app import InspectorApp, OpenRequest
from ctx_inspect.ui.screens.messages import MessagesScreen
from ctx_inspect.ui.widgets.message_detail import MessageDetail
from ctx_inspect.ui.widgets.messages_view import MessagesView

from .test_app import wait_for


def long_run(tmp_path: Path, messages: int = 600) -> Path:
    events: list[Event] = []
    for i in range(messages):
        role = (Role.USER, Role.ASSISTANT)[i % 2]
        part = Part(type=PartType.TEXT, text=f"body of message {i} [b]not markup[/b]")
        events.append(MessageAdded(message=Message(id=f"m{i}", role=role, parts=(part,))))
        if i % 2:
            events.append(RequestSent())
    path = tmp_path / "long.jsonl"
    with path.open("w") as fh:
        write_events(events, fh)
    return path


def open_app(path: Path) -> InspectorApp:
    return InspectorApp(
        OpenRequest(paths=(path,), profile_for=lambda spec: build_profile("generic"))
    )


def header(detail: MessageDetail) -> str:
    return detail.lines[0] if detail.lines else ""


async def test_the_content_shows_the_message_under_the_cursor_after_a_burst(
    tmp_path: Path,
) -> None:
    app = open_app(long_run(tmp_path))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.state is not None and not app.loading)
        await pilot.press("2")
        view = app.screen.query_one(MessagesView)
        detail = app.screen.query_one(MessageDetail)
        await pilot.press("home")
        await wait_for(pilot, lambda: header(detail).startswith("#1 "))
        await pilot.press(*["pagedown"] * 5, "down", "down")
        index = view.cursor_index
        assert index is not None and index == 5 * view.visible_rows + 2
        await wait_for(pilot, lambda: header(detail).startswith(f"#{index + 1} "))
        assert header(detail).startswith(f"#{index + 1}  m{index}  ")
        assert f"body of message {index} [b]not markup[/b]" in detail.lines


async def test_the_content_waits_for_the_cursor_to_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(MessagesScreen, "DETAIL_DELAY", 600.0)  # it never rests in this test
    app = open_app(long_run(tmp_path))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.state is not None and not app.loading)
        await pilot.press("2")
        view = app.screen.query_one(MessagesView)
        detail = app.screen.query_one(MessageDetail)
        await wait_for(pilot, lambda: bool(header(detail)))
        shown = header(detail)
        assert shown.startswith(f"#{view.cursor_index + 1} ")  # type: ignore[operator]
        await pilot.press("home", "pagedown", "pagedown", "up")
        await pilot.pause()
        assert view.cursor_index == 2 * view.visible_rows - 1
        assert header(detail) == shown  # the table moved; the content waits
        app.changed()  # a refresh of the screen leaves the pending move to the timer too
        await pilot.pause()
        assert header(detail) == shown
