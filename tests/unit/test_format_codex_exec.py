"""codex exec --json stdout: items as context, turn usage as a total, never a context size."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctx_inspect.agents.codex.reader_exec import CONTEXT_NOTE, CodexExecParser
from ctx_inspect.cli import main
from ctx_inspect.core.model import (
    Event,
    MessageAdded,
    MessageKind,
    ParseIssue,
    PartType,
    RequestRejected,
    RequestSent,
    SessionInfo,
    UsageReported,
)
from ctx_inspect.formats import registry

DATA = Path(__file__).parents[1] / "data" / "codex_exec"


def parse(data: bytes) -> list[Event]:
    parser = CodexExecParser(0, "exec.jsonl")
    return [*parser.feed(data), *parser.finish()]


def test_typical_run_maps_items_to_messages_and_requests() -> None:
    events = parse((DATA / "typical.jsonl").read_bytes())
    assert not [e for e in events if isinstance(e, ParseIssue)]
    messages = [e.message for e in events if isinstance(e, MessageAdded)]
    kinds = [(m.role.value, m.kind.value) for m in messages]
    assert kinds == [
        ("assistant", "message"),  # reasoning
        ("assistant", "tool_call"),
        ("tool", "tool_result"),
        ("assistant", "message"),  # reasoning
        ("assistant", "tool_call"),  # mcp call
        ("tool", "tool_result"),
        ("assistant", "tool_call"),  # file change
        ("tool", "tool_result"),
        ("assistant", "message"),
    ]
    assert messages[0].parts[0].type is PartType.THINKING
    results = [m for m in messages if m.kind is MessageKind.TOOL_RESULT]
    assert results[0].parts[0].is_error  # exit code 1
    assert results[1].parts[0].text == "flush() writes the held line"
    assert "src/parser.py" in results[2].parts[0].text
    # a request per model response: reasoning + call share one; the file change and the
    # final message follow tool output, so each opens a response
    assert sum(isinstance(e, RequestSent) for e in events) == 4
    assert not [e for e in events if isinstance(e, UsageReported)]  # turn totals only
    info = [e for e in events if isinstance(e, SessionInfo) and e.extra.get("turn_usage")]
    assert info[0].extra["turn_usage"]["input_tokens"] == 24100


def test_detected_and_not_confused_with_baseagent(tmp_path: Path) -> None:
    assert registry.detect(DATA / "typical.jsonl").name == "codex-exec"
    base = tmp_path / "base.jsonl"
    base.write_text(
        '{"thread_id": "sess_1737150615123", "type": "thread.started"}\n{"type": "turn.started"}\n'
    )
    assert registry.detect(base).name == "baseagent-events"


def test_a_malformed_line_is_an_issue_and_the_rest_is_read() -> None:
    data = (
        (DATA / "typical.jsonl")
        .read_bytes()
        .replace(b'{"type":"turn.started"}', b'{"type":"turn.sta')
    )
    events = parse(data)
    issues = [e for e in events if isinstance(e, ParseIssue)]
    assert len(issues) == 1 and issues[0].line == 2
    assert sum(isinstance(e, MessageAdded) for e in events) == 9


@pytest.mark.corpus
def test_the_real_exec_stdout(corpus: Path) -> None:
    path = corpus / "realruns/codex/manual-compact-tui/exec-json.stdout.1.jsonl"
    assert registry.detect(path).name == "codex-exec"
    events = parse(path.read_bytes())
    assert not [e for e in events if isinstance(e, ParseIssue)]
    import json

    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    commands = {
        x["item"]["id"]
        for x in lines
        if x["type"].startswith("item.") and x["item"]["type"] == "command_execution"
    }
    results = [
        e
        for e in events
        if isinstance(e, MessageAdded) and e.message.kind is MessageKind.TOOL_RESULT
    ]
    assert len(results) == len(commands)


def test_the_stream_says_it_cannot_show_context_management() -> None:
    events = parse((DATA / "typical.jsonl").read_bytes())
    (started,) = [e for e in events if isinstance(e, SessionInfo) and e.session_id]
    assert started.agent == "codex"
    assert started.extra["context_note"] == CONTEXT_NOTE


def test_a_turn_that_ran_out_of_context_is_a_refused_request() -> None:
    refusal = (
        "Codex ran out of room in the model's context window. Start a new thread or clear "
        "earlier history before retrying."
    )
    lines = [
        {"type": "thread.started", "thread_id": "t"},
        {"type": "turn.started"},
        {"type": "error", "message": refusal},
        {"type": "turn.failed", "error": {"message": refusal}},
        {"type": "turn.started"},
        {"type": "error", "message": "stream disconnected"},
        {"type": "turn.failed", "error": {"message": "stream disconnected"}},
    ]
    data = "\n".join(json.dumps(line, separators=(",", ":")) for line in lines).encode()
    events = parse(data)
    rejected = [e for e in events if isinstance(e, RequestRejected)]
    assert [(r.code, r.reason) for r in rejected] == [("context_window_exceeded", refusal)]
    assert isinstance(events[events.index(rejected[0]) - 1], RequestSent)
    assert sum(isinstance(e, RequestSent) for e in events) == 1  # one per refused request


def test_merged_with_the_rollout_nothing_is_counted_twice(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rollout = Path(__file__).parents[1] / "data" / "codex" / "typical.jsonl"
    stream = DATA / "typical.jsonl"

    def stats(*args: str) -> dict[str, Any]:
        assert main(["stats", "--json", *args]) == 0
        data: dict[str, Any] = json.loads(capsys.readouterr().out)
        return data

    alone = stats(str(rollout))
    merged = stats("--merge", str(rollout), str(stream))
    for key in ("steps", "messages_total", "peak_context_tokens", "final_context_tokens"):
        assert merged[key] == alone[key], key
    assert merged["context_note"] == "" and merged["items_total"] > alone["items_total"]
    assert stats(str(stream))["context_note"] == CONTEXT_NOTE
