"""The sweep's axes, asked for in a small form: one per line, ``key=a,b,c`` or
``key=start:stop:step``, checked (known settings, at most ``MAX_COMBINATIONS``) before the form
closes."""

from __future__ import annotations

import math

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static, TextArea

from ctx_inspect.core.profiles import Profile, check_keys
from ctx_inspect.core.sweep import parse_axis
from ctx_inspect.errors import ConfigError
from ctx_inspect.ui import plain

MAX_COMBINATIONS = 5000


class SweepForm(ModalScreen["list[str] | None"]):
    """The axes of a sweep, one per line: ``key=a,b,c`` or ``key=start:stop:step``."""

    DEFAULT_CSS = """
    SweepForm { align: center middle; }
    SweepForm > #sweep-form {
        width: 80; height: auto; border: round $primary; background: $surface; padding: 0 1;
    }
    SweepForm TextArea { height: 8; }
    SweepForm #sweep-error { color: $error; height: auto; }
    SweepForm #sweep-buttons { height: 1; margin-top: 1; }
    SweepForm #sweep-buttons Button { margin-right: 2; }
    """
    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+r", "run", "Run sweep", priority=True),
    ]

    def __init__(self, profile: Profile, text: str) -> None:
        super().__init__()
        self.profile = profile
        self.text = text

    def compose(self) -> ComposeResult:
        with Vertical(id="sweep-form"):
            yield Label(f"Sweep {self.profile.name}: one axis per line")
            yield Label("key=a,b,c  or  key=start:stop:step (inclusive)")
            yield TextArea(self.text, id="sweep-axes", soft_wrap=False)
            yield Static(id="sweep-error")
            with Horizontal(id="sweep-buttons"):
                yield Button("Run (ctrl+r)", variant="primary", compact=True, id="sweep-run")
                yield Button("Cancel (esc)", compact=True, id="sweep-cancel")

    def on_mount(self) -> None:
        self.query_one(TextArea).focus()

    def axes(self) -> list[str]:
        text = self.query_one(TextArea).text
        return [line.strip() for line in text.splitlines() if line.strip()]

    def check(self, lines: list[str]) -> int:
        """The number of combinations, or ConfigError."""
        if not lines:
            raise ConfigError("no axes", "give at least one line key=values")
        parsed = [parse_axis(line) for line in lines]
        check_keys(self.profile.name, [key for key, _ in parsed], "sweep")
        total = math.prod(len(values) for _, values in parsed)
        if total > MAX_COMBINATIONS:
            raise ConfigError(
                "sweep too large", f"{total:,} combinations (at most {MAX_COMBINATIONS:,})"
            )
        if total == 0:
            raise ConfigError("empty sweep", "an axis has no values")
        return total

    @on(Button.Pressed, "#sweep-run")
    def action_run(self) -> None:
        lines = self.axes()
        try:
            self.check(lines)
        except ConfigError as exc:
            self.query_one("#sweep-error", Static).update(Text(plain.one_line(exc.one_line())))
            return
        self.dismiss(lines)

    @on(Button.Pressed, "#sweep-cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
