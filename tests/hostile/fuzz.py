"""Mutations of real inputs for the fuzz tests, and the seeds they start from.

A mutation takes an input's bytes and a ``Choices`` (where its random decisions come from:
hypothesis draws in the tests, ``random.Random`` in an exploratory run) and returns other bytes:
bits flipped, a cut, invalid UTF-8, NUL bytes, a huge line, deep nesting, JSON values of the
wrong type in known fields, records duplicated or reordered. Seeds are the inputs of each
format (``tests/formats.py``: our fixtures and the real samples of the shared corpus, each
assigned to the format the detector gives it); corpus files are read, never copied.
"""

from __future__ import annotations

import json
import random
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

import orjson

from tests.formats import Seed, loads_json

T = TypeVar("T")

# What a seed from the corpus is cut to: a window of whole lines (a real file is up to a few MB;
# a window of it keeps each example fast and still holds the real records)
WINDOW_BYTES = 96 * 1024
HUGE_LINE_BYTES = (1 << 20, 3 << 20)  # a huge line is 1 to 3 MB
# depths of nesting: past every parser's limit (orjson reads 1,024 levels), about Python's
# recursion limit, and about orjson's limit for writing (255)
DEPTHS = (100_000, 1_100, 1_023, 1_000, 990, 900, 600, 300, 256)


class Choices(Protocol):
    """Where a mutation's decisions come from."""

    def integer(self, low: int, high: int) -> int:
        """A number in ``[low, high]``."""
        ...

    def choice(self, options: Sequence[T]) -> T: ...


class RandomChoices:
    """Decisions from ``random.Random`` (an exploratory run outside pytest)."""

    def __init__(self, rnd: random.Random) -> None:
        self.rnd = rnd

    def integer(self, low: int, high: int) -> int:
        return self.rnd.randint(low, high)

    def choice(self, options: Sequence[T]) -> T:
        return options[self.rnd.randrange(len(options))]


# -- mutations ----------------------------------------------------------------------------------


def bit_flips(data: bytes, c: Choices) -> bytes:
    if not data:
        return data
    out = bytearray(data)
    for _ in range(c.integer(1, 8)):
        at = c.integer(0, len(out) - 1)
        out[at] ^= 1 << c.integer(0, 7)
    return bytes(out)


def truncation(data: bytes, c: Choices) -> bytes:
    """Cut at a random point; sometimes from a random point on (a file read from its middle)."""
    if not data:
        return data
    end = c.integer(0, len(data))
    start = c.integer(0, end) if c.integer(0, 3) == 0 else 0
    return data[start:end]


INVALID_UTF8 = (
    b"\xff",
    b"\xfe\xff",
    b"\x80",  # a lone continuation byte
    b"\xc3\x28",  # a lead byte without its continuation
    b"\xc0\xaf",  # overlong
    b"\xed\xa0\x80",  # a surrogate
    b"\xf4\x90\x80\x80",  # past U+10FFFF
    b"\xe2\x82",  # cut short
)


def invalid_utf8(data: bytes, c: Choices) -> bytes:
    """Invalid sequences at random points, often inside a JSON string."""
    out = data
    for _ in range(c.integer(1, 4)):
        at = _point(out, c, inside_string=c.integer(0, 1) == 1)
        out = out[:at] + c.choice(INVALID_UTF8) + out[at:]
    return out


def nul_bytes(data: bytes, c: Choices) -> bytes:
    out = data
    for _ in range(c.integer(1, 3)):
        at = _point(out, c, inside_string=c.integer(0, 1) == 1)
        size = c.integer(1, 64)
        if c.integer(0, 1) and at + size <= len(out):
            out = out[:at] + b"\x00" * size + out[at + size :]  # overwritten
        else:
            out = out[:at] + b"\x00" * size + out[at:]
    return out


def huge_line(data: bytes, c: Choices) -> bytes:
    """A line of megabytes: garbage, a record of the file with one string grown to that size,
    or the whole rest of the file without a newline."""
    size = c.integer(*HUGE_LINE_BYTES)
    kind = c.integer(0, 3)
    lines = data.split(b"\n")
    at = c.integer(0, len(lines))
    if kind == 0:
        line = (b"x" * 1021 + b"\\\"'{[") * (size // 1026)
    elif kind == 1:
        line = _grown_record(lines, c, size)
    elif kind == 2:
        return data.replace(b"\n", b" ") + b" " * size  # one line, and no newline at its end
    else:
        line = b'{"text": "' + b"a" * size  # a string never closed
    return b"\n".join([*lines[:at], line, *lines[at:]])


def _grown_record(lines: list[bytes], c: Choices, size: int) -> bytes:
    records = [(i, v) for i, v in _json_lines(lines) if isinstance(v, dict)]
    if not records:
        return b'{"content": "' + b"y" * size + b'"}'
    _, value = c.choice(records)
    paths = [p for p, leaf in _leaves(value) if isinstance(leaf, str)]
    if not paths:
        return b'{"content": "' + b"y" * size + b'"}'
    grown = "word " * (size // 5)
    return _dumps(_replaced(value, c.choice(paths), grown))


def deep(depth: int, c: Choices) -> bytes:
    """JSON nested ``depth`` levels: arrays, objects, or both, closed or left open."""
    kind = c.integer(0, 2)
    if kind == 0:
        text = b"[" * depth + b"1" + b"]" * depth
    elif kind == 1:
        text = b'{"a":' * depth + b"1" + b"}" * depth
    else:
        text = b'[{"a":' * (depth // 2) + b"1" + b"}]" * (depth // 2)
    if c.integer(0, 4) == 0:
        text = text[: len(text) // 2 + 1]  # never closed
    return text


_SENTINEL = "\x00deep-value\x00"


def deep_nesting(data: bytes, c: Choices) -> bytes:
    """A value nested very deeply: a line of its own, a known field's value (of a record or of
    the document), or a known string field holding it as JSON text (tool arguments are such
    strings)."""
    nested = deep(c.choice(DEPTHS), c)
    where = c.integer(0, 2)
    document = loads_json(data) if where else None
    if isinstance(document, dict | list):
        return _holding(document, c, nested, as_text=where == 2)
    lines = data.split(b"\n")
    records = _json_lines(lines)
    if where == 0 or not records:
        at = c.integer(0, len(lines))
        return b"\n".join([*lines[:at], nested, *lines[at:]])
    index, value = c.choice(records)
    return _with_line(lines, index, _holding(value, c, nested, as_text=where == 2))


def _holding(value: Any, c: Choices, nested: bytes, *, as_text: bool) -> bytes:
    """``value`` as JSON text with one of its nodes replaced by the JSON text ``nested`` (or
    by a string holding it)."""
    path = c.choice(_paths(value))
    if as_text:
        return _dumps(_replaced(value, path, nested.decode()))
    return _dumps(_replaced(value, path, _SENTINEL)).replace(_dumps(_SENTINEL), nested)


WRONG_VALUES: tuple[Any, ...] = (
    "a string",
    "",
    "12345",
    0,
    -1,
    12345,
    1.5,
    -0.0,
    1e308,
    10**30,
    True,
    False,
    None,
    {},
    [],
    {"unexpected": [1, {"x": None}]},
    [None, "x", 1],
    "\x1b]0;title\x07\u202e",
)


def wrong_types(data: bytes, c: Choices) -> bytes:
    """Known fields (those the record has) given values of other types; a whole document when
    the input is one JSON document, else one record of JSON Lines."""
    changed = _changed_records(data, c, lambda value: _wrongly_typed(value, c), c.integer(1, 3))
    return bit_flips(data, c) if changed is None else changed


def _changed_records(
    data: bytes, c: Choices, change: Callable[[Any], Any], times: int
) -> bytes | None:
    """``change`` applied to the input when it is one JSON document, else to ``times`` of its
    JSON lines; None when it holds no JSON."""
    document = loads_json(data)
    if document is not None:
        return _dumps(change(document))
    lines = data.split(b"\n")
    if not _json_lines(lines):
        return None
    for _ in range(times):
        records = _json_lines(lines)
        if not records:
            break
        index, value = c.choice(records)
        lines = _with_lines(lines, index, _dumps(change(value)))
    return b"\n".join(lines)


def _wrongly_typed(value: Any, c: Choices) -> Any:
    nodes = [p for p in _paths(value) if p]
    if not nodes:
        return c.choice(WRONG_VALUES)
    for _ in range(c.integer(1, 4)):
        path = c.choice(nodes)
        value = _replaced(value, path, c.choice(WRONG_VALUES))
        nodes = [p for p in _paths(value) if p]
        if not nodes:
            break
    return value


def null_everywhere(data: bytes, c: Choices) -> bytes:
    """Every value of a record (or of the document) null; or every leaf only."""
    leaves_only = c.integer(0, 1) == 1
    changed = _changed_records(data, c, lambda value: _nulled(value, leaves_only), 1)
    return truncation(data, c) if changed is None else changed


def _nulled(value: Any, leaves_only: bool) -> Any:
    if isinstance(value, dict):
        if leaves_only:
            return {k: _nulled(v, True) for k, v in value.items()}
        return dict.fromkeys(value)
    if isinstance(value, list):
        return [_nulled(v, leaves_only) for v in value] if leaves_only else [None] * len(value)
    return None


def duplicated_or_reordered(data: bytes, c: Choices) -> bytes:
    lines = data.split(b"\n")
    if len(lines) < 2:
        return data + data
    i = c.integer(0, len(lines) - 1)
    j = c.integer(0, len(lines) - 1)
    kind = c.integer(0, 3)
    if kind == 0:  # a line twice
        return b"\n".join([*lines[: j + 1], lines[i], *lines[j + 1 :]])
    if kind == 1:  # two lines swapped
        lines[i], lines[j] = lines[j], lines[i]
        return b"\n".join(lines)
    if kind == 2:  # a run of lines again, further on
        lo, hi = sorted((i, j))
        return b"\n".join([*lines[: hi + 1], *lines[lo : hi + 1], *lines[hi + 1 :]])
    lo, hi = sorted((i, j))  # a run reversed
    return b"\n".join([*lines[:lo], *reversed(lines[lo : hi + 1]), *lines[hi + 1 :]])


def line_ends(data: bytes, c: Choices) -> bytes:
    """CRLF line ends, lone CRs, a byte-order mark, blank and whitespace-only lines."""
    kind = c.integer(0, 3)
    if kind == 0:
        return data.replace(b"\n", b"\r\n")
    if kind == 1:
        return data.replace(b"\n", b"\r", c.integer(1, 5))
    if kind == 2:
        return b"\xef\xbb\xbf" + data
    at = _point(data, c, inside_string=False)
    return data[:at] + b"\n \t\x0b\x0c\r\n\n" + data[at:]


MUTATIONS: dict[str, Callable[[bytes, Choices], bytes]] = {
    "bit_flips": bit_flips,
    "truncation": truncation,
    "invalid_utf8": invalid_utf8,
    "nul_bytes": nul_bytes,
    "huge_line": huge_line,
    "deep_nesting": deep_nesting,
    "wrong_types": wrong_types,
    "null_everywhere": null_everywhere,
    "duplicated_or_reordered": duplicated_or_reordered,
    "line_ends": line_ends,
}


def mutate(data: bytes, c: Choices, names: Sequence[str]) -> bytes:
    """``data`` through each named mutation in turn. A structural mutation that cannot
    rebuild its JSON (nested past what the encoder takes) flips bits instead."""
    for name in names:
        try:
            data = MUTATIONS[name](data, c)
        except (RecursionError, TypeError):
            data = bit_flips(data, c)
    return data


# -- JSON helpers -------------------------------------------------------------------------------


def _dumps(value: Any) -> bytes:
    """JSON text of ``value`` (integers past 64 bits included)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")


def _json_lines(lines: list[bytes]) -> list[tuple[int, Any]]:
    out = []
    for i, line in enumerate(lines):
        if line.lstrip()[:1] not in (b"{", b"["):
            continue
        try:
            out.append((i, orjson.loads(line)))
        except orjson.JSONDecodeError:
            continue
    return out


def _with_line(lines: list[bytes], index: int, line: bytes) -> bytes:
    return b"\n".join(_with_lines(lines, index, line))


def _with_lines(lines: list[bytes], index: int, line: bytes) -> list[bytes]:
    return [*lines[:index], line, *lines[index + 1 :]]


Path_ = tuple[str | int, ...]


def _paths(value: Any, prefix: Path_ = ()) -> list[Path_]:
    """Every node's path (the root's is ``()``), iteratively (values may nest deeply)."""
    out: list[Path_] = []
    stack: list[tuple[Path_, Any]] = [(prefix, value)]
    while stack:
        path, node = stack.pop()
        out.append(path)
        if len(out) > 5000:
            break
        if isinstance(node, dict):
            stack.extend(((*path, k), v) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend(((*path, i), v) for i, v in enumerate(node))
    return out


def _leaves(value: Any) -> list[tuple[Path_, Any]]:
    out = []
    for path in _paths(value):
        node = _get(value, path)
        if not isinstance(node, dict | list):
            out.append((path, node))
    return out


def _get(value: Any, path: Path_) -> Any:
    for key in path:
        value = value[key]
    return value


def _replaced(value: Any, path: Path_, new: Any) -> Any:
    """A copy of ``value`` with the node at ``path`` replaced by ``new``."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        copy = dict(value)
        copy[head] = _replaced(value[head], rest, new)
        return copy
    items = list(value)
    items[head] = _replaced(value[head], rest, new)  # type: ignore[index]
    return items


def _point(data: bytes, c: Choices, *, inside_string: bool) -> int:
    """A random offset; with ``inside_string``, just after a double quote when there is one."""
    if inside_string and b'"' in data:
        quotes = [i for i, b in enumerate(data[:65536]) if b == 0x22]
        if quotes:
            return c.choice(quotes) + 1
    return c.integer(0, len(data))


# -- seeds --------------------------------------------------------------------------------------


def window(seed: Seed, c: Choices) -> bytes:
    """The seed's bytes; a corpus file longer than ``WINDOW_BYTES`` gives a window of whole
    lines of it, from a point that ``c`` picks (its start, or anywhere)."""
    size = seed.path.stat().st_size
    if not seed.corpus or size <= WINDOW_BYTES:
        return seed.read()
    start = c.integer(0, size - WINDOW_BYTES) if c.integer(0, 2) else 0
    with seed.path.open("rb") as fh:
        fh.seek(start)
        data = fh.read(WINDOW_BYTES)
    if start:
        data = data[data.find(b"\n") + 1 :]
    return data[: data.rfind(b"\n") + 1]


def mutate_input(path: Path, c: Choices) -> str:
    """Mutate an input read whole, in place; what was done, for the failure's message."""
    if path.is_dir():
        return _mutate_folder(path, c)
    if c.integer(0, 4) == 0:  # pages of the database damaged or cut
        data = path.read_bytes()
        name = c.choice(["bit_flips", "truncation"])
        path.write_bytes(MUTATIONS[name](data, c))
        return f"{name} of the file"
    return _mutate_row(path, c)


def _mutate_folder(folder: Path, c: Choices) -> str:
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    target = c.choice(files)
    where = target.relative_to(folder)
    if target.suffix == ".db":
        return f"{where}: {mutate_input(target, c)}"
    kind = c.integer(0, 5)
    if kind == 0:
        target.unlink()
        return f"{where} deleted"
    if kind == 1:
        target.unlink()
        target.mkdir()
        return f"{where} made a folder"
    if kind == 2:
        junk = target.with_name("junk" + target.suffix)
        junk.write_bytes(b"\x00\xff not JSON {")
        return f"{junk.relative_to(folder)} added"
    names = [c.choice(list(MUTATIONS)) for _ in range(c.integer(1, 2))]
    target.write_bytes(mutate(target.read_bytes(), c, names))
    return f"{where}: {', '.join(names)}"


# what a value of a row becomes: another type, or something no reader expects
_ODD_VALUES: tuple[Any, ...] = (None, 0, -1, 2**62, 1.5, "", "text", b"\x00\xff\xfe", "x" * 100_000)


def _mutate_row(path: Path, c: Choices) -> str:
    con = sqlite3.connect(path)
    try:
        tables = [
            name
            for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not name.startswith("sqlite_")
        ]
        if not tables:  # an earlier mutation cut the file to nothing, or to its header
            return "no table to change"
        table = c.choice(tables)
        rows = [rowid for (rowid,) in con.execute(f'SELECT rowid FROM "{table}"')]
        if not rows:
            return f"{table}: no rows to change"
        rowid = c.choice(rows)
        columns = [row[1] for row in con.execute(f'PRAGMA table_info("{table}")')]
        column = c.choice(columns)
        (value,) = con.execute(
            f'SELECT "{column}" FROM "{table}" WHERE rowid = ?', (rowid,)
        ).fetchone()
        kind = c.integer(0, 3)
        if kind == 0 and c.integer(0, 1):
            con.execute(f'DELETE FROM "{table}" WHERE rowid = ?', (rowid,))
            done = "deleted"
        else:
            new = _new_value(value, c) if kind else c.choice(_ODD_VALUES)
            # bytes from a text stay text (invalid UTF-8 and all), as a careless writer leaves them
            cast = "CAST(? AS TEXT)" if isinstance(value, str) and isinstance(new, bytes) else "?"
            sql = f'UPDATE "{table}" SET "{column}" = {cast} WHERE rowid = ?'
            con.execute(sql, (new, rowid))
            done = f"{column} changed"
        con.commit()
        return f"{table} row {rowid}: {done}"
    except sqlite3.Error as exc:  # a constraint: leave the row
        return f"no change ({exc})"
    finally:
        con.close()


def _new_value(value: Any, c: Choices) -> Any:
    """A text mutated as a file would be (JSON text through the JSON mutations), its bytes
    when they are not UTF-8 any more; a value of another kind replaced."""
    if isinstance(value, str):
        names = [c.choice(list(MUTATIONS)) for _ in range(c.integer(1, 2))]
        mutated = mutate(value.encode(), c, names)
        try:
            return mutated.decode()
        except UnicodeDecodeError:
            return mutated
    return c.choice(_ODD_VALUES)
