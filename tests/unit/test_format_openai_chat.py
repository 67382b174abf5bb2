"""OpenAI Chat Completions reader: every container, every message shape, every kind of bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctx_inspect.core.model import (
    Event,
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
from ctx_inspect.formats import openai_chat
from ctx_inspect.formats.chat_common import compact_json
from ctx_inspect.formats.openai_chat import OpenAIChatParser
from ctx_inspect.formats.registry import HEAD_BYTES, Head

DATA = Path(__file__).parents[1] / "data" / "openai_chat"
PNG_B64_LEN = 96


def parse(
    data: bytes, sizes: list[int] | None = None, path: str = "x"
) -> tuple[list[Event], OpenAIChatParser]:
    parser = OpenAIChatParser(0, path)
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
    """Event types, with each message's role: a compact picture of the order."""
    return [e.message.role.value if isinstance(e, MessageAdded) else e.type for e in events]


# -- documents -----------------------------------------------------------------------------


def test_typical_array_order_usage_and_tools() -> None:
    events, parser = parse(fixture("typical.json"))
    assert parser.mode == "document"
    assert not issues(events)
    assert kinds(events) == [
        "system",
        "user",
        "request",
        "usage",
        "assistant",
        "tool",
        "tool",
        "request",
        "usage",
        "assistant",
        "user",
    ]
    added = messages(events)
    assert [m.message.id for m in added] == [f"m{i}" for i in range(1, 8)]
    assert all(e.span is None for e in events)

    user = added[1].message
    assert [p.type for p in user.parts] == [PartType.TEXT, PartType.IMAGE]
    assert user.parts[1].media_type == "image/png"
    assert user.parts[1].data_bytes == PNG_B64_LEN
    assert user.parts[1].text == ""

    call = added[2].message
    assert call.kind is MessageKind.TOOL_CALL
    assert [(p.tool_name, p.call_id, p.arguments) for p in call.parts] == [
        ("grep", "call_grep1", '{"pattern":"login"}'),
        ("list_dir", "call_ls2", '{"path":"src"}'),
    ]
    for result, name, call_id in (
        (added[3], "grep", "call_grep1"),
        (added[4], "list_dir", "call_ls2"),
    ):
        assert result.message.role is Role.TOOL
        assert result.message.kind is MessageKind.TOOL_RESULT
        part = result.message.parts[0]
        assert (part.type, part.tool_name, part.call_id) == (PartType.TOOL_RESULT, name, call_id)

    usages = [e.usage for e in events if isinstance(e, UsageReported)]
    assert usages[0].input == 412 and usages[0].cache_read == 256 and usages[0].output == 38
    assert usages[0].total == 450 and usages[0].input_includes_cache
    assert usages[0].prompt_tokens == 412
    assert usages[1].reasoning == 8
    assert added[6].message.name == "dana"


def test_request_body_with_tools_and_logged_response() -> None:
    events = read(fixture("request_body.json"))
    assert not issues(events)
    info = events[0]
    assert isinstance(info, SessionInfo)
    body = json.loads(fixture("request_body.json"))
    assert info.model == "gpt-4o-mini"
    assert info.extra == {
        "tool_count": 2,
        "tools_chars": sum(len(compact_json(t)) for t in body["tools"]),
    }
    added = messages(events)
    assert added[0].message.role is Role.DEVELOPER
    result = added[3].message
    assert result.kind is MessageKind.TOOL_RESULT
    assert result.parts[0].text == "# Demo\nA demo project."
    assert result.parts[0].tool_name == "read_file"
    requests = [e for e in events if isinstance(e, RequestSent)]
    assert requests[0].model == "gpt-4o-mini"  # from the body
    assert requests[1].request_id == "chatcmpl-demo1"
    assert requests[1].model == "gpt-4o-mini-2024-07-18"  # from the response
    final = added[-1].message
    assert final.id == "chatcmpl-demo1" and final.text == "README.md says: a demo project."
    assert events[-2] == UsageReported(
        usage=Usage(input=220, output=9, total=229, input_includes_cache=True),
        model="gpt-4o-mini-2024-07-18",
        request_id="chatcmpl-demo1",
        timestamp="2025-02-01T08:19:00+00:00",
    )


def test_mini_swe_agent_trajectory() -> None:
    events = read(fixture("trajectory.traj.json"))
    assert not issues(events)
    info = events[0]
    assert isinstance(info, SessionInfo)
    assert info.model == "openai/gpt-4.1"
    assert info.agent == "mini-swe-agent" and info.version == "2.0.0"
    assert info.extra["model_stats"] == {"instance_cost": 0.0123, "api_calls": 2}
    assert info.extra["exit_status"] == "Submitted"
    assert kinds(events)[1:] == [
        "system",
        "user",
        "request",
        "usage",
        "assistant",
        "user",
        "request",
        "usage",
        "assistant",
    ]
    usages = [e for e in events if isinstance(e, UsageReported)]
    assert [(u.usage.input, u.usage.cache_read, u.usage.output) for u in usages] == [
        (300, 0, 25),
        (350, 300, 20),
    ]
    assert usages[0].request_id == "chatcmpl-mini1"
    assert usages[0].timestamp == "2025-07-31T22:13:20.500000+00:00"


def test_content_parts_of_every_kind() -> None:
    events = read(fixture("parts.json"))
    assert not issues(events)
    user, assistant = (m.message for m in messages(events))
    types = [p.type for p in user.parts]
    assert types == [
        PartType.TEXT,
        PartType.ATTACHMENT,  # audio
        PartType.ATTACHMENT,  # file
        PartType.IMAGE,  # by URL
        PartType.ATTACHMENT,  # unknown part type, kept as JSON
        PartType.ATTACHMENT,  # not an object, kept as JSON
    ]
    audio, file, image, unknown, number = user.parts[1:]
    assert (audio.media_type, audio.data_bytes) == ("audio/wav", len("UklGRiQAAABXQVZF"))
    assert (file.text, file.media_type, file.data_bytes) == (
        "report.pdf",
        "application/pdf",
        len("JVBERi0xLjQK"),
    )
    assert image.media_type is None
    assert image.data_bytes == len("https://example.com/cat.png")
    assert json.loads(unknown.text) == {"type": "hologram", "payload": {"frames": 3}}
    assert number.text == "42"
    assert [p.text for p in assistant.parts] == ["Done.", "Not the audio."]


def test_bad_elements_in_a_document_are_issues_and_the_rest_is_read() -> None:
    doc = [
        {"role": "user", "content": "ok 0"},
        "not a message",
        {"content": "no role"},
        {"role": "wizard", "content": "x"},
        {"role": "user", "content": 12},
        {"role": "assistant", "tool_calls": {"id": "x"}},
        {"role": "assistant", "content": "ok 6"},
    ]
    events = read(json.dumps(doc).encode())
    found = issues(events)
    assert [i.reason for i in found] == [
        "messages[1]: not a message object (string)",
        "messages[2]: no role",
        "messages[3]: unknown role 'wizard'",
        "messages[4]: content is number, not text or a list of parts",
        "messages[5]: tool_calls is object, not a list",
    ]
    assert all(i.span is None and i.excerpt for i in found)
    assert [m.message.text for m in messages(events)] == ["ok 0", "ok 6"]


def test_odd_values_never_raise() -> None:
    doc: list[object] = [
        None,
        [],
        {"role": None},
        {"role": "assistant", "content": None, "tool_calls": [1, {"function": 5}, {"id": 3}]},
        {
            "role": "assistant",
            "content": [None, {"type": "text", "text": 5}, {"type": "image_url"}],
        },
        {
            "role": "tool",
            "tool_call_ids": [None],
            "content": [{"type": "image_url", "image_url": "x"}],
        },
        {"role": "assistant", "function_call": {"name": None, "arguments": {"a": 1}}},
        {
            "role": "assistant",
            "content": "u",
            "usage": {"prompt_tokens": "many", "completion_tokens": 2.0},
        },
        {"role": "user", "content": "t", "timestamp": 1e30},
    ]
    events = read(json.dumps(doc).encode())
    assert len(messages(events)) == 6
    fc = messages(events)[3].message.parts[0]
    assert fc.arguments == '{"a":1}' and fc.tool_name is None
    usage = next(e for e in events if isinstance(e, UsageReported))
    assert (usage.usage.input, usage.usage.output) == (0, 2)


@pytest.mark.parametrize(
    "doc",
    [b'{"foo": 1, "bar": [1, 2]}', b'"just a string"', b"42"],
)
def test_documents_without_messages_are_one_issue(doc: bytes) -> None:
    events = read(doc)
    assert len(events) == 1 and isinstance(events[0], ParseIssue)


def test_cut_document_is_one_issue() -> None:
    data = fixture("typical.json")
    events = read(data[: len(data) // 2])
    assert len(events) == 1
    issue = events[0]
    assert isinstance(issue, ParseIssue) and issue.reason.startswith("not valid JSON")
    assert issue.line > 1


def test_list_of_conversations_in_a_document() -> None:
    doc = [
        {"messages": [{"role": "user", "content": "a"}]},
        {"messages": [{"role": "user", "content": "b"}, {"role": "assistant", "content": "c"}]},
    ]
    events = read(json.dumps(doc).encode())
    added = messages(events)
    assert [(m.message.thread, m.message.id) for m in added] == [
        ("conv1", "conv1-m1"),
        ("conv2", "conv2-m1"),
        ("conv2", "conv2-m2"),
    ]
    request = next(e for e in events if isinstance(e, RequestSent))
    assert request.thread == "conv2"


# -- JSON Lines ----------------------------------------------------------------------------


def test_message_lines_spans_ids_and_order() -> None:
    data = fixture("messages.jsonl")
    events, parser = parse(data)
    assert parser.mode == "lines"
    assert not issues(events)
    assert kinds(events) == [
        "system",
        "user",
        "request",
        "usage",
        "assistant",
        "tool",
        "request",
        "assistant",
        "tool",
        "request",
        "assistant",
        "request",
        "assistant",
    ]
    lines = data.split(b"\n")
    for event in events:
        assert event.span is not None
        raw = data[event.span.offset : event.span.offset + event.span.length]
        assert raw == lines[event.span.line - 1]
    added = messages(events)
    assert [m.message.id for m in added] == [
        "m1",
        "m2",
        "chatcmpl-line3",
        "m4",
        "m5",
        "m6",
        "m7",
        "m8",
    ]

    completion = added[2].message
    assert completion.kind is MessageKind.TOOL_CALL and completion.model == "gpt-4o"
    request = events[2]
    assert isinstance(request, RequestSent) and request.request_id == "chatcmpl-line3"

    swe_result = added[3].message.parts[0]  # SWE-agent's plural tool_call_ids
    assert (swe_result.tool_name, swe_result.call_id) == ("bash", "call_py")
    legacy_call = added[4].message
    assert legacy_call.kind is MessageKind.TOOL_CALL
    assert legacy_call.parts[0].tool_name == "lookup" and legacy_call.parts[0].call_id is None
    legacy_result = added[5].message
    assert legacy_result.role is Role.TOOL and legacy_result.kind is MessageKind.TOOL_RESULT
    assert legacy_result.parts[0].tool_name == "lookup"
    assert added[6].message.text == "I can't help with upgrading the system python."
    assert [p.type for p in added[7].message.parts] == [PartType.THINKING, PartType.TEXT]


def test_conversation_lines_become_threads() -> None:
    events = read(fixture("conversations.jsonl"))
    assert not issues(events)
    added = messages(events)
    assert [(m.message.thread, m.message.id) for m in added] == [
        ("conv1", "conv1-m1"),
        ("conv1", "conv1-m2"),
        ("conv2", "conv2-m1"),
        ("conv2", "conv2-m2"),
        ("conv3", "conv3-m1"),
        ("conv3", "conv3-m2"),
        ("conv3", "conv3-m3"),
    ]
    requests = [e for e in events if isinstance(e, RequestSent)]
    assert [(r.thread, r.model) for r in requests] == [
        ("conv1", None),
        ("conv2", "gpt-4o"),
        ("conv3", None),
    ]
    assert [e.span.line for e in events if e.span] == sorted(e.span.line for e in events if e.span)


@pytest.mark.parametrize("newline", [b"", b"\n"])
def test_a_single_one_line_conversation_is_the_main_thread(newline: bytes) -> None:
    line = json.dumps(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
        }
    ).encode()
    events, parser = parse(line + newline)
    assert parser.mode == "lines"
    assert [(m.message.thread, m.message.id) for m in messages(events)] == [
        ("main", "m1"),
        ("main", "m2"),
    ]
    span = messages(events)[0].span
    assert span is not None and span.offset == 0 and span.length == len(line)
    assert parser.messages_at(line, span) == [m.message for m in messages(events)]


def test_truncated_last_line() -> None:
    data = fixture("truncated.jsonl")
    events = read(data)
    assert kinds(events) == ["user", "request", "assistant", "user", "issue"]
    issue = events[-1]
    assert isinstance(issue, ParseIssue)
    assert issue.line == 4 and issue.offset == data.rindex(b"\n") + 1
    assert issue.reason == "not valid JSON (unexpected end of data)"


def test_malformed_lines_are_issues_with_line_and_offset() -> None:
    data = fixture("malformed.jsonl")
    events = read(data)
    lines = data.split(b"\n")
    found = issues(events)
    assert [i.line for i in found] == [2, 4, 6, 8, 9]
    for issue in found:
        assert issue.offset == sum(len(ln) + 1 for ln in lines[: issue.line - 1])
        assert issue.excerpt == lines[issue.line - 1].decode()
    assert [i.reason for i in found][1:] == [
        "not a message object (array)",
        "no role",
        "role is number, not text",
        "content is object, not text or a list of parts",
    ]
    assert [m.message.id for m in messages(events)] == ["m1", "m3", "m7", "m10"]


def test_invalid_utf8_is_replaced_and_flagged() -> None:
    events = read(fixture("invalid_utf8.jsonl"))
    assert kinds(events) == ["issue", "user", "request", "assistant"]
    issue = events[0]
    assert isinstance(issue, ParseIssue) and "UTF-8" in issue.reason and issue.line == 1
    added = messages(events)
    assert added[0].message.text == "caf\ufffd au lait"
    assert added[1].message.text == "fine é here"


def test_invalid_utf8_in_a_document_is_replaced_and_flagged() -> None:
    data = b'[{"role": "user", "content": "caf\xe9"},\n {"role": "assistant", "content": "ok"}]'
    events = read(data)
    issue = events[0]
    assert isinstance(issue, ParseIssue) and "UTF-8" in issue.reason
    assert issue.offset == data.index(b"\xe9") and issue.line == 1
    assert [m.message.text for m in messages(events)] == ["caf\ufffd", "ok"]


def test_jsonl_with_an_unreadable_first_line_is_still_read_as_lines() -> None:
    data = b"garbage first line\n" + fixture("messages.jsonl")
    events, parser = parse(data)
    assert parser.mode == "lines"
    assert [i.line for i in issues(events)] == [1]
    assert len(messages(events)) == 8
    first = messages(events)[0]
    assert first.span is not None and first.span.line == 2 and first.message.id == "m2"


def test_bom_and_crlf() -> None:
    data = b"\xef\xbb\xbf" + fixture("messages.jsonl").replace(b"\n", b"\r\n")
    events, parser = parse(data)
    assert parser.mode == "lines" and not issues(events)
    assert len(messages(events)) == 8
    doc = b"\xef\xbb\xbf" + fixture("typical.json")
    assert len(messages(read(doc))) == 7


# -- scale and chunking --------------------------------------------------------------------


# -- sniffing ------------------------------------------------------------------------------


def head(data: bytes, name: str = "x.json") -> Head:
    return Head(path=Path(name), data=data[:HEAD_BYTES])


@pytest.mark.parametrize(
    ("value", "score"),
    [
        ([{"role": "user", "content": "hi"}], 0.8),
        ([{"role": "user", "content": [{"type": "text", "text": "hi"}]}], 0.6),
        ({"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}]}, 0.6),
        ([{"role": "assistant", "content": None, "tool_calls": []}], 0.8),
        ([{"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "x"}]}], 0.8),
        ({"messages": [], "trajectory_format": "mini-swe-agent-1"}, 0.6),
        (
            {
                "info": {},
                "messages": [{"role": "user", "content": "x"}],
                "trajectory_format": "mini-swe-agent-1.1",
            },
            0.95,
        ),
        (
            [
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {}}],
                }
            ],
            0.3,
        ),
        ([{"source": "user", "message": "hi"}], 0.0),
        ({"history": [], "trajectory": []}, 0.0),
    ],
)
def test_sniff_documents(value: object, score: float) -> None:
    assert openai_chat.sniff(head(json.dumps(value, indent=2).encode())) == score


def test_sniff_lines() -> None:
    plain = b'{"role": "user", "content": [{"type": "text", "text": "x"}]}\n' * 3
    assert openai_chat.sniff(head(plain, "x.jsonl")) == 0.7
    assert openai_chat.sniff(head(fixture("messages.jsonl"), "x.jsonl")) == 0.8
    assert openai_chat.sniff(head(fixture("conversations.jsonl"), "x.jsonl")) == 0.8
    assert openai_chat.sniff(head(b'{"type":"session_meta","payload":{}}\n')) == 0.0
    assert openai_chat.sniff(head(b"hello\n")) == 0.0


def test_sniff_a_document_cut_by_the_head() -> None:
    doc = [{"role": "system", "content": "s" * 100_000}] + [
        {"role": "user", "content": "x" * 1000} for _ in range(200)
    ]
    data = json.dumps(doc).encode()
    assert len(data) > HEAD_BYTES
    assert openai_chat.sniff(head(data)) == 0.8
    pretty = json.dumps({"messages": doc[1:]}, indent=2).encode()
    assert openai_chat.sniff(head(pretty)) == 0.8
