"""Claude Code's behaviours that the data card describes and no real file here shows, on our
fixtures in its format: a compaction after the provider refused a request as too long
(``reactive-prompt-too-long``), and 2.0's refusal shown to the user, who then runs
``/compact`` (``prompt-too-long-error``). Read as a user reads them: ``stats`` and ``replay``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from ctx_inspect.cli import main

DATA = Path(__file__).parents[1] / "data" / "claude_code"
REACTIVE = DATA / "reactive-prompt-too-long.jsonl"
REFUSED = DATA / "prompt-too-long-error.jsonl"


def one(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main([*args, "--json"]) == 0
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.strip()]
    result: dict[str, Any] = json.loads(line)
    return result


def compactions(data: dict[str, Any]) -> list[tuple[int, str, int, int | None]]:
    return [
        (c["step"], c["trigger"], c["before_tokens"], c["after_tokens"])
        for c in data["compactions"]
    ]


def test_reactive_compaction(capsys: pytest.CaptureFixture[str]) -> None:
    stats = one(capsys, "stats", str(REACTIVE))
    # the session file holds the compaction, not the refusal before it
    assert stats["rejected_requests"] == []
    assert compactions(stats) == [(3, "auto", 200_502, 23_930)]
    assert stats["threshold_tokens"] == 200_000  # 2.1.329 with no window: the provider's limit
    data = one(capsys, "replay", str(REACTIVE))
    # Claude Code's own figure before the refused request: 193,800 + 180 (the latest usage)
    # + 6,500 + 22 (its estimate of the tool result and the reminder since) > 200,000
    assert compactions(data) == [(3, "reactive", 200_502, 23_930)]
    assert data["agreement"] == 1.0 and data["disagreements"] == []
    # each request, then the live end: the answer's usage plus what came after (as stats ends)
    assert [p["recorded"] for p in data["curve"]] == [190_000, 193_800, 41_870, 41_890]
    assert data["curve"][-1]["live_end"] and data["final_context_tokens"] == 41_890
    assert stats["final_context_tokens"] == 41_890
    assert all(p["tokens"] == p["recorded"] for p in data["curve"])


def test_reactive_compaction_the_inputs_cannot_judge(capsys: pytest.CaptureFixture[str]) -> None:
    """With a larger window the agent's own figure (200,502) fits: whether the provider
    refused the request, only a record of the refusal could tell, and none was given."""
    data = one(capsys, "replay", str(REACTIVE), "--set", "context_window=250000")
    assert data["compactions"] == []
    ((undetermined),) = data["undetermined"]
    assert undetermined["step"] == 3 and undetermined["kind"] == "compaction"
    assert "200,502" in undetermined["reason"] and "over 250,000" in undetermined["reason"]
    assert data["disagreements"] == []


def test_the_rule_follows_the_version(capsys: pytest.CaptureFixture[str]) -> None:
    """2.1 before 2.1.120 compacted at 167,000 with no window set: a step earlier here."""
    data = one(capsys, "replay", str(REACTIVE), "--set", "version=2.1.100")
    assert data["threshold_tokens"] == 167_000
    (first,) = data["disagreements"]
    assert (first["step"], first["recorded"], first["replayed"]) == (2, [], ["compaction"])
    # the agent's own figure there reached 167,000, and the 2.1.329 recording did not act
    assert "191,222" in first["reason"] and "167,000" in first["reason"]
    # the replay's own compaction (its figures are estimated): 190,200 + 1,000 + 22 before it
    assert compactions(data)[0][:3] == (2, "replay", 191_222)


def test_a_refusal_shown_then_the_users_compact(capsys: pytest.CaptureFixture[str]) -> None:
    stats = one(capsys, "stats", str(REFUSED))
    assert stats["rejected_requests"] == [
        {
            "step": 2,
            "tokens": 203_152,
            "limit": 200_000,
            "reason": "prompt is too long: 203152 tokens > 200000 maximum",
        }
    ]
    assert (stats["peak_context_tokens"], stats["peak_step"]) == (203_152, 2)
    # 2.0 measures on the latest usage alone: 150,000 + 500
    assert compactions(stats) == [(3, "manual", 150_500, 21_296)]
    data = one(capsys, "replay", str(REFUSED))
    assert data["threshold_tokens"] == 155_000  # the session's 2.0.76: window − 45,000
    assert data["agreement"] == 1.0 and data["disagreements"] == []
    assert compactions(data) == [(3, "manual", 150_500, None)]


def test_a_stdout_that_shows_the_refusal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Merged with a stdout that records the refusal, the compaction is labelled reactive, the
    refused request is on the timeline, and nothing is counted twice."""
    notice = {
        "type": "assistant",
        "message": {
            "id": "0b7d6e0a-1c2d-4e5f-8a9b-0c1d2e3f4a5b",
            "model": "<synthetic>",
            "role": "assistant",
            "content": [
                {
                    "type": "text",
                    "text": "API Error: 400 prompt is too long: 208031 tokens > 200000 maximum",
                }
            ],
            "usage": {"input_tokens": 0, "output_tokens": 0},
        },
        "parent_tool_use_id": None,
        "session_id": "3f0c2b71-5d4e-4a8f-9c16-7b2e0d9a4c55",
        "uuid": "e0000000-0000-4000-8000-000000000001",
        "timestamp": "2026-11-21T07:10:02.900Z",
        "error": "invalid_request",
    }
    init = {
        "type": "system",
        "subtype": "init",
        "session_id": notice["session_id"],
        "model": "claude-sonnet-4-5-20250929",
        "claude_code_version": "2.1.329",
        "uuid": "e0000000-0000-4000-8000-000000000000",
    }
    stdout = tmp_path / "stream-json.stdout.jsonl"
    stdout.write_bytes(orjson.dumps(init) + b"\n" + orjson.dumps(notice) + b"\n")
    alone = one(capsys, "stats", str(REACTIVE))
    merged = one(capsys, "stats", "--merge", str(REACTIVE), str(stdout))
    assert merged["rejected_requests"] == [
        {
            "step": 3,
            "tokens": 208_031,
            "limit": 200_000,
            "reason": "prompt is too long: 208031 tokens > 200000 maximum",
        }
    ]
    assert merged["steps"] == alone["steps"] + 1  # the refused request
    assert compactions(merged) == [(4, "reactive", 200_502, 23_930)]
    data = one(capsys, "replay", "--merge", str(REACTIVE), str(stdout))
    assert data["agreement"] == 1.0 and data["disagreements"] == []
    assert compactions(data) == [(4, "reactive", 200_502, 23_930)]
