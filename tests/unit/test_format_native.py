"""The native event format: writing, reading back, and everything that can go wrong on the way."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctx_inspect.core.model import (
    EVENT_TYPES,
    Compacted,
    ContextMeasured,
    ContextReset,
    DebugTopic,
    Event,
    FinalTurnForced,
    GuardEvaluated,
    GuardStatus,
    GuardTarget,
    LogLine,
    Marker,
    Message,
    MessageAdded,
    MessageKind,
    Origin,
    ParseIssue,
    Part,
    PartType,
    Pruned,
    RequestRejected,
    RequestSent,
    Role,
    SessionInfo,
    SourceSpan,
    ToolOutputAction,
    ToolOutputChanged,
    Usage,
    UsageReported,
)
from ctx_inspect.formats import native
from ctx_inspect.formats.native import NativeParser, event_record, export_events, write_events
from ctx_inspect.formats.registry import Head

DATA = Path(__file__).parents[1] / "data" / "native"
DOC = Path(__file__).parents[2] / "docs" / "format.md"


def read(data: bytes, sizes: list[int] | None = None, path: str = "x.jsonl") -> list[Event]:
    parser = NativeParser(0, path)
    out: list[Event] = []
    if sizes is None:
        out.extend(parser.feed(data))
    else:
        pos = 0
        for size in sizes:
            out.extend(parser.feed(data[pos : pos + size]))
            pos += size
        out.extend(parser.feed(data[pos:]))
    out.extend(parser.finish())
    return out


def issues(events: list[Event]) -> list[ParseIssue]:
    return [e for e in events if isinstance(e, ParseIssue)]


def unspanned(events: list[Event]) -> list[Event]:
    return [e.model_copy(update={"span": None}) for e in events]


def written(events: list[Event], header_extra: dict[str, object] | None = None) -> bytes:
    buf = io.StringIO()
    write_events(events, buf, header_extra)
    return buf.getvalue().encode("utf-8")


def every_event() -> list[Event]:
    """One event of each type, with non-default values in as many fields as possible."""
    span = SourceSpan(source=2, offset=10, length=20, line=3)
    return [
        SessionInfo(
            model="gpt-4o",
            context_window=128_000,
            agent="demo",
            version="1.2",
            session_id="s1",
            extra={"tool_count": 3, "nested": {"a": [1, 2.5, None, True]}},
            timestamp="2026-01-01T00:00:00Z",
        ),
        MessageAdded(
            message=Message(
                id="m1",
                role=Role.ASSISTANT,
                kind=MessageKind.TOOL_CALL,
                parts=(
                    Part(type=PartType.THINKING, text="hmm"),
                    Part(
                        type=PartType.TOOL_CALL,
                        tool_name="bash",
                        call_id="c1",
                        arguments='{"cmd":"ls"}',
                    ),
                    Part(type=PartType.IMAGE, media_type="image/png", data_bytes=1234),
                    Part(type=PartType.TOOL_RESULT, text="out", is_error=True, call_id="c0"),
                ),
                visible=False,
                parent_id="m0",
                timestamp="2026-01-01T00:00:01Z",
                model="gpt-4o",
                name="bot",
                thread="sub-1",
            ),
            tokens=42,
            tokens_origin=Origin.ESTIMATED,
            span=span,
        ),
        RequestSent(model="gpt-4o", request_id="r1", thread="sub-1", final_turn=True),
        UsageReported(
            usage=Usage(
                input=10,
                cache_read=5,
                cache_write=2,
                output=7,
                reasoning=1,
                total=24,
                input_includes_cache=True,
            ),
            model="gpt-4o",
            request_id="r1",
            thread="sub-1",
        ),
        RequestRejected(
            reason="prompt is too long: 210000 tokens > 200000 maximum",
            code="invalid_request_error",
            tokens=210000,
            limit=200000,
            model="gpt-4o",
            thread="sub-1",
        ),
        ContextMeasured(
            tokens=900, limit=1000, percent=90.5, origin=Origin.ESTIMATED, label="ctx line"
        ),
        GuardEvaluated(
            current=100,
            pending=20,
            new=5,
            schema_tokens=30,
            extra=1,
            projected=156,
            targets=(
                GuardTarget(
                    provider="openai",
                    model="gpt-4o",
                    context_window=128_000,
                    buffer_tokens=1000,
                    max_output_tokens=4096,
                    limit=122_904,
                    projected=156,
                    blocked=True,
                ),
            ),
            status=GuardStatus.FINAL,
            trigger="turn_preflight",
        ),
        Pruned(
            tokens_before=1000,
            tokens_after=600,
            tokens_recovered=400,
            scanned_tokens=900,
            outputs_pruned=3,
            message_ids=("m2", "m3"),
            applied=False,
            persistent=False,
            reason="too little",
        ),
        Compacted(
            trigger="manual",
            tokens_before=9000,
            tokens_after=800,
            messages_before=40,
            messages_after=3,
            summary="the story so far",
            summary_tokens=120,
            retained_ids=("m1",),
            keep_system=False,
            failed=True,
            error="timeout",
            thread="sub-1",
        ),
        ContextReset(keep_through="m4", keep_system=False, reason="clear", thread="sub-1"),
        ToolOutputChanged(
            action=ToolOutputAction.TRUNCATED,
            tool="bash",
            message_id="m4",
            tokens=5000,
            tokens_after=1000,
            original_bytes=20_000,
            final_bytes=4000,
            projected_tokens=7000,
            limit_tokens=6000,
            replacement="[truncated]",
        ),
        FinalTurnForced(
            reason="context",
            projected_tokens=130_000,
            limit_tokens=128_000,
            provider="openai",
            model="gpt-4o",
            turn=9,
            max_turns=10,
        ),
        DebugTopic(name="guard", payload={"k": "v", "n": [1, {"x": None}]}),
        LogLine(text="plain \x1b[31mred\x1b[0m text é 🚀", level="warn", tag="agent"),
        ParseIssue(file="a.log", line=3, offset=99, reason="bad line", excerpt="{oops"),
        Marker(text="file truncated"),
    ]


# -- round trips ---------------------------------------------------------------------------


def test_every_event_type_is_covered() -> None:
    assert {type(e) for e in every_event()} == set(EVENT_TYPES)


def test_round_trip_every_event_type() -> None:
    events = every_event()
    got = read(written(events))
    assert unspanned(got) == unspanned(events)


def test_round_trip_events_with_only_defaults() -> None:
    events: list[Event] = [
        RequestSent(),
        UsageReported(usage=Usage()),
        RequestRejected(),
        Pruned(),
        Compacted(),
        ContextReset(),
        DebugTopic(name="d"),
        SessionInfo(),
        MessageAdded(message=Message(id="x", role=Role.USER)),
    ]
    data = written(events)
    assert b'{"type":"request"}\n' in data
    assert unspanned(read(data)) == events


def test_write_returns_count_and_header_carries_extras() -> None:
    buf = io.StringIO()
    count = write_events(every_event(), buf, {"source": "run.log", "profile": "opencode"})
    assert count == len(EVENT_TYPES)
    header = json.loads(buf.getvalue().split("\n", 1)[0])
    assert header["format"] == "ctx-inspect"
    assert header["version"] == 1
    assert header["producer"] == "ctx-inspect 0.1.0"
    assert header["source"] == "run.log" and header["profile"] == "opencode"
    assert re.match(r"\d{4}-\d\d-\d\dT", header["created"])


def test_appending_without_a_header() -> None:
    buf = io.StringIO()
    write_events([Marker(text="a")], buf, {"source": "live"})
    assert write_events([Marker(text="b"), Marker(text="c")], buf, header=False) == 2
    data = buf.getvalue().encode()
    assert data.count(b'"format":"ctx-inspect"') == 1
    assert [e.type for e in read(data)] == ["marker", "marker", "marker"]


def test_header_extra_cannot_change_format_or_version() -> None:
    header = json.loads(written([], {"format": "other", "version": 9}).decode())
    assert header["format"] == "ctx-inspect" and header["version"] == 1


def test_event_record_keeps_type_first_and_drops_span() -> None:
    record = event_record(RequestSent(span=SourceSpan(offset=5, length=3, line=2)))
    assert record == {"type": "request"}
    assert next(iter(event_record(Marker(text="t")))) == "type"


def test_header_is_kept_on_the_parser() -> None:
    parser = NativeParser(0, "t.jsonl")
    parser.feed((DATA / "typical.jsonl").read_bytes())
    parser.finish()
    assert parser.header is not None
    assert parser.header["source"] == "demo-session.json"
    assert parser.header["profile"] == "generic"


# -- spans and lazy re-reading -------------------------------------------------------------


def test_spans_point_at_the_exact_line_bytes() -> None:
    data = (DATA / "typical.jsonl").read_bytes()
    events = read(data)
    assert not issues(events)
    lines = data.split(b"\n")
    for event in events:
        assert event.span is not None
        raw = data[event.span.offset : event.span.offset + event.span.length]
        assert raw == lines[event.span.line - 1]
        assert json.loads(raw)["type"] == event.type


def _full_read(parser: NativeParser, line: bytes, span: SourceSpan) -> list[Message]:
    """The messages of one line as reading the whole event gives them."""
    out: list[Event] = []
    value = parser.load_json(line, span, out)
    if value is None:
        return []
    return [e.message for e in parser.read_event(value, span, line) if isinstance(e, MessageAdded)]


_MESSAGE = (
    '"message":{"id":"m1","role":"tool","kind":"tool_result","parts":[{"type":"tool_result",'
    '"text":"out","call_id":"c1","is_error":true,"data_bytes":3}],"thread":"t"}'
)


@pytest.mark.parametrize(
    "fields",
    [
        "",
        ',"tokens":12,"tokens_origin":"reported","timestamp":"2026-01-01T00:00:00Z"',
        ',"tokens":123456789012345678901234567890',
        ',"span":{"offset":"not even a span"}',  # dropped, as a line's own span always is
        ',"tokens":null,"tokens_origin":null,"timestamp":null',
        # values only the whole event's validation decides on (coerced, or refused)
        ',"tokens":"12"',
        ',"tokens":true',
        ',"tokens":1.0',
        ',"tokens":"x"',
        ',"tokens_origin":"guessed"',
        ',"tokens_origin":["reported"]',
        ',"timestamp":5',
        ',"colour":"red"',
    ],
)
def test_messages_at_gives_what_reading_the_whole_event_gives(fields: str) -> None:
    parser = NativeParser(0, "t.jsonl")
    line = ('{"type":"message",' + _MESSAGE + fields + "}").encode()
    span = SourceSpan(offset=10, length=len(line), line=2)
    expected = _full_read(parser, line, span)
    got = parser.messages_at(line, span)
    assert got == expected
    assert [repr(m) for m in got] == [repr(m) for m in expected]
    assert [m.model_fields_set for m in got] == [m.model_fields_set for m in expected]
    assert [p.model_fields_set for m in got for p in m.parts] == [
        p.model_fields_set for m in expected for p in m.parts
    ]


@pytest.mark.parametrize(
    "line",
    [
        b'{"type":"message","message":{"id":"m1","role":"robot"}}',
        b'{"type":"message","message":{"id":"m1","role":"user","parts":{"type":"text"}}}',
        b'{"type":"message","message":{"id":"m1","role":"user","visible":"maybe"}}',
        b'{"type":"message","message":{"id":"m1","role":"user","data_bytes":3}}',
        b'{"type":"message","message":{"role":"user"}}',
        b'{"type":"message","message":"m1"}',
        b'{"type":"usage","usage":{"input":5}}',
        b'{"type":"message","message":{"id":"m1","role":"user"}',
        b'{"type":"message","message":{"id":"caf\\xe9","role":"user"}}',
        b'{"type":"message","message":{"id":"caf\xe9","role":"user"}}',
        b"[1,2]",
        b"null",
    ],
)
def test_messages_at_on_a_line_that_is_no_valid_message_gives_what_it_gave(line: bytes) -> None:
    for newer in (False, True):
        parser = NativeParser(0, "t.jsonl")
        parser._newer = newer  # a newer writer's unknown fields are dropped, not refused
        span = SourceSpan(offset=10, length=len(line), line=2)
        assert parser.messages_at(line, span) == _full_read(parser, line, span)


def test_messages_at_of_a_newer_writer_drops_what_it_does_not_know() -> None:
    parser = NativeParser(0, "t.jsonl")
    parser._newer = True
    line = b'{"type":"message","message":{"id":"m1","role":"user","mood":"good"},"tokens":3}'
    span = SourceSpan(offset=10, length=len(line), line=2)
    assert parser.messages_at(line, span) == [Message(id="m1", role=Role.USER)]


def test_typical_fixture_reads_in_order() -> None:
    events = read((DATA / "typical.jsonl").read_bytes())
    assert [e.type for e in events] == [
        "info",
        "message",
        "message",
        "request",
        "usage",
        "message",
        "message",
        "context",
        "request",
        "message",
    ]
    usage = next(e for e in events if isinstance(e, UsageReported))
    assert usage.usage.prompt_tokens == 120
    assert usage.usage.input_includes_cache


# -- bad input -----------------------------------------------------------------------------


def test_malformed_lines_each_become_one_issue() -> None:
    data = (DATA / "malformed.jsonl").read_bytes()
    events = read(data, path="malformed.jsonl")
    found = issues(events)
    lines = data.split(b"\n")
    expected = {
        3: "not valid JSON",
        4: "invalid message event: message.role:",
        5: "unknown event type teleport",
        6: "not an event object (array)",
        7: "no event type",
        8: "invalid context event: tokens: Field required",
    }
    assert [i.line for i in found] == sorted(expected)
    for issue in found:
        assert issue.reason.startswith(expected[issue.line]), issue.reason
        assert issue.file == "malformed.jsonl"
        assert issue.offset == sum(len(ln) + 1 for ln in lines[: issue.line - 1])
        assert issue.excerpt
    messages = [e.message.id for e in events if isinstance(e, MessageAdded)]
    assert messages == ["m1", "m2"]


def test_truncated_last_line_is_one_issue_after_everything_before_it() -> None:
    events = read((DATA / "truncated.jsonl").read_bytes())
    assert [e.type for e in events] == ["info", "message", "message", "issue"]
    last = events[-1]
    assert isinstance(last, ParseIssue)
    assert last.line == 5 and "not valid JSON" in last.reason


def test_partial_last_line_is_held_until_finish() -> None:
    data = (DATA / "typical.jsonl").read_bytes()
    cut = data.rindex(b"\n", 0, len(data) - 1) + 10  # inside the last line
    parser = NativeParser(0, "t.jsonl")
    first = parser.feed(data[:cut])
    assert parser.held_bytes == 9
    rest = [*parser.feed(data[cut:]), *parser.finish()]
    assert unspanned([*first, *rest]) == unspanned(read(data))


def test_missing_header_is_noted_and_events_still_read() -> None:
    events = read((DATA / "no_header.jsonl").read_bytes())
    assert isinstance(events[0], ParseIssue)
    assert "no ctx-inspect header" in events[0].reason
    assert [e.type for e in events[1:]] == ["info", "message", "message"]


def test_newer_version_warns_once_and_reads_on() -> None:
    events = read((DATA / "newer_version.jsonl").read_bytes())
    found = issues(events)
    assert len(found) == 1
    assert found[0].reason.startswith("warning: written by a newer ctx-inspect")
    added = [e for e in events if isinstance(e, MessageAdded)]
    # the line with fields this version does not know is still read, without them
    assert [m.message.id for m in added] == ["m9", "m2"]
    assert added[0].message.text == "hi"


def test_unknown_fields_are_an_issue_for_the_current_version() -> None:
    header = written([])
    line = b'{"type":"marker","text":"t","colour":"red"}\n'
    events = read(header + line)
    assert [e.type for e in events] == ["issue"]
    assert isinstance(events[0], ParseIssue)
    assert "colour" in events[0].reason


@pytest.mark.parametrize("version", ['"1"', "0", "true", "null"])
def test_header_without_a_valid_version_is_an_issue(version: str) -> None:
    data = (
        b'{"format":"ctx-inspect","version":'
        + version.encode()
        + b'}\n{"type":"marker","text":"m"}\n'
    )
    events = read(data)
    assert [e.type for e in events] == ["issue", "marker"]


def test_null_line_is_an_issue() -> None:
    events = read(written([]) + b"null\n")
    assert [e.type for e in events] == ["issue"]


def test_bom_and_crlf_are_tolerated() -> None:
    data = written([Marker(text="a"), Marker(text="b")]).replace(b"\n", b"\r\n")
    events = read(b"\xef\xbb\xbf" + data)
    assert [e.type for e in events] == ["marker", "marker"]


# -- scale and chunking --------------------------------------------------------------------


# -- atomic export -------------------------------------------------------------------------


def test_export_events_writes_atomically(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    count = export_events(target, every_event(), {"source": "s"})
    assert count == len(EVENT_TYPES)
    assert unspanned(read(target.read_bytes())) == unspanned(every_event())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]


def test_failed_export_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    target.write_text("old\n")

    def events() -> Iterator[Event]:
        yield Marker(text="one")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        export_events(target, events())
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]


# -- sniffing ------------------------------------------------------------------------------


def test_sniff() -> None:
    def head(data: bytes) -> Head:
        return Head(path=Path("x.jsonl"), data=data)

    assert native.sniff(head((DATA / "typical.jsonl").read_bytes())) == 1.0
    assert native.sniff(head((DATA / "no_header.jsonl").read_bytes())) == 0.6
    assert native.sniff(head(b'{"type":"message","role":"assistant","content":[]}\n')) == 0.0
    assert native.sniff(head(b'{"role":"user","content":"hi"}\n')) == 0.0
    assert native.sniff(head(b"plain text\n")) == 0.0
    assert native.sniff(head(b"")) == 0.0


# -- the documentation ---------------------------------------------------------------------


def test_every_example_line_in_the_docs_is_valid() -> None:
    text = DOC.read_text(encoding="utf-8")
    examples = [
        line.strip()
        for block in re.findall(r"```json\n(.*?)```", text, re.S)
        for line in block.splitlines()
        if line.strip().startswith('{"type"')
    ]
    data = written([]) + "\n".join(examples).encode() + b"\n"
    events = read(data)
    # one event per example, of the example's own type (the `issue` example is a stored issue)
    assert [e.type for e in events] == [json.loads(x)["type"] for x in examples], events
    assert {type(e) for e in events} == set(EVENT_TYPES)
