"""Before and after of an action, side by side, with what survived; apply it as a what-if
branch or discard it. Also the export dialog (the session shown, branch included, to a file)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from rich.style import Style
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Input, Label, Static
from textual.worker import Worker, WorkerState

from ctx_inspect.core.diff import MessageDiff
from ctx_inspect.core.facts import FactKind
from ctx_inspect.core.policies.base import ItemStatus, Summarizer
from ctx_inspect.ui import plain
from ctx_inspect.ui.screens.action_picker import Preview, error_text
from ctx_inspect.ui.state import SessionState, WhatIf
from ctx_inspect.ui.widgets.zone_gauge import rich_color

PREVIEW_LINES = 400  # lines of a removed or added message shown in the text panel
LOST_SHOWN = 50
LINE_CHARS = 2000  # a longer line of the text panel is cut (with an ellipsis)

STATUS_COLOURS: dict[ItemStatus, tuple[str, ...]] = {
    ItemStatus.KEPT: (),
    ItemStatus.PRUNED: ("marker-prune", "secondary"),
    ItemStatus.TRUNCATED: ("warning", "accent"),
    ItemStatus.SUMMARIZED: ("marker-compaction", "primary"),
    ItemStatus.ARCHIVED: (),
    ItemStatus.DROPPED: ("marker-drop", "error"),
    ItemStatus.ADDED: ("success", "primary"),
}
COLUMNS = (
    ("id", "id"),
    ("before: role / kind", "kind_before"),
    ("tokens", "before"),
    ("│", "sep"),
    ("after: status", "status"),
    ("role / kind", "kind_after"),
    ("tokens", "after"),
    ("change", "change"),
)
_GONE = {ItemStatus.SUMMARIZED, ItemStatus.DROPPED, ItemStatus.ARCHIVED}


class DiffScreen(ModalScreen[bool]):
    """What the action would change: every message before and after, totals, what survived.
    Applying it replays the rest of the session (with the summarizer ``summarizer`` makes) and
    dismisses the screen with True once the branch is shown."""

    DEFAULT_CSS = """
    DiffScreen {
        align: center middle;
    }
    DiffScreen > #diff {
        width: 100%;
        height: 100%;
        margin: 1 2;
        border: round $primary;
        background: $surface;
        padding: 0 1;
    }
    DiffScreen #diff-title { text-style: bold; }
    DiffScreen #diff-reason { color: $text-muted; height: auto; max-height: 3; }
    DiffScreen #diff-table { height: 1fr; min-height: 5; }
    DiffScreen #diff-lower { height: 12; border-top: solid $panel; }
    DiffScreen #diff-survived-box { width: 44; border-right: solid $panel; }
    DiffScreen #diff-survived { text-wrap: nowrap; text-overflow: ellipsis; }
    DiffScreen #diff-text-box { width: 1fr; padding-left: 1; }
    DiffScreen #diff-buttons { height: 1; }
    DiffScreen #diff-buttons Button { margin-right: 2; }
    """
    BINDINGS = [
        Binding("a", "apply", "Apply as what-if"),
        Binding("d", "discard", "Discard"),
        Binding("escape", "discard", "Discard", show=False),
    ]

    def __init__(self, preview: Preview, summarizer: Callable[[], Summarizer]) -> None:
        super().__init__()
        self.preview = preview
        self.summarizer = summarizer
        self.diff = preview.diff
        self._before = {item.id: item for item in preview.items}
        self._after = {item.id: item for item in preview.result.items}
        self.selected: int | None = None
        self.applying = False  # the what-if's replay is running

    # -- layout ----------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        with Vertical(id="diff"):
            yield Static(self._title(), id="diff-title")
            yield Static(Text(plain.one_line(self.diff.reason, 600)), id="diff-reason")
            yield Static(self._totals(), id="diff-totals")
            yield DataTable(id="diff-table", cursor_type="row", zebra_stripes=False)
            with Horizontal(id="diff-lower"):
                with VerticalScroll(id="diff-survived-box"):
                    yield Static(self._survived(), id="diff-survived")
                with VerticalScroll(id="diff-text-box"):
                    yield Static(id="diff-text")
            with Horizontal(id="diff-buttons"):
                yield Button("Apply as what-if (a)", variant="primary", compact=True, id="apply")
                yield Button("Discard (d)", compact=True, id="discard")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        cells = [self._cells(row) for row in self.diff.messages]
        for position, (label, key) in enumerate(COLUMNS):
            # widths fixed from the data (a width measured after the first paint would leave
            # the header drawn at the old widths)
            width = max([len(label)] + [row[position].cell_len for row in cells])
            table.add_column(label, key=key, width=width)
        self._fill_table()
        first = next(
            (i for i, m in enumerate(self.diff.messages) if m.status is not ItemStatus.KEPT), 0
        )
        if self.diff.messages:
            table.move_cursor(row=first)
            self._show_message(first)
        table.focus()
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._restyle())

    def _restyle(self) -> None:
        self._fill_table()
        if self.selected is not None:
            self._show_message(self.selected)

    def _fill_table(self) -> None:
        table = self.query_one(DataTable)
        cursor = table.cursor_row
        table.clear()
        for index, row in enumerate(self.diff.messages):
            table.add_row(*self._cells(row), key=str(index))
        if self.diff.messages:
            table.move_cursor(row=min(cursor, len(self.diff.messages) - 1))

    def _style(self, status: ItemStatus) -> Style:
        names = STATUS_COLOURS[status]
        color = rich_color(self, *names) if names else None
        if color is None:
            return Style(dim=status in (ItemStatus.KEPT, ItemStatus.ARCHIVED))
        return Style(color=color, bold=status is not ItemStatus.KEPT)

    def _cells(self, row: MessageDiff) -> list[Text]:
        style = self._style(row.status)
        before = self._before.get(row.id)
        after = self._after.get(row.id)
        added = row.status is ItemStatus.ADDED
        gone = row.status in _GONE
        kind_before = (
            f"{before.message.role.value} / {before.message.kind.value}" if before else row.kind
        )
        kind_after = f"{after.message.role.value} / {after.message.kind.value}" if after else ""
        change = f"{row.delta:+,}" if row.delta else "0"
        return [
            Text(plain.one_line(row.id, 40)),
            Text("" if added else kind_before),
            Text("" if added else f"{row.tokens_before:,}", justify="right"),
            Text("│", style=Style(dim=True)),
            Text(row.status.value, style=style),
            Text("—" if gone else plain.one_line(kind_after, 40)),
            Text("—" if gone else f"{row.tokens_after:,}", justify="right"),
            Text(change, justify="right", style=style if row.delta else Style(dim=True)),
        ]

    # -- the texts -------------------------------------------------------------------------

    def _title(self) -> Text:
        p = self.preview
        text = Text(f"{p.action.value} with the {self.diff.policy} policy ")
        text.append(f"({p.profile.name} profile) at step {p.step}")
        text.append("  ·  " + ("changes the context" if self.diff.fired else "changes nothing"))
        return text

    def _totals(self) -> Text:
        d = self.diff
        counts = ", ".join(f"{name} {count}" for name, count in sorted(d.counts().items()))
        return Text(
            f"tokens {d.tokens_before:,} → {d.tokens_after:,} ({d.tokens_saved:,} saved)  ·  "
            f"messages {d.messages_before:,} → {d.messages_after:,}  ·  {counts}"
        )

    def _survived(self) -> Text:
        survived = self.diff.survived
        total = sum(survived.total.values())
        text = Text()
        text.append(f"what survived: {survived.score:.0%}", Style(bold=True))
        text.append(f" of {total:,} facts at risk\n" if total else " (nothing at risk)\n")
        for kind in FactKind:
            if survived.total.get(kind):
                found, of = survived.found.get(kind, 0), survived.total[kind]
                text.append(f"  {kind.value:<11} {found:>6,} / {of:,}\n")
        if survived.lost:
            text.append(f"lost ({len(survived.lost):,}):\n", Style(bold=True))
            for fact in survived.lost[:LOST_SHOWN]:
                text.append(f"  {fact.kind.value:<11} {plain.one_line(fact.text, 120)}\n")
            if len(survived.lost) > LOST_SHOWN:
                text.append(f"  … {len(survived.lost) - LOST_SHOWN:,} more\n")
        text.rstrip()
        return text

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None:
            self._show_message(int(event.row_key.value))

    def _show_message(self, index: int) -> None:
        self.selected = index
        self.query_one("#diff-text", Static).update(self._message_text(index))

    def _message_text(self, index: int) -> Text:
        row = self.diff.messages[index]
        text = Text()
        text.append(
            f"{plain.one_line(row.id, 60)} · {row.status.value} · "
            f"{row.tokens_before:,} → {row.tokens_after:,} tokens",
            Style(bold=True),
        )
        if row.note:
            text.append(f" · {plain.one_line(row.note, 200)}")
        text.append("\n")
        plus = Style(color=rich_color(self, "success", "primary"))
        minus = Style(color=rich_color(self, "error", "warning"))
        hunk = Style(color=rich_color(self, "accent", "secondary"), dim=True)
        lines: list[tuple[str, Style]] = []
        if row.text_diff:
            for line in row.text_diff:
                style = Style()
                if line.startswith("@@"):
                    style = hunk
                elif line.startswith("+") and not line.startswith("+++"):
                    style = plus
                elif line.startswith("-") and not line.startswith("---"):
                    style = minus
                lines.append((line, style))
        elif row.status is ItemStatus.ADDED and row.id in self._after:
            body = self._after[row.id].message.text
            lines = [("+" + line, plus) for line in body.split("\n")[:PREVIEW_LINES]]
        elif row.status in _GONE and row.id in self._before:
            body = self._before[row.id].message.text
            lines = [("-" + line, minus) for line in body.split("\n")[:PREVIEW_LINES]]
        else:
            lines = [("no text change", Style(dim=True))]
        for line, style in lines:
            text.append(plain.one_line(line, LINE_CHARS) + "\n", style)
        text.rstrip()
        return text

    # -- acting ----------------------------------------------------------------------------

    @on(Button.Pressed, "#apply")
    def _apply_pressed(self) -> None:
        self.action_apply()

    @on(Button.Pressed, "#discard")
    def _discard_pressed(self) -> None:
        self.action_discard()

    def action_apply(self) -> None:
        p = self.preview
        if not p.result.fired:
            self.notify(
                f"nothing to apply: {plain.one_line(p.result.reason, 200)}",
                title="no change",
                severity="warning",
            )
            return
        if self.applying:
            return
        self.applying = True
        self.notify("replaying the rest of the session under the action…", title="what-if")
        self.make_branch(p)

    @work(thread=True, exclusive=True, group="apply", exit_on_error=False)
    def make_branch(self, p: Preview) -> None:
        branch = p.state.branch_for(p.result, p.step, p.profile, self.summarizer())
        self.app.call_from_thread(self._made, p.state, branch)

    def _made(self, state: SessionState, branch: WhatIf) -> None:
        self.applying = False
        state.add(branch)
        self.notify(
            f"{branch.label}; u undoes it, E exports it", title="what-if applied", timeout=5
        )
        self.dismiss(True)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group == "apply" and event.state is WorkerState.ERROR:
            self.applying = False
            text = error_text(event.worker.error)
            self.notify(text, title="cannot apply the what-if", severity="error", markup=False)

    def action_discard(self) -> None:
        self.dismiss(False)


# -- export ------------------------------------------------------------------------------------


def default_export_path(state: SessionState) -> str:
    """``./<session>-whatif.jsonl``, named after the input (and its session label)."""
    loaded = state.loaded
    stem = Path(loaded.path).stem or "session"
    if loaded.label:
        stem = f"{stem}-{loaded.label}"
    safe = re.sub(r"[^\w.-]+", "_", stem).strip("._") or "session"
    return f"./{safe}-whatif.jsonl"


def refuses(target: Path, inputs: list[Path]) -> Path | None:
    """The input ``target`` would overwrite (the same file, by name or through a link)."""
    resolved = target.expanduser().resolve()
    for path in inputs:
        try:
            if path.resolve() == resolved or (target.exists() and path.samefile(target)):
                return path
        except OSError:
            continue
    return None


class ExportScreen(ModalScreen[int | None]):
    """Where to write the session shown (its what-if branch included), in the native format;
    never over one of ``inputs`` (the files read to open the sessions)."""

    DEFAULT_CSS = """
    ExportScreen {
        align: center middle;
    }
    ExportScreen > #export {
        width: 80;
        height: auto;
        border: round $primary;
        background: $surface;
        padding: 0 1;
    }
    ExportScreen #export-error { color: $error; height: auto; }
    ExportScreen #export-buttons { height: 1; margin-top: 1; }
    ExportScreen #export-buttons Button { margin-right: 2; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, state: SessionState, inputs: list[Path]) -> None:
        super().__init__()
        self.state = state
        self.inputs = inputs

    def compose(self) -> ComposeResult:
        what = self.state.what_if or "the session as read (no what-if branch)"
        with Vertical(id="export"):
            yield Label(Text(f"Export {plain.one_line(what, 60)}"))
            yield Label("to a native .jsonl file (written atomically; never the input):")
            yield Input(default_export_path(self.state), id="export-path")
            yield Static(id="export-error")
            with Horizontal(id="export-buttons"):
                yield Button("Export (enter)", variant="primary", compact=True, id="export-go")
                yield Button("Cancel (esc)", compact=True, id="export-cancel")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    @on(Input.Submitted)
    @on(Button.Pressed, "#export-go")
    def _go(self) -> None:
        raw = self.query_one(Input).value.strip()
        error = self.query_one("#export-error", Static)
        if not raw:
            error.update("give a file path")
            return
        target = Path(raw).expanduser()
        clash = refuses(target, self.inputs)
        if clash is not None:
            error.update(Text(f"refused: {plain.one_line(str(clash), 200)} is an input file"))
            return
        error.update("")
        self.write(target)

    @on(Button.Pressed, "#export-cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)

    @work(thread=True, exclusive=True, group="export", exit_on_error=False)
    def write(self, target: Path) -> None:
        count = self.state.export(target)
        self.app.call_from_thread(self._written, target, count)

    def _written(self, target: Path, count: int) -> None:
        self.notify(f"{count:,} events written to {target}", title="exported", timeout=5)
        self.dismiss(count)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group == "export" and event.state is WorkerState.ERROR:
            text = error_text(event.worker.error)
            self.query_one("#export-error", Static).update(Text(text))
