"""BaseAgent: the stderr log (baseagent-log) and the stdout JSONL events (baseagent-events)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TypeVar

import pytest

from ctx_inspect.agents.baseagent.reader_events import (
    CONTEXT_NOTE,
    BaseAgentEventsParser,
    sniff_events,
)
from ctx_inspect.agents.baseagent.reader_log import BaseAgentLogParser, NominalClock, sniff_log
from ctx_inspect.app.config import build_profile
from ctx_inspect.app.loader import load_session, resolve_format
from ctx_inspect.core.model import (
    Compacted,
    ContextMeasured,
    Event,
    LogLine,
    MessageAdded,
    MessageKind,
    ParseIssue,
    PartType,
    Pruned,
    RequestSent,
    Role,
    SessionInfo,
    UsageReported,
)
from ctx_inspect.formats import registry
from ctx_inspect.formats.base import Parser
from ctx_inspect.formats.registry import Head
from tests.corpus import foreign_files

DATA = Path(__file__).parents[1] / "data" / "baseagent"
REAL = ("realruns", "baseagent", "short")
E = TypeVar("E", bound=Event)


def read(
    cls: type[Parser], data: bytes, sizes: list[int] | None = None, path: str = "x"
) -> list[Event]:
    parser = cls(0, path)
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


def log(name: str) -> list[Event]:
    return read(BaseAgentLogParser, (DATA / name).read_bytes(), path=name)


def events(name: str) -> list[Event]:
    return read(BaseAgentEventsParser, (DATA / name).read_bytes(), path=name)


def of(kind: type[E], items: list[Event]) -> list[E]:
    return [e for e in items if isinstance(e, kind)]


def line_offsets(data: bytes) -> list[int]:
    offsets = [0]
    for i, byte in enumerate(data):
        if byte == 0x0A:
            offsets.append(i + 1)
    return offsets


# -- baseagent-log: the typical run ----------------------------------------------------------


def test_every_iteration_is_one_request_after_its_context_management() -> None:
    got = log("typical.log")
    requests = of(RequestSent, got)
    # each iteration's request, and before it each summarisation call its management made
    assert [r.request_id for r in requests] == [
        "iteration-1",
        "compaction-2",
        "iteration-2",
        "iteration-3",
        "compaction-4",
        "iteration-4",
        "compaction-5",
        "iteration-5",
    ]
    assert [r.compaction for r in requests] == [False, True, False, False, True, False, True, False]
    assert not of(ParseIssue, got)
    # each iteration's request comes right after its iteration's "Prompt caching" line ...
    for request in requests:
        if request.compaction:
            continue
        before = got[got.index(request) - 1]
        assert isinstance(before, LogLine) and before.text.startswith("Prompt caching:")
    # ... and after everything the context management of that iteration logged
    call = got.index(requests[1])
    build_up = got[got.index(requests[0]) + 1 : call]
    kinds = [type(e).__name__ for e in build_up]
    assert kinds == [
        "LogLine",  # Executing tool: shell_command (the answer to request 1)
        "LogLine",  # Iteration 2/200
        "ContextMeasured",
        "LogLine",  # Context overflow detected
        "Pruned",
    ]
    # the summarisation call is answered by its compaction; a LiteLLM notice printed while it
    # ran comes after the compaction, then the iteration's own request
    after_call = got[call + 1 : got.index(requests[2]) + 1]
    assert [type(e).__name__ for e in after_call] == [
        "Compacted",
        "LogLine",  # the LiteLLM notice between the compaction's lines
        "LogLine",  # Prompt caching
        "RequestSent",
    ]
    assert isinstance(after_call[1], LogLine) and after_call[1].level == "foreign"
    answer = got[got.index(requests[2]) + 1]
    assert isinstance(answer, LogLine) and answer.text.startswith("Executing")


def test_context_figures_read_back_exactly() -> None:
    measured = of(ContextMeasured, log("typical.log"))
    assert [(m.tokens, m.percent, m.limit) for m in measured] == [
        (5432, 3.2, 168000),
        (148213, 88.2, 168000),  # the reference's worked example
        (171000, 101.8, 168000),  # above 100%: the prune was for one request only
        (150000, 89.3, 168000),
        (151000, 89.9, 168000),
    ]
    assert {m.label for m in measured} == {"Context"}


def test_one_pruned_event_per_attempt() -> None:
    data = (DATA / "typical.log").read_bytes()
    prunes = of(Pruned, read(BaseAgentLogParser, data))
    assert [
        (
            p.applied,
            p.scanned_tokens,
            p.tokens_recovered,
            p.outputs_pruned,
            p.tokens_before,
            p.tokens_after,
            p.reason,
        )
        for p in prunes
    ] == [
        (False, 0, 0, None, 148213, 148213, "only 0 tokens recoverable (min: 20000)"),
        (True, 96000, 56000, 7, 171000, 115035, "sufficient"),
        (True, 64000, 24000, 3, 150000, 145000, "insufficient"),
        (True, 64000, 24000, 3, 151000, 146000, "insufficient"),
    ]
    assert all(not p.persistent and p.message_ids == () for p in prunes)
    # each event spans its lines, from the scan to the outcome
    first = prunes[0].span
    assert first is not None
    text = data[first.offset : first.offset + first.length].decode()
    assert text.startswith("[00:00:02] [compaction] Prune scan:")
    assert text.endswith("running AI compaction...")
    assert text.count("\n") == 2


def test_one_compacted_event_per_compaction() -> None:
    compactions = of(Compacted, log("typical.log"))
    assert [
        (
            c.tokens_before,
            c.tokens_after,
            c.summary_tokens,
            c.messages_before,
            c.messages_after,
            c.failed,
            c.error,
        )
        for c in compactions
    ] == [
        (148213, 9120, 1834, 63, 2, False, None),
        (150000, 145000, None, None, None, True, "empty response"),
        (151000, 11250, 2210, 71, 2, False, None),
    ]
    for c in compactions:
        assert c.trigger == "auto" and c.keep_system and c.retained_ids == ()


def test_times_get_a_nominal_date_and_cross_midnight() -> None:
    got = log("typical.log")
    stamps = [e.timestamp for e in got if not (isinstance(e, LogLine) and e.level == "foreign")]
    assert all(stamps)
    assert stamps[0] == "0001-01-01T23:59:50"
    assert "0001-01-02T00:00:02" in stamps
    assert stamps == sorted(s or "" for s in stamps)
    clock = NominalClock()
    assert clock.stamp(23, 0, 0) == "0001-01-01T23:00:00"
    assert clock.stamp(1, 0, 0) == "0001-01-02T01:00:00"
    assert clock.stamp(1, 0, 0) == "0001-01-02T01:00:00"  # the same time is no new day
    assert clock.stamp(0, 59, 59) == "0001-01-03T00:59:59"


def test_banner_lines_become_session_info() -> None:
    info = of(SessionInfo, log("typical.log"))
    merged: dict[str, object] = {}
    for event in info:
        merged.update(event.extra)
    assert any(e.model == "anthropic/claude-sonnet-4.5" for e in info)
    assert any(e.version == "3.0" and e.agent == "baseagent" for e in info)
    assert merged == {
        "banner": "SDK 3.0 - LLM Gateway",
        "provider": "openrouter",
        "client_total_tokens": 534440,
        "total_cost_usd": 1.2034,
        "requests": 8,
        "elapsed_s": 75.2,
        "context_window_source": (
            "the log's usable 168,000 (Context: ... of 168000) + BaseAgent's output reserve 32,000"
        ),
    }


def test_the_window_comes_from_the_usable_window_the_context_lines_print() -> None:
    # once: every line of the typical log measures against 168,000
    (window,) = [e for e in of(SessionInfo, log("typical.log")) if e.context_window]
    assert window.context_window == 200_000
    # a build with other constants: the window follows what its log prints, and says how
    data = (
        b"[10:00:00] [loop] Iteration 1/200\n"
        b"[10:00:00] [compaction] Context: 5000 tokens (5.0% of 100000)\n"
    )
    (other,) = [e for e in of(SessionInfo, read(BaseAgentLogParser, data)) if e.context_window]
    assert other.context_window == 132_000
    assert other.extra["context_window_source"].startswith("the log's usable 100,000")


def test_other_lines_are_log_lines_with_tag_and_level() -> None:
    lines = {e.text: e for e in of(LogLine, log("typical.log"))}
    assert lines["LLM error (attempt 1/5): server_error - 504 Gateway Timeout"].level == "error"
    assert lines["Retrying in 10 seconds..."].level == "warn"
    assert lines["Context overflow detected, managing..."].level == "warn"
    tokens = lines["Tokens: 512340 input, 401920 cached, 22100 output"]
    assert (tokens.tag, tokens.level) == ("loop", "info")
    foreign = lines["Give Feedback / Get Help: https://github.com/BerriAI/litellm/issues/new"]
    assert foreign.level == "foreign" and foreign.tag is None
    # the loop's token total is not a request's usage
    assert not of(UsageReported, log("typical.log"))


def test_without_prompt_caching_the_request_goes_before_the_answer() -> None:
    got: list[Event] = [e for e in log("nocache.log") if not isinstance(e, SessionInfo)]
    kinds = [e.request_id if isinstance(e, RequestSent) else type(e).__name__ for e in got]
    assert kinds == [
        "LogLine",
        "ContextMeasured",
        "iteration-1",
        "LogLine",  # Executing tool
        "LogLine",
        "ContextMeasured",
        "iteration-2",  # at the next iteration
        "LogLine",
        "ContextMeasured",
        "iteration-3",  # at the end of input
    ]
    assert [e.timestamp for e in of(RequestSent, got)] == [
        "0001-01-01T10:00:00",
        "0001-01-01T10:00:03",
        "0001-01-01T10:00:04",
    ]


def test_session_of_the_typical_log() -> None:
    path = DATA / "typical.log"
    spec = resolve_format(path, None)
    loaded = load_session(path, build_profile(spec.default_profile), format_spec=spec)
    assert loaded.format.name == "baseagent-log"
    session = loaded.session
    # five iterations and three summarisation calls (one of which got an empty answer)
    assert len(session.steps) == 8
    # the third iteration's request went out with a pruned copy, for that request only: the
    # context stays at the figure BaseAgent printed, the prune says what was sent
    assert session.steps[3].tokens == 171000
    assert session.steps[3].peak == 171000
    # each summarisation call shows the context it summarised; its compaction's "after" is the
    # next request's figure (a failed one leaves the context as it was)
    assert [(s.tokens, s.compactions) for s in session.steps[1:3]] == [(148213, 1), (9120, 0)]
    assert [(s.tokens, s.compactions) for s in session.steps[4:6]] == [(150000, 1), (150000, 0)]
    assert session.info["model"] == "anthropic/claude-sonnet-4.5"


# -- baseagent-log: bad input -----------------------------------------------------------------


def test_truncated_last_line() -> None:
    got = log("truncated.log")
    assert [type(e).__name__ for e in got] == [
        "LogLine",
        "SessionInfo",  # the window, from the usable window the Context line prints
        "ContextMeasured",
        "LogLine",
        "ParseIssue",
        "RequestSent",
    ]
    issue = got[4]
    assert isinstance(issue, ParseIssue) and issue.line == 4
    assert "Prune scan" in issue.reason


def test_malformed_lines_are_issues_and_the_rest_is_read() -> None:
    data = (DATA / "malformed.log").read_bytes()
    got = read(BaseAgentLogParser, data, path="malformed.log")
    offsets = line_offsets(data)
    found = of(ParseIssue, got)
    assert [(i.line, i.offset) for i in found] == [(n, offsets[n - 1]) for n in (3, 4, 6)]
    assert "impossible time 25:30:16" in found[0].reason
    assert all(i.file == "malformed.log" for i in found)
    assert [m.tokens for m in of(ContextMeasured, got)] == [5432]
    assert len(of(RequestSent, got)) == 1
    foreign = [e for e in of(LogLine, got) if e.level == "foreign"]
    assert [e.text for e in foreign] == ["Traceback (most recent call last):"]


# -- baseagent-events ---------------------------------------------------------------------------


def test_events_messages_and_requests() -> None:
    got = events("events.jsonl")
    assert not of(ParseIssue, got)
    sequence = [
        f"{e.message.role.value}:{e.message.id}"
        if isinstance(e, MessageAdded)
        else type(e).__name__
        for e in got
        if not isinstance(e, LogLine | SessionInfo)
    ]
    assert sequence == [
        "RequestSent",
        "assistant:item_1",
        "assistant:item_2",  # the same response as its text
        "tool:item_2:result",
        # a tool call after a tool result: another call of the same response, or a response
        # without text; the stream cannot tell, and takes the first (the fewer requests)
        "assistant:item_3",
        "tool:item_3:result",
        "RequestSent",
        "assistant:item_4",
        "RequestSent",
        "assistant:item_5",
    ]
    # and it says that it shows neither BaseAgent's context management nor its figures
    (started,) = [e for e in of(SessionInfo, got) if e.session_id]
    assert started.extra["context_note"] == CONTEXT_NOTE


def test_tool_calls_and_results() -> None:
    added = {e.message.id: e.message for e in of(MessageAdded, events("events.jsonl"))}
    call = added["item_3"]
    assert call.kind is MessageKind.TOOL_CALL and call.role is Role.ASSISTANT
    part = call.parts[0]
    assert part.type is PartType.TOOL_CALL
    assert (part.tool_name, part.call_id, part.arguments) == (
        "read_file",
        "item_3",
        "{'file_path': 'missing.py'}",
    )
    result = added["item_3:result"]
    assert result.kind is MessageKind.TOOL_RESULT and result.role is Role.TOOL
    assert result.parts[0].is_error and result.parts[0].text == "Error: missing.py not found"
    assert result.parts[0].call_id == "item_3" and result.tool_name == "read_file"
    ok = added["item_2:result"]
    assert not ok.parts[0].is_error and ok.text.startswith("total 8\n")
    assert added["item_4"].text == "Créé: le correctif est écrit. 🚀"


def test_events_session_info_foreign_lines_and_turn_usage() -> None:
    got = events("events.jsonl")
    info = of(SessionInfo, got)
    assert info[0].session_id == "sess_1737150615123" and info[0].agent == "baseagent"
    assert info[-1].extra == {
        "turn_usage": {
            "input_tokens": 512340,
            "cached_input_tokens": 401920,
            "output_tokens": 22100,
        }
    }
    assert not of(UsageReported, got)  # a turn total is not a request's size
    foreign = [e.text for e in of(LogLine, got) if e.level == "foreign"]
    assert foreign == [
        "Give Feedback / Get Help: https://github.com/BerriAI/litellm/issues/new",
        "LiteLLM.Info: If you need to debug this error, use `litellm._turn_on_debug()'.",
        "Provider List: https://docs.litellm.ai/docs/providers",
    ]


def test_events_malformed() -> None:
    data = (DATA / "events_malformed.jsonl").read_bytes()
    got = read(BaseAgentEventsParser, data, path="bad.jsonl")
    offsets = line_offsets(data)
    found = of(ParseIssue, got)
    assert [(i.line, i.offset) for i in found] == [(n, offsets[n - 1]) for n in (2, 4, 5)]
    assert "not valid JSON" in found[0].reason
    assert found[1].reason == "no event type"
    assert "without an item object" in found[2].reason
    logs = of(LogLine, got)
    assert [(e.text, e.level) for e in logs] == [
        ("[1, 2, 3]", "foreign"),
        ("item.teleported", None),  # an event type this reader does not know
        ("turn.failed: Cost limit exceeded: $5.00", "error"),
    ]
    assert [e.message.id for e in of(MessageAdded, got)] == ["item_3"]


def test_events_truncated_last_line() -> None:
    got = events("events_truncated.jsonl")
    assert [type(e).__name__ for e in got] == [
        "SessionInfo",
        "LogLine",
        "RequestSent",
        "MessageAdded",
        "MessageAdded",
        "ParseIssue",
    ]
    last = got[-1]
    assert isinstance(last, ParseIssue) and last.line == 5


# -- detection -----------------------------------------------------------------------------------


def head(data: bytes, name: str = "x.log") -> Head:
    return Head(path=Path(name), data=data)


def test_sniffers() -> None:
    log_data = (DATA / "typical.log").read_bytes()
    events_data = (DATA / "events.jsonl").read_bytes()
    assert sniff_log(head(log_data)) == 0.95
    assert sniff_events(head(log_data)) == 0.0
    assert sniff_events(head(events_data)) == 0.95
    assert sniff_log(head(events_data)) == 0.0
    assert sniff_events(head(b'{"type": "turn.started"}\n')) == 0.85
    # Codex's exec --json has the same event names, written compactly with the type first
    codex = b'{"type":"thread.started","thread_id":"0199"}\n{"type":"turn.started"}\n'
    assert sniff_events(head(codex)) == 0.0
    assert sniff_log(head(b"[10:00:00] [other] a\n[10:00:01] [other] b\n")) == 0.0
    assert sniff_log(head(b"")) == 0.0


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("typical.log", "baseagent-log"),
        ("malformed.log", "baseagent-log"),
        ("nocache.log", "baseagent-log"),
        ("truncated.log", "baseagent-log"),
        ("events.jsonl", "baseagent-events"),
        ("events_truncated.jsonl", "baseagent-events"),
    ],
)
def test_fixtures_are_detected(name: str, expected: str) -> None:
    spec = registry.detect(DATA / name)
    assert spec.name == expected
    assert spec.default_profile == "baseagent"


# -- the real run ----------------------------------------------------------------------------------


def test_real_stderr(corpus: Path) -> None:
    path = corpus.joinpath(*REAL, "run.stderr.log")
    assert registry.detect(path).name == "baseagent-log"
    data = path.read_bytes()
    got = read(BaseAgentLogParser, data, path=str(path))
    assert not of(ParseIssue, got)
    text = data.decode()
    printed = re.findall(r"\[compaction\] Context: (\d+) tokens \(([\d.]+)% of (\d+)\)", text)
    iterations = re.findall(r"\[loop\] Iteration (\d+)/\d+", text)
    measured = of(ContextMeasured, got)
    assert [(str(m.tokens), f"{m.percent:.1f}", str(m.limit)) for m in measured] == printed
    assert (measured[0].percent, measured[-1].percent) == (3.2, 4.1)
    assert [r.request_id for r in of(RequestSent, got)] == [f"iteration-{i}" for i in iterations]
    assert len(iterations) == 8
    model = re.search(r"\[superagent\] Model: (\S+)", text)
    assert model and any(e.model == model.group(1) for e in of(SessionInfo, got))
    # every line is in an event
    lines = [n for n, ln in enumerate(data.split(b"\n"), 1) if ln.strip()]
    assert sorted({e.span.line for e in got if e.span}) == lines


def test_real_stderr_final_context_is_the_last_printed_figure(corpus: Path) -> None:
    """A log of figures alone ends at its last request: the lines after it (the loop's closing
    lines) are no step of their own, so the final context is the last "Context:" figure."""
    from ctx_inspect.app.config import build_profile
    from ctx_inspect.app.loader import open_inputs

    path = corpus.joinpath(*REAL, "run.stderr.log")
    printed = re.findall(r"\[compaction\] Context: (\d+) tokens", path.read_text())
    loaded = open_inputs([path], lambda spec: build_profile(None, default=spec.default_profile))
    steps = loaded[0].session.all_steps()
    assert [s.tokens for s in steps] == [int(n) for n in printed]
    assert steps[-1].tokens == int(printed[-1]) == 6846


def test_real_stdout(corpus: Path) -> None:
    path = corpus.joinpath(*REAL, "run.stdout.jsonl")
    assert registry.detect(path).name == "baseagent-events"
    data = path.read_bytes()
    got = read(BaseAgentEventsParser, data, path=str(path))
    assert not of(ParseIssue, got)
    lines = [n for n, ln in enumerate(data.split(b"\n"), 1) if ln.strip()]
    assert sorted({e.span.line for e in got if e.span}) == lines
    records = [json.loads(ln) for ln in data.splitlines() if ln.startswith(b"{")]
    items = [r["item"] for r in records if r["type"].startswith("item.")]
    texts = [i for i in items if i["type"] == "agent_message"]
    calls = [i for i in items if i["type"] == "command_execution" and i["status"] == "in_progress"]
    results = [i for i in items if i["type"] == "command_execution" and "exit_code" in i]
    added = of(MessageAdded, got)
    assert [m.message.text for m in added if m.message.kind is MessageKind.MESSAGE] == [
        t["text"] for t in texts
    ]
    assert [m.message.tool_name for m in added if m.message.kind is MessageKind.TOOL_CALL] == [
        c["command"].split("(", 1)[0] for c in calls
    ]
    assert [m.message.text for m in added if m.message.kind is MessageKind.TOOL_RESULT] == [
        r["aggregated_output"] for r in results
    ]
    # the stderr of the same run printed 8 iterations; this stream alone cannot tell a response
    # without text from another call of the response before it: it counts at least 6
    assert len(of(RequestSent, got)) == 6
    thread = next(r for r in records if r["type"] == "thread.started")
    usage = next(r for r in records if r["type"] == "turn.completed")["usage"]
    info = of(SessionInfo, got)
    assert info[0].session_id == thread["thread_id"]
    assert info[0].extra == {"context_note": CONTEXT_NOTE}
    assert info[-1].extra == {"turn_usage": usage}


def test_sniffers_score_zero_on_every_other_file(corpus: Path) -> None:
    others = foreign_files(corpus, "baseagent", DATA)
    assert len(others) > 20
    for path in others:
        h = registry.read_head(path)
        assert sniff_log(h) == 0.0, path
        assert sniff_events(h) == 0.0, path
