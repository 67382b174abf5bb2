"""Fifth's context manager: the context.db reader (read-only) and the stats output reader."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import TypeVar

import pytest

from ctx_inspect.agents.fifth import reader_db, reader_stats
from ctx_inspect.agents.fifth.reader_db import read_database
from ctx_inspect.agents.fifth.reader_stats import FifthStatsParser
from ctx_inspect.core.model import (
    ContextMeasured,
    DebugTopic,
    Event,
    LogLine,
    MessageAdded,
    MessageKind,
    Origin,
    ParseIssue,
    PartType,
    Role,
    SessionInfo,
)
from ctx_inspect.core.session import Session
from ctx_inspect.formats import registry
from ctx_inspect.formats.registry import HEAD_BYTES, Head

DATA = Path(__file__).parents[1] / "data" / "fifth"
T = TypeVar("T")


def of_type(events: list[Event], cls: type[T]) -> list[T]:
    return [e for e in events if isinstance(e, cls)]


def issues(events: list[Event]) -> list[ParseIssue]:
    return of_type(events, ParseIssue)


def make_db(path: Path, *, rows: bool = True, wal: bool = False, schema: str = "") -> Path:
    con = sqlite3.connect(path)
    if wal:
        con.execute("PRAGMA journal_mode=WAL")
    con.executescript(schema or (DATA / "schema.sql").read_text())
    if rows:
        con.executescript((DATA / "context.sql").read_text())
    con.commit()
    con.close()
    return path


def read(path: Path) -> list[Event]:
    (session,) = read_database(path)
    assert session.label == path.name
    return session.events


def reference_db(path: Path) -> Path:
    """A context.db whose `stats` are the reference's worked example (12847 / 16000, 80 %)."""
    con = sqlite3.connect(path)
    con.executescript((DATA / "schema.sql").read_text())
    rows: list[tuple[str, int, int]] = []
    rows += [("system", 185, 1)] * 10  # level 1: 1850
    rows += [("assistant", 160, 2)] * 20  # level 2: 3200
    rows += [("user", 65, 3)] * 100  # level 3: 6500
    rows += [("tool", 480, 4)] * 26  # level 4: stored, never counted
    for index, (role, tokens, level) in enumerate(rows):
        stamp = f"2026-01-29 10:{index // 60:02d}:{index % 60:02d}"
        con.execute(
            "INSERT INTO messages (role, content, tokens, level, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (role, "x" * tokens * 4, tokens, level, stamp),
        )
    for index in range(23):  # 22 × 56 + 65 = 1297
        tokens = 65 if index == 0 else 56
        con.execute(
            "INSERT INTO summaries (level, content, tokens, source_ids, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (
                3 if index % 2 else 2,
                "summary",
                tokens,
                f"{index},{index + 1}",
                "2026-01-29 09:59:00",
            ),
        )
    con.commit()
    con.close()
    return path


# ------------------------------------------------------------------------------------------
# fifth-db


def test_database_typical(tmp_path: Path) -> None:
    events = read(make_db(tmp_path / "context.db"))
    assert not issues(events)
    assert [e.message.id if isinstance(e, MessageAdded) else e.type for e in events] == [
        "info", "m1", "log", "s1", "m5", "m6", "m7", "m8", "m9", "context",
    ]  # fmt: skip
    added = {e.message.id: e for e in of_type(events, MessageAdded)}
    system = added["m1"]
    assert system.message.role is Role.SYSTEM and system.message.visible
    assert (system.tokens, system.tokens_origin) == (14, Origin.REPORTED)
    assert system.message.timestamp == "2026-01-29T10:00:00+00:00"
    tool = added["m7"].message
    assert tool.role is Role.TOOL and tool.kind is MessageKind.TOOL_RESULT and not tool.visible
    assert tool.parts[0].type is PartType.TOOL_RESULT
    assert added["m9"].tokens is None and added["m9"].tokens_origin is None  # tokens 0
    summary = added["s1"]
    assert summary.message.kind is MessageKind.SUMMARY and summary.tokens == 22
    assert summary.message.name == "fifth level 3"
    assert summary.message.text.startswith("Fixed null check bug in parser.js:45")
    note = events[2]
    assert isinstance(note, LogLine) and note.tag == "summary"
    assert note.text.startswith("summary 1 (level 3) replaces messages 2,3,4")
    info = events[0]
    assert isinstance(info, SessionInfo)
    assert (info.agent, info.context_window) == ("fifth", 16000)
    levels = {
        lv["level"]: (lv["messages"], lv["summaries"], lv["budget"]) for lv in info.extra["levels"]
    }
    assert levels == {1: (14, 0, 2000), 2: (0, 0, 4000), 3: (31, 22, 8000), 4: (300, 0, None)}
    assert (info.extra["total"], info.extra["messages"], info.extra["summaries"]) == (67, 6, 1)
    assert (info.extra["keywords"], info.extra["metrics"]) == (2, 0)
    measured = events[-1]
    assert measured == ContextMeasured(tokens=67, limit=16000, percent=0.0, label="Total")
    # In a session: the tool output is stored but never in context.
    session = Session()
    session.append(events)
    ids = [session.table.ids[i] for i in session.in_context()]
    assert ids == ["m1", "s1", "m5", "m6", "m8", "m9"]


def test_database_reproduces_the_reference_stats(tmp_path: Path) -> None:
    events = read(reference_db(tmp_path / "context.db"))
    info = events[0]
    assert isinstance(info, SessionInfo)
    levels = {lv["level"]: lv["messages"] for lv in info.extra["levels"]}
    assert levels == {1: 1850, 2: 3200, 3: 6500, 4: 12480}
    assert sum(lv["summaries"] for lv in info.extra["levels"]) == 1297
    assert (info.extra["messages"], info.extra["summaries"]) == (156, 23)
    assert (info.extra["total"], info.extra["capacity_percent"]) == (12847, 80)
    measured = events[-1]
    assert isinstance(measured, ContextMeasured)
    stats = of_type(read_stats(stats_fixture()), ContextMeasured)[0]
    assert (
        (measured.tokens, measured.limit, measured.percent)
        == (
            stats.tokens,
            stats.limit,
            stats.percent,
        )
        == (12847, 16000, 80.0)
    )


@pytest.mark.parametrize("wal", [False, True])
def test_database_is_never_written(tmp_path: Path, wal: bool) -> None:
    path = make_db(tmp_path / "context.db", wal=wal)
    os.utime(path, ns=(2_000_000_000, 2_000_000_000))
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.iterdir()}
    assert list(before) == ["context.db"]
    read_database(path)
    reader_db.sniff_database(Head(path=path, data=path.read_bytes()[:HEAD_BYTES]))
    after = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.iterdir()}
    assert after == before


def test_empty_database_with_the_schema(tmp_path: Path) -> None:
    events = read(make_db(tmp_path / "context.db", rows=False))
    assert [e.type for e in events] == ["info", "context"]
    assert events[-1] == ContextMeasured(tokens=0, limit=16000, percent=0.0, label="Total")


def test_missing_tables(tmp_path: Path) -> None:
    path = tmp_path / "context.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE notes (id INTEGER)")
    con.close()
    (issue,) = read(path)
    assert isinstance(issue, ParseIssue)
    assert issue.reason.startswith("no messages table: not Fifth's context.db")
    schema = (DATA / "schema.sql").read_text().split("\n")
    only_messages = "\n".join(
        line for line in schema if "messages" in line or line.startswith("--")
    )
    events = read(make_db(tmp_path / "partial.db", rows=False, schema=only_messages))
    assert [i.reason for i in issues(events)] == [
        "no summaries table (read what is there)",
        "no keywords table (read what is there)",
        "no metrics table (read what is there)",
    ]
    assert isinstance(events[-1], ContextMeasured)


def test_broken_rows_are_issues_and_the_rest_is_read(tmp_path: Path) -> None:
    path = make_db(tmp_path / "context.db")
    con = sqlite3.connect(path)
    con.execute("UPDATE messages SET level = 'high' WHERE id = 5")
    con.execute("UPDATE messages SET role = 'robot' WHERE id = 6")
    con.execute("UPDATE messages SET tokens = 'many' WHERE id = 8")
    con.execute("UPDATE messages SET content = CAST(? AS TEXT) WHERE id = 9", (b"caf\xe9",))
    con.commit()
    con.close()
    events = read(path)
    assert [i.reason for i in issues(events)] == [
        "messages row id=5: level 'high' is not a number",
        "messages row id=6: unknown role 'robot'; skipped",
        "messages row id=8: tokens 'many' is not a number",
        "messages row id=9: invalid UTF-8 replaced with U+FFFD",
    ]
    added = {e.message.id: e for e in of_type(events, MessageAdded)}
    assert "m6" not in added
    assert added["m5"].message.visible  # a user message: level 3 by its role
    assert added["m8"].tokens is None
    assert added["m9"].message.text == "caf\ufffd"
    assert len(added) == 6


def test_readme_schema_without_level(tmp_path: Path) -> None:
    schema = (
        "CREATE TABLE messages (id INTEGER PRIMARY KEY, role TEXT NOT NULL, content TEXT NOT "
        "NULL, tokens INTEGER, priority INTEGER DEFAULT 50, created_at TEXT DEFAULT "
        "CURRENT_TIMESTAMP);"
        "CREATE TABLE summaries (id INTEGER PRIMARY KEY, level INTEGER NOT NULL, content TEXT "
        "NOT NULL, tokens INTEGER, source_ids TEXT, created_at TEXT);"
        "INSERT INTO messages (role, content, tokens, created_at) VALUES "
        "('system', 's', 3, '2026-01-29 10:00:00'), ('tool', 't', 9, '2026-01-29 10:00:01');"
    )
    events = read(make_db(tmp_path / "context.db", rows=False, schema=schema))
    added = of_type(events, MessageAdded)
    assert [(m.message.id, m.message.visible) for m in added] == [("m1", True), ("m2", False)]
    measured = events[-1]
    assert isinstance(measured, ContextMeasured) and measured.tokens == 3


def test_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "context.db"
    path.write_bytes(b"SQLite format 3\x00" + b"\x01" * 300)
    (issue,) = read(path)
    assert isinstance(issue, ParseIssue) and issue.reason.startswith("cannot open the database")


# ------------------------------------------------------------------------------------------
# fifth-stats


def stats_fixture() -> bytes:
    return (DATA / "stats.txt").read_bytes()


def read_stats(data: bytes, sizes: list[int] | None = None) -> list[Event]:
    parser = FifthStatsParser(0, "x")
    out: list[Event] = []
    pos = 0
    for size in sizes or ():
        out.extend(parser.feed(data[pos : pos + size]))
        pos += size
    out.extend(parser.feed(data[pos:]))
    out.extend(parser.finish())
    return out


def covered_lines(data: bytes, events: list[Event]) -> set[int]:
    starts = [0]
    for index, byte in enumerate(data):
        if byte == 10:
            starts.append(index + 1)
    lines: set[int] = set()
    for event in events:
        span = event.span
        if span is None:
            continue
        end = span.offset + max(span.length, 1)
        lines.update(i + 1 for i, start in enumerate(starts) if span.offset <= start < end)
    return lines


def test_stats_blocks() -> None:
    data = stats_fixture()
    events = read_stats(data)
    assert not issues(events)
    measured = of_type(events, ContextMeasured)
    assert [(m.tokens, m.limit, m.percent, m.label) for m in measured] == [
        (12847, 16000, 80.0, "Total"),
        (11020, 16000, 68.0, "Total"),
    ]
    topics = of_type(events, DebugTopic)
    assert [t.name for t in topics] == ["levels", "levels"]
    assert topics[0].payload == {
        "total": 12847,
        "budget": 16000,
        "percent": 80,
        "levels": [
            {"level": 1, "tokens": 1850, "budget": 2000, "name": "permanent"},
            {"level": 2, "tokens": 3200, "budget": 4000, "name": "session"},
            {"level": 3, "tokens": 6500, "budget": 8000, "name": "working"},
        ],
        "messages": 156,
        "summaries": 23,
        "compressions": 0,
    }
    assert topics[1].payload["compressions"] == 1
    span = measured[0].span
    assert span is not None and span.line == 6
    block = data[span.offset : span.offset + span.length]
    assert block.startswith(b"Context Manager Statistics\n") and block.endswith(b"Compressions: 0 ")
    nonblank = {i for i, line in enumerate(data.split(b"\n"), 1) if line.strip()}
    assert covered_lines(data, events) >= nonblank
    logs = of_type(events, LogLine)
    assert [line.text for line in logs][:2] == [
        "Context Manager v1.0",
        "Commands: add, build, stats, compress, search, clear, quit",
    ]


def test_stats_block_cut_short_or_broken() -> None:
    block = stats_fixture().split(b"\n")[5:16]  # header .. "  Messages:   156 "
    data = b"\n".join(block)
    events = read_stats(data)
    assert [e.type for e in events] == ["context", "debug", "issue"]
    issue = issues(events)[0]
    assert issue.reason == "stats block cut short (no 'Compressions:' line)" and issue.line == 11
    debug = of_type(events, DebugTopic)[0]
    assert debug.payload["messages"] == 156 and "compressions" not in debug.payload
    broken = data.replace(b"Level 2:   3200", b"Level 2:   lots")
    reasons = [i.reason for i in issues(read_stats(broken))]
    assert reasons == [
        "unreadable figures in a stats block",
        "stats block cut short (no 'Compressions:' line)",
    ]
    interrupted = b"Context Manager Statistics\n====\nsomething else\n"
    events = read_stats(interrupted)
    assert [e.type for e in events] == ["issue", "debug", "issue", "log"]
    assert issues(events)[0].reason == "stats block without a Total line"


# ------------------------------------------------------------------------------------------
# Sniffing and detection


def test_sniffers(tmp_path: Path) -> None:
    data = stats_fixture()
    assert reader_stats.sniff_stats(Head(path=Path("stats.txt"), data=data)) == 0.95
    assert (
        reader_stats.sniff_stats(Head(path=Path("x"), data=b"Context Manager Statistics\n")) == 0.7
    )
    assert reader_stats.sniff_stats(Head(path=Path("x"), data=b"Context Manager v1.0\n")) == 0.0
    path = make_db(tmp_path / "context.db")
    assert reader_db.sniff_database(Head(path=path, data=path.read_bytes()[:HEAD_BYTES])) == 0.95
    assert reader_db.sniff_database(Head(path=path, data=data)) == 0.0
    opencode_like = tmp_path / "opencode.db"
    con = sqlite3.connect(opencode_like)
    for table in ("session", "message", "part"):
        con.execute(f"CREATE TABLE {table} (id TEXT)")
    con.close()
    assert (
        reader_db.sniff_database(Head(path=opencode_like, data=opencode_like.read_bytes())) == 0.0
    )


def test_detected(tmp_path: Path) -> None:
    assert registry.detect(DATA / "stats.txt").name == "fifth-stats"
    spec = registry.detect(make_db(tmp_path / "context.db"))
    assert spec.name == "fifth-db" and spec.snapshot is read_database
    for name in ("fifth-db", "fifth-stats"):
        assert registry.get_format(name).default_profile == "fifth"
    assert registry.get_format("fifth-stats").make_parser().format_name == "fifth-stats"


@pytest.mark.corpus
def test_other_agents_files_are_not_claimed(corpus: Path) -> None:
    files = [p for p in sorted(corpus.rglob("*")) if p.is_file() and not p.name.endswith(".md")]
    assert files
    specs = [registry.get_format(n) for n in ("fifth-db", "fifth-stats")]
    for path in files:
        sample = registry.read_head(path)
        for spec in specs:
            assert spec.sniff(sample) < registry.MIN_CONFIDENCE, (spec.name, path)
