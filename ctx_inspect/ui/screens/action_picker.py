"""Choose an action (prune, compact, truncate) and whose policy to act with, then compute its
preview at the cursor in a thread; the result opens the diff."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rich.text import Text
from textual import on, work
from textual.actions import SkipAction
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, LoadingIndicator, RadioButton, RadioSet, Select, Static
from textual.worker import Worker, WorkerState

from ctx_inspect.core.diff import ActionDiff
from ctx_inspect.core.policies.base import Action, ContextItem, PolicyResult, Summarizer
from ctx_inspect.core.profiles import Profile, make_profile, profile_names
from ctx_inspect.errors import ConfigError, InspectorError
from ctx_inspect.ui import plain
from ctx_inspect.ui.state import SessionState

ACTIONS = (Action.PRUNE, Action.COMPACT, Action.TRUNCATE)


@dataclass(frozen=True)
class Preview:
    """What an action would do at one step, before anything is changed."""

    state: SessionState
    step: int
    action: Action
    profile: Profile
    items: list[ContextItem]
    result: PolicyResult
    diff: ActionDiff


def policy_profile(state: SessionState, name: str) -> Profile:
    """The session's own profile, or another agent's profile over the session's window."""
    if name == state.profile.name:
        return state.profile
    try:
        return make_profile(name, {"context_window": state.profile.context_window})
    except ConfigError:
        return make_profile(name, {})


def error_text(error: BaseException | None) -> str:
    """What went wrong, on one line that is safe to show: it may quote an input or a server
    (control characters are shown visibly; show it as text, never as markup)."""
    if isinstance(error, InspectorError):
        text = error.one_line()
    elif isinstance(error, OSError) and error.strerror:
        where = f": {error.filename}" if error.filename else ""
        text = f"{error.strerror}{where}"
    else:
        text = repr(error)
    return plain.one_line(text)


class ActionPicker(ModalScreen["Preview | None"]):
    """The action and the profile whose policy acts; enter computes the preview (with the
    summarizer ``summarizer`` makes)."""

    DEFAULT_CSS = """
    ActionPicker {
        align: center middle;
    }
    ActionPicker > #picker {
        width: 64;
        height: auto;
        border: round $primary;
        background: $surface;
        padding: 0 1;
    }
    ActionPicker #picker-title { text-style: bold; }
    ActionPicker RadioSet { width: 100%; }
    ActionPicker Select { width: 100%; }
    ActionPicker #picker-buttons { height: auto; margin-top: 1; }
    ActionPicker #picker-buttons Button { margin-right: 2; }
    ActionPicker #picker-progress { height: 1; display: none; }
    ActionPicker.busy #picker-progress { display: block; }
    ActionPicker #picker-error { color: $error; height: auto; }
    """
    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("enter", "preview", "Preview", priority=True),
    ]

    def __init__(
        self, state: SessionState, summarizer: Callable[[], Summarizer], action: str = "prune"
    ) -> None:
        super().__init__()
        self.state = state
        self.summarizer = summarizer
        self.action = Action(action)
        self.step = state.step() or 1
        self.busy = False

    def compose(self) -> ComposeResult:
        with Vertical(id="picker"):
            yield Label(
                Text(f"Act on the context at step {self.step} of {self.state.step_count()}"),
                id="picker-title",
            )
            yield Label("Action")
            with RadioSet(id="picker-action"):
                for action in ACTIONS:
                    yield RadioButton(action.value, value=action is self.action, name=action.value)
            yield Label("Policy of the profile")
            yield Select(
                [(_profile_label(name, self.state), name) for name in profile_names()],
                value=self.state.profile.name,
                allow_blank=False,
                id="picker-profile",
            )
            yield Static(
                "Another agent's profile keeps this session's window; nothing changes "
                "until you apply the diff.",
                id="picker-note",
            )
            with Horizontal(id="picker-buttons"):
                yield Button("Preview (enter)", variant="primary", id="picker-preview")
                yield Button("Cancel (esc)", id="picker-cancel")
            yield LoadingIndicator(id="picker-progress")
            yield Static(id="picker-error")

    def on_mount(self) -> None:
        self.query_one("#picker-preview", Button).focus()

    @property
    def chosen_action(self) -> Action:
        pressed = self.query_one(RadioSet).pressed_button
        if pressed is not None and pressed.name:
            return Action(pressed.name)
        return self.action

    @property
    def chosen_profile(self) -> str:
        value = self.query_one(Select).value
        return value if isinstance(value, str) else self.state.profile.name

    @on(Button.Pressed, "#picker-preview")
    def _preview_pressed(self) -> None:
        self.action_preview()

    @on(Button.Pressed, "#picker-cancel")
    def _cancel_pressed(self) -> None:
        self.action_cancel()

    def action_cancel(self) -> None:
        self.workers.cancel_group(self, "preview")
        self.dismiss(None)

    def action_preview(self) -> None:
        if any(select.expanded for select in self.query(Select)):
            raise SkipAction()  # enter picks the option of the open list
        if self.busy:
            return
        self.busy = True
        self.add_class("busy")
        self.query_one("#picker-error", Static).update("")
        self.compute(self.chosen_action, self.chosen_profile)

    @work(thread=True, exclusive=True, group="preview", exit_on_error=False)
    def compute(self, action: Action, profile_name: str) -> None:
        profile = policy_profile(self.state, profile_name)
        items, result, diff = self.state.preview(action, profile, self.summarizer(), self.step)
        preview = Preview(self.state, self.step, action, profile, items, result, diff)
        self.app.call_from_thread(self._computed, preview)

    def _computed(self, preview: Preview) -> None:
        self.busy = False
        self.remove_class("busy")
        self.dismiss(preview)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group == "preview" and event.state is WorkerState.ERROR:
            self.busy = False
            self.remove_class("busy")
            text = error_text(event.worker.error)
            self.query_one("#picker-error", Static).update(Text(text))
            self.notify(text, title="cannot compute the preview", severity="error", markup=False)


def _profile_label(name: str, state: SessionState) -> str:
    return f"{name} (this session's)" if name == state.profile.name else name
