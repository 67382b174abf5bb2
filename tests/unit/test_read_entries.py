"""Reading without bodies: message entries in the session, the Claude Code reader's two phases
(scan / apply), the line splitting of the scan, the parallel reader, the chars rule of the
estimate and the zone bounds of the summary. Whatever way a file is read, the session and the
summary come out the same."""

from __future__ import annotations

import json
import os
import random
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from ctx_inspect.agents.claude_code.reader import ClaudeCodeParser
from ctx_inspect.app.config import build_profile
from ctx_inspect.app.loader import chars_estimate, load_session
from ctx_inspect.core.model import (
    Compacted,
    Event,
    LogLine,
    Message,
    MessageAdded,
    MessageKind,
    Part,
    PartType,
    Pruned,
    RequestSent,
    Role,
    SourceSpan,
    Usage,
    UsageReported,
)
from ctx_inspect.core.profiles import Profile, default_profile, make_profile, profile_names
from ctx_inspect.core.session import MessageEntry, Session
from ctx_inspect.core.stats import RunFacts, _zones, summarize
from ctx_inspect.formats import base, parallel_read, registry
from ctx_inspect.formats.base import read_file
from ctx_inspect.sources.reader import read_span

DATA = Path(__file__).parents[1] / "data" / "claude_code"


# -- the session -----------------------------------------------------------------------------


def _message(mid: str, role: Role, kind: MessageKind, text: str, tool: str | None) -> Message:
    ptype = PartType.TOOL_RESULT if kind is MessageKind.TOOL_RESULT else PartType.TEXT
    return Message(
        id=mid,
        role=role,
        kind=kind,
        parts=(Part(type=ptype, text=text, tool_name=tool),),
        visible=role is not Role.SYSTEM,
    )


def _entry(message: Message, span: SourceSpan, tokens: int | None = None) -> MessageEntry:
    return MessageEntry(
        message.id,
        message.role,
        message.kind,
        message.visible,
        message.thread,
        message.tool_name,
        len(message.text),
        tokens,
        span.source,
        span.offset,
        span.length,
        span.line,
    )


def _batch(rng: random.Random, start: int) -> tuple[list[Event], list[Event | MessageEntry]]:
    """The same batch twice: messages as ``MessageAdded``, and as ``MessageEntry``."""
    added: list[Event] = []
    entries: list[Event | MessageEntry] = []
    for i in range(start, start + 30):
        span = SourceSpan(offset=i * 100, length=99, line=i + 1)
        pick = rng.random()
        if pick < 0.6:
            role = rng.choice([Role.USER, Role.ASSISTANT, Role.TOOL, Role.SYSTEM])
            kind = MessageKind.TOOL_RESULT if role is Role.TOOL else MessageKind.MESSAGE
            tool = rng.choice([None, "Bash", "Read"]) if role is Role.TOOL else None
            message = _message(f"m{i}", role, kind, "x" * rng.randint(0, 50), tool)
            tokens = rng.choice([None, None, rng.randint(1, 40)])
            added.append(MessageAdded(message=message, tokens=tokens, span=span))
            entries.append(_entry(message, span, tokens))
            continue
        event: Event
        if pick < 0.75:
            event = RequestSent(span=span)
        elif pick < 0.85:
            event = UsageReported(usage=Usage(input=rng.randint(1, 999)), span=span)
        elif pick < 0.9:
            event = Pruned(message_ids=(f"m{rng.randint(0, i)}",), span=span)
        elif pick < 0.93:
            event = Compacted(retained_ids=(f"m{rng.randint(0, i)}",), span=span)
        else:
            event = LogLine(text="note", span=span)
        added.append(event)
        entries.append(event)
    return added, entries


def _columns(session: Session) -> dict[str, Any]:
    t = session.table
    names = ["ids", "role", "kind", "flags", "thread", "tool", "chars", "estimate", "exact"]
    names += ["reported", "step_added", "step_removed", "event_index", "source", "offset"]
    names += ["length", "line", "threads", "tools"]
    return {name: list(getattr(t, name)) for name in names}


def _state(session: Session) -> tuple[Any, ...]:
    steps = [
        (s.step, s.first_event, s.last_event, s.request_event, s.messages, s.estimated)
        for s in session.all_steps()
    ]
    figures = [
        (s.exact, s.reported, s.reported_label, s.peak_reported, s.usage, s.compactions, s.prunes)
        for s in session.all_steps()
    ]
    events = list(session.non_message_events())
    return _columns(session), steps, figures, events, session.issues, session.info, len(session)


def test_an_entry_is_recorded_as_the_message_it_stands_for() -> None:
    rng = random.Random(3)
    bodies: dict[int, Message] = {}
    with_bodies = Session()
    without = Session(body_reader=lambda span: [bodies[span.offset]])
    for start in range(0, 300, 30):
        added, entries = _batch(rng, start)
        for event in added:
            if isinstance(event, MessageAdded) and event.span is not None:
                bodies[event.span.offset] = event.message
        with_bodies.append(added)
        # some batches mix both kinds: the table keeps the order of the events
        mixed = [
            a if start % 60 and i % 3 == 0 else e
            for i, (a, e) in enumerate(zip(added, entries, strict=True))
        ]
        without.append(mixed)
    assert _state(without)[1:] == _state(with_bodies)[1:]
    columns, expected = _columns(without), _columns(with_bodies)
    expected["flags"] = [f & ~32 for f in expected["flags"]]  # INLINE: no reader there
    assert columns == expected
    assert [without.body(i) for i in range(without.message_count)] == [
        with_bodies.body(i) for i in range(with_bodies.message_count)
    ]
    for index in range(len(without)):
        assert without.event(index) == with_bodies.event(index)


def test_an_entry_is_estimated_from_its_body_without_a_chars_rule() -> None:
    message = _message("m", Role.USER, MessageKind.MESSAGE, "y" * 21, None)
    span = SourceSpan(offset=5, length=9, line=2)
    read: list[SourceSpan] = []

    def reader(where: SourceSpan) -> list[Message]:
        read.append(where)
        return [message]

    session = Session(estimator=lambda m: 2 * len(m.text), body_reader=reader)
    assert session.estimate_chars is None
    session.append([_entry(message, span), RequestSent()])
    assert session.table.estimate[0] == 42 and read == [span]
    assert session.steps[0].estimated == 42
    plain = Session()  # the default estimator is chars / 4: no body needed
    plain.append([_entry(message, span)])
    assert plain.table.estimate[0] == 6


class _Counter:
    def count_batch(self, texts: Sequence[str]) -> list[int]:
        return [len(t) for t in texts]


def test_exact_counts_of_entries_are_taken_from_their_bodies() -> None:
    first = _message("a", Role.USER, MessageKind.MESSAGE, "abc", None)
    second = _message("b", Role.ASSISTANT, MessageKind.MESSAGE, "defgh", None)
    spans = {1: first, 2: second}
    session = Session(
        counter=_Counter(), count_exact=True, body_reader=lambda span: [spans[span.line]]
    )
    session.append(
        [
            _entry(first, SourceSpan(line=1)),
            RequestSent(),
            MessageAdded(message=second, span=SourceSpan(line=2)),
        ]
    )
    assert list(session.table.exact) == [3 + 3, 5 + 3]


def test_events_of_gives_the_events_of_those_classes_in_order() -> None:
    rng = random.Random(5)
    session = Session()
    for start in range(0, 120, 30):
        session.append(_batch(rng, start)[0])
    every = list(session.non_message_events())
    for classes in [(RequestSent,), (Pruned, Compacted), (LogLine, UsageReported, Pruned)]:
        expected = [(i, e) for i, e in every if isinstance(e, classes)]
        assert list(session.events_of(*classes)) == expected


# -- the Claude Code reader, read three ways ---------------------------------------------------


def _read(path: Path, *, bodies: bool, parallel: bool, profile: Profile) -> Session:
    parser = ClaudeCodeParser(0, str(path))
    # the scanners' own estimate, when the profile estimates with the reader's rule
    parser.entry_estimates = profile.estimator == parser.entry_estimate_rule

    def read_back(span: SourceSpan) -> list[Message]:
        return parser.messages_at(read_span(path, span.offset, span.length), span)

    session = Session(
        estimator=lambda message: profile.estimate(message, None),
        body_reader=read_back,
        estimate_chars=None if bodies else chars_estimate(profile, None),
    )
    for items in read_file(parser, path, bodies=bodies, parallel=parallel):
        session.append(items)
    session.append(parser.finish())
    return session


def assert_read_alike(path: Path, profile: Profile | None = None) -> None:
    profile = profile or build_profile(None, default="claude-code")
    full = _read(path, bodies=True, parallel=False, profile=profile)
    facts = RunFacts(str(path), "claude-code", "-")
    default = parallel_read.SCAN_CHUNK
    for parallel, chunk in ((False, default), (True, default), (True, 4096)):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(parallel_read, "SCAN_CHUNK", chunk)  # small: both processes take many
            entries = _read(path, bodies=False, parallel=parallel, profile=profile)
        assert _state(entries) == _state(full), (path, parallel, chunk)
        assert summarize(entries, profile, facts) == summarize(full, profile, facts)
        for index in range(full.message_count):
            assert entries.body(index) == full.body(index), (path, index)


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.jsonl")))
def test_fixtures_read_alike_with_and_without_bodies(name: str) -> None:
    assert_read_alike(DATA / name)


@pytest.mark.parametrize("seed", range(6))
def test_generated_sessions_read_alike_with_and_without_bodies(tmp_path: Path, seed: int) -> None:
    path = tmp_path / f"generated-{seed}.jsonl"
    path.write_bytes(_generated_session(random.Random(seed), 400))
    assert_read_alike(path)
    assert_read_alike(path, build_profile("claude-code", sets=["estimator=chars4"]))


def test_most_lines_take_the_fast_path(tmp_path: Path) -> None:
    path = tmp_path / "generated.jsonl"
    path.write_bytes(_generated_session(random.Random(11), 400))
    parser = ClaudeCodeParser(0, str(path))
    taken = declined = 0
    apply = parser.apply_scanned

    def counted(record: Any, span: SourceSpan, out: list[Any]) -> bool:
        nonlocal taken, declined
        done = apply(record, span, out)
        taken += done
        declined += not done
        return done

    parser.apply_scanned = counted  # type: ignore[method-assign]
    items = parser.feed_entries(path.read_bytes())
    assert taken > 3 * declined
    assert any(isinstance(item, MessageEntry) for item in items)


@pytest.mark.corpus
def test_real_sessions_read_alike_with_and_without_bodies(corpus: Path) -> None:
    files = sorted((corpus / "claude-code").rglob("*.jsonl"))
    files += sorted((corpus / "realruns" / "claude-code").glob("**/projects/**/*.jsonl"))
    assert files
    for path in files:
        assert_read_alike(path)


def test_the_loader_reads_without_bodies_when_none_is_needed(tmp_path: Path) -> None:
    path = tmp_path / "generated.jsonl"
    path.write_bytes(_generated_session(random.Random(2), 300))
    spec = registry.get_format("claude-code")
    profile = build_profile(None, default="claude-code")
    seen: list[bool] = []
    real = base.read_file

    def spy(*args: Any, **kwargs: Any) -> Iterator[list[Any]]:
        seen.append(kwargs["bodies"])
        return real(*args, **kwargs)

    import ctx_inspect.app.loader as loader

    mp = pytest.MonkeyPatch()
    mp.setattr(loader, "read_file", spy)
    try:
        stats = load_session(path, profile, format_spec=spec, count_exact=False, tokenize=False)
        exact = load_session(path, profile, format_spec=spec, count_exact=False, tokenize=True)
    finally:
        mp.undo()
    # Claude Code's own estimate comes with each entry: no body is needed, tokenizer or not
    assert seen == [False, False]
    full = _read(path, bodies=True, parallel=False, profile=profile)
    assert _state(stats.session) == _state(full)
    assert exact.session.message_count == full.message_count
    seen.clear()
    ours = build_profile("claude-code", sets=["estimator=exact"])
    mp.setattr(loader, "read_file", spy)
    try:
        load_session(path, ours, format_spec=spec, count_exact=False, tokenize=False)
        load_session(path, ours, format_spec=spec, count_exact=False, tokenize=True)
    finally:
        mp.undo()
    assert seen == [False, True]  # a tokenizer rule needs the texts


# -- line splitting and the parallel reader ----------------------------------------------------


def _lines(data: bytes, limit: int) -> list[tuple[int, int, Any]]:
    """What the chunks should give together: each complete line, scanned as its text."""
    out: list[tuple[int, int, Any]] = []
    pos = 0
    while True:
        nl = data.find(b"\n", pos)
        if nl < 0:
            return out
        length = nl - pos
        out.append((pos, length, None if length > limit else data[pos:nl].decode()))
        pos = nl + 1


@pytest.mark.parametrize("size", [1, 7, 64, 333, 4096])
def test_chunks_hold_every_line_once(tmp_path: Path, size: int) -> None:
    """Each chunk holds the lines that start in it, however long; over-long lines are not
    kept; a last line without its newline is left out."""
    rng = random.Random(size)
    pieces = ["x" * rng.choice([0, 1, 5, 40, 130, 900]) for _ in range(80)]
    data = ("\n".join(pieces) + "\ntail without newline").encode()
    path = tmp_path / "lines.txt"
    path.write_bytes(data)
    got: list[tuple[int, int, Any]] = []
    with path.open("rb") as fh:
        for begin in range(0, len(data), size):
            got += parallel_read.scan_chunk(
                lambda v: bytes(v).decode(),
                fh.fileno(),
                begin,
                begin + size,
                len(data),
                100,
                block_size=max(size // 2, 3),
            )
    assert got == _lines(data, 100)


def test_parallel_reading_survives_a_worker_that_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parallel_read, "SCAN_CHUNK", 8192)
    path = tmp_path / "generated.jsonl"
    path.write_bytes(_generated_session(random.Random(4), 500))
    profile = build_profile(None, default="claude-code")
    expected = _state(_read(path, bodies=True, parallel=False, profile=profile))
    parent = os.getpid()
    real = parallel_read._ChunkedScan._scan_chunk
    done = [0]

    def failing(self: parallel_read._ChunkedScan, chunk: int) -> list[Any]:
        if os.getpid() != parent:  # in the worker: two chunks, then it dies
            done[0] += 1
            if done[0] > 2:
                raise RuntimeError("the worker fails")
        return real(self, chunk)

    monkeypatch.setattr(parallel_read._ChunkedScan, "_scan_chunk", failing)
    assert _state(_read(path, bodies=False, parallel=True, profile=profile)) == expected


def test_parallel_reading_of_odd_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Blank lines, CRLF, invalid JSON, an over-long line and no final newline."""
    monkeypatch.setattr(ClaudeCodeParser, "max_line_bytes", 4 << 20)
    monkeypatch.setattr(parallel_read, "SCAN_CHUNK", 1 << 16)
    lines = _generated_session(random.Random(8), 300).split(b"\n")
    lines.insert(200, b"")
    lines.insert(210, b"   ")
    lines.insert(220, b"{not json")
    lines.insert(230, b'{"type": "user", "message": {"content": "' + b"z" * (5 << 20) + b'"}}')
    lines[240] += b"\r"
    path = tmp_path / "odd.jsonl"
    path.write_bytes(b"\n".join(lines).rstrip(b"\n"))
    profile = build_profile(None, default="claude-code")
    full = _read(path, bodies=True, parallel=False, profile=profile)
    assert any("line too long" in getattr(e, "reason", "") for _, e in full.non_message_events())
    for parallel in (False, True):
        assert _state(_read(path, bodies=False, parallel=parallel, profile=profile)) == _state(full)


def test_no_worker_is_forked_from_a_threaded_process(tmp_path: Path) -> None:
    path = tmp_path / "generated.jsonl"
    path.write_bytes(_generated_session(random.Random(1), 100))
    profile = build_profile(None, default="claude-code")
    expected = _state(_read(path, bodies=False, parallel=False, profile=profile))
    assert parallel_read._can_fork()
    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        assert not parallel_read._can_fork()
        assert _state(_read(path, bodies=False, parallel=True, profile=profile)) == expected
    finally:
        release.set()
        other.join()


def test_a_worker_is_forked_only_when_a_cpu_is_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel_read, "_usable_cpus", lambda: 2)
    samples = iter([3, 2, 1, 5, 4])
    monkeypatch.setattr(parallel_read, "_runnable", lambda: next(samples))
    assert parallel_read._idle_cpu()  # one sample saw only this process running
    monkeypatch.setattr(parallel_read, "_runnable", lambda: 2)
    assert not parallel_read._idle_cpu()  # another task keeps the other CPU busy
    monkeypatch.setattr(parallel_read, "_usable_cpus", lambda: 1)
    assert not parallel_read._idle_cpu()


# -- the chars rule and the zones ----------------------------------------------------------------


def _random_message(rng: random.Random) -> Message:
    parts = []
    for _ in range(rng.randint(0, 4)):
        ptype = rng.choice(list(PartType))
        text = rng.choice(["", "a", "héllo", "😀 emoji", "x" * rng.randint(0, 300)])
        parts.append(
            Part(
                type=ptype,
                text=text,
                tool_name=rng.choice([None, "Bash"]) if ptype is PartType.TOOL_CALL else None,
                arguments=rng.choice([None, "", '{"a":1}'])
                if ptype is PartType.TOOL_CALL
                else None,
            )
        )
    return Message(id="m", role=rng.choice(list(Role)), parts=tuple(parts))


def test_the_chars_rule_is_the_profiles_own_estimate() -> None:
    rng = random.Random(9)
    messages = [_random_message(rng) for _ in range(300)]
    found = 0
    for name in profile_names():
        for sets in ([], ["estimator=chars4"], ["estimator=exact"], ["estimator=baseagent"]):
            profile = build_profile(name, sets=sets)
            rule = chars_estimate(profile, None)
            if profile.estimator in ("chars4", "exact"):
                assert rule is not None, (name, sets)
            if rule is None:
                continue
            found += 1
            for message in messages:
                assert rule(len(message.text)) == profile.estimate(message, None)
    assert found
    assert chars_estimate(build_profile("baseagent"), None) is None
    exact = build_profile("claude-code", sets=["estimator=exact"])
    assert chars_estimate(exact, _Counter()) is None  # type: ignore[arg-type]


def test_zone_bounds_agree_with_the_profile() -> None:
    rng = random.Random(4)
    profiles = [default_profile(name) for name in profile_names()]
    profiles.append(make_profile("claude-code", {"context_window": 1_000_000}))
    for profile in profiles:
        zone = _zones(profile)
        figures = [*range(0, 300), *(rng.randint(0, 3_000_000) for _ in range(3000))]
        for bound in (profile.threshold(), profile.warning_threshold()):
            figures += [bound - 1, bound, bound + 1]
        for tokens in figures:
            assert zone(tokens) == profile.zone(tokens), (profile.name, tokens)


# -- a generated Claude Code session with every shape the scanner knows ------------------------


def _generated_session(rng: random.Random, count: int) -> bytes:
    """A session file of ``count`` lines: the shapes of real sessions, and odd ones."""
    lines: list[Any] = []
    uuids: list[str] = []
    calls: list[tuple[str, str]] = []
    envelope = {"sessionId": "s-1", "version": "2.0.64", "cwd": "/w", "gitBranch": "main"}
    texts = ["", " ", "\n", "plain", "héllo wörld", "😀" * 3, "x" * 300]

    def text() -> str:
        return rng.choice(texts)

    response = 0

    def chain(kind: str, **fields: Any) -> dict[str, Any]:
        pick = rng.random()
        if pick < 0.02 or not uuids:
            parent: Any = None
        elif pick < 0.05:
            parent = rng.choice(uuids)  # a rewind
        elif pick < 0.06:
            parent = 42
        else:
            parent = uuids[-1]
        uuid: str | None = rng.choice(uuids) if uuids and rng.random() < 0.02 else f"u-{len(lines)}"
        if rng.random() < 0.02:
            uuid = rng.choice(["", None])
        line = {"parentUuid": parent, **envelope, "type": kind, "uuid": uuid, **fields}
        if rng.random() < 0.4:
            line["timestamp"] = f"2025-10-09T08:{len(lines) % 60:02d}:00.000Z"
        if rng.random() < 0.03:
            line["isSidechain"] = True
            if rng.random() < 0.5:
                line["agentId"] = "ag1"
        if isinstance(uuid, str) and uuid:
            uuids.append(uuid)
        return line

    def block() -> Any:
        pick = rng.random()
        if pick < 0.3:
            return {"type": "text", "text": text()}
        if pick < 0.45:
            return {"type": "thinking", "thinking": text(), "signature": "s"}
        if pick < 0.5:
            return {"type": "redacted_thinking", "data": "abc"}
        if pick < 0.8:
            call = f"toolu_{len(lines)}_{rng.randint(0, 9)}"
            name = rng.choice(["Bash", "Read", "Grep", "Task", "", None, "mcp__x"])
            if name is not None:
                calls.append((call, name))
            kind = rng.choice(["tool_use", "server_tool_use", "mcp_tool_use"])
            arguments: Any = rng.choice([{"command": "ls"}, {"p": "ö"}, None, [], "s", 2**70])
            return {
                "type": kind,
                "id": rng.choice([call, call, None]),
                "name": name,
                "input": arguments,
            } | ({"input": {"prompt": text()}} if name == "Task" else {})
        return rng.choice(["bare string", " ", 7, None, {"type": "weird", "x": [1, 2]}, [1]])

    def result_content() -> Any:
        pick = rng.random()
        if pick < 0.5:
            return text()
        if pick < 0.6:
            return None
        if pick < 0.65:
            return rng.choice([{"k": "v"}, 12, True])
        items: list[Any] = []
        for _ in range(rng.randint(0, 4)):
            items.append(
                rng.choice(
                    [
                        {"type": "text", "text": text()},
                        {"type": "text"},
                        {"type": "image", "source": {"type": "base64", "data": "AAAA"}},
                        {"type": "document", "title": "T", "source": {"type": "text", "data": "d"}},
                        {"type": "other", "v": 1},
                        "str item",
                        "",
                        None,
                        5,
                    ]
                )
            )
        return items

    while len(lines) < count:
        pick = rng.random()
        if pick < 0.35:
            if rng.random() < 0.6:
                response += 1
            model = rng.choice(
                ["claude-opus-4-5", "claude-opus-4-5", "<synthetic>", "claude-haiku"]
            )
            usage: Any = {
                "input_tokens": rng.randint(1, 9),
                "cache_read_input_tokens": 1000 * response,
                "output_tokens": rng.randint(1, 500),
            }
            if rng.random() < 0.05:
                usage = rng.choice([None, {}, {"output_tokens": 3}, "bad"])
            content: Any = [block() for _ in range(rng.randint(0, 3))]
            if rng.random() < 0.1:
                content = rng.choice([text(), None, 5])
            message: Any = {
                "model": model,
                "id": f"msg_{response}",
                "role": "assistant",
                "content": content,
                "usage": usage,
            }
            if rng.random() < 0.02:
                message = rng.choice(["not a dict", None])
            lines.append(chain("assistant", message=message, requestId=f"req_{response}"))
        elif pick < 0.6:
            content = []
            for _ in range(rng.randint(1, 3)):
                if calls and rng.random() < 0.7:
                    call, _name = rng.choice(calls)
                    content.append(
                        {
                            "type": "tool_result",
                            "tool_use_id": rng.choice([call, call, None, "toolu_unknown"]),
                            "content": result_content(),
                            "is_error": rng.random() < 0.1,
                        }
                    )
                else:
                    content.append(
                        rng.choice(
                            [
                                {"type": "text", "text": text()},
                                {"type": "image", "source": {"data": "QQ=="}},
                                {
                                    "type": "document",
                                    "title": "doc",
                                    "source": {"type": "text", "data": "body"},
                                },
                                {"type": "unknown"},
                                "bare",
                                3,
                            ]
                        )
                    )
            if rng.random() < 0.3:
                content = text()
            fields: dict[str, Any] = {"message": {"role": "user", "content": content}}
            if rng.random() < 0.3:
                fields["toolUseResult"] = rng.choice(
                    [{"stdout": "out"}, {"agentId": "ag1"}, "text", [1]]
                )
            if rng.random() < 0.05:
                fields["isMeta"] = True
            if rng.random() < 0.03:
                fields["isCompactSummary"] = True
            lines.append(chain("user", **fields))
        elif pick < 0.68:
            attachment = rng.choice(
                [
                    {"type": "hook_success", "content": "ok"},
                    {"type": "hook_additional_context", "content": ["a", {"text": "b"}]},
                    {"type": "file", "content": {"text": "c"}},
                    {"type": "todo", "addedLines": []},
                    "not a dict",
                ]
            )
            fields = {"attachment": attachment}
            if rng.random() < 0.2:
                fields["rendered"] = rng.choice([None, "", "shown", ["x", "y"]])
            lines.append(chain("attachment", **fields))
        elif pick < 0.76:
            subtype = rng.choice(
                [
                    "turn_duration",
                    "api_error",
                    "local_command",
                    None,
                    "compact_boundary",
                    "microcompact_boundary",
                ]
            )
            fields = {
                "subtype": subtype,
                "content": rng.choice([None, "", "hello   world", 4]),
                "level": rng.choice([None, "info", "warning"]),
            }
            if subtype == "compact_boundary":
                fields["compactMetadata"] = {"trigger": "auto", "preTokens": 150000}
            if subtype == "microcompact_boundary":
                fields["microcompactMetadata"] = {
                    "compactedToolIds": [c for c, _ in calls[-3:]],
                    "tokensSaved": 100,
                }
            lines.append(chain("system", **fields))
        elif pick < 0.95:
            kind = rng.choice(
                [
                    "progress",
                    "file-history-snapshot",
                    "summary",
                    "queue-operation",
                    "permission-mode",
                    "brand-new-type",
                    "last-prompt",
                ]
            )
            line: dict[str, Any] = {"type": kind, "sessionId": "s-1"}
            if kind == "progress":
                line["data"] = rng.choice([{"type": "hook_progress"}, {}, "x"])
            if kind == "summary":
                line["summary"] = rng.choice(["A   title", 5])
            if kind == "queue-operation":
                line["operation"] = "enqueue"
            if rng.random() < 0.5:
                line["timestamp"] = "2025-10-09T08:00:00.000Z"
            lines.append(line)
        else:
            lines.append(rng.choice([[1, 2], "a string", {"no": "type"}, {"type": 5}, 17]))
    first = {
        "parentUuid": None,
        **envelope,
        "type": "user",
        "uuid": "u-first",
        "message": {"role": "user", "content": "start"},
    }
    return b"\n".join(json.dumps(x, ensure_ascii=False).encode() for x in [first, *lines]) + b"\n"
