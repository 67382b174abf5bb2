"""From paths to sessions: several sessions per input, sub-agent threads, merged streams."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TypeGuard

import pytest

from ctx_inspect.app.config import build_profile
from ctx_inspect.app.demo import write_demo_session
from ctx_inspect.app.loader import (
    FailedInput,
    LoadedSession,
    Progress,
    _open_snapshot,
    counter_for,
    follow_format,
    iter_inputs,
    load_session,
    merge_events,
    new_session,
    split_threads,
)
from ctx_inspect.core.model import (
    ContextMeasured,
    DebugTopic,
    Event,
    LogLine,
    Message,
    MessageAdded,
    Part,
    PartType,
    RequestSent,
    Role,
    SourceSpan,
    Usage,
    UsageReported,
)
from ctx_inspect.core.profiles import Profile
from ctx_inspect.errors import InputError
from ctx_inspect.formats.base import Item, LineParser
from ctx_inspect.formats.native import export_events
from ctx_inspect.formats.registry import FormatSpec, Head, SnapshotSession, get_format


def user(mid: str, text: str, thread: str = "main") -> MessageAdded:
    return MessageAdded(
        message=Message(
            id=mid, role=Role.USER, thread=thread, parts=(Part(type=PartType.TEXT, text=text),)
        )
    )


def test_a_timeless_stream_is_anchored_on_the_requests_of_a_timed_one() -> None:
    stderr: list[Event] = [
        LogLine(text="start", timestamp="2026-01-01T10:00:00"),
        RequestSent(timestamp="2026-01-01T10:00:01"),
        UsageReported(usage=Usage(input=10), timestamp="2026-01-01T10:00:02"),
        RequestSent(timestamp="2026-01-01T10:00:05"),
        LogLine(text="end", timestamp="2026-01-01T10:00:09"),
    ]
    stdout: list[Event] = [
        DebugTopic(name="evaluate-1"),
        RequestSent(),
        DebugTopic(name="tool-eval"),
        DebugTopic(name="evaluate-2"),
        RequestSent(),
        LogLine(text="final report"),
    ]
    merged = merge_events([stderr, stdout])
    names = [getattr(e, "name", None) or getattr(e, "text", None) or e.type for e in merged]
    assert names == [
        "start",
        "evaluate-1",
        "request",
        "usage",
        "tool-eval",
        "evaluate-2",
        "request",
        "end",
        "final report",
    ]
    assert sum(isinstance(e, RequestSent) for e in merged) == 2  # each request counted once


def test_timed_streams_interleave_by_time_and_keep_their_own_order_on_ties() -> None:
    a: list[Event] = [LogLine(text="a1", timestamp="t1"), LogLine(text="a2", timestamp="t3")]
    b: list[Event] = [
        LogLine(text="b1", timestamp="t2"),
        LogLine(text="b2"),
        LogLine(text="b3", timestamp="t3"),
    ]
    merged = merge_events([a, b])
    assert [e.text for e in merged if isinstance(e, LogLine)] == ["a1", "b1", "b2", "a2", "b3"]


def test_two_timeless_streams_follow_one_another() -> None:
    a: list[Event] = [LogLine(text="a1"), LogLine(text="a2")]
    b: list[Event] = [LogLine(text="b1")]
    merged = merge_events([a, b])
    assert [e.text for e in merged if isinstance(e, LogLine)] == ["a1", "a2", "b1"]


def _loaded(events: list[Event]) -> LoadedSession:
    profile = build_profile("generic")
    counter = counter_for(profile)
    session = new_session(profile, counter, count_exact=False)
    session.append(events)
    spec = FormatSpec(name="test", description="t", reads="t", parser=None, sniff=lambda head: 0.0)
    return LoadedSession(session, Path("run.jsonl"), spec, profile, counter, None)


def test_each_sub_agent_thread_becomes_its_own_timeline() -> None:
    loaded = _loaded(
        [
            user("m1", "main question"),
            RequestSent(),
            user("s1", "sub task", thread="agent-1"),
            RequestSent(thread="agent-1"),
            user("s2", "more sub", thread="agent-1"),
            RequestSent(thread="agent-1"),
            user("m2", "main again"),
            RequestSent(),
        ]
    )
    assert len(loaded.session.steps) == 2
    assert loaded.session.steps[1].messages == 2  # the sub-agent's messages are not main context
    subs = split_threads(loaded)
    assert len(subs) == 1
    sub = subs[0]
    assert sub.label == "agent-1" and sub.name == "run.jsonl#agent-1"
    assert [s.messages for s in sub.session.steps] == [1, 2]
    assert sub.session.info["parent"] == "run.jsonl"


def test_a_snapshot_input_gives_one_session_per_stored_session(tmp_path: Path) -> None:
    def snapshot(path: Path) -> list[SnapshotSession]:
        return [
            SnapshotSession(label="first", events=[user("a", "x" * 40), RequestSent()]),
            SnapshotSession(label="second", events=[ContextMeasured(tokens=500), RequestSent()]),
        ]

    spec = FormatSpec(
        name="db",
        description="d",
        reads="db",
        parser=None,
        sniff=lambda head: 0.0,
        snapshot=snapshot,
    )
    opened = list(_open_snapshot(tmp_path / "x.db", spec, build_profile("guide"), False))
    assert [o.label for o in opened] == ["first", "second"]
    assert opened[0].session.steps[0].estimated == 40 // 4 + 1  # the guide's rule
    assert opened[1].session.steps[0].tokens == 500


class _CountingParser(LineParser):
    format_name = "count"

    def parse_line(self, line: bytes, span: SourceSpan) -> Iterator[Event]:
        text = line.decode()
        yield MessageAdded(
            message=Message(
                id=f"m{span.line}", role=Role.USER, parts=(Part(type=PartType.TEXT, text=text),)
            ),
            span=span,
        )


def test_bodies_are_read_back_from_the_file_not_kept(tmp_path: Path) -> None:
    path = tmp_path / "lines.txt"
    path.write_text("first line\nsecond line\n")
    spec = FormatSpec(
        name="count", description="c", reads="txt", parser=_CountingParser, sniff=lambda head: 0.0
    )
    loaded = load_session(path, build_profile("generic"), format_spec=spec, count_exact=False)
    session = loaded.session
    assert session.message_count == 2
    assert not session._inline  # nothing held in memory
    assert session.body(1).text == "second line"


def _native_file(path: Path, texts: list[str]) -> None:
    export_events(
        path,
        [
            MessageAdded(
                message=Message(
                    id=f"m{n}", role=Role.USER, parts=(Part(type=PartType.TEXT, text=text),)
                ),
                tokens=n,
            )
            for n, text in enumerate(texts)
        ],
    )


def _load_native(path: Path) -> LoadedSession:
    return load_session(
        path, build_profile("generic"), format_spec=get_format("native"), count_exact=False
    )


def test_native_bodies_read_back_equal_the_messages_written(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    texts = [f"text {n} " * n for n in range(50)]
    _native_file(path, texts)
    session = _load_native(path).session
    assert not session._inline
    for n in [*range(50), *range(49, -1, -3)]:
        body = session.body(n)
        assert body == Message(
            id=f"m{n}", role=Role.USER, parts=(Part(type=PartType.TEXT, text=texts[n]),)
        )
        assert body.model_fields_set == {"id", "role", "parts"}


def test_native_bodies_of_a_file_rewritten_after_loading_are_not_taken_for_others(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.jsonl"
    _native_file(path, [f"text {n}" for n in range(20)])
    session = _load_native(path).session
    assert session.body(3).text == "text 3"
    # the same bytes but for the ids: what is now at the spans is other messages
    data = path.read_bytes().replace(b'"id":"m', b'"id":"x')
    with path.open("r+b") as fh:
        fh.write(data)
    assert session.body(3).text == "text 3"  # read before: kept
    assert session.body(4) == Message(id="m4", role=Role.USER)  # no body to show
    path.write_bytes(b"")
    assert session.body(5) == Message(id="m5", role=Role.USER)


def test_head_of_a_folder_is_marked(tmp_path: Path) -> None:
    from ctx_inspect.formats.registry import read_head

    head = read_head(tmp_path)
    assert head == Head(path=tmp_path, data=b"", is_dir=True)


def test_a_folder_of_no_known_layout_is_a_clear_error(tmp_path: Path) -> None:
    from ctx_inspect.errors import InputError
    from ctx_inspect.formats.registry import detect

    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(InputError) as info:
        detect(tmp_path)
    assert "folder" in info.value.one_line()


def test_a_session_shown_while_it_is_read_ends_as_the_one_read_at_once(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    write_demo_session(path)
    calls: list[tuple[str, LoadedSession, int]] = []
    counted: list[int] = []

    def opened(loaded: LoadedSession) -> None:
        calls.append(("opened", loaded, len(loaded.session)))

    def grow(loaded: LoadedSession, items: list[Item], counts: list[int] | None) -> None:
        calls.append(("grow", loaded, len(items)))
        assert counts is not None  # the exact counts come with the batch
        assert len(counts) == sum(isinstance(item, MessageAdded) for item in items)
        counted.extend(counts)
        loaded.session.append(items, exact_counts=counts)

    def profile_for(spec: FormatSpec) -> Profile:
        return build_profile(None, default=spec.default_profile)

    def is_read(item: LoadedSession | FailedInput) -> TypeGuard[LoadedSession]:
        return isinstance(item, LoadedSession)

    progress = Progress(opened, grow, batch_seconds=0.0)
    shown = [i for i in iter_inputs([path], profile_for, progress=progress) if is_read(i)]
    read = [i for i in iter_inputs([path], profile_for) if is_read(i)]
    assert calls[0][0] == "opened" and calls[0][2] == 0  # handed over before a byte is read
    assert [kind for kind, _, _ in calls[1:]] == ["grow"] * (len(calls) - 1)
    assert len(calls) >= 3 and sum(size for _, _, size in calls[1:]) == len(read[0].session)
    assert all(loaded is calls[0][1] for _, loaded, _ in calls)
    assert len(shown) == len(read) == 1 and shown[0] is calls[0][1]  # given again, once read
    session, whole = shown[0].session, read[0].session
    assert session.tokenized and shown[0].profile == read[0].profile  # calibrated alike
    assert len(counted) == session.message_count == whole.message_count
    assert [(s.step, s.tokens, s.origin) for s in session.all_steps()] == [
        (s.step, s.tokens, s.origin) for s in whole.all_steps()
    ]


def test_a_file_to_follow_that_does_not_exist_yet_is_waited_for_when_its_format_is_named(
    tmp_path: Path,
) -> None:
    later = tmp_path / "later.jsonl"
    assert follow_format(later, "native") == (get_format("native"), None)
    with pytest.raises(InputError):
        follow_format(later, None)
    assert not later.exists()
