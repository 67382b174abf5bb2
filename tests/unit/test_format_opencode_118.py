"""OpenCode 1.18 from our fixtures (tests/data/opencode/v118, written as 1.18 writes them): a
request the provider refused as too long and the overflow compaction after it, a compaction
whose summary failed; the logfmt log of two processes; the ``opencode run --format json``
stdout; the data folder; one run's files merged; replay of all that."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ctx_inspect.agents.opencode.reader_data import read_data, sniff_data
from ctx_inspect.agents.opencode.reader_db import read_database
from ctx_inspect.agents.opencode.reader_log import sniff_log
from ctx_inspect.agents.opencode.reader_run import OpenCodeRunParser, sniff_run
from ctx_inspect.cli import main
from ctx_inspect.core.model import (
    Compacted,
    Event,
    LogLine,
    MessageAdded,
    MessageKind,
    ParseIssue,
    Pruned,
    RequestRejected,
    SessionInfo,
    UsageReported,
)
from ctx_inspect.core.session import Session
from ctx_inspect.formats import registry
from ctx_inspect.formats.registry import Head
from tests.unit.test_format_opencode import build_db, kinds, of_type, read_log

V118 = Path(__file__).parents[1] / "data" / "opencode" / "v118"
REFUSAL = (
    "This model's maximum context length is 55000 tokens. However, your messages resulted in "
    "58210 tokens. Please reduce the length of the messages."
)
# the fixture's model: limit.context 64000, limit.output 8000 (usable 56,000); the provider
# refuses prompts over 55,000
SETTINGS = ("--set", "context_window=64000", "--set", "output_limit=8000")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return build_db(tmp_path / "opencode.db", storage=V118 / "storage")


@pytest.fixture
def folder(tmp_path: Path, db: Path) -> Path:
    """A data folder as OpenCode leaves it: opencode.db and log/."""
    (tmp_path / "log").mkdir()
    shutil.copy(V118 / "opencode.log", tmp_path / "log" / "opencode.log")
    return tmp_path


def sessions(path: Path) -> dict[str, list[Event]]:
    return {s.label: s.events for s in read_database(path)}


def run_stdout(data: bytes | None = None) -> list[Event]:
    parser = OpenCodeRunParser(0, "run.jsonl")
    return [*parser.feed((V118 / "run-2.stdout.jsonl").read_bytes() if data is None else data),
            *parser.finish()]  # fmt: skip


def cli_json(capsys: pytest.CaptureFixture[str], *args: str | Path) -> list[dict[str, Any]]:
    assert main([str(a) for a in args]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]


# ------------------------------------------------------------------------------------------
# The database


def test_a_refused_request_then_the_overflow_compaction(db: Path) -> None:
    events = sessions(db)["Overflow after a refused request"]
    order = kinds(events)
    refused_at = order.index("rejected")
    # the refused request: sent, refused, nothing answered (no usage, no figure)
    assert order[refused_at - 1 : refused_at + 4] == [
        "request",
        "rejected",
        "assistant:msg_o09",
        "compaction",
        "user:msg_o10",
    ]
    (refused,) = of_type(events, RequestRejected)
    assert refused.tokens is None and "overflow" in refused.reason  # not in the database
    (compaction,) = of_type(events, Compacted)
    assert (compaction.trigger, compaction.failed) == ("overflow", False)
    # before: the last ordinary request's tokens.total; after: the first one's prompt
    assert (compaction.tokens_before, compaction.tokens_after) == (48000, 7560)
    added = {e.message.id: e.message for e in of_type(events, MessageAdded)}
    assert not added["msg_o09"].visible
    assert added["msg_o10"].kind is MessageKind.META
    # the copy of the last user message OpenCode writes after the summary
    assert added["msg_o12"].kind is MessageKind.ATTACHMENT
    assert added["msg_o12"].text == added["msg_o05"].text
    session = Session()
    session.append(events)
    assert [s.rejected for s in session.steps] == [0] * 6 + [1] + [0] * 3
    # the refused request is not given a size of its own: it is anchored on the one before
    assert session.steps[6].reported is None and session.steps[6].tokens >= 48000


def test_a_compaction_whose_summary_failed(db: Path) -> None:
    events = sessions(db)["A compaction whose summary failed"]
    (failed,) = of_type(events, Compacted)
    assert (failed.trigger, failed.failed, failed.error) == ("auto", True, "Overloaded")
    assert (failed.tokens_before, failed.tokens_after) == (57940, None)
    session = Session()
    session.append(events)
    # nothing left the context
    assert [session.table.ids[i] for i in session.in_context()][:2] == ["msg_f01", "msg_f02"]


def test_stats_of_the_fixture(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    overflow, failed = cli_json(capsys, "stats", "--json", *SETTINGS, db)
    assert overflow["rejected_requests"] == [
        {
            "step": 7,
            "tokens": None,
            "limit": None,
            "reason": overflow["rejected_requests"][0]["reason"],
        }
    ]
    compactions = overflow["compactions"]
    figures = [
        (c["step"], c["trigger"], c["before_tokens"], c["after_tokens"]) for c in compactions
    ]
    assert figures == [(8, "overflow", 48000, 7560)]
    # the refused request reported no size: the peak is the last one reported before it
    assert (overflow["peak_step"], overflow["peak_context_tokens"]) == (6, 48000)
    assert overflow["peak_context_source"] == "reported"
    assert [(c["step"], c["failed"]) for c in failed["compactions"]] == [(2, True)]


# ------------------------------------------------------------------------------------------
# The log


def test_the_logfmt_log_of_two_processes() -> None:
    data = (V118 / "opencode.log").read_bytes()
    assert sniff_log(Head(path=Path("opencode.log"), data=data)) == 0.9
    events = read_log(data)
    assert not of_type(events, ParseIssue)
    assert kinds(events).count("request") == 10  # the conversation's model requests
    info = of_type(events, SessionInfo)
    assert (info[0].version, info[0].session_id) == ("1.18.33", "ses_O1verflow118")
    (refused,) = of_type(events, RequestRejected)
    assert (refused.tokens, refused.limit, refused.reason) == (58210, 55000, REFUSAL)
    attempts = of_type(events, Pruned)
    assert [(p.applied, p.tokens_recovered, p.scanned_tokens) for p in attempts] == [
        (False, 0, 20001),
        (False, 0, 10003),
    ]
    lines = of_type(events, LogLine)
    assert any(line.text.startswith("run=e5f6a7b8") for line in lines)  # the other process
    session = Session()
    session.append(events)
    assert session.steps[6].rejected == 1  # its refusal, though another process logged between


def test_a_prune_whose_count_record_was_lost() -> None:
    """1.18's writer is batched: a process that exits loses its last lines. A prune found above
    the minimum was applied (OpenCode marks then), its count unknown; prunes of two processes
    are told apart by ``run=``."""
    data = (
        b"timestamp=2026-11-25T16:02:12.304Z level=INFO run=aaaa message=pruning\n"
        b"timestamp=2026-11-25T16:02:12.305Z level=INFO run=bbbb message=pruning\n"
        b"timestamp=2026-11-25T16:02:12.319Z level=INFO run=aaaa message=found pruned=31561 "
        b"total=63126\n"
        b"timestamp=2026-11-25T16:02:12.320Z level=INFO run=bbbb message=found pruned=25000 "
        b"total=65000\n"
        b"timestamp=2026-11-25T16:02:12.409Z level=INFO run=aaaa message=pruned count=3\n"
    )
    attempts = of_type(read_log(data), Pruned)
    got = [(p.applied, p.tokens_recovered, p.scanned_tokens, p.outputs_pruned) for p in attempts]
    assert got == [(True, 31561, 63126, 3), (True, 25000, 65000, None)]
    assert attempts[0].timestamp == "2026-11-25T16:02:12.409000+00:00"


# ------------------------------------------------------------------------------------------
# The run stdout


def test_the_run_stdout() -> None:
    data = (V118 / "run-2.stdout.jsonl").read_bytes()
    assert sniff_run(Head(path=Path("run.jsonl"), data=data)) == 0.95
    events = run_stdout()
    order = kinds(events)
    assert order[order.index("rejected") - 1 :] == [
        "request", "rejected",
        "compaction", "request", "usage", "assistant:msg_o11",
        "request", "assistant:msg_o13", "usage", "tool:prt_msg_o131",
    ]  # fmt: skip
    (refused,) = of_type(events, RequestRejected)
    assert (refused.tokens, refused.limit) == (58210, 55000)
    (compaction,) = of_type(events, Compacted)
    # after a refusal, the next request is the overflow compaction's summarisation
    assert (compaction.trigger, compaction.tokens_before, compaction.tokens_after) == (
        "overflow",
        58210,
        7560,
    )
    summary = next(e for e in of_type(events, UsageReported) if e.usage.input == 3000)
    assert summary.thread == "compaction"
    counts = [u.context_tokens for u in of_type(events, UsageReported) if u.thread == "main"]
    assert counts == [27800, 37900, 48000, 7600]


def test_a_synthetic_continuation_marks_an_automatic_compaction() -> None:
    def line(kind: str, t: int, **data: Any) -> bytes:
        return json.dumps({"type": kind, "timestamp": t, "sessionID": "ses_x", **data}).encode()

    def usage(total: int, prompt: int, cached: int, output: int) -> dict[str, Any]:
        return {
            "total": total,
            "input": prompt - cached,
            "output": output,
            "reasoning": 0,
            "cache": {"read": cached, "write": 0},
        }

    tokens = usage(93495, 93457, 77851, 38)
    small = usage(5439, 5319, 0, 120)
    after = usage(18244, 18215, 2438, 29)
    data = (
        b"\n".join(
            [
                line("step_start", 1, part={"id": "s1", "messageID": "m1", "type": "step-start"}),
                line(
                    "step_finish",
                    2,
                    part={"messageID": "m1", "type": "step-finish", "tokens": tokens},
                ),
                line("step_start", 3, part={"id": "s2", "messageID": "m2", "type": "step-start"}),
                line("text", 4, part={"messageID": "m2", "type": "text", "text": "## Objective"}),
                line(
                    "step_finish",
                    5,
                    part={"messageID": "m2", "type": "step-finish", "tokens": small},
                ),
                line(
                    "text",
                    6,
                    part={
                        "messageID": "m3",
                        "type": "text",
                        "synthetic": True,
                        "metadata": {"compaction_continue": True},
                        "text": "Continue if you have next steps",
                    },
                ),
                line("step_start", 7, part={"id": "s4", "messageID": "m4", "type": "step-start"}),
                line(
                    "step_finish",
                    8,
                    part={"messageID": "m4", "type": "step-finish", "tokens": after},
                ),
                b"not json",
                b"null",
                b'{"no": "type"}',
                line("done", 9, reason="idle"),
            ]
        )
        + b"\n"
    )
    events = run_stdout(data)
    assert [k for k in kinds(events) if k not in ("issue", "log")][:8] == [
        "info", "request", "usage",
        "compaction", "request", "usage", "assistant:m2", "user:m3",
    ]  # fmt: skip
    (compaction,) = of_type(events, Compacted)
    assert (compaction.trigger, compaction.tokens_before, compaction.tokens_after) == (
        "auto",
        93495,
        18215,
    )
    added = {e.message.id: e.message for e in of_type(events, MessageAdded)}
    assert added["m2"].kind is MessageKind.SUMMARY
    assert added["m3"].kind is MessageKind.ATTACHMENT
    problems = of_type(events, ParseIssue)
    assert [p.line for p in problems] == [9, 10, 11]
    assert of_type(events, LogLine)[-1].tag == "done"


# ------------------------------------------------------------------------------------------
# The data folder and merged files


def test_the_data_folder(folder: Path) -> None:
    assert sniff_data(Head(path=folder, data=b"", is_dir=True)) == 0.97
    assert registry.detect(folder).name == "opencode-data"
    overflow, failed = read_data(folder)
    # the log's records of the session's time, in its order; the refusal gets the log's figures
    (refused,) = of_type(overflow.events, RequestRejected)
    assert (refused.tokens, refused.limit) == (58210, 55000)
    attempts = of_type(overflow.events, Pruned)
    assert [(p.applied, p.scanned_tokens) for p in attempts] == [(False, 20001), (False, 10003)]
    session = Session()
    session.append(overflow.events)
    assert len(session.steps) == 10  # the log's requests are the database's, counted once
    first = kinds(overflow.events).index("prune")
    assert kinds(overflow.events)[first + 1 :].index("user:msg_o05") >= 0  # end of T1, before T2
    assert not of_type(failed.events, Pruned)


def test_one_run_merged(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = [db, V118 / "opencode.log", V118 / "run-2.stdout.jsonl"]
    (merged,) = cli_json(capsys, "stats", "--json", *SETTINGS, "--merge", *files)
    assert merged["steps"] == 10 and merged["messages_total"] > 0
    assert [(r["step"], r["tokens"], r["limit"]) for r in merged["rejected_requests"]] == [
        (7, 58210, 55000)
    ]
    assert [(c["step"], c["trigger"]) for c in merged["compactions"]] == [(8, "overflow")]
    # the stdout and the log without the database: the stdout's steps and the log's others
    (streams,) = cli_json(capsys, "stats", "--json", "--merge", *files[1:])
    assert streams["steps"] == 10
    assert [(c["step"], c["trigger"], c["after_tokens"]) for c in streams["compactions"]] == [
        (8, "overflow", 7560)
    ]
    assert len(streams["rejected_requests"]) == 1  # the stdout's and the log's are one


def test_files_of_another_agent_are_not_merged(db: Path) -> None:
    other = Path(__file__).parents[1] / "data" / "goagent" / "log.log"
    assert main(["stats", "--merge", str(db), str(other)]) == 2


# ------------------------------------------------------------------------------------------
# Replay


def test_replay_reproduces_the_overflow_compaction(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    overflow, failed = cli_json(capsys, "replay", "--json", *SETTINGS, db)
    assert overflow["agreement"] == 1.0 and overflow["disagreements"] == []
    (compaction,) = overflow["compactions"]
    assert compaction["step"] == 8 and "refused the request as too long" in compaction["detail"]
    curve = {c["step"]: (c["tokens"], c["recorded"]) for c in overflow["curve"]}
    assert all(curve[s][0] == curve[s][1] for s in (1, 2, 3, 4, 5, 6, 7, 9, 10))
    assert abs(curve[8][0] - 7560) <= 50
    # a failed compaction is the agent's decision; the replay keeps the context as it was
    assert failed["agreement"] == 1.0
    (attempt,) = failed["compactions"]
    assert attempt["after_tokens"] is None and "summary failed" in attempt["detail"]
    assert [c["tokens"] for c in failed["curve"]] == [c["recorded"] for c in failed["curve"]]


def test_a_smaller_window_compacts_before_the_refusal(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With usable 44,000 OpenCode compacts after the request of 48,000: the request the
    provider refused is then much smaller and is not refused, so no overflow compaction."""
    overflow, _ = cli_json(
        capsys,
        "replay",
        "--json",
        "--set",
        "context_window=52000",
        "--set",
        "output_limit=8000",
        db,
    )
    steps = [(c["step"], c["detail"].split(":")[0]) for c in overflow["compactions"]]
    assert steps == [(7, "the last request's count 48,000 ≥ usable 44,000")]
    assert {"step": 8, "recorded": ["compaction"], "replayed": []} in overflow["disagreements"]
