"""The help lists the keys from the bindings; every action is a command-palette command."""

from __future__ import annotations

from textual.command import CommandPalette
from textual.screen import Screen
from textual.widgets import Static

from ctx_inspect.ui.app import InspectorApp
from ctx_inspect.ui.commands import InspectorCommands, bindings_of, palette_commands, resolve
from ctx_inspect.ui.screens.dashboard import DashboardScreen
from ctx_inspect.ui.screens.explain_screen import ExplainScreen
from ctx_inspect.ui.screens.help_screen import HelpScreen, group_of
from ctx_inspect.ui.screens.tune_screen import TuneScreen
from tests.ui.test_diff_screen import DATA, SIZE, loaded, open_app, wait_for

LOG = DATA / "aiagent" / "log.log"


def palette_settled(app: InspectorApp) -> bool:
    """Whether the command palette is open and shows what its last search found."""
    palette = app.screen
    return (
        isinstance(palette, CommandPalette)
        and palette.has_class("-ready")  # its first search has filled the list
        and not any(
            worker.group == CommandPalette._GATHER_COMMANDS_GROUP and not worker.is_finished
            for worker in app.workers
        )
    )


async def test_help_lists_every_key_of_the_app_and_the_view() -> None:
    app = open_app(LOG)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        screen = app.screen
        assert isinstance(screen, HelpScreen)
        text = "\n".join(
            str(screen.query_one(f"#help-{side}", Static).render()) for side in ("left", "right")
        )
        for owner in (InspectorApp, DashboardScreen):
            for binding in bindings_of(owner):
                line = f"{app.get_key_display(binding):>10}  {binding.description}"
                assert line in text, line
        for group in ("views", "cursor & replay", "act", "explain & tune", "sessions & themes"):
            assert f"{group}\n" in text
        assert "ctrl+p" in str(screen.query_one("#help-palette", Static).render())
        assert group_of("act('prune')") == "act" and group_of("switch_mode('events')") == "views"
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)


async def test_help_on_a_pushed_view_lists_its_keys() -> None:
    app = open_app(LOG)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("U")
        await wait_for(pilot, lambda: isinstance(app.screen, TuneScreen))
        app.action_help()
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen)
        described = {line.description for line in help_screen.lines}
        assert {"Re-run replay", "Sweep…", "Sort sweep", "Tune", "Prune…"} <= described


async def test_every_action_is_a_palette_command() -> None:
    app = open_app(LOG)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        commands = palette_commands(app, app.screen)
        actions = {(c.target, c.action) for c in commands}
        for binding in bindings_of(InspectorApp):
            assert ("app", binding.action) in actions, binding.action
        for mode, view in InspectorApp.MODES.items():
            assert isinstance(view, type)
            for binding in bindings_of(view):
                assert (mode, binding.action) in actions, binding.action
        titles = [c.title for c in commands]
        for wanted in (
            "Dashboard",
            "Messages",
            "Events",
            "Next session",
            "Theme",
            "Prune…",
            "Compact…",
            "Truncate…",
            "Undo what-if",
            "Export…",
            "Explain",
            "Tune",
            "Help",
            "Dashboard: Play/pause",
            "Dashboard: Step on",
            "Dashboard: Step back",
        ):
            assert wanted in titles, wanted
        assert any(t.startswith("Session 1: ") for t in titles)
        assert any(t.startswith("Theme: ") for t in titles)
        # each command's action exists on its target
        for command in commands:
            name = command.action.split("(", 1)[0]
            if command.target in InspectorApp.MODES:  # a view: its screen class has the action
                owner: object = InspectorApp.MODES[command.target]
            else:
                owner = resolve(app, command, app.screen)
            assert callable(getattr(owner, f"action_{name}", None)), command

        # a pushed screen's own keys are commands too
        await pilot.press("U")
        await wait_for(pilot, lambda: isinstance(app.screen, TuneScreen))
        screen: Screen[object] = app.screen
        here = palette_commands(app, screen)
        assert any(c.target == "screen" and c.action == "sweep" for c in here)
        assert InspectorCommands in InspectorApp.COMMANDS


async def test_the_palette_runs_a_command() -> None:
    app = open_app(LOG)
    async with app.run_test(size=SIZE) as pilot:
        state = await loaded(pilot)
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: palette_settled(app))
        await pilot.press(*"explain")
        await wait_for(pilot, lambda: palette_settled(app))
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ExplainScreen))
        await pilot.press("escape")
        await pilot.pause()
        before = state.step()
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: palette_settled(app))
        await pilot.press(*"step back")
        await wait_for(pilot, lambda: palette_settled(app))
        await pilot.press("enter")
        await wait_for(pilot, lambda: state.step() != before)
        assert before is not None and state.step() == before - 1
