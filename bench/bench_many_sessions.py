"""Benchmark: `ctx-inspect stats` over a project folder of many small sessions.

Writes ``--sessions`` Claude Code session files (a small real-looking transcript, each with its
own session id) into a temporary project folder, then runs in subprocesses, in alternating
order, ``--runs`` times each (medians):

- reference: ``cat`` of every session file into ``/dev/null`` through Python (read the bytes,
  nothing else), the floor of any reader;
- json:      ``ctx-inspect stats --no-exact --json FOLDER > /dev/null``;
- table:     ``ctx-inspect stats --no-exact FOLDER > /dev/null`` (the tables piped);

and, for the table, the time until its first session is printed (``stats`` prints each session
as soon as it is read). Also checks that the output holds every session once. The load of the
machine (``uptime``) is printed before and after.

    .venv/bin/python bench/bench_many_sessions.py [--sessions 10000] [--runs 3] [--code DIR]

``--code DIR``: run the ``ctx-inspect`` of another checkout (its folder goes first on
``PYTHONPATH``), e.g. an earlier commit unpacked with ``git archive``, for before/after figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
TEMPLATE = HERE.parent / "tests" / "data" / "claude_code" / "typical.jsonl"
CLI = [sys.executable, "-m", "ctx_inspect.cli"]


def write_sessions(folder: Path, count: int) -> None:
    """``count`` copies of the template, each under its own session id."""
    lines = [orjson.loads(line) for line in TEMPLATE.read_bytes().splitlines() if line.strip()]
    for i in range(count):
        sid = str(uuid.UUID(int=i + 1))
        out = bytearray()
        for record in lines:
            if isinstance(record, dict) and "sessionId" in record:
                record = {**record, "sessionId": sid}
            out += orjson.dumps(record) + b"\n"
        (folder / f"{sid}.jsonl").write_bytes(bytes(out))


def reference(folder: Path) -> float:
    code = (
        "import sys, pathlib\n"
        "for p in sorted(pathlib.Path(sys.argv[1]).glob('*.jsonl')):\n"
        "    p.read_bytes()\n"
    )
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, str(folder)], check=True)
    return time.perf_counter() - start


def run_stats(folder: Path, *, as_json: bool, code: Path | None) -> tuple[float, float, int]:
    """Seconds in all, seconds to the first session's output, sessions printed."""
    args = [*CLI, "stats", "--no-exact", *(["--json"] if as_json else []), str(folder)]
    env = {**os.environ, "COLUMNS": "160", "PYTHONDONTWRITEBYTECODE": "1"}
    if code is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(code), env.get("PYTHONPATH", "")])
    start = time.perf_counter()
    # run outside the checkout: ``python -m`` puts the working folder first on the path
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, env=env, cwd=folder.parent)
    assert proc.stdout is not None
    first = 0.0
    sessions = 0
    marker = b'{"file": ' if as_json else str(folder).encode()
    for line in proc.stdout:
        if line.startswith(marker):
            sessions += 1
            if sessions == 1:
                first = time.perf_counter() - start
    if proc.wait() != 0:
        raise SystemExit(f"stats failed: {proc.returncode}")
    return time.perf_counter() - start, first, sessions


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--code", type=Path, help="the checkout whose ctx-inspect to run")
    args = parser.parse_args()
    print(f"load before: {uptime()}")
    with tempfile.TemporaryDirectory(prefix="ctx-inspect-bench-") as tmp:
        folder = Path(tmp) / "-home-dev-project"
        folder.mkdir()
        write_sessions(folder, args.sessions)
        size = sum(p.stat().st_size for p in folder.iterdir())
        print(f"{args.sessions} sessions, {size / 1e6:.1f} MB in {folder}")
        if args.code is not None:
            print(f"code: {args.code}")
        times: dict[str, list[float]] = {"reference": [], "json": [], "table": []}
        firsts: list[float] = []
        for _ in range(args.runs):
            times["reference"].append(reference(folder))
            for name in ("json", "table"):
                total, first, sessions = run_stats(folder, as_json=name == "json", code=args.code)
                if sessions != args.sessions:
                    raise SystemExit(f"{name}: {sessions} of {args.sessions} sessions printed")
                times[name].append(total)
                if name == "table":
                    firsts.append(first)
    ref = statistics.median(times["reference"])
    print(f"{'':10} {'median s':>9} {'per session':>12} {'x reference':>12}")
    for name, values in times.items():
        med = statistics.median(values)
        per = med / args.sessions * 1000
        print(f"{name:10} {med:9.2f} {per:9.3f} ms {med / ref:12.1f}")
    print(f"table: first session printed after {statistics.median(firsts):.2f} s (median)")
    print(f"load after: {uptime()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
