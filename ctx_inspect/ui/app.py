"""The dashboard: a Textual app over the session model, the readers and the engine.

The app owns the opened sessions (``SessionState``) and the background work (loading, following
live files); screens show the active session and widgets get plain values pushed down to them.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from textual import work
from textual.app import App
from textual.binding import Binding
from textual.message import Message as TextualMessage
from textual.notifications import SeverityLevel
from textual.screen import ModalScreen
from textual.worker import Worker, WorkerState

from ctx_inspect.core.model import Event, Message, MessageAdded, SourceSpan
from ctx_inspect.core.policies.base import Summarizer
from ctx_inspect.core.profiles import Profile
from ctx_inspect.core.tokens import TokenCounter
from ctx_inspect.errors import InspectorError
from ctx_inspect.formats.base import Parser
from ctx_inspect.formats.registry import FormatSpec
from ctx_inspect.sources.stream import Spool
from ctx_inspect.ui import plain
from ctx_inspect.ui.commands import InspectorCommands
from ctx_inspect.ui.screens.dashboard import DashboardScreen
from ctx_inspect.ui.screens.events import EventsScreen
from ctx_inspect.ui.screens.messages import MessagesScreen
from ctx_inspect.ui.state import SessionState
from ctx_inspect.ui.themes import load_themes, resolve_theme_name

ProfileFactory = Callable[[FormatSpec], Profile]
REFRESH_SECONDS = 0.1  # live updates reach the screen at most this often
LOAD_BATCH_SECONDS = 0.1  # a file being read is handed to the screen in batches this long


@dataclass(frozen=True)
class OpenRequest:
    """What to open: saved files, or one file to follow."""

    paths: tuple[Path, ...]
    profile_for: ProfileFactory
    format_name: str | None = None
    follow: bool = False
    merge: bool = False
    config: Path | None = None  # the configuration file ([summarizer] for compact, tune, explain)


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
        self._stop_waiting = threading.Event()  # set on exit: a thread waiting on a stream gives up
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

    def on_unmount(self) -> None:
        self._stop_waiting.set()

    @work(thread=True, exclusive=True, group="load", exit_on_error=False)
    def load_inputs(self) -> None:
        """Read the inputs in this thread. A single stream file is shown as soon as its first
        chunk is read and grows on screen as the rest arrives (exact counts computed here, in
        the thread, as it goes); folders, databases and merged streams appear session by
        session as each is read. A session that cannot be read is reported (a notification)
        and the others are still read."""
        from ctx_inspect.app.loader import FailedInput, iter_inputs

        request = self.request
        failures: list[str] = []
        for path in request.paths:
            if request.merge or not self._load_progressively(path):
                for item in iter_inputs(
                    [path] if not request.merge else list(request.paths),
                    request.profile_for,
                    format_name=request.format_name,
                    merge=request.merge,
                    count_exact=True,
                ):
                    if isinstance(item, FailedInput):
                        failures.append(item.error.one_line())
                        self.call_from_thread(self._failed, item.error.one_line())
                    else:
                        self.call_from_thread(self._loaded, [SessionState(item)])
                if request.merge:
                    break
        if failures and not self.states:
            self.load_error = failures[0]
        self.call_from_thread(self._done_loading)

    def _failed(self, text: str) -> None:
        self.notify(text, title="cannot read", severity="error", timeout=30)

    def _load_progressively(self, path: Path) -> bool:
        from ctx_inspect.app.loader import (
            LoadedSession,
            calibrate,
            collector_paused,
            counter_for,
            input_file,
            new_session,
            profile_spec,
            resolve_format,
            split_threads,
        )
        from ctx_inspect.sources.reader import read_span
        from ctx_inspect.sources.stream import display_name

        try:
            spec = resolve_format(path, self.request.format_name)
        except InspectorError:
            return False  # read by ``iter_inputs``, which reports why it cannot be
        source = input_file(path)
        if spec.parser is None or source.is_dir():
            return False
        profile = self.request.profile_for(profile_spec(source, spec))
        counter = counter_for(profile)
        parser = spec.make_parser(0, display_name(path))

        def read_back(span: SourceSpan) -> list[Message]:
            return parser.messages_at(read_span(source, span.offset, span.length), span)

        session = new_session(
            profile,
            counter,
            count_exact=False,
            body_reader=read_back,
            tokenize=False,
        )
        session.add_source(display_name(path), spec.name)
        loaded = LoadedSession(session, path, spec, profile, counter, parser, paths=[path])
        state = SessionState(loaded)
        exact = counter.info.exact
        self.call_from_thread(self._loaded, [state])
        with collector_paused(collect=True):
            self._feed(source, parser, state, counter, exact)
        session.tokenized = True
        state.loaded.profile = calibrate(profile, session)
        subs = [SessionState(sub) for sub in split_threads(loaded)]
        self.call_from_thread(self._loaded, subs)
        return True

    def _feed(
        self, path: Path, parser: Parser, state: SessionState, counter: TokenCounter, exact: bool
    ) -> None:
        from ctx_inspect.sources.reader import iter_chunks

        pending: list[Event] = []
        last = time.monotonic()
        for chunk in itertools.chain(iter_chunks(path), [b""]):  # read as it goes, not at once
            pending.extend(parser.feed(chunk) if chunk else parser.finish())
            if chunk and time.monotonic() - last < LOAD_BATCH_SECONDS:
                continue
            counts = None
            if exact:
                counts = counter.count_batch(
                    [e.message.text for e in pending if isinstance(e, MessageAdded)]
                )
            self.call_from_thread(self._grow, state, pending, counts)
            pending = []
            last = time.monotonic()

    def _grow(self, state: SessionState, events: list[Event], counts: list[int] | None) -> None:
        state.session.append(events, exact_counts=counts)
        state.grew()
        self._dirty = True

    def _done_loading(self) -> None:
        self.loading = False
        self._dirty = True

    def _loaded(self, states: list[SessionState]) -> None:
        self.states = [*self.states, *states]
        self.post_message(SessionsChanged())

    @work(exclusive=True, group="follow", exit_on_error=False)
    async def follow_input(self) -> None:
        from contextlib import aclosing

        from ctx_inspect.app.live import follow_session
        from ctx_inspect.app.loader import LoadedSession, calibrate, counter_for, profile_spec

        path = self.request.paths[0]
        spec, spool = await asyncio.to_thread(
            _format_of, path, self.request.format_name, self._stop_waiting
        )
        source = spool.path if spool is not None else path
        profile = self.request.profile_for(await asyncio.to_thread(profile_spec, source, spec))
        counter = counter_for(profile)
        state: SessionState | None = None
        updates = follow_session(path, spec, profile, counter=counter, spool=spool)
        async with aclosing(updates):
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
                state.grew()  # a replaced session was touched above
                self._dirty = True

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state is WorkerState.ERROR and event.worker.group in ("load", "follow"):
            error = event.worker.error
            text = error.one_line() if isinstance(error, InspectorError) else repr(error)
            self.loading = False
            self.load_error = text
            self.notify(text, title="cannot open", severity="error", timeout=30)
            self.post_message(SessionsChanged())

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

    def _flush_live(self) -> None:
        if self._dirty:
            self._dirty = False
            self.post_message(SessionsChanged())

    def on_sessions_changed(self, message: SessionsChanged) -> None:
        if not self.screen_stack:  # a load that ended while the app was closing
            return
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

    def summarizer(self) -> Summarizer:
        """The summarizer of the configuration file (local and deterministic by default)."""
        from ctx_inspect.app.config import build_summarizer

        return build_summarizer(self.request.config)

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

        def show(preview: Preview | None) -> None:
            if preview is not None:
                self.push_screen(DiffScreen(preview))

        self.push_screen(ActionPicker(state, action), show)

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
            self.push_screen(ExportScreen(state))

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
        if 0 <= index < len(self.states):
            self.active = index
            self.changed()

    def action_use_theme(self, name: str) -> None:
        if name in self._themes:
            self.theme = name
            self.changed()

    def theme_names(self) -> list[str]:
        return list(self._themes)

    # == end of acting ========================================================================


def _format_of(
    path: Path, format_name: str | None, stop: threading.Event
) -> tuple[FormatSpec, Spool | None]:
    """The format of the input to follow, and the spool of a stream (see ``follow_format``);
    a file that does not exist yet is waited for when its format is given."""
    from ctx_inspect.app.loader import follow_format
    from ctx_inspect.formats.registry import get_format
    from ctx_inspect.sources.stream import is_stream

    if format_name and not path.exists() and not is_stream(path):
        return get_format(format_name), None
    return follow_format(path, format_name, stop)
