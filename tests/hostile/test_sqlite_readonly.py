"""SQLite inputs (OpenCode's ``opencode.db``, Fifth's ``context.db``) are read without writing a
byte or an mtime of the database, its ``-wal`` or its ``-shm``, and without opening any of them
for writing: while another process holds the database open in WAL mode and writes to it, after
it closed it, and when the database is followed (re-read on change)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ctx_inspect.agents.fifth import reader_db as fifth
from ctx_inspect.agents.opencode import reader_db
from ctx_inspect.app.config import build_profile
from ctx_inspect.app.live import open_live
from ctx_inspect.cli import main
from ctx_inspect.formats.registry import detect
from tests.unit.test_format_fifth import make_db
from tests.unit.test_format_opencode import build_db

WRITER = """
import sqlite3, sys
con = sqlite3.connect(sys.argv[1])
con.execute("PRAGMA journal_mode=WAL")
con.execute("PRAGMA wal_autocheckpoint=0")
print("open", flush=True)
for line in sys.stdin:
    con.execute(line)
    con.commit()
    print("done", flush=True)
"""


class Writer:
    """Another process holding the database open in WAL mode; ``write(sql)`` runs one
    statement there and returns once it is committed."""

    def __init__(self, path: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._answer() == "open"

    def _answer(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def write(self, sql: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(sql.replace("\n", " ") + "\n")
        self.proc.stdin.flush()
        assert self._answer() == "done"

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


@contextlib.contextmanager
def live_writer(path: Path) -> Iterator[Writer]:
    writer = Writer(path)
    try:
        yield writer
    finally:
        writer.close()


@dataclass(frozen=True)
class Case:
    """One database format: how to make one, a row to add, and how to see that it was read."""

    name: str
    make: Callable[[Path], Path]
    module: Any
    row: Callable[[int], str]
    seen: Callable[[Path, int], bool]


def _opencode_row(n: int) -> str:
    return (
        "INSERT INTO session (id, project_id, slug, directory, title, version, time_created, "
        f"time_updated) VALUES ('ses_new{n}', 'prj_1', 'n{n}', '/w', 'Fresh {n}', '1.2.0', "
        f"9e12 + {n}, 9e12 + {n})"
    )


def _opencode_seen(path: Path, n: int) -> bool:
    return f"Fresh {n}" in [s.label for s in reader_db.read_database(path)]


def _fifth_row(n: int) -> str:
    return f"INSERT INTO messages (role, content, tokens, level) VALUES ('user', 'row {n}', 5, 3)"


def _fifth_seen(path: Path, n: int) -> bool:
    (session,) = fifth.read_database(path)
    return f"row {n}" in repr(session.events)


CASES = [
    Case(
        "opencode",
        lambda p: build_db(p / "opencode.db", wal=True),
        reader_db,
        _opencode_row,
        _opencode_seen,
    ),
    Case(
        "fifth",
        lambda p: make_db(p / "context.db", wal=True),
        fifth,
        _fifth_row,
        _fifth_seen,
    ),
]


@pytest.fixture(params=CASES, ids=[c.name for c in CASES])
def case(request: pytest.FixtureRequest) -> Case:
    value: Case = request.param
    return value


def files_of(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of the folder: its bytes and its mtime."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


def write_opened(paths: list[Path]) -> list[str]:
    """The files among ``paths`` this process has open with write access now."""
    wanted = {os.path.realpath(p) for p in paths}
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
            info = Path(f"/proc/self/fdinfo/{fd}").read_text()
        except OSError:
            continue
        if target not in wanted:
            continue
        flags = next(int(line.split()[1], 8) for line in info.splitlines() if line[:6] == "flags:")
        if flags & os.O_ACCMODE != os.O_RDONLY:
            found.append(target)
    return found


@pytest.fixture
def opened_for_writing(
    case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[list[str]]:
    """What the reader had open with write access among the database's files, looked at while
    it reads the database (during each ``_read_database``)."""
    found: list[str] = []
    real = case.module._read_database
    siblings = ["", "-wal", "-shm", "-journal"]

    def looking(con: sqlite3.Connection, path: Path) -> Any:
        found.extend(write_opened([Path(f"{path}{s}") for s in siblings]))
        return real(con, path)

    monkeypatch.setattr(case.module, "_read_database", looking)
    yield found


def stats(path: Path) -> list[dict[str, Any]]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["stats", "--json", "--no-exact", str(path)])
    assert code == 0, err.getvalue()
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_read_while_a_writer_holds_it_open(
    case: Case, tmp_path: Path, opened_for_writing: list[str]
) -> None:
    path = case.make(tmp_path)
    with live_writer(path) as writer:
        writer.write(case.row(1))
        before = files_of(tmp_path)
        assert {f"{path.name}-wal", f"{path.name}-shm"} <= set(before)
        assert case.seen(path, 1)  # the row only in the -wal is read
        assert stats(path)  # detection, reading, the summary
        assert files_of(tmp_path) == before
    assert opened_for_writing == []


def test_read_after_the_writer_closed_it(
    case: Case, tmp_path: Path, opened_for_writing: list[str]
) -> None:
    path = case.make(tmp_path)
    with live_writer(path) as writer:
        writer.write(case.row(1))
    before = files_of(tmp_path)
    assert list(before) == [path.name]  # a WAL database without -wal or -shm
    assert case.seen(path, 1)
    assert stats(path)
    assert files_of(tmp_path) == before
    assert opened_for_writing == []


def test_followed_database_is_reread_without_writing(
    case: Case, tmp_path: Path, opened_for_writing: list[str]
) -> None:
    path = case.make(tmp_path)
    spec = detect(path)
    profile = build_profile(None, default=spec.default_profile)
    with live_writer(path) as writer:
        writer.write(case.row(1))
        before = files_of(tmp_path)
        live = open_live(path, spec, profile)
        assert files_of(tmp_path) == before
        first = repr(list(live.session.events()))
        writer.write(case.row(2))
        changed = files_of(tmp_path)
        assert changed != before
        assert live.refresh()  # the change is seen and the database read again
        assert files_of(tmp_path) == changed
        assert live.reloads == 2
        assert repr(list(live.session.events())) != first  # the new row is in what was read
        assert files_of(tmp_path) == changed
    assert opened_for_writing == []
