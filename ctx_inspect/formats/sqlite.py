"""Reading SQLite databases of agents read-only, and naming their problems.

``open_sqlite_readonly`` opens a database without writing a byte to it or beside it (its
``-wal``, ``-shm`` and ``-journal`` included); ``sqlite_tables`` / ``sqlite_columns`` list what
it holds (``sqlite_tables_of`` for sniffers); ``db_issue`` is a problem of a database or a folder
as a parse issue. The OpenCode and Fifth readers build on these.
"""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ctx_inspect.core.model import ParseIssue
from ctx_inspect.formats.base import excerpt

_SQLITE_MAGIC = b"SQLite format 3\x00"


def sqlite_is_wal(path: Path) -> bool:
    """Whether the database's header says WAL mode (read and write versions both 2)."""
    try:
        with path.open("rb") as fh:
            header = fh.read(20)
    except OSError:
        return False
    return header.startswith(_SQLITE_MAGIC) and header[18] == 2 and header[19] == 2


# Python's sqlite3 decodes SQLite's error messages as UTF-8: a message quoting the bytes of a
# damaged schema raises UnicodeDecodeError in place of the error SQLite reported
SQLITE_ERRORS = (sqlite3.Error, UnicodeDecodeError)

COPY_ATTEMPTS = 5  # tries at a consistent private copy of a database a writer is changing
_COPY_BYTES = 1 << 20


class _CopyConnection(sqlite3.Connection):
    """A connection to a private copy of a database; closing it removes the copy."""

    copy_folder: Path | None = None

    def close(self) -> None:
        super().close()
        if self.copy_folder is not None:
            shutil.rmtree(self.copy_folder, ignore_errors=True)
            self.copy_folder = None


def _connect(uri: str, folder: Path | None = None) -> sqlite3.Connection:
    con = sqlite3.connect(uri, uri=True, factory=_CopyConnection)
    con.copy_folder = folder
    con.text_factory = bytes  # invalid UTF-8 must not fail a whole query; decoded per value
    return con


def _uri(path: Path, query: str) -> str:
    return "file:" + quote(str(path)) + query


def _checked(con: sqlite3.Connection) -> sqlite3.Connection:
    """``con`` once a first query worked (closed, and the error raised, when it did not)."""
    try:
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error:
        con.close()
        raise
    except UnicodeDecodeError:
        con.close()
        raise sqlite3.DatabaseError("database disk image is malformed (a damaged schema)") from None
    return con


def open_sqlite_readonly(
    path: Path, *, sniffing: bool = False
) -> tuple[sqlite3.Connection, str | None]:
    """Open an SQLite database without ever writing to it or beside it (not a byte, not an
    mtime of the database, its ``-wal``, ``-shm`` or ``-journal``).

    Returns the connection and a note when what is read may not be the newest state. SQLite
    opens a WAL database's ``-wal`` (and ``-shm``) read-write, creating them when missing, and
    a reader writes into the ``-shm``, even with ``mode=ro``; so:

    - a WAL database without a ``-wal`` file is read from its main file alone
      (``mode=ro&immutable=1``: nothing else is opened, and only for reading);
    - a WAL database with a ``-wal`` file (an agent has it open, or did not close it) is copied
      with its ``-wal`` into a private folder and the copy is read (closing the connection
      removes the copy). The copy is taken again while the main file changed during the copy
      (a writer's checkpoint), so the copy is one consistent state;
    - a database in rollback mode is opened ``mode=ro`` (SQLite's shared lock, no write); when
      that cannot read it (a hot ``-journal`` left by a crash: rolling it back is a write), a
      private copy with its journal is read instead, which SQLite rolls back in the copy.

    ``sniffing``: only the tables are wanted; a WAL database is first read from its main file
    alone, and copied only when that shows no table. Raises ``sqlite3.Error`` when it is no
    database at all.
    """
    resolved = path.resolve()
    if sqlite_is_wal(resolved):
        if not Path(f"{resolved}-wal").exists():
            return _checked(_connect(_uri(resolved, "?mode=ro&immutable=1"))), None
        if sniffing:
            con = _checked(_connect(_uri(resolved, "?mode=ro&immutable=1")))
            if sqlite_tables(con):
                return con, None
            con.close()
        return _open_copy(resolved, "-wal")
    try:
        return _checked(_connect(_uri(resolved, "?mode=ro"))), None
    except sqlite3.DatabaseError as exc:
        if "not a database" in str(exc) or "malformed" in str(exc):
            raise
        con, note = _open_copy(resolved, "-journal")
        return con, note or f"read from a private copy ({exc})"


def _open_copy(path: Path, sibling: str) -> tuple[sqlite3.Connection, str | None]:
    folder = Path(tempfile.mkdtemp(prefix="ctx-inspect-db-"))
    try:
        note = _copy_database(path, folder / path.name, sibling)
        return _checked(_connect(_uri(folder / path.name, ""), folder)), note
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


def _copy_database(path: Path, target: Path, sibling: str) -> str | None:
    """Copy the database and its ``sibling`` (``-wal`` or ``-journal``) to ``target``, again
    while the main file changed from before to after the sibling was copied; a note when it
    kept changing."""
    for _ in range(COPY_ATTEMPTS):
        before = _copy_file(path, target)
        _copy_file(Path(f"{path}{sibling}"), Path(f"{target}{sibling}"))
        if _digest(path) == before:
            return None
    return (
        f"the database kept changing while it was copied ({COPY_ATTEMPTS} tries): "
        "what was read may mix two of its states"
    )


def _copy_file(source: Path, target: Path) -> bytes | None:
    """Copy ``source`` (read-only) to ``target``; the digest of what was copied (None when
    there is no source: then there is no target either)."""
    digest = hashlib.blake2b()
    try:
        with source.open("rb") as src, target.open("wb") as dst:
            while chunk := src.read(_COPY_BYTES):
                digest.update(chunk)
                dst.write(chunk)
    except FileNotFoundError:
        target.unlink(missing_ok=True)
        return None
    return digest.digest()


def _digest(path: Path) -> bytes | None:
    digest = hashlib.blake2b()
    try:
        with path.open("rb") as fh:
            while chunk := fh.read(_COPY_BYTES):
                digest.update(chunk)
    except FileNotFoundError:
        return None
    return digest.digest()


def sqlite_tables(con: sqlite3.Connection) -> set[str]:
    rows = con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return {column_text(row[0]) for row in rows}


def sqlite_columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [column_text(row[1]) for row in con.execute(f'PRAGMA table_info("{table}")').fetchall()]


def sqlite_tables_of(path: Path) -> set[str]:
    """The tables of a database (empty when it cannot be read); for sniffers."""
    try:
        con, _ = open_sqlite_readonly(path, sniffing=True)
    except (sqlite3.Error, OSError):
        return set()
    try:
        return sqlite_tables(con)
    except SQLITE_ERRORS:
        return set()
    finally:
        con.close()


def column_text(value: Any) -> str:
    """A value read with ``text_factory = bytes`` as text (invalid UTF-8 replaced; None: "")."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def db_issue(path: Path, reason: str, raw: Any = b"") -> ParseIssue:
    """A problem in a database or folder, named by table and row in its reason."""
    data = raw if isinstance(raw, bytes | str) else str(raw)
    return ParseIssue(file=str(path), reason=reason, excerpt=excerpt(data))
