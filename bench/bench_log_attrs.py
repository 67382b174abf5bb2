"""What reading the attributes of one long Go agent log line costs (``goagent-log``).

A line with a quoted attribute of ``--mb`` megabytes (a tool's whole output logged as
``out="..."``) is read by ``log_attrs``; the reference, in the same process on the same line,
is the same pattern written with one alternation per character (``(?:[^"\\\\]|\\\\.)*``, what
the reader used before). Both must find the same attributes. The line is then fed to the
reader whole (``GoLogParser``), as the format suite's huge-line test does.

    .venv/bin/python bench/bench_log_attrs.py [--mb 20] [--runs 3]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ctx_inspect.agents.goagent.reader_log import GoLogParser, go_unquote, log_attrs  # noqa: E402

_REFERENCE = re.compile(r'(?<=\s)(?P<key>[^\s="]+)=(?P<value>"(?:[^"\\]|\\.)*"|\S*)')


def reference_attrs(text: str) -> dict[str, str]:
    attrs: dict[str, str] = {}
    for match in _REFERENCE.finditer(text):
        value = match["value"]
        if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
            value = go_unquote(value[1:-1])
        attrs[match["key"]] = value
    return attrs


def read_line(line: bytes) -> int:
    """The events of ``line`` read by the log reader, as the format suite feeds it."""
    parser = GoLogParser(0, "bench.log")
    return len(parser.feed(line)) + len(parser.finish())


def timed(run: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.process_time()
        run()
        times.append(time.process_time() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    value = "z" * (args.mb * 1024 * 1024 - 40) + '\\"quoted\\" \\\\ end'
    attrs = f' count=3 out="{value}" note=done'
    assert log_attrs(attrs) == reference_attrs(attrs)
    ours = timed(lambda: log_attrs(attrs), args.runs)
    reference = timed(lambda: reference_attrs(attrs), args.runs)
    line = f'[INFO] 2026-02-12T10:30:59 bash.go:9 "[ai] output"{attrs}\n'.encode()
    assert read_line(line) == 1
    whole = timed(lambda: read_line(line), args.runs)
    print(f"attributes of a {args.mb} MB line, CPU s (median of {args.runs}):")
    print(f"  log_attrs        {ours:7.3f}")
    print(f"  reference        {reference:7.3f}  ratio {ours / reference:.3f}")
    print(f"  the line read by GoLogParser {whole:7.3f}")


if __name__ == "__main__":
    main()
