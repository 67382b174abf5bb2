"""The real runs of the Go agent "ai" (tiancaiamao/ai @ 9fe2e37): every figure its data card
gives, read the way a user reads them (``stats --json``, ``replay --json``), and replay under
the card's settings reproducing every decision at its step with its figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctx_inspect.app.config import build_profile
from ctx_inspect.app.loader import LoadedSession, open_inputs
from ctx_inspect.cli import main
from ctx_inspect.core.model import Compacted, ContextMeasured, LogLine, ToolOutputChanged
from tests.corpus import real_runs

pytestmark = pytest.mark.corpus

CARD_SETTINGS = ["--set", "context_window=40000", "--set", "tool_output_max_bytes=16384"]
# step: (usage input, usage totalTokens), the assistant message_end of each request
REQUESTS = {
    1: (796, 804),
    2: (5309, 5317),
    3: (9518, 9526),
    4: (13774, 13801),
    5: (13961, 13969),
    6: (18183, 18191),
    7: (22697, 22705),
    8: (26905, 26931),
    9: (14071, 14095),
    10: (22550, 22559),
    11: (27064, 27084),
    12: (14152, 14172),
    13: (14190, 14198),
    14: (18399, 18407),
    15: (22655, 22663),
    16: (26877, 26886),
}
# the six attempts: (step, messages before, after, failed, the agent's figure when it decided)
ATTEMPTS = [
    (8, 15, None, True, 26824),  # 22705 + 4119 of the tool result after it
    (9, 16, 8, False, 26931),
    (11, 14, None, True, 26678),  # 22559 + 4119
    (12, 15, 8, False, 27084),
    (16, 17, None, True, 26782),  # 22663 + 4119
    (17, 18, None, True, 26886),  # after the last request
]
NOTHING = "failed to compact: nothing to compact"
TRUNCATED_AT = [2, 3, 4, 6, 7, 8, 10, 10, 11, 14, 15, 16]  # 12 of the 13 tool results


@pytest.fixture
def run(corpus: Path) -> Path:
    folder = real_runs(corpus, "goagent") / "window-threshold"
    if not folder.is_dir():
        pytest.skip(f"{folder} is not in this corpus")
    return folder


def session_file(run: Path) -> Path:
    (path,) = (run / "ai-dir" / "sessions" / "--srv-goai-ws--").glob("*.jsonl")
    return path


def log_file(run: Path) -> Path:
    return run / "ai-dir" / "ai-5558.log"


def cli_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main([*args, "--json"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1  # one session
    data: dict[str, Any] = json.loads(lines[0])
    return data


def load(*paths: Path, merge: bool = False) -> LoadedSession:
    def profile_for(spec: Any) -> Any:
        return build_profile(None, None, ["context_window=40000"], default=spec.default_profile)

    (loaded,) = open_inputs(list(paths), profile_for, count_exact=False, merge=merge)
    return loaded


def attempts_of(summary: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (c["step"], c["messages_before"], c["messages_after"], c["failed"], c["before_tokens"])
        for c in summary["compactions"]
    ]


# -- stdout ------------------------------------------------------------------------------------


def test_stdout_figures(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = cli_json(capsys, "stats", str(run / "stdout.jsonl"))
    assert data["format"] == "goagent-events" and data["steps"] == 16
    assert data["parse_issues"] == 0
    # the window is in none of the run files: said to be assumed, and how to give it
    assert data["context_window"] == 0
    assert "assumed: the input does not record the window" in data["context_window_source"]
    assert data["assumed_settings"]["context_window"] == 0
    assert attempts_of(data) == ATTEMPTS
    assert {c["trigger"] for c in data["compactions"]} == {"auto"}
    assert [c["error"] for c in data["compactions"] if c["failed"]] == [NOTHING] * 4
    # a successful auto-compaction shows from the next prompt's first request on
    assert [c["after_tokens"] for c in data["compactions"] if not c["failed"]] == [14071, 14152]
    assert data["truncated_tool_outputs"] == 12 and data["dropped_tool_outputs"] == 0
    assert data["rejected_requests"] == []
    # the live end is the agent's own figure: the last usage total, nothing after it
    assert data["final_context_tokens"] == 26886 and data["final_context_source"] == "reported"
    assert "last usage total" in data["final_context_note"]
    # the largest figure the agent measured: after step 11, before it compacted
    assert (data["peak_context_tokens"], data["peak_step"]) == (27084, 12)


def test_stdout_steps_are_the_reported_prompts(run: Path) -> None:
    loaded = load(run / "stdout.jsonl")
    steps = loaded.session.all_steps()
    assert len(steps) == 17  # 16 requests and the build-up after the last one
    for state in steps[:16]:
        usage = state.usage
        assert usage is not None
        assert (state.tokens, usage.total) == REQUESTS[state.step]
        assert state.origin.value == "reported"
    assert steps[16].tokens == 26886 and steps[16].request_event is None


def test_stdout_agent_figures_and_truncations(run: Path) -> None:
    session = load(run / "stdout.jsonl").session
    measured = {
        session.step_at(i): e.tokens
        for i, e in session.events_of(ContextMeasured)
        if isinstance(e, ContextMeasured)
    }
    for step, (_, total) in REQUESTS.items():
        trailing = measured[step + 1] - total
        assert trailing in (0, 23, 4118, 4119, 8237)  # bytes/4 of the tool results after it
    assert {s: measured[s] for s, *_ in ATTEMPTS} == {s: f for s, *_, f in ATTEMPTS}
    cuts = [
        (session.step_at(i), e)
        for i, e in session.events_of(ToolOutputChanged)
        if isinstance(e, ToolOutputChanged)
    ]
    assert [step for step, _ in cuts] == TRUNCATED_AT
    for _, cut in cuts:
        # 16,384 bytes kept of about 60,000 (the notice's own figures), with the notice
        assert cut.original_bytes is not None and 60_000 <= cut.original_bytes <= 60_289
        assert cut.final_bytes in (16_472, 16_473) and cut.tokens_after in (4118, 4119)
        assert cut.tokens == -(-cut.original_bytes // 4)
    (agent_end,) = [
        e
        for _, e in session.events_of(LogLine)
        if isinstance(e, LogLine) and e.span and e.span.line == 146
    ]
    assert agent_end.text == "agent_end (13 messages)"


def test_the_agents_list_loses_what_the_session_had_not_written(run: Path) -> None:
    session = load(run / "stdout.jsonl").session
    ids = [session.record(i).id for i in session.in_context(9)]
    # step 9: the seven kept messages (A2's prompt to its last tool result) and A3's prompt;
    # A2's final answer (stdout L65) was not in the session when it compacted: lost
    assert ids == ["L37", "L41", "L43", "L48", "L50", "L55", "L57", "L73"]
    assert [session.record(i).id for i in session.in_context(12)][:7] == [
        "L73",
        "L80",
        "L83",
        "L84",
        "L89",
        "L91",
        "L99",
    ]


# -- the log and the session file ------------------------------------------------------------


def test_log_figures(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = cli_json(capsys, "stats", str(log_file(run)))
    assert data["format"] == "goagent-log" and data["parse_issues"] == 0
    assert data["items_total"] == 36
    assert [
        (c["messages_before"], c["messages_after"], c["failed"]) for c in data["compactions"]
    ] == [
        (15, None, True),
        (16, 8, False),
        (14, None, True),
        (15, 8, False),
        (17, None, True),
        (18, None, True),
    ]
    session = load(log_file(run)).session
    levels = [e.level for _, e in session.events_of(LogLine) if isinstance(e, LogLine)]
    outcomes = [e for _, e in session.events_of(Compacted) if isinstance(e, Compacted)]
    # 36 lines: 32 INFO (30 plain, 2 successful outcomes), 4 ERROR (the failed outcomes)
    assert levels == ["INFO"] * 30
    assert sorted(e.failed for e in outcomes) == [False] * 2 + [True] * 4


def test_session_figures(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = session_file(run)
    data = cli_json(capsys, "stats", str(path))
    assert data["format"] == "goagent-session" and data["parse_issues"] == 0
    assert data["messages_total"] == 33 + 2  # 33 message entries; each compaction's summary
    assert data["steps"] == 16
    # the entries' own figures; the session does not say what triggered them
    assert [(c["step"], c["before_tokens"], c["after_tokens"]) for c in data["compactions"]] == [
        (9, 26824, 14071),  # entry L18, written before L19 but made after it
        (12, 27084, 14152),
    ]
    assert {c["trigger"] for c in data["compactions"]} == {"not recorded"}
    assert data["truncated_tool_outputs"] == 12
    assert data["final_context_tokens"] == 26886


def test_session_entries_in_the_order_the_agent_made_them(run: Path) -> None:
    session = load(session_file(run)).session
    first, second = (e for _, e in session.events_of(Compacted) if isinstance(e, Compacted))
    # kept: from firstKeptEntryId (37d604e0, L11) to the entry's parent (1146e149, L17)
    assert first.retained_ids == (
        "37d604e0", "c2360b60", "d0e54878", "d888c30b", "92dd28a4", "a57b91de", "1146e149"
    )  # fmt: skip
    assert second.retained_ids[0] == "eeb7b858" and len(second.retained_ids) == 7
    ids = [session.record(i).id for i in session.in_context(9)]
    # summarized: L3..L10 (8); lost: L19 (A2's answer, made before the compaction)
    assert "c59489c7" not in ids and ids[:7] == list(first.retained_ids)
    assert len(ids) == 7 + 1 + 1  # kept, the summary, A3's prompt
    (answer,) = [i for i in range(len(session.table)) if session.record(i).id == "c59489c7"]
    assert session.record(answer).step_added == 9 and session.record(answer).step_removed == 9


# -- --merge ----------------------------------------------------------------------------------


@pytest.mark.parametrize("streams", ["stdout+log+session", "session+log", "stdout+session"])
def test_merged_streams_make_one_session(
    run: Path, streams: str, capsys: pytest.CaptureFixture[str]
) -> None:
    files = {"stdout": run / "stdout.jsonl", "log": log_file(run), "session": session_file(run)}
    paths = [str(files[name]) for name in streams.split("+")]
    data = cli_json(capsys, "stats", "--merge", *CARD_SETTINGS, *paths)
    assert data["steps"] == 16  # one request per model call
    assert data["messages_total"] == 33 + 2  # each message once, and the two summaries
    assert data["truncated_tool_outputs"] == 12
    assert data["context_window"] == 40000
    assert data["context_window_source"] == "profile goagent, set by the user"
    # every attempt once (the session records only two, the log has no figures), with the
    # figure the agent compared and its trigger
    assert attempts_of(data) == ATTEMPTS
    assert {c["trigger"] for c in data["compactions"]} == {"auto"}
    assert data["final_context_tokens"] == 26886


# -- replay -----------------------------------------------------------------------------------


def test_replay_under_the_cards_settings_reproduces_every_decision(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = cli_json(capsys, "replay", *CARD_SETTINGS, str(run / "stdout.jsonl"))
    assert data["agreement"] == 1.0 and data["disagreements"] == []
    assert data["threshold_tokens"] == 23616
    requests = [c for c in data["curve"] if not c.get("live_end")]
    assert [c["recorded"] for c in requests] == [REQUESTS[s][0] for s in range(1, 17)]
    assert all(c["tokens"] == c["recorded"] for c in data["curve"])  # the same figures
    # after the last request: the figure stats ends on
    assert (data["curve"][-1]["step"], data["final_context_tokens"]) == (17, 26886)
    replayed = [
        (c["step"], c["before_tokens"], c["after_tokens"], c["failed"]) for c in data["compactions"]
    ]
    assert replayed == [
        (8, 26824, None, True),
        (9, 26931, 14071, False),
        (11, 26678, None, True),
        (12, 27084, 14152, False),
        (16, 26782, None, True),
        (17, 26886, None, True),
    ]
    # a failed attempt: the agent decided; whether its compactor fails depends on what its
    # session writer had written, which replay cannot see: it follows the recording
    assert all("failed in the recording" in c["detail"] for c in data["compactions"] if c["failed"])
    assert all("taken from here on" in c["detail"] for c in data["compactions"] if not c["failed"])
    assert data["truncated_tool_outputs"] == 12
    recorded = data["recorded_decisions"]
    assert sum(d["kind"] == "compaction" and d.get("failed", False) for d in recorded) == 4


def test_replay_of_every_stream_agrees(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = session_file(run)
    data = cli_json(capsys, "replay", *CARD_SETTINGS, str(path))
    assert data["agreement"] == 1.0
    # the session keeps only the compactions that succeeded: the replayed attempts at the
    # other steps are not differences, and replay says why
    assert data["disagreements"] == []
    replayed = [u for u in data["undetermined"] if not u["recorded"]]
    assert [(u["step"], u["kind"]) for u in replayed] == [
        (8, "compaction"), (11, "compaction"), (16, "compaction"), (17, "compaction")
    ]  # fmt: skip
    assert all("session file keeps" in u["reason"] for u in replayed)
    # and it does not say what caused the two it keeps: replay takes them, not judging them
    recorded = [u for u in data["undetermined"] if u["recorded"]]
    assert [(u["step"], u["kind"]) for u in recorded] == [(9, "compaction"), (12, "compaction")]
    assert all("does not say what caused" in u["reason"] for u in recorded)
    merged = cli_json(
        capsys, "replay", "--merge", *CARD_SETTINGS, str(session_file(run)), str(log_file(run))
    )
    assert merged["agreement"] == 1.0 and merged["disagreements"] == []
    assert merged["undetermined"] == []
    assert all(c["tokens"] == c["recorded"] for c in merged["curve"])


def test_replay_of_the_log_alone_says_it_has_nothing_to_replay_from(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The log names the six attempts but holds no request and no message: replay cannot
    decide them, and says so instead of counting six disagreements."""
    data = cli_json(capsys, "replay", *CARD_SETTINGS, str(log_file(run)))
    assert data["disagreements"] == []
    assert len(data["undetermined"]) == len(ATTEMPTS)
    assert all(u["recorded"] and "neither a request nor a message" in u["reason"]
               for u in data["undetermined"])  # fmt: skip


def test_replay_with_the_default_window_says_it_is_assumed(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = cli_json(capsys, "replay", str(run / "stdout.jsonl"))
    assert "assumed" in data["context_window_source"] and data["threshold_tokens"] == 8000
    # with the 50 KiB default, outputs the agent cut at 16 KiB would be kept to 50 KiB: the
    # recording lacks the rest, which is sized, not shown
    assert data["curve"][1]["tokens"] > data["curve"][1]["recorded"] + 8000


def test_explain_names_the_figure_the_agent_compared(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", "--json", *CARD_SETTINGS, str(run / "stdout.jsonl")]) == 0
    items = json.loads(capsys.readouterr().out)
    # every attempt, the failed ones too: the agent decided at that figure
    assert [(i["step"], i["projected_tokens"]) for i in items] == [
        (step, figure) for step, *_, figure in ATTEMPTS
    ]
    assert {i["limit_tokens"] for i in items} == {23616}
    assert all(i["reproduced"] for i in items)
    first = items[0]
    assert "failed (failed to compact: nothing to compact)" in first["reason"]
    # the smallest window that keeps 26,824 under the limit: 26,825 + 16,384 reserve
    window = next(a for a in first["avoid"] if a["setting"] == "context_window")
    assert (window["value"], window["confirmed"]) == (43209, True)
