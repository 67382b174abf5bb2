"""Benchmark: `ctx-inspect stats --no-exact` on a big Claude Code transcript against a bare read.

Measures, in one process and in alternating order (three runs each, medians):

- reference: read the file line by line and ``orjson.loads`` every line;
- ours:      exactly what ``ctx-inspect stats --no-exact --json FILE`` computes (the loader with
  ``count_exact=False, tokenize=False``, then the summary); a file this big is read on two cores
  when a CPU is idle at the start (``formats.parallel_read``), else on one;
- one core:  the same, read on one core whatever the machine (``--one-core``);
- two cores: the same, read on two cores whatever the machine (``--two-cores``);

and, in a fresh subprocess, the peak memory (``ru_maxrss`` and ``/proc`` ``VmHWM``) of one
``ours`` run, and that of its worker process. Targets: ours <= 1.5 x reference; peak memory
<= 300 MB.

    .venv/bin/python bench/gen_claude_code.py   # once, writes the 1 GiB file to bench/data/
    .venv/bin/python bench/bench_stats.py [--file PATH] [--runs 3]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from ctx_inspect.app.config import build_profile
from ctx_inspect.app.loader import open_inputs
from ctx_inspect.core.stats import RunFacts, summarize
from ctx_inspect.formats import parallel_read

DEFAULT_FILE = Path(__file__).parent / "data" / "claude_code_1024m_seed7.jsonl"
TARGET_RATIO = 1.5
TARGET_MB = 300.0


def reference(path: Path) -> int:
    lines = 0
    loads = orjson.loads
    with path.open("rb") as fh:
        for line in fh:
            loads(line)
            lines += 1
    return lines


def ours(path: Path, variant: str = "stats") -> dict[str, Any]:
    """Exactly what `ctx-inspect stats --no-exact --json FILE` computes (``variant`` "one-core"
    or "two-cores": read that way whatever the machine)."""
    threshold, idle = parallel_read.PARALLEL_MIN_BYTES, parallel_read._idle_cpu
    if variant == "one-core":
        parallel_read.PARALLEL_MIN_BYTES = 1 << 62
    elif variant == "two-cores":
        parallel_read._idle_cpu = lambda samples=5: True
    try:
        return _summaries(path)[0]
    finally:
        parallel_read.PARALLEL_MIN_BYTES, parallel_read._idle_cpu = threshold, idle


def _summaries(path: Path) -> list[dict[str, Any]]:
    return [
        summarize(
            loaded.session,
            loaded.profile,
            RunFacts(loaded.name, loaded.format.name, loaded.tokenizer_label),
        )
        for loaded in open_inputs(
            [path],
            lambda spec: build_profile(None, default=spec.default_profile),
            count_exact=False,
            tokenize=False,
        )
    ]


def timed(fn: Callable[[], Any]) -> tuple[float, float]:
    gc.collect()
    wall = time.perf_counter()
    cpu = time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def peak_memory(path: Path, variant: str) -> dict[str, float]:
    """Peak RSS of a fresh process running ``ours`` once (and of its worker, if any)."""
    code = (
        "import json, resource, sys\n"
        "from pathlib import Path\n"
        "sys.path.insert(0, sys.argv[3])\n"
        "from bench_stats import ours, vm_hwm_mb\n"
        "summary = ours(Path(sys.argv[1]), sys.argv[2])\n"
        "print(json.dumps({'ru_maxrss_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss"
        " / 1024, 'vm_hwm_mb': vm_hwm_mb(), 'worker_mb':"
        " resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,"
        " 'steps': summary['steps'],"
        " 'messages': summary['messages_total'], 'issues': summary['parse_issues']}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(path), variant, str(Path(__file__).parent)],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def vm_hwm_mb() -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", type=Path, default=DEFAULT_FILE)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    parser.add_argument("--one-core", action="store_true", help="also time ours read on one core")
    parser.add_argument("--two-cores", action="store_true", help="also time ours read on two cores")
    args = parser.parse_args(argv)
    path: Path = args.file
    if not path.exists():
        print(f"{path} is missing: run bench/gen_claude_code.py first", file=sys.stderr)
        return 2
    size_mb = path.stat().st_size / 1e6
    variants = ["stats"]
    variants += ["one-core"] if args.one_core else []
    variants += ["two-cores"] if args.two_cores else []
    load_before = os.getloadavg()

    # Warm up: page cache and imports, so the first timed run pays no one-off cost.
    reference(path)

    wall: dict[str, list[float]] = {"reference": []}
    cpu: dict[str, list[float]] = {"reference": []}
    for variant in variants:
        wall[variant] = []
        cpu[variant] = []
    summary: dict[str, Any] = {}
    for run in range(args.runs):
        order = ["reference", *variants]
        if run % 2:
            order.reverse()
        for name in order:
            if name == "reference":
                w, c = timed(lambda: reference(path))
            else:

                def one(variant: str = name) -> None:
                    summary[variant] = ours(path, variant)

                w, c = timed(one)
            wall[name].append(w)
            cpu[name].append(c)
            print(f"  run {run + 1} {name:>9}: {w:7.2f} s wall, {c:7.2f} s cpu", flush=True)
    if len(variants) > 1:
        assert all(summary[v] == summary["stats"] for v in variants), "the ways disagree"

    memory = {variant: peak_memory(path, variant) for variant in variants}
    ref_wall = statistics.median(wall["reference"])
    ref_cpu = statistics.median(cpu["reference"])
    lines = reference(path)
    print()
    print(f"file: {path} ({size_mb:,.0f} MB, {lines:,} lines)")
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}"
    )
    load_after = os.getloadavg()
    print(f"load average (1 min) before / after: {load_before[0]:.2f} / {load_after[0]:.2f}")
    print(f"reference (read + orjson.loads per line): {ref_wall:.2f} s wall, {ref_cpu:.2f} s cpu")
    figures: dict[str, Any] = {
        "file_mb": size_mb,
        "lines": lines,
        "reference_s": ref_wall,
        "load_average": [load_before[0], load_after[0]],
    }
    for variant in variants:
        w = statistics.median(wall[variant])
        c = statistics.median(cpu[variant])
        mem = memory[variant]
        peak = max(mem["ru_maxrss_mb"], mem.get("vm_hwm_mb") or 0.0)
        ratio = w / ref_wall
        label = {"stats": "ours (stats --no-exact)", "one-core": "ours, one core"}.get(
            variant, "ours, two cores"
        )
        worker = f", worker {mem['worker_mb']:.0f} MB" if mem.get("worker_mb") else ""
        print(
            f"{label}: {w:.2f} s wall ({ratio:.2f}x reference, target <= {TARGET_RATIO}x"
            f"{' met' if ratio <= TARGET_RATIO else ' missed'}), {c:.2f} s cpu here "
            f"({c / ref_cpu:.2f}x); peak RSS {peak:.0f} MB (target <= {TARGET_MB:.0f} MB"
            f"{' met' if peak <= TARGET_MB else ' missed'}){worker}"
        )
        figures[variant] = {
            "wall_s": w,
            "cpu_s": c,
            "ratio": ratio,
            "cpu_ratio": c / ref_cpu,
            "peak_mb": peak,
            "worker_peak_mb": mem.get("worker_mb"),
            "steps": mem["steps"],
            "messages": mem["messages"],
            "parse_issues": mem["issues"],
        }
    if args.json:
        print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
