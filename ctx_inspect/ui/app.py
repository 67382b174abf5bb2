"""The dashboard: a Textual app over the session model, the readers and the engine.

The app owns the open sessions (``OpenSessions``) and the background work that reads and
follows them, through ``app/loader.py`` and ``app/live.py`` as the CLI does. Every change it
makes posts one ``SessionsChanged`` (repeated ones coalesce in the queue: a burst of appends
while following is one refresh), on which the view shown takes its values from the sessions
(``SessionScreen.sync``): attributes go down to the views and their widgets, the widgets' intents
come up as messages.
"""

from __future__ import annotations

import threading
from contextlib import aclosing

from textual import work
from textual.app import App
from textual.binding import Binding
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.screen import ModalScreen
from textual.worker import Worker, WorkerState

from ctx_inspect.app.loader import LoadedSession
from ctx_inspect.errors import InspectorError
from ctx_inspect.formats.base import Item
from ctx_inspect.ui import plain
from ctx_inspect.ui.commands import InspectorCommands
from ctx_inspect.ui.open_sessions import OpenRequest, OpenSessions
from ctx_inspect.ui.screens.base import SessionScreen
from ctx_inspect.ui.screens.dashboard import DashboardScreen
from ctx_inspect.ui.screens.events import EventsScreen
from ctx_inspect.ui.screens.messages import MessagesScreen
from ctx_inspect.ui.state import SessionState
from ctx_inspect.ui.themes import load_themes, resolve_theme_name

__all__ = ["InspectorApp", "OpenRequest"]

LOAD_BATCH_SECONDS = 0.1  # a file being read is handed to the screen in batches this long


class SessionsChanged(Message):
    """The sessions, or the one shown, changed: the view shown takes its values again. One
    waiting in the queue stands for any number posted after it."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SessionsChanged)


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
        self.sessions = OpenSessions(request)
        self._stop_waiting = threading.Event()  # set on exit: a thread waiting on a stream gives up
        self._themes = load_themes()
        self._theme_name = resolve_theme_name(theme, self._themes)

    # -- what the sessions hold, at a glance (the palette and tests read them) --------------

    @property
    def states(self) -> list[SessionState]:
        return self.sessions.states

    @property
    def active(self) -> int:
        return self.sessions.active

    @property
    def state(self) -> SessionState | None:
        """The session shown."""
        return self.sessions.shown

    @property
    def loading(self) -> bool:
        return self.sessions.loading

    @property
    def load_error(self) -> str | None:
        return self.sessions.load_error

    # -- start -----------------------------------------------------------------------------

    def on_mount(self) -> None:
        for theme in self._themes.values():
            self.register_theme(theme)
        self.theme = self._theme_name
        if self.sessions.request.follow:
            self.follow_input()
        else:
            self.load_inputs()

    def on_unmount(self) -> None:
        self._stop_waiting.set()

    def changed(self) -> None:
        """The sessions, or the one shown, changed: the view shown takes its values again."""
        self.post_message(SessionsChanged())

    def on_sessions_changed(self, _message: SessionsChanged) -> None:
        screen = self.screen if self.screen_stack else None  # none: the app is closing
        if isinstance(screen, SessionScreen):
            screen.sync()

    # -- reading ---------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="load", exit_on_error=False)
    def load_inputs(self) -> None:
        """Read the inputs in this thread (``app.loader.iter_inputs``). A stream file is shown
        as soon as its first batch is read and grows on screen as the rest arrives (its exact
        counts made here as it goes); folders, databases and merged streams appear session by
        session as each is read. A session that cannot be read is reported (a notification)
        and the others are still read."""
        from ctx_inspect.app.loader import FailedInput, Progress, iter_inputs

        request = self.sessions.request
        progress = Progress(
            opened=lambda loaded: self.call_from_thread(self._opened, loaded),
            grow=lambda loaded, items, counts: self.call_from_thread(
                self._grow, loaded, items, counts
            ),
            batch_seconds=LOAD_BATCH_SECONDS,
        )
        failures: list[str] = []
        for item in iter_inputs(
            list(request.paths),
            request.profile_for,
            format_name=request.format_name,
            merge=request.merge,
            count_exact=True,
            progress=progress,
        ):
            if isinstance(item, FailedInput):
                failures.append(item.error.one_line())
                self.call_from_thread(self._failed, item.error.one_line())
            else:
                self.call_from_thread(self._read, item)
        self.call_from_thread(self._done_loading, failures[0] if failures else None)

    def _opened(self, loaded: LoadedSession) -> None:
        self.sessions.add([SessionState(loaded)])
        self.changed()

    def _grow(self, loaded: LoadedSession, items: list[Item], counts: list[int] | None) -> None:
        loaded.session.append(items, exact_counts=counts)
        state = self.sessions.state_of(loaded)
        if state is not None:
            state.grew()
        self.changed()

    def _read(self, loaded: LoadedSession) -> None:
        """A session was read: shown now, or brought up to date (its profile calibrated)."""
        state = self.sessions.state_of(loaded)
        if state is None:
            self.sessions.add([SessionState(loaded)])
        else:
            state.grew()
        self.changed()

    def _failed(self, text: str) -> None:
        self.notify(text, title="cannot read", severity="error", timeout=30)

    def _done_loading(self, failure: str | None) -> None:
        sessions = self.sessions
        sessions.loading = False
        if failure is not None and not sessions.states:
            sessions.load_error = failure
        self.changed()

    @work(exclusive=True, group="follow", exit_on_error=False)
    async def follow_input(self) -> None:
        """Follow the one input (``app.live.follow_input``): shown at once, grown as it is
        written to (a whole input read again replaces the session)."""
        from ctx_inspect.app.live import follow_input

        request = self.sessions.request
        state: SessionState | None = None
        updates = follow_input(
            request.paths[0],
            request.profile_for,
            format_name=request.format_name,
            stop=self._stop_waiting,
        )
        async with aclosing(updates):
            async for loaded, update in updates:
                if state is None:
                    state = SessionState(loaded, follow="following")
                    self.sessions.add([state])
                    self.sessions.loading = False
                elif update.replaced:
                    state.replace_session(update.session)
                state.grew()  # a replaced session was touched above
                self.changed()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state is WorkerState.ERROR and event.worker.group in ("load", "follow"):
            error = event.worker.error
            text = error.one_line() if isinstance(error, InspectorError) else repr(error)
            self.sessions.loading = False
            self.sessions.load_error = text
            self.notify(text, title="cannot open", severity="error", timeout=30)
            self.changed()

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Every notification (the screens' too) is plain text: an error quoting a path or a
        transcript is never read as markup, and its control characters are shown, not sent.
        ``markup`` is accepted for Textual's signature and ignored."""
        super().notify(
            plain.visible(message),
            title=plain.visible(title, keep_layout=False),
            severity=severity,
            timeout=timeout,
            markup=False,
        )

    # -- the session shown -----------------------------------------------------------------

    def action_cycle_session(self, delta: int) -> None:
        if self.sessions.cycle(delta):
            self.changed()

    def action_cycle_theme(self) -> None:
        names = list(self._themes)
        current = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(current + 1) % len(names)]
        self.notify(f"theme: {self.theme}", timeout=2)

    # == acting: prune / compact / truncate, undo, export, explain, tune, help ===============
    # (owned by the acting screens; every binding here is also a command-palette command)

    BINDINGS = [
        *BINDINGS,
        Binding("P", "act('prune')", "Prune…"),
        Binding("C", "act('compact')", "Compact…", show=False),
        Binding("T", "act('truncate')", "Truncate…", show=False),
        Binding("u", "undo", "Undo what-if", show=False),
        Binding("E", "export", "Export…", show=False),
        Binding("x", "explain", "Explain"),
        Binding("U", "tune", "Tune"),
        Binding("question_mark", "help", "Help"),
    ]
    COMMANDS = App.COMMANDS | {InspectorCommands}

    def _acting_state(self) -> SessionState | None:
        state = self.state
        if state is None:
            self.notify("no session to act on yet", timeout=3)
        return state

    def _on_a_view(self) -> bool:
        """Acting keys work over the views (and explain / tune), not over another dialog."""
        return not isinstance(self.screen, ModalScreen)

    def action_act(self, action: str) -> None:
        from ctx_inspect.ui.screens.action_picker import ActionPicker, Preview
        from ctx_inspect.ui.screens.diff_screen import DiffScreen

        state = self._acting_state()
        if state is None or not self._on_a_view():
            return
        summarizer = self.sessions.summarizer

        def show(preview: Preview | None) -> None:
            if preview is not None:
                self.push_screen(DiffScreen(preview, summarizer), self._acted)

        self.push_screen(ActionPicker(state, summarizer, action), show)

    def _acted(self, applied: bool | None) -> None:
        if applied:
            self.changed()

    def action_undo(self) -> None:
        state = self._acting_state()
        if state is None or not self._on_a_view():
            return
        branch = state.undo()
        if branch is None:
            self.notify("no what-if branch to undo", timeout=3)
        else:
            self.notify(f"undone: {branch.label}", title="what-if removed", timeout=4)
        self.changed()

    def action_export(self) -> None:
        from ctx_inspect.ui.screens.diff_screen import ExportScreen

        state = self._acting_state()
        if state is not None and self._on_a_view():
            self.push_screen(ExportScreen(state, self.sessions.input_paths()))

    def action_explain(self) -> None:
        from ctx_inspect.ui.screens.explain_screen import ExplainScreen

        if isinstance(self.screen, ExplainScreen):
            return
        if self._acting_state() is not None and self._on_a_view():
            self.push_screen(ExplainScreen())

    def action_tune(self) -> None:
        from ctx_inspect.ui.screens.tune_screen import TuneScreen

        if isinstance(self.screen, TuneScreen):
            return
        if self._acting_state() is not None and self._on_a_view():
            self.push_screen(TuneScreen())

    def action_help(self) -> None:
        from ctx_inspect.ui.screens.help_screen import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen))

    def action_show_session(self, index: int) -> None:
        if self.sessions.show(index):
            self.changed()

    def action_use_theme(self, name: str) -> None:
        if name in self._themes:
            self.theme = name

    def theme_names(self) -> list[str]:
        return list(self._themes)

    # == end of acting ========================================================================
