"""Reading inputs: whole files in chunks, and single records by byte span. Never writes."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path

CHUNK_BYTES = 1 << 20


def iter_chunks(path: Path, chunk_size: int = CHUNK_BYTES, start: int = 0) -> Iterator[bytes]:
    """The bytes of ``path`` from ``start`` to its current end, in chunks."""
    with path.open("rb") as fh:
        if start:
            fh.seek(start)
        while True:
            chunk = fh.read(chunk_size)
            if not chunk:
                return
            yield chunk


OPEN_FILES = 16  # descriptors kept open for reading spans back
_PREAD = hasattr(os, "pread")


class _OpenFiles:
    """Read-only descriptors of the files spans are read from, the most recently used kept
    open: reading a message back is then one ``pread``, not an open, a seek and a close."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._fds: OrderedDict[str, tuple[int, tuple[int, int]]] = OrderedDict()
        self._lock = threading.Lock()  # reads happen under it: no descriptor closes mid-read

    def read(self, path: Path, offset: int, length: int) -> bytes:
        key = str(path)
        if not _PREAD:
            with path.open("rb") as fh:
                fh.seek(offset)
                return fh.read(length)
        now = os.stat(key)  # the file now at this path (a rotation puts another one there)
        with self._lock:
            held = self._fds.get(key)
            if held is not None:
                fd, identity = held
                if identity == (now.st_dev, now.st_ino):
                    self._fds.move_to_end(key)
                    return os.pread(fd, length, offset)
                self._close(key)
            fd = os.open(key, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            opened = os.fstat(fd)
            self._fds[key] = (fd, (opened.st_dev, opened.st_ino))
            if len(self._fds) > self._size:
                self._close(next(iter(self._fds)))
            return os.pread(fd, length, offset)

    def _close(self, key: str) -> None:
        fd, _ = self._fds.pop(key)
        os.close(fd)

    def close_all(self) -> None:
        with self._lock:
            for key in list(self._fds):
                self._close(key)


_OPEN = _OpenFiles(OPEN_FILES)


def read_span(path: Path, offset: int, length: int) -> bytes:
    """Exactly ``length`` bytes at ``offset`` (fewer if the file has shrunk since)."""
    return _OPEN.read(path, offset, length)
