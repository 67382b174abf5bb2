"""OpenCode's SQLite database, ``opencode.db`` (v1.2+): every session, read whole and read-only.

Tables ``session``, ``message`` and ``part`` (``data`` holds each message's and part's JSON),
opened with ``open_sqlite_readonly``; each session is one ``SnapshotSession``, converted by
``convert_session`` (see ``convert``). Problems of the database (a missing table or column, a
row whose JSON is broken) are parse issues.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ctx_inspect.agents.opencode.convert import convert_session, session_fields
from ctx_inspect.agents.opencode.records import REQUIRED_TABLES, OcMessage, load_json_value
from ctx_inspect.core.model import Event
from ctx_inspect.formats.chat_common import type_name
from ctx_inspect.formats.registry import FormatSpec, Head, SnapshotSession, register
from ctx_inspect.formats.sqlite import (
    SQLITE_ERRORS,
    column_text,
    db_issue,
    open_sqlite_readonly,
    sqlite_columns,
    sqlite_tables,
    sqlite_tables_of,
)


def read_database(path: Path) -> list[SnapshotSession]:
    """Every session in an ``opencode.db``, read-only; problems become parse issues."""
    path = Path(path)
    try:
        con, note = open_sqlite_readonly(path)
    except (sqlite3.Error, OSError) as exc:
        return [SnapshotSession(path.name, [db_issue(path, f"cannot open the database: {exc}")])]
    try:
        sessions = _read_database(con, path)
    except SQLITE_ERRORS as exc:
        sessions = [
            SnapshotSession(path.name, [db_issue(path, f"cannot read the database: {exc}")])
        ]
    finally:
        con.close()
    if note and sessions:
        sessions[0].events.insert(0, db_issue(path, f"warning: {note}"))
    return sessions


def _rows(
    con: sqlite3.Connection, sql: str, args: tuple[Any, ...] = ()
) -> Iterator[dict[str, Any]]:
    cursor = con.execute(sql, args)
    names = [d[0] for d in cursor.description]
    for row in cursor:
        yield {
            name: (column_text(value) if isinstance(value, bytes) and name != "data" else value)
            for name, value in zip(names, row, strict=True)
        }


def _read_database(con: sqlite3.Connection, path: Path) -> list[SnapshotSession]:
    tables = sqlite_tables(con)
    missing = [t for t in REQUIRED_TABLES if t not in tables]
    if missing:
        names = ", ".join(missing)
        reason = (
            f"no {names} table{'s' if len(missing) > 1 else ''}: not an OpenCode database "
            "(opencode.db has session, message and part)"
        )
        return [SnapshotSession(path.name, [db_issue(path, reason)])]
    problems: list[Event] = []
    for table, needed in (
        ("message", ("id", "session_id", "data")),
        ("part", ("id", "message_id", "data")),
    ):
        absent = [c for c in needed if c not in sqlite_columns(con, table)]
        if absent:
            problems.append(db_issue(path, f"table {table} has no column {', '.join(absent)}"))
    if problems:
        return [SnapshotSession(path.name, problems)]
    session_cols = sqlite_columns(con, "session")
    order = "time_created, id" if "time_created" in session_cols else "rowid"
    issues: list[Event] = []
    sessions: dict[str, dict[str, Any]] = {}
    for row in _rows(con, f"SELECT * FROM session ORDER BY {order}"):
        fields = session_fields(row, path, issues)
        if fields["id"] is not None:
            sessions[str(fields["id"])] = fields
    message_cols = sqlite_columns(con, "message")
    msg_order = "time_created, id" if "time_created" in message_cols else "id"
    orphans = {
        column_text(sid) for (sid,) in con.execute("SELECT DISTINCT session_id FROM message")
    }
    for key in sorted(orphans - set(sessions)):
        sessions[key] = {"id": key, "title": f"{key} (no session row)"}
    out: list[SnapshotSession] = []
    for index, (sid, fields) in enumerate(sessions.items()):
        session_issues = issues if index == 0 else []
        messages = _db_messages(con, path, sid, msg_order, session_issues)
        out.append(convert_session(path, fields, messages, session_issues))
    if not out:
        out.append(SnapshotSession(path.name, issues))
    return out


def _db_messages(
    con: sqlite3.Connection, path: Path, session_id: str, order: str, issues: list[Event]
) -> list[OcMessage]:
    messages: dict[str, OcMessage] = {}
    sql = f"SELECT id, data FROM message WHERE session_id = ? ORDER BY {order}"
    for row in _rows(con, sql, (session_id,)):
        msg_id = str(row["id"])
        info = load_json_value(row["data"], f"message {msg_id}", path, issues)
        if info is None:
            continue
        if not isinstance(info, dict):
            issues.append(db_issue(path, f"message {msg_id}: data is {type_name(info)}"))
            continue
        messages[msg_id] = OcMessage(info={**info, "id": msg_id})
    sql = (
        "SELECT p.id, p.message_id, p.data FROM part p JOIN message m ON m.id = p.message_id "
        "WHERE m.session_id = ? ORDER BY p.message_id, p.id"
    )
    for row in _rows(con, sql, (session_id,)):
        owner = messages.get(str(row["message_id"]))
        if owner is None:
            continue  # the message itself was unreadable (already an issue)
        part_id = str(row["id"])
        part = load_json_value(
            row["data"], f"part {part_id} of message {row['message_id']}", path, issues
        )
        if isinstance(part, dict):
            owner.parts.append({**part, "id": part_id})
        elif part is not None:
            issues.append(db_issue(path, f"part {part_id}: data is {type_name(part)}"))
    return list(messages.values())


def sniff_database(head: Head) -> float:
    if not head.is_sqlite:
        return 0.0
    tables = sqlite_tables_of(head.path)
    if all(t in tables for t in REQUIRED_TABLES):
        return 0.95
    return 0.0


DB_SPEC = register(
    FormatSpec(
        name="opencode-db",
        description="OpenCode's SQLite database (v1.2+), every session, read-only",
        reads="~/.local/share/opencode/opencode.db (or $OPENCODE_DB)",
        parser=None,
        sniff=sniff_database,
        default_profile="opencode",
        snapshot=read_database,
    )
)
