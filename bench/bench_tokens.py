"""Benchmark: TokenCounter.count_batch against raw tiktoken on a transcript-like corpus.

Generates (seeded, deterministic) at least ``--mb`` MB of message texts: prose, code, JSON tool
outputs, logs, CJK text and emoji chat, from 50 bytes to 40 KB each (log-uniform sizes). Pins the
process to one CPU, then measures, three times each in alternating order:

- raw:    ``enc.encode_ordinary_batch(texts, num_threads=1)`` on the counter's own Encoding;
- raw loop: ``[len(enc.encode_ordinary(t)) for t in texts]`` (for reference: the engine alone,
  without the batch call's thread pool and without keeping every id list alive);
- first:  ``TokenCounter.count_batch(texts)`` on a fresh counter (every text a cache miss);
- second: the same call again on that counter (every text a cache hit).

and prints the medians. Targets: first/raw >= 0.90, first/second >= 50x.

    .venv/bin/python bench/bench_tokens.py [--mb 50] [--encoding o200k_base]
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import random
import statistics
import string
import sys
import time
from collections.abc import Callable
from typing import Any

from ctx_inspect.core import tokens
from ctx_inspect.core.tokens import ENCODINGS, TokenCounter

MIN_BYTES = 50
MAX_BYTES = 40_000

_WORDS = (
    "the of and to in is that it for was on are as with be by this at from or have an not they "
    "which one you had word but what all were we when your can said there use each she how their "
    "if will up other about out many then them these so some her would make like him into time "
    "has look two more write go see number no way could people my than first water been call who "
    "oil its now find long down day did get come made may part context window token message "
    "agent model prompt summary compaction tool output function error result request response "
    "file directory test build user assistant system session limit budget threshold guard prune "
    "however therefore because although meanwhile finally instead actually probably certainly "
    "I'm you're it's don't can't won't we've they'll she'd isn't wasn't Python Rust JSON HTTP"
)

_IDENTS = (
    "config session messages tokens window limit result items value index count total path "
    "reader parser event offset chunk buffer state step policy counter cache key data text line "
    "request response handler client server retry timeout payload summary budget"
)
WORDS = _WORDS.split()
IDENTS = _IDENTS.split()

EMOJI = "🎉🔥👍👀✅❌🚀💡🤔😅🙏📦🐛⚠️🧪📈🔧✨💥🎯👍🏽👨‍💻🇫🇷"

CJK_PUNCT = "，。、；：？！「」（）"
HIRAGANA = "".join(chr(c) for c in range(0x3041, 0x3097))
KATAKANA = "".join(chr(c) for c in range(0x30A1, 0x30FB))
HANGUL = "".join(chr(c) for c in range(0xAC00, 0xAC00 + 400))
HANZI = "".join(chr(c) for c in range(0x4E00, 0x4E00 + 3000))


def prose(rng: random.Random, size: int) -> str:
    parts: list[str] = []
    length = 0
    while length < size:
        words = rng.choices(WORDS, k=rng.randint(6, 24))
        words[0] = words[0].capitalize()
        sentence = " ".join(words) + rng.choice(".....?!:")
        if rng.random() < 0.15:
            sentence += f" ({rng.randint(1, 99999)} {rng.choice(IDENTS)}s, {rng.random():.2f}%)"
        if rng.random() < 0.12:
            sentence += "\n\n"
        parts.append(sentence)
        length += len(sentence) + 1
    return " ".join(parts)


def code(rng: random.Random, size: int) -> str:
    lines: list[str] = []
    length = 0
    while length < size:
        name = "_".join(rng.choices(IDENTS, k=rng.randint(1, 3)))
        args = ", ".join(f"{a}: int" for a in rng.sample(IDENTS, rng.randint(0, 3)))
        body = [f"def {name}({args}) -> dict[str, int]:", f'    """{prose(rng, 40)}"""']
        for _ in range(rng.randint(2, 12)):
            indent = "    " * rng.randint(1, 3)
            a, b = rng.sample(IDENTS, 2)
            body.append(
                rng.choice(
                    [
                        f"{indent}{a} = {b}.get({rng.randint(0, 999)!r}, {rng.random():.3f})",
                        f"{indent}if {a} >= {rng.randint(0, 4096)} and not {b}:",
                        f"{indent}for {a} in range(len({b})):  # {rng.choice(WORDS)}",
                        f'{indent}raise ValueError(f"bad {a}: {{{b}!r}}")',
                        f"{indent}return {{'{a}': {b}, 'n': {rng.randint(0, 10**6)}}}",
                        f"{indent}{a}.append({b}[{rng.randint(0, 9)}:{rng.randint(10, 99)}])",
                        "",
                    ]
                )
            )
        block = "\n".join(body) + "\n\n"
        lines.append(block)
        length += len(block)
    return "".join(lines)


def tool_json(rng: random.Random, size: int) -> str:
    entries: list[dict[str, object]] = []
    length = 0
    while length < size:
        entry: dict[str, object] = {
            "path": "/".join(["", "src", *rng.choices(IDENTS, k=rng.randint(1, 4))]) + ".py",
            "line": rng.randint(1, 5000),
            "size": rng.randint(0, 10**7),
            "sha": "".join(rng.choices("0123456789abcdef", k=12)),
            "match": prose(rng, rng.randint(20, 120)),
            "ok": rng.random() < 0.9,
            "score": round(rng.random(), 4),
            "tags": rng.sample(IDENTS, rng.randint(0, 4)),
        }
        entries.append(entry)
        length += 200 + len(str(entry["match"]))
    payload = {"tool": rng.choice(["grep", "read_file", "list_dir", "search"]), "results": entries}
    return json.dumps(payload, indent=rng.choice([None, 2]), ensure_ascii=rng.random() < 0.3)


def logs(rng: random.Random, size: int) -> str:
    lines: list[str] = []
    length = 0
    t = rng.randint(0, 86_000)
    while length < size:
        t += rng.randint(0, 5)
        level = rng.choice(["DEBUG", "INFO", "INFO", "INFO", "WARN", "ERROR"])
        hh, mm, ss = t // 3600 % 24, t // 60 % 60, t % 60
        ident = "".join(rng.choices(string.ascii_lowercase + string.digits, k=8))
        msg = rng.choice(
            [
                f"request {ident} done in {rng.random() * 900:.1f}ms"
                f" status={rng.choice([200, 404, 500])}",
                f"tokens current={rng.randint(0, 200_000)} pending={rng.randint(0, 9000)} "
                f"limit={rng.choice([128_000, 200_000])}",
                f"compacting session {ident}: {rng.randint(2, 300)} messages -> summary",
                f"retrying {rng.choice(IDENTS)} (attempt {rng.randint(1, 5)}/5) after {ident}",
                f'File "/app/{rng.choice(IDENTS)}.py", line {rng.randint(1, 900)}, in handler',
            ]
        )
        line = (
            f"2025-06-{rng.randint(1, 28):02d} {hh:02d}:{mm:02d}:{ss:02d},{rng.randint(0, 999):03d}"
        )
        line += f" {level:5s} [worker-{rng.randint(0, 7)}] {msg}\n"
        lines.append(line)
        length += len(line)
    return "".join(lines)


def cjk(rng: random.Random, size: int) -> str:
    # size is in bytes; CJK characters take 3 bytes in UTF-8.
    out: list[str] = []
    length = 0
    alphabets = [HANZI, HANZI, HIRAGANA + KATAKANA, HANGUL]
    while length < size:
        alphabet = rng.choice(alphabets)
        run = "".join(rng.choices(alphabet, k=rng.randint(4, 30)))
        run += rng.choice(CJK_PUNCT)
        if rng.random() < 0.2:
            run += f" {rng.choice(WORDS)} {rng.randint(0, 2025)} "
        out.append(run)
        length += 3 * len(run)
    return "".join(out)


def emoji_chat(rng: random.Random, size: int) -> str:
    out: list[str] = []
    length = 0
    while length < size:
        line = prose(rng, rng.randint(20, 200)).strip()
        line += " " + "".join(rng.choices(EMOJI, k=rng.randint(1, 4))) + "\n"
        out.append(line)
        length += len(line.encode())
    return "".join(out)


KINDS: list[tuple[Callable[[random.Random, int], str], float]] = [
    (prose, 0.30),
    (code, 0.25),
    (tool_json, 0.20),
    (logs, 0.15),
    (cjk, 0.05),
    (emoji_chat, 0.05),
]


def make_corpus(megabytes: float, seed: int) -> tuple[list[str], int]:
    """Texts whose UTF-8 sizes add up to at least ``megabytes`` MB (10**6 bytes)."""
    rng = random.Random(seed)
    makers = [maker for maker, _ in KINDS]
    weights = [weight for _, weight in KINDS]
    texts: list[str] = []
    seen: set[str] = set()
    total = 0
    goal = int(megabytes * 1_000_000)
    low, high = math.log(MIN_BYTES), math.log(MAX_BYTES)
    while total < goal:
        size = int(math.exp(rng.uniform(low, high)))
        text = rng.choices(makers, weights)[0](rng, size)
        text = text.encode()[:size].decode(errors="ignore")  # cut at ~size bytes, whole chars
        if text in seen:  # every text distinct, so the first count is all cache misses
            continue
        seen.add(text)
        texts.append(text)
        total += len(text.encode())
    return texts, total


def timed(fn: Callable[[], list[Any]], total: Callable[[list[Any]], int]) -> tuple[float, int]:
    """Seconds taken by ``fn()``, and the token total of its result (computed untimed)."""
    gc.collect()
    start = time.perf_counter()
    result = fn()
    elapsed = time.perf_counter() - start
    tokens_total = total(result)
    del result
    return elapsed, tokens_total


def sum_lengths(ids: list[list[int]]) -> int:
    return sum(map(len, ids))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--mb", type=float, default=50.0, help="corpus size in MB (default 50)")
    parser.add_argument("--encoding", choices=ENCODINGS, default="o200k_base")
    parser.add_argument("--seed", type=int, default=20250601)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)

    cpu = sorted(os.sched_getaffinity(0))[0]
    os.sched_setaffinity(0, {cpu})

    start = time.perf_counter()
    texts, nbytes = make_corpus(args.mb, args.seed)
    mb = nbytes / 1e6
    generated = time.perf_counter() - start
    unique = len(set(texts))
    print(f"corpus: {len(texts)} texts ({unique} unique), {mb:.1f} MB, seed {args.seed}, ", end="")
    print(f"generated in {generated:.1f}s")

    start = time.perf_counter()
    loaded = tokens._load(args.encoding)
    print(f"tokenizer: {loaded.info.label}, loaded in {time.perf_counter() - start:.2f}s")
    enc = loaded.encoding
    if enc is None:
        print("no exact tokenizer: nothing to benchmark", file=sys.stderr)
        return 1
    print(f"pinned to cpu {cpu}; python {platform.python_version()}, {platform.machine()}")
    enc.encode_ordinary_batch(texts[:50], num_threads=1)  # warm up

    raw: list[float] = []
    loop: list[float] = []
    first: list[float] = []
    second: list[float] = []
    totals: set[int] = set()  # token totals: every measurement must agree

    def run_raw() -> None:
        seconds, n = timed(lambda: enc.encode_ordinary_batch(texts, num_threads=1), sum_lengths)
        raw.append(seconds)
        totals.add(n)

    def run_loop() -> None:
        encode = enc.encode_ordinary
        seconds, n = timed(lambda: [len(encode(text)) for text in texts], sum)
        loop.append(seconds)
        totals.add(n)

    def run_ours() -> None:
        counter = TokenCounter(args.encoding)
        seconds, n = timed(lambda: counter.count_batch(texts), sum)
        first.append(seconds)
        totals.add(n)
        assert counter.cache_misses == len(texts), "first count was not all cache misses"
        seconds, n = timed(lambda: counter.count_batch(texts), sum)
        second.append(seconds)
        totals.add(n)
        assert counter.cache_hits == len(texts), "second count was not all cache hits"

    for round_ in range(args.rounds):
        order = [run_raw, run_loop, run_ours]
        if round_ % 2:
            order.reverse()
        for step in order:
            step()
        print(
            f"  round {round_ + 1}: raw {mb / raw[-1]:6.2f} MB/s"
            f"  raw loop {mb / loop[-1]:6.2f} MB/s  first {mb / first[-1]:6.2f} MB/s"
            f"  second {mb / second[-1]:7.1f} MB/s"
        )
    if len(totals) != 1:
        print(f"token totals disagree: {sorted(totals)}", file=sys.stderr)
        return 1

    raw_s, loop_s, first_s, second_s = map(statistics.median, (raw, loop, first, second))
    ratio = raw_s / first_s
    speedup = first_s / second_s
    print()
    print(f"MB (10**6 bytes of UTF-8)       {mb:.1f}   ({totals.pop()} tokens)")
    print(f"raw tiktoken batch MB/s         {mb / raw_s:.2f}   ({raw_s:.2f} s)")
    print(f"raw encode_ordinary loop MB/s   {mb / loop_s:.2f}   ({loop_s:.2f} s)")
    print(f"ours, first count MB/s          {mb / first_s:.2f}   ({first_s:.2f} s)")
    print(f"ours, second count MB/s         {mb / second_s:.1f}   ({second_s:.3f} s)")
    print(f"ratio ours/raw batch            {ratio:.3f}   (target >= 0.90)")
    print(f"ratio ours/raw loop             {loop_s / first_s:.3f}")
    print(f"second-count speedup            {speedup:.1f}x   (target >= 50x)")
    return 0 if ratio >= 0.90 and speedup >= 50 else 1


if __name__ == "__main__":
    raise SystemExit(main())
