"""Following a live file: appends, truncation, rotation, deletion and re-creation. Bytes only.

``FileFollower`` keeps one read-only descriptor on the file the path names and, at each
``poll()``, returns what is new as ``Chunk`` s. It stats the path and compares the file it names
(device and inode) and its size with the open descriptor:

- same file, longer: the new bytes (``DATA``);
- same file, shorter than what was read, or the bytes just before the read position changed
  (an editor that rewrote it in place, a copy-truncate refilled before the poll): ``TRUNCATED``,
  then the file from offset 0. Bytes written after the last poll and before a copy-truncate are
  gone with the truncation: nothing can read them back (the inherent limit of copy-truncate);
- another file at the path (rename-and-create, an editor's save by rename, even at the same
  size): the old file is first read to its end through the still-open descriptor, then
  ``ROTATED`` and the new file from 0. While the new file is still empty and the old one still
  exists under another name, the follower keeps reading the old one (a writer finishes its last
  lines there before it moves on), so bytes written to the old file before the switch are never
  lost;
- several rotations between two polls: the files rotated in between are looked for among the
  path's rotated siblings (``run.log.1``, ``run.log.2``, ``run.log-20250101``, ...; see
  ``sources.rotation``) and read, oldest first, each after its own ``ROTATED`` (whose ``name``
  says which file it is), before the file the path names now. Each is opened as soon as it is
  found, so deleting it afterwards loses nothing; no file is read twice. A file in between that
  cannot be read gives a ``SKIPPED`` chunk (its name, why, and how many bytes were not read when
  that is known): it was compressed (``run.log.1.gz``), deleted between being listed and being
  opened, is missing from a numbered chain (``run.log.3`` and ``run.log.1`` but no
  ``run.log.2``), or cannot be opened;
- no file at the path: if the old file was only renamed, it is followed until a new file
  appears (then ``ROTATED``); if it was deleted, it is read to its end, then ``DELETED`` and
  the follower waits; when the path exists again, ``CREATED`` and the new file from 0. A path
  that does not exist yet is waited for the same way (``CREATED`` when it appears).

The rotated files are found, ordered and opened by ``sources.rotation``. ``follow`` (async) and
``follow_sync`` poll on each change ``sources.watch`` reports (watchfiles on the file's folder,
and every ``poll_interval`` seconds without any event). Inputs are never written to.

A copy-truncate destroys the bytes written since the last poll before they can be read: a writer
that must lose nothing waits for the reader before it truncates (or rotates by rename instead).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import threading
from collections import OrderedDict, deque
from collections.abc import AsyncGenerator, Generator, Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import Final

from ctx_inspect.errors import InputError
from ctx_inspect.sources.rotation import (
    MAX_CHAIN,
    READ_FLAGS,
    Identity,
    OpenFile,
    RotatedFiles,
    Skipped,
    identity,
)
from ctx_inspect.sources.watch import (
    DEBOUNCE_MS,
    POLL_DELAY_MS,
    POLL_INTERVAL,
    STEP_MS,
    watch_input,
    watch_input_sync,
)

READ_SIZE: Final = 1 << 20
BATCH_BYTES: Final = 8 << 20  # at most this much per yielded batch while catching up
TAIL_BYTES: Final = 64  # bytes before the read position that must not change
MAX_STEPS: Final = 64  # file switches within one poll before it returns as ``behind``


def _pread(fd: int, size: int, offset: int) -> bytes:
    """``size`` bytes at ``offset`` (callers hold the follower's lock where pread is missing)."""
    if hasattr(os, "pread"):
        return os.pread(fd, size, offset)
    os.lseek(fd, offset, os.SEEK_SET)  # pragma: no cover - platforms without pread
    return os.read(fd, size)  # pragma: no cover


class Change(StrEnum):
    """What a chunk reports."""

    DATA = "data"  # new bytes at ``offset``
    TRUNCATED = "truncated"  # the file got shorter (or was rewritten in place); reading from 0
    ROTATED = "rotated"  # another file is read next, from 0 (``name``); the last one was finished
    DELETED = "deleted"  # the path is gone; waiting for it to come back
    CREATED = "created"  # the path exists again (or for the first time); reading from 0
    SKIPPED = "skipped"  # a file rotated in between could not be read (``name``, ``reason``)


@dataclass
class Chunk:
    change: Change
    data: bytes = b""
    offset: int = 0  # DATA: offset of data's first byte; DELETED: where reading stopped
    name: str = ""  # ROTATED: the name the next file was found under; SKIPPED: the file's name
    reason: str = ""  # SKIPPED: why it was not read, as a phrase after its name
    unread: int | None = None  # SKIPPED: how many bytes were not read, when that is known


class FileFollower:
    """Reads what is new in the file at ``path`` at each ``poll()``; never writes to it.

    ``start`` skips bytes already read elsewhere (they are not returned; a file shorter than
    ``start`` at the first poll reports ``TRUNCATED``). ``generation`` counts the files read so
    far (+1 at each TRUNCATED, ROTATED or CREATED); ``read_at`` reads a span back from the
    current file or from one of the last ``keep_rotated`` rotated-away files. All methods are
    thread-safe.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        start: int = 0,
        read_size: int = READ_SIZE,
        keep_rotated: int = 2,
    ) -> None:
        if read_size <= 0:
            raise ValueError("read_size must be positive")
        if start < 0:
            raise ValueError("start must not be negative")
        self.path = Path(path)
        self.read_size = read_size
        self.keep_rotated = keep_rotated
        self._lock = threading.RLock()
        self._fd: int | None = None
        self._ident: Identity | None = None
        self._name = self.path.name
        self._offset = start
        self._tail = b""
        self._generation = 0
        self._retired: OrderedDict[int, OpenFile] = OrderedDict()  # generation -> its file
        self._queue: deque[OpenFile] = deque()  # files to read after this one, in order
        self._rotated = RotatedFiles(self.path)  # the files rotated away, as met so far
        self._floor = 0  # modification time of the file at the path when it was last seen there
        self._closed = False
        self._behind = False
        opened = self._open_path()
        if opened is not None:
            self._use(opened)
            self._floor = opened.mtime_ns
            if start:
                self._offset = start
                first = max(0, start - TAIL_BYTES)
                self._tail = _pread(opened.fd, start - first, first)

    # -- state -----------------------------------------------------------------------------

    @property
    def offset(self) -> int:
        """Offset of the next byte to read in the current file."""
        return self._offset

    @property
    def generation(self) -> int:
        return self._generation

    @property
    def behind(self) -> bool:
        """The last ``poll(max_bytes=...)`` stopped at its limit: there is more to read now."""
        return self._behind

    @property
    def waiting(self) -> bool:
        """No file is open: the path does not exist (yet, or any more)."""
        return self._fd is None

    # -- polling ---------------------------------------------------------------------------

    def poll(self, max_bytes: int | None = None) -> list[Chunk]:
        """Everything new since the last call (at most about ``max_bytes`` of data if given)."""
        with self._lock:
            if self._closed:
                raise ValueError("poll() on a closed FileFollower")
            out: list[Chunk] = []
            budget = [max_bytes if max_bytes is not None else -1]
            try:
                self._step(out, budget)
            except OSError as exc:
                raise InputError("cannot read file", f"{self.path}: {exc.strerror or exc}") from exc
            return out

    def _step(self, out: list[Chunk], budget: list[int]) -> None:
        self._behind = False
        st = self._stat_path()
        if self._fd is None:
            if st is None:
                return
            opened = self._open_path()
            if opened is None:
                return
            self._use(opened)
            self._floor = opened.mtime_ns
            self._generation += 1
            out.append(Chunk(Change.CREATED))
            self._read(out, budget)
            return
        for steps in range(MAX_STEPS):
            if steps:
                st = self._stat_path()
            fd = self._fd_now()
            old = os.fstat(fd)
            if old.st_size < self._offset or not self._tail_intact(fd):
                self._restart(out, Change.TRUNCATED)  # cut (and maybe refilled) since the last poll
            if st is not None and identity(st) == self._ident:
                self._floor = st.st_mtime_ns
                self._read(out, budget)
                return
            # The path names another file, or nothing: finish this one first.
            if not self._read(out, budget):
                return  # more to drain before switching; the caller polls again
            if self._queue:
                self._advance(out)
                continue
            if st is None:
                if old.st_nlink > 0:
                    return  # renamed away and not re-created yet: keep following it
                self._release(out)
                return
            if old.st_nlink > 0 and st.st_size == 0:
                # The new file is still empty: the writer may still be finishing this one,
                # unless it has gone on through files rotated in between since.
                if not self._queue_between(out):
                    return
                continue
            if not self._queue_next(out, pivot_gone=old.st_nlink == 0):
                self._retire()
                out.append(Chunk(Change.DELETED, offset=self._offset))
                self._offset = 0
                return
        self._behind = True  # rotated again and again while being read: the caller polls again

    def _stat_path(self) -> os.stat_result | None:
        try:
            st = os.stat(self.path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        _check_kind(self.path, st)
        return st

    def _open_path(self) -> OpenFile | None:
        """Open the file the path names now; None when there is none."""
        try:
            st = os.stat(self.path)
            _check_kind(self.path, st)  # before open(): opening a FIFO would block
            fd = os.open(self.path, READ_FLAGS)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise InputError("cannot read file", f"{self.path}: {exc.strerror or exc}") from exc
        fst = os.fstat(fd)
        try:
            _check_kind(self.path, fst)
        except InputError:
            os.close(fd)
            raise
        return OpenFile(fd, identity(fst), self.path.name, fst.st_mtime_ns)

    def _use(self, opened: OpenFile) -> None:
        self._fd = opened.fd
        self._ident = opened.ident
        self._name = opened.name
        self._offset = 0
        self._tail = b""

    def _fd_now(self) -> int:
        assert self._fd is not None
        return self._fd

    def _tail_intact(self, fd: int) -> bool:
        if not self._tail:
            return True
        start = self._offset - len(self._tail)
        return _pread(fd, len(self._tail), start) == self._tail

    def _restart(self, out: list[Chunk], change: Change) -> None:
        self._generation += 1
        self._offset = 0
        self._tail = b""
        out.append(Chunk(change))

    def _read(self, out: list[Chunk], budget: list[int]) -> bool:
        """Read the open file to its end; False when the budget ran out first."""
        fd = self._fd_now()
        while True:
            if budget[0] == 0:
                self._behind = True
                return False
            size = self.read_size if budget[0] < 0 else min(self.read_size, budget[0])
            data = _pread(fd, size, self._offset)
            if not data:
                return True
            out.append(Chunk(Change.DATA, data, self._offset))
            self._offset += len(data)
            if len(data) >= TAIL_BYTES:
                self._tail = data[-TAIL_BYTES:]
            else:
                self._tail = (self._tail + data)[-TAIL_BYTES:]
            if budget[0] > 0:
                budget[0] -= len(data)

    def _advance(self, out: list[Chunk]) -> None:
        """The current file is finished: read the next queued one from 0."""
        self._retire()
        opened = self._queue.popleft()
        self._use(opened)
        self._generation += 1
        out.append(Chunk(Change.ROTATED, name=opened.name))

    # -- rotations between two polls -------------------------------------------------------

    def _queue_next(self, out: list[Chunk], *, pivot_gone: bool) -> bool:
        """The path names another file than the one just finished: queue the files rotated in
        between (opened now, so that deleting them later loses nothing), then the path's file.
        False when there is nothing to read next (the path's file vanished meanwhile)."""
        new = self._open_path()
        if new is not None and new.ident == self._ident:
            os.close(new.fd)  # the path names this file again
            return True
        between, new_rotated = self._open_rotated(out, new, pivot_gone=pivot_gone)
        self._queue.extend(between)
        if new is not None and all(o is not new for o in between):
            if new_rotated or len(between) >= MAX_CHAIN:
                os.close(new.fd)  # found in its place in the chain once these are read
            else:
                self._queue.append(new)
        return bool(self._queue)

    def _queue_between(self, out: list[Chunk]) -> bool:
        """While the path's new file is still empty, queue the files rotated after the current
        one, if there are any; the folder is listed again only once it has changed."""
        if not self._rotated.folder_changed(self._ident):
            return False
        between, _ = self._open_rotated(out, None, pivot_gone=False)
        self._queue.extend(between)
        return bool(between)

    def _open_rotated(
        self, out: list[Chunk], new: OpenFile | None, *, pivot_gone: bool
    ) -> tuple[list[OpenFile], bool]:
        """Open the files rotated after the current one and return them oldest first, report
        the ones that cannot be read, and say whether ``new`` (the path's file, already open)
        has been rotated too since it was opened (``RotatedFiles.open_after``)."""
        assert self._ident is not None
        held = {self._ident, *(o.ident for o in self._retired.values())}
        skipped: list[Skipped] = []
        found = self._rotated.open_after(
            self._ident, held, self._floor, new, pivot_gone=pivot_gone, skipped=skipped
        )
        out.extend(
            Chunk(Change.SKIPPED, name=s.name, reason=s.reason, unread=s.unread) for s in skipped
        )
        return found

    # -- files done with -------------------------------------------------------------------

    def _release(self, out: list[Chunk]) -> None:
        """The file was deleted: stop reading it and wait for the path to come back."""
        out.append(Chunk(Change.DELETED, offset=self._offset))
        os.close(self._fd_now())
        self._fd = None
        self._ident = None
        self._offset = 0
        self._tail = b""

    def _retire(self) -> None:
        """Keep the rotated-away file open for ``read_at`` (the last ``keep_rotated`` only)."""
        fd = self._fd_now()
        assert self._ident is not None
        opened = OpenFile(fd, self._ident, self._name, 0)
        self._fd = None
        self._ident = None
        if self.keep_rotated <= 0:
            self._rotated.close_finished(opened)
            return
        self._retired[self._generation] = opened
        while len(self._retired) > self.keep_rotated:
            _, old = self._retired.popitem(last=False)
            self._rotated.close_finished(old)

    # -- reading back ----------------------------------------------------------------------

    def read_at(self, offset: int, length: int, generation: int | None = None) -> bytes | None:
        """``length`` bytes at ``offset`` of the current file, or of an earlier ``generation``.

        None when that file cannot be read any more (truncated, deleted, or rotated too long
        ago); fewer bytes when it is shorter.
        """
        with self._lock:
            if self._closed:
                return None
            if generation is None or generation == self._generation:
                fd = self._fd
            else:
                retired = self._retired.get(generation)
                fd = retired.fd if retired is not None else None
            if fd is None:
                return None
            return _pread(fd, length, offset)

    # -- closing ---------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            for opened in [*self._retired.values(), *self._queue]:
                os.close(opened.fd)
            self._retired.clear()
            self._queue.clear()

    def __enter__(self) -> FileFollower:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


def _check_kind(path: Path, st: os.stat_result) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise InputError("cannot follow a folder", f"{path} is a folder; name a file")
    if not stat.S_ISREG(st.st_mode):
        raise InputError("cannot follow this file", f"{path} is not a regular file")


def input_signature(
    path: str | os.PathLike[str], siblings: tuple[str, ...] = ()
) -> tuple[object, ...]:
    """A cheap fingerprint of an input that changes whenever it changes: the identity, size and
    modification time of a file and of its siblings named ``path`` + suffix (``-wal``), or of
    every file in a folder's tree. Missing files count as None."""
    root = Path(path)
    if root.is_dir():
        entries: set[tuple[str, int, int, int]] = set()
        for folder, _dirs, files in os.walk(root):
            for name in files:
                try:
                    st = os.stat(os.path.join(folder, name))
                except OSError:
                    continue
                entries.add((os.path.join(folder, name), st.st_ino, st.st_size, st.st_mtime_ns))
        return ("folder", hash(frozenset(entries)), len(entries))
    out: list[object] = []
    for suffix in ("", *siblings):
        try:
            st = os.stat(f"{root}{suffix}")
        except OSError:
            out.append(None)
            continue
        out.append((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(out)


def _catch_up(follower: FileFollower, batch_bytes: int) -> Iterator[list[Chunk]]:
    while True:
        chunks = follower.poll(max_bytes=batch_bytes)
        if chunks:
            yield chunks
        if not follower.behind:
            return


async def follow(
    path: str | os.PathLike[str],
    *,
    debounce_ms: int = DEBOUNCE_MS,
    poll_interval: float = POLL_INTERVAL,
    force_polling: bool | None = None,
    stop_event: asyncio.Event | None = None,
    follower: FileFollower | None = None,
    start: int = 0,
    step_ms: int = STEP_MS,
    poll_delay_ms: int = POLL_DELAY_MS,
    batch_bytes: int = BATCH_BYTES,
) -> AsyncGenerator[list[Chunk], None]:
    """Yield the chunks of ``path`` as it changes: first what is there (from ``start``), then
    each change, within about ``step_ms``-``debounce_ms`` of it.

    Give ``follower`` to continue from a FileFollower you own (it is not closed here); else one
    is opened and closed with the generator. Catching up on a large file yields batches of at
    most ``batch_bytes``. Ends when ``stop_event`` is set or the generator is closed.
    """
    own = follower is None
    reader = follower if follower is not None else FileFollower(path, start=start)
    try:
        ticks = watch_input(
            path,
            debounce_ms=debounce_ms,
            step_ms=step_ms,
            poll_interval=poll_interval,
            force_polling=force_polling,
            poll_delay_ms=poll_delay_ms,
            stop_event=stop_event,
        )
        async with contextlib.aclosing(ticks):
            async for _ in ticks:
                for chunks in _catch_up(reader, batch_bytes):
                    yield chunks
                    await asyncio.sleep(0)
    finally:
        if own:
            reader.close()


def follow_sync(
    path: str | os.PathLike[str],
    stop: threading.Event,
    *,
    debounce_ms: int = DEBOUNCE_MS,
    poll_interval: float = POLL_INTERVAL,
    force_polling: bool | None = None,
    follower: FileFollower | None = None,
    start: int = 0,
    step_ms: int = STEP_MS,
    poll_delay_ms: int = POLL_DELAY_MS,
    batch_bytes: int = BATCH_BYTES,
) -> Generator[list[Chunk], None, None]:
    """The synchronous ``follow`` (for headless use): ends when ``stop`` is set."""
    own = follower is None
    reader = follower if follower is not None else FileFollower(path, start=start)
    try:
        ticks = watch_input_sync(
            path,
            stop,
            debounce_ms=debounce_ms,
            step_ms=step_ms,
            poll_interval=poll_interval,
            force_polling=force_polling,
            poll_delay_ms=poll_delay_ms,
        )
        with contextlib.closing(ticks):
            for _ in ticks:
                yield from _catch_up(reader, batch_bytes)
    finally:
        if own:
            reader.close()
