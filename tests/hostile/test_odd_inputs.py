"""Inputs that are streams, not files: a FIFO, ``/dev/stdin`` fed by a pipe, ``-``, a process
substitution. Every command reads them to the right content or refuses them with one line and
exit 2: never a hang, a traceback or a silently empty session."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ctx_inspect.app.config import build_profile
from ctx_inspect.cli import main
from ctx_inspect.errors import InputError
from ctx_inspect.ui.app import InspectorApp, OpenRequest

DATA = Path(__file__).parents[1] / "data"
SESSION = DATA / "claude_code" / "compaction.jsonl"  # message bodies, a compaction to explain
TIMEOUT = 60  # a command that takes this long has hung

COMMANDS: dict[str, list[str]] = {
    "stats": ["stats", "--json", "--no-exact"],
    "replay": ["replay", "--json"],
    "explain": ["explain", "--json"],
    "diff": ["diff", "--json"],  # reads every message's body back by its byte offset
}


def cli(args: list[str], stdin: bytes | int | None = None) -> subprocess.CompletedProcess[str]:
    """``ctx-inspect ARGS`` in a subprocess; a hang fails the test (TimeoutExpired)."""
    kwargs: dict[str, Any] = {"stdin": stdin} if isinstance(stdin, int) else {"input": stdin}
    if stdin is None:
        kwargs = {"stdin": subprocess.DEVNULL}
    result = subprocess.run(
        [sys.executable, "-m", "ctx_inspect", *args],
        capture_output=True,
        timeout=TIMEOUT,
        **kwargs,
    )
    return subprocess.CompletedProcess(
        result.args, result.returncode, result.stdout.decode(), result.stderr.decode()
    )


def without_names(value: Any) -> Any:
    """The output with the input's name left out (it is the stream's name, not the file's)."""
    if isinstance(value, dict):
        return {k: without_names(v) for k, v in value.items() if k not in ("file", "path")}
    if isinstance(value, list):
        return [without_names(v) for v in value]
    return value


def json_lines(text: str) -> list[Any]:
    """The JSON values printed, one a line; a list printed whole (explain's) gives its items."""
    out: list[Any] = []
    for line in text.splitlines():
        if line.strip():
            value = json.loads(line)
            out.extend(value if isinstance(value, list) else [value])
    return out


@pytest.fixture(scope="module")
def expected() -> dict[str, list[Any]]:
    """Each command's output on the session read as a plain file."""
    out = {}
    for name, args in COMMANDS.items():
        code, stdout, stderr = run_main([*args, str(SESSION)])
        assert code == 0, stderr
        out[name] = without_names(json_lines(stdout))
    assert out["stats"][0]["messages_total"] > 0
    assert out["diff"][0]["messages_before"] > 0
    assert out["explain"] and out["replay"]
    return out


@contextlib.contextmanager
def fifo_with_writer(tmp_path: Path, data: bytes) -> Iterator[Path]:
    """A FIFO that a thread writes ``data`` into once a reader opens it."""
    path = tmp_path / "session.fifo"
    os.mkfifo(path)

    def write() -> None:
        with contextlib.suppress(OSError), open(path, "wb") as fh:  # waits for the reader
            fh.write(data)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        yield path
    finally:
        if writer.is_alive():  # nobody opened it: let the writer go
            with contextlib.suppress(OSError):
                os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
        writer.join(5)


def check_output(result: subprocess.CompletedProcess[str], want: list[Any]) -> None:
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert without_names(json_lines(result.stdout)) == want


# -- every command, on every kind of stream ------------------------------------------------------


@pytest.mark.parametrize("command", list(COMMANDS))
def test_dash_reads_standard_input(command: str, expected: dict[str, list[Any]]) -> None:
    result = cli([*COMMANDS[command], "-"], stdin=SESSION.read_bytes())
    check_output(result, expected[command])
    names = {item.get("file") for item in json_lines(result.stdout)}
    assert names == {"<stdin>"}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_dev_stdin_fed_by_a_pipe(command: str, expected: dict[str, list[Any]]) -> None:
    result = cli([*COMMANDS[command], "/dev/stdin"], stdin=SESSION.read_bytes())
    check_output(result, expected[command])


@pytest.mark.parametrize("command", list(COMMANDS))
def test_fifo(command: str, expected: dict[str, list[Any]], tmp_path: Path) -> None:
    with fifo_with_writer(tmp_path, SESSION.read_bytes()) as fifo:
        code, out, err = run_main([*COMMANDS[command], str(fifo)])
    check_output(subprocess.CompletedProcess([], code, out, err), expected[command])


@pytest.mark.parametrize("command", ["stats", "diff"])
def test_process_substitution(command: str, expected: dict[str, list[Any]]) -> None:
    args = " ".join(COMMANDS[command])
    script = f'exec "{sys.executable}" -m ctx_inspect {args} <(cat "{SESSION}")'
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=TIMEOUT)
    check_output(result, expected[command])


def test_a_stream_named_twice_is_read_once(expected: dict[str, list[Any]]) -> None:
    result = cli([*COMMANDS["stats"], "-", "/dev/stdin"], stdin=SESSION.read_bytes())
    check_output(result, expected["stats"] * 2)


def test_a_large_stream_is_read_whole(tmp_path: Path) -> None:
    """Far more than the sniffed head: nothing after it is lost."""
    lines = SESSION.read_bytes().splitlines(keepends=True)
    big = tmp_path / "big.jsonl"
    big.write_bytes(b"".join(lines * 400))  # ~ 2 MB
    direct = cli([*COMMANDS["stats"], str(big)])
    piped = cli([*COMMANDS["stats"], "-"], stdin=big.read_bytes())
    assert direct.returncode == piped.returncode == 0, piped.stderr
    assert without_names(json_lines(piped.stdout)) == without_names(json_lines(direct.stdout))


# -- following a stream --------------------------------------------------------------------------


def last_summary(text: str) -> dict[str, Any]:
    summaries = json_lines(text)
    assert summaries
    last: dict[str, Any] = summaries[-1]
    return last


@pytest.mark.parametrize("kind", ["dash", "fifo"])
def test_follow_a_stream_ends_with_it(
    kind: str, expected: dict[str, list[Any]], tmp_path: Path
) -> None:
    args = ["stats", "--follow", "--json", "--no-exact"]
    if kind == "dash":
        result = cli([*args, "-"], stdin=SESSION.read_bytes())
    else:
        with fifo_with_writer(tmp_path, SESSION.read_bytes()) as fifo:
            result = subprocess.CompletedProcess([], *run_main([*args, str(fifo)]))
    assert result.returncode == 0, result.stderr
    got = last_summary(result.stdout)
    want = expected["stats"][0]
    for key in ("messages_total", "steps", "items_total", "peak_context_tokens", "parse_issues"):
        assert got[key] == want[key], key


def test_follow_a_stream_shows_lines_as_they_come(tmp_path: Path) -> None:
    """A writer that pauses mid-way: the summary of the first part is printed before the rest
    is written (the writer waits for it), then the final one."""
    lines = SESSION.read_bytes().splitlines(keepends=True)
    half = len(lines) // 2
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctx_inspect", "stats", "--follow", "--json", "--no-exact", "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(b"".join(lines[:half]))
        proc.stdin.flush()
        first = json.loads(_readline(proc.stdout))
        proc.stdin.write(b"".join(lines[half:]))
        proc.stdin.close()
        proc.stdin = None
        rest, err = proc.communicate(timeout=TIMEOUT)
    finally:
        proc.kill()
    assert proc.returncode == 0, err.decode()
    final = last_summary(rest.decode())
    assert 0 < first["messages_total"] < final["messages_total"]


def _readline(fh: Any) -> bytes:
    """A line from a pipe, or a failure after TIMEOUT seconds."""
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fh.readline()), daemon=True)
    reader.start()
    reader.join(TIMEOUT)
    assert got and got[0], "no summary was printed"
    return got[0]


# -- refused with one line -----------------------------------------------------------------------


def one_line_error(result: subprocess.CompletedProcess[str], words: str) -> None:
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], result.stderr


@pytest.mark.parametrize("command", ["stats", "diff"])
def test_empty_standard_input_is_refused(command: str) -> None:
    one_line_error(cli([*COMMANDS[command], "-"], stdin=b""), "empty input")


def test_binary_stream_is_refused() -> None:
    one_line_error(cli([*COMMANDS["stats"], "-"], stdin=bytes(range(256)) * 64), "binary file")


def test_endless_binary_device_is_refused_early() -> None:
    one_line_error(cli([*COMMANDS["stats"], "/dev/zero"]), "binary file")


def test_a_terminal_on_standard_input_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    leader, follower = os.openpty()
    try:
        with os.fdopen(os.dup(follower), "rb") as tty:
            monkeypatch.setattr(sys, "stdin", tty)
            from ctx_inspect.sources.stream import Spool

            with pytest.raises(InputError, match="terminal"):
                Spool("-")
    finally:
        os.close(leader)
        os.close(follower)


def run_main(args: list[str]) -> tuple[int, str, str]:
    """``main(args)`` in a thread with this test's output captured; fails after TIMEOUT."""
    result: list[int] = []
    out, err = io.StringIO(), io.StringIO()

    def run() -> None:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            result.append(main(args))

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(TIMEOUT)
    assert result, f"ctx-inspect {' '.join(args)} hung"
    return result[0], out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    "args", [[*COMMANDS[c]] for c in COMMANDS] + [["stats", "--follow", "--json"]]
)
def test_fifo_nobody_writes_to_is_refused(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ctx_inspect.sources.stream.FIRST_BYTE_WAIT", 0.5)
    fifo = tmp_path / "silent.fifo"
    os.mkfifo(fifo)
    code, out, err = run_main([*args, str(fifo)])
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "nothing to read" in err and "silent.fifo" in err


def test_fifo_whose_writer_leaves_at_once_is_refused(tmp_path: Path) -> None:
    with fifo_with_writer(tmp_path, b"") as fifo:
        result = subprocess.CompletedProcess([], *run_main([*COMMANDS["stats"], str(fifo)]))
    one_line_error(result, "empty input")


# -- the dashboard -------------------------------------------------------------------------------


def request(path: Path, *, follow: bool = False) -> OpenRequest:
    return OpenRequest(
        paths=(path,),
        profile_for=lambda spec: build_profile(None, default=spec.default_profile),
        follow=follow,
    )


async def wait_for(pilot: Any, condition: Callable[[], bool], timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, "timed out waiting for the app"
        await pilot.pause(0.05)


def messages_of(app: InspectorApp) -> int:
    state = app.state
    return 0 if state is None else len(state.session.table)


@pytest.mark.parametrize("follow", [False, True])
async def test_dashboard_on_a_fifo(
    follow: bool, expected: dict[str, list[Any]], tmp_path: Path
) -> None:
    want = expected["stats"][0]["messages_total"]
    with fifo_with_writer(tmp_path, SESSION.read_bytes()) as fifo:
        app = InspectorApp(request(fifo, follow=follow))
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: messages_of(app) == want or app.load_error is not None)
            await wait_for(pilot, lambda: not app.loading)
            assert app.load_error is None
            assert app.state is not None
            assert app.state.session.body(0).text  # a body read back by its offset


async def test_dashboard_on_standard_input(
    expected: dict[str, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    read_end, write_end = os.pipe()
    with os.fdopen(read_end, "rb") as pipe_in:
        monkeypatch.setattr(sys, "stdin", pipe_in)
        os.write(write_end, SESSION.read_bytes())
        os.close(write_end)
        app = InspectorApp(request(Path("-")))
        async with app.run_test(size=(120, 40)) as pilot:
            want = expected["stats"][0]["messages_total"]
            await wait_for(pilot, lambda: messages_of(app) == want or app.load_error is not None)
            await wait_for(pilot, lambda: not app.loading)
            assert app.load_error is None
            assert app.state is not None and app.state.loaded.name == "<stdin>"
            assert app.state.session.body(0).text


async def test_dashboard_on_a_silent_fifo_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ctx_inspect.sources.stream.FIRST_BYTE_WAIT", 0.5)
    fifo = tmp_path / "silent.fifo"
    os.mkfifo(fifo)
    app = InspectorApp(request(fifo))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.load_error is not None)
        assert app.load_error is not None and "nothing to read" in app.load_error
        assert app.state is None
