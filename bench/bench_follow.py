"""Benchmark: latency of following a live file, from a line's write to its delivery.

A writer process appends one line every ``--interval-ms`` (20 ms) holding the wall-clock time
of its write; the reader follows the file through the real watching path
(``ctx_inspect.sources.follow.follow``: watchfiles on the file's folder, then ``poll()``) and, for
each complete line it is given, records delivery time minus write time. Prints the median, p90,
p99 and max for each mode:

- ``native``: watchfiles with the platform's notifications (inotify on Linux);
- ``polling``: ``force_polling=True`` (watchfiles polls the folder every ``--poll-delay-ms``);
- ``sync``: ``follow_sync`` (the headless path) with native notifications.

``--rotate-every N`` makes the writer rotate its file as logrotate does (``run.log.N`` becomes
``run.log.N+1``, ..., ``run.log`` becomes ``run.log.1``) twice in a row every N lines, with one
line written in between: two rotations microseconds apart, closer together than any poll, so
that line is read from the rotated chain. ``lines`` in the output then says whether every line
arrived.

Targets (native): median <= 50 ms, p99 <= 200 ms.

    .venv/bin/python bench/bench_follow.py [--lines 500] [--modes native,polling,sync]
        [--rotate-every 0]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import watchfiles

from ctx_inspect.sources.follow import Change, Chunk, follow, follow_sync
from ctx_inspect.sources.watch import DEBOUNCE_MS, POLL_DELAY_MS, POLL_INTERVAL, STEP_MS

WRITER = r"""
import os, sys, time
path, lines, interval = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
rotate_every = int(sys.argv[4])


def rotate():
    folder, name = os.path.split(path)
    numbers = [n[len(name) + 1 :] for n in os.listdir(folder) if n.startswith(name + ".")]
    for number in sorted((int(n) for n in numbers if n.isdigit()), reverse=True):
        os.rename(f"{path}.{number}", f"{path}.{number + 1}")
    os.rename(path, f"{path}.1")


time.sleep(0.5)  # let the reader start watching
fh = open(path, "ab", buffering=0)
next_at = time.monotonic()
for seq in range(lines):
    if rotate_every and seq and seq % rotate_every == 0:
        fh.close()
        rotate()
        fh = open(path, "ab", buffering=0)
        fh.write(b"%d %d\n" % (seq, time.time_ns()))
        fh.close()
        rotate()  # microseconds after the first one: this line's file is in between
        fh = open(path, "ab", buffering=0)
    else:
        fh.write(b"%d %d\n" % (seq, time.time_ns()))
    next_at += interval
    time.sleep(max(0.0, next_at - time.monotonic()))
fh.close()
"""


class Latencies:
    def __init__(self, lines: int) -> None:
        self.lines = lines
        self.carry = b""
        self.ms: list[float] = []

    def take(self, chunks: list[Chunk]) -> bool:
        now = time.time_ns()
        for chunk in chunks:
            if chunk.change is not Change.DATA:
                continue
            data = self.carry + chunk.data
            *complete, self.carry = data.split(b"\n")
            for line in complete:
                _seq, written = line.split()
                self.ms.append((now - int(written)) / 1e6)
        return len(self.ms) >= self.lines

    def summary(self) -> dict[str, float]:
        ms = sorted(self.ms)

        def pct(p: float) -> float:
            return ms[min(len(ms) - 1, round(p / 100 * (len(ms) - 1)))]

        return {
            "lines": len(ms),
            "median_ms": statistics.median(ms),
            "p90_ms": pct(90),
            "p99_ms": pct(99),
            "max_ms": ms[-1],
        }


def start_writer(
    path: Path, lines: int, interval_ms: float, rotate_every: int
) -> subprocess.Popen[bytes]:
    args = [str(path), str(lines), str(interval_ms / 1000), str(rotate_every)]
    return subprocess.Popen([sys.executable, "-c", WRITER, *args])


async def run_async(path: Path, args: argparse.Namespace, force_polling: bool) -> Latencies:
    result = Latencies(args.lines)
    stop = asyncio.Event()
    writer = start_writer(path, args.lines, args.interval_ms, args.rotate_every)
    deadline = asyncio.get_running_loop().call_later(
        args.lines * args.interval_ms / 1000 + 30, stop.set
    )
    try:
        async for chunks in follow(
            path,
            stop_event=stop,
            force_polling=force_polling,
            debounce_ms=args.debounce_ms,
            step_ms=args.step_ms,
            poll_delay_ms=args.poll_delay_ms,
            poll_interval=args.poll_interval,
        ):
            if result.take(chunks):
                stop.set()
    finally:
        deadline.cancel()
        writer.wait()
    return result


def run_sync(path: Path, args: argparse.Namespace) -> Latencies:
    result = Latencies(args.lines)
    stop = threading.Event()
    writer = start_writer(path, args.lines, args.interval_ms, args.rotate_every)
    timer = threading.Timer(args.lines * args.interval_ms / 1000 + 30, stop.set)
    timer.start()
    try:
        for chunks in follow_sync(
            path,
            stop,
            debounce_ms=args.debounce_ms,
            step_ms=args.step_ms,
            poll_interval=args.poll_interval,
        ):
            if result.take(chunks):
                stop.set()
    finally:
        timer.cancel()
        writer.wait()
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=500)
    parser.add_argument("--interval-ms", type=float, default=20.0)
    parser.add_argument("--modes", default="native,polling,sync")
    parser.add_argument("--debounce-ms", type=int, default=DEBOUNCE_MS)
    parser.add_argument("--step-ms", type=int, default=STEP_MS)
    parser.add_argument("--poll-delay-ms", type=int, default=POLL_DELAY_MS)
    parser.add_argument("--poll-interval", type=float, default=POLL_INTERVAL)
    parser.add_argument("--rotate-every", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    print(
        f"# {platform.system()} {platform.machine()}, Python {platform.python_version()}, "
        f"watchfiles {watchfiles.VERSION}, {os.cpu_count()} CPUs; {args.lines} lines every "
        f"{args.interval_ms:g} ms; debounce {args.debounce_ms} ms, step {args.step_ms} ms, "
        f"poll delay {args.poll_delay_ms} ms, periodic poll {args.poll_interval:g} s"
        + (f"; two rotations every {args.rotate_every} lines" if args.rotate_every else ""),
        file=sys.stderr,
    )
    results: dict[str, dict[str, float]] = {}
    for mode in args.modes.split(","):
        with tempfile.TemporaryDirectory(prefix="bench-follow-") as tmp:
            path = Path(tmp) / "run.log"
            path.write_bytes(b"")
            if mode == "sync":
                latencies = run_sync(path, args)
            else:
                latencies = asyncio.run(run_async(path, args, force_polling=mode == "polling"))
        results[mode] = latencies.summary()
        if not args.json:
            s = results[mode]
            print(
                f"{mode:8} lines {int(s['lines']):5}  median {s['median_ms']:7.1f} ms  "
                f"p90 {s['p90_ms']:7.1f} ms  p99 {s['p99_ms']:7.1f} ms  max {s['max_ms']:7.1f} ms"
            )
    if args.json:
        print(json.dumps(results))
    native = results.get("native")
    if native is not None:
        ok = native["median_ms"] <= 50 and native["p99_ms"] <= 200
        print(f"native targets (median <= 50 ms, p99 <= 200 ms): {'met' if ok else 'MISSED'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
