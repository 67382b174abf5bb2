"""Why the forced final turn, dropped output or compaction at (or nearest before) the cursor
happened, and which single setting would have avoided it (enter on one: tune with it)."""

from __future__ import annotations

from typing import Any

from rich.style import Style
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Label, LoadingIndicator, Static
from textual.worker import Worker, WorkerState, get_current_worker

from ctx_inspect.core.counters import Counters
from ctx_inspect.core.explain import NOT_REPRODUCED, Explainer, Explanation, how_found
from ctx_inspect.ui import plain
from ctx_inspect.ui.screens.action_picker import error_text
from ctx_inspect.ui.screens.base import SessionScreen
from ctx_inspect.ui.state import SessionState
from ctx_inspect.ui.widgets.counters_panel import CountersPanel
from ctx_inspect.ui.widgets.zone_gauge import rich_color

EVENT_NAMES = {
    "final_turn": "forced final turn",
    "dropped_tool_output": "dropped tool output",
    "compaction": "compaction",
    "prune": "prune",
    "context_error": "context-limit error",
}

CONTRIBUTOR_COLUMNS = (("step", 6), ("role / kind", 24), ("tool", 24), ("tokens", 10), ("id", 40))
AVOID_COLUMNS = (("setting", 24), ("now", 10), ("avoided at", 10), ("change", 10), ("", 40))


def pick(entries: list[Explanation], step: int) -> list[Explanation]:
    """The entries of the latest step at or before ``step`` that has any."""
    before = [e for e in entries if e.step <= step]
    if not before:
        return []
    latest = max(e.step for e in before)
    return [e for e in before if e.step == latest]


class ExplainScreen(SessionScreen):
    """The engine's explanation of one event, with the settings that avoid it."""

    DEFAULT_CSS = """
    ExplainScreen #explain { height: 1fr; margin: 0 1; }
    ExplainScreen #explain-progress { height: 1; display: none; }
    ExplainScreen.busy #explain-progress { display: block; }
    ExplainScreen #explain-progress LoadingIndicator { width: 8; height: 1; }
    ExplainScreen #explain-progress-text { width: 1fr; color: $text-muted; }
    ExplainScreen #explain-title { text-style: bold; height: auto; }
    ExplainScreen #explain-details { height: auto; }
    ExplainScreen #explain-counters { margin-top: 1; }
    ExplainScreen #explain-limit { height: auto; margin-top: 1; }
    ExplainScreen .explain-label { margin-top: 1; text-style: bold; }
    ExplainScreen #explain-contributors { height: auto; max-height: 8; }
    ExplainScreen #explain-avoid { height: auto; max-height: 8; }
    ExplainScreen #explain-unavoidable { color: $text-muted; height: auto; }
    ExplainScreen #explain-no-messages { color: $text-muted; height: auto; }
    """
    BINDINGS = [
        Binding("escape", "close", "Back"),
        Binding("n", "entry(1)", "Next at this step"),
        Binding("p", "entry(-1)", "Prev at this step", show=False),
        Binding("r", "rerun", "Explain again"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.explanations: list[Explanation] | None = None  # every event of the session
        self.complete = False  # the avoiding settings have been searched
        self.entries: list[Explanation] = []  # those of the chosen step
        self.index = 0
        self._key: tuple[int, int] | None = None
        self._step: int | None = None

    def compose_body(self) -> ComposeResult:
        with Vertical(id="explain"):
            with Horizontal(id="explain-progress"):
                yield LoadingIndicator()
                yield Static(id="explain-progress-text")
            yield Static(id="explain-title")
            with Vertical(id="explain-details"):
                yield CountersPanel(id="explain-counters")
                yield Static(id="explain-limit")
                yield Label("Largest messages in context", classes="explain-label")
                yield DataTable(id="explain-contributors", cursor_type="row", show_cursor=False)
                yield Static(id="explain-no-messages")
                yield Label(
                    "Settings that would have avoided it (enter: tune with it)",
                    classes="explain-label",
                )
                yield DataTable(id="explain-avoid", cursor_type="row")
                yield Static(id="explain-unavoidable")

    def on_mount(self) -> None:
        contributors = self.query_one("#explain-contributors", DataTable)
        contributors.can_focus = False  # the avoiding settings take the keys
        # fixed widths: the rows change after the first paint, and a width measured later
        # would leave the header drawn at the old widths
        for label, width in CONTRIBUTOR_COLUMNS:
            contributors.add_column(label, key=label, width=width)
        avoid = self.query_one("#explain-avoid", DataTable)
        avoid.focus()
        for label, width in AVOID_COLUMNS:
            avoid.add_column(label, key=label or "how", width=width)

    # -- computing -------------------------------------------------------------------------

    def show_revision(self, state: SessionState) -> None:
        key = (id(state), len(state.branches))
        if key != self._key:
            self._key = key
            self._start(state)
        else:
            self.watch_step()

    def watch_step(self) -> None:
        state = self.shown
        if state is not None and self.explanations is not None and state.step() != self._step:
            self._choose(state)

    def _start(self, state: SessionState) -> None:
        self.explanations = None
        self.complete = False
        self.add_class("busy")
        self.query_one("#explain-progress-text", Static).update("reading the events at the limit…")
        self.explain(state)

    @work(thread=True, exclusive=True, group="explain", exit_on_error=False)
    def explain(self, state: SessionState) -> None:
        from ctx_inspect.app.loader import estimator_for

        app = self.app
        worker = get_current_worker()
        summarizer = self.sessions.summarizer()
        for search in (False, True):
            explainer = Explainer(
                state.session,
                state.profile,
                estimate_for=estimator_for,
                summarizer=summarizer,
                search=search,
            )
            found = explainer.explain()
            if worker.is_cancelled:
                return
            app.call_from_thread(self._explained, state, found, search)

    def _explained(self, state: SessionState, found: list[Explanation], complete: bool) -> None:
        self.explanations = found
        self.complete = complete
        if complete:
            self.remove_class("busy")
        else:
            self.query_one("#explain-progress-text", Static).update(
                "finding the smallest change of each setting that avoids it, by replay…"
            )
        self._choose(state)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group == "explain" and event.state is WorkerState.ERROR:
            self.remove_class("busy")
            text = error_text(event.worker.error)
            self.query_one("#explain-title", Static).update(Text(text))
            self.notify(text, title="cannot explain", severity="error", markup=False)

    # -- showing ---------------------------------------------------------------------------

    def _choose(self, state: SessionState) -> None:
        step = state.step() or 0
        self._step = step
        entries = pick(self.explanations or [], step)
        if [e.event for e in entries] != [e.event for e in self.entries] or not entries:
            self.index = 0
        self.entries = entries
        if not entries:
            self._show_nothing(state, step)
        else:
            self._show(state, entries[min(self.index, len(entries) - 1)])

    def _show_nothing(self, state: SessionState, step: int) -> None:
        later = [e.step for e in self.explanations or [] if e.step > step]
        text = Text(
            f"Nothing to explain at or before step {step}: no forced final turn, dropped "
            "tool output, compaction or context-limit error."
        )
        if later:
            text.append(f" The next one is at step {min(later)}: move the cursor there.")
        self.query_one("#explain-title", Static).update(text)
        self.query_one("#explain-details").display = False

    def _show(self, state: SessionState, entry: Explanation) -> None:
        title = Text(f"step {entry.step}: {EVENT_NAMES.get(entry.event, entry.event)}")
        title.append(f"  ·  {plain.one_line(entry.reason, 200)}", Style(bold=False))
        if len(self.entries) > 1:
            title.append(
                f"  ·  {self.index + 1} of {len(self.entries)} at this step (n: next)",
                Style(bold=False, dim=True),
            )
        self.query_one("#explain-title", Static).update(title)
        self.query_one("#explain-details").display = True
        counters = state.counters(entry.step)
        self.query_one(CountersPanel).update_counters(counters)
        self.query_one("#explain-limit", Static).update(self._limit_text(entry, counters))
        self._fill_contributors(entry)
        self._fill_avoid(entry)

    def _limit_text(self, entry: Explanation, counters: Counters | None) -> Text:
        parts = entry.limit_parts
        window, buffer, output = parts["window"], parts["buffer"], parts["max_output"]
        text = Text()
        shown = counters.parts if counters is not None else None
        if shown is None or (shown.window, shown.buffer, shown.max_output) != (
            window,
            buffer,
            output,
        ):
            text.append(
                f"limit = window {window:,} − buffer {buffer:,} − max output {output:,} "
                f"= {window - buffer - output:,}\n"
            )
        projected, limit = entry.projected_tokens, entry.limit_tokens
        if limit is not None and limit != window - buffer - output:
            how = f" = {entry.limit_formula}" if entry.limit_formula else ""
            text.append(f"the {EVENT_NAMES.get(entry.event, entry.event)} acts at {limit:,}{how}\n")
        if projected is not None and limit is not None:
            delta = projected - limit
            text.append(f"projected {projected:,} vs limit {limit:,}: ")
            if delta > 0:
                text.append(
                    f"over by {delta:,} tokens",
                    Style(color=rich_color(self, "zone-overflow", "error"), bold=True),
                )
            else:
                text.append(f"under by {-delta:,} tokens")
            text.append("\n")
        if entry.first_crossed_step is not None:
            text.append(f"first over the limit at step {entry.first_crossed_step}\n")
        if entry.counters:
            text.append(
                "the guard logged: "
                + ", ".join(f"{name} {value:,}" for name, value in entry.counters.items())
            )
        text.rstrip()
        return text

    def _fill_contributors(self, entry: Explanation) -> None:
        table = self.query_one("#explain-contributors", DataTable)
        table.clear()
        table.display = bool(entry.contributors)
        self.query_one("#explain-no-messages", Static).update(
            ""
            if entry.contributors
            else "no messages in context at this step (the input "
            "holds figures only, or the context was empty)"
        )
        for i, item in enumerate(entry.contributors):
            table.add_row(
                str(item.get("step", "")),
                f"{item.get('role', '')} / {item.get('kind', '')}",
                Text(plain.one_line(str(item.get("tool") or ""), 40)),
                Text(f"{int(item.get('tokens', 0)):,}", justify="right"),
                Text(plain.one_line(str(item.get("id", "")), 60)),
                key=str(i),
            )

    def _fill_avoid(self, entry: Explanation) -> None:
        table = self.query_one("#explain-avoid", DataTable)
        table.clear()
        for i, item in enumerate(entry.avoid):
            now, to = item.get("from"), item.get("value")
            table.add_row(
                str(item["setting"]),
                _number(now),
                _number(to),
                _change(now, to),
                how_found(item),
                key=str(i),
            )
        note = self.query_one("#explain-unavoidable", Static)
        if not self.complete:
            note.update("searching by replay…")
        elif entry.reproduced is False:
            note.update(
                Text(NOT_REPRODUCED + ("; the settings above: arithmetic" if entry.avoid else ""))
            )
        elif entry.unavoidable:
            note.update(Text("not avoidable by changing: " + ", ".join(entry.unavoidable)))
        elif not entry.avoid:
            note.update("no single setting change avoids it")
        else:
            note.update("")

    # -- keys ------------------------------------------------------------------------------

    def action_close(self) -> None:
        self.dismiss()

    def action_entry(self, delta: int) -> None:
        state = self.shown
        if state is None or len(self.entries) < 2:
            return
        self.index = (self.index + delta) % len(self.entries)
        self._show(state, self.entries[self.index])

    def action_rerun(self) -> None:
        state = self.shown
        if state is not None:
            self._key = (id(state), len(state.branches))
            self._start(state)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id != "explain-avoid" or not self.entries:
            return
        entry = self.entries[min(self.index, len(self.entries) - 1)]
        index = int(event.row_key.value or 0)
        if 0 <= index < len(entry.avoid):
            self.tune_with(entry.avoid[index])

    def tune_with(self, item: dict[str, Any]) -> None:
        from ctx_inspect.ui.screens.tune_screen import TuneScreen

        self.app.push_screen(TuneScreen({str(item["setting"]): item["value"]}))


def _number(value: Any) -> Text:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return Text(f"{value:,}" if isinstance(value, int) else f"{value:g}", justify="right")
    return Text(plain.one_line(str(value), 40))


def _change(now: Any, to: Any) -> Text:
    numbers = (int, float)
    if isinstance(now, numbers) and isinstance(to, numbers):
        delta = to - now
        shown = f"{delta:+,}" if isinstance(delta, int) else f"{delta:+.4g}"
        return Text(shown, justify="right")
    return Text("")
