"""OpenCode: the log reader, the opencode.db reader (read-only) and the storage folder reader."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any, TypeVar

import pytest

from ctx_inspect.agents.opencode import reader_db, reader_log, reader_storage
from ctx_inspect.agents.opencode.reader_db import read_database
from ctx_inspect.agents.opencode.reader_log import OpenCodeLogParser
from ctx_inspect.agents.opencode.reader_storage import read_storage
from ctx_inspect.core.model import (
    Compacted,
    Event,
    LogLine,
    MessageAdded,
    MessageKind,
    ParseIssue,
    PartType,
    Pruned,
    RequestSent,
    SessionInfo,
    Usage,
    UsageReported,
)
from ctx_inspect.core.session import Flag, Session
from ctx_inspect.formats import registry, sqlite
from ctx_inspect.formats.registry import HEAD_BYTES, Head, SnapshotSession
from tests.corpus import foreign_paths, real_runs

DATA = Path(__file__).parents[1] / "data" / "opencode"
STORAGE = DATA / "storage"
SESSION_A = "ses_A1b2c3"
SESSION_B = "ses_B4d5e6"
T = TypeVar("T")


def of_type(events: list[Event], cls: type[T]) -> list[T]:
    return [e for e in events if isinstance(e, cls)]


def messages(events: list[Event]) -> list[MessageAdded]:
    return of_type(events, MessageAdded)


def issues(events: list[Event]) -> list[ParseIssue]:
    return of_type(events, ParseIssue)


def kinds(events: list[Event]) -> list[str]:
    return [
        f"{e.message.role.value}:{e.message.id}" if isinstance(e, MessageAdded) else e.type
        for e in events
    ]


# ------------------------------------------------------------------------------------------
# Building an opencode.db from the storage fixtures (the real schema, tests/data/opencode)


def _json(path: Path) -> dict[str, Any]:
    value = json.loads(path.read_text())
    assert isinstance(value, dict)
    return value


def build_db(
    path: Path, *, wal: bool = False, storage: Path = STORAGE, schema: bool = True
) -> Path:
    con = sqlite3.connect(path)
    if wal:
        con.execute("PRAGMA journal_mode=WAL")
    if schema:
        con.executescript((DATA / "schema.sql").read_text())
    con.execute("INSERT INTO project VALUES ('prj_1', '/work/demo', 'git', NULL, 1, 1)")
    for file in sorted((storage / "session").glob("*/*.json")):
        info = _json(file)
        con.execute(
            "INSERT INTO session (id, project_id, parent_id, slug, directory, title, version, "
            "time_created, time_updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                info["id"],
                info["projectID"],
                info.get("parentID"),
                info["id"].lower(),
                info["directory"],
                info["title"],
                info["version"],
                info["time"]["created"],
                info["time"]["updated"],
            ),
        )
    for file in sorted((storage / "message").glob("*/*.json")):
        info = _json(file)
        data = {k: v for k, v in info.items() if k not in ("id", "sessionID")}
        created = info["time"]["created"]
        con.execute(
            "INSERT INTO message VALUES (?, ?, ?, ?, ?)",
            (info["id"], info["sessionID"], created, created, json.dumps(data)),
        )
        for index, part_file in enumerate(sorted((storage / "part" / info["id"]).glob("*.json"))):
            part = _json(part_file)
            body = {k: v for k, v in part.items() if k not in ("id", "sessionID", "messageID")}
            con.execute(
                "INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)",
                (
                    part["id"],
                    info["id"],
                    info["sessionID"],
                    created + index,
                    created + index,
                    json.dumps(body),
                ),
            )
    con.commit()
    con.close()
    return path


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return build_db(tmp_path / "opencode.db")


def by_label(sessions: list[SnapshotSession]) -> dict[str, list[Event]]:
    return {s.label: s.events for s in sessions}


def storage_sessions() -> dict[str, list[Event]]:
    return by_label(read_storage(STORAGE))


def session_a() -> list[Event]:
    return storage_sessions()["Refactor the config loader"]


# ------------------------------------------------------------------------------------------
# The conversion (storage folder), then the same through opencode.db


def test_session_order_steps_and_usage() -> None:
    events = session_a()
    assert not issues(events)
    assert kinds(events) == [
        "info",
        "user:msg_001",
        "request", "assistant:msg_002", "usage", "tool:prt_002d",
        "request", "assistant:prt_002f", "usage", "tool:prt_002g",
        "request", "assistant:prt_002i", "usage",
        "prune",
        "user:msg_003",
        "request", "assistant:msg_004", "usage", "tool:prt_004b", "tool:prt_004c",
        "compaction", "user:msg_005",
        "request", "usage", "assistant:msg_006",
        "user:msg_007",
        "request", "assistant:msg_008", "usage",
        "request", "assistant:msg_009",
    ]  # fmt: skip
    # OpenCode's own count (tokens.total, else input + output + cache read + cache write) is
    # the step's figure: the usage comes after the answer it counts, before the tool results
    reported = of_type(events, UsageReported)
    counts = [(u.context_tokens, u.thread) for u in reported]
    assert counts == [
        (1740, "main"),
        (1735, "main"),
        (1770, "main"),
        (2760, "main"),
        (None, "compaction"),  # the summary's usage is the summarisation request's
        (703, "main"),
    ]
    assert reported[0].context_label == "input+output+cache (OpenCode's count)"
    assert reported[4].usage.input == 5200
    usages = [u.usage for u in of_type(events, UsageReported)]
    assert usages[:3] == [
        Usage(input=1500, output=40, reasoning=10, cache_write=200),
        Usage(input=20, output=15, cache_read=1700),
        Usage(input=30, output=5, cache_read=1735),
    ]
    assert [u.prompt_tokens for u in usages] == [1700, 1720, 1765, 2700, 5200, 700]
    session = Session()
    session.append(events)
    assert [s.tokens for s in session.steps] == [1740, 1735, 1770, 2760, 700, 703, 703]
    assert session.steps[0].reported_label == "input+output+cache (OpenCode's count)"
    requests = of_type(events, RequestSent)
    assert requests[0].request_id == "prt_002a" and requests[0].model == "claude-sonnet-4-5"
    info = events[0]
    assert isinstance(info, SessionInfo)
    assert (info.agent, info.session_id, info.version, info.model) == (
        "opencode",
        SESSION_A,
        "1.1.25",
        "claude-sonnet-4-5",
    )
    assert info.extra["title"] == "Refactor the config loader"
    assert "parent" not in info.extra


def test_message_parts() -> None:
    added = {m.message.id: m.message for m in messages(session_a())}
    first = added["msg_001"]
    assert [p.type for p in first.parts] == [PartType.TEXT, PartType.IMAGE, PartType.TEXT]
    assert first.parts[1].media_type == "image/png" and first.parts[1].data_bytes == 24
    assert first.parts[2].text == "Called the Read tool with config.ts"  # synthetic: sent
    assert "(draft, ignored)" not in first.text and "config.ts\n" not in first.text
    step1 = added["msg_002"]
    assert [p.type for p in step1.parts] == [PartType.THINKING, PartType.TEXT, PartType.TOOL_CALL]
    assert step1.kind is MessageKind.MESSAGE
    call = step1.parts[2]
    assert (call.tool_name, call.call_id, call.arguments) == (
        "read",
        "toolu_01",
        '{"filePath":"/work/demo/config.ts"}',
    )
    assert added["prt_002f"].kind is MessageKind.TOOL_CALL
    result = added["prt_002d"].parts[0]
    assert (result.type, result.tool_name, result.call_id) == (
        PartType.TOOL_RESULT,
        "read",
        "toolu_01",
    )
    assert result.text.startswith("export function load()")
    error = added["prt_004b"].parts[0]
    assert error.is_error and error.text == "command not found: vitest"
    interrupted = added["prt_004c"].parts[0]
    assert interrupted.is_error and interrupted.text == "[Tool execution was interrupted]"
    assert added["msg_005"].kind is MessageKind.META
    assert added["msg_005"].text == "What did we do so far?" and added["msg_005"].visible
    assert added["msg_006"].kind is MessageKind.SUMMARY
    assert added["msg_006"].text.startswith("## Goal")
    # the synthetic "Continue if you have next steps" OpenCode writes after a compaction
    assert added["msg_007"].kind is MessageKind.ATTACHMENT and added["msg_007"].visible
    assert added["msg_003"].kind is MessageKind.MESSAGE
    # Aborted with reasoning only, and an API error: not sent to the model again.
    assert not added["msg_008"].visible and added["msg_008"].text == "Next I would"
    assert not added["msg_009"].visible and added["msg_009"].parts == ()


def test_prune_and_compaction() -> None:
    events = session_a()
    prune = of_type(events, Pruned)[0]
    assert prune.message_ids == ("prt_002d", "prt_002g")
    assert prune.applied and prune.outputs_pruned == 2 and prune.reason == "prune"
    assert prune.timestamp == "2026-01-20T09:08:20+00:00"  # state.time.compacted
    outputs = {m.message.id: m.message.text for m in messages(events)}
    # OpenCode's estimate of each output (Math.round(length / 4)), summed: the log's found
    assert prune.tokens_recovered == sum(
        (len(outputs[mid]) + 2) // 4 for mid in ("prt_002d", "prt_002g")
    )
    compacted = of_type(events, Compacted)[0]
    # the compaction part says overflow: true; the figures are the ordinary requests around it
    assert (compacted.trigger, compacted.failed) == ("overflow", False)
    assert (compacted.tokens_before, compacted.tokens_after) == (2760, 700)
    assert compacted.summary_tokens == 400
    assert compacted.retained_ids == ("msg_005",)
    session = Session()
    session.append(events)
    ids = session.table.ids
    assert [ids[i] for i in session.in_context()] == ["msg_005", "msg_006", "msg_007"]
    pruned = [ids[i] for i in range(len(ids)) if session.table.flags[i] & Flag.PRUNED]
    assert pruned == ["prt_002d", "prt_002g"]
    # The compaction is in the summarisation request's build-up: that step shows the context
    # after it, not the summarisation request's own 5,200.
    assert session.step_at(events.index(compacted)) == 5
    assert (session.steps[4].reported, session.steps[4].reported_label) == (700, "compaction")
    assert session.steps[4].peak == 2760


def test_sub_session_and_failed_manual_compaction() -> None:
    events = storage_sessions()["Explore the tests (@explore subagent)"]
    info = events[0]
    assert isinstance(info, SessionInfo) and info.extra["parent"] == SESSION_A
    assert kinds(events) == [
        "info",
        "user:msg_101",
        "request", "assistant:msg_102", "usage",
        "compaction", "user:msg_103",
        "request", "assistant:msg_104",
    ]  # fmt: skip
    assert of_type(events, UsageReported)[0].usage == Usage(input=800, output=20)
    failed = of_type(events, Compacted)[0]
    assert (failed.trigger, failed.failed, failed.error) == ("manual", True, "Overloaded")
    assert failed.tokens_before == 820 and failed.tokens_after is None


def test_database_and_storage_agree(db: Path) -> None:
    from_db = read_database(db)
    from_storage = read_storage(STORAGE)
    assert [s.label for s in from_db] == [
        "Refactor the config loader",
        "Explore the tests (@explore subagent)",
    ]
    assert [s.label for s in from_storage] == [s.label for s in from_db]
    for a, b in zip(from_db, from_storage, strict=True):
        assert a.events == b.events


def test_storage_folder_by_its_parent(tmp_path: Path) -> None:
    shutil.copytree(STORAGE, tmp_path / "storage")
    assert [s.label for s in read_storage(tmp_path)] == [s.label for s in read_storage(STORAGE)]


# ------------------------------------------------------------------------------------------
# Read-only guarantee


def _snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("wal", [False, True])
def test_database_is_never_written(tmp_path: Path, wal: bool) -> None:
    path = build_db(tmp_path / "opencode.db", wal=wal)
    assert sqlite.sqlite_is_wal(path) is wal
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    before = _snapshot(tmp_path)
    assert list(before) == ["opencode.db"]
    read_database(path)
    reader_db.sniff_database(Head(path=path, data=path.read_bytes()[:HEAD_BYTES]))
    assert _snapshot(tmp_path) == before  # same bytes, same mtime, no -wal / -shm / -journal


def test_database_in_use_is_read_with_its_wal(tmp_path: Path) -> None:
    path = build_db(tmp_path / "opencode.db", wal=True)
    writer = sqlite3.connect(path)
    try:
        writer.execute("PRAGMA wal_autocheckpoint=0")
        writer.execute(
            "INSERT INTO session (id, project_id, slug, directory, title, version, time_created, "
            "time_updated) VALUES ('ses_new', 'prj_1', 'n', '/w', 'Fresh', '1.2.0', 9e12, 9e12)"
        )
        writer.commit()
        assert Path(f"{path}-wal").exists() and Path(f"{path}-shm").exists()
        main_before = path.read_bytes()
        labels = [s.label for s in read_database(path)]
        assert "Fresh" in labels  # the row only in the -wal file is read
        assert path.read_bytes() == main_before
    finally:
        writer.close()


def test_wal_file_without_shm_is_read_from_a_copy(tmp_path: Path) -> None:
    """A -wal left without its -shm (a crashed agent) is read through a private copy: its
    rows are there, and no -shm is made beside the database."""
    path = build_db(tmp_path / "opencode.db", wal=True)
    writer = sqlite3.connect(path)
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute(
        "INSERT INTO session (id, project_id, slug, directory, title, version, time_created, "
        "time_updated) VALUES ('ses_new', 'prj_1', 'n', '/w', 'Fresh', '1.2.0', 9e12, 9e12)"
    )
    writer.commit()
    saved = {name: Path(f"{path}{name}").read_bytes() for name in ("", "-wal")}
    writer.close()  # checkpoints and removes the -wal: put back the files as a crash leaves them
    for name, data in saved.items():
        Path(f"{path}{name}").write_bytes(data)
    before = _snapshot(tmp_path)
    assert sorted(before) == ["opencode.db", "opencode.db-wal"]
    sessions = read_database(path)
    assert _snapshot(tmp_path) == before
    assert "Fresh" in [s.label for s in sessions]
    assert not any(isinstance(e, ParseIssue) for s in sessions for e in s.events)


# ------------------------------------------------------------------------------------------
# Bad and odd databases


def test_empty_database_with_the_schema(tmp_path: Path) -> None:
    path = tmp_path / "opencode.db"
    con = sqlite3.connect(path)
    con.executescript((DATA / "schema.sql").read_text())
    con.close()
    sessions = read_database(path)
    assert len(sessions) == 1 and sessions[0].events == []


def test_missing_table_is_an_issue(tmp_path: Path) -> None:
    path = tmp_path / "opencode.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE session (id TEXT)")
    con.execute("CREATE TABLE message (id TEXT, session_id TEXT, data TEXT)")
    con.close()
    (session,) = read_database(path)
    (issue,) = session.events
    assert isinstance(issue, ParseIssue)
    assert issue.reason.startswith("no part table: not an OpenCode database")
    assert issue.file == str(path)


def test_missing_column_is_an_issue(tmp_path: Path) -> None:
    path = tmp_path / "opencode.db"
    con = sqlite3.connect(path)
    for table in ("session", "message", "part"):
        con.execute(f"CREATE TABLE {table} (id TEXT)")
    con.close()
    (session,) = read_database(path)
    assert [i.reason for i in issues(session.events)] == [
        "table message has no column session_id, data",
        "table part has no column message_id, data",
    ]


def test_broken_rows_are_issues_and_the_rest_is_read(db: Path) -> None:
    con = sqlite3.connect(db)
    con.execute("UPDATE message SET data = '{\"role\": \"user\", ' WHERE id = 'msg_003'")
    con.execute("UPDATE part SET data = '[1, 2]' WHERE id = 'prt_002j'")
    con.execute(
        "UPDATE part SET data = CAST(? AS TEXT) WHERE id = 'prt_101a'",
        (b'{"type":"text","text":"\xe9"}',),
    )
    con.execute("UPDATE message SET data = '{\"role\": \"robot\"}' WHERE id = 'msg_007'")
    con.commit()
    con.close()
    sessions = by_label(read_database(db))
    events = sessions["Refactor the config loader"]
    reasons = [i.reason for i in issues(events)]
    assert reasons[0].startswith("message msg_003: data is not valid JSON")
    assert reasons[1:] == ["part prt_002j: data is array", "message msg_007: unknown role 'robot'"]
    ids = [m.message.id for m in messages(events)]
    assert "msg_003" not in ids and "msg_007" not in ids and "msg_006" in ids
    assert not any(p.text.startswith("Done:") for m in messages(events) for p in m.message.parts)
    sub = sessions["Explore the tests (@explore subagent)"]
    utf8 = issues(sub)
    assert len(utf8) == 1 and "invalid UTF-8" in utf8[0].reason
    assert "prt_101a" in utf8[0].reason
    assert messages(sub)[0].message.text == "\ufffd"


def test_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "opencode.db"
    path.write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)
    (session,) = read_database(path)
    (issue,) = session.events
    assert isinstance(issue, ParseIssue) and issue.reason.startswith("cannot open the database")


def test_messages_without_a_session_row(tmp_path: Path) -> None:
    path = build_db(tmp_path / "opencode.db")
    con = sqlite3.connect(path)
    con.execute("DELETE FROM session WHERE id = ?", (SESSION_B,))
    con.commit()
    con.close()
    labels = [s.label for s in read_database(path)]
    assert labels == ["Refactor the config loader", f"{SESSION_B} (no session row)"]


def test_storage_problems(tmp_path: Path) -> None:
    (issue,) = read_storage(tmp_path)[0].events
    assert isinstance(issue, ParseIssue) and "not OpenCode's storage folder" in issue.reason
    root = tmp_path / "storage"
    shutil.copytree(STORAGE, root)
    broken = root / "message" / SESSION_A / "msg_003.json"
    broken.write_text('{"id": "msg_003", ')
    (root / "part" / "msg_002" / "prt_002j.json").write_text("[]")
    events = by_label(read_storage(root))["Refactor the config loader"]
    found = issues(events)
    assert [Path(i.file).name for i in found] == ["prt_002j.json", "msg_003.json"]
    assert found[0].reason == "prt_002j.json: a JSON array, not an object"
    assert found[1].reason.startswith("msg_003.json: data is not valid JSON")
    assert "msg_003" not in [m.message.id for m in messages(events)]


# ------------------------------------------------------------------------------------------
# The log


def log_fixture() -> bytes:
    return (DATA / "opencode.log").read_bytes()


def read_log(data: bytes, sizes: list[int] | None = None) -> list[Event]:
    parser = OpenCodeLogParser(0, "x")
    out: list[Event] = []
    pos = 0
    for size in sizes or ():
        out.extend(parser.feed(data[pos : pos + size]))
        pos += size
    out.extend(parser.feed(data[pos:]))
    out.extend(parser.finish())
    return out


def test_log_prune_attempts() -> None:
    data = log_fixture()
    events = read_log(data)
    assert not issues(events)
    lines = {e.span.line for e in events if e.span}
    assert lines == {i for i, ln in enumerate(data.split(b"\n"), 1) if ln.strip()}
    got = [
        (
            p.applied,
            p.tokens_recovered,
            p.scanned_tokens,
            p.outputs_pruned,
            p.span.line if p.span else 0,
        )
        for p in of_type(events, Pruned)
    ]
    assert got == [
        (True, 52341, 92341, 14, 5),
        (False, 0, 31800, 0, 11),  # emitted when the next attempt starts
        (True, 30500, 70500, 9, 14),
        (False, 12000, 48000, 0, 16),  # Effect-style logfmt record: under the minimum
        # above OpenCode's minimum (20,000): applied, though its count record is not there
        (True, 25000, 65000, None, 18),
    ]
    pruned = of_type(events, Pruned)
    assert pruned[0].timestamp == "2026-01-20T09:14:02+00:00"
    order = [e.type for e in events if e.span and e.span.line in (11, 12)]
    assert order == ["log", "prune", "log"]


def test_log_lines() -> None:
    logs = of_type(read_log(log_fixture()), LogLine)
    first = logs[0]
    assert (first.level, first.tag, first.timestamp) == (
        "INFO",
        "default",
        "2026-01-20T09:13:58+00:00",
    )
    assert first.text == 'version=1.1.25 args=["run","--print-logs"] opencode'
    warn = next(line for line in logs if line.level == "WARN")
    assert warn.tag == "provider"
    trace = next(line for line in logs if line.tag == "continuation")
    assert trace.text == "at run (src/session/prompt.ts:120:11)"
    effect = next(line for line in logs if line.text.startswith("[10:00:01.002]"))
    assert effect.level is None


def test_log_bad_lines() -> None:
    good = b"INFO  2026-01-20T09:13:58 +0ms service=bus publishing\n"
    data = (
        good
        + b"garbage without shape\n"
        + b"   indented after garbage\n"
        + good
        + b"INFO  2026-01-20T09:14:02 +0ms service=session.compaction pruned=5 total=9 found\n"
        + b"INFO  2026-01-20T09:14:02 +4ms service=session.compaction pru"
    )
    events = read_log(data)
    found = issues(events)
    lines = data.split(b"\n")
    assert [i.line for i in found] == [2, 3]
    for issue in found:
        assert issue.offset == sum(len(ln) + 1 for ln in lines[: issue.line - 1])
        assert issue.reason == "not an OpenCode log record"
    (found_small,) = of_type(events, Pruned)
    assert not found_small.applied and found_small.span and found_small.span.line == 5
    cut = events[-1]
    assert isinstance(cut, LogLine) and cut.text == "pru" and cut.span and cut.span.line == 6


def test_log_invalid_utf8_and_huge_line(tmp_path: Path) -> None:
    events = read_log(b"INFO  2026-01-20T09:13:58 +0ms service=bus caf\xe9\n")
    assert [e.type for e in events] == ["issue", "log"]
    assert of_type(events, LogLine)[0].text == "caf\ufffd"
    big = b"x" * (20 * 1024 * 1024)
    path = tmp_path / "big.log"
    path.write_bytes(
        log_fixture() + b"INFO  2026-01-20T09:40:00 +0ms service=tool out=" + big + b" done\n"
    )
    data = path.read_bytes()
    events = read_log(data, sizes=[1 << 20] * 22)
    assert not issues(events)
    last = of_type(events, LogLine)[-1]
    assert last.span is not None and last.span.line == 19 and len(last.text) == 200


# ------------------------------------------------------------------------------------------
# Sniffing and detection


def test_sniffers(db: Path, tmp_path: Path) -> None:
    data = log_fixture()
    assert reader_log.sniff_log(Head(path=Path("2026-01-20T091358.log"), data=data)) == 0.9
    goagent_log = (Path(__file__).parents[1] / "data" / "goagent" / "log.log").read_bytes()
    assert reader_log.sniff_log(Head(path=Path("x.log"), data=goagent_log)) == 0.0
    db_head = Head(path=db, data=db.read_bytes()[:HEAD_BYTES])
    assert reader_db.sniff_database(db_head) == 0.95
    assert reader_db.sniff_database(Head(path=db, data=data)) == 0.0
    other = tmp_path / "other.db"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE messages (id INTEGER)")
    con.close()
    assert reader_db.sniff_database(Head(path=other, data=other.read_bytes())) == 0.0
    assert reader_storage.sniff_storage(Head(path=STORAGE, data=b"", is_dir=True)) == 0.95
    assert reader_storage.sniff_storage(Head(path=DATA, data=b"", is_dir=True)) == 0.95
    assert reader_storage.sniff_storage(Head(path=tmp_path, data=b"", is_dir=True)) == 0.0


def test_detected(db: Path) -> None:
    assert registry.detect(DATA / "opencode.log").name == "opencode-log"
    assert registry.detect(db).name == "opencode-db"
    storage = registry.detect(STORAGE)
    assert storage.name == "opencode-storage" and storage.folder
    for name in ("opencode-log", "opencode-db", "opencode-storage"):
        assert registry.get_format(name).default_profile == "opencode"
    assert registry.get_format("opencode-db").snapshot is read_database
    with pytest.raises(TypeError):
        registry.get_format("opencode-db").make_parser()


@pytest.mark.corpus
def test_other_agents_files_are_not_claimed(corpus: Path) -> None:
    paths = foreign_paths(corpus, "opencode")
    names = ("opencode-log", "opencode-db", "opencode-storage", "opencode-run", "opencode-data")
    specs = [registry.get_format(n) for n in names]
    checked = 0
    for path in paths:
        sample = registry.read_head(path)
        for spec in specs:
            if sample.is_dir and not spec.folder:
                continue
            assert spec.sniff(sample) < registry.MIN_CONFIDENCE, (spec.name, path)
            checked += 1
    assert checked > 20


def test_session_rows_with_a_data_column(tmp_path: Path) -> None:
    path = tmp_path / "opencode.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE session (id TEXT PRIMARY KEY, time_created INTEGER, data TEXT)")
    con.execute("CREATE TABLE message (id TEXT, session_id TEXT, time_created INTEGER, data TEXT)")
    con.execute("CREATE TABLE part (id TEXT, message_id TEXT, session_id TEXT, data TEXT)")
    con.execute(
        "INSERT INTO session VALUES ('ses_child', 5, ?), ('ses_bad', 6, '{oops')",
        (json.dumps({"title": "Child", "parentID": "ses_parent", "version": "1.2.3"}),),
    )
    con.commit()
    con.close()
    child, bad = read_database(path)
    assert child.label == "Child"
    info = child.events[0]
    assert isinstance(info, SessionInfo)
    assert (info.session_id, info.version, info.extra["parent"]) == (
        "ses_child",
        "1.2.3",
        "ses_parent",
    )
    assert [i.reason.split(":")[0] for i in issues(child.events)] == ["session ses_bad"]
    assert bad.label == "ses_bad"


@pytest.mark.parametrize("fails", ["connect", "query"])
def test_unreadable_with_mode_ro_is_read_from_a_copy(
    db: Path, monkeypatch: pytest.MonkeyPatch, fails: str
) -> None:
    real = sqlite._connect
    uris: list[str] = []

    def refuse_ro(uri: str, folder: Path | None = None) -> sqlite3.Connection:
        uris.append(uri)
        if "mode=ro" in uri and fails == "connect":
            raise sqlite3.OperationalError("unable to open database file")
        con = real(uri, folder)
        if "mode=ro" in uri:
            con.close()  # its first query fails
        return con

    monkeypatch.setattr(sqlite, "_connect", refuse_ro)
    con, note = sqlite.open_sqlite_readonly(db)
    try:
        assert note is not None and note.startswith("read from a private copy")
        assert "session" in sqlite.sqlite_tables(con)
    finally:
        con.close()
    assert uris[0].endswith("?mode=ro") and str(db.parent) in uris[0]
    assert str(db.parent) not in uris[1]  # the copy, elsewhere
    sessions = read_database(db)
    first = sessions[0].events[0]
    assert isinstance(first, ParseIssue) and first.reason.startswith("warning: read from a private")
    assert len(sessions) == 2


@pytest.mark.corpus
def test_real_runs_are_claimed(corpus: Path) -> None:
    """The database the real OpenCode 1.18 wrote is read as an OpenCode database."""
    runs = real_runs(corpus, "opencode")
    if not runs.is_dir():
        pytest.skip(f"no real runs of OpenCode at {runs}")
    dbs = sorted(runs.rglob("opencode.db"))
    assert dbs
    for path in dbs:
        assert registry.detect(path).name == "opencode-db", path
        assert registry.detect(path.parent).name == "opencode-data", path.parent
        assert registry.detect(path.parent / "log" / "opencode.log").name == "opencode-log"
    stdouts = sorted(runs.rglob("run-*.stdout.jsonl"))
    assert stdouts
    for path in stdouts:
        assert registry.detect(path).name == "opencode-run", path
