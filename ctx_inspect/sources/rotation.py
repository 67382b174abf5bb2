"""Files rotated away from a followed path: how they are named, the order they were rotated
in, and the chain of them a follower reads between two polls.

A rotated file is named like the followed one, a separator and a suffix of numbers
(``run.log.1``, ``run.log-20250101``, ``run.log-2025-01-01_13``), maybe compressed
(``run.log.1.gz``: not followed). ``rotated_between`` says which of the files so named were
rotated after the file read last, oldest first. ``RotatedFiles`` lists the folder until two
listings agree (a rotation under way renames files while they are listed), opens each file as
soon as a listing shows it (so deleting it afterwards loses nothing), and remembers the files
finished (none is read twice) and what it has reported as not read. Never writes.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

ROTATION_SEPARATORS: Final = (".", "-", "_")
COMPRESSED_SUFFIXES: Final = (".gz", ".bz2", ".xz", ".zst", ".lz4", ".lzma", ".lzo", ".br", ".Z")
MAX_CHAIN: Final = 32  # files rotated in between opened at once (more: found at the next step)
LISTING_TRIES: Final = 5  # listings of the rotated files until two agree and all open
MISSING_LISTED: Final = 8  # missing numbers named one by one; more are named as a range
_ROTATION_KEY: Final = re.compile(r"[0-9]{1,20}(?:[-_.][0-9]{1,20}){0,5}", re.ASCII)
_KEY_SEPARATOR: Final = re.compile(r"[-_.]")
READ_FLAGS: Final = (
    os.O_RDONLY
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_BINARY", 0)
)

Identity = tuple[int, int]  # (st_dev, st_ino)


def identity(st: os.stat_result) -> Identity:
    return (st.st_dev, st.st_ino)


@dataclass
class OpenFile:
    """A file a follower holds a descriptor on."""

    fd: int
    ident: Identity
    name: str  # the name it was opened under
    mtime_ns: int


@dataclass(frozen=True)
class Skipped:
    """A file rotated in between that will not be read: its name, why (a phrase after its
    name), and how many bytes were not read when that is known."""

    name: str
    reason: str
    unread: int | None = None


@dataclass(frozen=True)
class Rotated:
    """A file named like a rotation of the followed one: ``run.log.2``, ``run.log-20250101.gz``."""

    name: str
    ident: Identity
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
    pivot: Identity,
    *,
    floor: int,
    pivot_gone: bool,
    skip: frozenset[Identity] = frozenset(),
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

    def __init__(self, new: OpenFile | None) -> None:
        self.new = new  # the path's file, already open
        self.new_rotated = False
        self.found: dict[Identity, Rotated] = {}  # as the last listing that showed it
        self.opened: dict[Identity, OpenFile] = {}
        self.failed: dict[Identity, str] = {}  # why it could not be opened (so far)

    def open(self, files: list[Rotated], opener: Callable[[str], OpenFile]) -> None:
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

    def _keep(self, opened: OpenFile) -> None:
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

    def ordered(self, plan: ChainPlan | None, listed: set[Identity]) -> list[OpenFile]:
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

        def age(o: OpenFile) -> tuple[int, tuple[int, ...]]:
            return os.fstat(o.fd).st_mtime_ns, _name_age(self.found[o.ident])

        return sorted(self.opened.values(), key=age)

    def unread(self) -> list[tuple[Identity, str]]:
        """The files found that will not be read (not empty), with why."""
        return [
            (ident, why)
            for ident, why in self.failed.items()
            if ident not in self.opened and self.found[ident].size
        ]


class RotatedFiles:
    """The files rotated away from the followed ``path`` as one follower meets them: those it
    finished (with their size and modification time, so that none is read twice) and what it
    said it could not read (said once)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # Rotated files read and closed (or reported), with their size and modification time.
        self._finished: dict[Identity, tuple[int, int]] = {}
        self._unlisted = False
        self._listed_at: tuple[int, Identity | None] | None = None  # folder's time, pivot
        self._noted: set[tuple[str, Identity]] = set()  # names said missing, after which file

    def folder_changed(self, pivot: Identity | None) -> bool:
        """Whether the folder changed since it was last asked here after ``pivot`` (the file
        read last); False when it cannot be looked at."""
        try:
            mark = (os.stat(self.path.parent).st_mtime_ns, pivot)
        except OSError:
            return False
        if mark == self._listed_at:
            return False
        self._listed_at = mark
        return True

    def open_after(
        self,
        pivot: Identity,
        held: set[Identity],
        floor: int,
        new: OpenFile | None,
        *,
        pivot_gone: bool,
        skipped: list[Skipped],
    ) -> tuple[list[OpenFile], bool]:
        """Open the files rotated after ``pivot`` (the file read last) and return them oldest
        first, add the ones that cannot be read to ``skipped``, and say whether ``new`` (the
        path's file, already open) has been rotated too since it was opened (it is then among
        them, in its place, unless the chain is longer than ``MAX_CHAIN``). ``held``: the files
        the follower holds open; ``floor``: the modification time of the path's file when it
        was last seen there (older files are left alone).

        The folder is listed until two listings agree: a rotation under way renames files while
        they are listed, and a listing may then miss one or show one twice. Each file is opened
        as soon as a listing shows it, so a name that moves later loses nothing; when the names
        never settle, the files are ordered by modification time. A file that a listing showed
        and that could never be opened was deleted before it could be read.
        """
        chain = _Chain(new)
        previous: set[tuple[str, Identity]] | None = None
        plan = ChainPlan([], [], [])
        stable = False
        for _ in range(LISTING_TRIES):
            try:
                listed = self.siblings()
            except OSError as exc:
                self._note_unlisted(skipped, exc)
                break
            listing = list({s.ident: s for s in listed}.values())  # one file, two names: once
            names = {(s.name, s.ident) for s in listing}
            stable = names == previous and len(listing) == len(listed)
            previous = names
            chain.new_rotated |= new is not None and any(s.ident == new.ident for s in listing)
            skip = frozenset(s.ident for s in listing if s.ident in held or self._was_read(s))
            plan = rotated_between(
                listing,
                pivot,
                floor=floor,
                pivot_gone=pivot_gone,
                skip=skip,
                by_names=stable,  # names still moving: by modification times only
            )
            chain.open(plan.read, self.open_sibling)
            if stable and not chain.failed:
                break
        present = {ident for _, ident in previous or ()}
        if stable:  # forget the files read that are gone: their numbers may be given again
            self._finished = {i: n for i, n in self._finished.items() if i in present}
        ordered = chain.ordered(plan if stable else None, present)
        for ident, why in chain.unread():
            rotated = chain.found[ident]
            skipped.append(Skipped(rotated.name, why, rotated.size))
        for rotated in plan.compressed:
            self._finished[rotated.ident] = (rotated.size, rotated.mtime_ns)  # said once
            skipped.append(Skipped(rotated.name, "is compressed (not followed)"))
        for name in plan.missing:
            if (name, pivot) not in self._noted:
                self._noted.add((name, pivot))
                skipped.append(Skipped(name, "is missing (deleted before it could be read)"))
        return ordered, chain.new_rotated

    def close_finished(self, opened: OpenFile) -> None:
        """Close a file the follower is done with, remembered as read while it still exists."""
        st = os.fstat(opened.fd)
        if st.st_nlink > 0:
            self._finished[opened.ident] = (st.st_size, st.st_mtime_ns)
        os.close(opened.fd)

    def siblings(self) -> list[Rotated]:
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
                out.append(
                    Rotated(
                        entry.name,
                        identity(st),
                        st.st_size,
                        st.st_mtime_ns,
                        key,
                        numbered,
                        compressed,
                        stem,
                    )
                )
        return out

    def open_sibling(self, name: str) -> OpenFile:
        """Open the file beside the followed one named ``name`` (FileNotFoundError when it is
        not a plain file any more; never through a symbolic link, never blocking on a FIFO)."""
        flags = READ_FLAGS | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(self.path.parent / name, flags)
        fst = os.fstat(fd)
        if not stat.S_ISREG(fst.st_mode):
            os.close(fd)
            raise FileNotFoundError(name)
        return OpenFile(fd, identity(fst), name, fst.st_mtime_ns)

    def _was_read(self, rotated: Rotated) -> bool:
        """Whether a listed file is one this follower has finished: the same inode number,
        size and modification time (a file deleted since may have left its number to a new
        one)."""
        return self._finished.get(rotated.ident) == (rotated.size, rotated.mtime_ns)

    def _note_unlisted(self, skipped: list[Skipped], exc: OSError) -> None:
        if self._unlisted:
            return
        self._unlisted = True
        reason = (
            f"cannot be listed ({exc.strerror or exc}): files rotated between two reads "
            "cannot be found"
        )
        skipped.append(Skipped(str(self.path.parent), reason))
