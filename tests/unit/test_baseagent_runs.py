"""BaseAgent runs of our own making, for behaviours its data card describes without a file: a
compaction whose summarizer call fails (``tests/data/baseagent/compaction-fail``, written as
BaseAgent @ bcb9023 writes its stderr and stdout on that path), and a summarizer's empty answer
(``typical.log``). Read the way a user reads them (``stats --json``, ``replay --json``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctx_inspect.app.config import build_profile
from ctx_inspect.app.loader import open_inputs
from ctx_inspect.cli import main
from ctx_inspect.core.model import Compacted, LogLine, RequestSent
from ctx_inspect.core.session import Session

DATA = Path(__file__).parents[1] / "data" / "baseagent"
FAIL = DATA / "compaction-fail"
STDERR = FAIL / "run.stderr.log"
STDOUT = FAIL / "run.stdout.jsonl"
ERROR = (
    'litellm.InternalServerError: InternalServerError: OpenrouterException - {"error": '
    '{"message": "summarizer overloaded", "type": "server_error", "code": 500}}'
)
FIGURES = [
    5401, 25637, 45871, 66108, 86342, 106579, 126813,
    147050,  # 8: over the threshold; the summarizer call raised, the request went out as it was
    152131,  # 9: the summarisation call of iteration 9
    5612,  # 10: iteration 9's own request, after the compaction
    5798, 6301,
]  # fmt: skip


def cli_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main([args[0], "--json", *args[1:]]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


def stats(capsys: pytest.CaptureFixture[str], *paths: Path) -> dict[str, Any]:
    extra = ["--merge"] if len(paths) > 1 else []
    return cli_json(capsys, "stats", *extra, *map(str, paths))


def replay(capsys: pytest.CaptureFixture[str], *paths: Path) -> dict[str, Any]:
    extra = ["--merge"] if len(paths) > 1 else []
    return cli_json(capsys, "replay", *extra, *map(str, paths))


def session(*paths: Path) -> Session:
    (loaded,) = open_inputs(
        list(paths),
        lambda spec: build_profile(None, default=spec.default_profile),
        merge=len(paths) > 1,
    )
    return loaded.session


def test_a_failed_summarizer_call_is_an_attempt_of_the_iterations_request(
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = stats(capsys, STDERR)
    # 11 iterations and the one summarisation call that was answered: the client's count
    assert data["steps"] == 12 == session(STDERR).info["requests"]
    assert [s.tokens for s in session(STDERR).steps] == FIGURES
    failed, done = data["compactions"]
    assert failed == {
        "step": 8,
        "trigger": "auto",
        "before_tokens": 147_050,
        "after_tokens": 147_050,  # BaseAgent's result line: nothing was removed
        "messages_before": None,
        "messages_after": None,
        "failed": True,
        "error": ERROR,
    }
    assert (done["step"], done["before_tokens"], done["after_tokens"]) == (9, 152_131, 5_612)
    assert (done["messages_before"], done["messages_after"], done["failed"]) == (69, 2, False)
    # the skipped prunes of both attempts are no prunes
    assert data["prunes"] == []
    assert data["peak_context_tokens"] == 152_131 and data["peak_step"] == 9
    # the request of the failed attempt's iteration carried the whole context
    steps = session(STDERR).steps
    assert (steps[7].tokens, steps[7].compactions) == (147_050, 1)
    assert steps[7].request_event is not None


def test_the_failed_attempt_in_the_log_events() -> None:
    events = list(session(STDERR).events())
    requests = [e for e in events if isinstance(e, RequestSent)]
    assert [r.request_id for r in requests if r.compaction] == ["compaction-9"]
    compactions = [e for e in events if isinstance(e, Compacted)]
    assert [(c.failed, c.error) for c in compactions] == [(True, ERROR), (False, None)]
    # the failed one is in the build-up of its iteration's request; the other answers its call
    first, second = (events.index(c) for c in compactions)
    assert [r.request_id for r in requests[6:8]] == ["iteration-7", "iteration-8"]
    assert events.index(requests[6]) < first < events.index(requests[7])
    call = events[second - 1]
    assert isinstance(call, RequestSent) and call.compaction


def test_merged_with_the_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    alone = stats(capsys, STDERR)
    merged = stats(capsys, STDOUT, STDERR)
    for key in ("steps", "compactions", "prunes", "zone_crossings", "peak_context_tokens"):
        assert merged[key] == alone[key], key
    assert merged["parse_issues"] == 0 and merged["context_note"] == ""
    assert [s.tokens for s in session(STDOUT, STDERR).steps] == FIGURES
    # 11 texts, 59 calls and results, one self-verification prompt
    assert merged["messages_total"] == 130
    # LiteLLM's notice, printed on stdout while the summarizer call failed, is a log line of
    # the failed attempt's iteration, before its request
    events = list(session(STDOUT, STDERR).events())
    notice = next(e for e in events if isinstance(e, LogLine) and "Give Feedback" in e.text)
    assert notice.level == "foreign" and "\x1b" not in notice.text
    request = next(
        e for e in events if isinstance(e, RequestSent) and e.request_id == "iteration-8"
    )
    failed = next(e for e in events if isinstance(e, Compacted) and e.failed)
    assert events.index(failed) < events.index(notice) < events.index(request)


@pytest.mark.parametrize("paths", [(STDERR,), (STDOUT, STDERR)], ids=["stderr", "merged"])
def test_replay_counts_the_failed_attempt_as_a_decision(
    capsys: pytest.CaptureFixture[str], paths: tuple[Path, ...]
) -> None:
    data = replay(capsys, *paths)
    assert data["agreement"] == 1.0 and data["disagreements"] == []
    recorded = [(d["step"], d["kind"], d["failed"]) for d in data["recorded_decisions"]]
    assert recorded == [(8, "compaction", True), (9, "compaction", False)]
    assert data["recorded_decisions"][0]["detail"] == f"auto (failed: {ERROR})"
    # replay decides to compact where the agent did, and follows the recorded failure: the
    # context stays as it was, so the next iteration overflows and compacts again
    assert [(c["step"], c["failed"]) for c in data["compactions"]] == [(8, True), (9, False)]
    # (a failed attempt has no "after": nothing was compacted)
    assert [(c["before_tokens"], c["after_tokens"]) for c in data["compactions"]] == [
        (147_050, None),
        (152_131, 5_612),
    ]
    # one point per request, then (merged: the last answer's usage) the live end, anchored
    requests = [c for c in data["curve"] if not c.get("live_end")]
    assert [c["tokens"] for c in requests] == FIGURES
    assert data["final_context_tokens"] == data["curve"][-1]["tokens"]


def test_an_empty_summary_is_a_request_and_the_request_after_it_is_not_managed_again(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = DATA / "typical.log"
    data = replay(capsys, path)
    assert data["agreement"] == 1.0 and data["disagreements"] == []
    recorded = [(d["step"], d["kind"], d["failed"]) for d in data["recorded_decisions"]]
    assert (5, "compaction", True) in recorded
    # step 5 is the summarisation call that got an empty answer; step 6 is its iteration's own
    # request, at the same figure over the threshold: BaseAgent's management for it was done
    steps = session(path).steps
    assert steps[4].tokens == steps[5].tokens == 150_000
    assert not [c for c in data["compactions"] if c["step"] == 6]


def test_explain_gives_the_failed_attempt_and_its_figure(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["explain", "--json", str(STDERR)]) == 0
    items: list[dict[str, Any]] = json.loads(capsys.readouterr().out)
    assert [(i["step"], i["event"]) for i in items] == [(8, "compaction"), (9, "compaction")]
    failed = items[0]
    assert failed["reason"] == f"auto compaction, failed ({ERROR})"
    assert (failed["projected_tokens"], failed["limit_tokens"]) == (147_050, 142_800)
    # 0.87 x 168,000 = 146,160 still decides to compact at 147,050; 0.88 does not
    assert {a["setting"]: a["value"] for a in failed["avoid"]}["compact_ratio"] == 0.88
    for change in failed["avoid"]:
        args = ["replay", "--json", "--set", f"{change['setting']}={change['value']}", str(STDERR)]
        assert main(args) == 0
        replayed = json.loads(capsys.readouterr().out)
        assert not [c for c in replayed["compactions"] if c["step"] <= 8], change
