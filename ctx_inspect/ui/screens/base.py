"""What every view shares: the header, the list of open sessions, the footer, and a refresh
entry point the app calls when the shown state changes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Footer, Static

from ctx_inspect.core.stats import window_source
from ctx_inspect.ui import plain
from ctx_inspect.ui.widgets.header_bar import HeaderBar, shorten_left

if TYPE_CHECKING:
    from ctx_inspect.ui.app import InspectorApp
    from ctx_inspect.ui.state import SessionState


class SessionTabs(Static):
    """The open sessions, the shown one highlighted ([ and ] switch)."""

    def show(self, names: list[str], active: int) -> None:
        text = Text()
        for i, name in enumerate(names):
            label = f" {i + 1}:{shorten_left(plain.one_line(name), 28)} "
            text.append(label, style="reverse" if i == active else "")
        self.update(text)
        self.display = len(names) > 1


class SessionScreen(Screen[None]):
    """A view of the active session."""

    def compose(self) -> ComposeResult:
        yield HeaderBar(id="header")
        yield SessionTabs(id="sessions")
        yield Static(id="status")
        yield from self.compose_body()
        yield Footer()

    def compose_body(self) -> ComposeResult:
        yield from ()

    @property
    def inspector(self) -> InspectorApp:
        from ctx_inspect.ui.app import InspectorApp

        app = self.app
        assert isinstance(app, InspectorApp)
        return app

    def on_screen_resume(self) -> None:
        self.refresh_from_state()

    def refresh_from_state(self) -> None:
        if not self.is_mounted:
            return  # composed later; on_screen_resume refreshes it then
        app = self.inspector
        try:
            status = self.query_one("#status", Static)
        except NoMatches:
            return

        state = app.state
        if state is None:
            message = "loading…" if app.loading else (app.load_error or "no session to show")
            status.update(Text(plain.one_line(message)))
            status.display = True
            return
        status.display = False
        self.query_one(SessionTabs).show([s.name for s in app.states], app.active)
        self._update_header(state)
        self.refresh_body(state)

    def _update_header(self, state: SessionState) -> None:
        loaded = state.loaded
        follow = state.follow
        if follow is not None and state.cursor is not None:
            follow = "paused (cursor moved; g: back to the live end)"
        self.query_one(HeaderBar).update_header(
            file=loaded.name,
            format=loaded.format.name,
            profile=state.profile.name,
            model=_model(state),
            window=state.profile.context_window,
            tokenizer=loaded.tokenizer_label,
            follow=follow,
            what_if=state.what_if,
            window_assumed=window_source(state.session, state.profile) == "default",
        )

    def refresh_body(self, state: SessionState) -> None:
        """Push the state's values down to this view's widgets."""


def _model(state: SessionState) -> str | None:
    value = state.session.info.get("model")
    return value if isinstance(value, str) else None
