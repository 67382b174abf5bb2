"""What every registered format passes: one suite, parametrized over
``formats.registry.all_formats()``, so that a new format (a plug-in's too) is held to it without
a line of its own here.

Stream formats (a parser fed bytes) are read from their fixtures (``tests/formats.py``: the
files of ``tests/data`` the detector gives to the format; the *typical* one is read with events
and no issue) and from inputs made of them:

- typical: read with events and no issue;
- empty: nothing, and no issue, for no bytes or blank lines;
- truncated last line: accounted for, and what comes before it is read as before;
- malformed lines: each is visible (a ``ParseIssue`` in a reader of JSON lines), the rest is
  read as it is read without them;
- invalid UTF-8: one issue where it is, replaced, the rest read alike;
- a line (or a document) past the reader's limit: one issue, skipped in bounded memory;
- a long line under the limit, fed in pieces: read whole;
- chunked feeding: every split point of a small input, and random pieces of every fixture, give
  what feeding them whole gives;
- never raises, on odd inputs, and no reader failure caught by the safety net either;
- every byte accounted for: each non-blank line is in the span of an event or an issue, or it
  changes what is read (a part of a message assembled from several lines);
- ``feed_entries`` (no bodies) gives what ``feed`` gives; bodies read back by span are the
  messages read; ``reset`` starts again.

Formats read whole (SQLite databases, storage folders: ``FormatSpec.snapshot``) get the cases
that apply to them: typical (read, never written), empty and damaged inputs, missing tables.

The random search over mutated inputs is the fuzz suite's (``tests/hostile``); these cases are
fixed and fast.
"""

from __future__ import annotations

import os
import random
import re
import sqlite3
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from _pytest.mark.structures import ParameterSet

from ctx_inspect.core.model import Event, LogLine, MessageAdded, ParseIssue, SourceSpan
from ctx_inspect.errors import InputError
from ctx_inspect.formats.base import DocumentParser, LineParser, Parser
from ctx_inspect.formats.registry import FormatSpec, SnapshotSession, all_formats, get_format
from tests.conformance import case
from tests.formats import (
    Seed,
    comparable,
    dropped_lines,
    fixtures,
    is_document,
    read,
    snapshot_seeds,
    typical,
    typical_lines,
    uncovered_lines,
)

# a reader's own failure, caught by the safety net (``LineParser``, ``ChatParser``)
CRASHES = ("unreadable record (", "unreadable message (")

READ_WHOLE = "read whole (SQLite database, storage folder): no byte stream to feed"
DOCUMENTS_ONLY = "reads one JSON document: it has no lines to cut, add or spoil one by one"

# Known failures of readers being moved into their agents' packages now: (format, case) -> why.
KNOWN: dict[tuple[str, str], str] = {}


def streams(
    name: str, why_not: Callable[[type[Parser]], str | None] = lambda parser: None
) -> list[ParameterSet]:
    """Every registered format for the stream case ``name``; formats read whole say why it does
    not apply to them, and so do parsers ``why_not`` gives a reason for."""
    return [
        case(
            spec.name,
            skip=READ_WHOLE if spec.parser is None else why_not(spec.parser),
            known=KNOWN.get((spec.name, name)),
        )
        for spec in all_formats()
    ]


def lines_only(parser: type[Parser]) -> str | None:
    return DOCUMENTS_ONLY if issubclass(parser, DocumentParser) else None


def reads_lines(parser: type[Parser]) -> str | None:
    return None if issubclass(parser, LineParser) else "reads documents only: no line to skip"


def reads_documents(parser: type[Parser]) -> str | None:
    if hasattr(parser, "max_document_bytes"):
        return None
    return "reads lines only: no document to hold"


def snapshots(name: str) -> list[ParameterSet]:
    """Every registered format read whole (stream formats have their own cases)."""
    return [
        case(spec.name, known=KNOWN.get((spec.name, name)))
        for spec in all_formats()
        if spec.snapshot is not None
    ]


# -- helpers ------------------------------------------------------------------------------------


def issues(events: Sequence[Any]) -> list[ParseIssue]:
    return [e for e in events if isinstance(e, ParseIssue)]


def crashes(events: Sequence[Any]) -> list[str]:
    return [e.reason for e in issues(events) if e.reason.startswith(CRASHES)]


def the_typical(name: str) -> Seed:
    seed = typical(name)
    assert seed is not None, (
        f"{name}: no typical input; put one in tests/data/<folder>/ (a file the detector reads "
        "as this format, named typical*, read with events and no issue)"
    )
    return seed


def line_input(name: str) -> bytes:
    """The typical input of a format read line by line."""
    seed = typical_lines(name)
    assert seed is not None, f"{name}: no fixture of several lines read with no issue"
    return seed.read()


def line_starts(data: bytes) -> list[int]:
    return [0, *(m.end() for m in re.finditer(b"\n", data))]


def lines_of(data: bytes, span: SourceSpan) -> range:
    """The numbers of the lines of ``data`` that ``span`` reaches."""
    starts = line_starts(data)
    first = _line_at(starts, span.offset)
    last = _line_at(starts, span.offset + max(span.length - 1, 0))
    return range(first, last + 1)


def _line_at(starts: list[int], offset: int) -> int:
    import bisect

    return bisect.bisect_right(starts, offset)


def touching(data: bytes, events: Sequence[Any], numbers: set[int]) -> list[Any]:
    """The events whose span reaches one of the lines ``numbers``."""
    return [
        e
        for e in events
        if getattr(e, "span", None) is not None and numbers & set(lines_of(data, e.span))
    ]


def reached(data: bytes, events: Sequence[Any], numbers: set[int]) -> set[int]:
    """The lines ``numbers`` and every line of the records that reach one of them."""
    out = set(numbers)
    for event in touching(data, events, numbers):
        out.update(lines_of(data, event.span))
    return out


def apart(data: bytes, events: Sequence[Any], numbers: set[int]) -> list[Any]:
    """The events that reach none of the lines ``numbers``."""
    near = {id(e) for e in touching(data, events, numbers)}
    return [e for e in events if id(e) not in near]


def kinds(events: Sequence[Any]) -> list[str]:
    return [type(e).__name__ for e in events if not isinstance(e, ParseIssue)]


def record_boundary(data: bytes, events: Sequence[Any]) -> int:
    """A line start near the middle of ``data`` (not its first line) that no event's span
    crosses: where lines can be added between two records."""
    spans = [e.span for e in events if getattr(e, "span", None) is not None]
    starts = line_starts(data)[1:]
    free = [
        at
        for at in starts
        if at < len(data) and not any(s.offset < at < s.offset + s.length for s in spans)
    ]
    assert free, "no line start between two records"
    return min(free, key=lambda at: abs(at - len(data) // 2))


def text_byte(data: bytes, events: Sequence[Any]) -> tuple[int, int]:
    """(offset, length) of a word of a message's text (else a log line's) as it stands in the
    input, found once in its record (in the input, for an event without a span): a place to
    spoil or grow that changes nothing but that text."""
    for wanted in (MessageAdded, LogLine):
        for event in events:
            if not isinstance(event, wanted):
                continue
            text = event.message.text if isinstance(event, MessageAdded) else event.text
            span = event.span
            start, end = (
                (0, len(data)) if span is None else (span.offset, span.offset + span.length)
            )
            record = data[start:end]
            for word in re.findall(r"[A-Za-z]{4,}", text):
                raw = word.encode()
                if record.count(raw) == 1:
                    return start + record.index(raw), len(raw)
    raise AssertionError("no word of a message or log line found once in its record")


def accounted(spec: FormatSpec, data: bytes, events: Sequence[Any]) -> list[int]:
    """The lines no span covers and whose bytes change nothing (lost without a word)."""
    uncovered = uncovered_lines(data, events)
    if not uncovered:
        return []
    return dropped_lines(spec, data, events, picks=range(len(uncovered)))


def cuts_by(sizes: Iterator[int], length: int) -> list[int]:
    cuts, at = [], 0
    for size in sizes:
        at += size
        if at >= length:
            break
        cuts.append(at)
    return cuts


def random_sizes(seed: int, length: int) -> Iterator[int]:
    rng = random.Random(seed)
    top = max(64, length // 500)  # no more than ~1,000 pieces for a large fixture
    while True:
        yield rng.randint(1, top)


def small_input(name: str) -> bytes:
    """A few hundred bytes of the typical input, in whole lines (a document whole)."""
    seed = typical_lines(name)
    if seed is None:
        return the_typical(name).read()
    data = seed.read()
    kept = b""
    for line in data.splitlines(keepends=True):
        if len(kept) >= 600 and kept.count(b"\n") >= 2:
            break
        kept += line
    return kept


# -- stream formats -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", streams("typical"))
def test_typical_input_is_read_with_events_and_no_issue(name: str) -> None:
    events = read(get_format(name), the_typical(name).read())
    assert events
    assert issues(events) == []


@pytest.mark.parametrize("name", streams("empty"))
def test_empty_input_gives_nothing(name: str) -> None:
    spec = get_format(name)
    assert read(spec, b"") == []
    blank = read(spec, b"\n \n\t\r\n\n")
    assert issues(blank) == [] and not any(isinstance(e, MessageAdded) for e in blank)


@pytest.mark.parametrize("name", streams("truncated"))
def test_a_truncated_last_line_is_accounted_for_and_the_rest_read(name: str) -> None:
    spec = get_format(name)
    parser = spec.parser
    assert parser is not None
    if issubclass(parser, DocumentParser):
        data = the_typical(name).read()
        cut = data[: len(data) // 2]
        events = read(spec, cut)
        (issue,) = issues(events)
        assert issue.span is not None and (issue.span.offset, issue.span.length) == (0, len(cut))
        return
    data = line_input(name).rstrip(b"\n")
    last = data.rindex(b"\n") + 1
    cut = data[: last + (len(data) - last) // 2]
    whole, events = read(spec, data), read(spec, cut)
    assert crashes(events) == []
    assert read(spec, cut, range(5, len(cut), 11)) == events
    assert accounted(spec, cut, events) == [], "the cut line is lost without a word"
    # what the lines before the cut one make (the records with a span: one made of several
    # lines may hold a figure of the last), but for a record the cut line's bytes joined (a
    # block of text that runs on to the end)
    cut_line = len(line_starts(cut))
    region = reached(cut, events, {cut_line})

    def before(items: list[Any]) -> list[Any]:
        return [e for e in apart(cut, items, region) if getattr(e, "span", None) is not None]

    assert before(events) == before(whole)


GARBAGE = (
    b'{"cut": "in the midd',
    b"\x01\x02 not a record of any kind \x7f",
    b"[1, 2, 3]",
)


@pytest.mark.parametrize("name", streams("malformed", lines_only))
def test_malformed_lines_are_visible_and_the_rest_is_read(name: str) -> None:
    spec = get_format(name)
    data = line_input(name)
    at = record_boundary(data, read(spec, data))
    json_lines = all(is_document(line) for line in data.splitlines() if line.strip())
    bad = b"\n".join(GARBAGE) + b"\n"
    blank = b"\n".join(b" " * len(line) for line in GARBAGE) + b"\n"
    spoiled, control = data[:at] + bad + data[at:], data[:at] + blank + data[at:]
    first = _line_at(line_starts(spoiled), at)
    numbers = set(range(first, first + len(GARBAGE)))
    events = read(spec, spoiled)
    assert crashes(events) == []
    assert read(spec, spoiled, range(7, len(spoiled), 13)) == events
    # shown: an issue, or the line as a log line; in a text format, any record holding it
    shown = [e for e in events if isinstance(e, ParseIssue | LogLine)] if json_lines else events
    for number in sorted(numbers):
        seen = touching(spoiled, shown, {number})
        assert seen, f"line {number} ({GARBAGE[number - first]!r}) is not visible"
    # the other records read as they are without those lines (a line of text that joined a
    # record of a text format leaves that record out of the comparison)
    controlled = read(spec, control)
    region = reached(spoiled, events, numbers) | reached(control, controlled, numbers)
    assert apart(spoiled, events, region) == apart(control, controlled, region)


@pytest.mark.parametrize("name", streams("invalid_utf8"))
def test_invalid_utf8_is_one_issue_where_it_is_and_the_rest_is_read(name: str) -> None:
    spec = get_format(name)
    data = line_input(name) if typical_lines(name) else the_typical(name).read()
    whole = read(spec, data)
    offset, _ = text_byte(data, whole)
    spoiled = data[: offset + 1] + b"\xff" + data[offset + 2 :]
    events = read(spec, spoiled)
    (issue,) = issues(events)
    assert "UTF-8" in issue.reason
    if not is_document(data):
        assert issue.line == _line_at(line_starts(data), offset)
    assert kinds(events) == kinds(whole)
    texts = [e.message.text for e in events if isinstance(e, MessageAdded)]
    texts += [e.text for e in events if isinstance(e, LogLine)]
    assert any("\ufffd" in text for text in texts), "the spoiled text is not read"


LIMIT = 256 * 1024  # the limit the readers are given here (64 MiB for a line by default)
HUGE = 16 * LIMIT  # a line (a document) this long, fed in pieces of PIECE bytes
PIECE = 64 * 1024


def fed_past_the_limit(
    name: str, limit: str, head: bytes, piece: bytes, tail: bytes, monkeypatch: pytest.MonkeyPatch
) -> list[Event]:
    """What a parser of ``name``, its ``limit`` (a class setting) lowered to ``LIMIT``, makes of
    ``head``, then ``piece`` until ``HUGE`` bytes of it were fed, then ``tail``; holding no more
    than the limit (and a few pieces) meanwhile."""
    spec = get_format(name)
    assert spec.parser is not None and getattr(spec.parser, limit) <= 1024 * 1024 * 1024
    monkeypatch.setattr(spec.parser, limit, LIMIT)
    parser = spec.make_parser(0, "huge")
    events = parser.feed(head)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for _ in range(HUGE // len(piece)):
            events += parser.feed(piece)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert peak < LIMIT + 4 * PIECE, f"{peak} bytes held past the limit"
    return events + parser.feed(tail) + parser.finish()


@pytest.mark.parametrize("name", streams("huge_line", reads_lines))
def test_a_line_past_the_limit_is_one_issue_in_bounded_memory(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, rest = line_input(name).split(b"\n", 1)
    piece = b'{"x": "' + b"y" * (PIECE - 7)
    events = fed_past_the_limit(
        name, "max_line_bytes", first + b"\n", piece, b"\n" + rest, monkeypatch
    )
    too_long = [e for e in issues(events) if "line too long" in e.reason]
    assert [i.span.length for i in too_long if i.span] == [HUGE], issues(events)


@pytest.mark.parametrize("name", streams("huge_document", reads_documents))
def test_a_document_past_the_limit_is_one_issue_in_bounded_memory(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = b'[{"role": "user", "content": "'
    events = fed_past_the_limit(
        name, "max_document_bytes", head, b"y" * PIECE, b'"}]\n', monkeypatch
    )
    assert [e.reason for e in issues(events)] == [
        f"document too large ({HUGE + 34} bytes); not read"
    ]


LONG = 1024 * 1024  # a line grown by this much is still far under the limit


def inputs(name: str) -> list[bytes]:
    """The typical input of a format, and its typical input of lines when that is another."""
    found = [the_typical(name)]
    lines = typical_lines(name)
    if lines is not None and lines != found[0]:
        found.append(lines)
    return [seed.read() for seed in found]


def unplaced(event: Any) -> Any:
    """The event without where it is (its span, an issue's offset)."""
    if isinstance(event, ParseIssue):
        return event.model_copy(update={"span": None, "offset": 0})
    return event.model_copy(update={"span": None})


def others(data: bytes, events: list[Any], line: set[int]) -> list[Any]:
    """The records with a span that do not reach ``line``, without where they are."""
    return [unplaced(e) for e in apart(data, events, line) if e.span is not None]


@pytest.mark.parametrize("name", streams("long_line"))
def test_a_long_line_under_the_limit_is_read_whole_in_pieces(name: str) -> None:
    spec = get_format(name)
    for data in inputs(name):
        whole = read(spec, data)
        offset, length = text_byte(data, whole)
        grown = data[: offset + length] + b"x" * LONG + data[offset + length :]
        events = read(spec, grown, range(PIECE, len(grown), PIECE))
        assert [i.reason for i in issues(events)] == [i.reason for i in issues(whole)]
        assert kinds(events) == kinds(whole)
        before = [len(e.message.text) for e in whole if isinstance(e, MessageAdded)]
        after = [len(e.message.text) for e in events if isinstance(e, MessageAdded)]
        if before:
            assert sorted(a - b for a, b in zip(after, before, strict=True))[-1] == LONG
        # the other records read as they were (their figures, their texts); a record made of
        # several lines (no span) may hold the grown text
        if is_document(data):
            continue
        line = {_line_at(line_starts(data), offset)}
        assert others(grown, events, line) == others(data, whole, line)


@pytest.mark.parametrize("name", streams("every_split"))
def test_every_split_point_of_a_small_input_gives_the_whole_reading(name: str) -> None:
    spec = get_format(name)
    data = small_input(name)
    whole = read(spec, data)
    for cut in range(1, len(data)):
        assert read(spec, data, [cut]) == whole, f"split at byte {cut}"


def every_fixture(name: str) -> Iterator[tuple[FormatSpec, str, bytes, list[Any]]]:
    """(the format, the fixture's name, its bytes, what reading them gives) for every fixture
    of the format ``name``."""
    spec = get_format(name)
    for seed in fixtures(name):
        data = seed.read()
        yield spec, seed.label, data, read(spec, data)


@pytest.mark.parametrize("name", streams("random_chunks"))
def test_random_pieces_of_every_fixture_give_the_whole_reading(name: str) -> None:
    for spec, label, data, whole in every_fixture(name):
        for n in range(2):
            cuts = cuts_by(random_sizes(n, len(data)), len(data))
            assert read(spec, data, cuts) == whole, f"{label}, pieces {n}"


ODD_INPUTS = (
    b"\x00" * 64,
    b"\xff\xfe\xfd\n\x80\x81\n",
    b"\xef\xbb\xbf\n",
    b"\r\r\r\n\r",
    b"{" * 5000 + b"\n",
    b"[" * 100_000,
    b'{"a":' * 1100 + b"1" + b"}" * 1100 + b"\n",
    b'null\ntrue\n12\n"text"\n[]\n{}\n',
    b'{"type": null, "role": 7, "content": {"x": []}, "message": "m"}\n',
    "\x1b[31mred\x1b[0m \x1b]0;title\x07 \u202e\n".encode(),
)


@pytest.mark.parametrize("name", streams("never_raises"))
def test_odd_inputs_never_raise(name: str) -> None:
    spec = get_format(name)
    for data in ODD_INPUTS:
        events = read(spec, data)
        assert crashes(events) == [], data[:40]
        assert read(spec, data, [len(data) // 3]) == events


@pytest.mark.parametrize("name", streams("accounted"))
def test_every_line_of_every_fixture_is_accounted_for(name: str) -> None:
    for spec, label, data, events in every_fixture(name):
        assert crashes(events) == [], label
        assert accounted(spec, data, events) == [], f"{label}: lines lost without a word"


@pytest.mark.parametrize("name", streams("entries"))
def test_feeding_without_bodies_gives_what_feeding_with_them_gives(name: str) -> None:
    for spec, label, data, events in every_fixture(name):
        whole = comparable(events)
        assert comparable(read(spec, data, entries=True)) == whole, label
        cuts = cuts_by(random_sizes(7, len(data)), len(data))
        assert comparable(read(spec, data, cuts, entries=True)) == whole, label


@pytest.mark.parametrize("name", streams("read_back"))
def test_bodies_read_back_by_span_are_the_messages_read(name: str) -> None:
    spec = get_format(name)
    for seed in fixtures(name):
        data = seed.read()
        parser = spec.make_parser(0, seed.label)
        events = [*parser.feed(data), *parser.finish()]
        for event in events:
            if not isinstance(event, MessageAdded) or event.span is None:
                continue
            span = event.span
            again = parser.messages_at(data[span.offset : span.offset + span.length], span)
            same = [m for m in again if m.id == event.message.id]
            assert same == [event.message], f"{seed.label}: {event.message.id}"


@pytest.mark.parametrize("name", streams("reset"))
def test_reset_starts_again_from_the_first_byte(name: str) -> None:
    spec = get_format(name)
    data = the_typical(name).read()
    parser = spec.make_parser(0, "x")
    parser.feed(data[: len(data) // 2])
    parser.reset()
    assert [*parser.feed(data), *parser.finish()] == read(spec, data, entries=False)


# -- formats read whole -------------------------------------------------------------------------


def files_of(path: Path) -> dict[str, tuple[bytes, int]]:
    """Every file at ``path`` (a file, or a folder's files), with its bytes and mtime."""
    found = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return {str(p): (p.read_bytes(), p.stat().st_mtime_ns) for p in found}


def snapshot_of(name: str, path: Path) -> list[SnapshotSession] | InputError:
    """The sessions the format reads at ``path``, or the one-line error it refuses it with."""
    spec = get_format(name)
    assert spec.snapshot is not None
    try:
        return spec.snapshot(path)
    except InputError as exc:
        return exc


def made(name: str, folder: Path) -> Path:
    seeds = [s for s in snapshot_seeds().get(name, []) if not s.corpus]
    assert seeds, f"{name}: no input to read; give it one in tests/formats.py snapshot_seeds"
    return seeds[0].make(folder)


def visible(result: list[SnapshotSession] | InputError) -> bool:
    """A refusal in one line, or an issue in what was read."""
    if isinstance(result, InputError):
        return True
    return any(issues(session.events) for session in result)


def databases(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*") if p.is_file() and p.read_bytes()[:6] == b"SQLite")


@pytest.mark.parametrize("name", snapshots("typical"))
def test_a_typical_input_read_whole_has_events_no_issue_and_is_not_written(
    name: str, tmp_path: Path
) -> None:
    path = made(name, tmp_path)
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    before = files_of(path)
    sessions = snapshot_of(name, path)
    assert not isinstance(sessions, InputError), sessions
    assert sessions and all(session.events for session in sessions)
    assert [i for s in sessions for i in issues(s.events)] == []
    assert files_of(path) == before, "the input was written to"


@pytest.mark.parametrize("name", snapshots("empty"))
def test_an_empty_input_read_whole_is_refused_or_read_empty(name: str, tmp_path: Path) -> None:
    spec = get_format(name)
    path = tmp_path / "empty"
    if spec.folder:
        path.mkdir()
    else:
        path.write_bytes(b"")
    result = snapshot_of(name, path)
    if not isinstance(result, InputError):
        assert all(not s.events or visible([s]) for s in result), result


def stored(name: str, folder: Path) -> tuple[Path, list[Path]]:
    """The input of ``name`` made in ``folder``, and the files it stores its records in: its
    databases, else (a folder of JSON files) its files."""
    path = made(name, folder)
    found = databases(path)
    if not found:
        found = sorted(p for p in path.rglob("*") if p.is_file())
    return path, found


@pytest.mark.parametrize("name", snapshots("damaged"))
def test_a_damaged_input_is_refused_or_an_issue(name: str, tmp_path: Path) -> None:
    """Each file cut, or its bytes past a header replaced: refused, an issue, or (a file the
    reader does not read) the same reading."""
    path, targets = stored(name, tmp_path)
    intact = snapshot_of(name, path)
    for target in targets:
        data = target.read_bytes()
        for damaged in (data[: len(data) // 2], data[:16] + b"\x01" * 300):
            target.write_bytes(damaged)
            result = snapshot_of(name, path)
            assert visible(result) or result == intact, (target.name, damaged[:20])
        target.write_bytes(data)


@pytest.mark.parametrize("name", snapshots("missing_tables"))
def test_a_database_missing_its_tables_is_refused_or_an_issue(name: str, tmp_path: Path) -> None:
    path, targets = stored(name, tmp_path)
    if targets[0].suffix == ".json":
        pytest.skip("a folder of JSON files: no tables")
    for target in targets:
        target.unlink()
        con = sqlite3.connect(target)
        con.execute("CREATE TABLE notes (id INTEGER)")
        con.commit()
        con.close()
    assert visible(snapshot_of(name, path))


def test_every_registered_format_has_its_cases() -> None:
    """A format is a stream (a parser) or read whole (a snapshot), and has an input to read."""
    for spec in all_formats():
        assert spec.parser is not None or spec.snapshot is not None, spec.name
        if spec.parser is not None:
            the_typical(spec.name)
        if spec.snapshot is not None:
            assert [s for s in snapshot_seeds().get(spec.name, []) if not s.corpus], spec.name
