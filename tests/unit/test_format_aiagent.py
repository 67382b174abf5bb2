"""netdata ai-agent: CONTEXT_DEBUG stdout (aiagent-debug), logfmt stderr (aiagent-log), console."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TypeVar

import pytest

from ctx_inspect.agents.aiagent import reader_console, reader_debug, reader_log
from ctx_inspect.agents.aiagent.reader_console import AiAgentConsoleParser
from ctx_inspect.agents.aiagent.reader_debug import AiAgentDebugParser
from ctx_inspect.agents.aiagent.reader_log import AiAgentLogParser, parse_logfmt
from ctx_inspect.app.config import build_profile
from ctx_inspect.app.loader import merge_streams, open_inputs
from ctx_inspect.core.model import (
    ContextMeasured,
    DebugTopic,
    Event,
    FinalTurnForced,
    GuardEvaluated,
    GuardStatus,
    LogLine,
    ParseIssue,
    RequestSent,
    SessionInfo,
    ToolOutputAction,
    ToolOutputChanged,
    Usage,
    UsageReported,
)
from ctx_inspect.formats import registry
from ctx_inspect.formats.base import Parser
from ctx_inspect.formats.registry import Head
from tests.corpus import foreign_files
from tests.formats import uncovered_lines

DATA = Path(__file__).parents[1] / "data" / "aiagent"
REAL = ("realruns", "ai-agent", "short")
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


def debug(name: str) -> list[Event]:
    return read(AiAgentDebugParser, (DATA / name).read_bytes(), path=name)


def stderr(name: str) -> list[Event]:
    return read(AiAgentLogParser, (DATA / name).read_bytes(), path=name)


def of(kind: type[E], items: list[Event]) -> list[E]:
    return [e for e in items if isinstance(e, kind)]


def line_offsets(data: bytes) -> list[int]:
    return [0] + [i + 1 for i, byte in enumerate(data) if byte == 0x0A]


def info_extra(items: list[Event]) -> dict[str, object]:
    merged: dict[str, object] = {}
    for event in of(SessionInfo, items):
        merged.update(event.extra)
    return merged


# -- aiagent-debug ------------------------------------------------------------------------------


def test_every_block_is_a_debug_topic_with_its_span() -> None:
    data = (DATA / "debug.log").read_bytes()
    got = read(AiAgentDebugParser, data)
    assert not of(ParseIssue, got)
    labels = re.findall(rb"^(context-guard/[\w-]+|final-report-accounting) [{]", data, re.M)
    topics = of(DebugTopic, got)
    # the topic as the agent prints it, so `topic:context-guard/evaluate` finds it
    expected = [lab.decode() for lab in labels]
    assert [t.name for t in topics] == expected
    assert len(topics) == 25
    for topic in topics:
        assert topic.span is not None
        raw = data[topic.span.offset : topic.span.offset + topic.span.length].decode()
        assert raw.split(" ", 1)[0] == topic.name
        assert raw.rstrip().endswith("}")
    entry = next(t for t in topics if t.name == "context-guard/log-entry")
    assert entry.payload["details"] == {
        "projected_tokens": 151350,
        "limit_tokens": 141808,
        "remaining_tokens": 0,
    }
    accounting = topics[-1]
    assert accounting.payload["parentTxnId"] is None
    assert accounting.payload["note"] == "it's done"


def test_evaluate_groups_become_guard_evaluations() -> None:
    guards = of(GuardEvaluated, debug("debug.log"))
    assert [(g.status, g.trigger) for g in guards] == [
        (GuardStatus.OK, "turn_preflight"),
        (None, "tool_preflight"),  # the tool-output reservation (extraTokens > 0)
        (GuardStatus.SKIP, "turn_preflight"),  # this provider blocked, the other not
        (GuardStatus.FINAL, "turn_preflight"),  # every target blocked
    ]
    counters = [
        (g.current, g.pending, g.new, g.schema_tokens, g.extra, g.projected) for g in guards
    ]
    assert counters == [
        (0, 3121, 0, 9406, 0, 3121),
        (131000, 0, 2100, 9406, 18250, 151350),
        (133100, 0, 0, 9406, 0, 133100),  # read through the ANSI colours
        (150000, 0, 0, 9406, 0, 150000),
    ]
    assert [[t.blocked for t in g.targets] for g in guards] == [
        [False, False],
        [True, True],
        [False, True],
        [True, True],
    ]
    target = guards[0].targets[0]
    assert (target.provider, target.model, target.context_window) == (
        "anthropic",
        "claude-sonnet-4-5",
        200000,
    )
    assert (target.buffer_tokens, target.max_output_tokens, target.limit) == (8192, 50000, 141808)
    assert all(g.projection == g.projected for g in guards)


def test_build_metrics_are_requests_and_enforce_a_forced_final_turn() -> None:
    got = debug("debug.log")
    measured = of(ContextMeasured, got)
    assert [(m.tokens, m.limit, m.label) for m in measured] == [
        (3121, 200000, "build-metrics"),
        (150000, 200000, "build-metrics"),
    ]
    requests = of(RequestSent, got)
    assert [(r.model, r.final_turn) for r in requests] == [
        ("claude-sonnet-4-5", False),
        ("claude-sonnet-4-5", True),  # the first request after an enforce
    ]
    for request in requests:  # the measure comes just before its request
        assert isinstance(got[got.index(request) - 1], ContextMeasured)
    forced = of(FinalTurnForced, got)
    assert len(forced) == 1  # the second enforce before the request adds nothing
    assert forced[0].model_dump(exclude={"span", "type", "thread"}, exclude_none=True) == {
        "reason": "context",
        "projected_tokens": 151350,
        "limit_tokens": 141808,
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
    }


def test_debug_session_info_and_text() -> None:
    got = debug("debug.log")
    assert info_extra(got) == {
        "tool_schema_tokens": 9406,
        "tool_count": 12,
        "provider": "anthropic",
    }
    models = [(e.model, e.context_window) for e in of(SessionInfo, got) if e.model]
    assert models == [("claude-sonnet-4-5", 200000)]
    assert [e.text for e in of(LogLine, got)] == [
        "Reading the repository {first pass}",
        "## Review",
        "- The change is safe. {no issues}",
        "- See [notes] below.",  # the last line has no newline
    ]


def test_debug_malformed_blocks() -> None:
    data = (DATA / "debug_malformed.log").read_bytes()
    got = read(AiAgentDebugParser, data, path="bad.log")
    offsets = line_offsets(data)
    found = of(ParseIssue, got)
    assert [(i.line, i.offset) for i in found] == [(n, offsets[n - 1]) for n in (1, 6, 10)]
    assert "unterminated string" in found[0].reason
    assert "not closed before the next topic" in found[1].reason
    assert "input ended inside the block" in found[2].reason
    assert [t.name for t in of(DebugTopic, got)] == [
        "context-guard/schema-estimate",
        "context-guard/build-metrics",
    ]
    assert [m.tokens for m in of(ContextMeasured, got)] == [10]
    assert len(of(RequestSent, got)) == 1
    assert [e.text for e in of(LogLine, got)] == ["plain text line"]


def test_one_line_and_multi_line_blocks_read_the_same() -> None:
    one = b"context-guard/schema-estimate { toolCount: 6, estimated: 2093 }\n"
    multi = b"context-guard/schema-estimate {\n  toolCount: 6,\n  estimated: 2093\n}\n"
    a = of(DebugTopic, read(AiAgentDebugParser, one))
    b = of(DebugTopic, read(AiAgentDebugParser, multi))
    assert a[0].payload == b[0].payload == {"toolCount": 6, "estimated": 2093}


def test_other_labels_that_are_not_objects_stay_text() -> None:
    data = b"re-run {x}\nnext-step {\nnot an object at all\n}\n"
    got = read(AiAgentDebugParser, data)
    assert not of(DebugTopic, got) and not of(ParseIssue, got)
    assert [e.text for e in of(LogLine, got)] == [
        "re-run {x}",
        "next-step {",
        "not an object at all",
        "}",
    ]


# -- aiagent-log ---------------------------------------------------------------------------------


def test_logfmt_run_maps_every_message() -> None:
    got = stderr("log.log")
    assert not of(ParseIssue, got)
    measured = of(ContextMeasured, got)
    assert [(m.tokens, m.limit, m.label) for m in measured] == [
        (130114, 200000, "LLM request prepared"),
        (151350, 200000, "LLM request prepared"),
    ]
    requests = of(RequestSent, got)
    assert [(r.model, r.final_turn, r.timestamp) for r in requests] == [
        ("claude-sonnet-4-5", False, "2026-01-17T11:27:00.101Z"),
        ("claude-sonnet-4-5", True, "2026-01-17T11:27:32.050Z"),
    ]
    usages = [u.usage for u in of(UsageReported, got)]
    assert usages == [
        Usage(input=6481, cache_read=120000, cache_write=1523, output=456),
        Usage(input=22890, cache_read=128460, cache_write=0, output=700),
    ]
    assert usages[0].prompt_tokens + usages[0].output == 128460  # the record's ctx_tokens
    dropped = of(ToolOutputChanged, got)
    assert [
        d.model_dump(exclude={"span", "type", "timestamp", "thread"}, exclude_none=True)
        for d in dropped
    ] == [
        {
            "action": ToolOutputAction.DROPPED,
            "tool": "fs__read",
            "tokens": 18250,
            "original_bytes": 72911,
            "final_bytes": 45,
            "projected_tokens": 151350,
            "limit_tokens": 141808,
            "replacement": "(tool failed: context window budget exceeded)",
        }
    ]
    forced = of(FinalTurnForced, got)
    assert [
        (f.reason, f.projected_tokens, f.limit_tokens, f.provider, f.model, f.turn) for f in forced
    ] == [("context", 151350, 141808, "anthropic", "claude-sonnet-4-5", 7)]
    # the "Final turn detected (reason=context)" that follows is the same forced final turn
    final_line = [e for e in of(LogLine, got) if e.text.startswith("Final turn detected")]
    assert len(final_line) == 1 and final_line[0].level == "wrn"


def test_logfmt_session_info_exit_and_summary() -> None:
    got = stderr("log.log")
    info = of(SessionInfo, got)
    assert info[0].session_id == "9f1c2d3e-0000-4000-8000-000000000001"
    assert info[0].agent == "ai-agent" and info[0].extra == {"agent_id": "reviewer"}
    assert any(i.model == "claude-sonnet-4-5" and i.context_window == 200000 for i in info)
    extra = info_extra(got)
    assert extra["outcome"] == "EXIT-FINAL-ANSWER"  # the record, not the process exit line
    assert extra["exit"] == "EXIT-SUCCESS"
    assert extra["llm_summary"] == {
        "agent": "reviewer",
        "requests": 2,
        "failed": 0,
        "tokens_prompt": 29371,
        "tokens_output": 1156,
        "tokens_cache_read": 248460,
        "tokens_cache_write": 1523,
    }


def test_logfmt_record_in_the_middle_of_a_line_and_bulky_messages() -> None:
    data = (DATA / "log.log").read_bytes()
    got = read(AiAgentLogParser, data)
    lines = data.split(b"\n")
    number = next(i for i, ln in enumerate(lines, 1) if ln.startswith(b"The change is safe"))
    on_line = [e for e in got if e.span is not None and e.span.line == number]
    text, info, _exit_log = on_line
    assert (
        isinstance(text, LogLine) and text.text == 'The change is safe: no "ts=" keys were harmed.'
    )
    assert isinstance(info, SessionInfo) and info.extra == {"outcome": "EXIT-FINAL-ANSWER"}
    assert text.span is not None and info.span is not None
    assert data[info.span.offset : info.span.offset + 8] == b"\x1b[90mts="
    assert text.span.offset + text.span.length == info.span.offset
    settings = next(e for e in of(LogLine, got) if e.tag == "agent:settings")
    assert len(settings.text) < 400 and settings.text.endswith("characters)")
    probes = [e for e in of(LogLine, got) if e.tag == "agent:config"]
    assert len(probes) == 2 and probes[0].level == "vrb"


def test_logfmt_guard_spill_subagent_and_one_final_turn_per_turn() -> None:
    got = stderr("log_guard.log")
    assert not of(ParseIssue, got)
    changes = of(ToolOutputChanged, got)
    assert [(c.action, c.tool, c.tokens, c.original_bytes) for c in changes] == [
        (ToolOutputAction.SPILLED, "fs__Read", 30123, 120500),
        (ToolOutputAction.DROPPED, "fs__Grep", 40200, 160800),
    ]
    assert changes[1].limit_tokens == 87808 and changes[1].replacement
    # stored for its size: no budget figure; refused: the record's own figures
    assert changes[0].projected_tokens is None and changes[1].projected_tokens == 100800
    guard = of(GuardEvaluated, got)
    # each request's evaluation (the prepared line's counters), and the skip
    assert [(g.status, g.projected) for g in guard] == [
        (GuardStatus.OK, 20500),
        (GuardStatus.SKIP, 95000),
        (None, 96000),  # after the final turn was decided: it decides nothing more
    ]
    assert (guard[0].current, guard[0].pending, guard[0].new) == (20000, 500, 0)
    target = guard[1].targets[0]
    assert (target.provider, target.model, target.limit, target.projected, target.blocked) == (
        "openai",
        "gpt-4o",
        87808,
        95000,
        True,
    )
    assert target.context_window == 128000  # the window its last request printed
    requests = of(RequestSent, got)
    assert [(r.thread, r.final_turn) for r in requests] == [
        ("main", False),
        ("reviewer:helper", False),  # a sub-agent's request is on its own thread
        ("main", True),
    ]
    assert [u.thread for u in of(UsageReported, got)] == ["reviewer:helper"]
    # the sub-agent's own context figure stays text: it must not count on the main timeline
    assert [m.tokens for m in of(ContextMeasured, got)] == [20500, 96000]
    forced = of(FinalTurnForced, got)
    # the final turn detected for the turn limit, with the context's figures of the notice
    # that follows it; a notice after the last request starts a final turn of its own
    assert [
        (f.reason, f.turn, f.max_turns, f.projected_tokens, f.limit_tokens) for f in forced
    ] == [
        ("max_turns", 4, 4, 96000, 87808),
        ("context_limit_exceeded", 5, None, 99000, 87808),
    ]
    assert [e.text for e in of(LogLine, got)] == [
        "LLM request prepared [ctx 0, new 900, expected 900 + output 32000 = 32% of 128000]",
        "Final turn detected (turn=4/4, reason=max_turns); removing all tools to force "
        "final-report.",
    ]


def test_logfmt_malformed_records() -> None:
    data = (DATA / "log_malformed.log").read_bytes()
    got = read(AiAgentLogParser, data, path="bad.log")
    offsets = line_offsets(data)
    found = of(ParseIssue, got)
    assert [(i.line, i.offset) for i in found] == [(n, offsets[n - 1]) for n in (2, 3, 4)]
    assert "unterminated quoted value" in found[0].reason
    assert found[1].reason == "logfmt record without a level"
    assert "expected key=value" in found[2].reason
    assert [e.text for e in of(LogLine, got)] == [
        "ok before",
        "some stray text on stderr",
        "ok after",
    ]


def test_parse_logfmt() -> None:
    assert parse_logfmt('a=1 b="two words" c="say \\"hi\\"" d=""') == {
        "a": "1",
        "b": "two words",
        "c": 'say "hi"',
        "d": "",
    }
    # a quoted value can hold " key=" text; it ends at a quote followed by a key or the end
    assert parse_logfmt('m="x \\"ts=\\" y" n=2') == {"m": 'x "ts=" y', "n": "2"}
    assert parse_logfmt("a=1 a=2") == {"a": "1"}
    with pytest.raises(ValueError):
        parse_logfmt('a="open')
    with pytest.raises(ValueError):
        parse_logfmt("=1")


# -- aiagent-console ------------------------------------------------------------------------------


def test_console_maps_the_same_messages() -> None:
    data = (DATA / "console.log").read_bytes()
    got = read(AiAgentConsoleParser, data, path="console.log")
    assert of(SessionInfo, got)[0].session_id == "9f1c2d3e-0000-4000-8000-000000000001"
    assert [(m.tokens, m.limit) for m in of(ContextMeasured, got)] == [
        (130114, 200000),
        (151350, 200000),
    ]
    assert [(r.model, r.final_turn) for r in of(RequestSent, got)] == [
        ("claude-sonnet-4-5", False),
        ("claude-sonnet-4-5", True),
    ]
    assert [u.usage for u in of(UsageReported, got)] == [
        Usage(input=6481, cache_read=120000, cache_write=1523, output=456),
        Usage(input=22890, cache_read=128460, cache_write=0, output=700),
    ]
    dropped = of(ToolOutputChanged, got)
    assert [(d.tool, d.tokens, d.limit_tokens) for d in dropped] == [("fs__read", 18250, 141808)]
    forced = of(FinalTurnForced, got)
    assert [(f.reason, f.turn, f.projected_tokens) for f in forced] == [("context", 7, 151350)]
    assert info_extra(got)["outcome"] == "EXIT-FINAL-ANSWER"
    found = of(ParseIssue, got)
    offsets = line_offsets(data)
    assert [(i.line, i.offset) for i in found] == [(13, offsets[12])]
    stack = [e.text for e in of(LogLine, got) if e.text.startswith("    ")]
    assert len(stack) == 2  # an error's stack lines stay as text
    error = next(e for e in of(LogLine, got) if e.level == "err")
    assert error.text == "agent:error Uncaught exception: boom"


# -- detection -------------------------------------------------------------------------------------


def head(data: bytes) -> Head:
    return Head(path=Path("x.log"), data=data)


def test_sniffers_score_only_their_own_layout() -> None:
    files = {n: (DATA / n).read_bytes() for n in ("debug.log", "log.log", "console.log")}
    sniffers = {
        "debug.log": reader_debug.sniff_debug,
        "log.log": reader_log.sniff_log,
        "console.log": reader_console.sniff_console,
    }
    for name, data in files.items():
        for owner, sniff in sniffers.items():
            score = sniff(head(data))
            assert (score >= 0.5) == (owner == name), (name, owner, score)
    probes = b"[VRB] \xe2\x86\x92 [0.0] llm agent:config: probing cwd: json=a (found)\n"
    assert reader_log.sniff_log(head(probes)) == 0.8
    assert reader_log.sniff_log(head(b"[10:00:00] [loop] Iteration 1/200\n")) == 0.0


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("debug.log", "aiagent-debug"),
        ("debug_malformed.log", "aiagent-debug"),
        ("log.log", "aiagent-log"),
        ("log_guard.log", "aiagent-log"),
        ("log_malformed.log", "aiagent-log"),
        ("console.log", "aiagent-console"),
    ],
)
def test_fixtures_are_detected(name: str, expected: str) -> None:
    spec = registry.detect(DATA / name)
    assert spec.name == expected
    assert spec.default_profile == "aiagent"
    assert spec.make_parser().format_name == expected


# -- guard decisions on stderr: the figures at each decision ---------------------------------


def record(message: str, level: str = "wrn", turn: int = 4, **details: str | int) -> str:
    """One stderr record as ai-agent's logfmt sink writes it (colour codes included)."""
    colour = {"vrb": "\x1b[90m", "wrn": "\x1b[33m"}[level]
    fields = " ".join(f"{k}={v}" for k, v in details.items())
    head = (
        f"ts=2026-02-02T10:00:{turn:02d}.000Z level={level} priority=4 type=llm "
        f"direction=response turn={turn} subturn=0 remote=agent:context agent=a agent_path=a"
    )
    message = message.replace('"', '\\"')
    return f'{colour}{head} {fields} message="{message}"\x1b[0m'


PREPARED = record(
    "LLM request prepared [ctx 30000, new 2000, expected 32000 + output 8000 = 96% of 50000]",
    "vrb",
    3,
    provider="p",
    model="m",
    ctx_tokens=30000,
    new_tokens=2000,
    schema_tokens=1500,
    expected_tokens=32000,
    context_window=50000,
)
ANSWER = record(
    "LLM response received",
    "vrb",
    3,
    provider="p",
    model="m",
    input_tokens=33000,
    cache_read_tokens=0,
    output_tokens=400,
    ctx_tokens=33400,
)
OUTPUT = record(
    "ok preview: x", "vrb", 3, event="tool_response_preview", tokens_estimated=6000, dropped="false"
)
DETECTED = record(
    "Final turn detected (turn=4/10, reason=context); removing all tools to force final-report."
)
BUDGET = record(
    "Context budget exceeded (p:m - projected 39400 tokens vs limit 33808). Forcing final turn.",
    trigger="turn_preflight",
)


def log_of(*records: str) -> list[Event]:
    return read(AiAgentLogParser, "\n".join(records).encode() + b"\n")


@pytest.mark.parametrize("order", ["detected first", "budget first", "detected at the end"])
def test_a_forced_final_turn_has_its_figures_whichever_record_comes_first(order: str) -> None:
    notices = {
        "detected first": [DETECTED, BUDGET],
        "budget first": [BUDGET, DETECTED],
        "detected at the end": [DETECTED],
    }[order]
    got = log_of(PREPARED, OUTPUT, ANSWER, *notices)
    (forced,) = of(FinalTurnForced, got)
    if order == "detected at the end":  # flushed at the end of the input, with what it has
        assert (forced.reason, forced.turn, forced.max_turns) == ("context", 4, 10)
        assert forced.projected_tokens is None
        return
    assert (forced.projected_tokens, forced.limit_tokens, forced.provider, forced.model) == (
        39400,
        33808,
        "p",
        "m",
    )
    assert forced.turn == 4
    assert forced.max_turns == (10 if order == "detected first" else None)
    # the evaluation that forced it, just before it: 33,400 answered + 6,000 of output
    decision = got[got.index(forced) - 1]
    assert isinstance(decision, GuardEvaluated)
    assert (decision.current, decision.pending, decision.new, decision.projected) == (
        33400,
        0,
        6000,
        39400,
    )
    assert (decision.status, decision.trigger, decision.schema_tokens) == (
        GuardStatus.FINAL,
        "turn_preflight",
        1500,
    )
    # the limit the agent logged, the output reserve its request printed
    (target,) = decision.targets
    assert (target.context_window, target.max_output_tokens, target.limit) == (50000, 8000, 33808)
    assert target.buffer_tokens == 8192
    # the other notice is a line of the same final turn
    texts = [e.text for e in of(LogLine, got)]
    assert any(t.startswith("Final turn detected") for t in texts)
    assert uncovered_lines("\n".join([PREPARED, OUTPUT, ANSWER, *notices]).encode(), got) == []


def test_the_buffer_is_the_one_the_printed_percentage_gives() -> None:
    # (32,000 + 8,192 + 8,000) / 50,000 = 96%: the default buffer
    (guard,) = of(GuardEvaluated, log_of(PREPARED))
    (target,) = guard.targets
    assert (target.buffer_tokens, target.limit) == (8192, 33808)
    assert (guard.current, guard.pending, guard.projected, guard.status) == (
        30000,
        2000,
        32000,
        GuardStatus.OK,
    )
    # 90% is no default: the buffer that gives it (another buffer was configured)
    other = PREPARED.replace("= 96% of", "= 90% of")
    (guard,) = of(GuardEvaluated, log_of(other))
    assert (guard.targets[0].buffer_tokens, guard.targets[0].limit) == (5000, 37000)
    # once the agent logs its limit, that limit stands
    got = log_of(other, OUTPUT, ANSWER, BUDGET, other.replace("turn=3", "turn=4"))
    assert [g.targets[0].limit for g in of(GuardEvaluated, got)] == [37000, 33808, 33808]


def test_the_profile_takes_the_latest_target_the_log_gave(tmp_path: Path) -> None:
    other = PREPARED.replace("= 96% of", "= 90% of")
    path = tmp_path / "run.stderr.log"
    path.write_text("\n".join([other, OUTPUT, ANSWER, BUDGET, other.replace("turn=3", "turn=4")]))
    (loaded,) = open_inputs([path], lambda spec: build_profile(None, default=spec.default_profile))
    # the limit the agent logged (33,808) over the buffer the first percentage suggested
    assert loaded.profile.threshold() == 33808
    assert loaded.profile.settings()["max_output"] == 8000


def test_the_request_keeps_the_agents_figure_and_the_usage_beside_it() -> None:
    got = log_of(PREPARED, ANSWER)
    (usage,) = of(UsageReported, got)
    assert usage.usage.prompt_tokens == 33000
    assert (usage.context_tokens, usage.context_label) == (32000, "LLM request prepared")


# -- the card's guard-drop run: toolOutput disabled, outputs dropped after execution ----------


def test_drop_fixture_stderr() -> None:
    data = (DATA / "drop.stderr.log").read_bytes()
    got = read(AiAgentLogParser, data)
    assert not of(ParseIssue, got)
    assert uncovered_lines(data, got) == []
    forced = of(FinalTurnForced, got)
    assert [
        (f.reason, f.turn, f.max_turns, f.projected_tokens, f.limit_tokens) for f in forced
    ] == [("context", 2, 15, 13740, 11712)]
    drops = of(ToolOutputChanged, got)
    assert [(d.action, d.tool, d.tokens, d.projected_tokens, d.limit_tokens) for d in drops] == [
        (ToolOutputAction.DROPPED, "fs__Read", 2600, 13740, 11712),
        # enforcing zeroed the outputs counted: 8,340 + the first one's stub (19) + 3,500
        (ToolOutputAction.DROPPED, "fs__Read", 3500, 11859, 11712),
    ]
    assert all(d.original_bytes and d.final_bytes == 45 and d.replacement for d in drops)
    assert got.index(forced[0]) < got.index(drops[0])  # the refusal forced it, then the drop
    guards = of(GuardEvaluated, got)
    decision, refusal = (g for g in guards if g.trigger == "tool_preflight")
    assert (decision.current, decision.new, decision.extra, decision.status) == (
        8340,
        2800,
        2600,
        None,
    )
    assert (refusal.current, refusal.new, refusal.extra) == (8340, 19, 3500)
    # the final turn: the two stubs' tokens pending
    last = guards[-1]
    assert (last.current, last.pending, last.projected, last.schema_tokens) == (9575, 38, 9613, 469)
    assert [m.tokens for m in of(ContextMeasured, got)] == [1500, 8340, 9613]
    assert [r.final_turn for r in of(RequestSent, got)] == [False, False, True]
    assert info_extra(got)["outcome"] == "EXIT-TOKEN-LIMIT"


def test_drop_fixture_stdout() -> None:
    data = (DATA / "drop.stdout.log").read_bytes()
    got = read(AiAgentDebugParser, data)
    assert not of(ParseIssue, got)
    assert uncovered_lines(data, got) == []
    (forced,) = of(FinalTurnForced, got)
    assert (forced.projected_tokens, forced.limit_tokens) == (13740, 11712)
    # the refused reservation is the output the tools drop (the later refusal is not told
    # apart from a preview here: the log names it)
    (drop,) = of(ToolOutputChanged, got)
    assert (drop.action, drop.tokens, drop.projected_tokens, drop.limit_tokens) == (
        ToolOutputAction.DROPPED,
        2600,
        13740,
        11712,
    )
    assert got.index(forced) < got.index(drop)


def test_drop_fixture_merged() -> None:
    loaded = merge_streams(
        [DATA / "drop.stdout.log", DATA / "drop.stderr.log"],
        lambda spec: build_profile(spec.default_profile),
        count_exact=False,
    )
    events = list(loaded.session.events())
    assert not loaded.session.issues
    assert len(of(RequestSent, events)) == 3
    (forced,) = of(FinalTurnForced, events)
    assert (forced.turn, forced.projected_tokens, forced.timestamp) == (
        2,
        13740,
        "2026-05-04T10:00:00.592Z",
    )
    drops = of(ToolOutputChanged, events)
    # the log's drops, at the debug stream's evaluations that refused them, with their figures
    assert [(d.tool, d.tokens, d.projected_tokens) for d in drops] == [
        ("fs__Read", 2600, 13740),
        ("fs__Read", 3500, 11859),
    ]
    assert events.index(forced) < events.index(drops[0])
    refusals = [e for e in events if isinstance(e, GuardEvaluated) and e.extra in (2600, 3500)]
    assert [events.index(r) < events.index(d) for r, d in zip(refusals, drops, strict=True)] == [
        True,
        True,
    ]
    assert all(r.span is not None and r.span.source == 0 for r in refusals)
    assert [s.tokens for s in loaded.session.steps] == [1500, 8340, 9613]


# -- the real run -------------------------------------------------------------------------------


def test_real_stdout(corpus: Path) -> None:
    path = corpus.joinpath(*REAL, "run.stdout.log")
    assert registry.detect(path).name == "aiagent-debug"
    data = path.read_bytes()
    got = read(AiAgentDebugParser, data, path=str(path))
    assert not of(ParseIssue, got)
    text = data.decode()
    labels = re.findall(r"^(context-guard/[\w-]+) \{", text, re.M)
    assert len(labels) == 34
    topics = [t.name for t in of(DebugTopic, got)]
    assert [t for t in topics if t != "final-report-accounting"] == labels
    # every evaluate's counters as printed
    printed = [
        tuple(int(re.search(rf"{key}: (\d+)", block).group(1)) for key in keys)  # type: ignore[union-attr]
        for block in re.findall(r"^context-guard/evaluate \{\n(.*?)\n\}", text, re.M | re.S)
        for keys in [
            (
                "currentCtxTokens",
                "pendingCtxTokens",
                "newCtxTokens",
                "schemaCtxTokens",
                "extraTokens",
                "projectedTokens",
            )
        ]
    ]
    guards = of(GuardEvaluated, got)
    assert [
        (g.current, g.pending, g.new, g.schema_tokens, g.extra, g.projected) for g in guards
    ] == printed
    assert len(guards) == labels.count("context-guard/evaluate") == 10
    assert all(g.targets and g.targets[0].limit == 19712 for g in guards)
    statuses = [g.status for g in guards if g.status is not None]
    assert statuses == [GuardStatus.OK] * labels.count("context-guard/provider-eval")
    expected = [int(x) for x in re.findall(r"expectedTokens: (\d+)", text)]
    assert [m.tokens for m in of(ContextMeasured, got)] == expected == [1842, 3588, 6790]
    assert len(of(RequestSent, got)) == labels.count("context-guard/build-metrics") == 3
    schema = re.search(r"schema-estimate \{ toolCount: (\d+), estimated: (\d+) \}", text)
    assert schema is not None
    assert info_extra(got)["tool_schema_tokens"] == int(schema.group(2))
    assert uncovered_lines(data, got) == []
    report = text[text.index("## Error summary") :].splitlines()
    assert [e.text for e in of(LogLine, got)] == [ln for ln in report if ln.strip()]


def test_real_stderr(corpus: Path) -> None:
    path = corpus.joinpath(*REAL, "run.stderr.log")
    assert registry.detect(path).name == "aiagent-log"
    data = path.read_bytes()
    got = read(AiAgentLogParser, data, path=str(path))
    assert not of(ParseIssue, got)
    text = data.decode()
    prepared = re.findall(
        r"expected_tokens=(\d+) context_window=(\d+) .*?LLM request prepared", text
    )
    assert [(str(m.tokens), str(m.limit)) for m in of(ContextMeasured, got)] == prepared
    assert len(of(RequestSent, got)) == len(prepared) == 3
    responses = re.findall(
        r"cache_read_tokens=(\d+) cache_write_tokens=(\d+) input_tokens=(\d+) output_tokens=(\d+)"
        r" ctx_tokens=(\d+) .*?message=\"LLM response received\"",
        text,
    )
    usages = [u.usage for u in of(UsageReported, got)]
    assert [(u.cache_read, u.cache_write, u.input, u.output, u.context_after) for u in usages] == [
        tuple(int(x) for x in r) for r in responses
    ]
    summary = re.search(
        r"event=llm_summary requests=(\d+) failed=\d+ tokens_prompt=(\d+) tokens_output=(\d+) "
        r"tokens_cache_read=(\d+)",
        text,
    )
    assert summary is not None
    requests, prompt, output, cache_read = (int(x) for x in summary.groups())
    assert len(usages) == requests
    assert sum(u.input for u in usages) == prompt
    assert sum(u.output for u in usages) == output
    assert sum(u.cache_read for u in usages) == cache_read
    extra = info_extra(got)
    assert extra["outcome"] == "EXIT-FINAL-ANSWER" and extra["exit"] == "EXIT-SUCCESS"
    assert any(i.context_window == 32000 for i in of(SessionInfo, got))
    assert uncovered_lines(data, got) == []
    # the record that starts in the middle of the echoed report is read
    assert any(e.text.startswith("finalize: source=tool-call") for e in of(LogLine, got))


def test_real_streams_merge_into_one_request_each(corpus: Path) -> None:
    folder = corpus.joinpath(*REAL)
    paths = [folder / "run.stderr.log", folder / "run.stdout.log"]
    loaded = merge_streams(
        paths, lambda spec: build_profile(spec.default_profile), count_exact=False
    )
    session = loaded.session
    assert len(session.steps) == 3
    assert not session.issues
    usage = [s.usage for s in session.steps]
    assert [u.prompt_tokens if u else None for u in usage] == [3368, 5151, 7327]


def test_sniffers_score_zero_on_every_other_file(corpus: Path) -> None:
    others = foreign_files(corpus, "ai-agent", DATA)
    assert len(others) > 20
    for path in others:
        h = registry.read_head(path)
        for sniff in (reader_debug.sniff_debug, reader_log.sniff_log, reader_console.sniff_console):
            assert sniff(h) == 0.0, (path, sniff.__name__)
