"""Fifth's context manager (quivent/fifth ``examples/context-manager``, seed 004): its database.

``fifth-db`` reads ``~/.fifth/context.db`` whole and read-only. The real schema (``main.fs``,
not the README): ``messages(id, role, content, tokens INTEGER DEFAULT 0, priority, level
INTEGER DEFAULT 3, created_at)``, ``summaries(id, level, content, tokens, source_ids, created_at)``
with ``source_ids`` a comma-separated id list, ``keywords`` (no foreign keys) and ``metrics``
(read by the program, never written). Messages and summaries come in ``created_at`` order
(messages first within one second, then by id): system messages are level 1, user and assistant
level 3, tool output level 4. Level 4 is stored but never counted in the total nor included by
``build``, so it is ``visible=False``. A message's ``tokens`` column is the program's own count
(chars/4, or tiktoken above 1,000 chars) and is kept as the message's reported figure. Each
summary becomes a SUMMARY message at its level (named ``fifth level <N>``, as the fifth policy
reads it), after a ``LogLine`` naming the messages it replaced: ``ctx-compress-level`` DELETEs
those rows, so they are not in the database any more and nothing is left to remove. The
``SessionInfo`` carries the level totals (as ``stats`` computes them: messages and summaries of
levels 1 to 3), and a final ``ContextMeasured`` the total ``stats`` would print now. A database
made with the README's schema (no ``level`` column) gets each message's level from its role.

The output of its ``stats`` command is ``reader_stats`` (``fifth-stats``).
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctx_inspect.agents.fifth.levels import SUMMARY_NAME
from ctx_inspect.agents.fifth.profile import COUNTED_LEVELS, LEVEL_BUDGETS, TOTAL_BUDGET
from ctx_inspect.core.model import (
    ContextMeasured,
    Event,
    LogLine,
    Message,
    MessageAdded,
    MessageKind,
    Origin,
    Part,
    PartType,
    Role,
    SessionInfo,
)
from ctx_inspect.formats.registry import FormatSpec, Head, SnapshotSession, register
from ctx_inspect.formats.sqlite import (
    SQLITE_ERRORS,
    db_issue,
    open_sqlite_readonly,
    sqlite_columns,
    sqlite_tables,
    sqlite_tables_of,
)

LEVEL_NAMES: dict[int, str] = {1: "permanent", 2: "session", 3: "working", 4: "volatile"}
ROLES: dict[str, Role] = {
    "system": Role.SYSTEM,
    "user": Role.USER,
    "assistant": Role.ASSISTANT,
    "tool": Role.TOOL,
}
ROLE_LEVELS: dict[str, int] = {"system": 1, "user": 3, "assistant": 3, "tool": 4}
_SQL_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2}(?:\.\d+)?)$")


@dataclass
class _Row:
    table: str  # "messages" or "summaries"
    row_id: Any
    created_at: str
    level: int
    content: str
    tokens: int | None
    role: str = "user"
    source_ids: str = ""


def sql_time(value: str) -> str | None:
    """SQLite's CURRENT_TIMESTAMP (UTC, ``YYYY-MM-DD HH:MM:SS``) as ISO 8601."""
    match = _SQL_TIME.match(value)
    if match is None:
        return value or None
    return f"{match[1]}T{match[2]}+00:00"


def _decode(value: Any, where: str, path: Path, issues: list[Event]) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            issues.append(db_issue(path, f"{where}: invalid UTF-8 replaced with U+FFFD", value))
            return value.decode("utf-8", "replace")
    return str(value)


def _integer(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bytes | str):
        text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
        try:
            return int(text.strip())
        except ValueError:
            return None
    return None


def _read_rows(con: sqlite3.Connection, path: Path, table: str, issues: list[Event]) -> list[_Row]:
    columns = sqlite_columns(con, table)
    order = "created_at, id" if "created_at" in columns else "id"
    cursor = con.execute(f'SELECT * FROM "{table}" ORDER BY {order}')
    names = [d[0] for d in cursor.description]
    rows: list[_Row] = []
    for values in cursor:
        raw = dict(zip(names, values, strict=True))
        row_id = raw.get("id")
        where = f"{table} row id={_decode(row_id, 'id', path, issues)}"
        content = _decode(raw.get("content"), where, path, issues)
        if content is None:
            issues.append(db_issue(path, f"{where}: no content; skipped"))
            continue
        role = "user"
        if table == "messages":
            role_text = _decode(raw.get("role"), where, path, issues)
            if role_text not in ROLES:
                issues.append(db_issue(path, f"{where}: unknown role {role_text!r}; skipped"))
                continue
            role = role_text
        level = ROLE_LEVELS.get(role, 3)
        if "level" in raw and raw["level"] is not None:
            parsed = _integer(raw["level"])
            if parsed is None:
                shown = _decode(raw["level"], where, path, issues)
                issues.append(db_issue(path, f"{where}: level {shown!r} is not a number"))
            else:
                level = parsed
        tokens: int | None = None
        if raw.get("tokens") is not None:
            tokens = _integer(raw["tokens"])
            if tokens is None:
                shown = _decode(raw["tokens"], where, path, issues)
                issues.append(db_issue(path, f"{where}: tokens {shown!r} is not a number"))
        rows.append(
            _Row(
                table=table,
                row_id=row_id,
                created_at=_decode(raw.get("created_at"), where, path, issues) or "",
                level=level,
                content=content,
                tokens=tokens,
                role=role,
                source_ids=_decode(raw.get("source_ids"), where, path, issues) or "",
            )
        )
    return rows


@dataclass
class _Totals:
    messages: dict[int, int] = field(default_factory=dict)
    summaries: dict[int, int] = field(default_factory=dict)

    def add(self, row: _Row) -> None:
        bucket = self.messages if row.table == "messages" else self.summaries
        bucket[row.level] = bucket.get(row.level, 0) + (row.tokens or 0)

    @property
    def total(self) -> int:
        return sum(
            self.messages.get(level, 0) + self.summaries.get(level, 0) for level in COUNTED_LEVELS
        )

    def levels(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for level in sorted({*COUNTED_LEVELS, *self.messages, *self.summaries}):
            out.append(
                {
                    "level": level,
                    "name": LEVEL_NAMES.get(level, ""),
                    "messages": self.messages.get(level, 0),
                    "summaries": self.summaries.get(level, 0),
                    "budget": LEVEL_BUDGETS.get(level),
                    "counted": level in COUNTED_LEVELS,
                }
            )
        return out


def read_database(path: Path) -> list[SnapshotSession]:
    """Fifth's ``context.db`` as one session, read-only; problems become parse issues."""
    path = Path(path)
    try:
        con, note = open_sqlite_readonly(path)
    except (sqlite3.Error, OSError) as exc:
        return [SnapshotSession(path.name, [db_issue(path, f"cannot open the database: {exc}")])]
    try:
        events = _read_database(con, path)
    except SQLITE_ERRORS as exc:
        events = [db_issue(path, f"cannot read the database: {exc}")]
    finally:
        con.close()
    if note:
        events.insert(0, db_issue(path, f"warning: {note}"))
    return [SnapshotSession(path.name, events)]


def _count(con: sqlite3.Connection, table: str, tables: set[str]) -> int:
    if table not in tables:
        return 0
    row = con.execute(f'SELECT count(*) FROM "{table}"').fetchone()
    return int(row[0]) if row else 0


def _read_database(con: sqlite3.Connection, path: Path) -> list[Event]:
    tables = sqlite_tables(con)
    issues: list[Event] = []
    if "messages" not in tables:
        reason = (
            "no messages table: not Fifth's context.db (messages, summaries, keywords, metrics)"
        )
        return [db_issue(path, reason)]
    for table in ("summaries", "keywords", "metrics"):
        if table not in tables:
            issues.append(db_issue(path, f"no {table} table (read what is there)"))
    missing = [c for c in ("id", "role", "content") if c not in sqlite_columns(con, "messages")]
    if missing:
        return [db_issue(path, f"table messages has no column {', '.join(missing)}")]
    rows = _read_rows(con, path, "messages", issues)
    if "summaries" in tables:
        summary_cols = sqlite_columns(con, "summaries")
        if all(c in summary_cols for c in ("id", "level", "content")):
            rows.extend(_read_rows(con, path, "summaries", issues))
        else:
            issues.append(db_issue(path, "table summaries lacks id, level or content; not read"))
    rows.sort(key=lambda r: (r.created_at, r.table != "messages", _integer(r.row_id) or 0))

    totals = _Totals()
    body: list[Event] = []
    for row in rows:
        totals.add(row)
        body.extend(_row_events(row))
    extra: dict[str, Any] = {
        "levels": totals.levels(),
        "total": totals.total,
        "total_budget": TOTAL_BUDGET,
        "capacity_percent": totals.total * 100 // TOTAL_BUDGET,
        "messages": _count(con, "messages", tables),
        "summaries": _count(con, "summaries", tables),
        "keywords": _count(con, "keywords", tables),
        "metrics": _count(con, "metrics", tables),
    }
    if extra["metrics"] and "compression_ratio" in sqlite_columns(con, "metrics"):
        avg = con.execute("SELECT AVG(compression_ratio) FROM metrics").fetchone()
        if avg and isinstance(avg[0], int | float):
            extra["avg_compression_ratio"] = float(avg[0])
    info = SessionInfo(agent="fifth", context_window=TOTAL_BUDGET, extra=extra)
    measured = ContextMeasured(
        tokens=totals.total,
        limit=TOTAL_BUDGET,
        percent=float(totals.total * 100 // TOTAL_BUDGET),
        label="Total",
    )
    return [info, *issues, *body, measured]


def _row_events(row: _Row) -> list[Event]:
    timestamp = sql_time(row.created_at)
    visible = row.level in COUNTED_LEVELS
    tokens = row.tokens if row.tokens is not None and row.tokens > 0 else None
    origin = Origin.REPORTED if tokens is not None else None
    if row.table == "messages":
        role = ROLES[row.role]
        if role is Role.TOOL:
            kind = MessageKind.TOOL_RESULT
            part = Part(type=PartType.TOOL_RESULT, text=row.content)
        else:
            kind = MessageKind.MESSAGE
            part = Part(type=PartType.TEXT, text=row.content)
        message = Message(
            id=f"m{row.row_id}",
            role=role,
            kind=kind,
            parts=(part,),
            visible=visible,
            timestamp=timestamp,
        )
        return [MessageAdded(message=message, tokens=tokens, tokens_origin=origin)]
    sources = ",".join(s.strip() for s in row.source_ids.split(",") if s.strip())
    note = LogLine(
        text=(
            f"summary {row.row_id} (level {row.level}) replaces messages {sources or '(none)'}; "
            "those rows were deleted from the database"
        ),
        tag="summary",
        timestamp=timestamp,
    )
    message = Message(
        id=f"s{row.row_id}",
        role=Role.USER,
        kind=MessageKind.SUMMARY,
        parts=(Part(type=PartType.TEXT, text=row.content),),
        visible=visible,
        timestamp=timestamp,
        name=SUMMARY_NAME.format(level=row.level),
    )
    return [note, MessageAdded(message=message, tokens=tokens, tokens_origin=origin)]


def sniff_database(head: Head) -> float:
    if not head.is_sqlite:
        return 0.0
    tables = sqlite_tables_of(head.path)
    if "messages" in tables and "summaries" in tables:
        return 0.95 if {"keywords", "metrics"} <= tables else 0.85
    return 0.0


DB_SPEC = register(
    FormatSpec(
        name="fifth-db",
        description="Fifth context manager: its SQLite context.db, read-only",
        reads="~/.fifth/context.db",
        parser=None,
        sniff=sniff_database,
        default_profile="fifth",
        snapshot=read_database,
    )
)
