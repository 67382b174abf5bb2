"""Following one input live: chunks to events, markers, whole-input re-reads, and the acceptance
test (a writer process, thousands of events, truncations and both kinds of rotation)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from ctx_inspect.app.live import LiveSource, LiveUpdate, follow_session, follow_stats, open_live
from ctx_inspect.core.model import (
    Event,
    LogLine,
    Marker,
    Message,
    MessageAdded,
    Part,
    PartType,
    RequestSent,
    Role,
    SourceSpan,
)
from ctx_inspect.core.profiles import Profile, default_profile
from ctx_inspect.core.session import Session
from ctx_inspect.formats.base import DocumentParser, LineParser
from ctx_inspect.formats.native import write_events
from ctx_inspect.formats.registry import FormatSpec, Head, SnapshotSession, get_format
from ctx_inspect.sources.follow import Change, Chunk, FileFollower, follow, follow_sync
from tests.unit.test_follow import rotate

WAIT = 30.0  # generous: a slow machine must not fail these


class SeqParser(LineParser):
    """``{"seq": n}`` lines become LogLine("n")."""

    format_name = "seq"

    def parse_line(self, line: bytes, span: SourceSpan) -> Iterable[Event]:
        out: list[Event] = []
        value = self.load_json(line, span, out)
        if isinstance(value, dict) and isinstance(value.get("seq"), int):
            out.append(LogLine(text=str(value["seq"]), span=span))
        elif value is not None:
            out.append(self.issue(span, "no seq", line))
        return out


class ListDocParser(DocumentParser):
    """A JSON document ``["a", "b"]`` becomes one LogLine per item."""

    format_name = "listdoc"

    def parse_document(self, value: Any, span: SourceSpan) -> Iterable[Event]:
        return [LogLine(text=str(item)) for item in value]


def _never(head: Head) -> float:
    return 0.0


SEQ = FormatSpec(name="seq", description="test", reads="*.log", parser=SeqParser, sniff=_never)
LISTDOC = FormatSpec(
    name="listdoc", description="test", reads="*.json", parser=ListDocParser, sniff=_never
)


def _snapshot(path: Path) -> list[SnapshotSession]:
    """A "database": a JSON object {label: [texts]}."""
    doc = json.loads(path.read_text())
    return [
        SnapshotSession(label=label, events=[LogLine(text=t) for t in texts])
        for label, texts in doc.items()
    ]


SNAP = FormatSpec(
    name="snap", description="test", reads="*.db", parser=None, sniff=_never, snapshot=_snapshot
)


@pytest.fixture
def profile() -> Profile:
    return default_profile("generic")


def seq_lines(start: int, stop: int) -> bytes:
    return b"".join(b'{"seq": %d}\n' % i for i in range(start, stop))


def texts(events: Iterable[Event]) -> list[str]:
    return [e.text for e in events if isinstance(e, LogLine | Marker)]


def new_live(spec: FormatSpec = SEQ, path: str = "run.log") -> LiveSource:
    session = Session()
    session.add_source(path, spec.name)
    return LiveSource(Path(path), spec, session, 0)


# -- streams ----------------------------------------------------------------------------------


def test_random_chunk_sizes_give_the_events_of_the_whole_file() -> None:
    events: list[Event] = [
        Marker(text="start"),
        MessageAdded(
            message=Message(id="m1", role=Role.USER, parts=(Part(type=PartType.TEXT, text="hi"),))
        ),
        RequestSent(model="m"),
        *[LogLine(text=f"line {i} " + "é" * (i % 7)) for i in range(200)],
    ]
    buf = io.StringIO()
    write_events(events, buf)
    data = buf.getvalue().encode()
    native = get_format("native")
    whole = native.make_parser()
    expected = [*whole.feed(data), *whole.finish()]

    rng = random.Random(3)
    live = new_live(native, "run.jsonl")
    pos = 0
    got: list[Event] = []
    while pos < len(data):
        size = rng.choice([1, 3, 10, 64, 500])
        piece = data[pos : pos + size]
        got.extend(live.apply([Chunk(Change.DATA, piece, pos)]))
        pos += len(piece)
        complete_lines = data[:pos].count(b"\n")
        assert len(got) == max(0, complete_lines - 1)  # the header line gives no event
    assert got == expected
    assert list(live.session.events()) == expected


def test_a_partial_last_line_is_held_until_complete() -> None:
    live = new_live()
    assert live.apply([Chunk(Change.DATA, b'{"seq": 1}\n{"se', 0)]) == [
        LogLine(text="1", span=SourceSpan(source=0, offset=0, length=10, line=1))
    ]
    assert live.apply([Chunk(Change.DATA, b'q": 2', 15)]) == []
    events = live.apply([Chunk(Change.DATA, b"}\n", 20)])
    assert texts(events) == ["2"]
    assert events[0].span == SourceSpan(source=0, offset=11, length=10, line=2)
    assert len(live.session) == 2


def test_truncation_flushes_marks_and_reads_again_from_the_start() -> None:
    live = new_live()
    events = live.apply(
        [
            Chunk(Change.DATA, seq_lines(0, 2), 0),
            Chunk(Change.TRUNCATED),
            Chunk(Change.DATA, seq_lines(2, 3), 0),
        ]
    )
    assert texts(events) == [
        "0",
        "1",
        "run.log was truncated; reading it again from the start",
        "2",
    ]
    assert live.sources == [0, 1]
    assert len(live.session.sources) == 2
    assert events[-1].span == SourceSpan(source=1, offset=0, length=10, line=1)
    assert live.generation == 1


def test_rotation_flushes_a_last_line_without_newline_first() -> None:
    live = new_live()
    live.apply([Chunk(Change.DATA, b'{"seq": 1}\n{"seq": 2}', 0)])
    events = live.apply([Chunk(Change.ROTATED), Chunk(Change.DATA, seq_lines(3, 4), 0)])
    assert texts(events) == ["2", "run.log was rotated; now reading the new file", "3"]


def test_files_rotated_in_between_and_skipped_ones_are_marked() -> None:
    live = new_live()
    live.apply([Chunk(Change.DATA, b'{"seq": 1}\n{"seq": 2}', 0)])
    events = live.apply(
        [
            Chunk(Change.SKIPPED, name="run.log.3.gz", reason="is compressed (not followed)"),
            Chunk(Change.ROTATED, name="run.log.2"),
            Chunk(Change.DATA, seq_lines(3, 4), 0),
            Chunk(
                Change.SKIPPED,
                name="run.log.1",
                reason="was deleted before it could be read",
                unread=1234,
            ),
            Chunk(Change.ROTATED, name="run.log"),
            Chunk(Change.DATA, seq_lines(4, 5), 0),
        ]
    )
    assert texts(events) == [
        "2",  # the first file's last line comes before any marker
        "run.log.3.gz is compressed (not followed); lines in it may be lost",
        "run.log was rotated more than once since it was last read; "
        "reading run.log.2, written in between, first",
        "3",
        "run.log.1 was deleted before it could be read; 1,234 bytes not read: lines lost",
        "run.log was rotated; now reading the new file",
        "4",
    ]
    assert live.sources == [0, 1, 2]  # one per file read; none for the skipped ones
    assert live.generation == 2


def test_deletion_and_re_creation_are_marked() -> None:
    live = new_live()
    live.apply([Chunk(Change.DATA, seq_lines(0, 1), 0)])
    events = live.apply([Chunk(Change.DELETED, offset=11)])
    assert texts(events) == ["run.log was deleted; waiting for it to come back"]
    events = live.apply([Chunk(Change.CREATED), Chunk(Change.DATA, seq_lines(1, 2), 0)])
    assert texts(events) == ["run.log was created again; reading it from the start", "1"]
    assert texts(live.session.events()) == [
        "0",
        "run.log was deleted; waiting for it to come back",
        "run.log was created again; reading it from the start",
        "1",
    ]


def test_a_file_that_appears_later_keeps_its_source() -> None:
    live = new_live()
    events = live.apply([Chunk(Change.CREATED), Chunk(Change.DATA, seq_lines(0, 1), 0)])
    assert texts(events) == ["run.log appeared; reading it from the start", "0"]
    assert live.sources == [0]
    assert live.session.sources[0].path == "run.log"


def test_finish_flushes_the_held_line() -> None:
    live = new_live()
    live.apply([Chunk(Change.DATA, b'{"seq": 9}', 0)])
    assert texts(live.finish()) == ["9"]
    assert live.finish() == []


def _native_line(message_id: str, text: str) -> bytes:
    buf = io.StringIO()
    write_events(
        [
            MessageAdded(
                message=Message(
                    id=message_id, role=Role.USER, parts=(Part(type=PartType.TEXT, text=text),)
                )
            )
        ],
        buf,
        header=False,
    )
    return buf.getvalue().encode()


def test_bodies_of_a_rotated_file_are_read_back_and_gone_ones_are_not(
    tmp_path: Path, profile: Profile
) -> None:
    log = tmp_path / "run.jsonl"
    log.write_bytes(_native_line("a", "from the first file"))
    live = open_live(log, get_format("native"), profile, count_exact=False)
    assert live.follower is not None
    try:
        live.apply(live.follower.poll())
        log.rename(tmp_path / "run.jsonl.1")
        log.write_bytes(_native_line("b", "from the second file"))
        live.apply(live.follower.poll())
        session = live.session
        assert session.message_count == 2
        assert session.body(0).text == "from the first file"
        assert session.body(1).text == "from the second file"
        os.truncate(log, 0)
        log.write_bytes(_native_line("c", "third"))
        live.apply(live.follower.poll())
        session._bodies.clear()  # force reading back
        assert session.body(1).parts == ()  # its bytes were truncated away: not misread
        assert session.body(2).text == "third"
        assert session.body(0).text == "from the first file"
    finally:
        live.close()


# -- whole inputs -----------------------------------------------------------------------------


def test_a_whole_input_is_re_read_into_a_new_session(tmp_path: Path, profile: Profile) -> None:
    db = tmp_path / "state.db"
    db.write_text(json.dumps({"old": ["x"], "new": ["a"]}))
    live = open_live(db, SNAP, profile, count_exact=False)
    first = live.session
    assert texts(first.events()) == ["a"]  # the last session listed
    assert not live.refresh()
    db.write_text(json.dumps({"old": ["x"], "new": ["a", "b"]}))
    assert live.refresh()
    assert live.session is not first
    assert live.reloads == 2
    assert texts(live.session.events()) == ["a", "b"]
    assert [s.path for s in live.session.sources] == [str(db)]
    assert not live.refresh()


def test_a_whole_input_by_label_and_its_failures(tmp_path: Path, profile: Profile) -> None:
    db = tmp_path / "state.db"
    db.write_text(json.dumps({"old": ["x"], "new": ["a"]}))
    live = open_live(db, SNAP, profile, label="old", count_exact=False)
    assert texts(live.session.events()) == ["x"]
    kept = live.session
    db.write_text("{ half written")
    assert live.refresh()
    assert live.session is kept
    (marker,) = texts(live.session.events())[1:]
    assert marker.startswith("state.db could not be read again (JSONDecodeError")
    db.write_text("{ still half written")
    live.refresh()
    assert len(kept) == 2  # the same reason is said once
    db.unlink()
    live.refresh()
    assert texts(kept.events())[-1] == "state.db was deleted; waiting for it to come back"
    db.write_text(json.dumps({"old": ["y"]}))
    assert live.refresh()
    assert texts(live.session.events()) == ["y"]


def test_a_json_document_is_re_read_on_change(tmp_path: Path, profile: Profile) -> None:
    doc = tmp_path / "body.json"
    doc.write_text('["a"]')
    live = open_live(doc, LISTDOC, profile, count_exact=False)
    assert live.whole and live.follower is None
    assert texts(live.session.events()) == ["a"]
    doc.write_text('["a", "b"]')
    events = live.apply([Chunk(Change.DATA, b"whatever", 0)])
    assert texts(events) == ["a", "b"]
    assert texts(live.session.events()) == ["a", "b"]


# -- the async and sync helpers ---------------------------------------------------------------


async def test_follow_session_yields_the_session_then_each_change(
    tmp_path: Path, profile: Profile
) -> None:
    log = tmp_path / "run.log"
    log.write_bytes(seq_lines(0, 3))
    stop = asyncio.Event()
    updates: list[LiveUpdate] = []

    def write() -> None:
        time.sleep(0.1)
        with log.open("ab") as fh:
            fh.write(seq_lines(3, 6))

    worker = threading.Thread(target=write)
    timer = asyncio.get_running_loop().call_later(WAIT, stop.set)
    gen = follow_session(log, SEQ, profile, count_exact=False, stop_event=stop)
    async with contextlib.aclosing(gen):
        async for update in gen:
            updates.append(update)
            if len(updates) == 1:
                worker.start()
            if texts(update.session.events())[-1:] == ["5"]:
                stop.set()
    timer.cancel()
    worker.join()
    assert updates[0].events == [] and not updates[0].replaced
    assert all(u.session is updates[0].session for u in updates)
    assert texts(updates[-1].session.events()) == ["0", "1", "2", "3", "4", "5"]


async def test_follow_session_of_a_whole_input(tmp_path: Path, profile: Profile) -> None:
    db = tmp_path / "state.db"
    db.write_text(json.dumps({"s": ["a"]}))
    stop = asyncio.Event()
    updates: list[LiveUpdate] = []
    timer = asyncio.get_running_loop().call_later(WAIT, stop.set)
    gen = follow_session(db, SNAP, profile, count_exact=False, stop_event=stop)
    async with contextlib.aclosing(gen):
        async for update in gen:
            updates.append(update)
            if len(updates) == 1:
                db.write_text(json.dumps({"s": ["a", "b"]}))
            else:
                stop.set()
    timer.cancel()
    assert texts(updates[0].events) == ["a"]
    assert updates[1].replaced and updates[1].session is not updates[0].session
    assert texts(updates[1].events) == ["a", "b"]


def test_follow_stats_calls_back_with_the_current_session(tmp_path: Path, profile: Profile) -> None:
    log = tmp_path / "run.log"
    log.write_bytes(seq_lines(0, 2))
    stop = threading.Event()
    seen: list[list[str]] = []

    def on_update(session: Session) -> None:
        seen.append(texts(session.events()))
        if len(seen) == 1:
            with log.open("ab") as fh:
                fh.write(seq_lines(2, 4))
        if seen[-1][-1:] == ["3"]:
            stop.set()

    timer = threading.Timer(WAIT, stop.set)
    timer.start()
    try:
        session = follow_stats(log, SEQ, profile, on_update, stop, count_exact=False)
    finally:
        timer.cancel()
    assert seen[0] == ["0", "1"]
    assert seen[-1] == ["0", "1", "2", "3"]
    assert texts(session.events()) == ["0", "1", "2", "3"]


# -- acceptance: a writer process, thousands of events, truncations and rotations -------------

WRITER = r"""
import json, os, random, shutil, sys, time

path, ack, plan, style = sys.argv[1], sys.argv[2], sys.argv[5], sys.argv[6]
count, seed = int(sys.argv[3]), int(sys.argv[4])
ops = {int(k): v for k, v in json.loads(plan).items()}
rng = random.Random(seed)


def acked(last):
    try:
        with open(ack) as fh:
            return int(fh.read() or -1) >= last
    except (FileNotFoundError, ValueError):
        return False


def wait_ack(last):
    deadline = time.monotonic() + 60
    while not acked(last):
        if time.monotonic() > deadline:
            sys.exit(f"no ack for {last}")
        time.sleep(0.002)


def rename_away(renames):
    # logrotate: run.log.N -> run.log.N+1, ..., run.log -> run.log.1; numbered: run.log.K
    if style == "numbered":
        os.rename(path, f"{path}.{renames}")
        return
    folder, name = os.path.split(path)
    numbers = [n[len(name) + 1 :] for n in os.listdir(folder) if n.startswith(name + ".")]
    for number in sorted((int(n) for n in numbers if n.isdigit()), reverse=True):
        os.rename(f"{path}.{number}", f"{path}.{number + 1}")
    os.rename(path, f"{path}.1")


fh = open(path, "ab", buffering=0)  # O_APPEND: after a truncation, writes land at the new end
pending = b""
renames = copies = 0
for seq in range(count):
    op = ops.get(seq)
    if op is not None:
        if pending:  # complete lines only before the file is cut or moved
            fh.write(pending)
            pending = b""
        if op in ("truncate", "copytruncate"):
            # Bytes the reader has not read yet would be destroyed: wait until it has them.
            wait_ack(seq - 1)
            if op == "copytruncate":
                copies += 1
                shutil.copyfile(path, f"{path}.{copies}.copy")
            os.truncate(path, 0)
        else:  # rename-and-create, no ack, even a few microseconds after the last one
            fh.close()
            renames += 1
            rename_away(renames)
            fh = open(path, "ab", buffering=0)
    pending += json.dumps({"seq": seq, "pad": "x" * rng.randrange(0, 80)}).encode() + b"\n"
    while pending and rng.random() < 0.6:  # random chunk sizes: lines split across writes
        cut = rng.randint(1, len(pending))
        fh.write(pending[:cut])
        pending = pending[cut:]
    if rng.random() < 0.03:
        time.sleep(rng.uniform(0, 0.005))
fh.write(pending)
fh.close()
"""

PLAN = {  # renames at consecutive seqs: one line in between, microseconds apart
    "700": "truncate",
    "1200": "rename",
    "1201": "rename",
    "1700": "copytruncate",
    "2400": "rename",
    "3100": "truncate",
    "3600": "copytruncate",
    "4300": "rename",
    "4301": "rename",
    "4302": "rename",
}


class Acceptance:
    """Reader side: a LiveSource fed by the real watcher; acknowledges the last seq it has."""

    def __init__(self, tmp_path: Path, count: int) -> None:
        self.path = tmp_path / "logs" / "run.log"
        self.path.parent.mkdir()
        self.ack = tmp_path / "ack"
        self.count = count
        self.path.write_bytes(b"")
        session = Session()
        session.add_source(str(self.path), SEQ.name)
        self.live = LiveSource(self.path, SEQ, session, 0)
        self.seqs: list[int] = []
        self.changes: list[Change] = []
        self.writer: subprocess.Popen[bytes] | None = None

    def start_writer(self, plan: dict[str, str], seed: int, style: str = "numbered") -> None:
        args = [str(self.path), str(self.ack), str(self.count), str(seed), json.dumps(plan), style]
        self.writer = subprocess.Popen([sys.executable, "-c", WRITER, *args])

    def take(self, chunks: list[Chunk]) -> bool:
        """Apply a batch; True once every event has been seen."""
        self.changes += [c.change for c in chunks if c.change is not Change.DATA]
        before = len(self.seqs)
        for event in self.live.apply(chunks):
            if isinstance(event, LogLine):
                self.seqs.append(int(event.text))
        if len(self.seqs) != before:
            tmp = self.ack.with_suffix(".tmp")
            tmp.write_text(str(self.seqs[-1]))
            os.replace(tmp, self.ack)
        return len(self.seqs) >= self.count

    def check(self, plan: dict[str, str]) -> None:
        assert self.writer is not None
        assert self.writer.wait(timeout=WAIT) == 0
        assert self.seqs == list(range(self.count))  # none lost, none duplicated, in order
        assert self.live.session.issues == []
        expected = {
            Change.TRUNCATED: sum(1 for op in plan.values() if op != "rename"),
            Change.ROTATED: sum(1 for op in plan.values() if op == "rename"),
        }
        assert {c: self.changes.count(c) for c in expected} == expected
        assert set(self.changes) <= set(expected)

    def kill(self) -> None:
        if self.writer is not None and self.writer.poll() is None:
            self.writer.kill()
            self.writer.wait()


async def _accept_async(
    tmp_path: Path, count: int, plan: dict[str, str], style: str = "numbered", **kwargs: Any
) -> None:
    reader = Acceptance(tmp_path, count)
    stop = asyncio.Event()
    timer = asyncio.get_running_loop().call_later(WAIT, stop.set)
    try:
        stream = follow(reader.path, stop_event=stop, **kwargs)
        async with contextlib.aclosing(stream):
            reader.start_writer(plan, seed=count, style=style)
            async for chunks in stream:
                if reader.take(chunks):
                    stop.set()
        reader.check(plan)
    finally:
        timer.cancel()
        reader.kill()


async def test_acceptance_writer_process_async_follow(tmp_path: Path) -> None:
    await _accept_async(tmp_path, 5000, PLAN)


async def test_acceptance_writer_process_forced_polling(tmp_path: Path) -> None:
    plan = {
        "300": "truncate",
        "600": "rename",
        "601": "rename",
        "900": "copytruncate",
        "1200": "rename",
        "1201": "rename",
        "1202": "rename",
    }
    await _accept_async(tmp_path, 1500, plan, "logrotate", force_polling=True)


def test_acceptance_writer_process_follow_sync(tmp_path: Path) -> None:
    plan = {
        "400": "copytruncate",
        "800": "rename",
        "801": "rename",
        "1300": "truncate",
        "1700": "rename",
        "1701": "rename",
        "1702": "rename",
    }
    reader = Acceptance(tmp_path, 2000)
    stop = threading.Event()
    timer = threading.Timer(WAIT, stop.set)
    timer.start()
    try:
        with FileFollower(reader.path) as follower:
            reader.start_writer(plan, seed=2000, style="logrotate")
            for chunks in follow_sync(reader.path, stop, follower=follower):
                if reader.take(chunks):
                    stop.set()
        reader.check(plan)
    finally:
        timer.cancel()
        reader.kill()


def test_live_does_not_load_the_ui() -> None:
    script = "import ctx_inspect.app.live, sys, json; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", script], check=True, capture_output=True, text=True
    ).stdout
    assert not {"textual", "rich"} & {m.split(".")[0] for m in json.loads(out)}


# -- acceptance, poll by poll: rotations closer together than the reader's polls ---------------


class RotatingWriter:
    """The acceptance writer in this process, so that the test decides when the reader polls:
    ``{"seq": n, "pad": ...}`` lines written in random pieces (lines split across writes),
    rotations by rename (named as ``style`` names them, see ``test_follow.rotate``) and
    truncations in place (with or without a copy)."""

    def __init__(self, path: Path, style: str, rng: random.Random) -> None:
        self.path = path
        self.style = style
        self.rng = rng
        self.fh = path.open("ab", buffering=0)  # O_APPEND: after a truncation, at the new end
        self.pending = b""
        self.seq = 0
        self.renames = 0
        self.truncations = 0

    def write(self, lines: int) -> None:
        for _ in range(lines):
            pad = "x" * self.rng.randrange(0, 80)
            self.pending += json.dumps({"seq": self.seq, "pad": pad}).encode() + b"\n"
            self.seq += 1
            while self.pending and self.rng.random() < 0.6:
                cut = self.rng.randint(1, len(self.pending))
                self.fh.write(self.pending[:cut])
                self.pending = self.pending[cut:]

    def complete(self) -> None:
        """Write the held part of the last line (only whole lines go before a cut or a move)."""
        self.fh.write(self.pending)
        self.pending = b""

    def rename(self) -> None:
        self.complete()
        self.fh.close()
        rotate(self.path, self.style)
        self.fh = self.path.open("ab", buffering=0)
        self.renames += 1

    def truncate(self, copy: bool) -> None:
        self.complete()
        if copy:
            shutil.copyfile(self.path, f"{self.path}.{self.truncations}.copy")
        os.truncate(self.path, 0)
        self.truncations += 1

    def close(self) -> None:
        self.complete()
        self.fh.close()


class PolledReader:
    """A LiveSource over a FileFollower polled only when the test says so."""

    def __init__(self, path: Path, read_size: int) -> None:
        session = Session()
        session.add_source(str(path), SEQ.name)
        self.follower = FileFollower(path, read_size=read_size)
        self.live = LiveSource(path, SEQ, session, 0, follower=self.follower)
        session.body_reader = self.live.read_back
        self.seqs: list[int] = []
        self.changes: list[Change] = []

    def poll(self, max_bytes: int | None = None) -> None:
        chunks = self.follower.poll(max_bytes=max_bytes)
        self.changes += [c.change for c in chunks if c.change is not Change.DATA]
        self.seqs += [int(e.text) for e in self.live.apply(chunks) if isinstance(e, LogLine)]

    def catch_up(self, max_bytes: int | None = None) -> None:
        self.poll(max_bytes)
        while self.follower.behind:
            self.poll(max_bytes)


def _accept_polled(tmp_path: Path, style: str, seed: int, bursts: tuple[int, ...]) -> None:
    """Write ``count`` lines through rename rotations in bursts of ``bursts`` renames with no
    poll between them (some files in between left empty), truncations and copy-truncations;
    the reader polls between bursts with random read budgets, so it is sometimes still behind
    on an older file when the next burst comes. Every line must arrive once, in order."""
    rng = random.Random(seed)
    path = tmp_path / "logs" / "run.jsonl"
    path.parent.mkdir()
    path.write_bytes(b"")
    reader = PolledReader(path, read_size=rng.choice([97, 4096, 1 << 20]))
    writer = RotatingWriter(path, style, rng)
    count = 3000
    try:
        while writer.seq < count:
            writer.write(rng.randint(0, 120))
            roll = rng.random()
            if roll < 0.4:
                for _ in range(rng.choice(bursts)):  # closer together than two polls
                    writer.rename()
                    writer.write(rng.choice([0, rng.randint(1, 60)]))
            elif roll < 0.5:
                writer.complete()
                reader.catch_up()  # a truncation destroys unread bytes: read them all first
                if path.stat().st_size:
                    writer.truncate(copy=rng.random() < 0.5)
            reader.poll(rng.choice([None, 300, 3000, 30000]))
        writer.write(1)  # the last file is not left empty (the reader would wait on the one before)
        writer.close()
        reader.catch_up()
        assert reader.seqs == list(range(writer.seq))  # none lost, none twice, in order
        assert reader.live.session.issues == []
        expected = {Change.ROTATED: writer.renames, Change.TRUNCATED: writer.truncations}
        got = {c: reader.changes.count(c) for c in expected}
        assert got == expected, (got, expected)
        assert set(reader.changes) <= set(expected)  # nothing skipped, deleted or re-created
        assert writer.renames > 20
    finally:
        writer.fh.close()
        reader.live.close()
        reader.follower.close()


def test_a_rotated_file_deleted_before_it_was_read_is_a_marker_in_the_session(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.log"
    path.write_bytes(seq_lines(0, 1))
    reader = PolledReader(path, read_size=4096)
    try:
        reader.poll()
        for start in (1, 2, 3):  # run.log.1 (read), .2 and .3 (not read yet)
            rotate(path, "numbered")
            path.write_bytes(seq_lines(start, start + 1))
        path.with_name("run.log.2").unlink()
        reader.poll()
        assert reader.seqs == [0, 2, 3]
        assert texts(reader.live.session.events()) == [
            "0",
            "run.log.2 is missing (deleted before it could be read); lines in it may be lost",
            "run.log was rotated more than once since it was last read; "
            "reading run.log.3, written in between, first",
            "2",
            "run.log was rotated; now reading the new file",
            "3",
        ]
    finally:
        reader.live.close()
        reader.follower.close()


@pytest.mark.parametrize("style", ["logrotate", "numbered", "dated"])
def test_acceptance_two_rotations_between_polls(tmp_path: Path, style: str) -> None:
    _accept_polled(tmp_path, style, seed=2, bursts=(2,))


@pytest.mark.parametrize("style", ["logrotate", "numbered", "dated"])
def test_acceptance_three_rotations_between_polls(tmp_path: Path, style: str) -> None:
    _accept_polled(tmp_path, style, seed=3, bursts=(1, 2, 3))
