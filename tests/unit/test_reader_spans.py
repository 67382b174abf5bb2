"""Reading records back by byte span through the kept-open descriptors."""

from __future__ import annotations

import os
from pathlib import Path

from ctx_inspect.sources import reader
from ctx_inspect.sources.reader import read_span


def test_a_span_reads_exactly_its_bytes(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"first line\nsecond line\n")
    assert read_span(path, 11, 6) == b"second"
    assert read_span(path, 0, 5) == b"first"
    assert read_span(path, 20, 100) == b"ne\n"  # past the end: what there is


def test_a_file_replaced_at_the_same_path_is_read_anew(tmp_path: Path) -> None:
    path = tmp_path / "live.log"
    path.write_bytes(b"old content that is long enough\n")
    assert read_span(path, 0, 3) == b"old"
    fresh = tmp_path / "fresh.log"
    fresh.write_bytes(b"new content that is long enough\n")
    os.replace(fresh, path)  # rotation by rename: another file at the path
    assert read_span(path, 0, 3) == b"new"


def test_a_file_truncated_and_rewritten_in_place_is_read_as_it_is_now(tmp_path: Path) -> None:
    path = tmp_path / "copytrunc.log"
    path.write_bytes(b"aaaa\nbbbb\n")
    assert read_span(path, 5, 4) == b"bbbb"
    with path.open("r+b") as fh:
        fh.truncate(0)
        fh.write(b"cccc\ndddd\n")
    assert read_span(path, 5, 4) == b"dddd"


def test_only_a_few_descriptors_stay_open(tmp_path: Path) -> None:
    files = reader._OpenFiles(3)
    paths = []
    for n in range(6):
        path = tmp_path / f"f{n}.log"
        path.write_bytes(f"file {n}\n".encode())
        paths.append(path)
        assert files.read(path, 5, 1) == str(n).encode()
    assert len(files._fds) == 3
    assert list(files._fds) == [str(p) for p in paths[3:]]
    assert files.read(paths[0], 0, 4) == b"file"  # an evicted one opens again
    files.close_all()
    assert not files._fds


def _lines(count: int, tag: str = "line") -> bytes:
    return b"".join(f"{tag} {n:05d} {'x' * (n % 50)}\n".encode() for n in range(count))


def _spans(data: bytes) -> list[tuple[int, int]]:
    spans, at = [], 0
    for line in data.split(b"\n")[:-1]:
        spans.append((at, len(line)))
        at += len(line) + 1
    return spans


def _check(files: reader._OpenFiles, path: Path, spans: list[tuple[int, int]], data: bytes) -> None:
    """Each span reads as ``data`` (the file's bytes now) holds it."""
    for offset, length in spans:
        assert files.read(path, offset, length) == data[offset : offset + length]


def test_spans_read_in_file_order_and_out_of_it_are_the_file_bytes(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    data = _lines(3000)
    path.write_bytes(data)
    files = reader._OpenFiles(2)
    spans = _spans(data)
    _check(files, path, spans, data)
    _check(files, path, spans[::7] + spans[::-3], data)
    files.close_all()


def test_spans_read_in_file_order_see_what_was_appended_meanwhile(tmp_path: Path) -> None:
    path = tmp_path / "live.jsonl"
    first = _lines(2000)
    path.write_bytes(first)
    files = reader._OpenFiles(2)
    _check(files, path, _spans(first)[:1000], first)
    more = _lines(500, "more")
    with path.open("ab") as fh:
        fh.write(more)
    data = first + more
    _check(files, path, _spans(data)[1000:], data)
    files.close_all()


def test_spans_read_in_file_order_see_a_truncation_at_once(tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl"
    data = _lines(2000)
    path.write_bytes(data)
    files = reader._OpenFiles(2)
    spans = _spans(data)
    _check(files, path, spans[:100], data)
    keep = spans[150][0]
    with path.open("r+b") as fh:
        fh.truncate(keep)
    _check(files, path, spans[100:200], data[:keep])
    files.close_all()


def test_spans_read_in_file_order_see_a_rewrite_in_place_of_the_same_size(
    tmp_path: Path,
) -> None:
    path = tmp_path / "rewritten.jsonl"
    data = _lines(2000)
    path.write_bytes(data)
    files = reader._OpenFiles(2)
    spans = _spans(data)
    _check(files, path, spans[:100], data)
    again = data.replace(b"line", b"LINE")
    with path.open("r+b") as fh:  # same size, same inode: only the bytes differ
        fh.write(again)
    _check(files, path, spans[100:200], again)
    files.close_all()
