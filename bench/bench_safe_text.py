"""What making input text safe for a terminal costs (``ctx_inspect.safe_text``).

Each kind of line is made visible many times; the figure is the time per line and its ratio to
a reference run in the same process on the same lines: one ``re.sub`` over the C0 and C1
controls only (the least a sanitizer does). JSON: ``json_text`` against ``json.dumps`` of the
same record.

    .venv/bin/python bench/bench_safe_text.py [--rounds 20000]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ctx_inspect.safe_text import json_text, visible  # noqa: E402

LINES = {
    "code, ASCII": "    return read_config('/etc/app/conf.toml')"
    "  # the typical line of a tool output",
    "prose, accents and CJK": "Résumé des tâches — fait, merci. 日本語のテキストも少し。 " * 2,
    "prose with emoji (U+FE0F)": "Done ✅ but ⚠️ check the tests ❤️ thanks " * 2,
    "escape sequences": "\x1b[31mred\x1b[0m \x1b]0;title\x07 \x9b2J \u202eevil\u202c zero\u200bw",
    "tag characters": "hidden\U000e0068\U000e0069\U000e0064\U000e0065 text " * 2,
}
_MINIMAL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def reference(text: str) -> str:
    return _MINIMAL.sub(lambda m: f"<{ord(m.group()):02x}>", text)


def per_call(function: Callable[[], object], rounds: int) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(rounds):
            function()
        best = min(best, time.perf_counter() - start)
    return best / rounds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20_000)
    rounds = parser.parse_args().rounds
    print("| line | chars | reference µs | visible µs | x reference |")
    print("|---|---|---|---|---|")
    for name, line in LINES.items():
        ref = per_call(lambda line=line: reference(line), rounds)
        ours = per_call(lambda line=line: visible(line), rounds)
        print(f"| {name} | {len(line)} | {ref * 1e6:.2f} | {ours * 1e6:.2f} | {ours / ref:.2f} |")
    record = {"model": "gpt-4o", "text": " ".join(LINES.values()), "n": list(range(20))}
    ref = per_call(lambda: json.dumps(record, ensure_ascii=False), rounds)
    ours = per_call(lambda: json_text(record), rounds)
    name = "JSON record, json.dumps vs json_text"
    print(f"| {name} | - | {ref * 1e6:.2f} | {ours * 1e6:.2f} | {ours / ref:.2f} |")


if __name__ == "__main__":
    main()
