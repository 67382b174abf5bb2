"""Reading inputs: whole files in chunks, and single records by byte span. Never writes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

CHUNK_BYTES = 1 << 20


def iter_chunks(path: Path, chunk_size: int = CHUNK_BYTES, start: int = 0) -> Iterator[bytes]:
    """The bytes of ``path`` from ``start`` to its current end, in chunks."""
    with path.open("rb") as fh:
        if start:
            fh.seek(start)
        while True:
            chunk = fh.read(chunk_size)
            if not chunk:
                return
            yield chunk


def read_span(path: Path, offset: int, length: int) -> bytes:
    """Exactly ``length`` bytes at ``offset`` (fewer if the file has shrunk since)."""
    with path.open("rb") as fh:
        fh.seek(offset)
        return fh.read(length)
