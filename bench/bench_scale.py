"""Benchmark: files of many threads, and the memory of a long file, as ``ctx-inspect stats
--no-exact --json FILE`` reads them (a fresh process per run, its output thrown away).

threads: a JSON Lines file with a conversation per line (an evaluation output: each
conversation is a thread, so a session): a system prompt, a question, a reply with a tool call
and the provider's usage, the tool's output, a final answer. For each count of conversations,
the time of the run (wall and CPU), the time per conversation and its ratio to the smallest
count's (1.0: linear), and the peak memory. Medians of ``--runs``.

memory: a chat transcript of ``--gb`` GB, a message of ~1 KB per line, every reply with the
provider's usage (a request and a usage report per two messages), read once: peak memory
(the process's high-water mark), time, and messages per second.

``--source DIR`` runs the same commands with the ``ctx_inspect`` package found in DIR (another
checkout, e.g. an older commit extracted with ``git archive``), for before/after figures. Inputs
are generated in a temporary folder (``--data DIR`` to keep and reuse them).

    .venv/bin/python bench/bench_scale.py threads [--counts 1000,2000,4000,100000] [--runs 3]
    .venv/bin/python bench/bench_scale.py memory [--gb 2]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

WORDS = ["read", "parse", "token", "window", "context", "file", "error", "value", "module", "limit"]
TARGET_MEMORY_MB = 600.0


def conversation(k: int) -> dict[str, Any]:
    call = f"call_{k}"
    return {
        "messages": [
            {"role": "system", "content": "You are a careful coding agent."},
            {"role": "user", "content": f"Task {k}: fix the failing test"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {"name": "bash", "arguments": '{"cmd": "pytest -x"}'},
                    }
                ],
                "usage": {"prompt_tokens": 900 + k % 500, "completion_tokens": 12},
            },
            {"role": "tool", "tool_call_id": call, "content": "1 failed, 41 passed"},
            {"role": "assistant", "content": "Fixed: the parser skipped the last line."},
        ]
    }


def write_conversations(path: Path, count: int) -> Path:
    if not path.exists():
        with path.open("w") as fh:
            for k in range(1, count + 1):
                fh.write(json.dumps(conversation(k)) + "\n")
    return path


def write_transcript(path: Path, size: int) -> tuple[Path, int]:
    """A chat transcript of ``size`` bytes, a message per line (~1 KB each)."""
    messages = 0
    if path.exists():
        with path.open("rb") as fh:
            messages = sum(1 for _ in fh)
        return path, messages
    written = 0
    with path.open("w") as fh:
        while written < size:
            role = ("user", "assistant", "tool", "assistant")[messages % 4]
            text = " ".join(WORDS[(messages + j) % len(WORDS)] for j in range(150 + messages % 20))
            record: dict[str, Any] = {"role": role, "content": text}
            if role == "tool":
                record["tool_call_id"] = f"c{messages}"
            if role == "assistant":
                usage = {"prompt_tokens": 1000 + messages % 100_000, "completion_tokens": 40}
                record["usage"] = usage
            line = json.dumps(record) + "\n"
            fh.write(line)
            written += len(line)
            messages += 1
    return path, messages


def run_stats(path: Path, source: Path | None) -> dict[str, float]:
    """``ctx-inspect stats --no-exact --json path`` in a fresh process: wall and CPU seconds,
    peak memory (the child's own high-water mark), lines printed."""
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = str(source)
    command = [sys.executable, "-m", "ctx_inspect", "stats", "--no-exact", "--json", str(path)]
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        child = subprocess.Popen(command, stdout=out, stderr=subprocess.PIPE, env=env, cwd="/")
        assert child.stderr is not None
        error = child.stderr.read()
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode:
            raise SystemExit(f"stats failed ({child.returncode}): {error.decode()[-2000:]}")
        out.seek(0)
        lines = sum(1 for _ in out)
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_mb": usage.ru_maxrss / 1024,
        "sessions": lines,
    }


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def bench_threads(args: argparse.Namespace, data: Path) -> dict[str, Any]:
    counts = [int(c) for c in args.counts.split(",")]
    rows = []
    print(f"load average before: {load()}", flush=True)
    for count in counts:
        path = write_conversations(data / f"conversations-{count}.jsonl", count)
        runs = [run_stats(path, args.source) for _ in range(args.runs)]
        assert all(r["sessions"] == count for r in runs), "a session per conversation"
        row = {
            "conversations": count,
            "wall_s": statistics.median(r["wall_s"] for r in runs),
            "cpu_s": statistics.median(r["cpu_s"] for r in runs),
            "peak_mb": max(r["peak_mb"] for r in runs),
        }
        rows.append(row)
        print(
            f"{count:>8,} conversations: {row['wall_s']:7.2f} s wall, {row['cpu_s']:7.2f} s cpu, "
            f"{row['cpu_s'] / count * 1e6:6.0f} us cpu per conversation, "
            f"peak {row['peak_mb']:.0f} MB  (load {load()})",
            flush=True,
        )
    base = rows[0]["cpu_s"] / rows[0]["conversations"]
    previous = (0, 0.0)
    for row in rows:
        row["cpu_per_conversation_us"] = row["cpu_s"] / row["conversations"] * 1e6
        row["ratio_to_smallest"] = row["cpu_s"] / row["conversations"] / base
        # what the conversations added since the previous count cost each (the process's
        # start and imports, paid once, left out)
        added = row["conversations"] - previous[0]
        row["marginal_us"] = (row["cpu_s"] - previous[1]) / added * 1e6 if previous[0] else None
        previous = (row["conversations"], row["cpu_s"])
    print()
    print(
        "| conversations | wall s | cpu s | cpu per conversation | x smallest "
        "| cpu per added conversation | peak MB |"
    )
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        marginal = "-" if row["marginal_us"] is None else f"{row['marginal_us']:.0f} us"
        print(
            f"| {row['conversations']:,} | {row['wall_s']:.2f} | {row['cpu_s']:.2f} | "
            f"{row['cpu_per_conversation_us']:.0f} us | {row['ratio_to_smallest']:.2f} | "
            f"{marginal} | {row['peak_mb']:.0f} |"
        )
    print(f"load average after: {load()}")
    return {"threads": rows}


def bench_memory(args: argparse.Namespace, data: Path) -> dict[str, Any]:
    size = int(args.gb * 1e9)
    started = time.perf_counter()
    path, messages = write_transcript(data / f"transcript-{args.gb:g}gb.jsonl", size)
    print(
        f"input: {path.stat().st_size / 1e9:.2f} GB, {messages:,} messages "
        f"(written in {time.perf_counter() - started:.0f} s)",
        flush=True,
    )
    print(f"load average before: {load()}", flush=True)
    runs = [run_stats(path, args.source) for _ in range(args.runs)]
    peak = max(r["peak_mb"] for r in runs)
    wall = statistics.median(r["wall_s"] for r in runs)
    cpu = statistics.median(r["cpu_s"] for r in runs)
    met = "met" if peak <= TARGET_MEMORY_MB else "missed"
    print(
        f"stats --no-exact: peak {peak:.0f} MB (target <= {TARGET_MEMORY_MB:.0f} MB: {met}), "
        f"{peak * 2**20 / messages:.0f} bytes of peak per message; {wall:.1f} s wall, "
        f"{cpu:.1f} s cpu ({messages / cpu:,.0f} messages per cpu second)"
    )
    print(f"load average after: {load()}")
    return {"memory": {"gb": args.gb, "messages": messages, "peak_mb": peak, "wall_s": wall}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("which", choices=["threads", "memory"])
    parser.add_argument("--counts", default="1000,2000,4000,100000")
    parser.add_argument("--gb", type=float, default=2.0)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--source", type=Path, default=None, help="read with this checkout")
    parser.add_argument("--data", type=Path, default=None, help="keep the inputs here")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args(argv)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cpus, Python "
        f"{platform.python_version()}; code: {args.source or 'this checkout'}"
    )
    data = args.data or Path(tempfile.mkdtemp(prefix="bench-scale-"))
    data.mkdir(parents=True, exist_ok=True)
    try:
        bench = bench_threads if args.which == "threads" else bench_memory
        figures = bench(args, data)
    finally:
        if args.data is None:
            shutil.rmtree(data, ignore_errors=True)
    if args.json:
        print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
