"""Dashboard benchmarks.

follow: a headless dashboard follows a native log; one step (a request with its tool output)
is appended at a time, and the time until the timeline shows it is measured. Target: median
<= 150 ms.

million: a session of 1,000,000 messages (generated, native format) is opened: time to the first
painted screen with data (target <= 1.5 s), time until it is fully read with exact counts,
key-to-frame time of paging through the messages view (target p95 <= 50 ms), and peak memory
(target <= 400 MB).

    .venv/bin/python bench/bench_ui.py follow [--steps 120]
    .venv/bin/python bench/bench_ui.py million [--messages 1000000]
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
        app = InspectorApp(
            OpenRequest(
                paths=(path,),
                format_name="native",
                follow=True,
                profile_for=lambda spec: build_profile("aiagent"),
            )
        )
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


def generate_million(path: Path, messages: int) -> Path:
    """A native log of ``messages`` messages: a request and its usage every 4 messages."""
    if path.exists():
        return path
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    words = ["read", "parse", "token", "window", "context", "file", "error", "value", "module",
             "limit"]
    with path.open("w") as fh:
        fh.write(json.dumps({"format": "ctx-inspect", "version": 1}) + "\n")
        prompt = 2_000
        for i in range(messages):
            role = ("user", "assistant", "tool", "assistant")[i % 4]
            if role == "assistant" and i % 4 == 1:
                fh.write(json.dumps({"type": "request"}) + "\n")
                fh.write(
                    json.dumps({"type": "usage", "usage": {"input": prompt, "output": 40}}) + "\n"
                )
            text = " ".join(words[(i + k) % len(words)] for k in range(8 + i % 40))
            kind = "tool_result" if role == "tool" else "message"
            part = "tool_result" if role == "tool" else "text"
            fh.write(
                json.dumps(
                    {
                        "type": "message",
                        "message": {
                            "id": f"m{i}",
                            "role": role,
                            "kind": kind,
                            "parts": [{"type": part, "text": text}],
                        },
                    }
                )
                + "\n"
            )
            prompt = prompt + len(text) // 4 if prompt < 150_000 else 2_000
    return path


async def measure_million(messages: int) -> dict[str, float]:
    import resource

    from inspector.ui.widgets.messages_view import MessagesView

    path = generate_million(ROOT / "bench" / "data" / f"ui-{messages}.jsonl", messages)
    started = time.perf_counter()
    app = InspectorApp(
        OpenRequest(paths=(path,), profile_for=lambda spec: build_profile("generic"))
    )
    figures: dict[str, float] = {}
    async with app.run_test(size=(140, 44)) as pilot:
        timeline = app.screen.query_one(TimelineView)
        while not timeline.points:
            await asyncio.sleep(0.005)
        figures["first_paint_s"] = time.perf_counter() - started
        while app.loading:
            await asyncio.sleep(0.05)
        figures["loaded_s"] = time.perf_counter() - started
        state = app.state
        assert state is not None
        figures["messages"] = state.session.message_count
        await pilot.press("2")
        await pilot.pause(0.5)
        view = app.screen.query_one(MessagesView)
        frames = []
        for _ in range(60):
            t0 = time.perf_counter()
            await pilot.press("pagedown")
            await pilot.pause()
            frames.append(time.perf_counter() - t0)
        frames.sort()
        figures["page_p95_ms"] = frames[int(0.95 * (len(frames) - 1))] * 1000
        figures["page_median_ms"] = statistics.median(frames) * 1000
        figures["cursor"] = view.cursor
    figures["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return figures


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("which", choices=("follow", "million"))
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--messages", type=int, default=1_000_000)
    args = parser.parse_args()
    if args.which == "million":
        f = asyncio.run(measure_million(args.messages))
        print(
            f"{f['messages']:,.0f} messages: first screen {f['first_paint_s']:.2f} s "
            f"(target <= 1.5 s), fully read {f['loaded_s']:.1f} s, page down median "
            f"{f['page_median_ms']:.1f} ms p95 {f['page_p95_ms']:.1f} ms (target <= 50 ms), "
            f"peak RSS {f['peak_rss_mb']:.0f} MB (target <= 400 MB)"
        )
        ok = f["first_paint_s"] <= 1.5 and f["page_p95_ms"] <= 50 and f["peak_rss_mb"] <= 400
        return 0 if ok else 1
    latencies = asyncio.run(measure(args.steps))
    ms = sorted(x * 1000 for x in latencies)
    median = statistics.median(ms)
    p95 = ms[int(0.95 * (len(ms) - 1))]
    print(
        f"append -> on screen, {len(ms)} appends: median {median:.1f} ms, p95 {p95:.1f} ms, "
        f"max {ms[-1]:.1f} ms (target median <= 150 ms)"
    )
    return 0 if median <= 150 else 1


if __name__ == "__main__":
    raise SystemExit(main())
