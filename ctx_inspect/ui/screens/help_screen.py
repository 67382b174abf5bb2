"""Every key of the app and of the current view, grouped, read from the bindings themselves (so
the help never drifts from the keys), and a line on the command palette."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Label, Static

from ctx_inspect.ui.commands import bindings_of

GROUPS: tuple[tuple[str, frozenset[str]], ...] = (
    ("views", frozenset({"switch_mode", "close"})),
    (
        "cursor & replay",
        frozenset(
            {"step", "marker", "cycle_kind", "play", "speed", "live_end", "move", "edge"}
            | {"cursor_up", "cursor_down", "page_up", "page_down", "first", "last", "select"}
        ),
    ),
    ("act", frozenset({"act", "undo", "export", "apply", "discard"})),
    ("explain & tune", frozenset({"explain", "tune", "rerun", "sweep", "sort", "entry"})),
    ("sessions & themes", frozenset({"cycle_session", "cycle_theme", "show_session", "use_theme"})),
)
OTHER = "other"
LEFT_GROUPS = ("views", "cursor & replay")


@dataclass(frozen=True)
class KeyLine:
    group: str
    key: str
    description: str
    where: str


def group_of(action: str) -> str:
    name = action.split("(", 1)[0].rsplit(".", 1)[-1]
    for group, names in GROUPS:
        if name in names:
            return group
    return OTHER


def key_lines(screen: Screen[Any]) -> list[KeyLine]:
    """The keys of the app, of ``screen`` and of ctx-inspect's widgets on it, in that order."""
    app = screen.app
    sources: list[tuple[str, list[Binding]]] = [("app", bindings_of(type(app)))]
    sources.append((_screen_name(screen), bindings_of(type(screen))))
    seen_types: set[type] = set()
    for widget in screen.query("*"):
        kind = type(widget)
        if kind in seen_types or not kind.__module__.startswith("ctx_inspect."):
            continue
        seen_types.add(kind)
        sources.append((kind.__name__, bindings_of(kind)))
    out: list[KeyLine] = []
    seen: set[tuple[str, str]] = set()
    for where, bindings in sources:
        for binding in bindings:
            if (binding.key, binding.action) in seen:
                continue
            seen.add((binding.key, binding.action))
            out.append(
                KeyLine(
                    group_of(binding.action),
                    app.get_key_display(binding),
                    binding.description or binding.action,
                    where,
                )
            )
    return out


def _screen_name(screen: Screen[Any]) -> str:
    name = type(screen).__name__.removesuffix("Screen")
    return f"{name.lower() or 'this'} view"


class HelpScreen(ModalScreen[None]):
    """The keys, grouped: views, cursor & replay, act, explain & tune, sessions & themes."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > #help {
        width: 100%;
        height: auto;
        max-height: 100%;
        margin: 1 2;
        border: round $primary;
        background: $surface;
        padding: 0 1;
    }
    HelpScreen #help-title { text-style: bold; width: 100%; }
    HelpScreen #help-columns { height: auto; }
    HelpScreen .help-column { width: 1fr; padding-right: 2; }
    HelpScreen #help-palette { height: auto; color: $text-muted; }
    """
    BINDINGS = [
        Binding("escape", "close", "Close"),
        Binding("question_mark", "close", "Close", show=False),
        Binding("q", "close", "Close", show=False),
    ]

    def __init__(self, view: Screen[Any]) -> None:
        super().__init__()
        self.view = view
        self.lines = key_lines(view)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Label(
                f"Keys — the app's and the {_screen_name(self.view)}'s (escape closes)",
                id="help-title",
            )
            with Horizontal(id="help-columns"):
                left = [g for g, _ in GROUPS if g in LEFT_GROUPS]
                right = [g for g, _ in GROUPS if g not in LEFT_GROUPS] + [OTHER]
                yield Static(self._column(left), classes="help-column", id="help-left")
                yield Static(self._column(right), classes="help-column", id="help-right")
            yield Static(
                "ctrl+p  command palette: every action above by name (and each session and "
                "theme by name); type to filter, enter runs it.",
                id="help-palette",
            )

    def _column(self, groups: list[str]) -> Text:
        text = Text()
        for group in groups:
            lines = [line for line in self.lines if line.group == group]
            if not lines:
                continue
            if text:
                text.append("\n")
            text.append(f"{group}\n", Style(bold=True, underline=True))
            for line in lines:
                text.append(f"{line.key:>10}", Style(bold=True))
                text.append(f"  {line.description}")
                text.append(f"  ({line.where})\n", Style(dim=True))
        text.rstrip()
        return text

    def action_close(self) -> None:
        self.dismiss(None)
