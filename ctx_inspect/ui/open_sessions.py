"""The sessions the dashboard has open: which one is shown, whether they are still being read,
and the request they were opened with. The state every screen talks to (``SessionScreen``): the
app owns it and its background work changes it; screens read it and move its cursors."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ctx_inspect.app.loader import LoadedSession
from ctx_inspect.core.policies.base import Summarizer
from ctx_inspect.core.profiles import Profile
from ctx_inspect.formats.registry import FormatSpec
from ctx_inspect.ui.state import SessionState

ProfileFactory = Callable[[FormatSpec], Profile]


@dataclass(frozen=True)
class OpenRequest:
    """What to open: saved files, or one file to follow."""

    paths: tuple[Path, ...]
    profile_for: ProfileFactory
    format_name: str | None = None
    follow: bool = False
    merge: bool = False
    config: Path | None = None  # the configuration file ([summarizer] for compact, tune, explain)


class OpenSessions:
    """The open sessions, the one shown (``active``), and how reading them goes."""

    def __init__(self, request: OpenRequest) -> None:
        self.request = request
        self.states: list[SessionState] = []
        self.active = 0
        self.loading = True  # inputs are still being read
        self.load_error: str | None = None  # why nothing could be shown

    @property
    def shown(self) -> SessionState | None:
        """The session shown, or None while there is none."""
        if not self.states:
            return None
        return self.states[min(self.active, len(self.states) - 1)]

    @property
    def status(self) -> str:
        """What the views say while no session is shown."""
        if self.loading:
            return "loading…"
        return self.load_error or "no session to show"

    def add(self, states: Iterable[SessionState]) -> None:
        self.states = [*self.states, *states]

    def state_of(self, loaded: LoadedSession) -> SessionState | None:
        """The state showing ``loaded``, if it is shown already."""
        return next((state for state in self.states if state.loaded is loaded), None)

    def show(self, index: int) -> bool:
        """Show session ``index``; False when there is none."""
        if not 0 <= index < len(self.states):
            return False
        self.active = index
        return True

    def cycle(self, delta: int) -> bool:
        """Show the session ``delta`` places on (round the list); False when none is open."""
        return bool(self.states) and self.show((self.active + delta) % len(self.states))

    def summarizer(self) -> Summarizer:
        """The summarizer of the configuration file (local and deterministic by default)."""
        from ctx_inspect.app.config import build_summarizer

        return build_summarizer(self.request.config)

    def input_paths(self) -> list[Path]:
        """Every file read to open the sessions (an export must not overwrite one)."""
        paths = list(self.request.paths)
        for state in self.states:
            paths.extend([state.loaded.path, *state.loaded.paths])
        return paths

    def same_input(self, state: SessionState) -> list[SessionState]:
        """The sessions read from ``state``'s input (a folder or a database holds several)."""
        return [s for s in self.states if s.loaded.path == state.loaded.path]
