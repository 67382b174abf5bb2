"""Following a live file: FileFollower.poll over every way a file changes, and the watchers."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ctx_inspect.errors import InputError
from ctx_inspect.sources import rotation, watch
from ctx_inspect.sources.follow import (
    Change,
    Chunk,
    FileFollower,
    follow,
    follow_sync,
    input_signature,
)
from ctx_inspect.sources.rotation import RotatedFiles
from ctx_inspect.sources.watch import related_name, resolve_force_polling

WAIT = 10.0  # generous: a slow machine must not fail these


def data_of(chunks: list[Chunk]) -> bytes:
    return b"".join(c.data for c in chunks if c.change is Change.DATA)


def kinds(chunks: list[Chunk]) -> list[Change]:
    return [c.change for c in chunks]


def append(path: Path, data: bytes) -> None:
    with path.open("ab") as fh:
        fh.write(data)


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "run.log"


# -- poll -------------------------------------------------------------------------------------


def test_appends_in_random_chunk_sizes_are_read_exactly_once_in_order(log: Path) -> None:
    rng = random.Random(7)
    log.write_bytes(b"")
    written = bytearray()
    seen: list[Chunk] = []
    with FileFollower(log, read_size=4096) as follower:
        for _ in range(400):
            piece = rng.randbytes(rng.choice([1, 2, 5, 17, 100, 1000, 5000]))
            append(log, piece)
            written += piece
            if rng.random() < 0.6:
                seen.extend(follower.poll())
        seen.extend(follower.poll())
        assert follower.offset == len(written)
    assert all(c.change is Change.DATA for c in seen)
    assert data_of(seen) == bytes(written)
    offset = 0
    for chunk in seen:  # offsets are contiguous
        assert chunk.offset == offset
        offset += len(chunk.data)


def test_nothing_new_gives_no_chunks(log: Path) -> None:
    log.write_bytes(b"abc\n")
    with FileFollower(log) as follower:
        assert data_of(follower.poll()) == b"abc\n"
        assert follower.poll() == []
        assert follower.poll() == []


def test_truncation_restarts_at_zero(log: Path) -> None:
    log.write_bytes(b"x" * 100)
    with FileFollower(log) as follower:
        follower.poll()
        os.truncate(log, 0)
        append(log, b"new\n")
        chunks = follower.poll()
        assert kinds(chunks) == [Change.TRUNCATED, Change.DATA]
        assert chunks[1] == Chunk(Change.DATA, b"new\n", 0)
        assert follower.generation == 1


def test_rewrite_in_place_to_a_longer_file_is_seen_as_truncation(log: Path) -> None:
    log.write_bytes(b'{"seq": 1}\n' * 10)
    with FileFollower(log) as follower:
        follower.poll()
        ino = log.stat().st_ino
        with log.open("wb") as fh:  # same inode, O_TRUNC, refilled past the old end
            fh.write(b'{"seq": 2}\n' * 30)
        assert log.stat().st_ino == ino
        chunks = follower.poll()
        assert kinds(chunks)[0] is Change.TRUNCATED
        assert data_of(chunks) == b'{"seq": 2}\n' * 30


def test_rename_and_create_reads_the_old_file_to_its_end_first(log: Path) -> None:
    log.write_bytes(b"a1\n")
    with FileFollower(log) as follower:
        assert data_of(follower.poll()) == b"a1\n"
        append(log, b"a2\n")  # after the last poll, before the rename: must not be lost
        log.rename(log.with_name("run.log.1"))
        log.write_bytes(b"b1\n")
        chunks = follower.poll()
        assert kinds(chunks) == [Change.DATA, Change.ROTATED, Change.DATA]
        assert chunks[0] == Chunk(Change.DATA, b"a2\n", 3)
        assert chunks[2] == Chunk(Change.DATA, b"b1\n", 0)


def test_a_writer_still_finishing_the_renamed_file_loses_nothing(log: Path) -> None:
    log.write_bytes(b"a1\n")
    with FileFollower(log) as follower, log.open("ab") as old:
        follower.poll()
        log.rename(log.with_name("run.log.1"))
        old.write(b"a2\n")
        old.flush()
        assert data_of(follower.poll()) == b"a2\n"  # renamed away, not re-created yet
        log.write_bytes(b"")  # the new file exists but is still empty
        old.write(b"a3\n")
        old.flush()
        assert kinds(chunks := follower.poll()) == [Change.DATA]
        assert data_of(chunks) == b"a3\n"
        old.write(b"a4\n")
        old.flush()
        append(log, b"b1\n")  # the writer moved on: the old file is complete
        chunks = follower.poll()
        assert kinds(chunks) == [Change.DATA, Change.ROTATED, Change.DATA]
        assert data_of(chunks) == b"a4\nb1\n"


def test_same_size_but_another_file_is_a_rotation(log: Path) -> None:
    log.write_bytes(b"0123456789")
    with FileFollower(log) as follower:
        follower.poll()
        tmp = log.with_name("run.log.tmp")
        tmp.write_bytes(b"abcdefghij")
        os.replace(tmp, log)  # an editor's save: same size, new inode
        chunks = follower.poll()
        assert kinds(chunks) == [Change.ROTATED, Change.DATA]
        assert data_of(chunks) == b"abcdefghij"


def test_copy_truncate(log: Path) -> None:
    log.write_bytes(b"old1\n")
    with FileFollower(log) as follower:
        follower.poll()
        shutil.copyfile(log, log.with_name("run.log.1"))
        os.truncate(log, 0)
        append(log, b"new1\n")
        chunks = follower.poll()
        assert kinds(chunks) == [Change.TRUNCATED, Change.DATA]
        assert data_of(chunks) == b"new1\n"


def test_copy_truncate_loses_what_was_not_read_before_it(log: Path) -> None:
    """The inherent limit of copy-truncate: unread bytes are only in the copy afterwards."""
    log.write_bytes(b"old1\n")
    with FileFollower(log) as follower:
        follower.poll()
        append(log, b"old2\n")  # never polled
        shutil.copyfile(log, log.with_name("run.log.1"))
        os.truncate(log, 0)
        append(log, b"new1\n")
        assert data_of(follower.poll()) == b"new1\n"


def test_deletion_and_re_creation(log: Path) -> None:
    log.write_bytes(b"a1\n")
    with FileFollower(log) as follower:
        follower.poll()
        append(log, b"a2\n")
        log.unlink()
        chunks = follower.poll()
        assert chunks == [Chunk(Change.DATA, b"a2\n", 3), Chunk(Change.DELETED, b"", 6)]
        assert follower.waiting
        assert follower.poll() == []
        log.write_bytes(b"c1\n")
        chunks = follower.poll()
        assert kinds(chunks) == [Change.CREATED, Change.DATA]
        assert chunks[1] == Chunk(Change.DATA, b"c1\n", 0)


def test_a_file_that_appears_later(log: Path) -> None:
    with FileFollower(log) as follower:
        assert follower.waiting
        assert follower.poll() == []
        assert follower.poll() == []
        log.write_bytes(b"hello\n")
        chunks = follower.poll()
        assert kinds(chunks) == [Change.CREATED, Change.DATA]
        assert data_of(chunks) == b"hello\n"


def test_inputs_are_only_read(log: Path) -> None:
    log.write_bytes(b"line\n" * 100)
    log.chmod(0o444)
    before = (log.read_bytes(), log.stat().st_mtime_ns, log.stat().st_size)
    with FileFollower(log) as follower:
        follower.poll()
        assert follower.read_at(0, 5) == b"line\n"
        follower.poll()
        fd_flags = _open_flags(log)
        if fd_flags is not None:
            assert fd_flags & os.O_ACCMODE == os.O_RDONLY
    assert (log.read_bytes(), log.stat().st_mtime_ns, log.stat().st_size) == before


def _open_flags(path: Path) -> int | None:
    """The flags of this process's descriptor on ``path`` (Linux), else None."""
    fd_dir = Path("/proc/self/fd")
    if not fd_dir.is_dir():
        return None
    for entry in fd_dir.iterdir():
        with contextlib.suppress(OSError):
            if os.readlink(entry) == str(path):
                info = Path(f"/proc/self/fdinfo/{entry.name}").read_text()
                for line in info.splitlines():
                    if line.startswith("flags:"):
                        return int(line.split()[1], 8)
    return None


def test_start_skips_what_was_read_elsewhere(log: Path) -> None:
    log.write_bytes(b"0123456789")
    with FileFollower(log, start=4) as follower:
        assert follower.offset == 4
        assert follower.poll() == [Chunk(Change.DATA, b"456789", 4)]
    with FileFollower(log, start=50) as follower:  # shorter than start: read again from 0
        assert kinds(follower.poll()) == [Change.TRUNCATED, Change.DATA]


def test_max_bytes_bounds_a_poll_and_says_it_is_behind(log: Path) -> None:
    log.write_bytes(bytes(range(256)) * 40)  # 10240 bytes
    got = b""
    with FileFollower(log, read_size=1000) as follower:
        chunks = follower.poll(max_bytes=3000)
        assert len(data_of(chunks)) == 3000
        assert follower.behind
        got += data_of(chunks)
        while follower.behind:
            got += data_of(follower.poll(max_bytes=3000))
    assert got == log.read_bytes()


def test_read_at_reads_back_earlier_files_while_they_exist(log: Path) -> None:
    log.write_bytes(b"gen0\n")
    with FileFollower(log, keep_rotated=1) as follower:
        follower.poll()
        log.rename(log.with_name("run.log.1"))
        log.write_bytes(b"gen1\n")
        follower.poll()
        assert follower.generation == 1
        assert follower.read_at(0, 5, 0) == b"gen0\n"  # through the kept descriptor
        assert follower.read_at(0, 5) == b"gen1\n"
        os.truncate(log, 0)
        append(log, b"gen2\n")
        follower.poll()
        assert follower.read_at(0, 5, 1) is None  # truncated: those bytes are gone
        assert follower.read_at(0, 5, 2) == b"gen2\n"
        log.rename(log.with_name("run.log.2"))
        log.write_bytes(b"gen3\n")
        follower.poll()
        assert follower.read_at(0, 5, 2) == b"gen2\n"
        assert follower.read_at(0, 5, 0) is None  # only the last rotated file is kept
    assert follower.read_at(0, 5) is None  # closed


def test_close_is_idempotent_and_poll_after_close_fails(log: Path) -> None:
    log.write_bytes(b"x")
    follower = FileFollower(log)
    follower.close()
    follower.close()
    with pytest.raises(ValueError):
        follower.poll()


def test_a_folder_or_a_fifo_cannot_be_followed(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="folder"):
        FileFollower(tmp_path)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="regular file"):
        FileFollower(fifo)


def test_rotation_siblings_and_the_polling_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    assert related_name("run.log", "run.log")
    assert related_name("run.log", "run.log.1")
    assert related_name("run.log", "run.log-20250101")
    assert related_name("run.db", "run.db-wal")
    assert not related_name("run.log", "run.logger")
    assert not related_name("run.log", "other.log")
    monkeypatch.delenv("CTX_INSPECT_FORCE_POLLING", raising=False)
    assert resolve_force_polling(None) is None
    assert resolve_force_polling(True) is True
    monkeypatch.setenv("CTX_INSPECT_FORCE_POLLING", "1")
    assert resolve_force_polling(None) is True
    assert resolve_force_polling(False) is False
    monkeypatch.setenv("CTX_INSPECT_FORCE_POLLING", "0")
    assert resolve_force_polling(None) is False


def test_input_signature_changes_with_the_file_its_siblings_and_a_folder(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    db.write_bytes(b"a")
    first = input_signature(db, ("-wal",))
    assert input_signature(db, ("-wal",)) == first
    (tmp_path / "state.db-wal").write_bytes(b"w")
    second = input_signature(db, ("-wal",))
    assert second != first
    folder = tmp_path / "store"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "one.json").write_text("{}")
    before = input_signature(folder)
    (folder / "sub" / "two.json").write_text("{}")
    assert input_signature(folder) != before


# -- watching ---------------------------------------------------------------------------------


async def _collect_async(
    path: Path,
    act: Callable[[], None],
    until: Callable[[bytes, list[Change]], bool],
    **kwargs: object,
) -> tuple[bytes, list[Change]]:
    """Follow ``path`` while a thread runs ``act``; stop once ``until`` holds (or after WAIT)."""
    stop = asyncio.Event()
    data = b""
    changes: list[Change] = []
    loop = asyncio.get_running_loop()
    timer = loop.call_later(WAIT, stop.set)
    worker = threading.Thread(target=act)
    async with contextlib.aclosing(follow(path, stop_event=stop, **kwargs)) as chunks_in:  # type: ignore[arg-type]
        worker.start()
        async for chunks in chunks_in:
            data += data_of(chunks)
            changes += [c.change for c in chunks if c.change is not Change.DATA]
            if until(data, changes):
                stop.set()
    timer.cancel()
    worker.join()
    return data, changes


def _writer(path: Path, lines: int, rotate_at: int | None = None, pause: float = 0.005) -> None:
    for i in range(lines):
        if i == rotate_at:
            path.rename(path.with_name(path.name + ".1"))
        append(path, f"{i}\n".encode())
        time.sleep(pause)


def _expected(lines: int) -> bytes:
    return b"".join(f"{i}\n".encode() for i in range(lines))


async def test_follow_delivers_appends_and_a_rotation_through_the_watcher(log: Path) -> None:
    log.write_bytes(b"")
    data, changes = await _collect_async(
        log, lambda: _writer(log, 200, rotate_at=120), lambda d, c: d.endswith(b"\n199\n")
    )
    assert data == _expected(200)
    assert changes == [Change.ROTATED]


async def test_follow_with_forced_polling(log: Path) -> None:
    log.write_bytes(b"")
    data, _ = await _collect_async(
        log,
        lambda: _writer(log, 60, rotate_at=30, pause=0.01),
        lambda d, c: d.endswith(b"\n59\n"),
        force_polling=True,
    )
    assert data == _expected(60)


async def test_the_environment_forces_polling(log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[object] = []
    real = watch.resolve_force_polling

    def spy(value: bool | None) -> bool | None:
        result = real(value)
        seen.append(result)
        return result

    monkeypatch.setattr(watch, "resolve_force_polling", spy)
    monkeypatch.setenv("CTX_INSPECT_FORCE_POLLING", "1")
    log.write_bytes(b"")
    data, _ = await _collect_async(
        log, lambda: _writer(log, 20, pause=0.01), lambda d, c: d.endswith(b"\n19\n")
    )
    assert data == _expected(20)
    assert seen == [True]


async def test_periodic_polls_deliver_without_any_file_system_event(
    log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A file system that sends no events for our file: every change is "unrelated".
    monkeypatch.setattr(watch._WatchPlan, "relevant", lambda self, changes: False)
    log.write_bytes(b"")
    started = time.monotonic()
    data, _ = await _collect_async(
        log,
        lambda: _writer(log, 10, pause=0.02),
        lambda d, c: d.endswith(b"\n9\n"),
        poll_interval=0.1,
    )
    assert data == _expected(10)
    assert time.monotonic() - started < WAIT


async def test_follow_waits_for_a_file_that_appears_later(log: Path) -> None:
    def create() -> None:
        time.sleep(0.2)
        log.write_bytes(b"late\n")

    data, changes = await _collect_async(log, create, lambda d, c: d == b"late\n")
    assert data == b"late\n"
    assert changes == [Change.CREATED]


async def test_closing_the_generator_stops_watching_and_closes_the_file(log: Path) -> None:
    log.write_bytes(b"first\n")
    stream = follow(log, poll_interval=5.0)
    first = await asyncio.wait_for(stream.__anext__(), WAIT)
    assert data_of(first) == b"first\n"
    if Path("/proc/self/fd").is_dir():
        assert _open_flags(log) is not None
    started = time.monotonic()
    await stream.aclose()
    assert time.monotonic() - started < 2.0
    assert _open_flags(log) is None  # no descriptor on the file any more


async def test_a_missing_folder_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="folder not found"):
        async for _ in follow(tmp_path / "nowhere" / "run.log"):
            pass


def _collect_sync(
    path: Path, act: Callable[[], None], until: Callable[[bytes], bool], **kwargs: object
) -> tuple[bytes, list[Change]]:
    stop = threading.Event()
    timer = threading.Timer(WAIT, stop.set)
    timer.start()
    worker = threading.Thread(target=act)
    worker.start()
    data = b""
    changes: list[Change] = []
    try:
        for chunks in follow_sync(path, stop, **kwargs):  # type: ignore[arg-type]
            data += data_of(chunks)
            changes += [c.change for c in chunks if c.change is not Change.DATA]
            if until(data):
                stop.set()
    finally:
        timer.cancel()
        worker.join()
    return data, changes


def test_follow_sync_delivers_and_stops(log: Path) -> None:
    log.write_bytes(b"")
    data, changes = _collect_sync(
        log, lambda: _writer(log, 100, rotate_at=50), lambda d: d.endswith(b"\n99\n")
    )
    assert data == _expected(100)
    assert changes == [Change.ROTATED]


def test_follow_sync_with_forced_polling(log: Path) -> None:
    log.write_bytes(b"")
    data, _ = _collect_sync(
        log,
        lambda: _writer(log, 30, rotate_at=15, pause=0.01),
        lambda d: d.endswith(b"\n29\n"),
        force_polling=True,
    )
    assert data == _expected(30)


def test_follow_does_not_load_the_ui_or_the_formats() -> None:
    script = (
        "import ctx_inspect.sources.follow, sys, json;"
        "print(json.dumps(sorted(m for m in sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], check=True, capture_output=True, text=True
    ).stdout
    loaded = set(json.loads(out))
    assert not {"textual", "rich"} & {m.split(".")[0] for m in loaded}
    assert not any(m.startswith("ctx_inspect.formats") for m in loaded)
    assert "watchfiles" not in loaded  # imported only when watching starts


def test_a_file_cut_and_refilled_then_rotated_between_polls(log: Path) -> None:
    log.write_bytes(b"a1\n")
    with FileFollower(log) as follower:
        follower.poll()
        os.truncate(log, 0)
        append(log, b"b1-longer-than-before\n")
        log.rename(log.with_name("run.log.1"))
        log.write_bytes(b"c1\n")
        chunks = follower.poll()
        assert kinds(chunks) == [Change.TRUNCATED, Change.DATA, Change.ROTATED, Change.DATA]
        assert data_of(chunks) == b"b1-longer-than-before\nc1\n"


# -- several rotations between two polls -------------------------------------------------------

ROTATION_STYLES = ("logrotate", "numbered", "dated")


def _rotated_numbers(log: Path, separator: str) -> dict[int, Path]:
    """The rotated files beside ``log`` by number (``run.log.3``, ``run.log.3.gz``)."""
    found: dict[int, Path] = {}
    for path in log.parent.iterdir():
        rest = path.name[len(log.name) + 1 :].removesuffix(".gz")
        if path.name.startswith(log.name + separator) and rest.isdigit():
            found[int(rest)] = path
    return found


def rotate(log: Path, style: str) -> Path:
    """Rename ``log`` away as a rotation names it; return its new path (the path is then free).

    ``logrotate``: each ``run.log.N`` (or ``.N.gz``) becomes ``.N+1`` and ``run.log`` becomes
    ``run.log.1``; ``numbered``: the next unused number; ``dated``: the next day,
    ``run.log-20250101``, ``run.log-20250102``, ...
    """
    if style == "logrotate":
        for number, path in sorted(_rotated_numbers(log, ".").items(), reverse=True):
            path.rename(path.with_name(path.name.replace(f".{number}", f".{number + 1}", 1)))
        target = log.with_name(f"{log.name}.1")
    elif style == "numbered":
        target = log.with_name(f"{log.name}.{max(_rotated_numbers(log, '.'), default=0) + 1}")
    else:
        days = _rotated_numbers(log, "-")
        target = log.with_name(f"{log.name}-{max(days, default=20250100) + 1}")
    log.rename(target)
    return target


def rotate_twice(log: Path, middle: bytes, new: bytes) -> Path:
    """Two logrotate rotations: a file written in between (returned), then a new file."""
    rotate(log, "logrotate")
    log.write_bytes(middle)
    rotated = rotate(log, "logrotate")
    log.write_bytes(new)
    return rotated


def _age(path: Path, seconds: float = 3600) -> None:
    """Make a file look as old as a rotated file from an earlier run."""
    past = time.time() - seconds
    os.utime(path, (past, past))


@pytest.mark.parametrize("style", ROTATION_STYLES)
def test_two_rotations_between_two_polls_read_the_file_in_between(
    tmp_path: Path, style: str
) -> None:
    log = tmp_path / "run.jsonl"
    log.write_bytes(b"a1\n")
    with FileFollower(log) as follower:
        assert data_of(follower.poll()) == b"a1\n"
        append(log, b"a2\n")
        rotate(log, style)
        log.write_bytes(b"b1\nb2\n")
        middle = rotate(log, style).name  # the file in between, under its rotated name
        log.write_bytes(b"c1\n")
        chunks = follower.poll()
        assert kinds(chunks) == [
            Change.DATA,
            Change.ROTATED,
            Change.DATA,
            Change.ROTATED,
            Change.DATA,
        ]
        assert data_of(chunks) == b"a2\nb1\nb2\nc1\n"
        assert [c.name for c in chunks if c.change is Change.ROTATED] == [middle, "run.jsonl"]
        assert [c.offset for c in chunks if c.change is Change.DATA] == [3, 0, 0]
        assert follower.generation == 2
        assert follower.poll() == []


@pytest.mark.parametrize("style", ROTATION_STYLES)
def test_three_rotations_between_two_polls_leave_older_rotated_files_alone(
    tmp_path: Path, style: str
) -> None:
    log = tmp_path / "run.jsonl"
    for old in range(3):  # rotated files from an earlier run: never read
        log.write_bytes(f"old{old}\n".encode())
        _age(rotate(log, style))
    log.write_bytes(b"a1\n")
    written = b"a1\n"
    with FileFollower(log) as follower:
        assert data_of(follower.poll()) == b"a1\n"
        for generation in "bcd":
            rotate(log, style)
            data = f"{generation}1\n{generation}2\n".encode()
            log.write_bytes(data)
            written += data
        chunks = follower.poll()
        assert kinds(chunks) == [Change.ROTATED, Change.DATA] * 3
        assert b"a1\n" + data_of(chunks) == written
        assert not any(c.change is Change.SKIPPED for c in chunks)


def test_an_empty_file_in_between_is_a_rotation_with_nothing_to_read(log: Path) -> None:
    log.write_bytes(b"a1\n")
    with FileFollower(log) as follower:
        follower.poll()
        rotate(log, "logrotate")
        log.write_bytes(b"")
        rotate(log, "logrotate")
        log.write_bytes(b"c1\n")
        chunks = follower.poll()
        assert kinds(chunks) == [Change.ROTATED, Change.ROTATED, Change.DATA]
        assert data_of(chunks) == b"c1\n"


def test_a_file_in_between_is_read_while_the_new_file_is_still_empty(log: Path) -> None:
    log.write_bytes(b"a1\n")
    with FileFollower(log) as follower:
        follower.poll()
        rotate_twice(log, b"b1\n", b"")  # the writer has not written to the new file yet
        chunks = follower.poll()
        assert kinds(chunks) == [Change.ROTATED, Change.DATA]
        assert data_of(chunks) == b"b1\n"
        assert follower.poll() == []  # the new file is still empty: nothing to switch to yet
        append(log, b"c1\n")
        chunks = follower.poll()
        assert kinds(chunks) == [Change.ROTATED, Change.DATA]
        assert chunks[0].name == "run.log"
        assert data_of(chunks) == b"c1\n"


def test_a_chain_read_in_small_batches_loses_nothing_when_its_files_are_deleted(
    log: Path,
) -> None:
    log.write_bytes(b"a1\n")
    with FileFollower(log, read_size=4) as follower:
        follower.poll()
        written = b""
        for generation in "bcd":
            rotate(log, "numbered")
            data = b"".join(f"{generation}{i}\n".encode() for i in range(10))
            log.write_bytes(data)
            written += data
        got = data_of(follower.poll(max_bytes=8))  # the chain is open, the reading is not done
        assert follower.behind
        for number in (1, 2, 3):  # the writer's housekeeping deletes the rotated files
            log.with_name(f"run.log.{number}").unlink()
        while follower.behind:
            got += data_of(follower.poll(max_bytes=8))
        assert got == written


def test_rotated_files_read_in_between_can_be_read_back(log: Path) -> None:
    log.write_bytes(b"gen0\n")
    with FileFollower(log, keep_rotated=3) as follower:
        follower.poll()
        for generation in (1, 2, 3):
            rotate(log, "logrotate")
            log.write_bytes(f"gen{generation}\n".encode())
        follower.poll()
        assert follower.generation == 3
        assert [follower.read_at(0, 5, g) for g in range(4)] == [
            b"gen0\n",
            b"gen1\n",
            b"gen2\n",
            b"gen3\n",
        ]


def test_a_file_compressed_before_it_was_read_is_reported(log: Path) -> None:
    log.write_bytes(b"a1\n")
    with FileFollower(log) as follower:
        follower.poll()
        _compress(rotate_twice(log, b"b1\n", b"c1\n"))  # run.log.2 (read), .1 (not read yet)
        chunks = follower.poll()
        assert kinds(chunks) == [Change.SKIPPED, Change.ROTATED, Change.DATA]
        assert chunks[0].name == "run.log.1.gz"
        assert "compressed" in chunks[0].reason
        assert chunks[0].unread is None
        assert data_of(chunks) == b"c1\n"


def _compress(path: Path) -> None:
    path.with_name(path.name + ".gz").write_bytes(gzip.compress(path.read_bytes()))
    path.unlink()


def test_the_followed_file_compressed_after_its_rotation_is_not_reported(log: Path) -> None:
    log.write_bytes(b"z1\n")
    _age(rotate(log, "logrotate"))  # an older rotated file
    log.write_bytes(b"a1\n")
    with FileFollower(log) as follower:
        follower.poll()
        append(log, b"a2\n")
        rotate(log, "logrotate")  # delaycompress: the older one is compressed now
        _compress(log.with_name("run.log.2"))
        log.write_bytes(b"b1\n")
        chunks = follower.poll()
        assert kinds(chunks) == [Change.DATA, Change.ROTATED, Change.DATA]
        append(log, b"b2\n")
        rotate(log, "logrotate")  # compress: the file just read is compressed at once
        _compress(log.with_name("run.log.1"))
        log.write_bytes(b"c1\n")
        chunks = follower.poll()
        assert kinds(chunks) == [Change.DATA, Change.ROTATED, Change.DATA]
        assert data_of(chunks) == b"b2\nc1\n"


def test_a_numbered_file_deleted_before_it_was_read_is_reported_missing(log: Path) -> None:
    log.write_bytes(b"a1\n")
    with FileFollower(log) as follower:
        follower.poll()
        for generation in "bcd":
            rotate(log, "numbered")  # run.log.1 (read), .2 and .3 (not read yet)
            log.write_bytes(f"{generation}1\n".encode())
        log.with_name("run.log.2").unlink()
        chunks = follower.poll()
        assert kinds(chunks) == [
            Change.SKIPPED,
            Change.ROTATED,
            Change.DATA,
            Change.ROTATED,
            Change.DATA,
        ]
        assert chunks[0].name == "run.log.2"
        assert "missing" in chunks[0].reason
        assert data_of(chunks) == b"c1\nd1\n"


def _race_the_listing(
    monkeypatch: pytest.MonkeyPatch, action: Callable[[], object], *, before: bool
) -> None:
    """Run ``action`` (the writer's) once, just before or just after the follower first lists
    the rotated files."""
    listed = RotatedFiles.siblings
    pending = [action]

    def racing(self: RotatedFiles) -> list[rotation.Rotated]:
        if before and pending:
            pending.pop()()
        found = listed(self)
        if pending:
            pending.pop()()
        return found

    monkeypatch.setattr(RotatedFiles, "siblings", racing)


def test_a_file_deleted_between_being_listed_and_opened_is_reported_with_its_size(
    log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log.write_bytes(b"a1\n")
    with FileFollower(log) as follower:
        follower.poll()
        middle = rotate_twice(log, b"b1\nb2\n", b"c1\n")
        _race_the_listing(monkeypatch, middle.unlink, before=False)
        chunks = follower.poll()
        assert kinds(chunks) == [Change.SKIPPED, Change.ROTATED, Change.DATA]
        assert chunks[0] == Chunk(
            Change.SKIPPED, name="run.log.1", reason="was deleted before it could be read", unread=6
        )
        assert data_of(chunks) == b"c1\n"


def test_rotation_names(tmp_path: Path) -> None:
    assert rotation.rotation_suffix("run.log", "run.log.1") == ((1,), True, False)
    assert rotation.rotation_suffix("run.log", "run.log.12.gz") == ((12,), True, True)
    assert rotation.rotation_suffix("run.log", "run.log-20250101") == (
        (20250101,),
        False,
        False,
    )
    assert rotation.rotation_suffix("run.log", "run.log-2025-01-01_13") == (
        (2025, 1, 1, 13),
        False,
        False,
    )
    for other in ("run.log", "run.log.", "run.log.1.copy", "run.logs.1", "run.log-wal", "x.1"):
        assert rotation.rotation_suffix("run.log", other) is None


def test_a_file_under_two_rotated_names_is_read_once(log: Path) -> None:
    log.write_bytes(b"a1\n")
    with FileFollower(log) as follower:
        follower.poll()
        middle = rotate_twice(log, b"b1\n", b"c1\n")
        os.link(middle, log.with_name("run.log-20250101"))  # a hard link: one file, two names
        chunks = follower.poll()
        assert kinds(chunks) == [Change.ROTATED, Change.DATA, Change.ROTATED, Change.DATA]
        assert data_of(chunks) == b"b1\nc1\n"


def test_the_new_file_rotated_while_the_chain_is_listed_keeps_its_place(
    log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log.write_bytes(b"a1\n")
    with FileFollower(log) as follower:
        follower.poll()
        rotate_twice(log, b"b1\n", b"c1\n")  # c1: the path's file when the follower opens it

        def rotate_again() -> None:
            rotate(log, "logrotate")
            log.write_bytes(b"d1\n")

        _race_the_listing(monkeypatch, rotate_again, before=True)
        chunks = follower.poll()
        assert data_of(chunks) == b"b1\nc1\nd1\n"
        assert [c.name for c in chunks if c.change is Change.ROTATED] == [
            "run.log.2",
            "run.log.1",
            "run.log",
        ]


def _rotated(name: str, ino: int, mtime: int, base: str = "run.log") -> rotation.Rotated:
    suffix = rotation.rotation_suffix(base, name)
    assert suffix is not None
    key, numbered, compressed = suffix
    stem = name[: len(base) + 1]
    return rotation.Rotated(name, (1, ino), 10, mtime, key, numbered, compressed, stem)


def _names(files: list[rotation.Rotated]) -> list[str]:
    return [f.name for f in files]


def test_which_rotated_files_came_after_the_last_one_read() -> None:
    between = rotation.rotated_between
    old = [_rotated("run.log.5", 5, 10), _rotated("run.log.6.gz", 6, 5)]  # before the last poll
    logrotate = [_rotated("run.log.3", 3, 100), _rotated("run.log.2", 2, 110)]
    logrotate += [_rotated("run.log.1", 1, 120), _rotated("run.log.4.gz", 4, 105)]
    plan = between(old + logrotate, (1, 3), floor=100, pivot_gone=False)
    assert _names(plan.read) == ["run.log.2", "run.log.1"]  # .4.gz is older than the pivot
    assert plan.compressed == [] and plan.missing == []

    numbered = [_rotated("run.log.1", 11, 10), _rotated("run.log.7", 7, 100)]
    numbered += [_rotated("run.log.8", 8, 110), _rotated("run.log.10", 10, 120)]
    plan = between(numbered, (1, 7), floor=100, pivot_gone=False)
    assert _names(plan.read) == ["run.log.8", "run.log.10"]
    assert plan.missing == ["run.log.9"]

    dated = [_rotated("run.log-20250102", 2, 100), _rotated("run.log-20250103", 3, 100)]
    dated += [_rotated("run.log-20250101", 1, 10), _rotated("run.log-20250104.gz", 4, 120)]
    plan = between(dated, (1, 2), floor=100, pivot_gone=False)
    assert _names(plan.read) == ["run.log-20250103"]  # same time: by name
    assert _names(plan.compressed) == ["run.log-20250104.gz"]

    moving = [_rotated("run.log.2", 2, 130), _rotated("run.log.1", 1, 120)]
    plan = between(moving + old, (1, 9), floor=100, pivot_gone=False, by_names=False)
    assert _names(plan.read) == ["run.log.1", "run.log.2"]  # names not trusted: by time

    gone = [_rotated("run.log.2.gz", 2, 110), _rotated("run.log.1.gz", 1, 120)]
    plan = between(gone, (1, 9), floor=100, pivot_gone=True)
    assert _names(plan.compressed) == ["run.log.1.gz"]  # .2.gz is the pivot's own copy

    far = [_rotated("run.log.1", 1, 100), _rotated("run.log.40", 40, 110)]
    plan = between(far, (1, 1), floor=100, pivot_gone=False)
    assert plan.missing == ["run.log.2..39"]
    assert between(far, (1, 1), floor=100, pivot_gone=False, skip=frozenset({(1, 40)})).read == []


def test_links_and_fifos_named_like_rotated_files_are_left_alone(log: Path, tmp_path: Path) -> None:
    log.write_bytes(b"a1\n")
    with FileFollower(log) as follower:
        follower.poll()
        rotate(log, "numbered")
        elsewhere = tmp_path / "elsewhere.txt"
        elsewhere.write_bytes(b"not a log\n")
        log.with_name("run.log.2").symlink_to(elsewhere)
        os.mkfifo(log.with_name("run.log.3"))  # opening it for reading would block
        log.write_bytes(b"b1\n")
        chunks = follower.poll()
        assert kinds(chunks) == [Change.ROTATED, Change.DATA]
        assert data_of(chunks) == b"b1\n"
