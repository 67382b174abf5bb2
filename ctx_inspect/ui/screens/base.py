"""What every view shares: the header, the list of open sessions, the footer, and the reactive
values a view shows, taken from the open sessions (``SessionScreen.sync``).

The data flow of a view: its reactives hold what it shows (the session ``shown``, the
``revision`` of its content, the cursor's ``step``, and the header and tab values made from
them); its widgets are bound to them (``data_bind``) or given what the watchers derive from them;
the widgets' intents come up as messages, which the view turns into changes of the session
state (the cursor) and of its own reactives. The view never asks the app: it talks to the
open sessions (``OpenSessions``), the one typed object every view is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Footer, Static

from ctx_inspect.core.stats import window_source
from ctx_inspect.ui import plain
from ctx_inspect.ui.widgets.header_bar import HeaderBar, HeaderInfo, shorten_left

if TYPE_CHECKING:
    from ctx_inspect.ui.open_sessions import OpenSessions
    from ctx_inspect.ui.state import SessionState


@dataclass(frozen=True)
class Tabs:
    """The open sessions' names and which one is shown."""

    names: tuple[str, ...] = ()
    active: int = 0


class SessionTabs(Static):
    """The open sessions, the shown one highlighted ([ and ] switch)."""

    tabs: reactive[Tabs] = reactive(Tabs, init=False)

    def watch_tabs(self, tabs: Tabs) -> None:
        self.show(list(tabs.names), tabs.active)

    def show(self, names: list[str], active: int) -> None:
        text = Text()
        for i, name in enumerate(names):
            label = f" {i + 1}:{shorten_left(plain.one_line(name), 28)} "
            text.append(label, style="reverse" if i == active else "")
        self.update(text)
        self.display = len(names) > 1


class SessionScreen(Screen[None]):
    """A view of the session shown (see the module for its data flow)."""

    shown: reactive[SessionState | None] = reactive(None, init=False)
    """The session shown (None while there is none: ``status`` says why)."""
    revision: reactive[tuple[int, int]] = reactive((0, -1), init=False)
    """The shown session's identity and version: it changes whenever what is shown does."""
    step: reactive[int | None] = reactive(None, init=False)
    """The cursor's step (the last one while it follows the live end)."""
    status: reactive[str | None] = reactive(None, init=False)
    header: reactive[HeaderInfo] = reactive(HeaderInfo, init=False)
    tabs: reactive[Tabs] = reactive(Tabs, init=False)

    def compose(self) -> ComposeResult:
        yield HeaderBar(id="header").data_bind(info=SessionScreen.header)
        yield SessionTabs(id="sessions").data_bind(SessionScreen.tabs)
        status = Static(id="status")
        status.display = False  # shown while there is no session to show (``status``)
        yield status
        yield from self.compose_body()
        yield Footer()

    def compose_body(self) -> ComposeResult:
        yield from ()

    @property
    def sessions(self) -> OpenSessions:
        """The open sessions (the app's). Textual makes the views without arguments (``MODES``),
        so they find them here, the one place a view looks at its app."""
        from ctx_inspect.ui.app import InspectorApp

        app = self.app
        if not isinstance(app, InspectorApp):
            raise TypeError(f"{type(self).__name__} is a view of ctx-inspect's dashboard")
        return app.sessions

    def on_screen_resume(self) -> None:
        self.sync()

    def sync(self) -> None:
        """Take what this view shows from the open sessions: every change calls it (the app,
        once per burst of changes), and so does the view's coming back."""
        if not self.is_mounted:
            return  # composed later; on_screen_resume syncs it then
        sessions = self.sessions
        state = sessions.shown
        self.status = None if state is not None else sessions.status
        self.tabs = Tabs(tuple(s.name for s in sessions.states), sessions.active)
        self.shown = state
        if state is None:
            return
        self.revision = (id(state), state.version)
        self.cursor_moved(state)

    def cursor_moved(self, state: SessionState) -> None:
        """The cursor of ``state`` moved (or may have): the step and the header follow it."""
        self.header = header_info(state)
        self.step = state.step()

    def move_cursor(self, step: int | None) -> None:
        """Move the shown session's cursor to ``step`` (None: the live end)."""
        state = self.shown
        if state is not None:
            state.move(step)
            self.cursor_moved(state)

    def watch_status(self, status: str | None) -> None:
        line = self.query_one("#status", Static)
        line.display = status is not None
        if status is not None:
            line.update(Text(plain.one_line(status)))

    def watch_revision(self) -> None:
        state = self.shown
        if state is not None:
            self.show_revision(state)

    def show_revision(self, state: SessionState) -> None:
        """What is shown of ``state`` changed (new content, another session, a what-if): give
        this view's widgets their new values (called before the step is taken)."""


def header_info(state: SessionState) -> HeaderInfo:
    """The header's values for ``state``."""
    loaded = state.loaded
    follow = state.follow
    if follow is not None and state.cursor is not None:
        follow = "paused (cursor moved; g: back to the live end)"
    model = state.session.info.get("model")
    return HeaderInfo(
        file=loaded.name,
        format=loaded.format.name,
        profile=state.profile.name,
        model=model if isinstance(model, str) else None,
        window=state.profile.context_window,
        tokenizer=loaded.tokenizer_label,
        follow=follow,
        what_if=state.what_if,
        window_assumed=window_source(state.session, state.profile) == "default",
    )
