"""The Go agent "ai" (tiancaiamao/ai): event stream, log file and session tree readers."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TypeVar

import pytest

from ctx_inspect.agents.goagent import reader_events, reader_log, reader_session
from ctx_inspect.agents.goagent.reader_events import GoEventsParser
from ctx_inspect.agents.goagent.reader_log import GoLogParser
from ctx_inspect.agents.goagent.reader_session import GoSessionParser
from ctx_inspect.core.model import (
    Compacted,
    ContextMeasured,
    ContextReset,
    Event,
    LogLine,
    MessageAdded,
    MessageKind,
    ParseIssue,
    PartType,
    RequestSent,
    Role,
    SessionInfo,
    Usage,
    UsageReported,
)
from ctx_inspect.core.session import Session
from ctx_inspect.formats import registry
from ctx_inspect.formats.base import LineParser
from ctx_inspect.formats.registry import HEAD_BYTES, Head
from tests.corpus import foreign_paths, real_runs

DATA = Path(__file__).parents[1] / "data" / "goagent"
OURS = ("goagent-events", "goagent-log", "goagent-session")
T = TypeVar("T")


def parse(
    cls: type[LineParser], data: bytes, sizes: list[int] | None = None
) -> tuple[list[Event], LineParser]:
    parser = cls(0, "x")
    out: list[Event] = []
    pos = 0
    for size in sizes or ():
        out.extend(parser.feed(data[pos : pos + size]))
        pos += size
    out.extend(parser.feed(data[pos:]))
    out.extend(parser.finish())
    return out, parser


def read(cls: type[LineParser], data: bytes, sizes: list[int] | None = None) -> list[Event]:
    return parse(cls, data, sizes)[0]


def fixture(name: str) -> bytes:
    return (DATA / name).read_bytes()


def messages(events: list[Event]) -> list[MessageAdded]:
    return [e for e in events if isinstance(e, MessageAdded)]


def issues(events: list[Event]) -> list[ParseIssue]:
    return [e for e in events if isinstance(e, ParseIssue)]


def of_type(events: list[Event], cls: type[T]) -> list[T]:
    return [e for e in events if isinstance(e, cls)]


def kinds(events: list[Event]) -> list[str]:
    return [e.message.role.value if isinstance(e, MessageAdded) else e.type for e in events]


def lines_with_events(events: list[Event]) -> set[int]:
    return {e.span.line for e in events if e.span is not None}


def nonblank_lines(data: bytes) -> set[int]:
    return {i for i, line in enumerate(data.split(b"\n"), 1) if line.strip()}


def session_of(events: list[Event]) -> Session:
    session = Session()
    session.append(events)
    return session


def in_context(session: Session) -> list[str]:
    return [session.table.ids[i] for i in session.in_context()]


# ==========================================================================================
# goagent-events


def test_events_typical_order_usage_and_ids() -> None:
    data = fixture("events.jsonl")
    events = read(GoEventsParser, data)
    assert not issues(events)
    info = events[0]
    assert isinstance(info, SessionInfo)
    assert info.agent == "goagent" and info.session_id == "20260212-103000"
    assert info.extra == {"cwd": "/work/demo", "session_version": 1}
    added = messages(events)
    assert [(m.message.id, m.message.role, m.message.kind) for m in added] == [
        ("L5", Role.USER, MessageKind.MESSAGE),
        ("L8", Role.ASSISTANT, MessageKind.TOOL_CALL),
        ("L10", Role.TOOL, MessageKind.TOOL_RESULT),
        ("L13", Role.ASSISTANT, MessageKind.MESSAGE),
    ]
    # Every line is accounted for, and the starts / updates / turn ends are only log lines.
    assert lines_with_events(events) == nonblank_lines(data)
    assert sum(1 for e in events if isinstance(e, LogLine)) == 13
    # A model response: RequestSent, then its usage, then the message.
    first = events.index(added[1])
    request, usage = events[first - 2], events[first - 1]
    assert isinstance(request, RequestSent) and request.model == "glm-4.7"
    assert isinstance(usage, UsageReported)
    assert usage.usage == Usage(input=1200, output=80, total=1280)
    second = of_type(events, UsageReported)[1].usage
    assert (second.input, second.cache_read, second.output, second.total) == (300, 1200, 120, 1620)
    assert second.prompt_tokens == 1500
    call = added[1].message
    assert [p.type for p in call.parts] == [PartType.THINKING, PartType.TOOL_CALL]
    assert (call.parts[1].tool_name, call.parts[1].call_id) == ("read", "call_1")
    assert call.parts[1].arguments == '{"path":"parser_test.go"}'
    result = added[2].message.parts[0]
    assert (result.type, result.tool_name, result.call_id) == (
        PartType.TOOL_RESULT,
        "read",
        "call_1",
    )
    # eventAt (UnixNano) becomes ISO 8601 in UTC.
    assert added[0].timestamp == "2026-02-12T02:30:00+00:00"
    assert added[0].message.timestamp == "2026-02-12T02:30:00+00:00"  # message's own ms time


def test_events_compactions_are_counts_with_omitempty() -> None:
    events = read(GoEventsParser, fixture("events.jsonl"))
    done, failed = of_type(events, Compacted)
    assert (done.trigger, done.messages_before, done.messages_after) == ("auto", 58, 14)
    # the figure the agent compared with its limit: the last usage total (300 + 1,200 cached +
    # 120 out) and nothing after it
    assert not done.failed and done.tokens_before == 1620
    assert done.timestamp == "2026-02-12T02:31:19.402000+00:00"
    assert done.retained_ids == ("L5", "L8", "L10", "L13")  # the newest after-1 = 13 (all 4)
    assert failed.failed and failed.trigger == "context_limit_recovery"
    assert failed.error == "failed to generate summary: empty summary generated"
    assert (failed.messages_before, failed.messages_after) == (71, None)
    assert failed.retained_ids == ()
    assert failed.span is not None and failed.span.line == 18


def test_events_compaction_retains_the_newest_after_minus_one() -> None:
    lines = [
        json.dumps(
            {
                "type": "message_end",
                "eventAt": 1,
                "message": {"role": "user", "content": [{"type": "text", "text": f"u{i}"}]},
            }
        )
        for i in range(5)
    ]
    lines.append('{"type":"compaction_start","eventAt":9,"compaction":{"auto":true,"before":5}}')
    lines.append(
        '{"type":"compaction_end","eventAt":10,"compaction":{"auto":true,"before":5,"after":3}}'
    )
    events = read(GoEventsParser, "\n".join(lines).encode())
    compacted = of_type(events, Compacted)[0]
    assert compacted.retained_ids == ("L4", "L5")
    session = session_of(events)
    assert in_context(session) == ["L4", "L5"]


def test_events_head_variants() -> None:
    events = read(GoEventsParser, fixture("head_variants.jsonl"))
    assert not issues(events)
    added = messages(events)
    # The tool result comes from tool_execution_end (isError from the event), once.
    result = added[3].message
    assert result.id == "L4" and result.parts[0].is_error
    assert [m.message.role for m in added].count(Role.TOOL) == 1
    duplicate = events[events.index(added[3]) + 1]
    assert isinstance(duplicate, LogLine) and "already read" in duplicate.text
    # An aborted response is a request and a message, but reports no usage.
    aborted = added[4]
    before = events[events.index(aborted) - 1]
    assert isinstance(before, RequestSent)
    assert len(of_type(events, UsageReported)) == 2
    mini, major, empty = of_type(events, Compacted)
    assert mini.trigger == "pre_llm_threshold" and (mini.tokens_before, mini.tokens_after) == (
        900,
        400,
    )
    assert mini.retained_ids == ("L1", "L2", "L3", "L4", "L6")  # mini truncates, removes nothing
    assert major.trigger == "manual_command" and major.messages_after == 3
    assert (major.tokens_before, major.tokens_after) == (950, 210)
    assert major.retained_ids == ("L4", "L6")
    summary = added[5].message
    assert summary.kind is MessageKind.SUMMARY and summary.id == "L10-summary"
    assert summary.text == "[Previous conversation summary]\n\n## Current Task\nFix the newline."
    assert (empty.messages_after, empty.retained_ids, empty.trigger) == (0, (), "manual_command")
    session = session_of(events)
    assert in_context(session) == []  # after=0: everything left
    last = events[-1]
    assert isinstance(last, LogLine) and last.text == "status_update (not an agent event)"


def test_events_start_without_end_is_closed_by_the_next_start() -> None:
    data = (
        b'{"type":"compaction_start","eventAt":1,"compaction":{"auto":true,"before":40}}\n'
        b'{"type":"compaction_start","eventAt":2,"compaction":{"auto":true,"before":41}}\n'
        b'{"type":"compaction_end","eventAt":3,"compaction":{"auto":true,"before":41,"after":2}}\n'
        b'{"type":"compaction_start","eventAt":4,"compaction":{"auto":true,"before":3}}\n'
    )
    events = read(GoEventsParser, data)
    compactions = of_type(events, Compacted)
    assert [(c.messages_before, c.failed) for c in compactions] == [(40, True), (41, False)]
    assert compactions[0].error and "did not finish" in compactions[0].error
    assert isinstance(events[-1], LogLine)  # the last start may still be running


def test_events_bad_lines() -> None:
    data = (
        b'{"type":"message_end","eventAt":1,"message":{"role":"user","content":[]}}\n'
        b"not json\n"
        b"[1, 2]\n"
        b'{"eventAt": 5}\n'
        b'{"type":"message_end","eventAt":1}\n'
        b'{"type":"message_end","eventAt":1,"message":{"role":"wizard"}}\n'
        b'{"type":"message_end","eventAt":1,"message":{"role":"user","content":"text"}}\n'
        b'{"type":"tool_execution_end","eventAt":1,"toolName":"bash"}\n'
        b"null\n"
    )
    events = read(GoEventsParser, data)
    found = issues(events)
    lines = data.split(b"\n")
    assert [i.line for i in found] == [2, 3, 4, 5, 6, 7, 9]
    for issue in found:
        assert issue.offset == sum(len(ln) + 1 for ln in lines[: issue.line - 1])
    assert [i.reason for i in found][1:] == [
        "not an event object (array)",
        "no event type",
        "message_end without a message object",
        "message_end: unknown role 'wizard'",
        "message_end: content is string, not a list of blocks",
        "not an event object (null)",
    ]
    assert len(messages(events)) == 1
    assert any(isinstance(e, LogLine) and "(no result)" in e.text for e in events)


def test_events_in_a_session_follow_the_compaction() -> None:
    session = session_of(read(GoEventsParser, fixture("events.jsonl")))
    # the third request is the one the provider refused (the recovery that followed failed)
    assert len(session.steps) == 3
    assert session.steps[1].reported == 1500
    assert session.steps[2].rejected == 1 and session.steps[1].rejected == 0
    assert in_context(session) == ["L5", "L8", "L10", "L13"]


# ==========================================================================================
# goagent-log


def test_log_compaction_attempts() -> None:
    data = fixture("log.log")
    events = read(GoLogParser, data)
    assert not issues(events)
    assert lines_with_events(events) == nonblank_lines(data)
    got = [
        (
            c.trigger,
            c.messages_before,
            c.messages_after,
            c.failed,
            c.error,
            c.span.line if c.span else 0,
        )
        for c in of_type(events, Compacted)
    ]
    assert got == [
        ("auto", 58, 14, False, None, 7),
        ("auto", 66, None, True, "failed to generate summary: context deadline exceeded", 11),
        (
            "context_limit_recovery",
            71,
            None,
            True,
            "failed to generate summary: context deadline exceeded",
            13,
        ),
        ("context_limit_recovery", 72, 9, False, None, 16),  # empty prefix, no Auto-compacting
    ]
    logs = of_type(events, LogLine)
    assert logs[0].level == "INFO" and logs[0].timestamp == "2026-02-12T10:30:59"
    assert logs[1].tag == "Loop" and logs[1].level == "DEBUG"
    assert logs[1].text == "[Loop] Turn started turn=3"
    assert of_type(events, Compacted)[0].timestamp == "2026-02-12T10:31:19.405"


def test_log_attributes_are_go_quoted() -> None:
    line = (
        '[WARN] 2026-02-12T10:35:00.01 tool_output.go:77 "[ai] [Tool] Output \\"big\\"" '
        'tool=bash note="kept 2000 of 5120 lines" path="C:\\\\tmp\\\\out \\"x\\".txt" '
        'nl="a\\nb\\t\\u00e9\\x41\\xff"'
    )
    assert reader_log.LOG_LINE.match(line)
    match = reader_log.LOG_LINE.match(line)
    assert match is not None
    assert reader_log.go_unquote(match["msg"]) == '[ai] [Tool] Output "big"'
    assert reader_log.log_attrs(match["attrs"]) == {
        "tool": "bash",
        "note": "kept 2000 of 5120 lines",
        "path": 'C:\\tmp\\out "x".txt',
        "nl": "a\nb\téA\ufffd",
    }
    assert reader_log.go_unquote("\\101\\U0001F600\\q") == "A\U0001f600q"


@pytest.mark.parametrize(
    "stamp",
    [
        "2026-02-12T10:31:07",
        "2026-02-12T10:31:07.1",
        "2026-02-12T10:31:07.12",
        "2026-02-12T10:31:07.123",
    ],
)
def test_log_fraction_digits(stamp: str) -> None:
    line = f'[INFO] {stamp} agent.go:400 "[ai] [Agent] Auto-compacting" beforeCount=9\n'.encode()
    events = read(GoLogParser, line)
    assert [type(e) for e in events] == [LogLine]
    assert events[0].timestamp == stamp


def test_log_attempt_without_outcome() -> None:
    auto = (
        b'[INFO] 2026-02-12T10:31:07 agent.go:400 "[ai] [Agent] Auto-compacting" beforeCount=58\n'
    )
    squeeze = (
        b'[INFO] 2026-02-12T10:31:07 compact.go:98 "[ai] [Compact] Compressing messages" '
        b"count=58 keepTokens=20000\n"
    )
    done = (
        b'[INFO] 2026-02-12T10:31:08 compact.go:126 "[ai] [Compact] Compressed to messages" '
        b"count=12\n"
    )
    # A new attempt closes one that never logged an outcome: it failed.
    events = read(GoLogParser, auto + squeeze + auto)
    first = of_type(events, Compacted)
    assert len(first) == 1 and first[0].failed and first[0].error == "no outcome in the log"
    # At the end of the input: compressed counts as done; not compressed may still run.
    done_events = of_type(read(GoLogParser, auto + squeeze + done), Compacted)
    assert [(c.messages_before, c.messages_after, c.failed) for c in done_events] == [
        (58, 12, False)
    ]
    assert of_type(read(GoLogParser, auto + squeeze), Compacted) == []


def test_log_bad_lines() -> None:
    good = b'[INFO] 2026-02-12T10:30:59 main.go:88 "[ai] started"\n'
    data = (
        good
        + b"panic: runtime error\n"
        + b'[INFO] 2026-02-12 10:30:59 main.go:88 "[ai] wrong time"\n'
        + good
        + b'[INFO] 2026-02-12T10:31:07.123 agent.go:400 "[ai] [Agent] Auto-comp'
    )
    events = read(GoLogParser, data)
    found = issues(events)
    assert [i.line for i in found] == [2, 3, 5]
    assert found[-1].offset == data.rindex(b"\n") + 1
    assert all(i.reason == "not a log line of the Go agent" for i in found)
    assert len(of_type(events, LogLine)) == 2


# ==========================================================================================
# goagent-session


def test_session_tree_typical() -> None:
    data = fixture("session.jsonl")
    events = read(GoSessionParser, data)
    assert not issues(events)
    assert lines_with_events(events) == nonblank_lines(data)
    header = events[0]
    assert isinstance(header, SessionInfo) and header.session_id == "s-demo"
    assert header.extra["cwd"] == "/work/demo"
    named = of_type(events, SessionInfo)[1]
    assert named.extra == {"name": "fix-parser", "title": "Fix the parser test"}
    ids = [m.message.id for m in messages(events)]
    assert ids == [
        "e01", "e02", "e03", "e04", "e06", "e07", "e08", "e09", "e10", "e11", "e12",
        "e01@1", "e02@1", "e03@1", "e13", "e14", "e15",
    ]  # fmt: skip
    resets = of_type(events, ContextReset)
    assert [(r.keep_through, r.reason, r.span.line if r.span else 0) for r in resets] == [
        ("e06", "branch", 10),  # e09 goes on from the compaction, leaving e07 / e08
        ("e04", "branch", 14),  # the branch summary goes back to e04, before the compaction
    ]
    # The context at the end is the path from the newest leaf: e01..e04, e13, e14, e15.
    session = session_of(events)
    assert [i.split("@")[0] for i in in_context(session)] == [
        "e04", "e01", "e02", "e03", "e13", "e14", "e15",
    ]  # fmt: skip


def test_session_compaction_entry() -> None:
    events = read(GoSessionParser, fixture("session.jsonl"))
    compacted = of_type(events, Compacted)[0]
    assert compacted.tokens_before == 1620
    assert compacted.retained_ids == ("e04",)
    assert (compacted.messages_before, compacted.messages_after) == (4, 2)
    summary = next(m.message for m in messages(events) if m.message.id == "e06")
    assert summary.kind is MessageKind.SUMMARY and summary.role is Role.USER
    assert summary.text == (
        "The conversation history before this point was compacted into the following summary:"
        "\n\n<summary>\nThe user wants TestParse fixed; it expects a trailing newline.\n</summary>"
    )
    assert events.index(compacted) < events.index(
        next(m for m in messages(events) if m.message.id == "e06")
    )
    # Right after the compaction the context is the summary and the kept entry.
    upto = events.index(next(m for m in messages(events) if m.message.id == "e06"))
    assert sorted(in_context(session_of(events[: upto + 1]))) == ["e04", "e06"]
    branch = next(m.message for m in messages(events) if m.message.id == "e13")
    assert branch.text.startswith("The following is a summary of a branch")


def test_session_messages_metadata_and_usage() -> None:
    events = read(GoSessionParser, fixture("session.jsonl"))
    by_id = {m.message.id: m.message for m in messages(events)}
    assert by_id["e11"].kind is MessageKind.ARCHIVED and not by_id["e11"].visible
    assert by_id["e11"].parts[0].is_error
    assert by_id["e12"].kind is MessageKind.TOOL_SUMMARY and by_id["e12"].visible
    assert by_id["e15"].parts[1].type is PartType.IMAGE
    assert (by_id["e15"].parts[1].media_type, by_id["e15"].parts[1].data_bytes) == ("image/png", 12)
    usages = [
        (u.usage.input, u.usage.output, u.usage.cache_read, u.usage.cache_write, u.usage.total)
        for u in of_type(events, UsageReported)
    ]
    assert usages == [
        (1200, 80, 0, 0, 1280),
        (300, 120, 1200, 0, 1620),
        (500, 30, 0, 100, 630),
        (900, 60, 0, 0, None),  # totalTokens 0 is no total
    ]  # e08 was aborted: a request and a message, no usage
    requests = of_type(events, RequestSent)
    assert len(requests) == 5


def test_session_messages_at_returns_copies() -> None:
    data = fixture("session.jsonl")
    events, parser = parse(GoSessionParser, data)
    for event in messages(events):
        span = event.span
        assert span is not None
        again = parser.messages_at(data[span.offset : span.offset + span.length], span)
        assert event.message in again, event.message.id
    first = messages(events)[0]
    assert first.span is not None
    raw = data[first.span.offset : first.span.offset + first.span.length]
    assert [m.id for m in parser.messages_at(raw, first.span)] == ["e01", "e01@1"]


def test_session_new_root_and_unknown_parent() -> None:
    lines = [
        '{"type":"session","version":1,"id":"s"}',
        '{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":[{"type":"text","text":"one"}]}}',
        '{"type":"message","id":"b","parentId":"a","message":{"role":"user","content":[{"type":"text","text":"two"}]}}',
        '{"type":"message","id":"c","parentId":null,"message":{"role":"user","content":[{"type":"text","text":"fresh"}]}}',
        '{"type":"message","id":"d","parentId":"zz","message":{"role":"user","content":[{"type":"text","text":"lost"}]}}',
        '{"type":"message","id":"d","parentId":"c","message":{"role":"user","content":[]}}',
        '{"type":"message","parentId":"c","message":{"role":"user","content":[]}}',
        '{"type":"model_change","id":"m","parentId":"d","provider":"zai"}',
    ]
    events = read(GoSessionParser, "\n".join(lines).encode())
    reset = of_type(events, ContextReset)
    assert [(r.keep_through, r.reason) for r in reset] == [(None, "branch")]
    assert [(i.line, i.reason) for i in issues(events)] == [
        (5, "parent entry zz not found; read as following the previous entry"),
        (6, "duplicate entry id d; skipped"),
        (7, "message entry without an id"),
    ]
    assert in_context(session_of(events)) == ["c", "d"]
    assert isinstance(events[-1], LogLine) and events[-1].text == "model_change entry"


def test_session_first_kept_not_on_the_path_keeps_nothing() -> None:
    lines = [
        '{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":[{"type":"text","text":"one"}]}}',
        '{"type":"compaction","id":"c","parentId":"a","summary":"S","firstKeptEntryId":"nope","tokensBefore":0}',
        '{"type":"compaction","id":"k","parentId":"c","summary":"","firstKeptEntryId":"a"}',
    ]
    events = read(GoSessionParser, "\n".join(lines).encode())
    first, second = of_type(events, Compacted)
    assert first.retained_ids == () and first.tokens_before is None
    # The second one keeps "a", which the first had removed: it comes back as a copy.
    assert second.retained_ids == ()
    assert second.messages_after == 1  # no summary text, no summary message
    assert events.index(second) < events.index(messages(events)[-1])
    assert in_context(session_of(events)) == ["a@1"]


def test_session_bodies_over_budget_are_not_re_added(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader_session, "BODY_BUDGET_CHARS", 0)
    events = read(GoSessionParser, fixture("session.jsonl"))
    notes = [e for e in events if isinstance(e, LogLine) and "not kept" in e.text]
    assert len(notes) == 3
    assert not any("@" in m.message.id for m in messages(events))


def test_session_legacy_layout() -> None:
    events = read(GoSessionParser, fixture("session_legacy.jsonl"))
    assert not issues(events)
    assert [m.message.id for m in messages(events)] == ["L1", "L2", "L3"]
    # the agent's figure when its turn ended: the usage total and the tool result after it
    assert kinds(events) == ["user", "request", "usage", "assistant", "tool", "context"]


def test_session_bad_lines() -> None:
    data = fixture("session.jsonl").replace(
        b'{"type":"session_info"', b'{"type":"session_info"\x00', 1
    )
    data += b'{"type":"message","id":"zz","parentId":"e15","message":{"role"'
    events = read(GoSessionParser, data)
    found = issues(events)
    assert [i.line for i in found] == [6, 7, 17]
    assert found[1].reason.startswith("parent entry e05 not found")
    assert found[2].reason == "not valid JSON (unexpected end of data)"
    assert len(messages(events)) == 17  # the broken session_info held no message


# ==========================================================================================
# Shared: empty input, UTF-8, huge lines, chunks, reset


PARSERS = (GoEventsParser, GoLogParser, GoSessionParser)
FIXTURES = {
    GoEventsParser: ("events.jsonl", "head_variants.jsonl"),
    GoLogParser: ("log.log",),
    GoSessionParser: ("session.jsonl", "session_legacy.jsonl"),
}


@pytest.mark.parametrize("cls", [GoEventsParser, GoSessionParser])
def test_truncated_last_json_line(cls: type[LineParser]) -> None:
    name = FIXTURES[cls][0]
    data = fixture(name)
    cut = data[: data.rindex(b"\n", 0, len(data) - 1) + 30]
    events = read(cls, cut)
    last = events[-1]
    assert isinstance(last, ParseIssue) and last.reason.startswith("not valid JSON")
    assert last.offset == cut.rindex(b"\n") + 1


@pytest.mark.parametrize("cls", PARSERS)
def test_huge_line(cls: type[LineParser], tmp_path: Path) -> None:
    big = "z" * (20 * 1024 * 1024)
    if cls is GoLogParser:
        record = f'[INFO] 2026-02-12T10:30:59 bash.go:9 "[ai] output" out="{big}"'
    elif cls is GoEventsParser:
        result = {
            "role": "toolResult",
            "toolCallId": "c",
            "content": [{"type": "text", "text": big}],
        }
        record = json.dumps(
            {"type": "tool_execution_end", "eventAt": 1, "toolCallId": "c", "result": result}
        )
    else:
        message = {
            "role": "toolResult",
            "toolCallId": "c",
            "content": [{"type": "text", "text": big}],
        }
        record = json.dumps({"type": "message", "id": "h", "parentId": None, "message": message})
    path = tmp_path / "huge"
    path.write_bytes(fixture(FIXTURES[cls][0]) + record.encode() + b"\n")
    data = path.read_bytes()
    events = read(cls, data, sizes=[1 << 20] * 22)
    assert not issues(events)
    if cls is GoSessionParser:  # the agent's figure when the turn ended, at its last record
        figure = events.pop()
        assert isinstance(figure, ContextMeasured) and figure.span is not None
        assert figure.span.length == len(record)
    last = events[-1]
    assert last.span is not None and last.span.length == len(record)
    if cls is GoLogParser:
        assert isinstance(last, LogLine) and len(last.text) == 200
    else:
        assert isinstance(last, MessageAdded) and len(last.message.text) == len(big)


# ==========================================================================================
# Sniffing and detection


def head(data: bytes, name: str = "x.jsonl") -> Head:
    return Head(path=Path(name), data=data[:HEAD_BYTES])


def test_sniffers_tell_the_three_apart() -> None:
    events, log, tree, legacy = (
        fixture("events.jsonl"),
        fixture("log.log"),
        fixture("session.jsonl"),
        fixture("session_legacy.jsonl"),
    )
    assert reader_events.sniff_events(head(events)) == 0.95
    assert reader_events.sniff_events(head(fixture("head_variants.jsonl"))) == 0.9
    assert reader_session.sniff_session(head(events)) == 0.0
    assert reader_log.sniff_log(head(events)) == 0.0
    assert reader_log.sniff_log(head(log, "ai-123.log")) == 0.9
    assert reader_events.sniff_events(head(log)) == reader_session.sniff_session(head(log)) == 0.0
    assert reader_session.sniff_session(head(tree)) == 0.95
    assert reader_events.sniff_events(head(tree)) == 0.0
    assert reader_session.sniff_session(head(legacy)) == 0.75
    assert reader_session.sniff_session(head(tree.split(b"\n")[0] + b"\n")) == 0.7  # header only


def test_sniff_a_head_cut_in_the_first_record_after_the_header() -> None:
    header = fixture("events.jsonl").split(b"\n")[0] + b"\n"
    big = "x" * HEAD_BYTES
    event = {"type": "message_end", "eventAt": 1, "message": {"role": "user", "content": big}}
    events = header + json.dumps(event).encode() + b"\n"
    assert reader_events.sniff_events(head(events)) == 0.95
    assert reader_session.sniff_session(head(events)) == 0.0
    entry = {"type": "message", "id": "a", "parentId": None, "message": {"content": big}}
    tree = header + json.dumps(entry).encode() + b"\n"
    assert reader_session.sniff_session(head(tree)) == 0.95
    assert reader_events.sniff_events(head(tree)) == 0.0


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("events.jsonl", "goagent-events"),
        ("head_variants.jsonl", "goagent-events"),
        ("log.log", "goagent-log"),
        ("session.jsonl", "goagent-session"),
        ("session_legacy.jsonl", "goagent-session"),
    ],
)
def test_detected(name: str, expected: str) -> None:
    spec = registry.detect(DATA / name)
    assert spec.name == expected
    assert spec.default_profile == "goagent"
    assert spec.make_parser().format_name == expected


def test_sessions_folder(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    project = root / "--work-demo--"
    (project / "0b9e6a1c").mkdir(parents=True)
    old = project / "20260212-103000.jsonl"
    old.write_bytes(fixture("session.jsonl"))
    os.utime(old, (1_000_000, 1_000_000))
    head_layout = project / "0b9e6a1c" / "messages.jsonl"
    head_layout.write_bytes(fixture("session.jsonl"))
    (project / "20260212-103000.meta.json").write_text("{}")
    (project / "current.json").write_text("{}")
    (project / "stray.jsonl").write_text('{"role":"user"}\n')
    assert reader_session.expand_sessions(project) == [old, head_layout]
    assert reader_session.expand_sessions(root) == [old, head_layout]
    assert reader_session.expand_sessions(old) == [old]
    spec = registry.detect(project)
    assert spec.name == "goagent-session" and spec.folder and spec.expand is not None
    assert registry.detect(root).name == "goagent-session"
    (tmp_path / "empty").mkdir()
    assert reader_session.sniff_session(Head(path=tmp_path / "empty", data=b"", is_dir=True)) == 0.0
    assert reader_session.sniff_session(Head(path=tmp_path / "gone", data=b"", is_dir=True)) == 0.0


@pytest.mark.corpus
def test_other_agents_files_are_not_claimed(corpus: Path) -> None:
    paths = foreign_paths(corpus, "goagent")
    assert len(paths) > 20
    specs = [registry.get_format(name) for name in OURS]
    for path in paths:
        sample = registry.read_head(path)
        for spec in specs:
            if sample.is_dir and not spec.folder:
                continue
            assert spec.sniff(sample) < registry.MIN_CONFIDENCE, (spec.name, path)


@pytest.mark.corpus
def test_real_runs_are_claimed(corpus: Path) -> None:
    """Each file the real program wrote is read by the reader of its kind: the --mode json
    stdout, the log file, the session tree (file and folders)."""
    runs = real_runs(corpus, "goagent")
    if not runs.is_dir():
        pytest.skip(f"no real runs of the Go agent at {runs}")
    expected = {
        "stdout.jsonl": "goagent-events",
        "ai-*.log": "goagent-log",
        "sessions/*/*-*-*-*-*.jsonl": "goagent-session",
        "sessions/*": "goagent-session",
        "sessions": "goagent-session",
    }
    seen = 0
    for run in sorted(p for p in runs.iterdir() if p.is_dir()):
        for pattern, name in expected.items():
            matches = sorted(run.rglob(pattern))
            assert matches, (run.name, pattern)
            for path in matches:
                assert registry.detect(path).name == name, path
                seen += 1
    assert seen >= len(expected)


def test_an_unreadable_folder_of_another_agent_is_not_a_session_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder is the Go agent's session tree when it holds its session files, or a
    ``--<cwd>--`` folder that cannot be listed; any other unreadable subfolder (a Claude Code
    project, say) claims nothing."""
    root = tmp_path / "projects"
    (root / "-home-dev-a").mkdir(parents=True)
    (root / "-home-dev-a" / "s.jsonl").write_text('{"type":"user"}\n')
    denied = {str(root / "-home-dev-a"), str(root / "--home-dev--")}
    real = os.scandir

    def scandir(path: object = ".") -> object:
        if os.fspath(path) in denied:  # type: ignore[call-overload]
            raise PermissionError(13, "Permission denied", os.fspath(path))  # type: ignore[call-overload]
        return real(path)  # type: ignore[call-overload]

    monkeypatch.setattr(os, "scandir", scandir)
    assert reader_session.sniff_session(Head(path=root, data=b"", is_dir=True)) == 0.0
    (root / "--home-dev--").mkdir()
    assert reader_session.sniff_session(Head(path=root, data=b"", is_dir=True)) == 0.9
