"""Real runs of Codex CLI 0.169.0 (``realruns/codex``): every figure its data card gives, read
the way a user reads them (``stats --json``, ``replay --json --set``), and replay agreement
under each run's recorded settings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctx_inspect.agents.codex import reader as codex
from ctx_inspect.agents.codex.reader import CodexParser
from ctx_inspect.app.config import build_profile
from ctx_inspect.app.loader import open_inputs
from ctx_inspect.cli import main
from ctx_inspect.core.model import Compacted, RequestRejected

AUTO = "autocompact-limit60k"
MANUAL = "manual-compact-tui"
EXCEEDED = "context-exceeded-then-manual-compact"
REFUSAL = "Codex ran out of room in the model's context window."


def rollout(corpus: Path, run: str) -> Path:
    files = sorted((corpus / "realruns" / "codex" / run / "codex-home").rglob("rollout-*.jsonl"))
    assert len(files) == 1
    return files[0]


def stdout(corpus: Path, run: str) -> list[Path]:
    return sorted((corpus / "realruns" / "codex" / run).glob("exec-json*.stdout*.jsonl"))


def cli_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main([args[0], "--json", *args[1:]]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


def stats(capsys: pytest.CaptureFixture[str], *paths: Path, merge: bool = False) -> dict[str, Any]:
    extra = ["--merge"] if merge else []
    return cli_json(capsys, "stats", *extra, *map(str, paths))


def replay(capsys: pytest.CaptureFixture[str], path: Path, *sets: str) -> dict[str, Any]:
    args = [part for s in sets for part in ("--set", s)]
    return cli_json(capsys, "replay", *args, str(path))


def steps(path: Path) -> list[tuple[int, int | None]]:
    """Per request: the figure the step shows (Codex's own) and the prompt that was sent."""
    (loaded,) = open_inputs([path], lambda spec: build_profile(None, default=spec.default_profile))
    return [(s.tokens, s.usage.prompt_tokens if s.usage else None) for s in loaded.session.steps]


def records(path: Path) -> list[Any]:
    parser = CodexParser(0, str(path))
    return [*parser.feed(path.read_bytes()), *parser.finish()]


def lines_of(events: list[Any], kind: type[Any]) -> list[tuple[int, Any]]:
    """(line, event) of each ``kind`` event, in order."""
    return [(e.span.line, e) for e in events if isinstance(e, kind) and e.span is not None]


def compactions(data: dict[str, Any]) -> list[tuple[int, str, int, int]]:
    return [
        (c["step"], c["trigger"], c["before_tokens"], c["after_tokens"])
        for c in data["compactions"]
    ]


# -- autocompact-limit60k: two mid-turn auto-compactions at model_auto_compact_token_limit 60000


@pytest.mark.corpus
def test_autocompact_figures(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = rollout(corpus, AUTO)
    assert len(path.read_bytes().splitlines()) == 125
    data = stats(capsys, path)
    assert data["parse_issues"] == 0
    # the window is the one Codex reports (95% of the configured 272,000), and says so
    assert data["context_window"] == 258_400
    assert "token_count" in data["context_window_source"]
    # before: the compaction request (the whole context and Codex's prompt), after: Codex's
    # own estimate of what it kept; each at the step of its summarisation call
    assert compactions(data) == [(8, "auto", 60_121, 7_012), (14, "auto", 60_425, 7_012)]
    assert data["peak_context_tokens"] == 60_425 and data["peak_step"] == 14
    # the last figure: Codex's total of the final answer (prompt 40,798 + 254 answered)
    assert data["final_context_tokens"] == 41_052
    assert data["final_context_note"] == "reported 41,052 at step 20 + 0 exact since"
    assert data["rejected_requests"] == []
    shown = steps(path)
    prompts = [p for _, p in shown]
    # the last input before each compaction, the compaction request, the request after it
    assert prompts[6:9] == [56_927, 60_121, 10_896]
    assert prompts[12:15] == [51_330, 60_425, 10_896]
    # each step shows Codex's own figure: last_token_usage.total_tokens (prompt + answer),
    # except the summarisation calls, whose prompt is the context that was summarised
    assert [t for t, _ in shown] == [
        10_733, 11_177, 22_616, 34_069, 34_440, 45_717, 57_174, 60_121, 11_285, 22_485,
        33_944, 40_005, 51_461, 60_425, 11_269, 17_861, 29_213, 40_526, 40_947, 41_052,
    ]  # fmt: skip
    assert [line for line, _ in lines_of(records(path), Compacted)] == [53, 88]


@pytest.mark.corpus
def test_autocompact_replay(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = rollout(corpus, AUTO)
    data = replay(capsys, path, "model_auto_compact_token_limit=60000")
    assert data["threshold_tokens"] == 60_000
    assert data["agreement"] == 1.0 and data["disagreements"] == []
    assert compactions(data) == [(8, "replay", 60_121, 7_012), (14, "replay", 60_425, 7_012)]
    curve = {c["step"]: c for c in data["curve"]}
    # what Codex compared: the last total plus its estimate of the tool output after it
    # (57,174 + ~4,829 for the awk output; 51,461 + ~10,229 for a cat of a log)
    assert 61_900 < curve[8]["request"] < 62_100 and curve[7]["request"] < 60_000
    assert 61_600 < curve[14]["request"] < 61_800 and curve[13]["request"] < 60_000
    # the step's peak is on the session's basis: the summarisation request's prompt, as stats
    assert curve[8]["peak"] == 60_121 < curve[8]["request"]
    # the curve shows what the session shows: Codex's total once each request was answered
    # (the summarisation request's prompt, 60,121, at the step where it compacted)
    assert all(c["tokens"] == c["recorded"] for c in data["curve"])
    assert (curve[1]["tokens"], curve[7]["tokens"], curve[8]["tokens"]) == (10_733, 57_174, 60_121)
    # our own name for the setting still works
    assert replay(capsys, path, "auto_compact_token_limit=60000")["agreement"] == 1.0
    # a limit above what Codex measured: the recorded compactions are not reproduced there
    higher = replay(capsys, path, "model_auto_compact_token_limit=63000")
    assert higher["agreement"] == 0.0
    missed = [d["step"] for d in higher["disagreements"] if d["recorded"] == ["compaction"]]
    assert missed == [8, 14]


@pytest.mark.corpus
def test_autocompact_exec_stream(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (out,) = stdout(corpus, AUTO)
    assert len(out.read_bytes().splitlines()) == 41
    data = stats(capsys, out)
    assert data["format"] == "codex-exec"
    assert "shows no compaction" in data["context_note"]
    assert data["compactions"] == []
    # the turn's usage is summed over its requests (672,689 input): never a context figure
    text = out.read_text()
    assert '"input_tokens":672689' in text
    assert 672_689 not in (data["peak_context_tokens"], data["final_context_tokens"])
    # merged with the rollout: one session, nothing counted twice
    alone = stats(capsys, rollout(corpus, AUTO))
    merged = stats(capsys, rollout(corpus, AUTO), out, merge=True)
    for key in ("steps", "messages_total", "compactions", "peak_context_tokens"):
        assert merged[key] == alone[key], key
    assert merged["final_context_tokens"] == alone["final_context_tokens"]
    assert merged["context_note"] == ""


# -- manual-compact-tui: /compact twice in the TUI, the user's decisions


@pytest.mark.corpus
def test_manual_compact_figures(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = rollout(corpus, MANUAL)
    assert len(path.read_bytes().splitlines()) == 151
    data = stats(capsys, path)
    assert compactions(data) == [(8, "manual", 54_697, 7_017), (17, "manual", 73_156, 7_359)]
    shown = steps(path)
    # turn 1 (codex exec) ends with context 56,927 sent, 57,000 by Codex's count
    assert shown[6] == (57_000, 56_927)
    assert shown[15] == (76_090, 75_908)  # turn 2 ends with the largest context
    assert data["peak_context_tokens"] == 76_090
    assert data["final_context_tokens"] == 35_270
    assert [line for line, _ in lines_of(records(path), Compacted)] == [52, 113]


@pytest.mark.corpus
def test_manual_compact_replay_counts_the_users_decisions(
    corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = rollout(corpus, MANUAL)
    for sets in (("model_auto_compact_token_limit=200000",), ()):
        data = replay(capsys, path, *sets)
        assert data["agreement"] == 1.0 and data["disagreements"] == []
        assert compactions(data) == [
            (8, "manual", 54_697, 7_017),
            (17, "manual", 73_156, 7_359),
        ]
    # the user's /compact is made again whatever the settings; a low limit adds Codex's own
    lower = replay(capsys, path, "model_auto_compact_token_limit=40000")
    assert lower["agreement"] == 1.0
    assert {(c["step"], c["trigger"]) for c in lower["compactions"]} >= {
        (8, "manual"),
        (17, "manual"),
    }
    assert any(c["trigger"] == "replay" for c in lower["compactions"])


# -- context-exceeded-then-manual-compact: a refused request, no auto-compaction on it


@pytest.mark.corpus
def test_context_exceeded_figures(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = rollout(corpus, EXCEEDED)
    assert len(path.read_bytes().splitlines()) == 155
    data = stats(capsys, path)
    rejected = data["rejected_requests"]
    assert [(r["step"], r["tokens"]) for r in rejected] == [(8, None), (9, None)]
    assert all(r["reason"].startswith(REFUSAL) for r in rejected)
    # no compaction answers the refusals; the user's /compact does, then Codex's own twice
    assert compactions(data) == [
        (10, "manual", 60_169, 7_031),
        (15, "auto", 49_533, 7_373),
        (20, "auto", 49_976, 7_373),
    ]
    # the refused requests report nothing: no peak is made of them (the largest figure is
    # the first compaction request, 60,169)
    assert data["peak_context_tokens"] == 60_169 and data["peak_step"] == 10
    shown = steps(path)
    assert shown[6] == (57_291, 56_927)  # the last request that was answered
    assert shown[7][1] is None and shown[8][1] is None
    events = records(path)
    refusals = lines_of(events, RequestRejected)
    assert [(line, e.code) for line, e in refusals] == [
        (51, "context_window_exceeded"),
        (59, "context_window_exceeded"),
    ]
    assert [line for line, _ in lines_of(events, Compacted)] == [65, 103, 133]


@pytest.mark.corpus
def test_context_exceeded_replay(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = rollout(corpus, EXCEEDED)
    data = replay(capsys, path, "model_auto_compact_token_limit=50000")
    assert data["agreement"] == 1.0
    assert [(c[0], c[1]) for c in compactions(data)][-3:] == [
        (10, "manual"),
        (15, "replay"),
        (20, "replay"),
    ]
    assert compactions(data)[-2:] == [(15, "replay", 49_533, 7_373), (20, "replay", 49_976, 7_373)]
    # the first invocation ran at 200,000 (the resume set 50,000): at step 7 Codex did not
    # compact at a figure over 50,000, and replay says why instead of a bare difference
    (first,) = data["disagreements"]
    assert first["step"] == 7 and first["replayed"] == ["compaction"]
    assert "its limit at this step was above" in first["reason"]


@pytest.mark.corpus
def test_context_exceeded_exec_streams(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outs = stdout(corpus, EXCEEDED)
    assert [len(p.read_bytes().splitlines()) for p in outs] == [20, 4]
    for out in outs:
        data = stats(capsys, out)
        assert [r["reason"][: len(REFUSAL)] for r in data["rejected_requests"]] == [REFUSAL]
        assert data["context_note"]
    alone = stats(capsys, rollout(corpus, EXCEEDED))
    merged = stats(capsys, rollout(corpus, EXCEEDED), *outs, merge=True)
    for key in ("steps", "messages_total", "compactions", "rejected_requests"):
        assert merged[key] == alone[key], key


@pytest.mark.corpus
def test_every_run_reads_the_window_codex_reports(corpus: Path) -> None:
    for run in (AUTO, MANUAL, EXCEEDED):
        (loaded,) = open_inputs(
            [rollout(corpus, run)], lambda spec: build_profile(None, default=spec.default_profile)
        )
        assert loaded.format is codex.SPEC
        assert loaded.profile.context_window == 258_400
        assert loaded.profile.threshold() == 244_800  # 90% of the configured 272,000


@pytest.mark.corpus
def test_explain_names_the_figure_that_crossed(
    corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = rollout(corpus, AUTO)
    assert (
        main(["explain", "--json", "--set", "model_auto_compact_token_limit=60000", str(path)]) == 0
    )
    first, second = json.loads(capsys.readouterr().out)
    # Codex's own figure (57,174 + its estimate of the awk output), not the summarised prompt
    assert first["step"] == 8 and 61_900 < first["projected_tokens"] < 62_100
    assert first["limit_tokens"] == 60_000 and first["first_crossed_step"] == 8
    # the smallest limit that avoids it is one above the figure, and replay confirms it
    (avoid,) = first["avoid"]
    assert avoid["setting"] == "model_auto_compact_token_limit"
    assert avoid["value"] == first["projected_tokens"] + 1
    assert second["step"] == 14 and second["projected_tokens"] > 60_000
    path = rollout(corpus, EXCEEDED)
    assert (
        main(["explain", "--json", "--set", "model_auto_compact_token_limit=50000", str(path)]) == 0
    )
    items = json.loads(capsys.readouterr().out)
    assert [(e["step"], e["event"]) for e in items] == [
        (8, "context_error"),
        (9, "context_error"),
        (10, "compaction"),
        (15, "compaction"),
        (20, "compaction"),
    ]
    assert items[0]["reason"] == f"refused by the provider: {REFUSAL} " + (
        "Start a new thread or clear earlier history before retrying."
    )
    assert items[0]["projected_tokens"] is not None  # the refused request's figure, anchored
    manual = items[2]
    assert "the user's decision" in manual["reason"] and manual["avoid"] == []
    assert all(e["projected_tokens"] >= 50_000 for e in items[3:])
