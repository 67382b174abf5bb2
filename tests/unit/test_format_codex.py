"""Codex rollout reader: envelopes, usage, compactions, the legacy layout, bad input, real runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctx_inspect.agents.codex import reader as codex
from ctx_inspect.agents.codex.compaction import ESTIMATE_LABEL
from ctx_inspect.agents.codex.reader import CodexParser
from ctx_inspect.app.config import build_profile
from ctx_inspect.app.loader import counter_for, load_session, new_session
from ctx_inspect.core.model import (
    Compacted,
    ContextMeasured,
    Event,
    LogLine,
    MessageAdded,
    MessageKind,
    ParseIssue,
    PartType,
    RequestRejected,
    RequestSent,
    Role,
    SessionInfo,
    UsageReported,
)
from ctx_inspect.errors import InputError
from ctx_inspect.formats import registry
from ctx_inspect.formats.registry import HEAD_BYTES, Head

DATA = Path(__file__).parents[1] / "data" / "codex"
FIXTURES = (
    "typical.jsonl",
    "compaction.jsonl",
    "legacy.jsonl",
    "malformed.jsonl",
    "truncated.jsonl",
    "resume_preturn_compact.jsonl",
)


def parse(data: bytes, sizes: list[int] | None = None) -> tuple[list[Event], CodexParser]:
    parser = CodexParser(0, "x")
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


def issues(events: list[Event]) -> list[ParseIssue]:
    return [e for e in events if isinstance(e, ParseIssue)]


def of_type(events: list[Event], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def kinds(events: list[Event]) -> list[str]:
    return [e.message.role.value if isinstance(e, MessageAdded) else e.type for e in events]


def assert_every_line_accounted(data: bytes, events: list[Event]) -> None:
    lines = {i for i, raw in enumerate(data.split(b"\n"), start=1) if raw.strip()}
    seen = {e.span.line for e in events if e.span is not None}
    assert lines == seen


# -- typical rollout -----------------------------------------------------------------------


def test_typical_rollout_order_and_messages() -> None:
    data = fixture("typical.jsonl")
    events = read(data)
    assert not issues(events)
    assert_every_line_accounted(data, events)
    assert kinds(events) == [
        "info",
        "system",
        "info",
        "developer",
        "user",
        "user",
        "info",
        "user",
        "log",
        "request",
        "assistant",
        "log",
        "assistant",
        "log",
        "tool",
        "usage",
        "request",
        "assistant",
        "tool",
        "usage",
        "log",
        "request",
        "assistant",
        "usage",
        "log",
        "log",
        "log",
        "log",
        "info",
        "user",
        "request",
        "assistant",
        "assistant",
        "tool",
        "user",
        "log",
    ]
    added = {m.message.id: m.message for m in messages(events)}
    assert added["L1.instructions"].role is Role.SYSTEM
    assert added["L1.instructions"].text == "You are Codex, a coding agent. Be concise."
    assert added["msg_agents"].kind is MessageKind.ATTACHMENT
    assert added["msg_env"].kind is MessageKind.ATTACHMENT
    assert added["msg_dev1"].kind is MessageKind.MESSAGE
    assert added["msg_u1"].kind is MessageKind.MESSAGE
    thinking = added["rs_1"].parts[0]
    assert thinking.type is PartType.THINKING and thinking.text == "**Looking at the test**"
    assert thinking.data_bytes == 64
    call = added["fc_1"]
    assert call.kind is MessageKind.TOOL_CALL and call.model == "gpt-5-codex"
    assert (call.parts[0].tool_name, call.parts[0].call_id) == ("shell", "call_1")
    result = added["L13"].parts[0]
    assert (result.type, result.tool_name, result.call_id) == (
        PartType.TOOL_RESULT,
        "shell",
        "call_1",
    )
    assert added["ctc_1"].parts[0].arguments is not None
    assert added["ctc_1"].parts[0].arguments.startswith("*** Begin Patch")
    assert added["L16"].parts[0].tool_name == "apply_patch"
    assert added["ws_1"].parts[0].tool_name == "web_search"
    assert added["ls_1"].parts[0].tool_name == "local_shell"
    failed = added["L29"].parts[0]
    assert (
        failed.is_error and failed.text == "permission denied" and failed.tool_name == "local_shell"
    )
    ghost = added["L30"]
    assert ghost.kind is MessageKind.META and not ghost.visible


def test_usage_comes_from_last_token_usage_never_the_totals() -> None:
    events = read(fixture("typical.jsonl"))
    usages = [e.usage for e in of_type(events, UsageReported)]
    assert [(u.input, u.cache_read, u.output, u.reasoning, u.total) for u in usages] == [
        (5200, 0, 120, 64, 5320),
        (5600, 5120, 80, 0, 5680),
        (6100, 5504, 40, 0, 6140),
    ]
    assert all(u.input_includes_cache and u.prompt_tokens == u.input for u in usages)
    logs = [e.text for e in of_type(events, LogLine) if e.tag == "token_count"]
    assert logs == ["token_count (repeated)", "token_count (rate limits only)"]
    infos = of_type(events, SessionInfo)
    assert [i.context_window for i in infos if i.context_window] == [258_400]
    assert [i.model for i in infos if i.model] == ["gpt-5-codex", "gpt-5"]
    first = infos[0]
    assert (first.agent, first.version, first.session_id) == (
        "codex",
        "0.60.0",
        "0199a000-0000-7000-8000-00000000c0de",
    )
    assert first.extra["originator"] == "codex_cli_rs" and first.extra["cwd"] == "/work/demo"
    assert [r.model for r in of_type(events, RequestSent)] == ["gpt-5-codex"] * 3 + ["gpt-5"]


def test_typical_rollout_in_a_session() -> None:
    loaded = load_session(
        DATA / "typical.jsonl", build_profile("codex"), format_spec=codex.SPEC, count_exact=False
    )
    session = loaded.session
    # a step shows Codex's own figure: last_token_usage.total_tokens, the prompt and its answer
    assert [s.reported for s in session.steps] == [5320, 5680, 6140, None]
    assert [s.usage.prompt_tokens for s in session.steps if s.usage] == [5200, 5600, 6100]
    assert {s.reported_label for s in session.steps[:3]} == {codex.CONTEXT_LABEL}
    assert session.info["context_window"] == 258_400
    assert session.info["model"] == "gpt-5"


# -- compaction ----------------------------------------------------------------------------


def test_compactions_manual_auto_and_marker_only() -> None:
    data = fixture("compaction.jsonl")
    events = read(data)
    assert not issues(events)
    assert_every_line_accounted(data, events)
    compactions = of_type(events, Compacted)
    # the first answers Codex's own summarisation call (line 15): the prompt it summarised
    # before, Codex's estimate of what it left (line 18) after
    assert [(c.trigger, c.tokens_before, c.tokens_after, c.span.line) for c in compactions] == [
        ("manual", 9800, 1234, 17),
        ("auto", 3000, None, 26),
        ("auto", 2000, None, 31),
    ]
    assert compactions[0].added_ids == ("msg_u1@L17.1", "msg_summary", "L17.3")
    call = [e for e in of_type(events, RequestSent) if e.compaction]
    assert [e.span.line for e in call] == [15]
    assert events.index(compactions[0]) == events.index(call[0]) + 1  # its answer, at once
    assert all(c.retained_ids == ("L1.instructions",) and not c.keep_system for c in compactions)
    after_first = [m.message for m in messages(events) if m.span is not None and m.span.line == 17]
    assert [(m.id, m.kind) for m in after_first] == [
        ("msg_u1@L17.1", MessageKind.MESSAGE),
        ("msg_summary", MessageKind.SUMMARY),
        ("L17.3", MessageKind.MESSAGE),
    ]
    old_style = [m.message for m in messages(events) if m.span is not None and m.span.line == 26]
    assert [(m.id, m.kind, m.text) for m in old_style] == [
        ("L26.1.summary", MessageKind.SUMMARY, "Old-style summary.")
    ]
    markers = [e.span.line for e in of_type(events, LogLine) if e.tag == "context_compacted"]
    assert markers == [19, 27]  # the compacted line told the story; line 30 is the Compacted
    estimate = of_type(events, ContextMeasured)
    assert [(c.tokens, c.limit, c.label) for c in estimate] == [
        (1234, 258_400, f"{ESTIMATE_LABEL} after compaction")
    ]
    opaque = [m.message for m in messages(events) if m.span is not None and m.span.line == 32]
    assert opaque[0].kind is MessageKind.SUMMARY and opaque[0].parts[0].data_bytes == 30


def test_usage_records_name_the_request() -> None:
    events = read(fixture("compaction.jsonl"))
    ids = [u.request_id for u in of_type(events, UsageReported)]
    assert ids == ["resp_1", "resp_2", None, None, None]


def test_compaction_in_a_session_keeps_instructions_and_replacement() -> None:
    loaded = load_session(
        DATA / "compaction.jsonl", build_profile("codex"), format_spec=codex.SPEC, count_exact=False
    )
    session = loaded.session
    live = [session.table.ids[i] for i in session.in_context(4)]
    assert live == ["L1.instructions", "msg_u1@L17.1", "msg_summary", "L17.3", "msg_u2"]
    # the summarisation call (step 3) holds its compaction: it sent the whole context (9,800)
    assert [s.compactions for s in session.steps] == [0, 0, 1, 0, 1]
    call = session.steps[2]
    assert call.reported == 9800 and call.messages == 5
    after = session.steps[3]  # after the compaction: Codex's estimate, then the next answer
    assert after.peak_reported == 1234 and after.reported == 3020
    old_style = session.steps[4]  # a compacted record without its call: in the build-up
    assert old_style.reported == 2020 and old_style.peak_reported == 3000


def test_preturn_compaction_at_resume() -> None:
    """``codex exec resume <id> ... -c model_auto_compact_token_limit=50000`` after a turn that
    ended at 57,000: Codex compacts before the new turn, before recording the user's message."""
    data = fixture("resume_preturn_compact.jsonl")
    events = read(data)
    assert not issues(events)
    assert_every_line_accounted(data, events)
    (compaction,) = of_type(events, Compacted)
    assert compaction.trigger == "auto"  # the turn was started by the resumed exec
    assert (compaction.tokens_before, compaction.tokens_after) == (57_310, 5_480)
    assert compaction.added_ids == ("msg_u1c", "msg_sum_in")
    call = next(e for e in of_type(events, RequestSent) if e.compaction)
    assert events.index(compaction) == events.index(call) + 1
    turn = next(m for m in messages(events) if m.message.id == "msg_u2")
    assert events.index(turn) > events.index(compaction)  # recorded after the compaction
    usages = of_type(events, UsageReported)
    assert [u.context_tokens for u in usages] == [20_200, 45_180, 57_000, None, 7_050, 7_140]
    loaded = load_session(
        DATA / "resume_preturn_compact.jsonl",
        build_profile("codex"),
        format_spec=codex.SPEC,
        count_exact=False,
    )
    steps = loaded.session.steps
    assert [s.compactions for s in steps] == [0, 0, 0, 1, 0, 0]
    assert steps[3].reported == 57_310 and steps[3].usage is not None
    assert steps[4].peak_reported == 5_480  # Codex's estimate of what the compaction left


REFUSED = b"\n".join(
    json.dumps(record, separators=(",", ":")).encode()
    for record in [
        {"type": "session_meta", "payload": {"id": "s", "cli_version": "0.169.0"}},
        {"type": "event_msg", "payload": {"type": "task_started", "model_context_window": 1000}},
        {"type": "response_item", "payload": {"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "go"}]}},
        {"type": "response_item", "payload": {"type": "function_call", "id": "fc",
            "name": "sh", "arguments": "{}", "call_id": "c"}},
        {"type": "token_usage_record", "payload": {"response_id": "r", "usage": {
            "input_tokens": 700, "output_tokens": 20, "total_tokens": 720}}},
        {"type": "response_item", "payload": {"type": "function_call_output", "call_id": "c",
            "output": "x" * 400}},
        {"type": "event_msg", "payload": {"type": "token_count", "info": {
            "total_token_usage": {"total_tokens": 720},
            "last_token_usage": {"input_tokens": 700, "output_tokens": 20, "total_tokens": 720},
            "model_context_window": 1000}}},
        # the request that follows is refused: Codex marks its window full ...
        {"type": "event_msg", "payload": {"type": "token_count", "info": {
            "total_token_usage": {"total_tokens": 1000},
            "last_token_usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 280},
            "model_context_window": 1000}}},
        # ... and ends the turn (older builds also write an error event first)
        {"type": "event_msg", "payload": {"type": "error", "message": "out of room",
            "codex_error_info": "context_window_exceeded"}},
        {"type": "event_msg", "payload": {"type": "task_complete", "error": {
            "message": "out of room", "codex_error_info": "context_window_exceeded"}}},
    ]
)  # fmt: skip


def test_a_refused_request_is_a_rejection_and_its_bookkeeping_no_figure() -> None:
    events = read(REFUSED)
    assert not issues(events)
    assert_every_line_accounted(REFUSED, events)
    (rejected,) = of_type(events, RequestRejected)
    assert (rejected.code, rejected.reason, rejected.tokens) == (
        "context_window_exceeded",
        "out of room",
        None,
    )
    assert events[events.index(rejected) - 1].type == "request"  # the request it refused
    assert not of_type(events, ContextMeasured)  # 280 is bookkeeping, not a context size
    assert not of_type(events, Compacted)  # 0.169 does not compact on this error
    (usage,) = of_type(events, UsageReported)
    # given with the response's usage record: before the tool output Codex estimates itself
    assert events.index(usage) < next(
        i for i, e in enumerate(events) if isinstance(e, MessageAdded) and e.message.id == "L6"
    )
    session = load_session_from(REFUSED)
    last = session.steps[-1]
    assert last.rejected == 1 and last.usage is None and last.peak_reported is None


def load_session_from(data: bytes) -> Any:
    profile = build_profile("codex")
    session = new_session(profile, counter_for(profile), count_exact=False)
    session.append(read(data))
    return session


def test_a_compaction_cut_short_is_a_failed_attempt() -> None:
    cut = b"\n".join(
        [
            b'{"type":"session_meta","payload":{"id":"s","base_instructions":"Be brief."}}',
            b'{"type":"response_item","payload":{"type":"message","role":"user",'
            b'"content":[{"type":"input_text","text":"go"}]}}',
            b'{"type":"event_msg","payload":{"type":"task_started"}}',  # /compact
            b'{"type":"response_item","payload":{"type":"message","role":"assistant",'
            b'"content":[{"type":"output_text","text":"Handoff"}]},'
            b'"metadata":{"compaction_output":true}}',
            b'{"type":"event_msg","payload":{"type":"error","message":"stream closed"}}',
        ]
    )
    events = read(cut)
    assert_every_line_accounted(cut, events)
    (compaction,) = of_type(events, Compacted)
    assert compaction.failed and compaction.trigger == "manual"
    assert compaction.error == "stream closed"
    session = load_session_from(cut)
    assert session.message_count == 3 and len(session.in_context()) == 2  # nothing removed


# -- legacy layout -------------------------------------------------------------------------


def test_legacy_layout() -> None:
    data = fixture("legacy.jsonl")
    events = read(data)
    assert not issues(events)
    assert_every_line_accounted(data, events)
    info = events[0]
    assert isinstance(info, SessionInfo) and info.extra["layout"] == "legacy"
    assert info.session_id == "5e1f0a6b-1d2c-4b7a-9d7e-0a1b2c3d4e5f"
    assert kinds(events)[1:] == [
        "log",
        "user",
        "user",
        "request",
        "assistant",
        "assistant",
        "tool",
        "log",
        "request",
        "assistant",
        "log",
    ]
    added = messages(events)
    assert added[0].message.kind is MessageKind.ATTACHMENT
    assert [m.message.id for m in added] == ["L3", "L4", "rs_9", "L6", "L7", "L9"]
    assert added[4].message.parts[0].tool_name == "shell"


# -- bad input -----------------------------------------------------------------------------


def test_truncated_last_line() -> None:
    data = fixture("truncated.jsonl")
    events = read(data)
    found = issues(events)
    assert len(found) == 1 and found[0] is events[-1]
    assert found[0].line == 9 and found[0].offset == data.rindex(b"\n") + 1
    assert found[0].reason == "not valid JSON (unexpected end of data)"
    assert len(messages(events)) == 5


def test_malformed_lines_are_issues_and_the_rest_is_read() -> None:
    data = fixture("malformed.jsonl")
    events = read(data)
    lines = data.split(b"\n")
    found = issues(events)
    assert [i.line for i in found] == [2, 4, 5, 6]
    for issue in found:
        assert issue.offset == sum(len(ln) + 1 for ln in lines[: issue.line - 1])
    assert [i.reason for i in found][1:] == [
        "not a rollout record (array)",
        "response_item payload is string",
        "not a rollout record (keys: hello)",
    ]
    assert [m.message.id for m in messages(events)] == ["L1.instructions", "msg_u1", "rs_1", "fc_1"]
    assert_every_line_accounted(data, events)


def test_invalid_utf8_is_replaced_and_flagged() -> None:
    events = read(fixture("invalid_utf8.jsonl"))
    found = issues(events)
    assert len(found) == 1 and "UTF-8" in found[0].reason and found[0].line == 2
    assert [m.message.text for m in messages(events)] == ["caf\ufffd au lait", "fine é here"]


def test_odd_values_never_raise() -> None:
    records: list[Any] = [
        {"type": "response_item", "payload": {"type": "message", "role": 7, "content": {"x": 1}}},
        {
            "type": "response_item",
            "payload": {"type": "reasoning", "summary": "plain", "content": [1]},
        },
        {
            "type": "response_item",
            "payload": {
                "type": "function_call_output",
                "output": [
                    None,
                    {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
                ],
            },
        },
        {"type": "response_item", "payload": {"type": "mystery_item", "blob": [1, 2]}},
        {"type": "response_item", "payload": {"type": "brand_new_call", "id": "x1"}},
        {
            "type": "event_msg",
            "payload": {"type": "token_count", "info": {"last_token_usage": "no"}},
        },
        {
            "type": "event_msg",
            "payload": {
                "type": "token_count",
                "info": {"last_token_usage": {"input_tokens": "many"}},
            },
        },
        {
            "type": "event_msg",
            "payload": {"type": "token_count", "input_tokens": 10, "output_tokens": 2},
        },
        {
            "type": "compacted",
            "payload": {
                "message": 5,
                "replacement_history": [3, {"type": "compaction", "encrypted_content": "e"}],
            },
        },
        {
            "type": "session_meta",
            "payload": {"base_instructions": {"text": None}, "context_window": "big"},
        },
        {"type": "turn_context", "payload": {"model": None}},
        {"type": "event_msg", "payload": {"type": "error", "error": {"message": "boom"}}},
        {"type": "event_msg", "payload": {"type": None}},
        {"type": "inter_agent_communication_metadata", "payload": {}},
    ]
    data = b"".join(json.dumps(r).encode() + b"\n" for r in records)
    events = read(data)
    assert not issues(events)
    assert_every_line_accounted(data, events)
    added = {m.message.id: m.message for m in messages(events)}
    assert added["L3"].parts[1].type is PartType.IMAGE
    assert added["L4"].kind is MessageKind.ATTACHMENT
    assert (
        added["x1"].kind is MessageKind.TOOL_CALL and added["x1"].parts[0].tool_name == "brand_new"
    )
    errors = [e for e in of_type(events, LogLine) if e.level == "error"]
    assert errors[0].text == "error: boom"
    old = of_type(events, UsageReported)[-1]
    assert (old.usage.input, old.usage.output) == (10, 2)


# -- sniffing ------------------------------------------------------------------------------


def head(data: bytes, name: str = "rollout.jsonl") -> Head:
    return Head(path=Path(name), data=data[:HEAD_BYTES])


def test_sniff() -> None:
    assert codex.sniff(head(fixture("typical.jsonl"))) == 1.0
    assert codex.sniff(head(fixture("legacy.jsonl"))) == 0.95
    assert codex.sniff(head(fixture("compaction.jsonl").split(b"\n", 1)[1])) == 0.9
    meta = {
        "timestamp": "t",
        "type": "session_meta",
        "payload": {"base_instructions": "x" * 100_000},
    }
    assert codex.sniff(head(json.dumps(meta, separators=(",", ":")).encode() + b"\n")) == 0.95
    exec_json = b'{"type":"thread.started","thread_id":"t"}\n{"type":"turn.started"}\n'
    assert codex.sniff(head(exec_json)) == 0.0
    assert codex.sniff(head(b'[{"role": "user", "content": "hi"}]')) == 0.0
    assert codex.sniff(head(b"# aider chat started at 2025-01-01 10:00:00\n")) == 0.0
    assert codex.sniff(head(b"")) == 0.0


@pytest.mark.parametrize("name", [*FIXTURES, "invalid_utf8.jsonl"])
def test_fixtures_are_detected(name: str) -> None:
    assert registry.detect(DATA / name).name == "codex"


# -- the real samples ----------------------------------------------------------------------

REALRUN = "realruns/codex/manual-compact-tui"


def rollout(corpus: Path) -> Path:
    files = sorted((corpus / REALRUN / "codex-home" / "sessions").rglob("rollout-*.jsonl"))
    assert len(files) == 1
    return files[0]


def raw_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


@pytest.mark.corpus
def test_real_rollout_requests_usage_and_compactions(corpus: Path) -> None:
    path = rollout(corpus)
    assert registry.detect(path).name == "codex"
    data = path.read_bytes()
    events = read(data)
    assert not issues(events)
    assert_every_line_accounted(data, events)

    # Independently from the raw JSON: the per-request usages, the estimates, the compactions.
    records = raw_records(path)
    expected_usage: list[dict[str, int]] = []
    estimates: list[int] = []
    befores: list[int] = []
    last_prompt = 0
    previous = None
    for record in records:
        payload = record["payload"]
        if record["type"] == "compacted":
            befores.append(last_prompt)
        if record["type"] != "event_msg" or payload.get("type") != "token_count":
            continue
        info = payload["info"]
        if info is None or (info["total_token_usage"], info["last_token_usage"]) == previous:
            continue
        previous = (info["total_token_usage"], info["last_token_usage"])
        last = info["last_token_usage"]
        if last["input_tokens"] == 0 and last["output_tokens"] == 0:
            estimates.append(last["total_tokens"])
        else:
            expected_usage.append(last)
            last_prompt = last["input_tokens"]
    usage_records = [r for r in records if r["type"] == "token_usage_record"]

    requests = of_type(events, RequestSent)
    usages = of_type(events, UsageReported)
    assert len(requests) == len(usage_records) == len(expected_usage) == 22
    assert [u.usage.prompt_tokens for u in usages] == [u["input_tokens"] for u in expected_usage]
    assert [u.usage.cache_read for u in usages] == [
        u["cached_input_tokens"] for u in expected_usage
    ]
    assert [u.usage.output for u in usages] == [u["output_tokens"] for u in expected_usage]
    assert [u.request_id for u in usages] == [r["payload"]["response_id"] for r in usage_records]
    # each usage follows its own request: requests and usages alternate
    order = [e.type for e in events if isinstance(e, RequestSent | UsageReported)]
    assert order == ["request", "usage"] * 22

    windows = {e.context_window for e in of_type(events, SessionInfo) if e.context_window}
    assert windows == {258_400}
    compactions = of_type(events, Compacted)
    assert [(c.trigger, c.tokens_before) for c in compactions] == [
        ("manual", befores[0]),
        ("manual", befores[1]),
    ]
    assert befores == [54_697, 73_156]
    measured = of_type(events, ContextMeasured)
    assert [m.tokens for m in measured] == estimates == [7_017, 7_359]
    assert all(m.label == f"{ESTIMATE_LABEL} after compaction" for m in measured)
    assert [(c.tokens_before, c.tokens_after) for c in compactions] == [
        (54_697, 7_017),
        (73_156, 7_359),
    ]
    summaries = [m.message for m in messages(events) if m.message.kind is MessageKind.SUMMARY]
    kept = [s for s in summaries if s.visible]
    assert len(kept) == 2 and all(s.text.startswith("Another language model") for s in kept)
    # what the summarisation call wrote is not sent again (the compacted record holds it)
    written = [s for s in summaries if not s.visible]
    assert len(written) == 2 and all(s.role is Role.ASSISTANT for s in written)


@pytest.mark.corpus
def test_real_rollout_in_a_session(corpus: Path) -> None:
    path = rollout(corpus)
    loaded = load_session(path, build_profile("codex"), format_spec=codex.SPEC, count_exact=False)
    session = loaded.session
    assert not session.issues
    steps = session.steps
    assert len(steps) == 22
    assert all(s.reported is not None and s.usage is not None for s in steps)
    assert max(s.reported or 0 for s in steps) == 76_090  # 75,908 sent + 182 answered
    assert max(s.usage.prompt_tokens for s in steps if s.usage) == 75_908
    events = read(path.read_bytes())
    parser = loaded.parser
    assert parser is not None
    for message in messages(events):
        assert message.span is not None
        again = parser.messages_at(
            path.read_bytes()[message.span.offset : message.span.offset + message.span.length],
            message.span,
        )
        assert message.message in again


@pytest.mark.corpus
def test_real_rollout_head_sample(corpus: Path) -> None:
    path = corpus / "codex" / "simonw_sample_codex_session.jsonl"
    assert registry.detect(path).name == "codex"
    data = path.read_bytes()
    events = read(data)
    assert not issues(events)
    assert_every_line_accounted(data, events)
    records = raw_records(path)
    items = [r for r in records if r["type"] == "response_item"]
    assert len(messages(events)) == len(items)  # 0.77 carries no base_instructions
    assert not of_type(events, RequestSent)  # the head holds no model output
    info = of_type(events, SessionInfo)
    assert info[0].version == "0.77.0" and info[-1].model == "gpt-5.2-codex"
    added = messages(events)
    assert [m.message.kind for m in added] == [
        MessageKind.ATTACHMENT,
        MessageKind.ATTACHMENT,
        MessageKind.MESSAGE,
    ]


@pytest.mark.corpus
@pytest.mark.parametrize("name", ["codex_small.jsonl", "codex_053_rate_limit.jsonl"])
def test_synthetic_fixtures_never_crash(corpus: Path, name: str) -> None:
    path = corpus / "_synthetic-schema-fixtures" / "agent-sessions" / name
    assert registry.detect(path).name == "codex"
    data = path.read_bytes()
    events = read(data)
    assert not issues(events)
    assert_every_line_accounted(data, events)
    ids = [m.message.id for m in messages(events)]
    assert len(ids) == len(set(ids))


@pytest.mark.corpus
def test_exec_json_stdout_is_not_a_rollout(corpus: Path) -> None:
    path = corpus / REALRUN / "exec-json.stdout.1.jsonl"
    assert codex.sniff(registry.read_head(path)) == 0.0
    try:
        spec = registry.detect(path)
    except InputError:
        return
    assert spec.name != "codex"
