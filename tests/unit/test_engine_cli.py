"""replay, diff, explain and sweep as a user runs them, with their JSON contracts."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from ctx_inspect.cli import main

DATA = Path(__file__).parents[1] / "data"
STATS_KEYS = {
    "format",
    "profile",
    "tokenizer",
    "context_window",
    "items_total",
    "parse_issues",
    "peak_context_tokens",
    "peak_context_source",
    "compactions",
    "prunes",
    "final_turns",
    "dropped_tool_outputs",
}
AIAGENT_LOG = DATA / "aiagent" / "log.log"
BASEAGENT_LOG = DATA / "baseagent" / "typical.log"


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


# Fixture sessions whose recordings hold prunes, compactions, drops or forced final turns,
# each read with its format's default profile (calibrated from the file).
RECORDED = [
    DATA / "baseagent" / "typical.log",
    DATA / "aiagent" / "log.log",
    DATA / "aiagent" / "debug.log",
    DATA / "aiagent" / "drop.stdout.log",
    DATA / "aiagent" / "drop.stderr.log",
]


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_replay_reproduces_every_recorded_decision_at_its_step(path: Path, capsys) -> None:
    data = run_json(capsys, "replay", str(path))
    assert STATS_KEYS | {"agreement", "disagreements"} <= data.keys()
    assert data["recorded_decisions"], "the fixture should record decisions"
    assert data["agreement"] == 1.0
    assert data["disagreements"] == []


def test_replay_of_one_runs_merged_streams_reproduces_its_decisions(capsys) -> None:
    streams = [str(DATA / "aiagent" / "drop.stdout.log"), str(DATA / "aiagent" / "drop.stderr.log")]
    data = run_json(capsys, "replay", "--merge", *streams)
    assert data["agreement"] == 1.0 and data["disagreements"] == []
    assert sorted(d["kind"] for d in data["recorded_decisions"]) == [
        "dropped",
        "dropped",
        "final_turn",
    ]
    # a limit above the first refusal only: the first output stays, the second is refused
    wider = run_json(capsys, "replay", "--merge", *streams, "--set", "context_window=26200")
    assert wider["dropped_tool_outputs"] == 1
    assert [f["step"] for f in wider["final_turns"]] == [3]
    # room for both: they stay, and the next request (9,613 + 6,100) fits too
    wide = run_json(capsys, "replay", "--merge", *streams, "--set", "context_window=30000")
    assert wide["dropped_tool_outputs"] == 0 and wide["final_turns"] == []
    assert wide["curve"][-1]["tokens"] == 9_613 + 2_600 + 3_500


def test_replay_under_other_settings_reports_the_disagreement(capsys) -> None:
    data = run_json(capsys, "replay", str(BASEAGENT_LOG), "--set", "compact_ratio=0.99")
    assert data["agreement"] < 1.0
    assert data["disagreements"]
    assert all({"step", "recorded", "replayed"} <= d.keys() for d in data["disagreements"])


def test_explain_names_the_limit_parts_and_a_setting_that_replay_confirms(capsys) -> None:
    items = run_json(capsys, "explain", str(AIAGENT_LOG))
    finals = [e for e in items if e["event"] == "final_turn"]
    assert finals, items
    final = finals[0]
    for key in (
        "step",
        "event",
        "reason",
        "projected_tokens",
        "limit_tokens",
        "limit_parts",
        "contributors",
        "avoid",
    ):
        assert key in final
    parts = final["limit_parts"]
    assert final["limit_tokens"] == parts["window"] - parts["buffer"] - parts["max_output"]
    assert final["projected_tokens"] > final["limit_tokens"]
    assert final["avoid"], "a setting should avoid the forced final turn"
    assert final["reproduced"] is True
    dropped = [e for e in items if e["event"] == "dropped_tool_output"]
    assert dropped and "fs__read" in dropped[0]["reason"]
    for entry in final["avoid"]:
        setting = f"{entry['setting']}={entry['value']}"
        replayed = run_json(capsys, "replay", str(AIAGENT_LOG), "--set", setting)
        assert not [f for f in replayed["final_turns"] if f["step"] <= final["step"]], setting
        # and the smallest change: one unit less does not avoid it
        step_back = entry["value"] - (1 if entry["value"] > entry["from"] else -1)
        if isinstance(entry["value"], int):
            again = run_json(
                capsys, "replay", str(AIAGENT_LOG), "--set", f"{entry['setting']}={step_back}"
            )
            assert [f for f in again["final_turns"] if f["step"] <= final["step"]], setting


def test_explain_confirms_no_change_for_an_event_replay_does_not_reproduce(capsys) -> None:
    """The console log says an output was dropped but not the projection that dropped it:
    replay under the same settings does not drop it, so every change would seem to avoid it;
    explain says so and suggests none (the forced final turn it does reproduce keeps its)."""
    log = DATA / "aiagent" / "console.log"
    items = run_json(capsys, "explain", str(log))
    dropped = next(e for e in items if e["event"] == "dropped_tool_output")
    assert dropped["reproduced"] is False and dropped["avoid"] == []
    replayed = run_json(capsys, "replay", str(log))
    assert not [d for d in replayed["disagreements"] if "dropped" in d["replayed"]]
    final = next(e for e in items if e["event"] == "final_turn")
    assert final["reproduced"] is True and final["avoid"]


def long_chat(tmp_path: Path) -> Path:
    """A chat with ten large tool outputs that mention files, commands and errors."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You fix bugs."},
        {"role": "user", "content": "The parser drops the last record; fix src/parser.py."},
    ]
    for i in range(10):
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {
                            "name": "bash",
                            "arguments": json.dumps({"command": f"cat f{i}.py"}),
                        },
                    }
                ],
            }
        )
        body = f"src/module_{i}.py:{i}: ValueError: bad record {i}\n" + "line of code\n" * 400
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": body})
    messages.append({"role": "assistant", "content": "Found it in read_records."})
    path = tmp_path / "long.json"
    path.write_text(json.dumps(messages))
    return path


def test_diff_shows_statuses_tokens_and_what_survived(capsys, tmp_path: Path) -> None:
    session = long_chat(tmp_path)
    row = run_json(capsys, "diff", str(session), "--action", "compact")
    assert row["action"] == "compact"
    assert row["tokens_after"] < row["tokens_before"]
    statuses = {m["status"] for m in row["messages"]}
    assert "summarized" in statuses and "added" in statuses
    assert 0.0 <= row["survived"]["score"] <= 1.0
    assert main(["diff", str(session), "--action", "compact"]) == 0
    text = capsys.readouterr().out
    assert "what survived" in text and "summarized" in text


def test_diff_on_a_log_of_figures_alone_says_it_cannot_simulate(capsys) -> None:
    """BaseAgent's stderr log gives the context's size but not its messages: a compaction
    there would be invented ("6,289 -> 94 tokens, 100% survived"), so it is refused."""
    assert main(["diff", str(BASEAGENT_LOG), "--action", "compact"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "cannot simulate" in captured.err and "no message content" in captured.err


def test_diff_starts_from_the_figure_the_dashboard_shows(capsys) -> None:
    """At a step with a reported figure, the action's "before" is that figure (system prompt
    and tools included), and the output says how each side was measured."""
    from ctx_inspect.app.config import build_profile
    from ctx_inspect.app.loader import load_session
    from ctx_inspect.formats import registry

    path = DATA / "claude_code" / "typical.jsonl"
    loaded = load_session(
        path, build_profile("claude-code"), format_spec=registry.detect(path), count_exact=False
    )
    step = next(s.step for s in loaded.session.steps if s.reported)
    shown = loaded.session.state_of(step)
    assert shown is not None
    row = run_json(capsys, "diff", str(path), "--action", "compact", "--step", str(step))
    assert row["tokens_before"] == shown.tokens
    assert "after: estimated" in row["figures"]


def test_diff_refuses_a_step_that_does_not_exist(capsys) -> None:
    assert main(["diff", str(BASEAGENT_LOG), "--step", "99"]) == 2
    assert "no such step" in capsys.readouterr().err


def test_sweep_rows_in_json_csv_and_table(capsys) -> None:
    args = ["sweep", str(BASEAGENT_LOG), "--vary", "compact_ratio=0.8,0.85,0.99", "--workers", "1"]
    table = run_json(capsys, *args)
    assert table["axes"] == ["compact_ratio"]
    rows = table["rows"]
    assert [r["settings"]["compact_ratio"] for r in rows] == [0.8, 0.85, 0.99]
    by_ratio = {r["settings"]["compact_ratio"]: r for r in rows}
    assert by_ratio[0.85]["agreement"] == 1.0  # the agent's own setting
    assert by_ratio[0.99]["compactions"] < by_ratio[0.85]["compactions"]
    assert main([*args, "--csv"]) == 0
    parsed = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [float(r["compact_ratio"]) for r in parsed] == [0.8, 0.85, 0.99]
    assert main(args) == 0
    assert "compactions" in capsys.readouterr().out


def test_sweep_in_parallel_gives_the_same_rows(capsys) -> None:
    args = ["sweep", str(BASEAGENT_LOG), "--vary", "compact_ratio=0.7:0.95:0.05"]
    one = run_json(capsys, *args, "--workers", "1")
    two = run_json(capsys, *args, "--workers", "2")
    assert one == two


def test_a_bad_sweep_value_is_a_row_error_not_a_crash(capsys) -> None:
    table = run_json(
        capsys, "sweep", str(BASEAGENT_LOG), "--vary", "compact_ratio=0.9,lots", "--workers", "1"
    )
    errors = [r for r in table["rows"] if r["error"]]
    assert len(errors) == 1 and "compact_ratio" in errors[0]["error"]
