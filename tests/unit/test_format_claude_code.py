"""Claude Code reader: line types, responses split over lines, the conversation tree,
compactions, sidechains and sub-agent files, project folders, bad input, and the real samples."""

from __future__ import annotations

import json
import os
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic import BaseModel

from ctx_inspect.agents.claude_code import reader, records
from ctx_inspect.agents.claude_code.reader import ClaudeCodeParser, expand, sniff
from ctx_inspect.agents.claude_code.reader_stream import ClaudeCodeStreamParser, sniff_stream
from ctx_inspect.app.config import build_profile
from ctx_inspect.app.loader import load_session, open_inputs
from ctx_inspect.core.model import (
    Compacted,
    ContextReset,
    Event,
    LogLine,
    MessageAdded,
    MessageKind,
    ParseIssue,
    Part,
    PartType,
    Pruned,
    RequestRejected,
    RequestSent,
    Role,
    SessionInfo,
    SourceSpan,
    Usage,
    UsageReported,
)
from ctx_inspect.core.session import Flag, Session
from ctx_inspect.core.stats import RunFacts, summarize
from ctx_inspect.core.unvalidated import make_span
from ctx_inspect.formats import base, registry
from ctx_inspect.formats.registry import Head, read_head

DATA = Path(__file__).parents[1] / "data" / "claude_code"
OTHER_DATA = Path(__file__).parents[1] / "data"
PROJECT = DATA / "project"
P1 = "11111111-1111-4111-8111-111111111111"
P2 = "22222222-2222-4222-8222-222222222222"
FIXTURES = sorted(p.name for p in DATA.glob("*.jsonl"))


def parse(
    data: bytes, sizes: list[int] | None = None, path: str = "x", stream: bool = False
) -> tuple[list[Event], ClaudeCodeParser]:
    parser: ClaudeCodeParser = (ClaudeCodeStreamParser if stream else ClaudeCodeParser)(0, path)
    out: list[Event] = []
    if sizes is None:
        out.extend(parser.feed(data))
    else:
        pos = 0
        for size in sizes:
            out.extend(parser.feed(data[pos : pos + size]))
            pos += size
        out.extend(parser.feed(data[pos:]))
    out.extend(parser.finish())
    return out, parser


def read(name: str) -> list[Event]:
    path = DATA / name
    return parse(path.read_bytes(), path=str(path), stream=name == "stream.jsonl")[0]


def messages(events: list[Event]) -> list[MessageAdded]:
    return [e for e in events if isinstance(e, MessageAdded)]


def issues(events: list[Event]) -> list[ParseIssue]:
    return [e for e in events if isinstance(e, ParseIssue)]


def of_type(events: list[Event], cls: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, cls)]


def by_id(events: list[Event]) -> dict[str, MessageAdded]:
    return {m.message.id: m for m in messages(events)}


def picture(events: list[Event]) -> list[str]:
    """Each event as its type, each message as role/kind: a compact picture of the order."""
    out = []
    for e in events:
        if isinstance(e, MessageAdded):
            out.append(f"{e.message.role.value}/{e.message.kind.value}")
        else:
            out.append(e.type)
    return out


def load(path: Path) -> Session:
    profile = build_profile("claude-code", sets=["estimator=chars4"])
    spec = registry.get_format(
        "claude-code-stream" if path.name.startswith("stream") else "claude-code"
    )
    return load_session(path, profile, format_spec=spec, count_exact=False).session


def stats_of(path: Path) -> dict[str, Any]:
    profile = build_profile("claude-code", sets=["estimator=chars4"])
    session = load(path)
    return summarize(session, profile, RunFacts(str(path), "claude-code", "test"))


# -- one session file ----------------------------------------------------------------------


def test_typical_order_of_events() -> None:
    events = read("typical.jsonl")
    assert not issues(events)
    assert picture(events) == [
        "log",  # summary title
        "log",  # file-history-snapshot
        "info",
        "user/message",
        "info",  # the model
        "request",
        "usage",
        "assistant/message",  # thinking
        "assistant/message",  # text
        "assistant/tool_call",
        "user/tool_result",  # a parallel call's result, between two lines of the response
        "usage",  # the response's last line: final output count
        "assistant/tool_call",
        "log",  # progress
        "user/tool_result",
        "user/attachment",  # hook_additional_context
        "request",
        "usage",
        "assistant/message",
        "assistant/tool_call",
        "user/tool_result",
        "log",  # system api_error
        "assistant/meta",  # <synthetic>
        "user/message",
        "request",
        "usage",
        "assistant/message",
        "log",  # system turn_duration
        "log",  # queue-operation
        "log",  # permission-mode
        "log",  # last-prompt
        "user/attachment",  # isMeta
        "log",  # unknown type
    ]


def test_one_request_per_response_and_the_latest_usage() -> None:
    events = read("typical.jsonl")
    requests = of_type(events, RequestSent)
    assert [r.request_id for r in requests] == ["msg_01", "msg_02", "msg_03"]
    assert all(r.model == "claude-sonnet-4-5-20250929" and r.thread == "main" for r in requests)
    usages = [(u.request_id, u.usage) for u in of_type(events, UsageReported)]
    assert usages == [
        ("msg_01", Usage(input=3, cache_write=2000, cache_read=10000, output=1)),
        ("msg_01", Usage(input=3, cache_write=2000, cache_read=10000, output=120)),
        ("msg_02", Usage(input=5, cache_write=300, cache_read=12100, output=40)),
        ("msg_03", Usage(input=2, cache_write=150, cache_read=12400, output=5)),
    ]
    session = load(DATA / "typical.jsonl")
    assert [s.reported for s in session.steps] == [12003, 12405, 12552]
    assert session.steps[0].usage is not None and session.steps[0].usage.output == 120


def test_every_content_block_line_is_its_own_message() -> None:
    found = by_id(read("typical.jsonl"))
    assert [p.type for p in found["a1"].message.parts] == [PartType.THINKING]
    assert found["a1"].message.text == "The check is probably inverted."
    assert found["a2"].message.text == "Let me read the file first."
    call = found["a3"].message.parts[0]
    assert (call.type, call.tool_name, call.call_id) == (PartType.TOOL_CALL, "Read", "toolu_01")
    assert call.arguments == '{"file_path":"/home/dev/app/auth.py"}'
    assert found["a1"].message.model == "claude-sonnet-4-5-20250929"
    assert found["a1"].span is not None and found["a1"].span.line == 4


def test_tool_results_name_their_tool_and_leave_out_tool_use_result() -> None:
    found = by_id(read("typical.jsonl"))
    r1 = found["r1"].message
    assert r1.kind is MessageKind.TOOL_RESULT and r1.role is Role.USER
    assert [(p.type, p.tool_name, p.call_id) for p in r1.parts] == [
        (PartType.TOOL_RESULT, "Read", "toolu_01")
    ]
    assert r1.text == "def login(user):\n    return True\n"  # once: toolUseResult is not context
    r3 = found["r3"].message.parts[0]
    assert r3.is_error and r3.tool_name == "Edit"
    assert found["r2"].message.parts[0].tool_name == "Grep"


def test_synthetic_lines_make_no_request_and_are_hidden() -> None:
    events = read("typical.jsonl")
    syn = by_id(events)["syn1"].message
    assert syn.kind is MessageKind.META and not syn.visible and syn.model == "<synthetic>"
    assert "syn-0001" not in {r.request_id for r in of_type(events, RequestSent)}


def test_injected_text_meta_lines_and_attachments() -> None:
    found = by_id(read("typical.jsonl"))
    meta = found["meta1"].message
    assert meta.kind is MessageKind.ATTACHMENT and meta.visible and meta.role is Role.USER
    hook = found["att1"].message
    assert hook.kind is MessageKind.ATTACHMENT and hook.text == "Remember to run the tests."

    edge = read("edge.jsonl")
    found = by_id(edge)
    assert found["e-at1"].message.text == (
        "<system-reminder>\nToday's date is 2026-01-02.\n</system-reminder>"
    )
    assert "e-at2" not in found  # rendered: null, nothing reached the model
    assert json.loads(found["e-at3"].message.text) == {
        "id": "1",
        "subject": "Write tests",
        "status": "pending",
    }
    assert found["e-at4"].message.text == "- pdf: read PDF files"
    logs = [e.text for e in of_type(edge, LogLine) if e.tag == "attachment"]
    assert logs == ["attachment session_context"]
    silent = [e for e in of_type(read("rewind.jsonl"), LogLine) if e.tag == "attachment"]
    assert [e.text for e in silent] == ["attachment hook_success"]


def test_metadata_and_unknown_lines_are_short_log_lines() -> None:
    events = read("typical.jsonl") + read("edge.jsonl")
    logs = {(e.tag, e.text) for e in of_type(events, LogLine)}
    assert {
        ("summary", "title: Fix the login check"),
        ("file-history-snapshot", "file-history-snapshot"),
        ("progress", "progress hook_progress"),
        ("queue-operation", "queue-operation enqueue"),
        ("permission-mode", "permission-mode"),
        ("last-prompt", "last-prompt"),
        ("custom-title", "custom-title"),
        ("ai-title", "ai-title"),
        ("agent-name", "agent-name"),
        ("pr-link", "pr-link"),
        ("worktree-state", "worktree-state"),
        ("brand-new-thing", "brand-new-thing (unknown line type)"),
        ("system", "turn_duration"),
        ("system", "away_summary: While you were away: the tests passed."),
        ("system", "system: PostToolUse:Edit [ruff format] completed successfully"),
    } <= logs
    errors = [e for e in of_type(events, LogLine) if e.level == "error"]
    assert [e.text for e in errors] == ["api_error: API Error: 529 Overloaded"]
    assert not issues(events)
    assert "unknown types are kept as log lines" in " ".join((reader.__doc__ or "").split())


def test_session_info() -> None:
    events = read("typical.jsonl")
    infos = of_type(events, SessionInfo)
    assert infos[0].session_id == "5e55a0a0-0000-4000-8000-000000000001"
    assert infos[0].agent == "claude-code" and infos[0].version == "2.0.64"
    assert infos[0].extra == {"cwd": "/home/dev/app", "git_branch": "main"}
    assert infos[1].model == "claude-sonnet-4-5-20250929" and infos[1].context_window is None
    session = load(DATA / "typical.jsonl")
    assert session.info["model"] == "claude-sonnet-4-5-20250929"
    assert session.info["version"] == "2.0.64"


def test_session_facts_found_later_and_1m_window() -> None:
    lines = [
        {"type": "queue-operation", "operation": "dequeue", "sessionId": "s1"},
        {
            "type": "user",
            "uuid": "u1",
            "parentUuid": None,
            "sessionId": "s1",
            "version": "2.1.50",
            "cwd": "/w",
            "message": {"role": "user", "content": "hi"},
        },
        {
            "type": "assistant",
            "uuid": "a1",
            "parentUuid": "u1",
            "sessionId": "s1",
            "message": {
                "id": "m1",
                "model": "claude-sonnet-4-5[1m]",
                "content": [{"type": "text", "text": "hello"}],
                "usage": {"input_tokens": 1, "output_tokens": 1},
            },
        },
    ]
    events, _ = parse(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    infos = of_type(events, SessionInfo)
    assert infos[0].session_id == "s1" and infos[0].version is None
    assert (infos[1].version, infos[1].extra) == ("2.1.50", {"cwd": "/w"})
    assert (infos[2].model, infos[2].context_window) == ("claude-sonnet-4-5[1m]", 1_000_000)


# -- compaction ----------------------------------------------------------------------------


def test_compaction_with_post_tokens_and_a_preserved_segment() -> None:
    events = read("compaction.jsonl")
    assert not issues(events)
    (compacted,) = of_type(events, Compacted)
    assert compacted.trigger == "manual"
    assert (compacted.tokens_before, compacted.tokens_after) == (150_000, 30_000)
    assert compacted.retained_ids == ("c-u2", "c-a3")
    assert compacted.keep_system and compacted.thread == "main"
    assert not of_type(events, ContextReset)  # going on from the preserved tail is no rewind
    summary = by_id(events)["c-s1"].message
    assert summary.kind is MessageKind.SUMMARY and summary.visible

    session = load(DATA / "compaction.jsonl")
    removed = {r.id for r in session.records() if r.flags & Flag.REMOVED}
    assert removed == {"c-u1", "c-a1", "c-r1", "c-a2"}
    stats = stats_of(DATA / "compaction.jsonl")
    assert stats["compactions"] == [
        {
            "step": 4,
            "trigger": "manual",
            "before_tokens": 150_000,
            "after_tokens": 30_000,
            "messages_before": None,
            "messages_after": None,
            "failed": False,
            "error": None,
        }
    ]


def test_compaction_after_tokens_from_the_next_request(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes((DATA / "compaction.jsonl").read_bytes().replace(b',"postTokens":30000', b""))
    stats = stats_of(path)
    # the first request after the boundary: 5 + 1000 + 30000
    assert stats["compactions"][0]["after_tokens"] == 31_005
    assert stats["compactions"][0]["before_tokens"] == 150_000


def test_preserved_messages_uuids() -> None:
    data = (DATA / "compaction.jsonl").read_bytes()
    data = data.replace(
        b'"preservedSegment":{"headUuid":"c-u2","anchorUuid":"c-s1","tailUuid":"c-a3"}',
        b'"preservedMessages":{"anchorUuid":"c-s1","uuids":["c-a2","c-u2","gone"]}',
    )
    (compacted,) = of_type(parse(data)[0], Compacted)
    assert compacted.retained_ids == ("c-a2", "c-u2")


def test_microcompaction_prunes_the_tool_results_it_names() -> None:
    events = read("compaction.jsonl")
    (pruned,) = of_type(events, Pruned)
    assert pruned.message_ids == ("c-r2",)  # toolu_gone never had a result here
    assert (pruned.tokens_before, pruned.tokens_recovered) == (32_000, 700)
    assert pruned.outputs_pruned == 2 and pruned.reason == "microcompact" and pruned.applied
    session = load(DATA / "compaction.jsonl")
    pruned_ids = {r.id for r in session.records() if r.flags & Flag.PRUNED}
    assert pruned_ids == {"c-r2"}


# -- the conversation tree -----------------------------------------------------------------


def test_rewinds_reset_the_context_to_the_branch_point() -> None:
    events = read("rewind.jsonl")
    resets = of_type(events, ContextReset)
    assert [(r.keep_through, r.reason) for r in resets] == [
        ("r-a1", "rewind"),  # an edited prompt goes on from the first answer
        ("r-a3", "rewind"),  # from a hook line: back to the message before it
        (None, "new-root"),
    ]
    order = picture(events)
    assert order[order.index("reset") + 1] == "user/message"
    session = load(DATA / "rewind.jsonl")
    live = [session.table.ids[i] for i in session.in_context()]
    assert live == ["r-u5", "r-a6"]
    at_third = [session.table.ids[i] for i in session.in_context(3)]
    assert at_third == ["r-u1", "r-a1", "r-u2b"]  # r-u2 and r-a2 left with the first rewind


def test_parallel_tool_results_are_no_branch() -> None:
    for name in ("typical.jsonl", "sidechains.jsonl", "compaction.jsonl"):
        assert not of_type(read(name), ContextReset), name


# -- sidechains and sub-agents -------------------------------------------------------------


def test_inline_sidechains_get_a_thread_per_run() -> None:
    events = read("sidechains.jsonl")
    assert not issues(events)
    threads = {m.message.id: m.message.thread for m in messages(events)}
    assert {k: v for k, v in threads.items() if v != "main"} == {
        "x-u1": "sidechain-1",
        "x-a1": "sidechain-1",
        "x-r1": "sidechain-1",
        "x-a2": "sidechain-1",
        "y-u1": "sidechain-2",
        "y-a1": "sidechain-2",
        "z-a1": "agent-abc123",
    }
    requests = [(r.request_id, r.thread) for r in of_type(events, RequestSent)]
    assert requests == [
        ("msg_s1", "main"),
        ("msg_x1", "sidechain-1"),
        ("msg_y1", "sidechain-2"),
        ("msg_x2", "sidechain-1"),
        ("msg_z1", "agent-abc123"),
        ("msg_s2", "main"),
    ]
    links = [e.extra["subagents"] for e in of_type(events, SessionInfo) if "subagents" in e.extra]
    assert links[-1] == {"toolu_t1": "sidechain-1", "toolu_t2": "sidechain-2"}
    session = load(DATA / "sidechains.jsonl")
    assert len(session.steps) == 2  # sidechain requests are not main-thread steps
    assert all(session.table.ids[i][0] == "s" for i in session.in_context())


def test_parent_records_which_agent_ran_each_call() -> None:
    events = read(f"project/{P1}.jsonl")
    links = [e.extra["subagents"] for e in of_type(events, SessionInfo) if "subagents" in e.extra]
    assert links[-1] == {"toolu_p1": "a0f1e2d3c4b5a6978", "toolu_p2": "b2c3d4e5"}


def test_subagent_files_are_sessions_linked_to_their_parent() -> None:
    v21 = PROJECT / P1 / "subagents" / "agent-a0f1e2d3c4b5a6978.jsonl"
    events, _ = parse(v21.read_bytes(), path=str(v21))
    info = of_type(events, SessionInfo)[0]
    assert info.session_id == f"{P1}/agent-a0f1e2d3c4b5a6978"
    assert info.extra == {
        "cwd": "/home/dev/app",
        "git_branch": "main",
        "parent_session": P1,
        "agent_id": "a0f1e2d3c4b5a6978",
        "agent_type": "general-purpose",
        "description": "Topic A",
        "parent_tool_use_id": "toolu_p1",
    }
    assert {m.message.thread for m in messages(events)} == {"main"}
    assert [r.thread for r in of_type(events, RequestSent)] == ["main"]

    v20 = PROJECT / "agent-b2c3d4e5.jsonl"
    events, _ = parse(v20.read_bytes(), path=str(v20))
    info = of_type(events, SessionInfo)[0]
    assert info.extra["parent_session"] == P1
    assert info.extra["parent_tool_use_id"] == "toolu_p2"
    assert {m.message.thread for m in messages(events)} == {"main"}
    assert len(load(v20).steps) == 2


def test_subagent_link_from_meta_or_found_once_the_parent_has_it(tmp_path: Path) -> None:
    sub = tmp_path / "s1" / "subagents"
    sub.mkdir(parents=True)
    agent = sub / "agent-abc.jsonl"
    line = {
        "type": "user",
        "uuid": "u1",
        "parentUuid": None,
        "isSidechain": True,
        "agentId": "abc",
        "sessionId": "s1",
        "message": {"role": "user", "content": "go"},
    }
    agent.write_bytes(orjson.dumps(line) + b"\n")
    parser = ClaudeCodeParser(0, str(agent))
    first = parser.feed(agent.read_bytes())
    assert "parent_tool_use_id" not in of_type(first, SessionInfo)[0].extra
    parent_line = {
        "type": "user",
        "uuid": "r1",
        "parentUuid": "a1",
        "sessionId": "s1",
        "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9"}]},
        "toolUseResult": {"status": "completed", "agentId": "abc"},
    }
    (tmp_path / "s1.jsonl").write_bytes(orjson.dumps(parent_line) + b"\n")
    assert of_type(parser.finish(), SessionInfo) == [
        SessionInfo(extra={"parent_tool_use_id": "toolu_9"})
    ]
    (sub / "agent-abc.meta.json").write_text('{"agentType":"Explore","toolUseId":"toolu_meta"}')
    events, _ = parse(agent.read_bytes(), path=str(agent))
    extra = of_type(events, SessionInfo)[0].extra
    assert (extra["agent_type"], extra["parent_tool_use_id"]) == ("Explore", "toolu_meta")


# -- project folders -----------------------------------------------------------------------


def copy_project(root: Path) -> Path:
    project = root / "-home-dev-app"
    shutil.copytree(PROJECT, project)
    times = {
        f"{P2}.jsonl": 100,
        f"{P1}.jsonl": 200,
        "agent-b2c3d4e5.jsonl": 300,
        f"{P1}/subagents/agent-a0f1e2d3c4b5a6978.jsonl": 250,
    }
    for name, stamp in times.items():
        os.utime(project / name, (stamp, stamp))
    return project


def test_expand_a_project_folder(tmp_path: Path) -> None:
    project = copy_project(tmp_path)
    files = [p.relative_to(project).as_posix() for p in expand(project)]
    assert files == [
        f"{P2}.jsonl",
        f"{P1}.jsonl",
        f"{P1}/subagents/agent-a0f1e2d3c4b5a6978.jsonl",
        "agent-b2c3d4e5.jsonl",
    ]
    assert expand(project / f"{P1}.jsonl") == [project / f"{P1}.jsonl"]


def test_expand_the_projects_root(tmp_path: Path) -> None:
    root = tmp_path / "projects"
    root.mkdir()
    project = copy_project(root)
    other = root / "-other"
    other.mkdir()
    shutil.copy(DATA / "rewind.jsonl", other / "eeee.jsonl")
    (root / "-empty").mkdir()
    files = expand(root)
    assert files == [*expand(project), other / "eeee.jsonl"]


def test_folder_sniff(tmp_path: Path) -> None:
    project = copy_project(tmp_path / "projects")
    assert sniff(Head(path=project, data=b"", is_dir=True)) == 0.95
    assert sniff(Head(path=tmp_path / "projects", data=b"", is_dir=True)) == 0.9
    assert registry.detect(project).name == "claude-code"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert sniff(Head(path=empty, data=b"", is_dir=True)) == 0.0
    others = tmp_path / "others"
    others.mkdir()
    shutil.copy(OTHER_DATA / "native" / "typical.jsonl", others / "x.jsonl")
    assert sniff(Head(path=others, data=b"", is_dir=True)) == 0.0


# -- detection -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in FIXTURES if n not in ("empty.jsonl", "stream.jsonl")])
def test_fixtures_are_detected(name: str) -> None:
    assert registry.detect(DATA / name).name == "claude-code"


def test_stream_json_is_its_own_format() -> None:
    head = read_head(DATA / "stream.jsonl")
    assert sniff(head) == 0.0
    assert sniff_stream(head) == 0.95
    assert registry.detect(DATA / "stream.jsonl").name == "claude-code-stream"
    assert sniff_stream(read_head(DATA / "typical.jsonl")) == 0.0


def test_other_formats_are_not_claude_code() -> None:
    others = [p for p in OTHER_DATA.rglob("*") if p.is_file() and "claude_code" not in p.parts]
    assert others
    for path in others:
        head = read_head(path)
        assert sniff(head) == 0.0, path
        assert sniff_stream(head) == 0.0, path


def test_a_long_first_line_is_still_recognised() -> None:
    line = {
        "parentUuid": None,
        "isSidechain": False,
        "sessionId": "s",
        "type": "user",
        "message": {"role": "user", "content": "x" * 100_000},
        "uuid": "u",
    }
    head = Head(path=Path("s.jsonl"), data=orjson.dumps(line)[: registry.HEAD_BYTES])
    assert sniff(head) == 0.9


def test_registered_formats() -> None:
    spec = registry.get_format("claude-code")
    assert spec.default_profile == "claude-code" and spec.folder and spec.expand is expand
    assert spec.make_parser().format_name == "claude-code"
    stream = registry.get_format("claude-code-stream")
    assert stream.default_profile == "claude-code"
    assert stream.make_parser().format_name == "claude-code-stream"


# -- bad input -----------------------------------------------------------------------------


def test_truncated_last_line() -> None:
    data = (DATA / "truncated.jsonl").read_bytes()
    parser = ClaudeCodeParser(0, "t")
    held = parser.feed(data)
    assert not issues(held) and parser.held_bytes > 0
    (issue,) = issues(parser.finish())
    assert issue.line == 3 and issue.offset == data.rindex(b"\n") + 1
    assert issue.reason.startswith("not valid JSON")
    assert [m.message.id for m in messages(held)] == ["m-u1", "m-a1"]


def test_malformed_lines_are_issues_and_the_rest_is_read() -> None:
    data = (DATA / "malformed.jsonl").read_bytes()
    events, _ = parse(data)
    starts = [0] + [i + 1 for i, b in enumerate(data) if b == 0x0A]
    found = [(i.line, i.offset, i.reason) for i in issues(events)]
    assert found == [
        (2, starts[1], "not valid JSON (unexpected end of data)"),
        (3, starts[2], "not a JSON object (array)"),
        (4, starts[3], "record without a type"),
        (5, starts[4], "not a JSON object (string)"),
        (6, starts[5], "not a JSON object (null)"),
        (8, starts[7], "assistant line without a message object"),
    ]
    assert [m.message.id for m in messages(events)] == ["m-u1", "m-a1"]
    assert len(of_type(events, RequestSent)) == 1


def test_invalid_utf8_is_replaced_and_flagged() -> None:
    events = read("invalid_utf8.jsonl")
    (issue,) = issues(events)
    assert issue.line == 2 and issue.reason == "invalid UTF-8 replaced with U+FFFD"
    text = by_id(events)["m-u9"].message.text
    assert text == "café \ufffd\ufffd"
    assert [m.message.id for m in messages(events)] == ["m-u1", "m-u9", "m-a9"]


def test_a_huge_line(tmp_path: Path) -> None:
    big = "y" * 20_000_000
    lines = [
        {"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": "s",
         "message": {"role": "user", "content": "read it"}},
        {"type": "assistant", "uuid": "a1", "parentUuid": "u1", "sessionId": "s",
         "message": {"id": "m1", "model": "claude-x", "content": [
             {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "f"}}],
             "usage": {"input_tokens": 1, "output_tokens": 2}}},
        {"type": "user", "uuid": "r1", "parentUuid": "a1", "sessionId": "s",
         "message": {"role": "user", "content": [
             {"type": "tool_result", "tool_use_id": "t1", "content": big}]},
         "toolUseResult": {"stdout": big}},
        {"type": "assistant", "uuid": "a2", "parentUuid": "r1", "sessionId": "s",
         "message": {"id": "m2", "model": "claude-x", "content": [{"type": "text", "text": "ok"}],
                     "usage": {"input_tokens": 1, "output_tokens": 2}}},
    ]  # fmt: skip
    path = tmp_path / "huge.jsonl"
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    session = load(path)
    assert not session.issues
    index = session.table.index_of["r1"]
    assert session.table.chars[index] == 20_000_000  # the result once, not twice
    assert session.body(index).parts[0].tool_name == "Read"
    assert len(session.steps) == 2


def lines_accounted_for(path: Path, stream: bool = False) -> tuple[set[int], set[int]]:
    """The numbers of the non-blank lines of a file, and of the lines some event points at."""
    data = path.read_bytes()
    wanted = {i for i, line in enumerate(data.split(b"\n"), 1) if line.strip()}
    events = parse(data, path=str(path), stream=stream)[0]
    return wanted, {e.span.line for e in events if e.span is not None}


def test_duplicate_uuids_and_lines_without_one() -> None:
    events = read("edge.jsonl")
    ids = [m.message.id for m in messages(events)]
    assert ids[0] == "line1" and "e-u1#5" in ids and len(ids) == len(set(ids))
    edge = by_id(events)
    parts = [(p.type, p.media_type, p.data_bytes) for p in edge["e-u1"].message.parts]
    assert parts == [
        (PartType.TEXT, None, 0),
        (PartType.IMAGE, "image/png", 96),
        (PartType.ATTACHMENT, "text/plain", 0),
    ]
    assert edge["e-u1"].message.parts[2].text == "notes.txt\nnotes body"
    kinds = [p.type for p in edge["e-a1"].message.parts]
    assert kinds == [PartType.THINKING, PartType.TOOL_CALL, PartType.ATTACHMENT, PartType.TEXT]
    assert edge["e-a1"].message.parts[0].data_bytes == 12
    assert edge["e-a2"].message.text == "Plain string content."
    requests = [r.request_id for r in of_type(events, RequestSent)]
    assert requests == ["msg_e1", "req_e2"]  # no message.id: the requestId groups the lines
    result = edge["e-r1"].message.parts
    assert [p.type for p in result] == [PartType.TOOL_RESULT, PartType.IMAGE, PartType.ATTACHMENT]
    assert result[0].tool_name == "web_search"


# -- toolUseResult is left unparsed --------------------------------------------------------


def result_line(meta: Any, tail: dict[str, Any] | None = None, used: bool = False) -> bytes:
    line: dict[str, Any] = {
        "parentUuid": "a1",
        "isSidechain": False,
        "type": "user",
        "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                                 "content": "ok"}]},
    }  # fmt: skip
    if not used:
        line.update({"uuid": "r1", "timestamp": "2026-01-01T00:00:00Z"})
    line["toolUseResult"] = meta
    if used:
        line.update({"uuid": "r1", "timestamp": "2026-01-01T00:00:00Z"})
    line.update(tail or {})
    return orjson.dumps(line)


@pytest.mark.parametrize(
    ("raw", "fast"),
    [
        (result_line({"stdout": "x" * 5000, "stderr": ""}), True),  # 1.0 / 2.0: the last key
        (result_line("Error: no such file"), True),
        (result_line({"a": [1, {"b": 2}]}, {"sourceToolAssistantUUID": "a1"}), True),  # 2.1
        (result_line({"a": 1}, {"sandboxed": False, "sourceToolAssistantUUID": "a1"}), True),
        (result_line({"stdout": "x"}, used=True), False),  # uuid after it: parsed whole
        (result_line({"k": {"sourceToolAssistantUUID": 1}}, {"cwd": "/w"}), False),
    ],
)
def test_tool_use_result_is_cut_out_only_when_safe(raw: bytes, fast: bool) -> None:
    parser = ClaudeCodeParser()
    pos = raw.find(b',"toolUseResult":')
    obj = parser._load_without_result(raw, pos)
    full = orjson.loads(raw)
    if not fast:
        assert obj is None
        return
    assert obj is not None
    meta = full.pop("toolUseResult")
    assert obj == full
    assert parser._skipped_result() == meta


# -- the stream-json stdout ----------------------------------------------------------------


def test_stream_json() -> None:
    events = read("stream.jsonl")
    assert not issues(events)
    info = of_type(events, SessionInfo)[0]
    assert (info.model, info.version, info.session_id) == (
        "claude-sonnet-4-5-20250929",
        "2.1.329",
        "57e4a000-0000-4000-8000-000000000007",
    )
    requests = [(r.request_id, r.thread) for r in of_type(events, RequestSent)]
    assert requests == [("msg_st1", "main"), ("msg_sub1", "agent-agent77"), ("msg_st2", "main")]
    threads = {m.message.id: m.message.thread for m in messages(events)}
    assert threads["st-su1"] == threads["st-sa1"] == "agent-agent77"
    links = [e.extra["subagents"] for e in of_type(events, SessionInfo) if "subagents" in e.extra]
    assert links == [{"toolu_st1": "agent77"}]
    assert [e.text for e in of_type(events, LogLine)] == ["result success, 2 turns"]
    assert by_id(events)["st-r1"].message.parts[0].tool_name == "Agent"
    again = (DATA / "stream.jsonl").read_bytes().splitlines()[0] + b"\n"
    resumed = parse((DATA / "stream.jsonl").read_bytes() + again, stream=True)[0]
    assert len(of_type(resumed, SessionInfo)) == 3  # a second init line is no line lost


# -- the fast model builders -----------------------------------------------------------------


def test_builders_make_the_same_objects_as_validation() -> None:
    span = make_span(2, 10, 20, 3)
    assert span == SourceSpan(source=2, offset=10, length=20, line=3)
    assert repr(span) == repr(SourceSpan(source=2, offset=10, length=20, line=3))
    data = {"timestamp": None, "span": span, "type": "log", "text": "x", "level": None, "tag": "t"}
    log = base.trusted(LogLine, data)
    assert log == LogLine(text="x", tag="t", span=span) and repr(log) == repr(LogLine(**data))
    part = records.make_part(PartType.TEXT, "hi")
    assert part == Part(type=PartType.TEXT, text="hi")
    copy = log.model_copy(update={"text": "y"})
    assert copy.text == "y" and log.text == "x"  # the shared fields-set is not written to
    assert LogLine(text="z").model_fields_set == {"text"}


class Odd(BaseModel):
    a: int
    b: int = 0


def test_builders_fall_back_to_validation_when_the_shape_differs() -> None:
    built = base.trusted(Odd, {"b": 1, "a": 2})  # not in field order: validated instead
    assert built == Odd(a=2, b=1)
    assert base._SHAPES[Odd][1] == [False]
    assert base.trusted(Odd, {"a": 5, "b": 6}) == Odd(a=5, b=6)
    with pytest.raises(ValueError):
        base.trusted(Odd, {"a": "not a number", "b": 0})


def test_session_event_views_after_the_fast_paths() -> None:
    session = load(DATA / "typical.jsonl")
    events = list(session.raw_events())
    expected = [(i, e) for i, e in enumerate(events) if not isinstance(e, int)]
    assert list(session.non_message_events()) == expected
    assert [session.record(i) for i in range(session.message_count)] == list(session.records())


# -- the real samples ----------------------------------------------------------------------


def corpus_sessions(corpus: Path) -> list[Path]:
    files = sorted((corpus / "claude-code").rglob("*.jsonl"))
    files += sorted((corpus / "realruns" / "claude-code").glob("**/projects/**/*.jsonl"))
    return files


def is_agent_file(path: Path) -> bool:
    return path.name.startswith("agent-")


def raw_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


@pytest.mark.corpus
def test_real_sessions_are_detected_and_read_without_issues(corpus: Path) -> None:
    files = corpus_sessions(corpus)
    assert len(files) >= 17
    for path in files:
        assert registry.detect(path).name == "claude-code", path
        events, _ = parse(path.read_bytes(), path=str(path))
        assert not issues(events), path


@pytest.mark.corpus
def test_every_real_line_ends_up_in_an_event(corpus: Path) -> None:
    stream = (
        corpus / "realruns" / "claude-code" / "subagent-foreground" / "stream-json.stdout.jsonl"
    )
    for path in [*corpus_sessions(corpus), stream]:
        wanted, seen = lines_accounted_for(path, stream=path == stream)
        assert wanted == seen, path


@pytest.mark.corpus
def test_real_requests_match_the_last_line_of_each_response(corpus: Path) -> None:
    for path in corpus_sessions(corpus):
        sub = is_agent_file(path)
        last: dict[str, int] = {}
        order: list[str] = []
        for obj in raw_lines(path):
            if obj.get("type") != "assistant" or (obj.get("isSidechain") and not sub):
                continue
            message = obj["message"]
            if message.get("model") == "<synthetic>":
                continue
            mid = message["id"]
            usage = message["usage"]
            if mid not in last:
                order.append(mid)
            last[mid] = (
                usage["input_tokens"]
                + usage.get("cache_creation_input_tokens", 0)
                + usage.get("cache_read_input_tokens", 0)
            )
        session = load(path)
        assert len(session.steps) == len(order), path
        assert [s.reported for s in session.steps] == [last[m] for m in order], path


@pytest.mark.corpus
def test_real_auto_compaction(corpus: Path) -> None:
    path = corpus / "claude-code" / "commugraph" / "ab51623b-c26d-45f5-b98e-f9d0cfa17018.jsonl"
    events, _ = parse(path.read_bytes(), path=str(path))
    (compacted,) = of_type(events, Compacted)
    assert (compacted.trigger, compacted.tokens_before, compacted.tokens_after) == (
        "auto",
        156_953,
        None,
    )
    stats = stats_of(path)
    assert len(stats["compactions"]) == 1
    assert stats["compactions"][0]["before_tokens"] == 156_953
    assert stats["compactions"][0]["after_tokens"] == 42_312
    summary = [m.message for m in messages(events) if m.message.kind is MessageKind.SUMMARY]
    assert len(summary) == 1 and summary[0].text.startswith("This session is being continued")


@pytest.mark.corpus
def test_real_subagent_files_name_the_call_that_ran_them(corpus: Path) -> None:
    agents = [p for p in corpus_sessions(corpus) if is_agent_file(p)]
    assert len(agents) >= 8
    for path in agents:
        events, _ = parse(path.read_bytes(), path=str(path))
        extra: dict[str, Any] = {}
        for info in of_type(events, SessionInfo):
            extra.update(info.extra)
        agent_id = path.stem.removeprefix("agent-")
        session_id = raw_lines(path)[0]["sessionId"]
        parent = next(p for p in corpus_sessions(corpus) if p.stem == session_id)
        calls = [
            block["tool_use_id"]
            for obj in raw_lines(parent)
            if isinstance(obj.get("toolUseResult"), dict)
            and obj["toolUseResult"].get("agentId") == agent_id
            for block in obj["message"]["content"]
            if block.get("type") == "tool_result"
        ]
        assert extra["parent_session"] == session_id and extra["agent_id"] == agent_id
        assert [extra["parent_tool_use_id"]] == calls, path
        assert {m.message.thread for m in messages(events)} == {"main"}
        meta = path.with_suffix(".meta.json")
        if meta.exists():
            assert extra["agent_type"] == json.loads(meta.read_text())["agentType"]


@pytest.mark.corpus
def test_real_inline_sidechains_link_to_their_task(corpus: Path) -> None:
    path = (
        corpus / "claude-code" / "claude-code-viewer" / "fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
    )
    lines = raw_lines(path)
    prompts = {
        block["input"]["prompt"]: block["id"]
        for obj in lines
        if obj["type"] == "assistant" and not obj.get("isSidechain")
        for block in obj["message"]["content"]
        if block.get("type") == "tool_use" and block.get("name") == "Task"
    }
    roots = [
        o["message"]["content"]
        for o in lines
        if o.get("isSidechain") and o.get("parentUuid") is None and o["type"] == "user"
    ]
    events, _ = parse(path.read_bytes(), path=str(path))
    links = [e.extra["subagents"] for e in of_type(events, SessionInfo) if "subagents" in e.extra]
    expected = [prompts[r] for r in roots if r in prompts]
    assert len(expected) >= 5
    assert sorted(links[-1]) == sorted(expected)
    threads = {m.message.thread for m in messages(events)}
    assert threads == {"main", *(f"sidechain-{k}" for k in range(1, len(roots) + 1))}
    side = sum(1 for o in lines if o.get("isSidechain") and o["type"] == "assistant")
    counted = sum(1 for m in messages(events) if m.message.thread != "main"
                  and m.message.role is Role.ASSISTANT)  # fmt: skip
    assert counted == side


@pytest.mark.corpus
def test_real_stream_json(corpus: Path) -> None:
    path = corpus / "realruns" / "claude-code" / "subagent-foreground" / "stream-json.stdout.jsonl"
    assert registry.detect(path).name == "claude-code-stream"
    assert sniff(read_head(path)) == 0.0
    events, _ = parse(path.read_bytes(), path=str(path), stream=True)
    assert not issues(events)
    lines = raw_lines(path)
    main_ids = list(
        dict.fromkeys(
            o["message"]["id"]
            for o in lines
            if o["type"] == "assistant" and o.get("parent_tool_use_id") is None
        )
    )
    main = [r.request_id for r in of_type(events, RequestSent) if r.thread == "main"]
    assert main == main_ids


@pytest.mark.corpus
def test_real_tool_use_results_cut_out_exactly(corpus: Path) -> None:
    fast = total = 0
    for path in corpus_sessions(corpus):
        for raw in path.read_bytes().splitlines():
            pos = raw.find(b',"toolUseResult":')
            if pos < 0:
                continue
            total += 1
            parser = ClaudeCodeParser()
            obj = parser._load_without_result(raw, pos)
            if obj is None:
                continue
            fast += 1
            full = orjson.loads(raw)
            assert parser._skipped_result() == full.pop("toolUseResult")
            assert obj == full
    assert total >= 700 and fast >= 0.9 * total


@pytest.mark.corpus
def test_schema_fixtures_never_break_the_reader(corpus: Path) -> None:
    path = corpus / "_synthetic-schema-fixtures" / "agent-sessions" / "claude_small.jsonl"
    assert registry.detect(path).name == "claude-code"
    events, _ = parse(path.read_bytes(), path=str(path))
    assert not issues(events)
    (compacted, *rest) = of_type(events, Compacted)
    assert compacted.tokens_before == 120_000 and len(rest) == 1


@pytest.mark.corpus
def test_no_other_real_file_is_claude_code(corpus: Path) -> None:
    mine = set(corpus_sessions(corpus))
    others = [
        p
        for p in corpus.rglob("*")
        if p.is_file()
        and p not in mine
        and p.suffix in (".jsonl", ".json", ".traj", ".log", ".md")
        and "claude-code" not in p.parts
        and p.name != "claude_small.jsonl"
    ]
    assert len(others) >= 15
    for path in others:
        head = read_head(path)
        assert sniff(head) == 0.0, path
        if path.name != "stream-json.stdout.jsonl":
            assert sniff_stream(head) == 0.0, path


@pytest.mark.corpus
def test_real_project_folders_expand(corpus: Path) -> None:
    folder = corpus / "claude-code" / "claude-code-log-real" / "-experiments-worktrees"
    files = [p.relative_to(folder).as_posix() for p in expand(folder)]
    assert files[0] == "ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl"
    assert sorted(files[1:]) == [
        "ef958aa1-0e93-49f0-bb71-150f63befcd1/subagents/agent-a4ca7529859c158c2.jsonl",
        "ef958aa1-0e93-49f0-bb71-150f63befcd1/subagents/agent-a52886dc180afb356.jsonl",
    ]
    root = corpus / "claude-code" / "claude-code-log-real"
    assert len(expand(root)) == 9
    assert sniff(Head(path=root, data=b"", is_dir=True)) == 0.9
    counts: defaultdict[bool, int] = defaultdict(int)
    for path in expand(root):
        counts[is_agent_file(path)] += 1
    assert counts == {False: 5, True: 4}


# -- refusals, session facts, Claude Code's own estimate ---------------------------------------


S1 = "33333333-3333-4333-8333-333333333333"
U1, A1, A2 = "u-prompt", "s-retry", "a-notice"


def _line(**fields: Any) -> bytes:
    return orjson.dumps(fields) + b"\n"


def _env(uuid: str, parent: str | None, **fields: Any) -> dict[str, Any]:
    return {
        "parentUuid": parent,
        "isSidechain": False,
        "sessionId": S1,
        "version": "2.1.329",
        "timestamp": "2026-11-21T07:00:00.000Z",
        "uuid": uuid,
        **fields,
    }


def test_a_refusal_is_a_request_and_its_rejection_once() -> None:
    """The provider's 'prompt is too long' reaches the session file as a retry line or an
    API-error notice (the reactive compaction's refusal itself is never written): each gives
    the refused request and its RequestRejected, one pair per refusal."""
    prompt = _env(U1, None, type="user", message={"role": "user", "content": "go"})
    error = {
        "status": 400,
        "error": {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 208,031 tokens > 200000 maximum",
            },
        },
    }
    retry = _env(A1, U1, type="system", subtype="api_error", level="error", error=error)
    notice = _env(
        A2,
        A1,
        type="assistant",
        isApiErrorMessage=True,
        error="invalid_request",
        message={
            "id": "n1",
            "model": "<synthetic>",
            "role": "assistant",
            "content": [{"type": "text", "text": "Prompt is too long"}],
            "usage": {"input_tokens": 0, "output_tokens": 0},
        },
    )
    data = b"".join(_line(**obj) for obj in (prompt, retry, notice))
    events, _ = parse(data)
    (request,) = of_type(events, RequestSent)
    (rejected,) = of_type(events, RequestRejected)
    assert request.request_id is None
    assert (rejected.tokens, rejected.limit) == (208_031, 200_000)
    assert rejected.reason == "prompt is too long: 208,031 tokens > 200000 maximum"
    assert picture(events).index("request") < picture(events).index("rejected")
    # the notice itself stays out of the model's context
    (notice_message,) = [m for m in messages(events) if m.message.role is Role.ASSISTANT]
    assert notice_message.message.kind is MessageKind.META and not notice_message.message.visible
    # a compaction right after it is the reactive one
    boundary = _env(
        "b1", None, type="system", subtype="compact_boundary", compactMetadata={"trigger": "auto"}
    )
    events, _ = parse(data + _line(**boundary))
    (compaction,) = of_type(events, Compacted)
    assert compaction.trigger == "reactive"
    # an error that is not about the prompt's size is no refusal
    other = _env(A1, U1, type="system", subtype="api_error", error={"message": "overloaded"})
    events, _ = parse(_line(**prompt) + _line(**other))
    assert of_type(events, RequestRejected) == [] and of_type(events, RequestSent) == []


def test_the_run_ending_on_a_refusal_in_the_stdout() -> None:
    init = {"type": "system", "subtype": "init", "session_id": S1, "model": "m1"}
    result = {
        "type": "result",
        "subtype": "error_during_execution",
        "is_error": True,
        "api_error_status": 400,
        "result": "Prompt is too long",
        "session_id": S1,
        "modelUsage": {"m1": {"contextWindow": 1_000_000, "maxOutputTokens": 64_000}},
    }
    events, _ = parse(_line(**init) + _line(**result), stream=True)
    (rejected,) = of_type(events, RequestRejected)
    assert rejected.tokens is None and rejected.reason == "Prompt is too long"
    facts = [e for e in of_type(events, SessionInfo) if e.context_window]
    assert facts[-1].context_window == 1_000_000
    assert facts[-1].extra["max_output_tokens"] == 64_000


def test_the_requests_max_tokens_is_a_session_fact(tmp_path: Path) -> None:
    prompt = _env(U1, None, type="user", message={"role": "user", "content": "go"})
    request = {"type": "api-request", "sessionId": S1, "querySource": "sdk"}
    compact = {"type": "api-request", "sessionId": S1, "querySource": "compact"}
    data = (
        _line(**prompt)
        + _line(**request, params={"max_tokens": 8_000})
        + _line(**request, params={"max_tokens": 8_000})
        + _line(**compact, params={"max_tokens": 20_000})
    )
    events, _ = parse(data)
    facts = [e.extra["max_output_tokens"] for e in of_type(events, SessionInfo) if e.extra]
    assert facts.count(8_000) == 1 and 20_000 not in facts
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    (loaded,) = open_inputs([path], lambda spec: build_profile(None, default=spec.default_profile))
    # the session's own version and output reserve: 2.1.329 with no window, an 8,000 reserve
    assert loaded.profile.version == "2.1.329"  # type: ignore[attr-defined]
    assert loaded.profile.max_output_tokens == 8_000  # type: ignore[attr-defined]
    assert loaded.profile.hard_limit() == 192_000  # type: ignore[attr-defined]


def test_an_attachment_of_several_messages_is_estimated_message_by_message() -> None:
    pieces = [
        "<system-reminder>\nabcdef\n</system-reminder>",
        "<system-reminder>\nx\n</system-reminder>",
    ]
    line = _env(
        U1,
        None,
        type="attachment",
        attachment={"type": "x"},
        rendered=[{"content": p} for p in pieces],
    )
    (added,) = messages(parse(_line(**line))[0])
    assert [p.text for p in added.message.parts] == pieces
    assert added.message.text == "\n".join(pieces)
    profile = build_profile(None, default="claude-code")
    assert profile.estimate(added.message) == sum((len(p) + 2) // 4 for p in pieces)
