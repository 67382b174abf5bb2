"""The dashboard over hostile inputs: every screen, session tab, palette entry and notification
renders without an exception, and what it sends to the terminal holds none of the input's escape
sequences or invisible characters (they are shown as ␛, ⟨U+202E⟩ ...); markup in a path or an
error is shown as text, never parsed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from textual._compositor import LayoutUpdate
from textual.pilot import Pilot
from textual.widgets import Select

from ctx_inspect.ui.app import InspectorApp
from ctx_inspect.ui.screens.action_picker import ActionPicker
from ctx_inspect.ui.screens.diff_screen import DiffScreen, ExportScreen
from ctx_inspect.ui.screens.explain_screen import ExplainScreen
from ctx_inspect.ui.screens.help_screen import HelpScreen
from ctx_inspect.ui.screens.tune_screen import TuneScreen
from ctx_inspect.ui.widgets.message_detail import MessageDetail
from ctx_inspect.ui.widgets.messages_view import MessagesView
from tests.hostile.inputs import HOSTILE, HOSTILE_NAME, all_inputs, leaks
from tests.ui.test_diff_screen import open_app, wait_for
from tests.ui.test_help_screen import palette_settled

SIZE = (160, 48)


def on_screen(app: InspectorApp) -> str:
    """The text of every segment the terminal would get for the whole screen (the screens
    under a modal one included), as ``App.export_screenshot`` renders it."""
    update = app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    assert isinstance(update, LayoutUpdate)
    return "".join(segment.text for line in update.strips for strip in line for segment in strip)


class Walk:
    """Visits the screens of one app and checks what each one shows."""

    def __init__(self, pilot: Pilot[None]) -> None:
        self.pilot = pilot
        app = pilot.app
        assert isinstance(app, InspectorApp)
        self.app = app
        self.seen: dict[str, str] = {}

    async def check(self, name: str) -> None:
        await self.pilot.pause()
        text = on_screen(self.app)
        assert leaks(text) == [], name
        self.seen[name] = text

    async def press(self, *keys: str) -> None:
        await self.pilot.press(*keys)  # each key waits until the app is idle

    async def until(self, ready: Callable[[], object]) -> None:
        await wait_for(self.pilot, ready)
        await self.pilot.pause()


def shows_the_cursor(view: MessagesView, detail: MessageDetail) -> bool:
    """Whether the content pane shows the message under the cursor (its header: ``#N ...``)."""
    index, lines = view.cursor_index, detail.lines
    return index is not None and bool(lines) and lines[0].startswith(f"#{index + 1} ")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return all_inputs(tmp_path_factory.mktemp("hostile-ui"))


@pytest.mark.parametrize(
    "source", ["native", "claude_code", "claude_code_sidechains", "claude_code_project", "opencode"]
)
async def test_every_screen_shows_the_input_safely(inputs: dict[str, Path], source: str) -> None:
    app = open_app(inputs[source])
    async with app.run_test(size=SIZE, notifications=True, tooltips=True) as pilot:
        walk = Walk(pilot)
        await walk.until(lambda: app.state is not None and not app.loading)
        for index in range(len(app.states)):  # every session, its tab highlighted in turn
            await walk.check(f"dashboard, session {index + 1}")
            await walk.press("right_square_bracket")
        if source != "claude_code":  # sub-agents, sidechains, several files or sessions
            assert len(app.states) > 1  # so the session tabs are shown
        assert "␛" in walk.seen["dashboard, session 1"]  # the tabs, the header: shown visibly

        await walk.press("2")
        await walk.check("messages")
        view = app.screen.query_one(MessagesView)
        detail = app.screen.query_one(MessageDetail)
        for row in range(6):
            await walk.press("down")
            # the content follows the cursor once it rests
            await walk.until(lambda: shows_the_cursor(view, detail))
            await walk.check(f"messages, row {row + 2}")
        await walk.press("3")
        await walk.check("events")
        for row in range(6):
            await walk.press("down")
            await walk.check(f"events, row {row + 2}")
        await walk.press("1")

        await walk.press("x")
        await walk.until(lambda: isinstance(app.screen, ExplainScreen) and app.screen.complete)
        await walk.check("explain")
        await walk.press("escape")

        await walk.press("U")
        await walk.until(lambda: isinstance(app.screen, TuneScreen) and app.screen.result)
        await walk.check("tune")
        tune = app.screen
        assert isinstance(tune, TuneScreen) and app.state is not None
        assert tune.changes == {}  # the fields read back as the values they show
        if source == "native":  # the export's own settings, a text one among them
            assert app.state.profile.encoding == "enc" + HOSTILE
        await walk.press("right_square_bracket")  # tune names the session it was opened from
        await walk.check("tune, another session shown")
        await walk.press("escape")

        await walk.press("C")
        await walk.until(lambda: isinstance(app.screen, ActionPicker))
        app.screen.query_one(Select).value = "opencode"  # whose compaction acts on these
        await walk.check("action picker")
        await walk.press("enter")
        await walk.until(lambda: isinstance(app.screen, DiffScreen))
        await walk.check("diff")
        await walk.press("a")  # applied as a what-if: the header and a notification say so
        await walk.until(lambda: not isinstance(app.screen, DiffScreen))
        assert app.state is not None and app.state.what_if is not None
        await walk.check("what-if applied")
        await walk.press("E")
        await walk.until(lambda: isinstance(app.screen, ExportScreen))
        await walk.check("export")
        await walk.press("escape")
        await walk.press("u")

        await walk.press("question_mark")
        await walk.until(lambda: isinstance(app.screen, HelpScreen))
        await walk.check("help")
        await walk.press("escape")

        await walk.press("ctrl+p")
        await walk.until(lambda: palette_settled(app))
        await walk.check("command palette")
        await walk.press(*"session")  # a search highlights the session titles
        await walk.until(lambda: palette_settled(app))
        await walk.check("command palette, searched")
        assert "Session 1:" in walk.seen["command palette, searched"]
        await walk.press("escape")


async def test_a_missing_file_with_markup_in_its_name_is_a_notification(tmp_path: Path) -> None:
    missing = tmp_path / "missing[/]file.jsonl"
    app = open_app(missing)
    async with app.run_test(size=SIZE, notifications=True, tooltips=True) as pilot:
        await wait_for(pilot, lambda: app.load_error is not None)
        await pilot.pause()
        assert app.load_error is not None and "missing[/]file.jsonl" in app.load_error
        shown = on_screen(app)
        assert "cannot read" in shown  # the notification's title
        assert shown.count("missing[/]file.jsonl") >= 2  # in the notification and the status


async def test_a_missing_file_with_escapes_in_its_name_is_shown_safely(tmp_path: Path) -> None:
    app = open_app(tmp_path / f"missing{HOSTILE_NAME}.jsonl")
    async with app.run_test(size=SIZE, notifications=True, tooltips=True) as pilot:
        await wait_for(pilot, lambda: app.load_error is not None)
        await pilot.pause()
        shown = on_screen(app)
        assert "cannot read" in shown
        assert leaks(shown) == []
        assert "␛[31m␛]0;t␇.jsonl" in shown


async def test_notifications_are_plain_text(tmp_path: Path) -> None:
    app = open_app(tmp_path / "absent.jsonl")
    async with app.run_test(size=SIZE, notifications=True, tooltips=True) as pilot:
        await wait_for(pilot, lambda: app.load_error is not None)
        app.notify("an error [/] quoting " + HOSTILE, title="title [b]" + HOSTILE_NAME)
        await pilot.pause()
        shown = on_screen(app)
        assert leaks(shown) == []
        assert "an error [/] quoting" in shown and "[b][b][@click=app.quit]" in shown


async def test_an_error_naming_a_path_with_markup_is_plain(tmp_path: Path) -> None:
    """A configuration file that is not there, named with markup: explaining reports it."""
    from ctx_inspect.app.config import build_profile
    from ctx_inspect.ui.app import OpenRequest
    from tests.hostile.inputs import native_file

    path = native_file(tmp_path)
    request = OpenRequest(
        paths=(path,),
        profile_for=lambda spec: build_profile(None, default=spec.default_profile),
        config=tmp_path / "settings[/]x.toml",
    )
    app = InspectorApp(request)
    async with app.run_test(size=SIZE, notifications=True, tooltips=True) as pilot:
        await wait_for(pilot, lambda: app.state is not None and not app.loading)
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, ExplainScreen))
        await wait_for(pilot, lambda: "settings[/]x.toml" in on_screen(app))
        shown = on_screen(app)
        assert "cannot explain" in shown
        assert leaks(shown) == []
