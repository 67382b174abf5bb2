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
  ``rotated_between``) and read, oldest first, each after its own ``ROTATED`` (whose ``name``
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

``follow`` (async) and ``follow_sync`` watch the file's folder with watchfiles, filtered on the
file's name and its rotation siblings (``run.log.1``, ``run.log-20250101``, ``db-wal``), with a
short debounce, and poll on each change; they also poll every ``poll_interval`` seconds without
any event (for file systems that send none). ``force_polling=True`` (or the environment variable
``CTX_INSPECT_FORCE_POLLING=1``) makes watchfiles poll the folder instead of using native
notifications; as its polling compares modification times in whole seconds, ``poll()`` then also
runs every ``poll_delay_ms``. Inputs are never written to.

A copy-truncate destroys the bytes written since the last poll before they can be read: a writer
that must lose nothing waits for the reader before it truncates (or rotates by rename instead).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import re
import stat
import threading
import time
from collections import OrderedDict, deque
from collections.abc import AsyncGenerator, Callable, Generator, Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from ctx_inspect.errors import InputError

READ_SIZE: Final = 1 << 20
BATCH_BYTES: Final = 8 << 20  # at most this much per yielded batch while catching up
TAIL_BYTES: Final = 64  # bytes before the read position that must not change
DEBOUNCE_MS: Final = 30
STEP_MS: Final = 10
POLL_INTERVAL: Final = 0.5
POLL_DELAY_MS: Final = 50  # watchfiles' own polling period when polling is forced
FORCE_POLLING_ENV: Final = "CTX_INSPECT_FORCE_POLLING"
ROTATION_SEPARATORS: Final = (".", "-", "_")
COMPRESSED_SUFFIXES: Final = (".gz", ".bz2", ".xz", ".zst", ".lz4", ".lzma", ".lzo", ".br", ".Z")
MAX_CHAIN: Final = 32  # files rotated in between opened at once (more: found at the next step)
MAX_STEPS: Final = 64  # file switches within one poll before it returns as ``behind``
LISTING_TRIES: Final = 5  # listings of the rotated files until two agree and all open
MISSING_LISTED: Final = 8  # missing numbers named one by one; more are named as a range
_ROTATION_KEY: Final = re.compile(r"[0-9]{1,20}(?:[-_.][0-9]{1,20}){0,5}", re.ASCII)
_KEY_SEPARATOR: Final = re.compile(r"[-_.]")
_READ_FLAGS: Final = (
    os.O_RDONLY
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_BINARY", 0)
)


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


_Identity = tuple[int, int]  # (st_dev, st_ino)


def _identity(st: os.stat_result) -> _Identity:
    return (st.st_dev, st.st_ino)


@dataclass
class _Open:
    """A file this follower holds a descriptor on."""

    fd: int
    ident: _Identity
    name: str  # the name it was opened under
    mtime_ns: int


@dataclass(frozen=True)
class Rotated:
    """A file named like a rotation of the followed one: ``run.log.2``, ``run.log-20250101.gz``."""

    name: str
    ident: _Identity
    size: int
    mtime_ns: int
    key: tuple[int, ...]  # the numbers in its suffix
    numbered: bool  # a rotation number (``.1``, ``.2``), not a date
    compressed: bool
    stem: str  # the followed file's name and the separator: ``run.log.``


def rotation_suffix(base: str, name: str) -> tuple[tuple[int, ...], bool, bool] | None:
    """For a file ``name`` beside the followed file ``base``: the numbers of its rotation
    suffix, whether they are a rotation number (not a date) and whether it is compressed; None
    when ``name`` is not named like a rotation of ``base``."""
    if len(name) <= len(base) + 1 or not name.startswith(base):
        return None
    separator = name[len(base)]
    if separator not in ROTATION_SEPARATORS:
        return None
    rest = name[len(base) + 1 :]
    compressed = rest.endswith(COMPRESSED_SUFFIXES)
    if compressed:
        rest = rest[: rest.rindex(".")]
    if _ROTATION_KEY.fullmatch(rest) is None:
        return None
    key = tuple(int(part) for part in _KEY_SEPARATOR.split(rest))
    return key, len(key) == 1 and len(rest) < 8, compressed


@dataclass
class ChainPlan:
    """The files rotated after the one read last, as ``rotated_between`` finds them."""

    read: list[Rotated]  # plain files, oldest first
    compressed: list[Rotated]  # compressed ones (they cannot be followed)
    missing: list[str]  # names absent from a numbered chain between the last file and those


def rotated_between(
    siblings: list[Rotated],
    pivot: _Identity,
    *,
    floor: int,
    pivot_gone: bool,
    skip: frozenset[_Identity] = frozenset(),
    by_names: bool = True,
) -> ChainPlan:
    """Which of ``siblings`` (the files named like rotations of the followed one) were rotated
    after the file ``pivot`` (the file read last), oldest first, leaving out those in ``skip``
    (files this follower holds or has read).

    Such a file was created at the path after the last poll that saw a file there, so it was
    modified at or after ``floor`` (that file's modification time then): older files are left
    alone. When the pivot is among the siblings and the names say the order, only files on the
    newer side of the pivot count, in name order, and numbers missing between them are named.
    Dates ascend; numbers descend as logrotate numbers them, or ascend (``.1``, ``.2``, ... in
    the order they were rotated) when the older files have the smaller numbers, or, with no
    older file to tell, when every newer plain file has a larger number than the pivot.
    Otherwise (or when ``by_names`` is false: names seen while a rotation renamed them) the
    order is that of modification times, and when the pivot is gone (compressed, or deleted)
    the oldest compressed file is taken for its copy.
    """
    found = next((s for s in siblings if s.ident == pivot), None)
    candidates = [
        s for s in siblings if s.ident != pivot and s.ident not in skip and s.mtime_ns >= floor
    ]
    missing: list[str] = []
    if by_names and found is not None and all(s.numbered == found.numbered for s in candidates):
        rank = _rank(found, siblings, candidates, floor)
        newer = sorted((s for s in candidates if rank(s) > rank(found)), key=rank)
        if found.numbered:
            missing = _missing(found, newer, siblings)
    else:
        newer = sorted(candidates, key=lambda s: (s.mtime_ns, _name_age(s)))
        if found is None and pivot_gone:
            copy = next((s for s in newer if s.compressed), None)
            newer = [s for s in newer if s is not copy]
    return ChainPlan(
        read=[s for s in newer if not s.compressed],
        compressed=[s for s in newer if s.compressed],
        missing=missing,
    )


def _rank(
    pivot: Rotated, siblings: list[Rotated], candidates: list[Rotated], floor: int
) -> Callable[[Rotated], tuple[int, ...]]:
    """Age order of rotated names like ``pivot``'s, oldest first (see ``rotated_between``)."""
    if not pivot.numbered:
        return lambda s: s.key
    older = {
        s.key > pivot.key
        for s in siblings
        if s.numbered and s.stem == pivot.stem and s.mtime_ns < floor
    }
    if older == {False}:
        ascending = True
    elif older == {True}:
        ascending = False
    else:
        plain = [s for s in candidates if not s.compressed]
        ascending = bool(plain) and all(s.key > pivot.key for s in plain)
    if ascending:
        return lambda s: s.key
    return lambda s: tuple(-k for k in s.key)


def _name_age(rotated: Rotated) -> tuple[int, ...]:
    """Age order from a name alone (for files modified at the same time): numbers as
    logrotate gives them (the larger, the older), dates ascending."""
    return _rank(rotated, [], [], 0)(rotated)


def _missing(pivot: Rotated, newer: list[Rotated], siblings: list[Rotated]) -> list[str]:
    if not newer:
        return []
    numbers = [s.key[0] for s in newer]
    low, high = min(*numbers, pivot.key[0]), max(*numbers, pivot.key[0])
    stem = pivot.stem
    present = {s.key[0] for s in siblings if s.numbered and s.stem == stem}
    if high - low - 1 > MISSING_LISTED:
        between = sum(1 for n in present if low < n < high)
        return [] if between == high - low - 1 else [f"{stem}{low + 1}..{high - 1}"]
    return [f"{stem}{n}" for n in range(low + 1, high) if n not in present]


class _Chain:
    """The files rotated in between that ``FileFollower`` has found and opened so far."""

    def __init__(self, new: _Open | None) -> None:
        self.new = new  # the path's file, already open
        self.new_rotated = False
        self.found: dict[_Identity, Rotated] = {}  # as the last listing that showed it
        self.opened: dict[_Identity, _Open] = {}
        self.failed: dict[_Identity, str] = {}  # why it could not be opened (so far)

    def open(self, files: list[Rotated], opener: Callable[[str], _Open]) -> None:
        """Open ``files`` (a listing's files in between) by name, unless already open."""
        self.found.update((r.ident, r) for r in files)
        for rotated in files:
            if rotated.ident in self.opened or len(self.opened) >= MAX_CHAIN:
                continue
            try:
                opened = opener(rotated.name)
            except FileNotFoundError:
                self.failed[rotated.ident] = "was deleted before it could be read"
                continue
            except OSError as exc:
                self.failed[rotated.ident] = f"could not be read ({exc.strerror or exc})"
                continue
            if opened.ident != rotated.ident:  # renamed since it was listed
                self.failed[rotated.ident] = "was deleted before it could be read"
            self._keep(opened)

    def _keep(self, opened: _Open) -> None:
        """Keep a file just opened if it is one of those in between (whatever name it was
        found under: names move while a rotation is under way)."""
        ident = opened.ident
        new = self.new
        if new is not None and ident == new.ident:
            os.close(opened.fd)  # the path's file, rotated since it was opened: open already
            new.name = opened.name
            opened = new
        if ident not in self.found or ident in self.opened:
            if opened is not new:
                os.close(opened.fd)
            return
        self.opened[ident] = opened
        self.failed.pop(ident, None)

    def ordered(self, plan: ChainPlan | None, listed: set[_Identity]) -> list[_Open]:
        """The opened files, oldest first. With ``plan`` (from a listing that two agreed on,
        whose files are ``listed``), the files it leaves out are let go, and its order is
        kept unless a file opened earlier has left the folder since; else (or then) the order
        is that of modification times."""
        if plan is not None:
            wanted = {r.ident for r in plan.read}
            for ident, opened in list(self.opened.items()):
                if ident in listed and ident not in wanted:
                    if opened is not self.new:
                        os.close(opened.fd)
                    del self.opened[ident]
            ranked = [self.opened[r.ident] for r in plan.read if r.ident in self.opened]
            if len(ranked) == len(self.opened):
                return ranked

        def age(o: _Open) -> tuple[int, tuple[int, ...]]:
            return os.fstat(o.fd).st_mtime_ns, _name_age(self.found[o.ident])

        return sorted(self.opened.values(), key=age)

    def unread(self) -> list[tuple[_Identity, str]]:
        """The files found that will not be read (not empty), with why."""
        return [
            (ident, why)
            for ident, why in self.failed.items()
            if ident not in self.opened and self.found[ident].size
        ]


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
        self._ident: _Identity | None = None
        self._name = self.path.name
        self._offset = start
        self._tail = b""
        self._generation = 0
        self._retired: OrderedDict[int, _Open] = OrderedDict()  # generation -> its file
        self._queue: deque[_Open] = deque()  # files to read after this one, in order
        # Rotated files read and closed (or reported), with their size and modification time.
        self._finished: dict[_Identity, tuple[int, int]] = {}
        self._floor = 0  # modification time of the file at the path when it was last seen there
        self._unlisted = False
        self._listed_at: tuple[int, _Identity | None] | None = None  # folder's time, pivot
        self._noted: set[tuple[str, _Identity]] = set()  # names said missing, after which file
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
            if st is not None and _identity(st) == self._ident:
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

    def _open_path(self) -> _Open | None:
        """Open the file the path names now; None when there is none."""
        try:
            st = os.stat(self.path)
            _check_kind(self.path, st)  # before open(): opening a FIFO would block
            fd = os.open(self.path, _READ_FLAGS)
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
        return _Open(fd, _identity(fst), self.path.name, fst.st_mtime_ns)

    def _use(self, opened: _Open) -> None:
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
        try:
            mark = (os.stat(self.path.parent).st_mtime_ns, self._ident)
        except OSError:
            return False
        if mark == self._listed_at:
            return False
        self._listed_at = mark
        between, _ = self._open_rotated(out, None, pivot_gone=False)
        self._queue.extend(between)
        return bool(between)

    def _open_rotated(
        self, out: list[Chunk], new: _Open | None, *, pivot_gone: bool
    ) -> tuple[list[_Open], bool]:
        """Open the files rotated after the current one and return them oldest first, report
        the ones that cannot be read, and say whether ``new`` (the path's file, already open)
        has been rotated too since it was opened (it is then among them, in its place, unless
        the chain is longer than ``MAX_CHAIN``).

        The folder is listed until two listings agree: a rotation under way renames files while
        they are listed, and a listing may then miss one or show one twice. Each file is opened
        as soon as a listing shows it, so a name that moves later loses nothing; when the names
        never settle, the files are ordered by modification time. A file that a listing showed
        and that could never be opened was deleted before it could be read.
        """
        assert self._ident is not None
        held = {self._ident, *(o.ident for o in self._retired.values())}
        chain = _Chain(new)
        previous: set[tuple[str, _Identity]] | None = None
        plan = ChainPlan([], [], [])
        stable = False
        for _ in range(LISTING_TRIES):
            try:
                listed = self._siblings()
            except OSError as exc:
                self._note_unlisted(out, exc)
                break
            listing = list({s.ident: s for s in listed}.values())  # one file, two names: once
            names = {(s.name, s.ident) for s in listing}
            stable = names == previous and len(listing) == len(listed)
            previous = names
            chain.new_rotated |= new is not None and any(s.ident == new.ident for s in listing)
            skip = frozenset(s.ident for s in listing if s.ident in held or self._was_read(s))
            plan = rotated_between(
                listing,
                self._ident,
                floor=self._floor,
                pivot_gone=pivot_gone,
                skip=skip,
                by_names=stable,  # names still moving: by modification times only
            )
            chain.open(plan.read, self._open_sibling)
            if stable and not chain.failed:
                break
        present = {ident for _, ident in previous or ()}
        if stable:  # forget the files read that are gone: their numbers may be given again
            self._finished = {i: n for i, n in self._finished.items() if i in present}
        ordered = chain.ordered(plan if stable else None, present)
        for ident, why in chain.unread():
            rotated = chain.found[ident]
            out.append(Chunk(Change.SKIPPED, name=rotated.name, reason=why, unread=rotated.size))
        for rotated in plan.compressed:
            self._finished[rotated.ident] = (rotated.size, rotated.mtime_ns)  # said once
            reason = "is compressed (not followed)"
            out.append(Chunk(Change.SKIPPED, name=rotated.name, reason=reason))
        for name in plan.missing:
            if (name, self._ident) not in self._noted:
                self._noted.add((name, self._ident))
                reason = "is missing (deleted before it could be read)"
                out.append(Chunk(Change.SKIPPED, name=name, reason=reason))
        return ordered, chain.new_rotated

    def _siblings(self) -> list[Rotated]:
        """The regular files beside the followed one named like its rotations."""
        folder = self.path.parent
        base = self.path.name
        out: list[Rotated] = []
        with os.scandir(folder) as entries:
            for entry in entries:
                suffix = rotation_suffix(base, entry.name)
                if suffix is None:
                    continue
                try:
                    st = os.lstat(folder / entry.name)
                except OSError:
                    continue  # gone since it was listed
                if not stat.S_ISREG(st.st_mode):
                    continue  # a rotated file is a plain file, never a link to one elsewhere
                key, numbered, compressed = suffix
                stem = entry.name[: len(base) + 1]
                ident = _identity(st)
                out.append(
                    Rotated(
                        entry.name,
                        ident,
                        st.st_size,
                        st.st_mtime_ns,
                        key,
                        numbered,
                        compressed,
                        stem,
                    )
                )
        return out

    def _open_sibling(self, name: str) -> _Open:
        """Open the file beside the followed one named ``name`` (FileNotFoundError when it is
        not a plain file any more; never through a symbolic link, never blocking on a FIFO)."""
        flags = _READ_FLAGS | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(self.path.parent / name, flags)
        fst = os.fstat(fd)
        if not stat.S_ISREG(fst.st_mode):
            os.close(fd)
            raise FileNotFoundError(name)
        return _Open(fd, _identity(fst), name, fst.st_mtime_ns)

    def _was_read(self, rotated: Rotated) -> bool:
        """Whether a listed file is one this follower has finished: the same inode number,
        size and modification time (a file deleted since may have left its number to a new
        one)."""
        return self._finished.get(rotated.ident) == (rotated.size, rotated.mtime_ns)

    def _note_unlisted(self, out: list[Chunk], exc: OSError) -> None:
        if self._unlisted:
            return
        self._unlisted = True
        reason = (
            f"cannot be listed ({exc.strerror or exc}): files rotated between two reads "
            "cannot be found"
        )
        out.append(Chunk(Change.SKIPPED, name=str(self.path.parent), reason=reason))

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
        opened = _Open(fd, self._ident, self._name, 0)
        self._fd = None
        self._ident = None
        if self.keep_rotated <= 0:
            self._close_finished(opened)
            return
        self._retired[self._generation] = opened
        while len(self._retired) > self.keep_rotated:
            _, old = self._retired.popitem(last=False)
            self._close_finished(old)

    def _close_finished(self, opened: _Open) -> None:
        st = os.fstat(opened.fd)
        if st.st_nlink > 0:
            self._finished[opened.ident] = (st.st_size, st.st_mtime_ns)
        os.close(opened.fd)

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


# ------------------------------------------------------------------------------------------
# Watching


def related_name(name: str, changed: str) -> bool:
    """Whether a change to ``changed`` (a file name) may concern the followed file ``name``."""
    if changed == name:
        return True
    return changed.startswith(name) and changed[len(name) : len(name) + 1] in ROTATION_SEPARATORS


def resolve_force_polling(force_polling: bool | None) -> bool | None:
    """The argument, else ``CTX_INSPECT_FORCE_POLLING`` (1/true/yes/on, 0/false/no/off), else
    None (watchfiles decides: its own environment variable, WSL)."""
    if force_polling is not None:
        return force_polling
    value = os.environ.get(FORCE_POLLING_ENV, "").strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    return None


@dataclass(frozen=True)
class _WatchPlan:
    root: Path  # what watchfiles watches
    name: str | None  # the followed file's name (None: a folder, every change counts)
    recursive: bool

    @classmethod
    def for_path(cls, path: Path) -> _WatchPlan:
        path = path.absolute()
        if path.is_dir():
            return cls(path, None, True)
        if not path.parent.is_dir():
            raise InputError(
                "folder not found", f"{path.parent} does not exist; cannot follow {path.name}"
            )
        return cls(path.parent, path.name, False)

    def relevant(self, changes: set[tuple[Any, str]]) -> bool:
        if self.name is None:
            return bool(changes)
        return any(related_name(self.name, os.path.basename(p)) for _, p in changes)


def _periodic(poll_interval: float, forced: bool | None, poll_delay_ms: int) -> float:
    """The period of the reads made without any event.

    watchfiles' polling compares modification times in whole seconds, so it misses most of
    the appends within a second; when polling is forced, ``poll()`` (a stat, an fstat and a
    64-byte read) runs every ``poll_delay_ms`` as well.
    """
    if forced:
        return min(poll_interval, poll_delay_ms / 1000)
    return poll_interval


class _Stop:
    """A stop flag for watchfiles: set here, or by the caller's event."""

    def __init__(self, outer: Any = None) -> None:
        self._outer = outer
        self._flag = threading.Event()

    def is_set(self) -> bool:
        return self._flag.is_set() or (self._outer is not None and bool(self._outer.is_set()))

    def set(self) -> None:
        self._flag.set()


_END: Final = object()


@dataclass
class _Failed:
    error: BaseException


async def watch_input(
    path: str | os.PathLike[str],
    *,
    debounce_ms: int = DEBOUNCE_MS,
    step_ms: int = STEP_MS,
    poll_interval: float = POLL_INTERVAL,
    force_polling: bool | None = None,
    poll_delay_ms: int = POLL_DELAY_MS,
    stop_event: asyncio.Event | None = None,
) -> AsyncGenerator[bool, None]:
    """Yield whenever ``path`` (a file, its rotation siblings, or a folder's contents) may have
    changed: True after a file-system event, False after ``poll_interval`` seconds without one.

    The first value is yielded at once (False), after the watcher has started, so a caller that
    reads on each value misses nothing written before. Ends when ``stop_event`` is set or the
    generator is closed (use ``contextlib.aclosing``).
    """
    from watchfiles import awatch

    plan = _WatchPlan.for_path(Path(path))
    forced = resolve_force_polling(force_polling)
    poll_interval = _periodic(poll_interval, forced, poll_delay_ms)
    stop = _Stop(stop_event)
    ticks: asyncio.Queue[object] = asyncio.Queue()

    async def pump() -> None:
        try:
            async for changes in awatch(
                plan.root,
                watch_filter=None,
                debounce=debounce_ms,
                step=step_ms,
                rust_timeout=max(step_ms, int(poll_interval * 1000)),
                stop_event=stop,  # anything with is_set() and set()
                force_polling=forced,
                poll_delay_ms=poll_delay_ms,
                recursive=plan.recursive,
            ):
                ticks.put_nowait(plan.relevant(changes))
        except Exception as exc:
            ticks.put_nowait(_Failed(exc))
        finally:
            ticks.put_nowait(_END)

    task = asyncio.create_task(pump())
    await asyncio.sleep(0)  # let the watcher start before the first read
    try:
        yield False
        last = time.monotonic()
        while not stop.is_set():
            timeout = max(0.0, last + poll_interval - time.monotonic())
            try:
                item = await asyncio.wait_for(ticks.get(), timeout)
            except TimeoutError:
                item = False
            items = [item]
            while not ticks.empty():
                items.append(ticks.get_nowait())
            for it in items:
                if isinstance(it, _Failed):
                    raise it.error
            relevant = any(it is True for it in items)
            now = time.monotonic()
            if relevant or now - last >= poll_interval:
                last = now
                yield relevant
            if _END in items:
                return
    finally:
        stop.set()
        await asyncio.gather(task, return_exceptions=True)


def watch_input_sync(
    path: str | os.PathLike[str],
    stop: threading.Event,
    *,
    debounce_ms: int = DEBOUNCE_MS,
    step_ms: int = STEP_MS,
    poll_interval: float = POLL_INTERVAL,
    force_polling: bool | None = None,
    poll_delay_ms: int = POLL_DELAY_MS,
) -> Generator[bool, None, None]:
    """The synchronous ``watch_input``: watchfiles' ``watch`` runs in a helper thread."""
    from watchfiles import watch

    plan = _WatchPlan.for_path(Path(path))
    forced = resolve_force_polling(force_polling)
    poll_interval = _periodic(poll_interval, forced, poll_delay_ms)
    halt = _Stop(stop)
    ticks: queue.SimpleQueue[object] = queue.SimpleQueue()

    def pump() -> None:
        try:
            for changes in watch(
                plan.root,
                watch_filter=None,
                debounce=debounce_ms,
                step=step_ms,
                rust_timeout=max(step_ms, int(poll_interval * 1000)),
                stop_event=halt,
                force_polling=forced,
                poll_delay_ms=poll_delay_ms,
                recursive=plan.recursive,
                raise_interrupt=False,
            ):
                ticks.put(plan.relevant(changes))
        except Exception as exc:
            ticks.put(_Failed(exc))
        finally:
            ticks.put(_END)

    thread = threading.Thread(target=pump, name=f"watch {plan.root}", daemon=True)
    thread.start()
    try:
        yield False
        # The watcher may not have started when the first value was read: read again soon.
        last = time.monotonic() - poll_interval + min(poll_interval, 0.1)
        while not halt.is_set():
            timeout = max(0.0, last + poll_interval - time.monotonic())
            try:
                item = ticks.get(timeout=timeout)
            except queue.Empty:
                item = False
            items = [item]
            while not ticks.empty():
                items.append(ticks.get_nowait())
            for it in items:
                if isinstance(it, _Failed):
                    raise it.error
            relevant = any(it is True for it in items)
            now = time.monotonic()
            if relevant or now - last >= poll_interval:
                last = now
                yield relevant
            if _END in items:
                return
    finally:
        halt.set()
        thread.join()


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
