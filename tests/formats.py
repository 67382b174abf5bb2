"""The inputs of every format, and what reading them gives, for the suites that run over every
registered format (``tests/conformance``, ``tests/hostile/test_fuzz_formats.py``).

Where a format's inputs come from. A stream format's fixtures live in ``tests/data/<folder>/``
(the folder of the agent or of the generic format); each file there is assigned to the format
the detector gives it, as a user's file would be, so a new format's fixtures are found without
being listed anywhere. Its *typical* input is the fixture whose name starts with ``typical``,
else the first in name order, among those read with events and no issue. A plug-in's fixtures
can live elsewhere: ``CTX_TEST_DATA`` names more folders (separated as ``PATH`` is). The real
samples of the shared corpus are read in place (never copied), for the tests that want them.
Formats read whole (SQLite databases, storage folders) are made from fixtures by
``snapshot_seeds``.
"""

from __future__ import annotations

import bisect
import functools
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ctx_inspect.core.model import MessageAdded, ParseIssue, SourceSpan
from ctx_inspect.core.packed import entry_event
from ctx_inspect.core.session import MessageEntry
from ctx_inspect.errors import InputError
from ctx_inspect.formats.native import FORMAT_TAG
from ctx_inspect.formats.registry import FormatSpec, all_formats, detect

DATA = Path(__file__).parent / "data"
CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"


def fixture_roots() -> list[Path]:
    """Where fixtures are looked for: ``tests/data``, then the folders ``CTX_TEST_DATA``
    names."""
    extra = os.environ.get("CTX_TEST_DATA", "")
    return [DATA, *(Path(p) for p in extra.split(os.pathsep) if p)]


# -- stream inputs ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Seed:
    label: str  # the path, relative to its root (tests/data, the corpus)
    path: Path
    corpus: bool

    def read(self) -> bytes:
        return self.path.read_bytes()


def stream_formats() -> list[FormatSpec]:
    return [spec for spec in all_formats() if spec.parser is not None]


def seeds() -> dict[str, list[Seed]]:
    """Each stream format's inputs: the files among the fixtures, then among the corpus, that
    the detector reads as that format (a non-empty file each), in name order."""
    fixtures, corpus = _found(tuple(fixture_roots()), False), _found((CORPUS,), True)
    return {name: fixtures[name] + corpus[name] for name in fixtures}


@functools.cache
def _found(roots: tuple[Path, ...], corpus: bool) -> dict[str, list[Seed]]:
    found: dict[str, list[Seed]] = {spec.name: [] for spec in stream_formats()}
    for root in roots:
        if not root.is_dir():
            continue
        for path in sorted(root.rglob("*")):
            if not path.is_file() or path.suffix == ".sql" or path.stat().st_size == 0:
                continue
            if path.suffix == ".md" and not path.name.endswith(".history.md"):
                continue
            try:
                spec = detect(path)
            except InputError:
                continue
            if spec.name in found:
                found[spec.name].append(Seed(str(path.relative_to(root)), path, corpus))
    return found


def fixtures(name: str) -> list[Seed]:
    """The fixtures of the stream format ``name`` (no corpus file)."""
    return _found(tuple(fixture_roots()), False)[name]


def is_document(data: bytes) -> bool:
    """Whether ``data`` is one JSON document (not lines of records)."""
    return loads_json(data) is not None


@functools.cache
def typical(name: str) -> Seed | None:
    """The typical input of the stream format ``name``: its fixture named ``typical*``, else
    the first in name order, among those read with events and no issue; None when none is."""
    spec = next(spec for spec in stream_formats() if spec.name == name)
    clean = []
    for seed in fixtures(name):
        events = read(spec, seed.read())
        if events and not any(isinstance(e, ParseIssue) for e in events):
            clean.append(seed)
    named = [seed for seed in clean if seed.path.name.startswith("typical")]
    found = named or clean
    return found[0] if found else None


@functools.cache
def typical_lines(name: str) -> Seed | None:
    """The typical input of a format read line by line: the typical input when it is lines,
    else the clean fixture of the most lines (up to 64 KB) that is not one JSON document (the
    chat readers read both); None for a reader of documents only."""
    spec = next(spec for spec in stream_formats() if spec.name == name)
    first = typical(name)
    if first is not None and _lines_of_records(first.read()):
        return first
    best: tuple[int, Seed] | None = None
    for seed in fixtures(name):
        data = seed.read()
        count = _lines_of_records(data)
        if not count or len(data) > 64 * 1024 or (best and best[0] >= count):
            continue
        events = read(spec, data)
        if events and not any(isinstance(e, ParseIssue) for e in events):
            best = (count, seed)
    return best[1] if best else None


def _lines_of_records(data: bytes) -> int:
    """How many non-blank lines ``data`` has when it is lines (0 for one JSON document or a
    single line)."""
    count = sum(1 for line in data.split(b"\n") if line.strip())
    return 0 if count < 2 or is_document(data) else count


# -- what every parser promises -----------------------------------------------------------------


INPUT_NAME = "fuzzed-input"


def read(
    spec: FormatSpec, data: bytes, cuts: Sequence[int] = (), *, entries: bool = False
) -> list[Any]:
    """What a new parser of ``spec`` makes of ``data`` fed in pieces cut at ``cuts``, then
    finished (with ``feed_entries``, as for a session that keeps no bodies, if ``entries``)."""
    parser = spec.make_parser(0, INPUT_NAME)
    feed = parser.feed_entries if entries else parser.feed
    out: list[Any] = []
    at = 0
    for cut in sorted({*cuts, len(data)}):
        if cut > at:
            out += feed(data[at:cut])
            at = cut
    out += parser.finish()
    return out


def uncovered_lines(data: bytes, events: Sequence[Any]) -> list[int]:
    """The numbers of the input's non-blank lines that no event's span (nor a
    ``MessageEntry``'s) reaches: bytes that would be lost without a word."""
    starts = [0, *(i + 1 for i in _newlines(data))]
    covered = bytearray(len(starts) + 1)
    for event in events:
        span = _span(event)
        if span is None:
            continue
        offset, length = span
        first = bisect.bisect_right(starts, offset)
        last = bisect.bisect_right(starts, offset + max(length - 1, 0))
        covered[first : last + 1] = b"\x01" * (last + 1 - first)
    lines = data.split(b"\n")
    return [n for n, raw in enumerate(lines, 1) if raw.strip() and not covered[n]]


def _newlines(data: bytes) -> Iterator[int]:
    at = data.find(b"\n")
    while at >= 0:
        yield at
        at = data.find(b"\n", at + 1)


def _span(item: Any) -> tuple[int, int] | None:
    if isinstance(item, MessageEntry):
        return item.offset, item.length
    span = item.span
    return None if span is None else (span.offset, span.length)


def comparable(items: Sequence[Any]) -> list[Any]:
    """Events with messages reduced to what a ``MessageEntry`` holds, and the other entries
    (``RequestEntry``, ``UsageEntry``, ``LogEntry``) made the events they stand for, so that
    what ``feed`` gives and what ``feed_entries`` gives can be compared."""
    out: list[Any] = []
    for item in map(entry_event, items):
        if isinstance(item, MessageEntry):
            out.append(
                (
                    "message",
                    item.id,
                    item.role,
                    item.kind,
                    item.thread,
                    item.offset,
                    item.length,
                    item.line,
                )
            )
        elif isinstance(item, MessageAdded):
            span = item.span or SourceSpan()
            m = item.message
            out.append(
                ("message", m.id, m.role, m.kind, m.thread, span.offset, span.length, span.line)
            )
        else:
            out.append(item)
    return out


def dropped_lines(
    spec: FormatSpec, data: bytes, events: Sequence[Any], picks: Sequence[int] = (0, -1)
) -> list[int]:
    """Lines no event points at whose content changes nothing: blanked (spaces in place of
    its bytes, so no offset moves), the input gives the same events. Such a line was dropped
    without a word. Only the uncovered lines at the positions ``picks`` are tried (each try
    reads the input again). A line no span covers but that changes what is read (a part of a
    message held until its request ends) is accounted for; so are the lines of an input that
    is one JSON document (they are not records: a key a reader does not use is no loss), and
    the header of an export of ours (a marker holding no data)."""
    uncovered = uncovered_lines(data, events)
    if not uncovered or loads_json(data) is not None:
        return []
    lines = data.split(b"\n")
    if spec.name == "native" and _is_native_header(lines, uncovered[0]):
        uncovered = uncovered[1:]
        if not uncovered:
            return []
    dropped = []
    for n in sorted({uncovered[p % len(uncovered)] for p in picks}):
        blank = b"\n".join([*lines[: n - 1], b" " * len(lines[n - 1]), *lines[n:]])
        if read(spec, blank) == list(events):
            dropped.append(n)
    return dropped


def _is_native_header(lines: list[bytes], n: int) -> bool:
    """Whether line ``n`` is a native export's header, and the first line that is a JSON
    value (what the reader takes for the header)."""
    if any(loads_json(line) is not None for line in lines[: n - 1]):
        return False
    value = loads_json(lines[n - 1].removeprefix(b"\xef\xbb\xbf"))
    return isinstance(value, dict) and value.get("format") == FORMAT_TAG and "type" not in value


def loads_json(line: bytes) -> Any:
    """What a JSON Lines reader makes of a line (None: not JSON, or null)."""
    for text in (line, line.decode("utf-8", "replace")):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            continue
    return None


# -- inputs read whole: databases and folders ---------------------------------------------------


@dataclass(frozen=True)
class SnapshotSeed:
    """An input of a format read whole, made afresh (it is mutated in place) under a folder."""

    label: str
    make: Callable[[Path], Path]
    corpus: bool = False


def _copy(source: Path, name: str) -> Callable[[Path], Path]:
    def make(folder: Path) -> Path:
        target = folder / name
        if source.is_dir():
            shutil.copytree(source, target)
        else:
            shutil.copyfile(source, target)
        return target

    return make


def _opencode_db(storage: Path) -> Callable[[Path], Path]:
    def make(folder: Path) -> Path:
        from tests.unit.test_format_opencode import build_db

        return build_db(folder / "opencode.db", storage=storage)

    return make


def _fifth_db(reference: bool) -> Callable[[Path], Path]:
    def make(folder: Path) -> Path:
        from tests.unit.test_format_fifth import make_db, reference_db

        path = folder / "context.db"
        return reference_db(path) if reference else make_db(path)

    return make


def _opencode_data(storage: Path, log: Path) -> Callable[[Path], Path]:
    def make(folder: Path) -> Path:
        data = folder / "opencode"
        (data / "log").mkdir(parents=True)
        _opencode_db(storage)(data)
        shutil.copyfile(log, data / "log" / log.name)
        return data

    return make


def snapshot_seeds() -> dict[str, list[SnapshotSeed]]:
    """The inputs of the formats read whole (SQLite databases, storage and session folders),
    from our fixtures and, when it is here, the corpus."""
    opencode = DATA / "opencode"
    v118 = opencode / "v118"
    real = CORPUS / "realruns" / "opencode" / "prune-autocompact-serve" / "xdg-data" / "opencode"
    found = {
        "opencode-db": [
            SnapshotSeed("opencode/storage as a database", _opencode_db(opencode / "storage")),
            SnapshotSeed("opencode/v118/storage as a database", _opencode_db(v118 / "storage")),
        ],
        "opencode-storage": [
            SnapshotSeed("opencode/storage", _copy(opencode / "storage", "storage")),
            SnapshotSeed("opencode/v118/storage", _copy(v118 / "storage", "storage")),
        ],
        "opencode-data": [
            SnapshotSeed(
                "opencode/storage and opencode.log",
                _opencode_data(opencode / "storage", opencode / "opencode.log"),
            ),
            SnapshotSeed(
                "opencode/v118 storage and log",
                _opencode_data(v118 / "storage", v118 / "opencode.log"),
            ),
        ],
        "fifth-db": [
            SnapshotSeed("fifth/context.sql", _fifth_db(reference=False)),
            SnapshotSeed("the reference's worked example", _fifth_db(reference=True)),
        ],
        "openhands": [
            SnapshotSeed("openhands/session", _copy(DATA / "openhands" / "session", "s"))
        ],
    }
    if real.is_dir():
        found["opencode-db"].append(
            SnapshotSeed("a real opencode.db", _copy(real / "opencode.db", "opencode.db"), True)
        )
        found["opencode-data"].append(
            SnapshotSeed("a real OpenCode data folder", _copy(real, "opencode"), True)
        )
    return found
