"""The Go agent's runs its data card describes beyond the real one, as fixtures in its formats
(stdout, log, session): a resumed session that overflows, a recovery after the provider refused
a request (with the loop's tool summaries and a debug log), the 8,000 max_tokens limit. Read as
a user reads them (``stats``, ``replay``, ``--merge``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctx_inspect.cli import main

DATA = Path(__file__).parents[1] / "data" / "goagent"
FALLBACK = DATA / "maxtokens-fallback"
RECOVERY = DATA / "overflow-recovery-toolsummary"
RESUME = DATA / "resume-overflow"
RESUME_SESSION = RESUME / "c3d9e1f0-7a2b-4c58-9e16-2f4a8b0d6c71.jsonl"
RECOVERY_SETTINGS = [
    *("--set", "context_window=60000"),
    *("--set", "keep_recent_tokens=2000"),
    *("--set", "tool_call_cutoff=4"),
    *("--set", "tool_output_max_lines=300"),
    *("--set", "tool_output_max_bytes=20480"),
]
RESUME_SETTINGS = ["--set", "context_window=40000", "--set", "tool_output_max_bytes=16384"]
NOTHING = "failed to compact: nothing to compact"
REFUSAL = (
    "context length exceeded (400): This model's maximum context length is 40000 tokens. "
    "However, your messages resulted in 42015 tokens."
)


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main([*args, "--json"]) == 0
    (line,) = capsys.readouterr().out.strip().splitlines()
    data: dict[str, Any] = json.loads(line)
    return data


def attempts(data: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (c["step"], c["trigger"], c["before_tokens"], c["failed"], c["error"])
        for c in data["compactions"]
    ]


# -- maxtokens-fallback: no window, so the 8,000 max_tokens limit ------------------------------


def test_without_a_window_the_max_tokens_limit_decides(capsys: pytest.CaptureFixture[str]) -> None:
    data = cli(capsys, "stats", str(FALLBACK / "stdout.jsonl"))
    assert data["context_window"] == 0 and "assumed" in data["context_window_source"]
    assert data["threshold_tokens"] == 8000 and data["steps"] == 7
    # the second read's result was not written when the agent compacted: nothing to cut;
    # at the prompt's end it compacts (the answer, not written yet, is lost)
    assert attempts(data) == [
        (6, "auto", 9099, True, NOTHING),
        (7, "auto", 9112, False, None),
    ]
    assert [c["after_tokens"] for c in data["compactions"]] == [None, 5002]
    assert data["truncated_tool_outputs"] == 4  # 12,000-byte files cut at 8,192


def test_the_fallback_replays_with_the_cards_setting(capsys: pytest.CaptureFixture[str]) -> None:
    stdout = str(FALLBACK / "stdout.jsonl")
    data = cli(capsys, "replay", "--set", "tool_output_max_bytes=8192", stdout)
    assert data["agreement"] == 1.0 and data["disagreements"] == []
    assert [(c["step"], c["before_tokens"], c["after_tokens"]) for c in data["compactions"]] == [
        (6, 9099, None),
        (7, 9112, 5002),
    ]
    assert all(c["tokens"] == c["recorded"] for c in data["curve"])
    # with the default 50 KiB the outputs would not have been cut: no truncation decisions,
    # the whole outputs restored at their size (their text past the cut is not recorded)
    wide = cli(capsys, "replay", stdout)
    assert wide["truncated_tool_outputs"] == 0
    assert wide["curve"][1]["tokens"] - wide["curve"][1]["recorded"] > 900


def test_the_fallbacks_streams_merge(capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(FALLBACK / name) for name in ("stdout.jsonl", "ai-7312.log", "session.jsonl")]
    data = cli(capsys, "stats", "--merge", *files)
    assert data["steps"] == 7 and data["messages_total"] == 14 + 1  # and the summary
    assert attempts(data) == [
        (6, "auto", 9099, True, NOTHING),
        (7, "auto", 9112, False, None),
    ]
    replay = cli(capsys, "replay", "--merge", "--set", "tool_output_max_bytes=8192", *files)
    assert replay["agreement"] == 1.0 and replay["disagreements"] == []


# -- overflow-recovery-toolsummary: the provider's window is smaller than the agent's -------


def test_a_refused_request_and_its_recovery(capsys: pytest.CaptureFixture[str]) -> None:
    data = cli(capsys, "stats", *RECOVERY_SETTINGS, str(RECOVERY / "stdout.jsonl"))
    assert data["steps"] == 11  # ten answered requests and the refused one
    assert [r["step"] for r in data["rejected_requests"]] == [9]
    (recovery,) = data["compactions"]
    assert (recovery["step"], recovery["trigger"], recovery["failed"]) == (
        10,
        "context_limit_recovery",
        False,
    )
    assert (recovery["messages_before"], recovery["messages_after"]) == (17, 10)
    assert recovery["after_tokens"] == 14739  # the retried request
    assert data["truncated_tool_outputs"] == 7  # 1,000 lines cut to 300, head and tail


def test_the_debug_log_names_every_request(capsys: pytest.CaptureFixture[str]) -> None:
    data = cli(capsys, "stats", str(RECOVERY / "ai-6120.log"))
    assert data["steps"] == 11  # "[Loop] Sending messages to LLM", the refused one too
    # a successful recovery leaves only the loop's events in the log: the ninth was refused
    assert [r["step"] for r in data["rejected_requests"]] == [9]
    assert [(c["step"], c["trigger"], c["failed"]) for c in data["compactions"]] == [
        (10, "context_limit_recovery", False)
    ]
    # a log of requests alone has no figures: none is made up
    assert data["compactions"][0]["before_tokens"] is None


def test_the_recovery_replays(capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(RECOVERY / name) for name in ("stdout.jsonl", "ai-6120.log", "session.jsonl")]
    merged = cli(capsys, "stats", "--merge", *RECOVERY_SETTINGS, *files)
    assert merged["steps"] == 11 and len(merged["rejected_requests"]) == 1
    assert [(c["step"], c["trigger"]) for c in merged["compactions"]] == [
        (10, "context_limit_recovery")
    ]
    for args in (files[:1], ["--merge", *files]):
        data = cli(capsys, "replay", *RECOVERY_SETTINGS, *args)
        assert data["agreement"] == 1.0 and data["disagreements"] == []
        (recovery,) = data["compactions"]
        assert recovery["step"] == 10 and recovery["after_tokens"] == 14739
        # the refused request as replayed: the agent's whole list, no tool summary yet
        assert recovery["before_tokens"] == data["curve"][8]["request"] > 20000
        # the step shows what the session shows: the agent's own figure there (its list
        # with the loop's tool summaries, which no file shows)
        assert data["curve"][8]["tokens"] == data["curve"][8]["recorded"] < 20000
        assert "the provider refused the request" in recovery["detail"]
        # the loop summarizes tool outputs in its own list: no file shows it
        undetermined = data["undetermined"]
        assert [(u["step"], u["kind"]) for u in undetermined] == [(7, "prune"), (8, "prune")]
        assert all("running loop" in u["reason"] for u in undetermined)


def test_a_session_does_not_say_why_it_compacted(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(RECOVERY / "session.jsonl")
    stats = cli(capsys, "stats", *RECOVERY_SETTINGS, path)
    assert stats["steps"] == 10  # the refused request is not in the session
    assert [(c["step"], c["trigger"]) for c in stats["compactions"]] == [(9, "not recorded")]
    data = cli(capsys, "replay", *RECOVERY_SETTINGS, path)
    # the replayed agent would not compact here on its own: a cause the session does not
    # record is not a difference; the replay follows the recording from there
    assert data["agreement"] == 1.0 and data["disagreements"] == []
    recorded = next(u for u in data["undetermined"] if u["recorded"])
    assert (recorded["step"], recorded["kind"]) == (9, "compaction")
    assert "does not say what caused" in recorded["reason"]
    assert data["curve"][8]["tokens"] == data["curve"][8]["recorded"] == 14739


# -- resume-overflow ----------------------------------------------------------------------


def test_a_resumed_session_that_overflows(capsys: pytest.CaptureFixture[str]) -> None:
    data = cli(capsys, "stats", *RESUME_SETTINGS, str(RESUME / "stdout.jsonl"))
    assert data["steps"] == 10 and [r["step"] for r in data["rejected_requests"]] == [10]
    assert attempts(data) == [
        (6, "auto", 25517, False, None),  # during the prompt: its requests do not shrink
        (7, "auto", 29642, True, NOTHING),  # no user message after the compaction to cut at
        (8, "auto", 33767, True, NOTHING),
        (9, "auto", 37892, True, NOTHING),
        (10, "auto", 42017, True, NOTHING),
        (11, "context_limit_recovery", 42017, True, "nothing to compact"),
        (11, "auto", 42017, True, NOTHING),  # the turn that failed ends too
    ]
    assert data["compactions"][0]["after_tokens"] == 25515  # the next request, not shrunk


def test_the_log_gives_the_providers_figures(capsys: pytest.CaptureFixture[str]) -> None:
    data = cli(capsys, "stats", str(RESUME / "ai-6043.log"))
    (refused,) = data["rejected_requests"]
    assert (refused["tokens"], refused["limit"], refused["reason"]) == (42015, 40000, REFUSAL)


def test_the_resumed_runs_streams_make_one_session(capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(RESUME / "stdout.jsonl"), str(RESUME / "ai-6043.log"), str(RESUME_SESSION)]
    data = cli(capsys, "stats", "--merge", *RESUME_SETTINGS, *files)
    # the session's history (two requests of the earlier invocation), then this one's ten
    assert data["steps"] == 12 and data["messages_total"] == 4 + 19 + 1
    (refused,) = data["rejected_requests"]  # once, with the provider's figures
    assert (refused["step"], refused["tokens"], refused["limit"]) == (12, 42015, 40000)
    assert [c["step"] for c in data["compactions"]] == [8, 9, 10, 11, 12, 13, 13]
    for args in (files[:1], ["--merge", *files]):
        replay = cli(capsys, "replay", *RESUME_SETTINGS, *args)
        assert replay["agreement"] == 1.0 and replay["disagreements"] == []
        recovery = next(c for c in replay["compactions"] if "recovery" in c["detail"])
        assert recovery["failed"] and recovery["step"] == replay["steps"] + 1
    assert "refused the request (42,015 tokens)" in recovery["detail"]
    assert recovery["before_tokens"] == 42015  # the provider's own figure
