"""Inputs that are streams, not files: ``-`` (standard input), a pipe, a FIFO, a character
device, a socket, a process substitution (``<(command)``, a ``/dev/fd/N`` path).

A stream can be read once, from its start to its end, and has no offsets to come back to; the
rest of ctx-inspect reads a file's head to detect its format, then reads it again from offset 0,
and reads message bodies back later by byte offset. So a stream is **spooled to a private
temporary file** as it is read (a folder of its own, readable by this user only, removed when the
process exits), and everything else reads that file: detection, parsing, bodies read back by
offset, re-reading a whole document. Nothing is kept in memory beyond one read buffer, whatever
the stream's size. The stream itself is opened once and only read.

``spool(path)`` reads a stream to its end and returns the file holding its bytes (once per
stream in a process: naming it twice reads it once). ``Spool`` is the reader underneath: a
thread copies the stream into the file as bytes arrive, so a caller can also follow the file as
it grows (``stats --follow -``) and wait for its head, for more bytes or for the end.

Opening never blocks: a FIFO is opened without waiting for a writer, and a stream that gives no
byte and no end within ``FIRST_BYTE_WAIT`` seconds is refused (``InputError``), as is a terminal
on standard input, and a stream that ended without a byte (an empty stream is far more often a
command that failed than an empty session).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import select
import shutil
import stat
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Final

from ctx_inspect.errors import InputError

STDIN: Final = "-"
STDIN_NAME: Final = "<stdin>"
FIRST_BYTE_WAIT = 10.0  # seconds a stream may stay silent before its first byte
READ_BYTES: Final = 1 << 20
_WAKE_SECONDS: Final = 0.2  # how often a blocked reader looks whether it should stop

_KINDS: Final = (
    (stat.S_ISFIFO, "a pipe or FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISBLK, "a block device"),
)


def is_stdin(path: str | os.PathLike[str]) -> bool:
    return os.fspath(path) == STDIN


def stream_kind(path: str | os.PathLike[str]) -> str | None:
    """What kind of stream ``path`` names (``-`` is standard input), or None for a regular
    file, a folder, or a path that does not exist. Only looks (``stat``), never opens."""
    if is_stdin(path):
        return "standard input"
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    for test, kind in _KINDS:
        if test(mode):
            return kind
    return None


def is_stream(path: str | os.PathLike[str]) -> bool:
    return stream_kind(path) is not None


def display_name(path: str | os.PathLike[str]) -> str:
    """How an input is named to the user (``-`` is ``<stdin>``)."""
    return STDIN_NAME if is_stdin(path) else os.fspath(path)


class Spool:
    """One stream copied, as it arrives, into a private temporary file (``path``).

    ``size`` bytes are in the file so far; ``done`` once the stream has ended (or failed:
    ``error``). Waiting methods return early when ``stop`` (a ``threading.Event``) is set.
    """

    def __init__(self, source: str | os.PathLike[str]) -> None:
        self.source = os.fspath(source)
        self.name = display_name(source)
        self.kind = stream_kind(source) or "a file"
        self.size = 0
        self.done = False
        self.error: InputError | None = None  # reading failed
        self.failure: InputError | None = None  # refused here (silent, binary)
        self._changed = threading.Condition()
        self._quit = threading.Event()
        self._fd = self._open()
        suffix = "".join(Path(self.source).suffixes[-2:]) if not is_stdin(source) else ""
        self.path = _private_folder() / f"stream-{id(self):x}{suffix}"
        self._out = open(self.path, "xb")  # noqa: SIM115 - closed by the reading thread
        self._thread = threading.Thread(target=self._copy, name=f"spool {self.name}", daemon=True)
        self._thread.start()

    def _open(self) -> int:
        if is_stdin(self.source):
            stdin = sys.stdin
            try:
                fd = stdin.fileno() if stdin is not None else -1
            except (AttributeError, OSError, ValueError):
                fd = -1
            if fd < 0:
                raise InputError("no standard input", "`-` names standard input, and there is none")
            if os.isatty(fd):
                raise InputError(
                    "standard input is a terminal",
                    "`-` reads a session piped or redirected in (ctx-inspect stats - < run.log)",
                )
            return os.dup(fd)
        flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | os.O_NOCTTY
        try:
            fd = os.open(self.source, flags)  # O_NONBLOCK: a FIFO opens without a writer
        except FileNotFoundError:
            raise InputError("file not found", self.source) from None
        except OSError as exc:
            raise InputError("cannot read file", f"{self.source}: {exc.strerror or exc}") from None
        if os.isatty(fd):
            os.close(fd)
            raise InputError("cannot read a terminal", f"{self.source} is a terminal")
        return fd

    # -- the reading thread ----------------------------------------------------------------

    def _copy(self) -> None:
        error: InputError | None = None
        try:
            while not self._quit.is_set():
                data = self._read_some()
                if data is None:
                    continue  # nothing yet
                if not data:
                    break
                self._out.write(data)
                self._out.flush()
                with self._changed:
                    self.size += len(data)
                    self._changed.notify_all()
        except OSError as exc:
            error = InputError("cannot read file", f"{self.name}: {exc.strerror or exc}")
        finally:
            with contextlib.suppress(OSError):
                self._out.close()
            with contextlib.suppress(OSError):
                os.close(self._fd)
            with self._changed:
                self.error = error
                self.done = True
                self._changed.notify_all()

    def _read_some(self) -> bytes | None:
        """Up to ``READ_BYTES``; b"" at the end; None when nothing came within a short while."""
        ready, _, _ = select.select([self._fd], [], [], _WAKE_SECONDS)
        if not ready:
            return None
        try:
            return os.read(self._fd, READ_BYTES)
        except BlockingIOError:
            return None

    # -- waiting ---------------------------------------------------------------------------

    def wait(
        self,
        at_least: int,
        *,
        stop: threading.Event | None = None,
        timeout: float | None = None,
    ) -> bool:
        """Wait until the file holds ``at_least`` bytes or the stream ended; False if
        ``timeout`` passed or ``stop`` was set first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while self.size < at_least and not self.done:
                if stop is not None and stop.is_set():
                    return False
                left = _WAKE_SECONDS if deadline is None else deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(min(left, _WAKE_SECONDS))
            return True

    def wait_first_byte(self, stop: threading.Event | None = None) -> None:
        """Wait for the stream's first byte (or its end) for ``FIRST_BYTE_WAIT`` seconds; an
        InputError when none came: nothing may be writing to it."""
        if self.wait(1, stop=stop, timeout=FIRST_BYTE_WAIT) or (stop and stop.is_set()):
            return
        self.failure = InputError(
            "nothing to read",
            f"{self.name} ({self.kind}) gave no data within {FIRST_BYTE_WAIT:g} s; "
            "is anything writing to it?",
        )
        self.close()
        raise self.failure

    def wait_head(self, size: int, stop: threading.Event | None = None, quiet: float = 0.3) -> None:
        """Wait until ``size`` bytes are in, the stream ended, or what came ends with a complete
        line and nothing more came for ``quiet`` seconds (a live writer's first lines can be
        all there is for a while): then there is enough to detect the format."""
        self.wait_first_byte(stop)
        while not self.wait(size, stop=stop, timeout=quiet):
            if stop is not None and stop.is_set():
                return
            if self._ends_with_newline():
                return

    def _ends_with_newline(self) -> bool:
        size = self.size
        if not size:
            return False
        with open(self.path, "rb") as fh:
            fh.seek(size - 1)
            return fh.read(1) == b"\n"

    def read_all(self, stop: threading.Event | None = None) -> Path:
        """Wait for the stream's end; the file holding all of it. InputError when it failed
        or ended without a byte."""
        self.wait_first_byte(stop)
        while not self.done and not (stop is not None and stop.is_set()):
            self.wait(self.size + 1, stop=stop)
        self.check()
        return self.path

    def check(self) -> None:
        """InputError when the stream failed, or ended empty."""
        if self.failure is not None:
            raise self.failure
        if self.error is not None:
            raise self.error
        if self.done and self.size == 0:
            raise InputError(
                "empty input", f"{self.name} ({self.kind}) ended without a single byte"
            )

    def refuse(self, error: InputError) -> InputError:
        """Stop reading a stream found unfit (binary, ...): ``error`` from now on."""
        self.failure = error
        self.close()
        return error

    def close(self) -> None:
        """Stop reading (the thread ends within a short while)."""
        self._quit.set()


_FOLDER: list[Path] = []
_SPOOLS: dict[tuple[int, int], Spool] = {}
_LOCK = threading.Lock()


def _private_folder() -> Path:
    """This process's folder for spooled streams (mode 0700), removed at exit."""
    with _LOCK:
        if not _FOLDER:
            folder = Path(tempfile.mkdtemp(prefix="ctx-inspect-streams-"))
            atexit.register(shutil.rmtree, folder, ignore_errors=True)
            _FOLDER.append(folder)
        return _FOLDER[0]


def _identity(path: str | os.PathLike[str]) -> tuple[int, int]:
    """The stream's device and inode (standard input's, for ``-``): one stream, one spool,
    however it is named (``-``, ``/dev/stdin``, ``/dev/fd/0``)."""
    try:
        st = os.fstat(sys.stdin.fileno()) if is_stdin(path) else os.stat(path)
    except (AttributeError, OSError, ValueError):
        return (-1, -1)
    return (st.st_dev, st.st_ino)


def open_spool(path: str | os.PathLike[str]) -> Spool:
    """The spool of the stream ``path``, started on the first call (one per stream)."""
    key = _identity(path)
    with _LOCK:
        spool = _SPOOLS.get(key) if key != (-1, -1) else None
    if spool is None:
        spool = Spool(path)
        with _LOCK:
            spool = _SPOOLS.setdefault(key, spool)
    return spool


def spool(path: str | os.PathLike[str], stop: threading.Event | None = None) -> Path:
    """The stream ``path`` read to its end into a private file; that file's path."""
    return open_spool(path).read_all(stop)


def spooled(path: Path) -> Path:
    """The file a stream read to its end was spooled to; else ``path`` itself (never waits)."""
    if not is_stream(path):
        return path
    key = _identity(path)
    with _LOCK:
        found = _SPOOLS.get(key)
    return found.path if found is not None and found.done and found.size else path
