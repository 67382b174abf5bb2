"""One session, one set of figures: for every real run (``realruns``) under its data card's
settings, the figure ``stats`` shows at each step (``--steps``, the dashboard's) is the one
``replay`` records there, and the replayed figure too wherever the replay made the agent's own
decisions; where it did not, the replayed figure says it is estimated. The tune screen replays
through the same path (``commands.replay_read`` on the session as ``replay`` reads it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from ctx_inspect.app.commands import replay_read
from ctx_inspect.app.config import build_summarizer
from ctx_inspect.app.sweeper import SweepInput, load_for_sweep
from ctx_inspect.cli import main
from ctx_inspect.ui.screens.tune_screen import curve
from tests.corpus import real_runs


class Run(NamedTuple):
    agent: str
    inputs: tuple[str, ...]  # globs under the agent's real runs, one file each
    sets: tuple[str, ...] = ()  # the data card's settings

    @property
    def merge(self) -> bool:
        return len(self.inputs) > 1


CODEX_60K = ("model_auto_compact_token_limit=60000",)
GOAGENT = ("context_window=40000", "tool_output_max_bytes=16384")
OPENCODE = ("context_window=100000", "output_limit=8000")
CLAUDE_150K = ("autocompact_window=150000",)


def streams(agent: str, runs: tuple[str, ...], stdout: str) -> dict[str, Run]:
    """Each run's stderr log, its stdout, and both merged."""
    out = {}
    for run in runs:
        for stream, files in (
            ("stderr", (f"{run}/run.stderr.log",)),
            ("stdout", (f"{run}/{stdout}",)),
            ("merged", (f"{run}/{stdout}", f"{run}/run.stderr.log")),
        ):
            out[f"{agent}-{run}-{stream}"] = Run(agent, files)
    return out


CC_SESSION = "claude-config/projects/*/*.jsonl"
ROLLOUT = "codex-home/sessions/*/*/*/*.jsonl"
OPENCODE_DATA = "prune-autocompact-serve/xdg-data/opencode"

RUNS = {
    "claude-code-autocompact": Run(
        "claude-code", (f"autocompact-threshold/{CC_SESSION}",), CLAUDE_150K
    ),
    "claude-code-autocompact-stream": Run(
        "claude-code", ("autocompact-threshold/stream-json.stdout.jsonl",), CLAUDE_150K
    ),
    "claude-code-manual": Run("claude-code", (f"manual-compact-resume/{CC_SESSION}",)),
    "claude-code-subagent": Run("claude-code", (f"subagent-foreground/{CC_SESSION}",)),
    "codex-autocompact": Run("codex", (f"autocompact-limit60k/{ROLLOUT}",), CODEX_60K),
    "codex-autocompact-exec": Run(
        "codex", ("autocompact-limit60k/exec-json.stdout.jsonl",), CODEX_60K
    ),
    "codex-manual": Run("codex", (f"manual-compact-tui/{ROLLOUT}",)),
    "codex-exceeded": Run(
        "codex",
        (f"context-exceeded-then-manual-compact/{ROLLOUT}",),
        ("model_auto_compact_token_limit=50000",),
    ),
    "goagent-stdout": Run("goagent", ("window-threshold/stdout.jsonl",), GOAGENT),
    "goagent-session": Run("goagent", ("window-threshold/ai-dir/sessions/*/*.jsonl",), GOAGENT),
    "opencode-db": Run("opencode", (f"{OPENCODE_DATA}/opencode.db",), OPENCODE),
    "opencode-log": Run("opencode", (f"{OPENCODE_DATA}/log/*.log",), OPENCODE),
    **streams("baseagent", ("short", "compaction", "prune"), "run.stdout.jsonl"),
    **streams("ai-agent", ("short", "guard-preflight", "guard-store"), "run.stdout.log"),
}


def paths_of(corpus: Path, run: Run) -> list[Path]:
    folder = real_runs(corpus, run.agent)
    out = []
    for pattern in run.inputs:
        found = sorted(folder.glob(pattern))
        if len(found) != 1:
            pytest.skip(f"{folder / pattern} is not one file of this corpus")
        out.append(found[0])
    return out


def cli_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main([*args, "--json"]) == 0
    (line,) = capsys.readouterr().out.strip().splitlines()  # one session
    data: dict[str, Any] = json.loads(line)
    return data


def options(run: Run) -> list[str]:
    return [*(["--merge"] if run.merge else []), *(p for s in run.sets for p in ("--set", s))]


@pytest.mark.corpus
@pytest.mark.parametrize("name", sorted(RUNS))
def test_stats_and_replay_show_the_same_figure_at_every_step(
    corpus: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    run = RUNS[name]
    files = [str(p) for p in paths_of(corpus, run)]
    stats = cli_json(capsys, "stats", "--steps", *options(run), *files)
    played = cli_json(capsys, "replay", *options(run), *files)
    shown = stats["context_per_step"]
    points = played["curve"]
    # the same steps (the requests, then the build-up after the last one when stats shows it)
    assert [p["step"] for p in points] == [s["step"] for s in shown]
    assert played["steps"] == stats["steps"]
    assert [bool(p.get("live_end")) for p in points] == [bool(s.get("live_end")) for s in shown]
    # what replay says was recorded is what stats shows
    assert [p["recorded"] for p in points] == [s["tokens"] for s in shown]
    assert played["agreement"] == 1.0
    # the replayed figure: the recorded one, with its source, up to where the replay first
    # decided otherwise (then said why); after it, the recorded one or labelled estimated
    disagreements = played["disagreements"]
    assert all(d.get("reason") for d in disagreements)
    first = disagreements[0]["step"] if disagreements else None
    for point, step in zip(points, shown, strict=True):
        if first is None or point["step"] < first:
            assert (point["tokens"], point["source"]) == (step["tokens"], step["source"]), point
        elif point["tokens"] != point["recorded"]:
            assert point["source"] == "estimated", point
    if first is None:
        keys = ("peak_context_tokens", "peak_step", "peak_context_source", "final_context_tokens")
        assert {k: played[k] for k in keys} == {k: stats[k] for k in keys}
        assert played["final_context_source"] == stats["final_context_source"]


@pytest.mark.corpus
@pytest.mark.parametrize(
    "name", ["codex-autocompact", "opencode-db", "ai-agent-guard-store-stderr", "goagent-stdout"]
)
def test_the_tune_screen_replays_as_the_replay_command(
    corpus: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """The tune screen reads the session as ``replay`` does (``load_for_sweep`` of its
    ``SweepInput``) and replays through ``replay_read``: the curve it draws is replay's."""
    run = RUNS[name]
    files = paths_of(corpus, run)
    played = cli_json(capsys, "replay", *options(run), *map(str, files))
    session, profile = load_for_sweep(
        SweepInput(tuple(files), None, None, None, run.sets, merge=run.merge)
    )
    result = replay_read(session, profile, profile, build_summarizer(None))
    assert [(p.step, p.tokens) for p in curve(result)] == [
        (p["step"], p["tokens"]) for p in played["curve"]
    ]
    assert result.peak() == (played["peak_step"], played["peak_context_tokens"])
