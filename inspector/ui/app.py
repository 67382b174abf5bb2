"""The dashboard: a Textual app over the session model, the readers and the engine.

The app owns the opened sessions (``SessionState``) and the background work (loading, following
live files); screens show the active session and widgets get plain values pushed down to them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from textual import work
from textual.app import App
from textual.binding import Binding
from textual.message import Message as TextualMessage
from textual.worker import Worker, WorkerState

from inspector.core.profiles import Profile
from inspector.errors import InspectorError
from inspector.formats.registry import FormatSpec
from inspector.ui.screens.dashboard import DashboardScreen
from inspector.ui.screens.events import EventsScreen
from inspector.ui.screens.messages import MessagesScreen
from inspector.ui.state import SessionState
from inspector.ui.themes import load_themes, resolve_theme_name

ProfileFactory = Callable[[FormatSpec], Profile]
REFRESH_SECONDS = 0.1  # live updates reach the screen at most this often


@dataclass(frozen=True)
class OpenRequest:
    """What to open: saved files, or one file to follow."""

    paths: tuple[Path, ...]
    profile_for: ProfileFactory
    format_name: str | None = None
    follow: bool = False
    merge: bool = False


class SessionsChanged(TextualMessage):
    """The sessions, or the one shown, changed: screens refresh."""


class InspectorApp(App[None]):
    """ctx-inspect's dashboard."""

    TITLE = "ctx-inspect"
    CSS_PATH = "app.tcss"
    MODES = {
        "dashboard": DashboardScreen,
        "messages": MessagesScreen,
        "events": EventsScreen,
    }
    DEFAULT_MODE = "dashboard"
    BINDINGS = [
        Binding("1", "switch_mode('dashboard')", "Dashboard"),
        Binding("2", "switch_mode('messages')", "Messages"),
        Binding("3", "switch_mode('events')", "Events"),
        Binding("left_square_bracket", "cycle_session(-1)", "Prev session", show=False),
        Binding("right_square_bracket", "cycle_session(1)", "Next session", show=False),
        Binding("t", "cycle_theme", "Theme", show=False),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, request: OpenRequest, *, theme: str | None = None) -> None:
        super().__init__()
        self.request = request
        self.states: list[SessionState] = []
        self.active = 0
        self.loading = True
        self.load_error: str | None = None
        self._dirty = False
        self._themes = load_themes()
        self._theme_name = resolve_theme_name(theme, self._themes)

    # -- start -----------------------------------------------------------------------------

    def on_mount(self) -> None:
        for theme in self._themes.values():
            self.register_theme(theme)
        self.theme = self._theme_name
        self.set_interval(REFRESH_SECONDS, self._flush_live)
        if self.request.follow:
            self.follow_input()
        else:
            self.load_inputs()

    @work(thread=True, exclusive=True, group="load", exit_on_error=False)
    def load_inputs(self) -> None:
        from inspector.loader import open_inputs

        opened = open_inputs(
            list(self.request.paths),
            self.request.profile_for,
            format_name=self.request.format_name,
            merge=self.request.merge,
            count_exact=True,
        )
        states = [SessionState(loaded) for loaded in opened]
        self.call_from_thread(self._loaded, states)

    def _loaded(self, states: list[SessionState]) -> None:
        self.states = states
        self.loading = False
        self.post_message(SessionsChanged())

    @work(exclusive=True, group="follow", exit_on_error=False)
    async def follow_input(self) -> None:
        from contextlib import aclosing

        from inspector.live import follow_session
        from inspector.loader import LoadedSession, calibrate, counter_for

        path = self.request.paths[0]
        spec = await asyncio.to_thread(_format_of, path, self.request.format_name)
        profile = self.request.profile_for(spec)
        counter = counter_for(profile)
        state: SessionState | None = None
        async with aclosing(follow_session(path, spec, profile, counter=counter)) as updates:
            async for update in updates:
                if state is None:
                    loaded = LoadedSession(
                        update.session, path, spec, profile, counter, None, paths=[path]
                    )
                    state = SessionState(loaded, follow="following")
                    self.states = [state]
                    self.loading = False
                elif update.replaced:
                    state.replace_session(update.session)
                if update.session.info.get("context_window"):
                    state.loaded.profile = calibrate(profile, update.session)
                state.touch()
                self._dirty = True

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state is WorkerState.ERROR and event.worker.group in ("load", "follow"):
            error = event.worker.error
            text = error.one_line() if isinstance(error, InspectorError) else repr(error)
            self.loading = False
            self.load_error = text
            self.notify(text, title="cannot open", severity="error", timeout=30)
            self.post_message(SessionsChanged())

    def _flush_live(self) -> None:
        if self._dirty:
            self._dirty = False
            self.post_message(SessionsChanged())

    def on_sessions_changed(self, message: SessionsChanged) -> None:
        screen = self.screen
        refresh = getattr(screen, "refresh_from_state", None)
        if refresh is not None:
            refresh()

    # -- the session shown -----------------------------------------------------------------

    @property
    def state(self) -> SessionState | None:
        if not self.states:
            return None
        return self.states[min(self.active, len(self.states) - 1)]

    def changed(self) -> None:
        """Something changed the shown state (cursor, branch): refresh the screen now."""
        self.post_message(SessionsChanged())

    def action_cycle_session(self, delta: int) -> None:
        if self.states:
            self.active = (self.active + delta) % len(self.states)
            self.changed()

    def action_cycle_theme(self) -> None:
        names = list(self._themes)
        current = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(current + 1) % len(names)]
        self.notify(f"theme: {self.theme}", timeout=2)
        self.changed()


def _format_of(path: Path, format_name: str | None) -> FormatSpec:
    from inspector.formats.registry import get_format
    from inspector.loader import resolve_format

    if format_name:
        return get_format(format_name)
    return resolve_format(path, None)
