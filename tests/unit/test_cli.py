"""The headless command line as a user runs it: output, JSON contract, errors and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ctx_inspect.cli import main

REQUIRED_KEYS = {
    "format",
    "profile",
    "tokenizer",
    "context_window",
    "items_total",
    "parse_issues",
    "peak_context_tokens",
    "peak_context_source",
    "compactions",
    "prunes",
    "final_turns",
    "dropped_tool_outputs",
}


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctx_inspect", *args], capture_output=True, text=True, timeout=120
    )


def stats_json(path: Path, *extra: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["stats", "--json", *extra, str(path)]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


@pytest.fixture
def chat(tmp_path: Path) -> Path:
    path = tmp_path / "chat.json"
    path.write_text(
        json.dumps(
            [
                {"role": "system", "content": "You are a careful assistant."},
                {"role": "user", "content": "List the files."},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "ls", "arguments": '{"path": "."}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": "a.py\nb.py\n" * 50},
                {"role": "assistant", "content": "There are two files."},
            ]
        )
    )
    return path


def test_stats_json_has_the_contract_keys_and_exact_counts(chat: Path, capsys) -> None:
    data = stats_json(chat, capsys=capsys)
    assert data.keys() >= REQUIRED_KEYS
    assert data["format"] == "openai-chat"
    assert data["profile"] == "generic"
    assert data["parse_issues"] == 0
    assert data["peak_context_source"] == "exact"
    assert "o200k_base" in data["tokenizer"] or data["tokenizer"].startswith("approximate")
    rows = {(r["role"], r["kind"]): r for r in data["messages"]}
    assert rows[("tool", "tool_result")]["count"] == 1
    # two requests; the context now holds every message, the final answer included
    assert data["steps"] == 2
    assert data["peak_context_tokens"] == sum(r["tokens"] for r in data["messages"])
    assert data["peak_step"] == 3


def test_profile_and_set_change_the_arithmetic(chat: Path, capsys) -> None:
    data = stats_json(
        chat,
        "--profile",
        "aiagent",
        "--set",
        "context_window=200000",
        "--set",
        "max_output_tokens=50000",
        capsys=capsys,
    )
    assert data["profile"] == "aiagent"
    assert data["context_window"] == 200_000
    assert data["effective_limit"] == 141_808


def test_stats_text_output_is_plain_when_piped(chat: Path) -> None:
    result = run_cli("stats", str(chat))
    assert result.returncode == 0, result.stderr
    assert "\x1b[" not in result.stdout
    assert "openai-chat" in result.stdout
    assert "peak context" in result.stdout


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"this is not json, just a note\nsecond line\n", "unknown format"),
        (b"\x00\x01\x02\x03binary\x00\xff" * 200, "binary file"),
        (b'{"something": "else", "entirely": 1}\n', "unknown format"),
    ],
)
def test_unreadable_input_is_one_line_and_exit_2(
    tmp_path: Path, content: bytes, expected: str
) -> None:
    path = tmp_path / "input.dat"
    path.write_bytes(content)
    result = run_cli("stats", str(path))
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert expected in lines[0]
    assert "Traceback" not in result.stderr


def test_missing_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = run_cli("stats", str(tmp_path / "nope.jsonl"))
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert "not found" in result.stderr


def test_unknown_profile_and_bad_setting_are_one_line_errors(chat: Path) -> None:
    for args in (("--profile", "aiagnet"), ("--set", "context_window=lots")):
        result = run_cli("stats", *args, str(chat))
        assert result.returncode == 2, result
        assert len(result.stderr.strip().splitlines()) == 1
        assert "Traceback" not in result.stderr


def test_a_malformed_line_is_a_parse_issue_not_a_failure(tmp_path: Path, capsys) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text(
        '{"role": "user", "content": "hello"}\n'
        "{not json at all\n"
        '{"role": "assistant", "content": "hi there"}\n'
    )
    data = stats_json(path, capsys=capsys)
    assert data["parse_issues"] == 1
    assert data["issues"][0]["line"] == 2
    assert data["messages_total"] == 2


def test_an_empty_file_is_a_valid_empty_session(tmp_path: Path, capsys) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    data = stats_json(path, capsys=capsys)
    assert data["items_total"] == 0
    assert data["parse_issues"] == 0
    assert data["peak_context_tokens"] == 0


def test_formats_and_profiles_list_everything(capsys) -> None:
    assert main(["formats", "--json"]) == 0
    names = {row["name"] for row in json.loads(capsys.readouterr().out)}
    assert {"native", "openai-chat", "anthropic-messages"} <= names
    assert main(["profiles", "--json"]) == 0
    profiles = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert {
        "baseagent",
        "opencode",
        "guide",
        "aiagent",
        "goagent",
        "fifth",
        "claude-code",
        "codex",
        "generic",
    } <= profiles.keys()


def test_demo_runs_and_shows_every_kind_of_event(capsys) -> None:
    assert main(["demo", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["format"] == "native"
    assert data["parse_issues"] == 0
    assert len(data["compactions"]) == 1
    assert len(data["prunes"]) == 1
    assert data["dropped_tool_outputs"] == 1
    assert data["final_turns"][0]["reason"] == "context"
    zones = [c["to"] for c in data["zone_crossings"]]
    assert "warning" in zones


def test_stats_follow_prints_a_new_summary_after_each_change(tmp_path: Path) -> None:
    import signal
    import time

    path = tmp_path / "live.jsonl"
    path.write_text('{"role": "user", "content": "hello"}\n')
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ctx_inspect",
            "stats",
            "--follow",
            "--json",
            "--no-exact",
            str(path),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())
        assert first["messages_total"] == 1
        with path.open("a") as fh:
            fh.write('{"role": "assistant", "content": "hi th')  # a partial line is held
            fh.flush()
            time.sleep(0.3)
            fh.write('ere"}\n')
        second = json.loads(proc.stdout.readline())
        assert second["messages_total"] == 2
        assert second["steps"] == 1
        assert second["parse_issues"] == 0
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    assert proc.returncode in (0, 130)
    assert "Traceback" not in (proc.stderr.read() if proc.stderr else "")


def test_a_mistyped_command_or_a_missing_file_never_opens_the_dashboard(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["statz", "x.jsonl"]) == 2
    assert "unknown command: 'statz' (did you mean `ctx-inspect stats`?)" in capsys.readouterr().err
    assert main([str(tmp_path / "missing.jsonl")]) == 2
    assert "file not found" in capsys.readouterr().err


def test_without_a_terminal_the_dashboard_is_not_started(
    capsys: pytest.CaptureFixture[str], chat: Path
) -> None:
    """Under pytest standard output is captured (not a terminal): the dashboard would draw
    into a pipe and wait for keys that never come."""
    assert main([str(chat)]) == 2
    err = capsys.readouterr().err
    assert "no terminal" in err and "ctx-inspect stats" in err


def test_a_long_path_stays_on_one_line_when_piped(
    capsys: pytest.CaptureFixture[str], chat: Path, tmp_path: Path
) -> None:
    deep = tmp_path / ("d" * 90) / ("e" * 90)
    deep.mkdir(parents=True)
    target = deep / "session-with-a-long-name.json"
    target.write_bytes(chat.read_bytes())
    assert main(["stats", "--no-exact", str(target)]) == 0
    assert str(target) in capsys.readouterr().out.splitlines()
