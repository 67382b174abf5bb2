"""Anthropic Messages reader: request bodies, block types, API responses, bad input."""

from __future__ import annotations

import json
from pathlib import Path

from ctx_inspect.core.model import (
    Event,
    MessageAdded,
    MessageKind,
    ParseIssue,
    PartType,
    RequestSent,
    Role,
    SessionInfo,
    UsageReported,
)
from ctx_inspect.formats import anthropic_messages
from ctx_inspect.formats.anthropic_messages import AnthropicMessagesParser
from ctx_inspect.formats.chat_common import compact_json
from ctx_inspect.formats.registry import Head

DATA = Path(__file__).parents[1] / "data" / "anthropic_messages"
PNG_B64_LEN = 96


def parse(
    data: bytes, sizes: list[int] | None = None
) -> tuple[list[Event], AnthropicMessagesParser]:
    parser = AnthropicMessagesParser(0, "x")
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
    return out, parser


def read(data: bytes, sizes: list[int] | None = None) -> list[Event]:
    return parse(data, sizes)[0]


def fixture(name: str) -> bytes:
    return (DATA / name).read_bytes()


def messages(events: list[Event]) -> list[MessageAdded]:
    return [e for e in events if isinstance(e, MessageAdded)]


def issues(events: list[Event]) -> list[ParseIssue]:
    return [e for e in events if isinstance(e, ParseIssue)]


def kinds(events: list[Event]) -> list[str]:
    return [e.message.role.value if isinstance(e, MessageAdded) else e.type for e in events]


# -- documents -----------------------------------------------------------------------------


def test_request_body() -> None:
    events, parser = parse(fixture("request_body.json"))
    assert parser.mode == "document"
    assert not issues(events)
    assert kinds(events) == [
        "info",
        "system",
        "user",
        "request",
        "assistant",
        "user",
        "request",
        "assistant",
        "user",
        "request",
        "assistant",
    ]
    body = json.loads(fixture("request_body.json"))
    info = events[0]
    assert isinstance(info, SessionInfo)
    assert info.model == "claude-sonnet-4-5"
    assert info.extra == {
        "tool_count": 2,
        "tools_chars": sum(len(compact_json(t)) for t in body["tools"]),
    }
    requests = [e for e in events if isinstance(e, RequestSent)]
    assert {r.model for r in requests} == {"claude-sonnet-4-5"}

    system, user, first, result, second, results, answer = (m.message for m in messages(events))
    assert [m.id for m in (system, user, first)] == ["m1", "m2", "m3"]
    assert system.role is Role.SYSTEM
    assert [p.text for p in system.parts] == ["You are a code reviewer.", "Be concise."]

    assert [p.type for p in first.parts] == [PartType.THINKING, PartType.TEXT, PartType.TOOL_CALL]
    assert first.kind is MessageKind.MESSAGE
    call = first.parts[2]
    assert (call.tool_name, call.call_id, call.arguments) == (
        "read_file",
        "toolu_read",
        '{"path":"utils.py"}',
    )

    assert result.role is Role.USER and result.kind is MessageKind.TOOL_RESULT
    assert result.parts[0].tool_name == "read_file"
    assert result.parts[0].text.startswith("def add")

    assert second.kind is MessageKind.TOOL_CALL
    assert second.parts[0].arguments == "{}"

    assert results.kind is MessageKind.TOOL_RESULT
    assert [p.type for p in results.parts] == [PartType.TOOL_RESULT, PartType.IMAGE, PartType.TEXT]
    failed, image, text = results.parts
    assert failed.is_error and failed.tool_name == "run_tests" and failed.call_id == "toolu_tests"
    assert (image.media_type, image.data_bytes) == ("image/png", PNG_B64_LEN)
    assert text.text == "Please explain."
    assert answer.text.startswith("`add` subtracts")


def test_every_block_type() -> None:
    events = read(fixture("blocks.json"))
    assert not issues(events)
    user, assistant = (m.message for m in messages(events))
    assert [p.type for p in user.parts] == [
        PartType.TEXT,
        PartType.IMAGE,
        PartType.IMAGE,
        PartType.ATTACHMENT,
        PartType.ATTACHMENT,
        PartType.ATTACHMENT,
    ]
    _, b64, url, text_doc, pdf, unknown = user.parts
    assert (b64.media_type, b64.data_bytes) == ("image/jpeg", len("/9j/4AAQSkZJRgABAQ=="))
    assert url.data_bytes == len("https://example.com/chart.png")
    assert text_doc.text == "Plain text document body." and text_doc.media_type == "text/plain"
    assert (pdf.media_type, pdf.data_bytes, pdf.text) == ("application/pdf", 12, "")
    assert json.loads(unknown.text) == {"type": "container_upload", "file_id": "file_123"}

    assert assistant.kind is MessageKind.MESSAGE
    redacted, server_call, search, final = assistant.parts
    assert redacted.type is PartType.THINKING and redacted.data_bytes == 28 and not redacted.text
    assert (server_call.type, server_call.tool_name) == (PartType.TOOL_CALL, "web_search")
    assert search.type is PartType.TOOL_RESULT
    assert (search.tool_name, search.call_id) == ("web_search", "srvtoolu_1")
    assert json.loads(search.text)["url"] == "https://example.com"
    assert final.text == "Found one result."


def test_system_string_and_empty_system() -> None:
    body = {"system": "Be kind.", "messages": [{"role": "user", "content": "hi"}]}
    added = messages(read(json.dumps(body).encode()))
    assert [(m.message.role, m.message.text) for m in added] == [
        (Role.SYSTEM, "Be kind."),
        (Role.USER, "hi"),
    ]
    body["system"] = ""
    assert [m.message.role for m in messages(read(json.dumps(body).encode()))] == [Role.USER]


def test_split_response_is_one_request() -> None:
    """A response written as several messages with the same id (as streamed) is one step."""
    usage1 = {"input_tokens": 3, "cache_read_input_tokens": 100, "output_tokens": 1}
    usage2 = {"input_tokens": 3, "cache_read_input_tokens": 100, "output_tokens": 40}
    doc = [
        {"role": "user", "content": "go"},
        {
            "id": "msg_S",
            "role": "assistant",
            "content": [{"type": "thinking", "thinking": "t"}],
            "usage": usage1,
        },
        {
            "id": "msg_S",
            "role": "assistant",
            "content": [{"type": "text", "text": "a"}],
            "usage": usage1,
        },
        {
            "id": "msg_S",
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "tu", "name": "x", "input": {}}],
            "usage": usage2,
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu", "content": "r"}]},
        {"id": "msg_T", "role": "assistant", "content": "done", "usage": usage2},
    ]
    events = read(json.dumps(doc).encode())
    assert kinds(events) == [
        "user",
        "request",
        "usage",
        "assistant",
        "assistant",
        "usage",
        "assistant",
        "user",
        "request",
        "usage",
        "assistant",
    ]
    assert [m.message.id for m in messages(events)] == [
        "m1",
        "msg_S",
        "msg_S#2",
        "msg_S#3",
        "m5",
        "msg_T",
    ]
    assert messages(events)[4].message.parts[0].tool_name == "x"


def test_bad_messages_in_a_document() -> None:
    doc = [
        {"role": "user", "content": "ok"},
        {"role": "tool", "content": "no such role here"},
        {"role": "assistant", "content": 3},
        {"content": []},
        7,
        {
            "role": "assistant",
            "content": [None, 5, {"type": "text"}, {"type": "image"}, {"type": "tool_result"}],
        },
    ]
    events = read(json.dumps(doc).encode())
    assert [i.reason for i in issues(events)] == [
        "messages[1]: unknown role 'tool'",
        "messages[2]: content is number, not text or a list of blocks",
        "messages[3]: no role",
        "messages[4]: not a message object (number)",
    ]
    last = messages(events)[-1].message
    assert [p.type for p in last.parts] == [
        PartType.ATTACHMENT,
        PartType.ATTACHMENT,
        PartType.ATTACHMENT,
        PartType.ATTACHMENT,
        PartType.TOOL_RESULT,
    ]


# -- JSON Lines ----------------------------------------------------------------------------


def test_response_objects_as_lines() -> None:
    data = fixture("responses.jsonl")
    events, parser = parse(data)
    assert parser.mode == "lines"
    assert not issues(events)
    assert kinds(events) == [
        "user",
        "request",
        "usage",
        "assistant",
        "user",
        "request",
        "usage",
        "assistant",
    ]
    lines = data.split(b"\n")
    for event in events:
        assert event.span is not None
        assert (
            data[event.span.offset : event.span.offset + event.span.length]
            == lines[event.span.line - 1]
        )
    first, second = (e for e in events if isinstance(e, UsageReported))
    assert (
        first.usage.input,
        first.usage.cache_write,
        first.usage.cache_read,
        first.usage.output,
    ) == (
        350,
        1200,
        0,
        40,
    )
    assert not first.usage.input_includes_cache
    assert first.usage.prompt_tokens == 1550
    assert second.usage.prompt_tokens == 1570
    assert (first.request_id, first.model) == ("msg_01A", "claude-haiku-4-5")
    request = events[1]
    assert isinstance(request, RequestSent) and request.request_id == "msg_01A"
    assert [m.message.id for m in messages(events)] == ["m1", "msg_01A", "m3", "msg_01B"]
    assert messages(events)[2].message.parts[0].tool_name == "get_weather"


def test_request_bodies_as_lines() -> None:
    events = read(fixture("conversations.jsonl"))
    assert not issues(events)
    assert [(m.message.thread, m.message.id, m.message.text) for m in messages(events)] == [
        ("conv1", "conv1-m1", "Sys A"),
        ("conv1", "conv1-m2", "A?"),
        ("conv1", "conv1-m3", "A."),
        ("conv2", "conv2-m1", "Sys B"),
        ("conv2", "conv2-m2", "B?"),
        ("conv2", "conv2-m3", "B."),
    ]


def test_truncated_last_line() -> None:
    data = fixture("truncated.jsonl")
    events = read(data)
    assert kinds(events) == ["user", "request", "usage", "assistant", "issue"]
    issue = events[-1]
    assert isinstance(issue, ParseIssue)
    assert (issue.line, issue.offset) == (3, data.rindex(b"\n") + 1)


def test_malformed_lines() -> None:
    data = fixture("malformed.jsonl")
    events = read(data)
    lines = data.split(b"\n")
    found = issues(events)
    assert [i.line for i in found] == [2, 4, 5, 6]
    for issue in found:
        assert issue.offset == sum(len(ln) + 1 for ln in lines[: issue.line - 1])
    assert [i.reason for i in found][1:] == [
        "not a message object (string)",
        "unknown role 'robot'",
        "content is number, not text or a list of blocks",
    ]
    added = messages(events)
    assert [m.message.id for m in added] == ["m1", "m3", "m7"]
    assert added[2].message.parts[0].tool_name == "ls"


def test_invalid_utf8() -> None:
    events = read(fixture("invalid_utf8.jsonl"))
    assert kinds(events) == ["issue", "user", "request", "assistant"]
    assert messages(events)[0].message.text == "bad \ufffd\ufffd bytes"


# -- sniffing ------------------------------------------------------------------------------


def sniff(value: object, lines: bool = False) -> float:
    if lines:
        assert isinstance(value, list)
        data = b"".join(json.dumps(v).encode() + b"\n" for v in value)
    else:
        data = json.dumps(value, indent=1).encode()
    return anthropic_messages.sniff(Head(path=Path("x.json"), data=data))


def test_sniff() -> None:
    blocks = [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {}}],
        }
    ]
    assert sniff(blocks) == 0.85
    assert sniff(blocks, lines=True) == 0.85
    assert sniff({"system": "s", "messages": [{"role": "user", "content": "x"}]}) == 0.85
    assert sniff([{"role": "user", "content": [{"type": "text", "text": "x"}]}]) == 0.55
    assert sniff([{"role": "user", "content": "x"}]) == 0.55
    assert sniff([{"role": "system", "content": "x"}, {"role": "user", "content": "y"}]) == 0.4
    assert sniff([{"role": "tool", "tool_call_id": "c", "content": "x"}]) == 0.1
    assert (
        sniff([{"id": "msg_1", "type": "message", "role": "assistant", "content": []}], lines=True)
        == 0.85
    )
    assert sniff({"sessionId": "s", "messages": [{"type": "user", "content": "x"}]}) == 0.0
    assert anthropic_messages.sniff(Head(path=Path("x"), data=fixture("request_body.json"))) == 0.85
