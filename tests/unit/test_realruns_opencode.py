"""OpenCode 1.18.33's real run (``realruns/opencode``): every figure its data card gives,
through the commands a user runs (``stats --json``, ``replay --json``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctx_inspect.agents.opencode.reader_log import OpenCodeLogParser
from ctx_inspect.cli import main
from ctx_inspect.core.model import Pruned
from tests.corpus import real_runs

RUN = "prune-autocompact-serve"
# the card's settings: limit.context 100000, limit.output 8000 (usable 92,000); the files do
# not record them
CARD = ("--set", "context_window=100000", "--set", "output_limit=8000")
# tokens.total of every request (the summarisation requests 16 and 18 excepted)
TOTALS = {
    1: 7423, 2: 18134, 3: 28824, 4: 39551, 5: 60886, 6: 71591, 7: 71651, 8: 82308, 9: 82385,
    10: 82501, 11: 50730, 12: 61421, 13: 72116, 14: 82803, 15: 93495, 17: 18244, 19: 7662,
    20: 7737, 21: 7797,
}  # fmt: skip
COMPACTIONS = [
    # step (the summarisation request), trigger, before (the last ordinary request's
    # tokens.total), after (the prompt of the first ordinary request after it)
    (16, "auto", 93495, 18215),
    (18, "manual", 18244, 7570),
]
PRUNES = [(11, 31561, 3), (18, 63184, 7)]  # step, the log's found pruned=, parts marked


@pytest.fixture
def run(corpus: Path) -> Path:
    folder = real_runs(corpus, "opencode") / RUN
    if not folder.is_dir():
        pytest.skip(f"{folder} is not in the corpus")
    return folder


def data(run: Path) -> Path:
    return run / "xdg-data" / "opencode"


def cli_json(capsys: pytest.CaptureFixture[str], *args: str | Path) -> Any:
    assert main([str(a) for a in args]) == 0
    out = capsys.readouterr().out
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    return lines[0] if len(lines) == 1 else lines


def stats(capsys: pytest.CaptureFixture[str], *args: str | Path) -> dict[str, Any]:
    result: dict[str, Any] = cli_json(capsys, "stats", "--json", *args)
    return result


def replay(capsys: pytest.CaptureFixture[str], *args: str | Path) -> dict[str, Any]:
    result: dict[str, Any] = cli_json(capsys, "replay", "--json", *args)
    return result


def card_figures(s: dict[str, Any]) -> None:
    """What every reader of the run's database must say."""
    assert s["steps"] == 21
    assert (s["peak_context_tokens"], s["peak_step"], s["peak_context_source"]) == (
        93495,
        15,
        "reported",
    )
    compactions = [
        (c["step"], c["trigger"], c["before_tokens"], c["after_tokens"]) for c in s["compactions"]
    ]
    assert compactions == COMPACTIONS
    assert not any(c["failed"] for c in s["compactions"])
    assert [(p["step"], p["tokens_recovered"], p["outputs_pruned"]) for p in s["prunes"]] == PRUNES
    # after the last answer: OpenCode's own figure of it, nothing estimated on top
    assert s["final_context_tokens"] == 7797
    assert s["final_context_note"] == "reported 7,797 at step 21 + 0 exact since"
    assert s["rejected_requests"] == []
    assert s["dropped_tool_outputs"] == s["truncated_tool_outputs"] == 0
    assert s["parse_issues"] == 0


def test_the_database(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = stats(capsys, data(run) / "opencode.db")
    assert s["format"] == "opencode-db"
    card_figures(s)
    # the window is not in OpenCode's files: the profile's, and said to be assumed
    assert s["context_window"] == 200000
    assert s["context_window_source"] == (
        "profile opencode default, assumed: the input does not record the window"
    )
    messages = {(m["role"], m["kind"]): m for m in s["messages"]}
    assert sum(m["count"] for m in s["messages"]) == 44  # 29 messages, 15 tool outputs
    assert messages[("tool", "tool_result")]["pruned"] == 10
    assert messages[("assistant", "summary")]["count"] == 2
    assert messages[("user", "attachment")]["count"] == 1  # the synthetic "Continue ..."
    assert messages[("user", "meta")]["count"] == 2  # the two compaction requests


def test_the_window_given_as_the_card_says(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = stats(capsys, *CARD, data(run) / "opencode.db")
    assert (s["context_window"], s["context_window_source"]) == (
        100000,
        "profile opencode, set by the user",
    )
    assert s["assumed_settings"] == {}  # the output limit is set too
    alone = stats(capsys, "--set", "context_window=100000", data(run) / "opencode.db")
    # the model's output limit is not in the files either: its default is said to be assumed
    assert alone["assumed_settings"] == {"output_limit": 32000}
    assert alone["threshold_tokens"] == 68000
    assert (s["threshold_tokens"], s["effective_limit"]) == (92000, 92000)  # usable
    # step 15's total reached usable: the only crossing into overflow
    crossings = [(z["step"], z["to"], z["tokens"]) for z in s["zone_crossings"]]
    assert (15, "overflow", 93495) in crossings
    assert [c for c in crossings if c[1] == "overflow"] == [(15, "overflow", 93495)]


def test_every_step_shows_opencodes_own_count(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = replay(capsys, *CARD, data(run) / "opencode.db")
    recorded = {c["step"]: c["recorded"] for c in r["curve"]}
    assert {step: recorded[step] for step in TOTALS} == TOTALS
    # a summarisation request's own tokens (5,439 and 1,556) are not the conversation's: the
    # step shows the context the compaction left, measured at the next ordinary request
    assert (recorded[16], recorded[18]) == (18215, 7570)


def test_replay_under_the_cards_settings_reproduces_every_decision(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = replay(capsys, *CARD, data(run) / "opencode.db")
    assert r["agreement"] == 1.0 and r["disagreements"] == []
    recorded = [(d["step"], d["kind"], d["detail"]) for d in r["recorded_decisions"]]
    assert recorded == [
        (11, "prune", "prune"),
        (16, "compaction", "auto"),
        (18, "prune", "prune"),
        (18, "compaction", "manual"),
    ]
    # the prunes found what OpenCode logged (found pruned=P total=T), at the end of T3 and T4
    found = [(p["step"], p["detail"].split(";")[0]) for p in r["prunes"]]
    assert found == [
        (11, "found: pruned=31561 total=63126"),
        (18, "found: pruned=63184 total=94760"),
    ]
    # the second prune marked outputs a compaction had already summarised: it frees nothing
    assert r["prunes"][1]["tokens_recovered"] == 0
    auto, manual = r["compactions"]
    # decided on the count that crossed, the same as the recording's
    assert (auto["step"], auto["before_tokens"]) == (16, 93495)
    assert "count 93,495 ≥ usable 92,000" in auto["detail"]
    assert "1 kept verbatim" in auto["detail"] or "2 kept verbatim" in auto["detail"]
    assert (manual["step"], manual["trigger"], manual["before_tokens"]) == (18, "manual", 18244)
    assert manual["detail"].startswith("manual: the user's command")
    # what they left is near the recording's (the replayed figure at the compaction counts the
    # summary that the recording's next request holds)
    assert abs(auto["after_tokens"] - 18215) <= 200
    assert abs(manual["after_tokens"] - 7570) <= 200
    curve = {c["step"]: c for c in r["curve"]}
    for step in (17, 19, 20, 21):
        assert abs(curve[step]["tokens"] - curve[step]["recorded"]) <= 10
    assert all(curve[s]["tokens"] == TOTALS[s] for s in range(1, 16))


def test_replay_does_not_prune_unless_prune_is_on(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run had compaction.prune on (its prunes say so, and replay reads that); with it
    off, as 1.18's default, the replay prunes nothing and says where it differs."""
    r = replay(capsys, *CARD, "--set", "prune=false", data(run) / "opencode.db")
    assert r["prunes"] == []
    assert r["agreement"] < 1.0
    assert {"step": 11, "recorded": ["prune"], "replayed": []} in r["disagreements"]


def test_the_log_alone(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = data(run) / "log" / "opencode.log"
    s = stats(capsys, log)
    assert s["format"] == "opencode-log" and s["parse_issues"] == 0
    assert s["steps"] == 21  # one per model request of the session (the title request is not)
    assert [(p["step"], p["tokens_recovered"], p["outputs_pruned"]) for p in s["prunes"]] == PRUNES
    parser = OpenCodeLogParser(0, str(log))
    events = [*parser.feed(log.read_bytes()), *parser.finish()]
    attempts = [e for e in events if isinstance(e, Pruned)]
    # every prune attempt: found pruned=0 at the end of T1, T2, the manual compaction and T5
    assert [(p.applied, p.tokens_recovered, p.scanned_tokens) for p in attempts] == [
        (False, 0, 0),
        (False, 0, 0),
        (True, 31561, 63126),
        (True, 63184, 94760),
        (False, 0, 0),
        (False, 0, 0),
    ]
    assert [p.span.line for p in attempts if p.span] == [62, 77, 92, 136, 144, 166]
    # which outputs a prune marks depends on messages the log does not hold: replay says so
    # instead of counting the prunes as disagreements
    r = replay(capsys, *CARD, log)
    assert r["disagreements"] == [] and r["prunes"] == []
    assert [(u["step"], u["kind"]) for u in r["undetermined"]] == [(11, "prune"), (18, "prune")]
    assert all("messages, which this file does not hold" in u["reason"] for u in r["undetermined"])


def test_the_data_folder_is_the_database_and_its_log(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for folder in (data(run), run / "xdg-data"):
        s = stats(capsys, folder)
        assert s["format"] == "opencode-data"
        card_figures(s)
    r = replay(capsys, *CARD, data(run))
    assert r["agreement"] == 1.0


def test_merged_streams_make_one_session(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stdouts = sorted(run.glob("run-*.stdout.jsonl"))
    assert len(stdouts) == 5
    files = [data(run) / "opencode.db", data(run) / "log" / "opencode.log", *stdouts]
    s = stats(capsys, "--merge", *files)
    card_figures(s)  # one request per model call: nothing counted twice
    assert s["messages_total"] == 44
    r = replay(capsys, *CARD, "--merge", *files)
    assert r["agreement"] == 1.0
    # without the database: the stdouts' steps, and the log's requests no stdout shows
    s = stats(capsys, "--merge", files[1], *stdouts)
    assert s["steps"] == 21
    assert [(p["step"], p["tokens_recovered"], p["outputs_pruned"]) for p in s["prunes"]] == PRUNES
    assert [(c["step"], c["trigger"], c["before_tokens"]) for c in s["compactions"]] == [
        (16, "auto", 93495)
    ]
    # the log's prunes, the outputs they marked not in these files: not replayable, said so
    r = replay(capsys, *CARD, "--merge", files[1], *stdouts)
    assert [(u["step"], u["kind"]) for u in r["undetermined"]] == [(11, "prune"), (18, "prune")]
    assert all("not in these files" in u["reason"] for u in r["undetermined"])


def test_each_run_stdout(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """What each ``opencode run --format json`` streamed: its steps' tokens.total (a run's last
    answer is not in it) and the automatic compaction of T4."""
    expected: dict[int, list[int | None]] = {
        1: [7423, 18134, 28824, 39551, 60886],
        2: [71651],
        3: [82385],
        4: [50730, 61421, 72116, 82803, 93495, None],
        5: [7662, 7737],
    }
    for n, totals in expected.items():
        r = replay(capsys, *CARD, run / f"run-{n}.stdout.jsonl")
        assert r["format"] == "opencode-run"
        requests = [c for c in r["curve"] if not c.get("live_end")]
        figures = [c["recorded"] if totals[i] is not None else None for i, c in enumerate(requests)]
        assert figures == totals
        assert r["agreement"] == 1.0
    s = stats(capsys, run / "run-4.stdout.jsonl")
    assert [(c["step"], c["trigger"], c["before_tokens"]) for c in s["compactions"]] == [
        (6, "auto", 93495)
    ]
