"""Benchmark: one huge line, as ``ctx-inspect stats --no-exact --json --format NAME FILE``
reads it (a fresh process per run, its output thrown away).

For each reader, a file whose one record holds a string of ``--mb`` MB (ai-agent's debug
output: a topic whose object has a single-quoted ``message``; ai-agent's stderr: a coloured
logfmt record whose ``message`` is that long), then a short record after it. The figure is the
CPU of the whole process (start and imports included), and its ratio to the same command on a
file of the same records with a string of one byte: what the huge line costs beyond the rest.
Medians of ``--runs``.

``--source DIR`` runs the same commands with the ``ctx_inspect`` package found in DIR (another
checkout, e.g. an older commit extracted with ``git archive``), for before/after figures.

    .venv/bin/python bench/bench_huge_lines.py [--mb 20] [--runs 3] [--source DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def debug_log(size: int) -> bytes:
    big = "z" * size
    return f"context-guard/log-entry {{\n  message: '{big}',\n  turn: 3\n}}\nafter\n".encode()


def stderr_log(size: int) -> bytes:
    big = "q" * size
    return (
        "\x1b[90mts=2026-01-17T00:00:00Z level=vrb remote=agent:settings "
        f'message="{big} x"\x1b[0m\n'
        'ts=2026-01-17T00:00:01Z level=vrb message="after"\n'
    ).encode()


READERS = {"aiagent-debug": debug_log, "aiagent-log": stderr_log}


def cpu_of_stats(path: Path, reader: str, source: Path | None) -> float:
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = str(source)
    command = [sys.executable, "-m", "ctx_inspect", "stats", "--no-exact", "--json"]
    command += ["--format", reader, str(path)]
    with tempfile.TemporaryFile() as out:
        child = subprocess.Popen(command, stdout=out, stderr=subprocess.PIPE, env=env, cwd="/")
        assert child.stderr is not None
        error = child.stderr.read()
        _, status, usage = os.wait4(child.pid, 0)
        if os.waitstatus_to_exitcode(status):
            raise SystemExit(f"stats failed: {error.decode()[-2000:]}")
    return usage.ru_utime + usage.ru_stime


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=20.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--source", type=Path, default=None)
    args = parser.parse_args()
    size = int(args.mb * 2**20)
    print(f"load average before: {load()}", flush=True)
    print("| reader | string | cpu s (huge) | cpu s (one byte) | huge / one byte |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for reader, make in READERS.items():
            huge = Path(folder) / f"{reader}-huge.log"
            small = Path(folder) / f"{reader}-small.log"
            huge.write_bytes(make(size))
            small.write_bytes(make(1))
            started = time.perf_counter()
            runs = range(args.runs)
            cpu = statistics.median(cpu_of_stats(huge, reader, args.source) for _ in runs)
            base = statistics.median(cpu_of_stats(small, reader, args.source) for _ in runs)
            print(
                f"| {reader} | {args.mb:g} MB | {cpu:.2f} | {base:.2f} | {cpu / base:.1f} |"
                f"  ({time.perf_counter() - started:.0f} s wall)",
                flush=True,
            )
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
