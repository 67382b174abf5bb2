"""Real runs of netdata ai-agent (``realruns/ai-agent``, branch netdata-docs-tester @ fa70248):
every figure its data card gives, read the way a user reads them (``stats --json``,
``replay --json``, ``explain --json``) from the CONTEXT_DEBUG stdout, the logfmt stderr and
both merged, and replay agreement under the settings the files record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctx_inspect.agents.aiagent.profile import AiAgentProfile
from ctx_inspect.app.config import build_profile
from ctx_inspect.app.loader import LoadedSession, open_inputs
from ctx_inspect.cli import main
from ctx_inspect.core.model import (
    ContextMeasured,
    FinalTurnForced,
    GuardEvaluated,
    LogLine,
    RequestSent,
    SessionInfo,
    ToolOutputAction,
    ToolOutputChanged,
)
from ctx_inspect.core.session import MAIN_THREAD

SHORT = "short"
PREFLIGHT = "guard-preflight"
STORE = "guard-store"
STREAMS = ("stdout", "stderr", "merged")


def paths(corpus: Path, run: str, stream: str) -> list[Path]:
    folder = corpus / "realruns" / "ai-agent" / run
    if stream == "merged":
        return [folder / "run.stdout.log", folder / "run.stderr.log"]
    return [folder / f"run.{stream}.log"]


def args(corpus: Path, run: str, stream: str) -> list[str]:
    extra = ["--merge"] if stream == "merged" else []
    return [*extra, *map(str, paths(corpus, run, stream))]


def cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    assert main([argv[0], "--json", *argv[1:]]) == 0
    return json.loads(capsys.readouterr().out)


def stats(capsys: pytest.CaptureFixture[str], corpus: Path, run: str, stream: str) -> Any:
    return cli_json(capsys, "stats", *args(corpus, run, stream))


def replay(
    capsys: pytest.CaptureFixture[str], corpus: Path, run: str, stream: str, *sets: str
) -> Any:
    options = [part for s in sets for part in ("--set", s)]
    return cli_json(capsys, "replay", *options, *args(corpus, run, stream))


def explain(capsys: pytest.CaptureFixture[str], corpus: Path, run: str, stream: str) -> Any:
    return cli_json(capsys, "explain", *args(corpus, run, stream))


def load(corpus: Path, run: str, stream: str) -> LoadedSession:
    (loaded,) = open_inputs(
        paths(corpus, run, stream),
        lambda spec: build_profile(None, default=spec.default_profile),
        count_exact=False,
        merge=stream == "merged",
    )
    return loaded


def figures(loaded: LoadedSession) -> list[int]:
    return [s.tokens for s in loaded.session.steps]


def percents(loaded: LoadedSession) -> list[int]:
    """``LLM request prepared``'s ``P% of W``: (expected + buffer + output) / window."""
    profile = loaded.profile
    return [int(profile.percent_of_limit(t) + 0.5) for t in figures(loaded)]


def final_turns(data: dict[str, Any]) -> list[tuple[int, int | None, int | None]]:
    return [(f["step"], f["projected_tokens"], f["limit_tokens"]) for f in data["final_turns"]]


def summary(loaded: LoadedSession) -> dict[str, Any]:
    value = loaded.session.info.get("llm_summary")
    assert isinstance(value, dict)
    return value


# -- settings: each file gives the window, the output reserve and the limit


@pytest.mark.corpus
@pytest.mark.parametrize("stream", STREAMS)
@pytest.mark.parametrize(
    ("run", "window", "limit"),
    [(SHORT, 32_000, 19_712), (PREFLIGHT, 48_000, 35_712), (STORE, 32_000, 19_712)],
)
def test_each_stream_gives_the_runs_settings(
    corpus: Path, run: str, window: int, limit: int, stream: str
) -> None:
    loaded = load(corpus, run, stream)
    profile = loaded.profile
    assert isinstance(profile, AiAgentProfile)
    # maxOutputTokens 4096 from the agent file, not the profile's window / 4
    assert (profile.context_window, profile.buffer_tokens, profile.settings()["max_output"]) == (
        window,
        8_192,
        4_096,
    )
    assert profile.threshold() == limit
    assert not loaded.session.issues


# -- short: three requests, the guard never blocks


@pytest.mark.corpus
@pytest.mark.parametrize("stream", STREAMS)
def test_short(corpus: Path, capsys: pytest.CaptureFixture[str], stream: str) -> None:
    data = stats(capsys, corpus, SHORT, stream)
    assert (data["steps"], data["parse_issues"], data["final_turns"]) == (3, 0, [])
    assert data["threshold_tokens"] == 19_712
    loaded = load(corpus, SHORT, stream)
    # the prepared lines: [ctx 0, new 1842, expected 1842 + output 4096 = 44% of 32000], ...
    assert figures(loaded) == [1_842, 3_588, 6_790]
    assert percents(loaded) == [44, 50, 60]
    guards = [s.guard for s in loaded.session.steps]
    assert [(g.current, g.pending) for g in guards if g is not None] == [
        (0, 1_842),
        (3_410, 178),
        (5_194, 1_596),
    ]
    assert data["peak_context_tokens"] == data["final_context_tokens"] == 6_790
    played = replay(capsys, corpus, SHORT, stream)
    assert played["agreement"] == 1.0 and played["disagreements"] == []
    assert [c["tokens"] for c in played["curve"]] == [1_842, 3_588, 6_790]
    if stream != "stdout":  # the provider's usage beside the agent's figure
        usage = [s.usage.prompt_tokens for s in loaded.session.steps if s.usage is not None]
        assert usage == [3_368, 5_151, 7_327]
        assert summary(loaded)["requests"] == 3
        assert summary(loaded)["tokens_prompt"] == 12_262


# -- guard-preflight: the final turn forced at the turn preflight of turn 5


@pytest.mark.corpus
@pytest.mark.parametrize("stream", STREAMS)
def test_guard_preflight(corpus: Path, capsys: pytest.CaptureFixture[str], stream: str) -> None:
    data = stats(capsys, corpus, PREFLIGHT, stream)
    assert (data["steps"], data["parse_issues"]) == (5, 0)
    # Context budget exceeded (... projected 38308 tokens vs limit 35712): one final turn
    assert final_turns(data) == [(5, 38_308, 35_712)]
    loaded = load(corpus, PREFLIGHT, stream)
    # 29%, 44%, 59%, 82%, then the final turn: [ctx 32898, new 0, ... = 94% of 48000]
    assert figures(loaded) == [1_860, 8_941, 15_993, 27_129, 32_898]
    assert percents(loaded) == [29, 44, 59, 82, 94]
    last = loaded.session.steps[-1]
    assert last.final_turn and last.peak == 38_308  # the figure that crossed
    assert data["peak_context_tokens"] == 38_308 and data["peak_step"] == 5
    assert data["final_context_tokens"] == 32_898
    # the step keeps the evaluation that forced it: 32,898 answered + 5,410 of tool outputs
    guard = last.guard
    assert guard is not None
    assert (guard.current, guard.pending, guard.new, guard.projection) == (32_898, 0, 5_410, 38_308)
    requests = [e for e in loaded.session.events() if isinstance(e, RequestSent)]
    assert [r.final_turn for r in requests] == [False] * 4 + [True]
    for sets in ((), ("context_window=48000", "buffer_tokens=8192", "max_output_tokens=4096")):
        played = replay(capsys, corpus, PREFLIGHT, stream, *sets)
        assert played["agreement"] == 1.0 and played["disagreements"] == []
        assert final_turns(played) == [(5, 38_308, 35_712)]
        # the step shows the request the agent sent (the session's figure, ``ctx 32898``),
        # the projection that forced it is its peak and what the guard compared
        curve = played["curve"]
        assert [c["tokens"] for c in curve] == [1_860, 8_941, 15_993, 27_129, 32_898]
        assert [c["recorded"] for c in curve] == [c["tokens"] for c in curve]
        assert (curve[-1]["peak"], curve[-1]["request"]) == (38_308, 38_308)
        # forcing drops the tool outputs from the count: 32,898 then fits, nothing more logged
        assert "still over the limit" not in played["final_turns"][0]["reason"]
    # a window where 38,308 fits: no final turn, and replay says where the recording had one
    wider = replay(capsys, corpus, PREFLIGHT, stream, "context_window=52000")
    assert wider["final_turns"] == [] and wider["agreement"] == 0.0
    (explained,) = explain(capsys, corpus, PREFLIGHT, stream)
    assert (explained["step"], explained["event"]) == (5, "final_turn")
    assert (explained["projected_tokens"], explained["limit_tokens"]) == (38_308, 35_712)
    assert explained["limit_parts"] == {"window": 48_000, "buffer": 8_192, "max_output": 4_096}
    counters = explained["counters"]
    assert (counters["current"], counters["pending"], counters["new"]) == (32_898, 0, 5_410)
    assert explained["first_crossed_step"] == 5 and explained["reproduced"] is True
    avoid = {a["setting"]: a["value"] for a in explained["avoid"]}
    # the guard enforces when projected − schema (2,093) > limit: one token below is enough
    assert avoid == {"buffer_tokens": 7_689, "max_output_tokens": 3_593, "context_window": 48_503}
    if stream != "stdout":
        facts = summary(loaded)
        assert (facts["requests"], facts["tokens_prompt"], facts["tokens_cache_read"]) == (
            5,
            71_108,
            39_936,
        )
        assert facts["cost_usd"] == 0.0122
        usage = [s.usage for s in loaded.session.steps if s.usage is not None]
        assert sum(u.input for u in usage) == 71_108
        assert sum(u.cache_read for u in usage) == 39_936
        assert loaded.session.info.get("outcome") == "EXIT-TOKEN-LIMIT"


# -- guard-store: an output moved to storage in turn 3, the final turn forced in turn 4


@pytest.mark.corpus
@pytest.mark.parametrize("stream", STREAMS)
def test_guard_store(corpus: Path, capsys: pytest.CaptureFixture[str], stream: str) -> None:
    data = stats(capsys, corpus, STORE, stream)
    assert (data["steps"], data["parse_issues"]) == (4, 0)
    # 24680 vs 19712, whichever order 'Final turn detected' and 'Context budget exceeded'
    # come in; the three notices after it are the same final turn
    assert final_turns(data) == [(4, 24_680, 19_712)]
    loaded = load(corpus, STORE, stream)
    assert figures(loaded) == [1_860, 8_941, 15_993, 21_750]  # [ctx 21750, new 0, ...]
    assert percents(loaded) == [44, 66, 88, 106]
    guard = loaded.session.steps[-1].guard
    assert guard is not None
    assert (guard.current, guard.pending, guard.new, guard.projection) == (21_750, 0, 2_930, 24_680)
    played = replay(capsys, corpus, STORE, stream)
    assert played["agreement"] == 1.0 and played["disagreements"] == []
    assert final_turns(played) == [(4, 24_680, 19_712)]
    # the agent still over its limit after shrinking the tools: it sent the request anyway
    assert "still over the limit" in played["final_turns"][0]["reason"]
    curve = played["curve"]
    assert [c["tokens"] for c in curve] == [1_860, 8_941, 15_993, 21_750]
    assert [c["recorded"] for c in curve] == [c["tokens"] for c in curve]
    assert (curve[-1]["peak"], curve[-1]["request"]) == (24_680, 24_680)
    items = explain(capsys, corpus, STORE, stream)
    assert [(e["step"], e["event"]) for e in items] == [(4, "final_turn")]  # no context error
    (explained,) = items
    assert (explained["projected_tokens"], explained["limit_tokens"]) == (24_680, 19_712)
    assert explained["limit_parts"] == {"window": 32_000, "buffer": 8_192, "max_output": 4_096}
    counters = explained["counters"]
    assert (counters["current"], counters["new"], counters["projected"]) == (
        21_750,
        2_930,
        24_680,
    )
    if stream == "stdout":  # the debug stream shows no stored output
        assert data["spilled_tool_outputs"] == 0
        return
    # Tool 'fs__Read' output stored for tool_output (token_budget, 10042 bytes): 2,511 tokens,
    # a 96-token handle in their place
    assert data["spilled_tool_outputs"] == 1
    (stored,) = [e for e in loaded.session.events() if isinstance(e, ToolOutputChanged)]
    assert stored.action is ToolOutputAction.SPILLED
    assert (stored.tool, stored.original_bytes, stored.tokens) == ("fs__Read", 10_042, 2_511)
    assert (stored.tokens_after, stored.final_bytes, stored.limit_tokens) == (96, 349, 19_712)
    # the figure it would have made: the debug stream's own (15,993 + 2,834 + 2,545), else
    # the log's counters plus the output's own count
    assert stored.projected_tokens == (21_372 if stream == "merged" else 21_338)
    assert [(d["step"], d["kind"]) for d in played["recorded_decisions"]] == [
        (4, "truncated"),
        (4, "final_turn"),
    ]
    facts = summary(loaded)
    assert (facts["requests"], facts["tokens_prompt"]) == (4, 43_114)
    lines = [e.text for e in loaded.session.events() if isinstance(e, LogLine)]
    # the agent's own notices after forcing are lines of that final turn, not errors
    assert lines.count("Context limit exceeded; forcing final turn.") == 1
    assert (
        lines.count("Context limit exceeded during turn execution; proceeding with final turn.")
        == 1
    )
    # the record that starts in the middle of the echoed report's last line is read
    assert any(t.startswith("finalize: source=tool-call") for t in lines)
    # a window where the output fits: it stays, and the final turn comes with it anyway
    wider = replay(capsys, corpus, STORE, stream, "context_window=34000")
    assert wider["truncated_tool_outputs"] == 0 and final_turns(wider)[0][0] == 4


# -- merged: one session of both streams


@pytest.mark.corpus
@pytest.mark.parametrize("run", [SHORT, PREFLIGHT, STORE])
def test_merged_streams_make_one_session(corpus: Path, run: str) -> None:
    merged = load(corpus, run, "merged")
    alone = {s: load(corpus, run, s) for s in ("stdout", "stderr")}
    events = list(merged.session.events())
    requests = [e for e in events if isinstance(e, RequestSent) and e.thread == MAIN_THREAD]
    # one request per model call, with the log's time and final-turn flag
    assert len(requests) == summary(merged)["requests"] == len(merged.session.steps)
    assert all(r.timestamp for r in requests)
    assert figures(merged) == figures(alone["stdout"]) == figures(alone["stderr"])
    # one context figure per request, the log's
    measured = [e for e in events if isinstance(e, ContextMeasured)]
    assert [m.label for m in measured] == ["LLM request prepared"] * len(requests)
    # the guard's evaluations as the agent printed them, none rebuilt from the log
    guards = [e for e in events if isinstance(e, GuardEvaluated)]
    printed = [e for e in alone["stdout"].session.events() if isinstance(e, GuardEvaluated)]
    assert len(guards) == len(printed) and all(g.span and g.span.source == 0 for g in guards)
    # one forced final turn per turn, with the log's turn and time
    forced = list(merged.session.events_of(FinalTurnForced))
    assert len(forced) == len({merged.session.step_at(i) for i, _ in forced})
    assert len(forced) == (0 if run == SHORT else 1)
    assert all(isinstance(f, FinalTurnForced) and f.timestamp and f.turn for _, f in forced)
    for state, stderr_state in zip(
        merged.session.steps, alone["stderr"].session.steps, strict=True
    ):
        assert state.usage == stderr_state.usage  # no usage counted twice
    info = [e for e in events if isinstance(e, SessionInfo) and e.extra.get("llm_summary")]
    assert len(info) == 1
