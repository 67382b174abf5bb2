"""Headless output: Rich tables for the terminal, plain text when piped. Never imports Textual.

Transcript-derived strings are wrapped in ``Text`` objects, so markup-like content is printed
as it is, never interpreted.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text


def console() -> Console:
    """A console that writes colour only to a terminal (and never when NO_COLOR is set)."""
    return Console(
        file=sys.stdout,
        highlight=False,
        soft_wrap=False,
        no_color="NO_COLOR" in os.environ,
        emoji=False,
        markup=False,
    )


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
        table.add_column(column, justify="right" if column in right else "left")
    return table


def render_stats(out: Console, s: dict[str, Any]) -> None:
    window = s["context_window"] or 0
    out.print(Text(f"{s['file']}", style="bold"))
    head = Table.grid(padding=(0, 2))
    head.add_column(style="dim")
    head.add_column()
    for label, value in (
        ("format", s["format"]),
        ("profile", s["profile"]),
        ("model", s.get("model") or "-"),
        ("tokenizer", s["tokenizer"]),
        ("window", _n(window)),
        ("effective limit", _n(s["effective_limit"])),
        ("threshold", _n(s["threshold_tokens"])),
        (
            "items",
            f"{_n(s['items_total'])} ({_n(s['messages_total'])} messages, "
            f"{_n(s['steps'])} requests)",
        ),
        ("parse issues", _n(s["parse_issues"])),
    ):
        head.add_row(label, Text(str(value)))
    out.print(head)
    out.print()

    peak = s["peak_context_tokens"]
    curve = Table.grid(padding=(0, 2))
    curve.add_column(style="dim")
    curve.add_column()
    step = s["peak_step"]
    curve.add_row(
        "peak context",
        Text(
            f"{_n(peak)} tokens ({_pct(peak, window)} of window), "
            f"{s['peak_context_source']}" + (f", at step {step}" if step else "")
        ),
    )
    curve.add_row(
        "final context",
        Text(
            f"{_n(s['final_context_tokens'])} tokens ({_pct(s['final_context_tokens'], window)}"
            f" of window), {s['final_context_source']}"
        ),
    )
    crossings = s["zone_crossings"]
    curve.add_row(
        "zone crossings",
        Text(", ".join(f"{c['from']}->{c['to']} at {c['step']}" for c in crossings) or "none"),
    )
    out.print(curve)
    out.print()

    if s["messages"]:
        table = _table(
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
        out.print(table)
        out.print()

    events = _table("Context events", "step", "event", "detail", right=("step",))
    rows: list[tuple[int, str, Text]] = []
    for c in s["compactions"]:
        status = "failed" if c["failed"] else f"{_n(c['before_tokens'])} -> {_n(c['after_tokens'])}"
        rows.append((c["step"], "compaction", Text(f"{c['trigger']}: {status} tokens")))
    for p in s["prunes"]:
        rows.append((p["step"], "prune", Text(f"{_n(p['tokens_recovered'])} tokens recovered")))
    for f in s["final_turns"]:
        rows.append(
            (
                f["step"],
                "final turn",
                Text(
                    f"{f['reason']}: projected {_n(f['projected_tokens'])} vs limit "
                    f"{_n(f['limit_tokens'])}"
                ),
            )
        )
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
    if events.row_count:
        out.print(events)
    else:
        out.print(Text("no prunes, compactions, dropped tool outputs or forced final turns"))

    if s["issues"]:
        out.print()
        issues = _table(
            f"Parse issues ({s['parse_issues']})",
            "line",
            "offset",
            "reason",
            "excerpt",
            right=("line", "offset"),
        )
        for issue in s["issues"]:
            issues.add_row(
                _n(issue["line"]),
                _n(issue["offset"]),
                Text(issue["reason"]),
                Text(issue["excerpt"][:60]),
            )
        out.print(issues)


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
