"""Dashboard benchmark: in follow mode, the time from a line's append to its appearance on screen.

A headless dashboard follows a native log; this script appends one step (a request with its
tool output) at a time and measures how long until the timeline widget shows it. Target:
median <= 150 ms.

    .venv/bin/python bench/bench_ui.py [--steps 120]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from inspector.config import build_profile  # noqa: E402
from inspector.core.model import Event  # noqa: E402
from inspector.demo import DemoAgent  # noqa: E402
from inspector.formats.native import write_events  # noqa: E402
from inspector.ui.app import InspectorApp, OpenRequest  # noqa: E402
from inspector.ui.widgets.timeline_view import TimelineView  # noqa: E402


def steps(count: int) -> list[list[Event]]:
    """``count`` batches of one request each, from the simulated agent, cycled."""
    out: list[list[Event]] = []
    while len(out) < count:
        out.extend(DemoAgent(seed=len(out)).run())
    return out[:count]


async def measure(count: int) -> list[float]:
    batches = steps(count + 1)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "live.jsonl"
        with path.open("w") as fh:
            write_events([], fh)
            write_events(batches[0], fh, header=False)
        app = InspectorApp(OpenRequest(paths=(path,), format_name="native", follow=True,
                                       profile_for=lambda spec: build_profile("aiagent")))
        latencies: list[float] = []
        async with app.run_test(size=(140, 44)) as pilot:
            for _ in range(400):
                if app.state is not None:
                    break
                await asyncio.sleep(0.01)
            timeline = app.screen.query_one(TimelineView)
            await asyncio.sleep(0.3)
            for batch in batches[1:]:
                shown = len(timeline.points)
                with path.open("a") as fh:
                    write_events(batch, fh, header=False)
                started = time.perf_counter()
                while len(timeline.points) <= shown:
                    await asyncio.sleep(0.002)
                    if time.perf_counter() - started > 5:
                        raise RuntimeError("the dashboard did not show the appended step")
                latencies.append(time.perf_counter() - started)
                await pilot.pause(0.05)
        return latencies


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=120)
    args = parser.parse_args()
    latencies = asyncio.run(measure(args.steps))
    ms = sorted(x * 1000 for x in latencies)
    median = statistics.median(ms)
    p95 = ms[int(0.95 * (len(ms) - 1))]
    print(f"append -> on screen, {len(ms)} appends: median {median:.1f} ms, p95 {p95:.1f} ms, "
          f"max {ms[-1]:.1f} ms (target median <= 150 ms)")
    return 0 if median <= 150 else 1


if __name__ == "__main__":
    raise SystemExit(main())
