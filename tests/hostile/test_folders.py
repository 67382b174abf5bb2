"""Project folders: a session that cannot be read is reported and the others are read; a
folder that cannot be read says why; a folder reached twice through a symbolic link gives its
sessions once; ``stats`` prints each session as soon as it is read.

Tests may run as root, where permission bits stop no read: unreadable files and folders are
simulated by making the open (or the listing) of that path fail as it would, and the variants
with real permission bits are skipped under root."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import pathlib
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctx_inspect.app import loader
from ctx_inspect.app.config import build_profile
from ctx_inspect.cli import main
from ctx_inspect.ui.app import InspectorApp, OpenRequest

DATA = Path(__file__).parents[1] / "data"
SESSION = DATA / "claude_code" / "typical.jsonl"
AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
DENIED = "Permission denied"


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def files_in(stdout: str) -> list[str]:
    return [json.loads(line)["file"] for line in stdout.splitlines() if line.strip()]


def project(folder: Path, count: int = 3, session: Path = SESSION) -> list[Path]:
    """A Claude Code project folder of ``count`` sessions."""
    folder.mkdir(parents=True)
    out = []
    for i in range(count):
        path = folder / f"{i}0000000-0000-4000-8000-000000000000.jsonl"
        shutil.copyfile(session, path)
        out.append(path)
    return out


def deny_open(monkeypatch: pytest.MonkeyPatch, *denied: Path) -> None:
    """Opening these files fails as it does without read permission."""
    real_open = pathlib.Path.open
    real_os_open = os.open
    names = {str(p) for p in denied}

    def path_open(self: Path, *args: Any, **kwargs: Any) -> Any:
        if str(self) in names:
            raise PermissionError(13, DENIED, str(self))
        return real_open(self, *args, **kwargs)

    def os_open(path: Any, *args: Any, **kwargs: Any) -> int:
        if os.fspath(path) in names:
            raise PermissionError(13, DENIED, os.fspath(path))
        return real_os_open(path, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "open", path_open)
    monkeypatch.setattr(os, "open", os_open)


def deny_listing(monkeypatch: pytest.MonkeyPatch, *denied: Path) -> None:
    """Listing these folders fails as it does without read permission."""
    real = os.scandir
    names = {str(p) for p in denied}

    def scandir(path: Any = ".") -> Any:
        if os.fspath(path) in names:
            raise PermissionError(13, DENIED, os.fspath(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)


# -- one bad session -----------------------------------------------------------------------------


def test_one_unreadable_session_does_not_hide_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good_a, bad, good_b = project(tmp_path / "proj")
    deny_open(monkeypatch, bad)
    code, out, err = run("stats", "--json", "--no-exact", str(tmp_path / "proj"))
    assert code == 2
    assert sorted(files_in(out)) == sorted([str(good_a), str(good_b)])
    lines = err.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and DENIED in lines[0]
    assert "Traceback" not in err


@pytest.mark.skipif(AS_ROOT, reason="root reads files whatever their permission bits")
def test_one_unreadable_session_by_its_permissions(tmp_path: Path) -> None:
    good_a, bad, good_b = project(tmp_path / "proj")
    bad.chmod(0)
    code, out, err = run("stats", "--json", "--no-exact", str(tmp_path / "proj"))
    assert code == 2
    assert sorted(files_in(out)) == sorted([str(good_a), str(good_b)])
    assert str(bad) in err and DENIED in err


@pytest.mark.parametrize("command", ["replay", "explain", "diff"])
def test_engine_commands_read_the_other_sessions(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good_a, bad, good_b = project(
        tmp_path / "proj", session=DATA / "claude_code" / "compaction.jsonl"
    )
    deny_open(monkeypatch, bad)
    extra = ["--no-search"] if command == "explain" else []
    code, out, err = run(command, "--json", *extra, str(tmp_path / "proj"))
    assert code == 2
    assert str(bad) in err and DENIED in err and err.count("\n") == 1
    lines = [json.loads(line) for line in out.splitlines()]
    results = lines[0] if command == "explain" else lines  # explain prints one list
    assert sorted({r["file"] for r in results}) == sorted([str(good_a), str(good_b)])


def test_table_output_reports_the_bad_session_in_its_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good_a, bad, good_b = project(tmp_path / "proj")
    deny_open(monkeypatch, bad)
    code, out, err = run("stats", "--no-exact", str(tmp_path / "proj"))
    assert code == 2
    assert str(good_a) in out and str(good_b) in out and str(bad) not in out
    assert str(bad) in err


# -- folders that cannot be read -----------------------------------------------------------------


def test_unreadable_folder_says_permission(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project(tmp_path / "proj")
    deny_listing(monkeypatch, tmp_path / "proj")
    code, out, err = run("stats", "--json", str(tmp_path / "proj"))
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert "cannot read folder" in err and DENIED in err and "unknown folder layout" not in err


@pytest.mark.skipif(AS_ROOT, reason="root lists folders whatever their permission bits")
def test_unreadable_folder_by_its_permissions(tmp_path: Path) -> None:
    project(tmp_path / "proj")
    (tmp_path / "proj").chmod(0)
    try:
        code, _, err = run("stats", "--json", str(tmp_path / "proj"))
    finally:
        (tmp_path / "proj").chmod(0o755)
    assert code == 2 and "cannot read folder" in err and DENIED in err


def test_unreadable_project_among_projects_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "projects"
    first = project(root / "-home-dev-a", 2)
    project(root / "-home-dev-b", 2)
    last = project(root / "-home-dev-c", 2)
    deny_listing(monkeypatch, root / "-home-dev-b")
    code, out, err = run("stats", "--json", "--no-exact", str(root))
    assert code == 2
    assert sorted(files_in(out)) == sorted(str(p) for p in [*first, *last])
    assert "-home-dev-b" in err and DENIED in err and err.count("\n") == 1


# -- links ---------------------------------------------------------------------------------------


def test_symlinked_project_lists_its_sessions_once(tmp_path: Path) -> None:
    root = tmp_path / "projects"
    sessions = project(root / "-home-dev-a", 2)
    (root / "-home-dev-a-link").symlink_to(root / "-home-dev-a", target_is_directory=True)
    code, out, err = run("stats", "--json", "--no-exact", str(root))
    assert code == 0, err
    assert sorted(files_in(out)) == sorted(str(p) for p in sessions)


def test_symlinked_session_file_is_read_once(tmp_path: Path) -> None:
    sessions = project(tmp_path / "proj", 2)
    (tmp_path / "proj" / "90000000-0000-4000-8000-000000000000.jsonl").symlink_to(sessions[0])
    code, out, _ = run("stats", "--json", "--no-exact", str(tmp_path / "proj"))
    assert code == 0
    assert len(files_in(out)) == 2


# -- streamed output -----------------------------------------------------------------------------


def test_each_session_is_printed_before_the_next_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sessions = project(tmp_path / "proj", 3)
    out = io.StringIO()
    printed_when_read: list[str] = []
    real = loader.load_session

    def reading(path: Path, *args: Any, **kwargs: Any) -> loader.LoadedSession:
        printed_when_read.append(out.getvalue())
        return real(path, *args, **kwargs)

    monkeypatch.setattr(loader, "load_session", reading)
    with contextlib.redirect_stdout(out):
        assert main(["stats", "--no-exact", str(tmp_path / "proj")]) == 0
    assert len(printed_when_read) == 3
    assert printed_when_read[0] == ""
    for i, seen in enumerate(printed_when_read[1:], start=1):
        assert sum(str(p) in seen for p in sessions) == i  # every earlier one, already out


# -- the dashboard -------------------------------------------------------------------------------


async def wait_for(pilot: Any, condition: Callable[[], bool], timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, "timed out waiting for the app"
        await pilot.pause(0.05)


async def test_dashboard_opens_the_readable_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good_a, bad, good_b = project(tmp_path / "proj")
    deny_open(monkeypatch, bad)
    request = OpenRequest(
        paths=(tmp_path / "proj",),
        profile_for=lambda spec: build_profile(None, default=spec.default_profile),
    )
    app = InspectorApp(request)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: not app.loading)
        assert sorted(str(s.loaded.path) for s in app.states) == sorted([str(good_a), str(good_b)])
        notes = [n.message for n in app._notifications]
        assert any(str(bad) in note and DENIED in note for note in notes)
