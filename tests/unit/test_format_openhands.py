"""OpenHands reader: event lists, event lines, session folders, eval records, condensation."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ctx_inspect.app.config import build_profile
from ctx_inspect.app.loader import load_session
from ctx_inspect.core.model import (
    Compacted,
    Event,
    LogLine,
    MessageAdded,
    MessageKind,
    ParseIssue,
    PartType,
    RequestSent,
    Role,
    SessionInfo,
    UsageReported,
)
from ctx_inspect.formats import openhands, registry
from ctx_inspect.formats.openhands import OpenHandsParser
from ctx_inspect.formats.registry import HEAD_BYTES, Head

DATA = Path(__file__).parents[1] / "data" / "openhands"
LINE_FIXTURES = (
    "events.jsonl",
    "condensation_range.jsonl",
    "eval_output.jsonl",
    "truncated.jsonl",
    "malformed.jsonl",
    "invalid_utf8.jsonl",
)


def parse(data: bytes, sizes: list[int] | None = None) -> tuple[list[Event], OpenHandsParser]:
    parser = OpenHandsParser(0, "x")
    out: list[Event] = []
    pos = 0
    for size in sizes or []:
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


def of_type(events: list[Event], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def kinds(events: list[Event]) -> list[str]:
    return [e.message.role.value if isinstance(e, MessageAdded) else e.type for e in events]


def without_spans(events: list[Event]) -> list[Event]:
    return [e.model_copy(update={"span": None}) for e in events]


# -- event streams -------------------------------------------------------------------------

EXPECTED_KINDS = [
    "info",
    "system",
    "user",
    "log",  # recall action
    "user",  # recall observation: workspace context
    "request",
    "usage",
    "assistant",  # run: the response's text and first call
    "assistant",  # read: same response, its second call only
    "tool",
    "tool",
    "info",  # llm_metrics
    "request",
    "usage",
    "assistant",  # think
    "tool",
    "user",  # an error without a tool call goes to the model as a user message
    "log",  # condensation_request
    "compaction",
    "user",  # the summary
    "request",
    "assistant",  # a message with no tool_call_metadata: a request without usage
    "log",
    "log",
    "info",
    "request",
    "usage",
    "assistant",  # finish
]


def test_event_list_document() -> None:
    events = read(fixture("events.json"))
    assert not of_type(events, ParseIssue)
    assert kinds(events) == EXPECTED_KINDS
    assert all(e.span is None for e in events)


def test_event_lines_give_the_same_events_with_spans() -> None:
    data = fixture("events.jsonl")
    events = read(data)
    assert kinds(events) == EXPECTED_KINDS
    assert without_spans(events) == read(fixture("events.json"))
    lines = data.split(b"\n")
    for event in events:
        assert event.span is not None
        assert (
            data[event.span.offset : event.span.offset + event.span.length]
            == lines[event.span.line - 1]
        )


def test_messages_calls_results_and_usage() -> None:
    events = read(fixture("events.json"))
    added = {m.message.id: m.message for m in messages(events)}
    assert added["e0"].role is Role.SYSTEM and added["e0"].text == "You are OpenHands agent."
    user = added["e1"]
    assert [p.type for p in user.parts] == [PartType.TEXT, PartType.IMAGE]
    recall = added["e3"]
    assert recall.kind is MessageKind.ATTACHMENT and "microagent_knowledge" in recall.text
    first, second = added["e4"], added["e5"]
    assert [p.type for p in first.parts] == [PartType.TEXT, PartType.TOOL_CALL]
    assert first.parts[0].text == "Let me look around."
    assert (first.parts[1].tool_name, first.parts[1].call_id, first.parts[1].arguments) == (
        "execute_bash",
        "call_a",
        '{"command": "ls"}',
    )
    assert second.kind is MessageKind.TOOL_CALL and [p.type for p in second.parts] == [
        PartType.TOOL_CALL
    ]
    result = added["e6"].parts[0]
    assert (result.type, result.tool_name, result.call_id, result.text) == (
        PartType.TOOL_RESULT,
        "execute_bash",
        "call_a",
        "a.py\nb.py",
    )
    assert added["e8"].parts[0].text == "The bug is in a.py"  # the thought when content is null
    assert added["e10"].role is Role.USER
    assert added["e12.summary"].kind is MessageKind.SUMMARY
    requests = of_type(events, RequestSent)
    assert [r.request_id for r in requests] == ["chatcmpl-1", "chatcmpl-2", None, "chatcmpl-3"]
    usages = [u.usage for u in of_type(events, UsageReported)]
    assert [(u.prompt_tokens, u.cache_read, u.output) for u in usages] == [
        (2100, 0, 60),
        (2600, 2048, 30),
        (1500, 1024, 12),
    ]
    info = events[0]
    assert isinstance(info, SessionInfo)
    assert (info.agent, info.version) == ("openhands", "0.40.0")
    assert info.extra["tool_count"] == 1 and info.extra["agent_class"] == "CodeActAgent"
    metrics = [
        i.extra["llm_metrics"] for i in of_type(events, SessionInfo) if "llm_metrics" in i.extra
    ]
    assert [m["accumulated_token_usage"]["prompt_tokens"] for m in metrics] == [4700, 6200]


def test_condensation_keeps_what_was_not_forgotten() -> None:
    events = read(fixture("events.json"))
    (compaction,) = of_type(events, Compacted)
    assert compaction.trigger == "manual"  # a condensation_request came first
    assert compaction.retained_ids == ("e0", "e1", "e3", "e8", "e9", "e10")
    assert (compaction.messages_before, compaction.messages_after) == (10, 6)
    assert not compaction.keep_system

    events = read(fixture("condensation_range.jsonl"))
    (compaction,) = of_type(events, Compacted)
    assert compaction.trigger == "auto"
    assert compaction.retained_ids == ("e0", "e1", "e5")
    summary = messages(events)[-1].message
    assert summary.kind is MessageKind.SUMMARY and summary.text == "Earlier: looked around."


def test_condensation_in_a_session() -> None:
    loaded = load_session(
        DATA / "events.jsonl",
        build_profile("generic"),
        format_spec=openhands.SPEC,
        count_exact=False,
    )
    session = loaded.session
    assert [s.reported for s in session.steps] == [2100, 2600, None, 1500]
    live = [session.table.ids[i] for i in session.in_context(3)]
    assert live == ["e0", "e1", "e3", "e8", "e9", "e10", "e12.summary"]


# -- evaluation output ---------------------------------------------------------------------


def test_eval_records_are_threads() -> None:
    data = fixture("eval_output.jsonl")
    events = read(data)
    assert not of_type(events, ParseIssue)
    threads = [m.message.thread for m in messages(events)]
    assert list(dict.fromkeys(threads)) == [
        "instance-proj__repo-1",
        "instance-proj__repo-2",
        "instance-proj__repo-1@3",  # the same instance again, on line 3
        "instance-7",  # a resolver record: named after its issue
    ]
    ids = [m.message.id for m in messages(events)]
    assert len(ids) == len(set(ids))
    assert ids[:2] == ["instance-proj__repo-1:e0", "instance-proj__repo-1:e1"]
    requests = of_type(events, RequestSent)
    assert [r.thread for r in requests] == [
        "instance-proj__repo-1",
        "instance-proj__repo-1",
        "instance-proj__repo-2",
        "instance-proj__repo-2",
        "instance-proj__repo-1@3",
        "instance-proj__repo-1@3",
        "instance-7",
        "instance-7",
    ]
    usages = of_type(events, UsageReported)
    assert [u.usage.prompt_tokens for u in usages] == [5000, 5300] * 3
    records = [json.loads(line) for line in data.splitlines()]
    for usage_pair, record in zip(
        [usages[i : i + 2] for i in range(0, 6, 2)], records[:3], strict=True
    ):
        assert [u.usage.prompt_tokens for u in usage_pair] == [
            t["prompt_tokens"] for t in record["metrics"]["token_usages"]
        ]
    infos = of_type(events, SessionInfo)
    run = [
        i.extra["run[instance-proj__repo-1]"]
        for i in infos
        if "run[instance-proj__repo-1]" in i.extra
    ]
    assert run[0]["metrics"]["calls"] == 2 and run[0]["agent_class"] == "CodeActAgent"
    assert infos[0].model == "openai/demo-model"
    resolver = [m.message for m in messages(events) if m.message.thread == "instance-7"]
    assert [m.role for m in resolver] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]
    assert resolver[1].parts[0].text == "Create the file."
    assert resolver[1].parts[1].arguments == '{"command":"touch LICENSE"}'


# -- session folders -----------------------------------------------------------------------


def test_session_folder_snapshot(tmp_path: Path) -> None:
    folder = tmp_path / "sid-1"
    shutil.copytree(DATA / "session", folder)
    (folder / "events" / "10.json").write_text(
        json.dumps({"id": 10, "source": "user", "action": "message", "args": {"content": "later"}})
    )
    (folder / "events" / "7.json").write_bytes(b"{not json")
    assert openhands.sniff(Head(path=folder, data=b"", is_dir=True)) == 0.9
    assert openhands.sniff(Head(path=folder / "events", data=b"", is_dir=True)) == 0.9
    assert openhands.sniff(Head(path=tmp_path, data=b"", is_dir=True)) == 0.0
    assert registry.detect(folder).name == "openhands"
    (session,) = openhands.snapshot(folder)
    assert session.label == "sid-1"
    issues = of_type(session.events, ParseIssue)
    assert [Path(i.file).name for i in issues] == ["7.json"]
    added = [m.message.id for m in messages(session.events)]
    assert added == ["e0", "e1", "e3", "e4", "e10"]  # in number order, 10 after 4
    assert openhands.snapshot(tmp_path) == []


# -- bad input -----------------------------------------------------------------------------


def test_truncated_last_line() -> None:
    data = fixture("truncated.jsonl")
    events = read(data)
    issue = events[-1]
    assert isinstance(issue, ParseIssue) and len(of_type(events, ParseIssue)) == 1
    assert issue.line == 5 and issue.offset == data.rindex(b"\n") + 1


def test_malformed_lines() -> None:
    data = fixture("malformed.jsonl")
    events = read(data)
    lines = data.split(b"\n")
    issues = of_type(events, ParseIssue)
    assert [i.line for i in issues] == [2, 4, 5, 6]
    for issue in issues:
        assert issue.offset == sum(len(ln) + 1 for ln in lines[: issue.line - 1])
    assert [i.reason for i in issues][1:] == [
        "not an OpenHands event (array)",
        "not an OpenHands event (keys: hello)",
        "not an OpenHands event (string)",
    ]
    assert [m.message.id for m in messages(events)] == ["e0", "e1", "e4"]


def test_cut_document_is_one_issue() -> None:
    data = fixture("events.json")
    events = read(data[: len(data) // 2])
    assert len(events) == 1
    issue = events[0]
    assert isinstance(issue, ParseIssue)
    assert issue.reason.startswith("not valid JSON") and issue.line > 1


def test_broken_document_that_is_really_lines() -> None:
    data = b"{broken\n" + fixture("events.jsonl")
    events = read(data)
    issues = of_type(events, ParseIssue)
    assert [i.line for i in issues] == [1]
    assert kinds(events)[1:] == EXPECTED_KINDS


def test_invalid_utf8() -> None:
    events = read(fixture("invalid_utf8.jsonl"))
    issues = of_type(events, ParseIssue)
    assert len(issues) == 1 and "UTF-8" in issues[0].reason and issues[0].line == 2
    assert [m.message.text for m in messages(events)] == ["hello", "caf\ufffd"]
    doc = b'[{"id": 0, "source": "user", "action": "message",\n "args": {"content": "caf\xe9"}}]'
    events = read(doc)
    assert "UTF-8" in of_type(events, ParseIssue)[0].reason
    assert messages(events)[0].message.text == "caf\ufffd"


def test_odd_values_never_raise() -> None:
    doc: list[Any] = [
        {"action": None},
        {"observation": 5, "content": {"x": 1}},
        {"id": "", "source": 3, "action": "run", "args": "not a dict"},
        {
            "id": 9,
            "source": "agent",
            "action": "run",
            "tool_call_metadata": {"model_response": {"id": 5, "choices": [None]}},
        },
        {
            "id": 10,
            "source": "agent",
            "action": "condensation",
            "args": {
                "forgotten_event_ids": [None, "x"],
                "forgotten_events_start_id": 5,
                "forgotten_events_end_id": 1,
            },
        },
        {"id": 11, "source": "user", "action": "run", "args": {}},
        {
            "id": 12,
            "source": "agent",
            "action": "message",
            "args": {"content": None, "image_urls": [None]},
        },
        {
            "id": 13,
            "source": "agent",
            "observation": "error",
            "tool_call_metadata": {"tool_call_id": "c"},
            "content": None,
        },
        {
            "id": 14,
            "source": "agent",
            "action": "system",
            "args": {"tools": "[{...}]"},
            "llm_metrics": {"costs": []},
        },
    ]
    events = read(json.dumps(doc).encode())
    assert not of_type(events, ParseIssue)
    assert of_type(events, Compacted)[0].retained_ids == tuple(
        m.message.id for m in messages(events)[:4] if m.message.visible
    )
    error = messages(events)[-2].message.parts[0]
    assert error.is_error and error.type is PartType.TOOL_RESULT
    assert of_type(events, LogLine)[0].text == "user action run"


# -- sniffing ------------------------------------------------------------------------------


def head(data: bytes, name: str = "x.json") -> Head:
    return Head(path=Path(name), data=data[:HEAD_BYTES])


def test_sniff() -> None:
    assert openhands.sniff(head(fixture("events.json"))) == 0.95
    assert openhands.sniff(head(fixture("events.jsonl"))) == 0.95
    assert openhands.sniff(head(fixture("eval_output.jsonl"))) == 0.9
    record = json.loads(fixture("eval_output.jsonl").splitlines()[0])
    record["history"] = record["history"] * 400
    long_line = json.dumps(record).encode() + b"\n"
    assert len(long_line) > HEAD_BYTES
    assert openhands.sniff(head(long_line)) == 0.9  # the head cuts the record short
    assert openhands.sniff(head(b'[{"role": "user", "content": "hi"}]')) == 0.0
    assert openhands.sniff(head(b'{"type":"session_meta","payload":{}}\n')) == 0.0
    assert openhands.sniff(head(b'{"history": [], "trajectory": [], "info": {}}')) == 0.0
    assert openhands.sniff(head(b"# aider chat started at 2025-01-01 00:00:00\n")) == 0.0


@pytest.mark.parametrize("name", [*LINE_FIXTURES, "events.json"])
def test_fixtures_are_detected(name: str) -> None:
    assert registry.detect(DATA / name).name == "openhands"


# -- the real samples ----------------------------------------------------------------------


def expected_requests(history: list[dict[str, Any]]) -> list[int | None]:
    """Per model request, its prompt_tokens (None without a model_response): from the raw JSON."""
    out: list[int | None] = []
    last = None
    for event in history:
        action = event.get("action")
        if action is None or action in ("system", "recall", "change_agent_state", "condensation"):
            continue
        source = event.get("source")
        if action == "message":
            by_agent = source == "agent" if source is not None else event.get("wait_for_response")
            if by_agent is not True:
                continue
        elif source not in (None, "agent"):
            continue
        response = (event.get("tool_call_metadata") or {}).get("model_response")
        if response is None:
            out.append(None)
            last = None
        elif response["id"] != last:
            out.append(response["usage"]["prompt_tokens"])
            last = response["id"]
    return out


@pytest.mark.corpus
def test_real_event_streams(corpus: Path) -> None:
    for name in ("basic_gui_mode.json", "basic_interactions.json"):
        path = corpus / "openhands" / name
        assert registry.detect(path).name == "openhands"
        events = read(path.read_bytes())
        assert not of_type(events, ParseIssue)
        raw = json.loads(path.read_bytes())
        prompts = [u.usage.prompt_tokens for u in of_type(events, UsageReported)]
        expected = expected_requests(raw)
        assert len(of_type(events, RequestSent)) == len(expected)
        assert prompts == [p for p in expected if p is not None]
        assert len(messages(events)) + len(of_type(events, LogLine)) >= len(raw)
    events = read((corpus / "openhands" / "basic_gui_mode.json").read_bytes())
    assert len(of_type(events, UsageReported)) == 4 and len(of_type(events, RequestSent)) == 5


@pytest.mark.corpus
def test_real_eval_output(corpus: Path) -> None:
    for name in ("multi_swe_bench_examples_output.jsonl", "resolver_mock_output.jsonl"):
        path = corpus / "openhands" / name
        assert registry.detect(path).name == "openhands"
        data = path.read_bytes()
        events, parser = parse(data)
        assert not of_type(events, ParseIssue), name
        records = [json.loads(line) for line in data.splitlines() if line.strip()]
        threads = list(dict.fromkeys(m.message.thread for m in messages(events)))
        assert len(threads) == len(records)
        for thread, record in zip(threads, records, strict=True):
            requests = [r for r in of_type(events, RequestSent) if r.thread == thread]
            usages = [
                u.usage.prompt_tokens for u in of_type(events, UsageReported) if u.thread == thread
            ]
            expected = expected_requests(record["history"])
            assert len(requests) == len(expected), thread
            assert usages == [p for p in expected if p is not None], thread
            metrics = record["metrics"]
            if "token_usages" in metrics:  # eval output: one entry per call, in order
                assert usages == [t["prompt_tokens"] for t in metrics["token_usages"]]
            else:  # resolver output: one cost per call
                assert len(requests) == len(metrics["costs"])
        for message in messages(events)[:50]:
            span = message.span
            assert span is not None
            again = parser.messages_at(data[span.offset : span.offset + span.length], span)
            assert message.message in again


def test_snapshot_of_a_file_reads_it_as_a_stream() -> None:
    (session,) = openhands.snapshot(DATA / "events.jsonl")
    assert session.events == read(fixture("events.jsonl"))
