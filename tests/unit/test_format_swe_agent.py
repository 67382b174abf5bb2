"""SWE-agent trajectory reader: history as the timeline, demonstrations, stats, bad documents."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ctx_inspect.core.model import (
    Event,
    MessageAdded,
    MessageKind,
    ParseIssue,
    PartType,
    RequestSent,
    Role,
    SessionInfo,
    UsageReported,
)
from ctx_inspect.core.tokens import get_counter
from ctx_inspect.formats import registry, swe_agent
from ctx_inspect.formats.registry import HEAD_BYTES, Head
from ctx_inspect.formats.swe_agent import SweAgentParser

DATA = Path(__file__).parents[1] / "data" / "swe_agent"


def read(data: bytes, sizes: list[int] | None = None) -> list[Event]:
    parser = SweAgentParser(0, "x")
    out: list[Event] = []
    pos = 0
    for size in sizes or []:
        out.extend(parser.feed(data[pos : pos + size]))
        pos += size
    out.extend(parser.feed(data[pos:]))
    out.extend(parser.finish())
    return out


def fixture(name: str) -> bytes:
    return (DATA / name).read_bytes()


def messages(events: list[Event]) -> list[MessageAdded]:
    return [e for e in events if isinstance(e, MessageAdded)]


def of_type(events: list[Event], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def kinds(events: list[Event]) -> list[str]:
    return [e.message.role.value if isinstance(e, MessageAdded) else e.type for e in events]


def test_typical_trajectory() -> None:
    events = read(fixture("typical.traj"))
    assert not of_type(events, ParseIssue)
    assert kinds(events) == [
        "info",
        "system",
        "user",
        "user",
        "request",
        "assistant",
        "user",
        "request",
        "assistant",
        "user",
        "request",
        "assistant",
    ]
    added = [m.message for m in messages(events)]
    assert [m.id for m in added] == [f"h{i}" for i in range(8)]
    demo = added[1]
    assert demo.kind is MessageKind.ATTACHMENT and demo.visible and demo.role is Role.USER
    assert added[2].kind is MessageKind.MESSAGE
    assert added[3].text == "Let me look at the parser.\n```\nopen parser.py\n```"
    assert added[3].name == "primary"
    assert not of_type(events, UsageReported)
    info = events[0]
    assert isinstance(info, SessionInfo)
    assert (info.agent, info.version, info.model) == ("swe-agent", "0.7.0", None)
    assert info.extra["model_stats"]["tokens_sent"] == 2400
    assert info.extra["model_stats"]["api_calls"] == len(of_type(events, RequestSent))
    assert info.extra["exit_status"] == "submitted"
    assert info.extra["submission"].startswith("diff --git")
    assert info.extra["trajectory_steps"] == 3
    assert info.extra["environment"] == "swe_main"
    assert info.extra["history_source"] == "history"


def test_function_calling_history_and_replay_config() -> None:
    events = read(fixture("function_calling.traj"))
    assert not of_type(events, ParseIssue)
    info = events[0]
    assert isinstance(info, SessionInfo)
    assert info.model == "claude-sonnet-4-20250514"
    assert info.extra["history_processors"] == [{"type": "last_n_observations", "n": 5}]
    added = [m.message for m in messages(events)]
    assert added[1].text == "Fix the rounding bug."  # content as a list of parts
    call = added[2]
    assert call.kind is MessageKind.MESSAGE  # thought text and a tool call
    assert [(p.type, p.tool_name, p.call_id) for p in call.parts] == [
        (PartType.TEXT, None, None),
        (PartType.TOOL_CALL, "bash", "call_1"),
    ]
    assert added[4].kind is MessageKind.TOOL_CALL
    result = added[3]
    assert result.kind is MessageKind.TOOL_RESULT
    assert (result.parts[0].tool_name, result.parts[0].call_id) == ("bash", "call_1")
    requests = of_type(events, RequestSent)
    assert [r.model for r in requests] == ["claude-sonnet-4-20250514"] * 2
    # the per-step snapshots are not read again: history alone is the timeline
    assert len(added) == 6


def test_snapshot_used_when_history_is_missing() -> None:
    events = read(fixture("snapshot_only.traj"))
    info = events[0]
    assert isinstance(info, SessionInfo)
    assert info.extra["history_source"] == "trajectory[-1].messages"
    assert kinds(events)[1:] == [
        "system",
        "user",
        "request",
        "assistant",
        "tool",
        "request",
        "assistant",
    ]


def test_no_history_at_all_is_an_issue() -> None:
    events = read(json.dumps({"trajectory": [{"action": "ls"}], "info": {}}).encode())
    assert kinds(events) == ["info", "issue"]
    assert "no history" in events[1].reason  # type: ignore[union-attr]


def test_bad_history_items_are_issues_and_the_rest_is_read() -> None:
    events = read(fixture("malformed.traj"))
    found = of_type(events, ParseIssue)
    assert [i.reason for i in found] == [
        "history[1]: not a message object (string)",
        "history[2]: no role",
        "history[3]: unknown role 'wizard'",
        "history[4]: not a message object (null)",
    ]
    assert [m.message.id for m in messages(events)] == ["h0", "h5"]


@pytest.mark.parametrize("doc", [b"[1, 2]", b'"text"', b"null"])
def test_documents_that_are_not_trajectories(doc: bytes) -> None:
    events = read(doc)
    assert len(events) == 1 and isinstance(events[0], ParseIssue)
    assert events[0].reason.startswith("not a SWE-agent trajectory")


def test_truncated_document_is_one_issue_where_it_stops() -> None:
    data = fixture("truncated.traj")
    events = read(data)
    assert len(events) == 1
    issue = events[0]
    assert isinstance(issue, ParseIssue)
    assert issue.reason == "not valid JSON (unexpected end of data)"
    assert issue.offset == len(data) and issue.line == data.count(b"\n") + 1


def test_invalid_utf8_is_replaced_and_flagged() -> None:
    data = fixture("invalid_utf8.traj")
    events = read(data)
    issue = events[0]
    assert isinstance(issue, ParseIssue) and "UTF-8" in issue.reason
    assert issue.offset == data.index(b"\xe9")
    assert [m.message.text for m in messages(events)] == ["caf\ufffd", "ok"]


def head(data: bytes, name: str = "run.json") -> Head:
    return Head(path=Path(name), data=data[:HEAD_BYTES])


def test_sniff() -> None:
    assert swe_agent.sniff(head(fixture("typical.traj"))) == 1.0
    assert swe_agent.sniff(head(fixture("snapshot_only.traj"), "x.traj")) == 0.95
    assert swe_agent.sniff(head(fixture("snapshot_only.traj"))) == 0.8  # steps look like steps
    assert swe_agent.sniff(head(fixture("truncated.traj"), "x.traj")) == 0.95
    mini = {"info": {}, "messages": [], "trajectory_format": "mini-swe-agent-1"}
    assert swe_agent.sniff(head(json.dumps(mini).encode(), "x.traj.json")) == 0.0
    openhands = {"instance_id": "x", "history": [], "metrics": {}}
    assert swe_agent.sniff(head(json.dumps(openhands).encode())) == 0.0
    assert swe_agent.sniff(head(b'[{"role": "user", "content": "x"}]')) == 0.0
    assert swe_agent.sniff(head(b"")) == 0.0


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.traj") if p.stat().st_size))
def test_fixtures_are_detected(name: str) -> None:
    assert registry.detect(DATA / name).name == "swe-agent"


def test_an_empty_traj_is_named_by_its_extension() -> None:
    """An empty file is named after the first format whose ``reads`` has its extension, in the
    registry's order; a fresh process has the order the command line has (test modules import
    formats in their own order)."""
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from ctx_inspect.formats import registry\n"
        "print(registry.detect(Path(sys.argv[1])).name)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(DATA / "empty.traj")],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert done.stdout.strip() == "swe-agent"


def test_a_big_trajectory_is_detected_from_its_head(tmp_path: Path) -> None:
    steps = [{"action": "ls", "observation": "x" * 5000, "response": "r", "thought": "t"}] * 40
    doc = {"environment": "main", "trajectory": steps, "history": [], "info": {}}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc, indent=2))
    assert path.stat().st_size > HEAD_BYTES
    assert registry.detect(path).name == "swe-agent"


# -- the real samples ----------------------------------------------------------------------


@pytest.mark.corpus
def test_real_trajectories(corpus: Path) -> None:
    files = sorted((corpus / "swe-agent").glob("*.traj"))
    assert len(files) == 3
    for path in files:
        assert registry.detect(path).name == "swe-agent", path.name
        events = read(path.read_bytes())
        assert not of_type(events, ParseIssue), path.name
        raw = json.loads(path.read_bytes())
        added = [m.message for m in messages(events)]
        assert [m.role.value for m in added] == [m["role"] for m in raw["history"]]
        assert [m.kind is MessageKind.ATTACHMENT for m in added] == [
            bool(m.get("is_demo")) for m in raw["history"]
        ]
        requests = of_type(events, RequestSent)
        assistants = sum(1 for m in raw["history"] if m["role"] == "assistant")
        assert len(requests) == assistants
        stats = raw["info"]["model_stats"]
        info = events[0]
        assert isinstance(info, SessionInfo) and info.extra["model_stats"] == stats
        if path.name.startswith("ctf_"):
            assert stats["api_calls"] == 0  # a demonstration: its stats were zeroed
        else:
            assert stats["api_calls"] == len(requests)


@pytest.mark.corpus
def test_prompt_estimates_add_up_to_tokens_sent(corpus: Path) -> None:
    """tokens_sent is the sum of every call's prompt: the history before each assistant message,
    counted with GPT-4's tokenizer (3 tokens of overhead per message), comes within 1%."""
    path = corpus / "swe-agent" / "gpt4__pydicom__pydicom-1458.traj"
    events = read(path.read_bytes())
    counter = get_counter("cl100k_base")
    context: list[int] = []
    total = 0
    for event in events:
        if isinstance(event, RequestSent):
            total += sum(context)
        elif isinstance(event, MessageAdded):
            context.append(counter.count_batch([event.message.text])[0] + 3)
    info = events[0]
    assert isinstance(info, SessionInfo)
    sent = info.extra["model_stats"]["tokens_sent"]
    assert sent == 122_612
    assert abs(total - sent) / sent < 0.01, total
