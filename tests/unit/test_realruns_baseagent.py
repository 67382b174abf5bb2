"""Real runs of BaseAgent @ bcb9023 (``realruns/baseagent``): every figure its data card gives,
read the way a user reads them (``stats --json``, ``replay --json``), for the stderr log alone,
the stdout alone and the two merged, and replay agreement under BaseAgent's hard-coded defaults
(the card's config)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ctx_inspect.agents.baseagent.reader_events import CONTEXT_NOTE
from ctx_inspect.agents.baseagent.reader_log import BaseAgentLogParser
from ctx_inspect.app.config import build_profile
from ctx_inspect.app.loader import open_inputs
from ctx_inspect.cli import main
from ctx_inspect.core.model import (
    Compacted,
    LogLine,
    MessageAdded,
    MessageKind,
    Pruned,
    RequestSent,
)
from ctx_inspect.core.session import Session

USABLE = 168_000  # what BaseAgent's "Context:" lines measure against

# BaseAgent's own "Context:" figure at each request, as the card gives them
SHORT = [5380, 5493, 5634, 5724, 5772, 6252, 6361, 6846]
COMPACTION = [
    5401, 12995, 23119, 35777, 43371, 53481, 66138, 73731, 83857, 96514,
    104093, 114218, 126874, 134469,
    144594,  # 15: the summarisation call of iteration 15 (its Context figure)
    5610,  # 16: iteration 15's own request, after the compaction (its "after")
    5802, 5968, 6475, 6634, 7146,
]  # fmt: skip
PRUNE = [
    5399, 12993, 23117, 35775, 43369, 53479, 66136, 73729, 83855, 96512,
    104091, 104601, 114726, 127382, 134977, 135477,
    145602, 158244, 165838, 175962, 188620, 196214,  # 17-22: each pruned for its request only
    206324,  # 23: the summarisation call (it carried the pruned copy)
    5609,  # 24: iteration 23's own request
    5797, 6289,
]  # fmt: skip
# (step, before, after) of each prune that sufficed, then the one that did not
PRUNES = [
    (17, 145_602, 85_602),
    (18, 158_244, 98_244),
    (19, 165_838, 105_838),
    (20, 175_962, 115_962),
    (21, 188_620, 128_620),
    (22, 196_214, 136_214),
]
INSUFFICIENT = (23, 206_324, 146_324)


def run(corpus: Path, name: str, stream: str) -> Path:
    return corpus / "realruns" / "baseagent" / name / f"run.{stream}"


def both(corpus: Path, name: str) -> tuple[Path, Path]:
    return run(corpus, name, "stdout.jsonl"), run(corpus, name, "stderr.log")


def cli_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main([args[0], "--json", *args[1:]]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


def stats(capsys: pytest.CaptureFixture[str], *paths: Path) -> dict[str, Any]:
    extra = ["--merge"] if len(paths) > 1 else []
    return cli_json(capsys, "stats", *extra, *map(str, paths))


def replay(
    capsys: pytest.CaptureFixture[str], *paths: Path, sets: tuple[str, ...] = ()
) -> dict[str, Any]:
    extra = ["--merge"] if len(paths) > 1 else []
    extra += [part for s in sets for part in ("--set", s)]
    return cli_json(capsys, "replay", *extra, *map(str, paths))


def explain(capsys: pytest.CaptureFixture[str], *paths: Path) -> list[dict[str, Any]]:
    extra = ["--merge"] if len(paths) > 1 else []
    assert main(["explain", "--json", *extra, *map(str, paths)]) == 0
    data: list[dict[str, Any]] = json.loads(capsys.readouterr().out)
    return data


def session(*paths: Path) -> Session:
    (loaded,) = open_inputs(
        list(paths),
        lambda spec: build_profile(None, default=spec.default_profile),
        merge=len(paths) > 1,
    )
    return loaded.session


def figures(*paths: Path) -> list[int]:
    """The figure each request shows."""
    return [s.tokens for s in session(*paths).steps]


def calls(*paths: Path) -> list[list[str]]:
    """The tools each request's answer called, in the merged session (a summarisation call's
    answer calls none)."""
    out: list[list[str]] = []
    for event in session(*paths).events():
        if isinstance(event, RequestSent):
            out.append([])
        elif isinstance(event, MessageAdded) and event.message.kind is MessageKind.TOOL_CALL:
            out[-1].append(event.message.tool_name or "")
    return out


def printed(path: Path) -> list[tuple[int, float]]:
    text = path.read_text()
    return [
        (int(n), float(p))
        for n, p in re.findall(
            r"\[compaction\] Context: (\d+) tokens \(([\d.]+)% of 168000\)", text
        )
    ]


def crossings(data: dict[str, Any]) -> list[tuple[int, str, str]]:
    return [(c["step"], c["from"], c["to"]) for c in data["zone_crossings"]]


def prunes(data: dict[str, Any]) -> list[tuple[int, int, int]]:
    return [(p["step"], p["tokens_before"], p["tokens_after"]) for p in data["prunes"]]


def compactions(data: dict[str, Any]) -> list[tuple[int, int, int]]:
    return [(c["step"], c["before_tokens"], c["after_tokens"]) for c in data["compactions"]]


def assert_agrees(data: dict[str, Any]) -> None:
    assert data["agreement"] == 1.0
    assert data["disagreements"] == []
    assert all(c["tokens"] == c["recorded"] for c in data["curve"])


# -- short: 8 iterations, 8 requests, no context management


@pytest.mark.corpus
def test_short_figures(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stdout, stderr = both(corpus, "short")
    data = stats(capsys, stderr)
    assert data["steps"] == 8 and data["parse_issues"] == 0
    assert figures(stderr) == SHORT
    # 5,380 (3.2% of 168,000) to 6,846 (4.1%): BaseAgent's figures and percentages
    assert data["effective_limit"] == USABLE
    # the window: the usable window the log prints and BaseAgent's output reserve, not assumed
    assert data["context_window"] == 200_000
    assert data["context_window_source"].startswith("the log's usable 168,000")
    assert (data["final_context_tokens"], data["final_context_source"]) == (6_846, "reported")
    assert printed(stderr)[0] == (5_380, 3.2) and printed(stderr)[-1] == (6_846, 4.1)
    assert f"{data['final_context_tokens'] / USABLE:.1%}" == "4.1%"
    assert data["compactions"] == [] and data["prunes"] == [] and data["zone_crossings"] == []
    merged = stats(capsys, stdout, stderr)
    assert merged["steps"] == 8 and figures(stdout, stderr) == SHORT
    # the model's 6 texts, 5 calls and their results, and the 2 self-verification prompts
    assert merged["messages_total"] == 18
    assert merged["context_note"] == ""
    # the turn's usage (60,364 input over 8 requests) is never a context figure
    assert '"input_tokens": 60364' in stdout.read_text()
    assert 60_364 not in (merged["peak_context_tokens"], merged["final_context_tokens"])
    assert merged["final_context_note"].startswith("reported 6,846 at step 8 + ")
    # each call in the iteration that made it: ls, read_file, grep, write_file; iteration 5 is
    # text only (the first self-verification prompt), 6 verifies with one more command
    assert calls(stdout, stderr) == [
        ["shell_command"],
        ["read_file"],
        ["shell_command"],
        ["write_file"],
        [],
        ["shell_command"],
        [],
        [],
    ]
    info = session(stdout, stderr).info
    assert info["turn_usage"] == {
        "input_tokens": 60_364,
        "cached_input_tokens": 40_704,
        "output_tokens": 309,
    }


@pytest.mark.corpus
def test_short_replay(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stdout, stderr = both(corpus, "short")
    for paths in ((stderr,), (stdout, stderr)):
        data = replay(capsys, *paths)
        assert_agrees(data)
        assert data["steps"] == 8 and data["recorded_decisions"] == []
        assert data["compactions"] == [] and data["prunes"] == []


# -- compaction: 20 iterations and one AI compaction, 21 requests


@pytest.mark.corpus
def test_compaction_figures(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, stderr = both(corpus, "compaction")
    data = stats(capsys, stderr)
    # 20 main requests and the compaction's own (the client's "Requests: 21")
    assert data["steps"] == 21 and data["parse_issues"] == 0
    assert session(stderr).info["requests"] == 21
    assert figures(stderr) == COMPACTION
    assert [n for n, _ in printed(stderr)] == COMPACTION[:15] + COMPACTION[16:]
    assert printed(stderr)[13] == (134_469, 80.0) and printed(stderr)[14] == (144_594, 86.1)
    (compaction,) = data["compactions"]
    assert compaction == {
        "step": 15,
        "trigger": "auto",
        "before_tokens": 144_594,
        "after_tokens": 5_610,
        "messages_before": 72,
        "messages_after": 2,
        "failed": False,
        "error": None,
    }
    # the prune found nothing outside the two protected user turns: no prune
    assert data["prunes"] == []
    assert data["peak_context_tokens"] == 144_594 and data["peak_step"] == 15
    assert data["final_context_tokens"] == 7_146
    # each zone is entered once: no bounce
    assert crossings(data) == [
        (13, "safe", "warning"),
        (15, "warning", "overflow"),
        (16, "overflow", "safe"),
    ]


@pytest.mark.corpus
def test_compaction_log_events(corpus: Path) -> None:
    stderr = run(corpus, "compaction", "stderr.log")
    parser = BaseAgentLogParser(0, str(stderr))
    events = [*parser.feed(stderr.read_bytes()), *parser.finish()]
    (skipped,) = [e for e in events if isinstance(e, Pruned)]
    assert (skipped.applied, skipped.scanned_tokens, skipped.tokens_recovered) == (False, 0, 0)
    assert skipped.reason == "only 0 tokens recoverable (min: 20000)"
    (compacted,) = [e for e in events if isinstance(e, Compacted)]
    assert (compacted.summary_tokens, compacted.failed) == (280, False)
    # the loop's own total leaves the compaction call out; the client's includes it
    texts = [e.text for e in events if isinstance(e, LogLine)]
    assert "Tokens: 1070292 input, 833536 cached, 2857 output" in texts
    assert session(stderr).info["client_total_tokens"] == 1_222_823


@pytest.mark.corpus
def test_compaction_stdout_alone_says_what_it_cannot_show(
    corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stdout = run(corpus, "compaction", "stdout.jsonl")
    data = stats(capsys, stdout)
    assert data["format"] == "baseagent-events"
    assert data["context_note"] == CONTEXT_NOTE and "no context management" in CONTEXT_NOTE
    assert data["compactions"] == []
    # a text and the calls after it count as one request: fewer than the run's 21, never more
    assert data["steps"] == 16 <= 21
    assert 1_070_292 not in (data["peak_context_tokens"], data["final_context_tokens"])
    assert main(["stats", str(stdout)]) == 0
    assert "no context management" in capsys.readouterr().out.replace("\n", " ")
    # replay alone: a decision the agent's log would show is not in this stream, and says so
    alone = replay(capsys, stdout)
    assert alone["recorded_decisions"] == []
    for entry in alone["disagreements"]:
        assert entry["reason"].startswith("this input cannot show whether the agent acted here")


@pytest.mark.corpus
def test_compaction_merged(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stdout, stderr = both(corpus, "compaction")
    alone = stats(capsys, stderr)
    merged = stats(capsys, stdout, stderr)
    # one session: the log's requests, its figures, its compaction; nothing counted twice
    for key in ("steps", "compactions", "prunes", "zone_crossings", "peak_context_tokens"):
        assert merged[key] == alone[key], key
    assert figures(stdout, stderr) == COMPACTION
    assert merged["context_note"] == ""
    # the stdout's 132 items (16 texts, 58 calls and their results) and 2 verification prompts
    assert merged["messages_total"] == 134
    kinds = {(m["role"], m["kind"]): m for m in merged["messages"]}
    # the compaction removed everything before it: only iteration 15 on counts
    assert kinds["tool", "tool_result"]["count"] == 58
    assert kinds["tool", "tool_result"]["removed"] == 55
    # the end: BaseAgent's last figure, and the model's last answer after it
    assert merged["final_context_note"].startswith("reported 7,146 at step 21 + ")
    assert 7_146 <= merged["final_context_tokens"] < 7_146 + 100
    # iterations 1 to 14 make 3 to 5 parallel calls each; the summarisation call none; then
    # write_file, and the self-verification rounds
    made = calls(stdout, stderr)
    assert all(3 <= len(c) <= 5 for c in made[:14]) and sum(map(len, made[:14])) == 55
    assert made[14:] == [[], ["write_file"], ["shell_command"], [], ["shell_command"], [], []]
    info = session(stdout, stderr).info
    assert info["turn_usage"] == {
        "input_tokens": 1_070_292,
        "cached_input_tokens": 833_536,
        "output_tokens": 2_857,
    }
    assert (info["requests"], info["client_total_tokens"], info["elapsed_s"]) == (
        21,
        1_222_823,
        46.8,
    )


@pytest.mark.corpus
def test_compaction_replay(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for paths in ((run(corpus, "compaction", "stderr.log"),), both(corpus, "compaction")):
        data = replay(capsys, *paths)
        assert_agrees(data)
        assert data["steps"] == 21
        assert compactions(data) == [(15, 144_594, 5_610)]
        assert [c["tokens"] for c in data["curve"] if not c.get("live_end")] == COMPACTION


# -- prune: a prune that repeats on every iteration (BaseAgent keeps no pruned list)


@pytest.mark.corpus
def test_prune_figures(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, stderr = both(corpus, "prune")
    data = stats(capsys, stderr)
    assert data["steps"] == 26 and data["parse_issues"] == 0
    assert session(stderr).info["requests"] == 26
    assert figures(stderr) == PRUNE
    assert printed(stderr)[16] == (145_602, 86.7)
    assert printed(stderr)[19][1] == 104.7 and printed(stderr)[21][1] == 116.8
    assert printed(stderr)[22] == (206_324, 122.8)
    # one prune per iteration, each with its own before and after, for its request only
    assert prunes(data) == [*PRUNES, INSUFFICIENT]
    for prune in data["prunes"]:
        assert prune["tokens_recovered"] == 60_192 and prune["outputs_pruned"] == 24
        assert prune["persistent"] is False
    assert [p["reason"] for p in data["prunes"]] == ["sufficient"] * 6 + ["insufficient"]
    (compaction,) = data["compactions"]
    assert (compaction["step"], compaction["before_tokens"], compaction["after_tokens"]) == (
        23,
        206_324,
        5_609,
    )
    assert (compaction["messages_before"], compaction["messages_after"]) == (106, 2)
    assert data["peak_context_tokens"] == 206_324 and data["peak_step"] == 23
    # the context stays over the threshold from iteration 17 until the compaction
    assert crossings(data) == [
        (13, "safe", "warning"),
        (17, "warning", "overflow"),
        (24, "overflow", "safe"),
    ]


@pytest.mark.corpus
def test_prune_merged(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stdout, stderr = both(corpus, "prune")
    alone = stats(capsys, stderr)
    merged = stats(capsys, stdout, stderr)
    for key in ("steps", "compactions", "prunes", "zone_crossings", "peak_context_tokens"):
        assert merged[key] == alone[key], key
    assert figures(stdout, stderr) == PRUNE
    # the stdout's 181 items and the 3 self-verification prompts (iterations 11, 15 and 24)
    assert merged["messages_total"] == 184
    assert merged["final_context_note"].startswith("reported 6,289 at step 26 + ")
    info = session(stdout, stderr).info
    assert info["turn_usage"] == {
        "input_tokens": 2_003_930,
        "cached_input_tokens": 1_593_856,
        "output_tokens": 3_818,
    }
    assert (info["requests"], info["elapsed_s"]) == (26, 62.8)
    # the streams can be given in either order
    other = stats(capsys, stderr, stdout)
    for key in ("steps", "messages_total", "prunes", "compactions", "final_context_tokens"):
        assert other[key] == merged[key], key


@pytest.mark.corpus
def test_prune_replay(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stderr = run(corpus, "prune", "stderr.log")
    for paths in ((stderr,), both(corpus, "prune")):
        data = replay(capsys, *paths)
        assert_agrees(data)
        assert data["steps"] == 26
        # the same prunes at the same steps with the same figures (merged, computed from the
        # messages themselves: the scan finds BaseAgent's 24 outputs, 60,192 tokens)
        assert prunes(data) == [*PRUNES, INSUFFICIENT]
        assert all(p["persistent"] is False for p in data["prunes"])
        assert compactions(data) == [(23, 206_324, 5_609)]
        assert [c["tokens"] for c in data["curve"] if not c.get("live_end")] == PRUNE


@pytest.mark.corpus
def test_every_line_of_every_run_is_read(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("short", "compaction", "prune"):
        for path in both(corpus, name):
            assert stats(capsys, path)["parse_issues"] == 0
        assert stats(capsys, *both(corpus, name))["parse_issues"] == 0


# -- explain: the figure that crossed, BaseAgent's limit, changes that replay confirms


FORMULA = "0.85 x (window 200,000 - output reserve 32,000 = 168,000), acting above it"


def assert_avoided(
    capsys: pytest.CaptureFixture[str], paths: tuple[Path, ...], item: dict[str, Any]
) -> None:
    """Each suggested change, replayed, has no such event at or before the explained step."""
    kind = {"compaction": "compactions", "prune": "prunes"}[item["event"]]
    assert item["avoid"]
    for change in item["avoid"]:
        assert change["confirmed"] is True
        data = replay(capsys, *paths, sets=(f"{change['setting']}={change['value']}",))
        assert not [e for e in data[kind] if e["step"] <= item["step"]], change


@pytest.mark.corpus
def test_explain_compaction(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for paths in ((run(corpus, "compaction", "stderr.log"),), both(corpus, "compaction")):
        (item,) = explain(capsys, *paths)
        assert (item["step"], item["event"]) == (15, "compaction")
        assert (item["projected_tokens"], item["limit_tokens"]) == (144_594, 142_800)
        assert item["limit_formula"] == FORMULA and item["first_crossed_step"] == 15
        # the smallest change of each setting (0.86 x 168,000 = 144,480 still compacts)
        avoid = {a["setting"]: a["value"] for a in item["avoid"]}
        assert avoid == {"compact_ratio": 0.87, "output_reserve": 29_889, "context_window": 202_111}
        assert_avoided(capsys, paths, item)


@pytest.mark.corpus
def test_explain_prunes(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = (run(corpus, "prune", "stderr.log"),)
    items = explain(capsys, *paths)
    assert [(i["step"], i["event"]) for i in items] == [
        *((step, "prune") for step, _, _ in [*PRUNES, INSUFFICIENT]),
        (23, "compaction"),
    ]
    # a prune's figure is the one BaseAgent compared with its limit: its "before"
    assert [i["projected_tokens"] for i in items[:7]] == [b for _, b, _ in [*PRUNES, INSUFFICIENT]]
    assert all(i["limit_tokens"] == 142_800 and i["first_crossed_step"] == 17 for i in items)
    assert_avoided(capsys, paths, items[0])
    # from 175,962 on, no ratio (at most 1.0 x 168,000) nor reserve avoids it: only the window
    assert items[3]["unavoidable"] == ["compact_ratio", "output_reserve"]
    assert [a["setting"] for a in items[3]["avoid"]] == ["context_window"]
