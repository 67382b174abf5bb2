"""Reading a file's lines on two cores: a reading strategy beside the parser protocol.

``formats.base.read_file`` uses it, without bodies, for a two-phase line parser (one whose
``scan_line`` turns a line into a record of plain values without any other state): this process
and a forked worker both scan chunks of the file, each taking the next one not yet taken, while
this process applies the chunks' records in order (``LineParser.feed_scanned``). What comes out
is what the serial reading gives; should the worker fail, this process scans what it left.

When: a file of ``PARALLEL_MIN_BYTES`` or more (below, one core reads it about as fast), while a
CPU is idle (on a machine whose CPUs are all busy, a worker would only compete with this
process, and the two do more work in all than one). A worker is forked only on Linux and from a
process running a single thread (forking a threaded process is unsafe); else the file is read
serially.
"""

from __future__ import annotations

import contextlib
import gc
import marshal
import os
import select
import signal
import struct
import sys
import threading
import time
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the protocol imports this module: its types only, here
    from ctx_inspect.formats.base import Item, LineParser, ScannedLine

PARALLEL_MIN_BYTES = 64 * 1024 * 1024  # below, one core reads it about as fast
SCAN_CHUNK = 4 * 1024 * 1024  # the lines starting in this many bytes are scanned as one piece
MAX_CHUNKS = 8192  # chunk numbers wait in a pipe (4 bytes each; a pipe holds 64 KiB)
_TOKEN = struct.Struct("<I")  # a chunk's number, claimed by whichever process reads it first
_NOTICE = struct.Struct("<QQQ")  # chunk, where its records are in the memory file, their size


def chosen(path: Path, parallel: bool | None = None) -> bool:
    """Whether to read ``path`` on two cores: ``parallel`` when given (True: force it), else
    whether it is large and a CPU is idle; never where a worker cannot be forked."""
    if parallel is None:
        parallel = path.stat().st_size >= PARALLEL_MIN_BYTES and _idle_cpu()
    return parallel and _can_fork()


def read_scanned(parser: LineParser, path: Path) -> Generator[list[Item], None, int]:
    """The items of the complete lines of ``path``, scanned on two cores and applied here in
    order, batch by batch; returns where those lines end (the caller feeds the rest)."""
    covered = 0
    with _ChunkedScan(parser.scan_line, path, parser.max_line_bytes) as scan:

        def read(offset: int, length: int) -> bytes:
            return os.pread(scan.fd, length, offset)

        for records in scan.in_order():
            if records:
                yield parser.feed_scanned(records, read)
                offset, length, _ = records[-1]
                covered = offset + length + 1
    return covered


class _ChunkedScan:
    """A file's lines scanned by this process and a forked worker, chunk by chunk, given back
    here in order. The chunk numbers wait in a pipe: each process takes the next by reading it
    (pipe reads are atomic), so neither waits while there is work, whatever else the machine
    runs. The worker puts each chunk's records into a memory file and only their place through
    a second pipe; this process scans a chunk itself whenever the next one to give back is not
    ready, and any the worker left when it ended."""

    def __init__(self, scan: Callable[[memoryview], Any], path: Path, limit: int) -> None:
        self.scan = scan
        self.limit = limit
        self.fd = os.open(path, os.O_RDONLY)
        self.end = os.fstat(self.fd).st_size
        self.size = max(SCAN_CHUNK, -(-self.end // MAX_CHUNKS))
        self.count = -(-self.end // self.size)
        self.pid = 0
        self._tokens = self._notices = self._frames = -1
        self._pending = b""  # part of a notice read early

    def __enter__(self) -> _ChunkedScan:
        try:
            self._start()
        except OSError:  # no worker: every chunk is scanned here
            self._stop_worker()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _start(self) -> None:
        self._frames = os.memfd_create("ctx-inspect-scan", os.MFD_CLOEXEC)
        self._notices, notify = os.pipe()
        try:
            self._tokens, fill = os.pipe()
            os.write(fill, b"".join(_TOKEN.pack(k) for k in range(self.count)))
            os.close(fill)  # once taken, the pipe reads as ended
            pid = os.fork()
        except OSError:
            os.close(notify)
            raise
        if pid == 0:  # the worker: scan, write, and leave without running the parent's code
            status = 1
            try:
                os.close(self._notices)
                gc.disable()  # records hold no cycles
                self._work(notify)
                status = 0
            finally:
                os._exit(status)
        self.pid = pid
        os.close(notify)
        os.set_blocking(self._notices, False)

    def _work(self, notify: int) -> None:
        at = 0
        while (chunk := self._claim()) is not None:
            payload = memoryview(marshal.dumps(self._scan_chunk(chunk)))
            written = 0
            while written < len(payload):
                written += os.pwrite(self._frames, payload[written:], at + written)
            os.write(notify, _NOTICE.pack(chunk, at, written))
            at += written

    def __exit__(self, *_: object) -> None:
        self._stop_worker()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def _stop_worker(self) -> None:
        if self.pid:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)  # done or not, nothing more is wanted from it
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
            self.pid = 0
        for fd in (self._tokens, self._notices, self._frames):
            if fd >= 0:
                os.close(fd)
        self._tokens = self._notices = self._frames = -1

    def _claim(self) -> int | None:
        """The next chunk nobody has taken, taken; None when all are (or there is no worker:
        then this process goes through the chunks in order)."""
        if self._tokens < 0:
            return None
        token = os.read(self._tokens, _TOKEN.size)
        return _TOKEN.unpack(token)[0] if len(token) == _TOKEN.size else None

    def _scan_chunk(self, chunk: int) -> list[ScannedLine]:
        begin = chunk * self.size
        return scan_chunk(self.scan, self.fd, begin, begin + self.size, self.end, self.limit)

    def in_order(self) -> Iterator[list[ScannedLine]]:
        """Each chunk's records, in the order of the file."""
        ready: dict[int, list[ScannedLine]] = {}
        worker = self._notices >= 0  # still sending
        for chunk in range(self.count):
            while chunk not in ready:
                if worker:
                    worker = self._collect(ready, wait=False)
                    if chunk in ready:
                        break
                mine = self._claim()
                if mine is not None:
                    ready[mine] = self._scan_chunk(mine)
                elif worker:  # the worker has it: wait for it
                    worker = self._collect(ready, wait=True)
                else:  # the worker ended without it
                    ready[chunk] = self._scan_chunk(chunk)
            yield ready.pop(chunk)

    def _collect(self, ready: dict[int, list[ScannedLine]], *, wait: bool) -> bool:
        """Take the chunks the worker has finished (waiting for one if ``wait``); False once it
        has ended."""
        if wait:
            select.select([self._notices], [], [])
        try:
            data = os.read(self._notices, _NOTICE.size * 256)
        except BlockingIOError:
            return True
        if not data:
            return False
        data = self._pending + data
        whole = len(data) - len(data) % _NOTICE.size
        self._pending = data[whole:]
        for chunk, at, size in _NOTICE.iter_unpack(data[:whole]):
            try:
                ready[chunk] = marshal.loads(os.pread(self._frames, size, at))
            except (EOFError, ValueError, TypeError, OSError):
                return False  # scanned here instead
        return True


def _usable_cpus() -> int:
    """The CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _idle_cpu(samples: int = 5) -> bool:
    """Whether a CPU other than this process's is idle now: fewer tasks runnable (this one
    included, the fewest of a few samples ~2 ms apart, so that short-lived ones do not count)
    than CPUs this process may use."""
    cpus = _usable_cpus()
    if cpus < 2:
        return False
    try:
        fewest = min(_runnable() for _ in _paced(samples))
    except (OSError, ValueError, IndexError):
        return True  # no /proc: assume the machine is not busy
    return fewest < cpus


def _runnable() -> int:
    with open("/proc/loadavg", "rb") as fh:
        return int(fh.read().split()[3].split(b"/")[0])


def _paced(count: int) -> Iterator[int]:
    for i in range(count):
        if i:
            time.sleep(0.002)
        yield i


def _can_fork() -> bool:
    return (
        sys.platform == "linux"
        and hasattr(os, "fork")
        and hasattr(os, "memfd_create")
        and threading.active_count() == 1
    )


def scan_chunk(
    scan: Callable[[memoryview], Any],
    fd: int,
    begin: int,
    stop: int,
    end: int,
    max_line_bytes: int,
    block_size: int = SCAN_CHUNK,
) -> list[ScannedLine]:
    """The lines of the file open at ``fd`` that start in ``[begin, stop)`` and end (with a
    newline) before ``end``, scanned: (offset, length, record). A line over ``max_line_bytes`` is
    not kept in memory and its record is None; a line still open at ``end`` is left out."""

    def safe(line: memoryview) -> Any:
        try:
            return scan(line)
        except Exception:
            return None

    records: list[ScannedLine] = []
    pos = _line_start(fd, begin, end, block_size)  # the next line to scan
    while pos < stop:
        data = os.pread(fd, min(max(stop - pos, 1), end - pos, block_size), pos)
        if not data:
            break
        view = memoryview(data)
        find = data.find
        start = 0
        while pos + start < stop:
            nl = find(b"\n", start)
            if nl < 0:
                break
            length = nl - start
            scanned = safe(view[start:nl]) if length <= max_line_bytes else None
            records.append((pos + start, length, scanned))
            start = nl + 1
        else:
            break  # the next line starts in the next chunk
        if start:
            pos += start
            continue
        # a line longer than what was read: read on to its end, holding at most the limit
        line = _long_line(fd, pos, end, max_line_bytes, block_size)
        if line is None:
            break  # still open at the end
        length, held = line
        records.append((pos, length, safe(memoryview(held)) if held is not None else None))
        pos += length + 1
    return records


def _line_start(fd: int, at: int, end: int, block_size: int) -> int:
    """The offset of the first line that starts at or after ``at`` (``end`` when none)."""
    if at <= 0:
        return 0
    pos = at - 1
    while pos < end:
        block = os.pread(fd, min(block_size, end - pos), pos)
        if not block:
            break
        nl = block.find(b"\n")
        if nl >= 0:
            return pos + nl + 1
        pos += len(block)
    return end


def _long_line(
    fd: int, pos: int, end: int, limit: int, block_size: int
) -> tuple[int, bytes | None] | None:
    """(length, bytes or None when over ``limit``) of the line at ``pos``; None when it has no
    newline before ``end``."""
    pieces: list[bytes] = []
    held = 0
    at = pos
    while at < end:
        block = os.pread(fd, min(block_size, end - at), at)
        if not block:
            return None
        nl = block.find(b"\n")
        piece = block if nl < 0 else block[:nl]
        if held + len(piece) <= limit:
            pieces.append(piece)
        else:
            pieces = []
        held += len(piece)
        if nl >= 0:
            return held, (b"".join(pieces) if held <= limit else None)
        at += len(block)
    return None
