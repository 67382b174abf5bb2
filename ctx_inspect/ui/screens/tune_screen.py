"""Tune: the profile's settings as a form (validated as you type), a replay under the tuned
settings compared with the original, and a sweep over axes of settings in a sortable table."""

from __future__ import annotations

from dataclasses import replace
from time import monotonic
from typing import TYPE_CHECKING, Any

from rich.style import Style
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import (
    DataTable,
    Input,
    Label,
    LoadingIndicator,
    ProgressBar,
    Static,
)
from textual.worker import Worker, WorkerState, get_current_worker

from ctx_inspect.core.profiles import Profile, make_profile
from ctx_inspect.core.replay import Decision, ReplayResult, compare
from ctx_inspect.core.session import Session
from ctx_inspect.core.sweep import ROW_KEYS, SweepRow, grid, parse_axis
from ctx_inspect.errors import ConfigError
from ctx_inspect.ui import plain
from ctx_inspect.ui.screens.action_picker import error_text
from ctx_inspect.ui.screens.base import SessionScreen
from ctx_inspect.ui.screens.sweep_form import SweepForm
from ctx_inspect.ui.settings_form import (
    Setting,
    as_sets,
    explicit,
    field_text,
    parse_value,
    same_settings,
    settings_of,
    show_value,
)
from ctx_inspect.ui.state import SessionState
from ctx_inspect.ui.widgets.curve_compare import CurveCompare, CurvePoint
from ctx_inspect.ui.widgets.zone_gauge import rich_color

if TYPE_CHECKING:
    from ctx_inspect.app.sweeper import SweepInput
    from ctx_inspect.ui.open_sessions import OpenSessions

FLUSH_SECONDS = 0.1
FORM_HELP = (
    "up / down: next field · enter or ctrl+r: re-run the replay · ctrl+s: sweep · "
    "tab: to the results (r, s, o) · escape: back"
)
DECISION_KINDS = ("compaction", "prune", "final_turn", "dropped", "truncated")


# -- the replay's readout -----------------------------------------------------------------------


def curve(result: ReplayResult) -> list[CurvePoint]:
    return [
        CurvePoint(s.step, s.tokens, frozenset(d.kind for d in s.decisions)) for s in result.steps
    ]


def counts(decisions: list[Decision]) -> dict[str, int]:
    kinds = [d.kind for d in decisions]
    return {kind: kinds.count(kind) for kind in DECISION_KINDS}


def _sort_key(value: Any) -> tuple[int, Any]:
    if value is None:
        return (2, "")
    if isinstance(value, bool | int | float):
        return (0, float(value))
    return (1, str(value))


# -- the screen ----------------------------------------------------------------------------------


class TuneScreen(SessionScreen):
    """Change settings, replay, compare; sweep a grid of settings."""

    DEFAULT_CSS = """
    TuneScreen #tune { height: 1fr; }
    TuneScreen #tune-form { width: 44; border-right: solid $panel; padding: 0 1; }
    TuneScreen #tune-form-title { text-style: bold; margin-bottom: 1; }
    TuneScreen .field { height: 1; }
    TuneScreen .field Label { width: 26; }
    TuneScreen .field Input { width: 1fr; }
    TuneScreen .field-error { color: $error; height: auto; display: none; }
    TuneScreen .field-error.shown { display: block; }
    TuneScreen .changed Label { text-style: bold; }
    TuneScreen #tune-help { color: $text-muted; margin-top: 1; }
    TuneScreen #tune-results { width: 1fr; padding: 0 1; }
    TuneScreen #tune-status { height: auto; }
    TuneScreen #tune-progress { height: 1; display: none; }
    TuneScreen #tune-progress.busy { display: block; }
    TuneScreen #tune-progress LoadingIndicator { width: 8; height: 1; }
    TuneScreen #tune-curves { height: 1fr; min-height: 8; }
    TuneScreen #tune-readout { height: auto; }
    TuneScreen #sweep { height: 1fr; display: none; border-top: solid $panel; }
    TuneScreen #sweep.shown { display: block; }
    TuneScreen #sweep-head { height: 1; }
    TuneScreen #sweep-progress { width: 40; }
    TuneScreen #sweep-count { width: 1fr; padding-left: 1; }
    TuneScreen #sweep-table { height: 1fr; }
    """
    BINDINGS = [
        Binding("escape", "close", "Back"),
        Binding("r", "rerun", "Re-run replay"),
        Binding("ctrl+r", "rerun", "Re-run replay", show=False),
        Binding("s", "sweep", "Sweep…"),
        Binding("ctrl+s", "sweep", "Sweep…", show=False),
        Binding("o", "sort", "Sort sweep"),
        Binding("down", "field(1)", "Next setting", show=False),
        Binding("up", "field(-1)", "Prev setting", show=False),
    ]

    def __init__(self, prefill: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.prefill = dict(prefill or {})
        self.state: SessionState | None = None
        self.settings: list[Setting] = []
        self.tuned: Profile | None = None
        self.errors: dict[str, str] = {}
        self.changes: dict[str, Any] = {}
        self.original: ReplayResult | None = None
        self.result: ReplayResult | None = None
        self._original_key: tuple[int, int, int] | None = None
        # the session as the replay command reads it, and the profile it was read with
        self._read: tuple[Session, Profile] | None = None
        self._read_key: tuple[int, int, int] | None = None
        self.axes: list[str] = []
        self.sweep_rows: list[SweepRow] = []
        self.sweep_total = 0
        self.sort_column: str | None = None
        self.sort_reverse = False

    # -- layout ----------------------------------------------------------------------------

    def compose_body(self) -> ComposeResult:
        self.state = self.sessions.shown
        profile = self.state.profile if self.state is not None else None
        self.settings = settings_of(profile) if profile is not None else []
        with Horizontal(id="tune"):
            with VerticalScroll(id="tune-form"):
                title = f"settings of {profile.name}" if profile else "no session"
                yield Label(Text(title), id="tune-form-title")
                for setting in self.settings:
                    value = self.prefill.get(setting.name, getattr(profile, setting.name))
                    with Horizontal(classes="field", id=f"field-{setting.name}"):
                        yield Label(setting.name)
                        yield Input(field_text(value), compact=True, id=f"set-{setting.name}")
                    yield Static(classes="field-error", id=f"err-{setting.name}")
                yield Static(FORM_HELP, id="tune-help")
            with Vertical(id="tune-results"):
                yield Static(id="tune-status")
                with Horizontal(id="tune-progress"):
                    yield LoadingIndicator()
                    yield Static(id="tune-progress-text")
                yield CurveCompare(id="tune-curves")
                yield Static(id="tune-readout")
                with Vertical(id="sweep"):
                    with Horizontal(id="sweep-head"):
                        yield ProgressBar(id="sweep-progress", show_eta=False)
                        yield Static(id="sweep-count")
                    yield DataTable(id="sweep-table", cursor_type="row")

    def on_mount(self) -> None:
        self.validate_form()
        unknown = [key for key in self.prefill if key not in {s.name for s in self.settings}]
        if unknown:
            self.notify(f"not a setting of this profile: {', '.join(unknown)}", severity="warning")
        if self.settings:
            name = next(iter(self.prefill), self.settings[0].name)
            if name not in {s.name for s in self.settings}:
                name = self.settings[0].name
            self.query_one(f"#set-{name}", Input).focus()
        self.action_rerun()  # the curves at once (the same curve twice until a change)

    def watch_shown(self, state: SessionState | None) -> None:
        if state is not self.state:
            name = plain.one_line(self.state.name) if self.state else "-"
            self.query_one("#tune-status", Static).update(Text(f"tuning {name} (opened from it)"))

    # -- the form --------------------------------------------------------------------------

    @on(Input.Changed)
    def _changed(self, event: Input.Changed) -> None:
        if event.input.id and event.input.id.startswith("set-"):
            self.validate_form(event.input.id.removeprefix("set-"))

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        self.action_rerun()

    def validate_form(self, edited: str | None = None) -> None:
        """Parse every field and build the profile; errors go under their field."""
        state = self.state
        if state is None:
            return
        base = state.profile
        errors: dict[str, str] = {}
        changes: dict[str, Any] = {}
        for setting in self.settings:
            raw = self.query_one(f"#set-{setting.name}", Input).value
            try:
                value = parse_value(setting, raw)
            except ValueError as exc:
                errors[setting.name] = str(exc)
                continue
            if value != getattr(base, setting.name):
                changes[setting.name] = value
        tuned: Profile | None = None
        if not errors:
            try:
                tuned = make_profile(base.name, {**explicit(base), **changes})
            except ConfigError as exc:
                key = next(
                    (s.name for s in self.settings if f"{base.name}.{s.name}" in exc.message),
                    edited or (next(iter(changes), None)),
                )
                errors[key or "_"] = exc.message
        self.errors, self.changes, self.tuned = errors, changes, tuned
        for setting in self.settings:
            message = errors.get(setting.name, "")
            widget = self.query_one(f"#err-{setting.name}", Static)
            widget.update(Text(plain.one_line(message)))
            widget.set_class(bool(message), "shown")
            field = self.query_one(f"#field-{setting.name}")
            field.set_class(setting.name in changes, "changed")
        self._show_status()

    def _show_status(self) -> None:
        status = Text()
        if self.tuned is None:
            text = "; ".join(f"{k}: {v}" if k != "_" else v for k, v in self.errors.items())
            status.append("invalid settings: ", Style(color=rich_color(self, "error"), bold=True))
            status.append(plain.one_line(text, 300))
            status.append(" (fix them to re-run)")
        elif self.changes:
            shown = ", ".join(f"{k}={show_value(v)}" for k, v in self.changes.items())
            status.append(f"{len(self.changes)} changed: ", Style(bold=True))
            status.append(plain.one_line(shown, 300))
            status.append("  ·  enter or ctrl+r: re-run the replay  ·  ctrl+s: sweep")
        else:
            status.append("the session's settings; change one, then enter or ctrl+r: re-run")
        self.query_one("#tune-status", Static).update(status)

    # -- replay ----------------------------------------------------------------------------

    def action_rerun(self) -> None:
        if self.state is None:
            return
        if self.tuned is None:
            self.notify("fix the invalid settings first", title="cannot re-run", severity="error")
            return
        self._busy("replaying under the original and the tuned settings…")
        self.run_replays(self.state, self.tuned)

    def _busy(self, text: str | None) -> None:
        progress = self.query_one("#tune-progress")
        progress.set_class(text is not None, "busy")
        self.query_one("#tune-progress-text", Static).update(text or "")

    @work(thread=True, exclusive=True, group="replay", exit_on_error=False)
    def run_replays(self, state: SessionState, tuned: Profile) -> None:
        from ctx_inspect.app.commands import replay_read

        app = self.app
        worker = get_current_worker()
        summarizer = self.sessions.summarizer()
        key = (id(state), len(state.branches), state.version)
        if self._read_key != key or self._read is None:
            self._read = replay_input(self.sessions, state)
            self._read_key = key
        session, read_with = self._read
        original = self.original if self._original_key == key else None
        if original is None:
            original = replay_read(session, read_with, read_with, summarizer)
        if same_settings(tuned, read_with):
            result = original
        else:
            result = replay_read(session, read_with, tuned, summarizer)
        if not worker.is_cancelled:
            app.call_from_thread(self._replayed, key, original, result, tuned)

    def _replayed(
        self,
        key: tuple[int, int, int],
        original: ReplayResult,
        result: ReplayResult,
        tuned: Profile,
    ) -> None:
        self._busy(None)
        self._original_key = key
        self.original, self.result = original, result
        label = ", ".join(f"{k}={show_value(v)}" for k, v in self.changes.items()) or "unchanged"
        threshold = tuned.threshold() if tuned.has_threshold() else None
        self.query_one(CurveCompare).set_curves(
            curve(original), curve(result), labels=("original", "tuned"), threshold=threshold
        )
        self.query_one("#tune-readout", Static).update(self._readout(original, result, label))

    def _readout(self, original: ReplayResult, result: ReplayResult, label: str) -> Text:
        text = Text()
        for name, replayed in (("original", original), (f"tuned ({label})", result)):
            c = counts(replayed.decisions)
            step, peak = replayed.peak()
            text.append(f"{plain.one_line(name, 80)}: ", Style(bold=True))
            text.append(
                f"{c['compaction']} compactions · {c['prune']} prunes · "
                f"{c['final_turn']} final turns · {c['dropped']} dropped · "
                f"peak {peak:,} at step {step} · reproduces {replayed.agreement:.0%} "
                f"of the recording's {len(replayed.recorded)} decisions\n"
            )
        agreement, differences = compare(original.decisions, result.decisions)
        if not differences:
            text.append("tuned vs original: the same decisions at every step")
            return text
        text.append(
            f"tuned vs original: {agreement:.0%} of the original's decisions kept; "
            f"they differ at {len(differences)} steps: "
        )
        shown = [
            f"{d['step']} ({'+'.join(d['replayed']) or 'none'} instead of "
            f"{'+'.join(d['recorded']) or 'none'})"
            for d in differences[:8]
        ]
        text.append(", ".join(shown))
        if len(differences) > 8:
            text.append(f", … {len(differences) - 8} more")
        return text

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group in ("replay", "sweep") and event.state is WorkerState.ERROR:
            self._busy(None)
            text = error_text(event.worker.error)
            self.notify(text, title=f"{event.worker.group} failed", severity="error", markup=False)
            if event.worker.group == "sweep":
                self.query_one("#sweep-count", Static).update(Text(text))

    # -- sweep -----------------------------------------------------------------------------

    def action_sweep(self) -> None:
        if self.state is None:
            return
        if self.tuned is None:
            self.notify("fix the invalid settings first", title="cannot sweep", severity="error")
            return
        tuned = self.tuned
        window = tuned.context_window
        default = "\n".join(self.axes) or f"context_window={window // 2},{window},{window * 2}"
        self.app.push_screen(SweepForm(tuned, default), self._start_sweep)

    def _start_sweep(self, axes: list[str] | None) -> None:
        if not axes or self.state is None or self.tuned is None:
            return
        parsed = [parse_axis(line) for line in axes]
        combinations = grid(parsed)
        self.axes = axes
        self.sweep_rows = []
        self.sweep_total = len(combinations)
        self.sort_column, self.sort_reverse = None, False
        table = self.query_one("#sweep-table", DataTable)
        table.clear(columns=True)
        # fixed widths: rows arrive after the first paint (see ExplainScreen.on_mount)
        for key, values in parsed:
            width = max(len(key), *(len(show_value(v)) for v in values), 6) + 2
            table.add_column(key, key=f"setting:{key}", width=min(width, 40))
        for key in ROW_KEYS:
            table.add_column(key.replace("_", " "), key=key, width=max(len(key), 9) + 2)
        table.add_column("error", key="error", width=60)
        self.query_one("#sweep").add_class("shown")
        self.query_one("#sweep-progress", ProgressBar).update(total=len(combinations), progress=0)
        self._count()
        spec = sweep_input(self.sessions, self.state, self.tuned)
        self.run_sweep(spec, combinations)

    @work(thread=True, exclusive=True, group="sweep", exit_on_error=False)
    def run_sweep(self, spec: SweepInput, combinations: list[dict[str, Any]]) -> None:
        from ctx_inspect.app.sweeper import run_sweep

        app = self.app
        worker = get_current_worker()
        summarizer = self.sessions.summarizer()
        batch: list[SweepRow] = []
        last = monotonic()

        def on_row(index: int, row: SweepRow) -> None:
            nonlocal last
            batch.append(row)
            if monotonic() - last >= FLUSH_SECONDS or index == len(combinations) - 1:
                last = monotonic()
                rows = batch.copy()
                batch.clear()
                if not worker.is_cancelled:
                    app.call_from_thread(self._rows_arrived, rows)

        run_sweep(spec, combinations, summarizer, workers=None, on_row=on_row)
        if batch and not worker.is_cancelled:
            app.call_from_thread(self._rows_arrived, batch.copy())

    def _rows_arrived(self, rows: list[SweepRow]) -> None:
        self.sweep_rows.extend(rows)
        self.query_one("#sweep-progress", ProgressBar).update(progress=len(self.sweep_rows))
        self._count()
        self._fill_sweep()

    def _count(self) -> None:
        done = len(self.sweep_rows)
        state = "done" if done >= self.sweep_total else "running"
        sort = ""
        if self.sort_column:
            sort = f" · sorted by {self.sort_column.removeprefix('setting:')}"
            sort += " (descending)" if self.sort_reverse else ""
        self.query_one("#sweep-count", Static).update(
            f"rows {done} / {self.sweep_total} ({state}){sort} · o or a header click: sort"
        )

    def _value(self, row: SweepRow, column: str) -> Any:
        if column.startswith("setting:"):
            return row.settings.get(column.removeprefix("setting:"))
        return getattr(row, column)

    def _fill_sweep(self) -> None:
        table = self.query_one("#sweep-table", DataTable)
        columns = [str(key.value) for key in table.columns]
        rows = list(enumerate(self.sweep_rows))
        if self.sort_column is not None:
            column = self.sort_column
            rows.sort(key=lambda pair: _sort_key(self._value(pair[1], column)))
            if self.sort_reverse:
                rows.reverse()
        table.clear()
        for index, row in rows:
            table.add_row(*(_cell(self._value(row, c), c) for c in columns), key=str(index))

    def action_sort(self) -> None:
        table = self.query_one("#sweep-table", DataTable)
        columns = [str(key.value) for key in table.columns]
        if not columns:
            return
        current = columns.index(self.sort_column) if self.sort_column in columns else -1
        self.sort_column = columns[(current + 1) % len(columns)]
        self.sort_reverse = False
        self._count()
        self._fill_sweep()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        column = str(event.column_key.value)
        if column == self.sort_column:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_column, self.sort_reverse = column, False
        self._count()
        self._fill_sweep()

    def action_close(self) -> None:
        self.dismiss()

    def action_field(self, delta: int) -> None:
        """Move between the settings' fields (up / down)."""
        inputs = [self.query_one(f"#set-{s.name}", Input) for s in self.settings]
        focused = self.focused
        if not inputs or not isinstance(focused, Input) or focused not in inputs:
            return
        inputs[(inputs.index(focused) + delta) % len(inputs)].focus()


def _cell(value: Any, column: str) -> Text:
    if value is None:
        return Text("")
    if column in ("survived", "agreement") and isinstance(value, float):
        return Text(f"{value:.0%}", justify="right")
    if isinstance(value, bool):
        return Text(show_value(value))
    if isinstance(value, int):
        return Text(f"{value:,}", justify="right")
    if isinstance(value, float):
        return Text(f"{value:g}", justify="right")
    return Text(plain.one_line(str(value), 80))


def replay_input(sessions: OpenSessions, state: SessionState) -> tuple[Session, Profile]:
    """The session the tune screen replays, read as ``replay`` reads it (the file again, with
    the profile's estimator and the exact counts ``stats`` makes), so that both show the same
    figures; a what-if branch is replayed as it is (it was made with the profile's estimator).
    With the profile it was read with."""
    from ctx_inspect.app.sweeper import load_for_sweep
    from ctx_inspect.sources.stream import spooled

    if state.branches:
        return state.session, state.profile
    spec = sweep_input(sessions, state, state.profile)
    return load_for_sweep(replace(spec, paths=tuple(spooled(p) for p in spec.paths)))


def sweep_input(sessions: OpenSessions, state: SessionState, profile: Profile) -> SweepInput:
    """How a sweep worker reads this session by itself, with ``profile``'s settings."""
    from ctx_inspect.app.sweeper import SweepInput

    request = sessions.request
    loaded = state.loaded
    if request.merge and len(request.paths) > 1:
        paths, index, format_name = tuple(request.paths), 0, request.format_name
    else:
        same = sessions.same_input(state)
        paths = (loaded.path,)
        index = same.index(state) if state in same else 0
        format_name = loaded.format.name
    return SweepInput(
        paths=paths,
        format_name=format_name,
        profile_name=profile.name,
        config=None,
        sets=as_sets(profile),
        merge=request.merge,
        index=index,
    )
