"""What fuzzing the formats found (``test_fuzz_formats.py``), each as the exact case that shows
it, fixed: a case here fails without its fix.

Values nested ``DEEP`` levels are the usual trigger: the JSON reader takes up to 1,024 levels,
and any Python code that recurses over such a value (``repr``, ``==``, ``copy.deepcopy``,
``json.dumps``, a recursive reader) runs out of Python's 1,000 frames.
"""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson
import pytest

from ctx_inspect.agents.fifth.reader_db import read_database as read_fifth
from ctx_inspect.agents.goagent.reader_log import log_attrs
from ctx_inspect.agents.opencode.reader_db import read_database as read_opencode
from ctx_inspect.agents.opencode.reader_storage import read_storage
from ctx_inspect.core.model import (
    Event,
    LogLine,
    MessageAdded,
    ParseIssue,
    PartType,
    RequestSent,
    SourceSpan,
    UsageReported,
)
from ctx_inspect.core.packed import RequestEntry, UsageEntry
from ctx_inspect.formats.base import LineParser
from ctx_inspect.formats.chat_common import compact_json
from ctx_inspect.formats.jsinspect import InspectError, parse_inspect
from ctx_inspect.formats.registry import get_format
from tests.formats import comparable, read
from tests.hostile.fuzz import RandomChoices, _mutate_row
from tests.hostile.test_fuzz_formats import check_commands, check_reading

DATA = Path(__file__).parents[1] / "data"
DEEP = 1_000


def deep(depth: int = DEEP) -> Any:
    return orjson.loads("[" * depth + "]" * depth)


def line(value: Any) -> bytes:
    return compact_json(value).encode() + b"\n"


def issues(events: Iterable[Any]) -> list[ParseIssue]:
    return [e for e in events if isinstance(e, ParseIssue)]


def crashes(events: Iterable[Any]) -> list[str]:
    """Parse issues that are a reader's own failure, caught by the safety net."""
    return [i.reason for i in issues(events) if i.reason.startswith("unreadable")]


# -- fixed: values nested deeply ----------------------------------------------------------------


def test_compact_json_writes_values_nested_past_the_encoders() -> None:
    value = orjson.loads('{"a": ' + "[" * DEEP + '"é\\n"' + "]" * DEEP + "}")
    assert compact_json(value) == '{"a":' + "[" * DEEP + '"é\\n"' + "]" * DEEP + "}"
    for plain in [{"a": [1, 2.5, None, True, "x"]}, [], {}, "s", 10**30]:
        assert compact_json(plain) == json.dumps(plain, separators=(",", ":"))


def test_a_chat_document_with_a_message_nested_deeply_is_an_issue(tmp_path: Path) -> None:
    """Found by: openai-chat, deep_nesting of a document's message (RecursionError out of
    ``finish``: a traceback)."""
    data = line({"messages": [deep(), {"role": "user", "content": "hi"}]})
    for name in ("openai-chat", "anthropic-messages"):
        events = read(get_format(name), data)
        assert [e.message.parts[0].text for e in events if isinstance(e, MessageAdded)] == ["hi"]
        assert len(issues(events)) == 1
    path = tmp_path / "deep.json"
    path.write_bytes(data)
    check_commands(path, ["--format", "openai-chat"])


def test_a_trajectory_with_a_history_item_nested_deeply_is_an_issue() -> None:
    """Found by: swe-agent, deep_nesting (orjson's writer refuses 255 levels: a TypeError out of
    ``finish``)."""
    data = line({"history": [deep(300), {"role": "user", "content": "hi"}]})
    events = read(get_format("swe-agent"), data)
    assert [i.reason for i in issues(events)] == ["history[0]: not a message object (array)"]
    assert len([e for e in events if isinstance(e, MessageAdded)]) == 1


def test_an_openhands_event_list_with_an_item_nested_deeply_is_an_issue() -> None:
    """Found by: openhands, deep_nesting of a document (``repr`` of the item: a RecursionError
    out of ``finish``)."""
    data = b"[\n" + line(deep()) + b"]\n"
    events = read(get_format("openhands"), data)
    assert [i.reason for i in issues(events)] == ["[0]: not an OpenHands event"]


def test_a_native_header_or_record_nested_deeply_is_read() -> None:
    """Found by: native, deep_nesting (a version nested deeply: ``repr``; a newer writer's
    unknown field nested deeply: ``copy.deepcopy``; both ended as unreadable records)."""
    header = {"format": "ctx-inspect", "version": deep()}
    events = read(get_format("native"), line(header))
    assert not crashes(events)
    assert issues(events)[0].reason.startswith("header has no valid version ([[[[")
    newer = {"format": "ctx-inspect", "version": 99}
    marker = {"type": "marker", "text": "m", "unknown": deep()}
    events = read(get_format("native"), line(newer) + line(marker))
    assert not crashes(events)
    assert [e.type for e in events] == ["issue", "marker"]


def test_codex_exec_tool_items_nested_deeply_are_read() -> None:
    """Found by: codex-exec, deep_nesting of an MCP tool item (``json.dumps``, orjson:
    unreadable records)."""
    item = {"id": "i1", "type": "mcp_tool_call", "server": "s", "tool": "t"}
    data = line({"type": "item.completed", "item": {**item, "arguments": deep(), "result": deep()}})
    events = read(get_format("codex-exec"), data)
    assert not crashes(events)
    assert [e.message.kind for e in events if isinstance(e, MessageAdded)] == [
        "tool_call",
        "tool_result",
    ]


def test_opencode_messages_with_a_role_nested_deeply_are_issues(tmp_path: Path) -> None:
    """Found by: opencode-storage, deep_nesting of a message file (``repr`` of its role: a
    RecursionError out of the reader: a traceback)."""
    storage = tmp_path / "storage"
    for name in ("session", "message", "part"):
        (storage / name).mkdir(parents=True)
    (storage / "session" / "p").mkdir()
    session = {"id": "ses_1", "title": "t", "time": {"created": 1}}
    (storage / "session" / "p" / "ses_1.json").write_bytes(orjson.dumps(session))
    (storage / "message" / "ses_1").mkdir()
    message = {"id": "msg_1", "sessionID": "ses_1", "role": deep(), "time": {"created": 2}}
    (storage / "message" / "ses_1" / "msg_1.json").write_bytes(line(message))
    (session_read,) = read_storage(storage)
    reasons = [i.reason for i in issues(session_read.events)]
    assert reasons == ["message msg_1: unknown role " + "[" * 57 + "..."]


def test_util_inspect_text_nested_deeply_is_refused() -> None:
    """Found by: aiagent-debug, deep_nesting of a debug block (the recursive reader of
    ``util.inspect`` text: unreadable records, and blocks read differently in pieces)."""
    with pytest.raises(InspectError, match="nested more than 100 levels deep"):
        parse_inspect("[" * DEEP + "]" * DEEP)
    assert parse_inspect("{ a: " + "[ " * 50 + "1" + " ]" * 50 + " }") == {
        "a": orjson.loads("[" * 50 + "1" + "]" * 50)
    }


# -- fixed: values of the wrong type ------------------------------------------------------------


def test_codex_records_whose_type_is_a_list_are_read() -> None:
    """Found by: codex, wrong_types (``kind in TURN_END`` with a list: unreadable records)."""
    meta = {"type": "session_meta", "payload": {"id": "s", "cli_version": "0.169.0"}}
    event = {"type": "event_msg", "payload": {"type": ["task_complete"]}}
    content = {"type": [], "text": "x"}
    item = {
        "type": "response_item",
        "payload": {"type": "message", "role": "user", "content": [content]},
    }
    events = read(get_format("codex"), line(meta) + line(event) + line(item))
    assert not crashes(events)
    assert any(isinstance(e, LogLine) and e.text == "event_msg" for e in events)


def test_chat_parts_whose_type_is_a_list_are_read() -> None:
    """Found by: openai-chat and anthropic-messages, wrong_types (``kind in TEXT_TYPES`` with
    a list: unreadable messages)."""
    for name in ("openai-chat", "anthropic-messages"):
        message = {"role": "user", "content": [{"type": ["text"], "text": "x"}]}
        events = read(get_format(name), line(message))
        assert not crashes(events), name
        (added,) = [e for e in events if isinstance(e, MessageAdded)]
        assert added.message.parts[0].type is PartType.ATTACHMENT  # kept whole


# -- fixed: bytes lost without a word -----------------------------------------------------------


@pytest.mark.parametrize("name", ["openai-chat", "anthropic-messages", "swe-agent", "openhands"])
def test_a_document_that_does_not_parse_is_one_issue_spanning_it(name: str) -> None:
    """Found by: bit_flips in pretty-printed documents: the issue pointed at where parsing
    stopped (or nowhere), and no event held the rest of the document."""
    data = b'[\n  {"role": "user",\n   "content": "hi" oops},\n  {"role": "user"}\n]\n'
    events = read(get_format(name), data)
    (issue,) = issues(events)
    assert issue.reason.startswith("not valid JSON")
    assert issue.span == SourceSpan(
        offset=0, length=len(data.rstrip(b"\n")) + (name != "openhands"), line=1
    )
    assert (issue.line, issue.offset) != (1, 0)  # where parsing stopped


def test_a_second_native_header_is_noted() -> None:
    """Found by: native, duplicated_or_reordered (a header again: nothing said)."""
    header = line({"format": "ctx-inspect", "version": 1})
    marker = line({"type": "marker", "text": "m"})
    events = read(get_format("native"), header + marker + header + marker)
    assert [e.type for e in events] == ["marker", "issue", "marker"]
    assert [i.line for i in issues(events)] == [3]
    events = read(get_format("native"), marker + header)
    assert [e.type for e in events] == ["issue", "marker", "issue"]


def test_an_opencode_run_step_finish_without_tokens_is_a_log_line() -> None:
    """Found by: opencode-run, wrong_types (a step_finish without tokens: its line in no event)."""
    start = {"type": "step_start", "timestamp": 1, "sessionID": "s", "part": {"id": "p1"}}
    finish = {"type": "step_finish", "timestamp": 2, "sessionID": "s", "part": None}
    data = line(start) + line(finish)
    events = read(get_format("opencode-run"), data)
    logs = [e for e in events if isinstance(e, LogLine)]
    assert [(e.text, e.span and e.span.line) for e in logs] == [
        ("step finished without token figures", 2)
    ]
    finish["part"] = {"tokens": {"input": 5, "output": 1}}
    events = read(get_format("opencode-run"), data.split(b"\n")[0] + b"\n" + line(finish))
    (usage,) = [e for e in events if isinstance(e, UsageReported)]
    assert usage.span is not None and usage.span.line == 2


# -- fixed: a reader's failure escaping, inputs that hang, damaged databases --------------------


def test_an_ai_agent_final_turn_notice_in_a_thread_is_kept() -> None:
    """Found by: aiagent-log, duplicated_or_reordered (a sub-agent's line first makes the main
    agent's lines a thread of their own; there a "Final turn detected" line held for the
    "Context limit exceeded" line after it stood for both, and the second was dropped)."""
    lines = (DATA / "aiagent" / "log_guard.log").read_bytes().split(b"\n")
    lines[0], lines[4] = lines[4], lines[0]  # the sub-agent's request first
    data = b"\n".join(lines)
    assert b"agent_path=reviewer:helper" in lines[0]
    assert b"Final turn detected" in lines[6] and b"Context limit exceeded" in lines[7]
    events = read(get_format("aiagent-log"), data)
    logs = [e for e in events if isinstance(e, LogLine) and e.span is not None]
    assert {e.span.line for e in logs if e.span is not None} >= {7, 8}  # both lines
    check_reading(get_format("aiagent-log"), data, [len(data) // 2])


class _ScanFails(LineParser):
    two_phase = True

    @staticmethod
    def scan_line(line: memoryview) -> Any:
        raise TypeError("unhashable type: 'list'")

    def parse_line(self, line: bytes, span: SourceSpan) -> Iterable[Event]:
        return [LogLine(text=line.decode(), span=span)]


def test_a_scan_that_fails_leaves_the_line_to_parse_line() -> None:
    """Found by: claude-code, wrong_types read without bodies (``feed_entries`` let the
    scan's TypeError out: a traceback from ``stats --no-exact``)."""
    parser = _ScanFails(0, "x")
    assert [e.text for e in parser.feed_entries(b"one\ntwo\n") if isinstance(e, LogLine)] == [
        "one",
        "two",
    ]


def test_entries_read_without_bodies_stand_for_the_events_read_whole() -> None:
    """Found by: claude-code, bit_flips of the first line (``feed_entries`` gives a response's
    request and usage as ``RequestEntry`` / ``UsageEntry``, which the fuzzing's comparison
    took for other events: the reader was right, the check was not)."""
    spec = get_format("claude-code")
    data = bytearray((DATA / "claude_code" / "compaction.jsonl").read_bytes())
    data[0] ^= 1  # '{' -> 'z': the first line does not parse, the session's facts come later
    entries = read(spec, bytes(data), [0], entries=True)
    kinds = {type(e) for e in entries}
    assert {RequestEntry, UsageEntry, RequestSent, UsageReported} <= kinds
    assert comparable(entries) == comparable(read(spec, bytes(data)))
    check_reading(spec, bytes(data), [0])


def read_in_time(name: str, data: bytes, timeout: float = 60) -> list[str]:
    """The event types a reader gives for ``data``, read in another process that must be done
    within ``timeout`` seconds (a regular expression stuck in C cannot be stopped here)."""
    code = (
        "import sys\n"
        "from ctx_inspect.formats.registry import get_format\n"
        f"parser = get_format({name!r}).make_parser()\n"
        "events = parser.feed(sys.stdin.buffer.read()) + parser.finish()\n"
        "print(' '.join(e.type for e in events))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], input=data, capture_output=True, timeout=timeout, check=True
    )
    return result.stdout.decode().split()


def test_opencode_log_lines_of_megabytes_are_read_at_once() -> None:
    """Found by: opencode-log, huge_line (a line of times without a level, or of long words:
    two regular expressions took time growing with the square of the line's length)."""
    times = b"12:00:00 x " * 200_000 + b"\n"
    words = b"level=info " + b"x" * 200_000 + b" message=m\n"
    assert read_in_time("opencode-log", times + words) == ["issue", "log"]


def damaged_schema(path: Path, table: str) -> Path:
    """A database whose schema names a table with bytes that are not UTF-8 (SQLite's error
    message quotes them)."""
    con = sqlite3.connect(path)
    con.execute(f"CREATE TABLE {table} (id TEXT)")
    con.execute("PRAGMA writable_schema=ON")
    con.execute(
        "UPDATE sqlite_master SET name = CAST(? AS TEXT), sql = ? WHERE name = ?",
        (table.encode() + b"\xce", f"CREATE TABLE {table} (id TEXT", table),
    )
    con.commit()
    con.close()
    return path


def test_a_database_with_a_damaged_schema_is_an_issue(tmp_path: Path) -> None:
    """Found by: opencode-data, bit_flips of opencode.db (Python's sqlite3 raised
    UnicodeDecodeError for SQLite's message: a traceback)."""
    for reader, name in ((read_opencode, "opencode.db"), (read_fifth, "context.db")):
        (session,) = reader(damaged_schema(tmp_path / name, "session"))
        (issue,) = issues(session.events)
        assert issue.reason == (
            "cannot open the database: database disk image is malformed (a damaged schema)"
        )
        check_commands(tmp_path / name, [])


def test_a_database_cut_to_nothing_is_read_and_mutated_again(tmp_path: Path) -> None:
    """Found by: opencode-db and fifth-db, truncation of the file then a row changed (the
    fuzzing's row mutation chose among no tables: the harness failed, not the reader)."""
    for reader, name in ((read_opencode, "opencode.db"), (read_fifth, "context.db")):
        path = tmp_path / name
        path.write_bytes(b"")
        assert _mutate_row(path, RandomChoices(random.Random(0))) == "no table to change"
        (session,) = reader(path)
        assert not crashes(session.events)
        check_commands(path, [])


# -- fixed: the goagent, claude_code and baseagent readers ------------------------------------


def assert_read_well(name: str, data: bytes) -> list[Event]:
    """``data`` read as the fuzzing checks it (no record failing, the same events in pieces
    and without bodies, no line dropped); the events read."""
    check_reading(get_format(name), data, [len(data) // 2])
    return read(get_format(name), data)


def test_goagent_log_lines_with_a_run_of_blanks_are_read_at_once() -> None:
    """Found by: goagent-log, huge_line (``_ATTR`` scanned a run of blanks again from each
    blank: time growing with the square of the run, a hang on a line of megabytes)."""
    data = b'[INFO] 2026-02-12T10:30:00 "msg"' + b" " * 200_000 + b"x\n"
    assert read_in_time("goagent-log", data) == ["log"]


def test_goagent_log_attributes_are_read_after_blanks() -> None:
    text = ' before=100  after="4\\"0"\tnote=a=b  x  "q"=1'
    assert log_attrs(text) == {"before": "100", "after": '4"0', "note": "a=b"}


GO_SESSION = (
    b'{"type":"session","version":1,"id":"s","timestamp":"2026-02-12T02:30:00Z","cwd":"/w"}\n'
)


def go_message_end(message: dict[str, Any]) -> bytes:
    return GO_SESSION + line({"type": "message_end", "eventAt": 1, "message": message})


def test_goagent_events_stop_reason_that_is_a_list_is_read() -> None:
    """Found by: goagent-events, wrong_types (``stopReason in NO_USAGE_STOPS`` with a list:
    unreadable records)."""
    message = {"role": "assistant", "content": [], "usage": {"input": 1}, "stopReason": []}
    events = assert_read_well("goagent-events", go_message_end(message))
    assert [e.usage.input for e in events if isinstance(e, UsageReported)] == [1]


def test_goagent_events_role_nested_deeply_is_an_issue() -> None:
    """Found by: goagent-events, deep_nesting (``repr`` of a role nested 1,000 deep in the
    issue's reason: unreadable records)."""
    events = assert_read_well("goagent-events", go_message_end({"role": deep(), "content": []}))
    assert [i.reason for i in issues(events)] == ["message_end: unknown role " + "[" * 57 + "..."]


def claude_assistant(stream: bool) -> bytes:
    message = {"id": "m", "role": "assistant", "content": [{"type": ["text"], "text": "x"}]}
    record = {"type": "assistant", "uuid": "a1", "sessionId": "s", "message": message}
    if stream:
        record = {**record, "session_id": "s"}
    return line(record)


def attachments(events: Iterable[Event]) -> list[str]:
    return [
        p.text
        for e in events
        if isinstance(e, MessageAdded)
        for p in e.message.parts
        if p.type is PartType.ATTACHMENT
    ]


def test_claude_code_content_block_type_that_is_a_list_is_kept_whole() -> None:
    """Found by: claude-code, wrong_types (a content block type that is a list or an object
    does not hash: unreadable records, and a traceback from ``stats --no-exact``)."""
    events = assert_read_well("claude-code", claude_assistant(stream=False))
    assert attachments(events) == ['{"type":["text"],"text":"x"}']


def test_claude_code_stream_content_block_type_that_is_a_list_is_kept_whole() -> None:
    """Found by: claude-code-stream, wrong_types (the same, in ``--output-format stream-json``)."""
    init = line({"type": "system", "subtype": "init", "session_id": "s", "model": "m"})
    events = assert_read_well("claude-code-stream", init + claude_assistant(stream=True))
    assert attachments(events) == ['{"type":["text"],"text":"x"}']


@pytest.mark.parametrize("tool", [False, True])
def test_baseagent_and_codex_exec_item_type_nested_deeply_is_a_log_line(tool: bool) -> None:
    """Found by: baseagent-events and codex-exec, deep_nesting (an item type, or a codex-exec
    tool item's tool, nested 1,000 deep written into a log line's or a call's text with
    ``str``: unreadable records)."""
    started = line({"type": "thread.started", "thread_id": "t"})
    item = (
        {"id": "i", "type": "mcp_tool_call", "tool": deep()}
        if tool
        else {"id": "i", "type": deep()}
    )
    data = started + line({"type": "item.completed", "item": item})
    names = ("codex-exec",) if tool else ("baseagent-events", "codex-exec")
    for name in names:
        events = assert_read_well(name, data)
        if tool:
            texts = [e.message.text for e in events if isinstance(e, MessageAdded)]
            assert texts[0].startswith("[" * 57 + "...(")
        else:
            logs = [e.text for e in events if isinstance(e, LogLine)]
            assert logs[-1] == "item.completed " + "[" * 57 + "..."
