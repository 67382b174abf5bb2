"""Headless output: Rich tables for the terminal, plain text when piped. Never imports Textual.

Transcript-derived strings are wrapped in ``Text`` objects, so markup-like content is printed
as it is, never interpreted. The CLI hands every renderer data whose strings are already made
visible (``ctx_inspect.safe_text.safe_data``), so tables are laid out on the safe forms; the
console of :func:`console` checks once more every piece of text it writes and shows any
control, format or invisible character that got there some other way.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from rich.console import (
    Console,
    ConsoleOptions,
    ConsoleRenderable,
    RenderableType,
    RenderHook,
    RenderResult,
)
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from ctx_inspect.safe_text import is_safe, visible


class _Visible:
    """A renderable whose segments' text is made visible (our own control segments pass)."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for segment in console.render(self.renderable, options):
            if segment.control or is_safe(segment.text):
                yield segment
            else:
                yield Segment(visible(segment.text), segment.style)


class _ShowControls(RenderHook):
    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        return [_Visible(renderable) for renderable in renderables]


def console() -> Console:
    """A console that writes colour only to a terminal (and never when NO_COLOR is set). Piped,
    a line of text is never broken (a long path stays one line for grep); tables are laid out
    160 columns wide."""
    width = None
    piped = not sys.stdout.isatty()
    if piped and "COLUMNS" not in os.environ:
        width = 160  # piped: wide enough for the widest tables
    out = Console(
        file=sys.stdout,
        width=width,
        highlight=False,
        soft_wrap=piped,
        no_color="NO_COLOR" in os.environ,
        emoji=False,
        markup=False,
    )
    out.push_render_hook(_ShowControls())
    return out


def _n(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "-"


def _table(title: str, *columns: str, right: tuple[str, ...] = ()) -> Table:
    table = Table(title=title, title_justify="left", expand=False, pad_edge=False)
    for column in columns:
        table.add_column(
            column, justify="right" if column in right else "left", min_width=min(len(column), 24)
        )
    return table


class SimpleTable:
    """A table of one-line cells, printed either by Rich or, on a console that is no terminal
    (no colours, no recording), as the same characters written at once: laying out a Rich
    table costs milliseconds, and ``stats`` over a folder of thousands of sessions prints
    several per session. Only cells of printable ASCII with no space at either end take the
    quick way; any other table (a wide character, a line too long for the console: Rich would
    wrap it) is Rich's.

    ``grid``: no borders, no header, columns two spaces apart, the first one dim (a list of
    labels and values); else a titled table with a heavy header (``_table``'s look).
    """

    def __init__(
        self, title: str, *columns: str, right: tuple[str, ...] = (), grid: bool = False
    ) -> None:
        self.title = title
        self.columns = columns
        self.right = tuple(c in right for c in columns)
        self.grid = grid
        self.rows: list[tuple[str, ...]] = []

    def add_row(self, *cells: str) -> None:
        self.rows.append(cells)

    def rich(self) -> Table:
        if self.grid:
            table = Table.grid(padding=(0, 2))
            table.add_column(style="dim")
            for _ in self.columns[1:]:
                table.add_column()
        else:
            table = _table(self.title, *self.columns, right=self._right_names())
        for row in self.rows:
            table.add_row(*(Text(cell) for cell in row))
        return table

    def _right_names(self) -> tuple[str, ...]:
        return tuple(c for c, r in zip(self.columns, self.right, strict=True) if r)

    def lines(self, width: int) -> list[str] | None:
        """The table as Rich lays it out on a console ``width`` wide with no styles, or None
        when only Rich can lay it out."""
        cells = [*self.rows] if self.grid else [self.columns, *self.rows]
        if not all(_quick(cell) for row in cells for cell in row):
            return None
        floors = [0] * len(self.columns) if self.grid else [min(len(c), 24) for c in self.columns]
        widths = [max([floors[i], *(len(row[i]) for row in cells)]) for i in range(len(floors))]
        if self.grid:
            out = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
            fits = min(widths, default=0) > 0 and all(len(line) <= width for line in out)
            return out if fits else None
        last = len(widths) - 1
        spans = [w + (i > 0) + (i < last) for i, w in enumerate(widths)]
        total = sum(spans) + len(spans) + 1
        if total > width or len(self.title) > total or not _quick(self.title):
            return None

        def row_line(row: tuple[str, ...], edge: str) -> str:
            parts = []
            for i, (cell, w) in enumerate(zip(row, widths, strict=True)):
                text = cell.rjust(w) if self.right[i] else cell.ljust(w)
                parts.append((" " if i > 0 else "") + text + (" " if i < last else ""))
            return edge + edge.join(parts) + edge

        def rule(left: str, fill: str, cross: str, right: str) -> str:
            return left + cross.join(fill * span for span in spans) + right

        return [
            *([self.title.ljust(total)] if self.title else []),
            rule("┏", "━", "┳", "┓"),
            row_line(self.columns, "┃"),
            rule("┡", "━", "╇", "┩"),
            *(row_line(row, "│") for row in self.rows),
            rule("└", "─", "┴", "┘"),
        ]


def _quick(text: str) -> bool:
    """Text whose layout is only its length (Rich trims the edges of some cells)."""
    return text.isascii() and text.isprintable() and text == text.strip()


def show(out: Console, item: SimpleTable | Text) -> None:
    """Print a table or a line: at once on a plain console when it can, else through Rich."""
    if not out.is_terminal and not out.record:
        if isinstance(item, Text):
            plain = item.plain
            lines = [plain] if _quick(plain) and len(plain) <= out.width else None
        else:
            lines = item.lines(out.width)
        if lines is not None:
            out.file.write("".join(line + "\n" for line in lines))
            return
    out.print(item if isinstance(item, Text) else item.rich())


def _window_text(window: int, source: str | None) -> str:
    if source and "assumed" in source:
        return f"{_n(window)} (assumed: the input does not record it; --set context_window=N)"
    if source and "set by the user" in source:
        return f"{_n(window)} (set by you)"
    return _n(window)


def render_stats(out: Console, s: dict[str, Any]) -> None:
    window = s["context_window"] or 0
    show(out, Text(f"{s['file']}", style="bold"))
    head = SimpleTable("", "label", "value", grid=True)
    for label, value in (
        ("format", s["format"]),
        ("profile", s["profile"]),
        ("model", s.get("model") or "-"),
        ("tokenizer", s["tokenizer"]),
        ("window", _window_text(window, s.get("context_window_source"))),
        *(
            (name, f"{_n(value) if isinstance(value, int) else value} (assumed: not in the input)")
            for name, value in (s.get("assumed_settings") or {}).items()
        ),
        ("effective limit", _n(s["effective_limit"])),
        ("threshold", _n(s["threshold_tokens"])),
        (
            "items",
            f"{_n(s['items_total'])} ({_n(s['messages_total'])} messages, "
            f"{_n(s['steps'])} requests)",
        ),
        ("parse issues", _n(s["parse_issues"])),
    ):
        head.add_row(label, str(value))
    show(out, head)
    show(out, Text(""))

    peak = s["peak_context_tokens"]
    curve = SimpleTable("", "label", "value", grid=True)
    step = s["peak_step"]
    curve.add_row(
        "peak context",
        f"{_n(peak)} tokens ({_pct(peak, window)} of window), "
        f"{s['peak_context_source']}" + (f", at step {step}" if step else ""),
    )
    curve.add_row(
        "final context",
        f"{_n(s['final_context_tokens'])} tokens ({_pct(s['final_context_tokens'], window)}"
        f" of window), {s.get('final_context_note') or s['final_context_source']}",
    )
    crossings = s["zone_crossings"]
    curve.add_row(
        "zone crossings",
        ", ".join(f"{c['from']}->{c['to']} at {c['step']}" for c in crossings) or "none",
    )
    if s.get("context_note"):
        curve.add_row("note", s["context_note"])
    show(out, curve)
    show(out, Text(""))

    if s.get("context_per_step"):
        per_step = SimpleTable(
            "Context per step",
            "step",
            "tokens",
            "share",
            "source",
            right=("step", "tokens", "share"),
        )
        for point in s["context_per_step"]:
            step = _n(point["step"]) + (" (live end)" if point.get("live_end") else "")
            per_step.add_row(
                step, _n(point["tokens"]), _pct(point["tokens"], window), point["note"]
            )
        show(out, per_step)
        show(out, Text(""))

    if s["messages"]:
        table = SimpleTable(
            "Messages by role and kind",
            "role",
            "kind",
            "count",
            "tokens",
            "share",
            "origin",
            "pruned",
            "removed",
            right=("count", "tokens", "share", "pruned", "removed"),
        )
        total = sum(row["tokens"] for row in s["messages"])
        for row in s["messages"]:
            table.add_row(
                row["role"],
                row["kind"],
                _n(row["count"]),
                _n(row["tokens"]),
                _pct(row["tokens"], total),
                row["origin"],
                _n(row["pruned"]),
                _n(row["removed"]),
            )
        show(out, table)
        show(out, Text(""))

    events = SimpleTable("Context events", "step", "event", "detail", right=("step",))
    rows: list[tuple[int, str, str]] = []
    # a step's prune comes before its compaction (the order agents act in)
    for p in s["prunes"]:
        detail = f"{_n(p['tokens_recovered'])} tokens recovered"
        if p.get("tokens_before") is not None and p.get("tokens_after") is not None:
            detail += f": {_n(p['tokens_before'])} -> {_n(p['tokens_after'])}"
        if p.get("persistent") is False:
            detail += " (this request only)"
        rows.append((p["step"], "prune", detail))
    for c in s["compactions"]:
        if c.get("failed"):
            status = "failed" + (f" ({c['error']})" if c.get("error") else "")
        else:
            status = f"{_n(c['before_tokens'])} -> {_n(c['after_tokens'])} tokens"
        rows.append((c["step"], "compaction", f"{c['trigger']}: {status}"))
    for f in s["final_turns"]:
        rows.append(
            (
                f["step"],
                "final turn",
                f"{f['reason']}: projected {_n(f['projected_tokens'])} vs limit "
                f"{_n(f['limit_tokens'])}",
            )
        )
    for r in s.get("rejected_requests", []):
        size = f"{_n(r['tokens'])} tokens" if r["tokens"] is not None else "size not given"
        limit = f" > {_n(r['limit'])}" if r["limit"] is not None else ""
        rows.append((r["step"], "refused by provider", f"{size}{limit}: {r['reason']}"))
    for step, label, detail in sorted(rows, key=lambda row: row[0]):
        events.add_row(_n(step), label, detail)
    counts = (
        ("dropped tool outputs", s["dropped_tool_outputs"]),
        ("truncated tool outputs", s["truncated_tool_outputs"]),
        ("spilled tool outputs", s["spilled_tool_outputs"]),
    )
    for label, count in counts:
        if count:
            events.add_row("", label, _n(count))
    if events.rows:
        show(out, events)
    else:
        show(out, Text("no prunes, compactions, dropped tool outputs or forced final turns"))

    if s["issues"]:
        show(out, Text(""))
        issues = SimpleTable(
            f"Parse issues ({s['parse_issues']})",
            "line",
            "offset",
            "reason",
            "excerpt",
            right=("line", "offset"),
        )
        for issue in s["issues"]:
            issues.add_row(
                _n(issue["line"]), _n(issue["offset"]), issue["reason"], issue["excerpt"][:60]
            )
        show(out, issues)


def render_profiles(out: Console, rows: list[dict[str, Any]]) -> None:
    for i, row in enumerate(rows):
        if i:
            out.print()
        table = _table(f"{row.get('name')}: {row.get('description', '')}", "setting", "value")
        for key, value in row.items():
            if key in {"name", "description"}:
                continue
            table.add_row(key, Text(_n(value)))
        out.print(table)


def render_formats(out: Console, rows: list[dict[str, Any]]) -> None:
    table = _table("Input formats", "name", "description", "reads", "default profile")
    for row in rows:
        table.add_row(
            row["name"], Text(row["description"]), Text(row["reads"]), row["default_profile"]
        )
    out.print(table)


def render_replay(out: Console, s: dict[str, Any]) -> None:
    render_stats(
        out,
        {
            **s,
            "messages": [],
            "issues": [],
            "truncated_tool_outputs": s.get("truncated_tool_outputs", 0),
            "spilled_tool_outputs": 0,
        },
    )
    out.print()
    agreement = s["agreement"]
    undetermined = s.get("undetermined", [])
    counted = len(s["recorded_decisions"]) - len(undetermined)
    if counted or not undetermined:
        line = (
            f"agreement with the recording: {agreement:.0%} of {counted} recorded decisions "
            "reproduced at the same step"
        )
    else:
        line = "agreement with the recording: no recorded decision this file can determine"
    if undetermined:
        line += f" ({len(undetermined)} it cannot: not counted)"
    out.print(Text(line))
    for d in undetermined:
        out.print(Text(f"step {d['step']}: recorded {d['kind']} not counted: {d['reason']}"))
    if s["disagreements"]:
        why = any(d.get("reason") for d in s["disagreements"])
        columns = ("step", "recorded", "replayed", *(("why",) if why else ()))
        table = _table("Where the replay differs", *columns, right=("step",))
        for d in s["disagreements"]:
            row = [_n(d["step"]), ", ".join(d["recorded"]) or "-", ", ".join(d["replayed"]) or "-"]
            table.add_row(*row, *((Text(d.get("reason") or ""),) if why else ()))
        out.print(table)


def render_diff(out: Console, d: dict[str, Any], *, full: bool = False) -> None:
    out.print(
        Text(
            f"{d['file']}: {d['action']} with the {d['policy']} policy at step {d['step']}",
            style="bold",
        )
    )
    out.print(Text(d["reason"]))
    if d.get("figures"):
        out.print(Text(d["figures"], style="dim"))
    out.print(
        Text(
            f"{_n(d['tokens_before'])} -> {_n(d['tokens_after'])} tokens "
            f"({_n(d['tokens_saved'])} saved), {d['messages_before']} -> {d['messages_after']} "
            f"messages; " + ", ".join(f"{k} {v}" for k, v in sorted(d["statuses"].items()))
        )
    )
    survived = d["survived"]
    kinds = ", ".join(
        f"{kind} {v['found']}/{v['total']}" for kind, v in survived["by_kind"].items() if v["total"]
    )
    out.print(Text(f"what survived: {survived['score']:.0%}" + (f" ({kinds})" if kinds else "")))
    table = _table(
        "Messages",
        "id",
        "role",
        "kind",
        "status",
        "before",
        "after",
        "change",
        right=("before", "after", "change"),
    )
    for m in d["messages"]:
        if m["status"] == "kept" and not full:
            continue
        delta = m["tokens_after"] - m["tokens_before"]
        table.add_row(
            Text(m["id"]),
            m["role"],
            m["kind"],
            m["status"],
            _n(m["tokens_before"]),
            _n(m["tokens_after"]),
            f"{delta:+,}",
        )
    kept = sum(1 for m in d["messages"] if m["status"] == "kept")
    if table.row_count:
        out.print(table)
    if kept and not full:
        out.print(Text(f"({kept} messages kept unchanged; --full lists them)"))
    limit = None if full else 40
    for m in d["messages"]:
        if not m["text_diff"]:
            continue
        out.print()
        lines = m["text_diff"] if limit is None else m["text_diff"][:limit]
        for line in lines:
            style = "green" if line.startswith("+") else "red" if line.startswith("-") else ""
            out.print(Text(line, style=style))
        if limit is not None and len(m["text_diff"]) > limit:
            out.print(Text(f"... {len(m['text_diff']) - limit} more lines (--full)"))


def render_explain(out: Console, items: list[dict[str, Any]]) -> None:
    from ctx_inspect.core.explain import NOT_REPRODUCED, how_found

    if not items:
        out.print(
            Text(
                "nothing to explain: no forced final turn, dropped tool output, "
                "compaction, prune or context-limit error"
            )
        )
        return
    for i, e in enumerate(items):
        if i:
            out.print()
        parts = e["limit_parts"]
        out.print(
            Text(f"step {e['step']}: {e['event'].replace('_', ' ')} ({e['reason']})", style="bold")
        )
        formula = e.get("limit_formula") or (
            f"window {_n(parts['window'])} - buffer {_n(parts['buffer'])} - max output "
            f"{_n(parts['max_output'])}"
        )
        out.print(
            Text(
                f"projected {_n(e['projected_tokens'])} vs limit {_n(e['limit_tokens'])} = "
                f"{formula}"
            )
        )
        if e["projected_tokens"] is not None and e["limit_tokens"] is not None:
            over = e["projected_tokens"] - e["limit_tokens"]
            out.print(
                Text(
                    f"over by {_n(over)} tokens"
                    if over > 0
                    else f"{_n(-over)} tokens below the limit"
                )
            )
        if e.get("counters"):
            c = e["counters"]
            out.print(Text("counters: " + ", ".join(f"{k} {_n(v)}" for k, v in c.items())))
        if e.get("first_crossed_step"):
            out.print(Text(f"first over the limit at step {e['first_crossed_step']}"))
        if e["contributors"]:
            table = _table(
                "Largest in context", "step", "kind", "tool", "tokens", right=("step", "tokens")
            )
            for c in e["contributors"]:
                table.add_row(_n(c["step"]), c["kind"], Text(c.get("tool") or "-"), _n(c["tokens"]))
            out.print(table)
        for a in e["avoid"]:
            out.print(
                Text(
                    f"avoided with --set {a['setting']}={a['value']} "
                    f"(now {a['from']}; {how_found(a)})"
                )
            )
        if e.get("unavoidable"):
            out.print(Text("not avoidable by changing: " + ", ".join(e["unavoidable"])))
        if e.get("reproduced") is False:
            out.print(Text(NOT_REPRODUCED))


_SWEEP_COLUMNS = (
    "compactions",
    "prunes",
    "final_turns",
    "dropped",
    "peak_tokens",
    "tokens_saved",
    "survived",
    "agreement",
)


_SWEEP_HEADERS = {"final_turns": "final turns", "peak_tokens": "peak", "tokens_saved": "saved"}


def render_sweep(out: Console, table_data: dict[str, Any]) -> None:
    axes = table_data["axes"]
    headers = [_SWEEP_HEADERS.get(c, c) for c in _SWEEP_COLUMNS]
    table = _table(f"Sweep of {table_data['file']}", *axes, *headers, right=(*axes, *headers))
    for row in table_data["rows"]:
        if row.get("error"):
            table.add_row(
                *(Text(str(row["settings"].get(a))) for a in axes),
                Text(row["error"]),
                *([""] * (len(_SWEEP_COLUMNS) - 1)),
            )
            continue
        cells = [
            _n(row[c]) if not isinstance(row[c], float) else f"{row[c]:.2f}" for c in _SWEEP_COLUMNS
        ]
        table.add_row(*(Text(str(row["settings"].get(a))) for a in axes), *cells)
    out.print(table)


def write_sweep_csv(fh: Any, table_data: dict[str, Any]) -> None:
    import csv

    axes = table_data["axes"]
    writer = csv.writer(fh)
    writer.writerow([*axes, *_SWEEP_COLUMNS, "error"])
    for row in table_data["rows"]:
        writer.writerow(
            [
                *(row["settings"].get(a) for a in axes),
                *(row[c] for c in _SWEEP_COLUMNS),
                row.get("error") or "",
            ]
        )
