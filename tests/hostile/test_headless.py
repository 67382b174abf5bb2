"""Every headless command over hostile inputs: nothing of an input reaches the terminal as an
escape sequence or an invisible character, in text, CSV or JSON, on standard output or error;
JSON stays faithful (it decodes to the input's strings)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import IO

import pytest

from ctx_inspect.cli import main
from ctx_inspect.render import console
from tests.hostile.inputs import (
    HOSTILE,
    HOSTILE_NAME,
    all_inputs,
    hostile_config,
    leaks,
    native_file,
)

COMMANDS = {
    "stats": ["stats"],
    "replay": ["replay"],
    "explain": ["explain"],
    "diff": ["diff", "--full"],
    "diff-compact": ["diff", "--profile", "opencode", "--action", "compact", "--full"],
    "sweep": ["sweep", "--vary", "context_window=3000,9000", "--workers", "1"],
}
OUR_STYLES = re.compile(r"\x1b\[[0-9;]*m")  # the colours Rich writes on a terminal
SOURCES = ["native", "claude_code", "claude_code_sidechains", "claude_code_project", "opencode"]
# these sessions have nothing to explain: explain prints none of their text
NOTHING_TO_EXPLAIN = {"claude_code_sidechains", "claude_code_project", "opencode"}
CASES = [
    (source, command)
    for source in SOURCES
    for command in COMMANDS
    if not (command == "explain" and source in NOTHING_TO_EXPLAIN)
]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return all_inputs(tmp_path_factory.mktemp("hostile"))


def run(capsysbinary: pytest.CaptureFixture[bytes], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsysbinary.readouterr()
    # the bytes must be UTF-8 (a lone surrogate written raw would not be)
    return code, captured.out.decode("utf-8"), captured.err.decode("utf-8")


@pytest.mark.parametrize("mode", ["text", "terminal", "json"])
@pytest.mark.parametrize(("source", "command"), CASES)
def test_no_escape_reaches_the_terminal(
    inputs: dict[str, Path],
    source: str,
    command: str,
    mode: str,
    capsysbinary: pytest.CaptureFixture[bytes],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    args = [*COMMANDS[command], str(inputs[source])]
    if mode == "json":
        args.insert(1, "--json")
    if mode == "terminal":
        monkeypatch.setenv("FORCE_COLOR", "1")
        assert console().is_terminal  # colours and all, as on a terminal
    code, out, err = run(capsysbinary, *args)
    assert code == 0, err
    assert out and err == ""
    if mode == "terminal":
        out = OUR_STYLES.sub("", out)
    assert leaks(out) == []
    if mode == "json":
        for line in out.splitlines():
            json.loads(line)
        # the input's text (or at least its file name) is there, escaped
        assert "\\u001b]52;c;" in out or "\\u001b]0;t\\u0007" in out
    else:
        assert "␛]52;c;" in out or "␛]0;t␇" in out  # and here visible


def test_json_is_faithful_to_the_input(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    path = native_file(tmp_path)
    code, out, _err = run(capsysbinary, "stats", "--json", str(path))
    assert code == 0
    sessions = [json.loads(line) for line in out.splitlines()]
    assert sessions[0]["model"] == "model" + HOSTILE
    assert sessions[0]["file"] == str(path)
    assert [c["trigger"] for c in sessions[0]["compactions"]] == ["trigger" + HOSTILE]
    assert sessions[1]["file"] == f"{path}#agent{HOSTILE}"  # the sub-agent's own timeline
    assert "\\u001b]52;" in out and "\\u009b" in out and "\\u202e" in out
    assert "\\udb40\\udc41" in out  # a tag character, as a JSON surrogate pair


def test_text_shows_what_was_hidden(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    path = native_file(tmp_path)
    code, out, _err = run(capsysbinary, "stats", str(path))
    assert code == 0
    # (the long value wraps at its spaces)
    assert "model␛[31mred␛[0m␛[2J␛[H" in out
    assert "␛]52;c;ZWNobyBvd25lZA==␇" in out
    assert "⟨U+009B⟩31m⟨U+009D⟩0;c1" in out
    assert "bell␇back␈␈space" in out and "cr␍overwritten⟨U+202E⟩evil⟨U+202C⟩" in out
    assert "zero⟨U+200B⟩width" in out and "tag⟨U+E0001⟩⟨U+E0068⟩" in out
    assert "red]markup[/bold" in out  # markup is shown, not applied


@pytest.mark.parametrize("as_json", [False, True])
def test_profiles_with_a_hostile_configuration(
    tmp_path: Path, as_json: bool, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    config = hostile_config(tmp_path, key="description")
    args = ["profiles", "--profile", "generic", "--config", str(config)]
    code, out, err = run(capsysbinary, *args, *(["--json"] if as_json else []))
    assert code == 0, err
    assert leaks(out) == []
    if as_json:
        assert json.loads(out)[0]["description"] == HOSTILE
    else:
        assert "␛]52;c;" in out


def one_line_error(capsysbinary: pytest.CaptureFixture[bytes], *args: str) -> str:
    code, out, err = run(capsysbinary, *args)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("ctx-inspect: "), err
    assert "Traceback" not in err
    assert leaks(err) == []
    return err


@pytest.mark.parametrize("as_json", [False, True])
def test_errors_naming_a_hostile_path_are_safe(
    tmp_path: Path, as_json: bool, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    flags = ["--json"] if as_json else []
    missing = tmp_path / f"missing{HOSTILE_NAME}.jsonl"
    err = one_line_error(capsysbinary, "stats", *flags, str(missing))
    assert "not found" in err and "⟨U+009D⟩␛[31m␛]0;t␇.jsonl" in err
    binary = tmp_path / f"binary{HOSTILE_NAME}.dat"
    binary.write_bytes(b"\x00\x01\x02\xff" * 300)
    assert "binary" in one_line_error(capsysbinary, "explain", *flags, str(binary))
    config = hostile_config(tmp_path, key="profile")  # no such profile
    err = one_line_error(capsysbinary, "profiles", *flags, "--config", str(config))
    assert "]52;c;" in err


def test_the_console_shows_controls_it_is_given_directly(
    monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """Data that did not go through the CLI's boundary is still written safely, colours kept."""
    from rich.table import Table
    from rich.text import Text

    monkeypatch.setenv("FORCE_COLOR", "1")
    out = console()
    table = Table("name")
    table.add_row(Text(HOSTILE, style="bold"))
    out.print(table)
    out.print(Text("tool" + HOSTILE_NAME))
    written = capsysbinary.readouterr().out.decode("utf-8")
    assert OUR_STYLES.search(written)
    assert leaks(OUR_STYLES.sub("", written)) == []
    assert "␛]52;c;" in written and "␛[31m␛]0;t" in written  # (Rich's Text drops BEL)


@pytest.mark.parametrize("as_json", [False, True])
def test_stats_follow_shows_controls(tmp_path: Path, as_json: bool) -> None:
    """``stats --follow`` prints each summary through the same boundary."""
    import queue
    import signal
    import subprocess
    import sys
    import threading

    path = native_file(tmp_path)
    flags = ["--json"] if as_json else []
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctx_inspect", "stats", "--follow", *flags, "--no-exact", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    lines: queue.Queue[bytes] = queue.Queue()
    assert proc.stdout is not None and proc.stderr is not None

    def read(stream: IO[bytes]) -> None:
        for line in stream:
            lines.put(line)

    threading.Thread(target=read, args=(proc.stdout,), daemon=True).start()
    seen = b""
    try:
        while b"zone crossings" not in seen and b'"zone_crossings"' not in seen:
            seen += lines.get(timeout=60)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    err = proc.stderr.read()
    assert b"Traceback" not in err
    text = seen.decode("utf-8")
    assert leaks(text) == []
    assert ("\\u001b]52;c;" if as_json else "␛]52;c;") in text
