"""Commands: the lines of a text that show one run at a shell prompt (``$ make test``), and the
command a shell tool call ran (its arguments: ``{"command": "make test"}``, ``["bash", "-lc",
"make test"]``, ...)."""

from __future__ import annotations

import re
from typing import Any

_COMMAND_KEYS = ("command", "cmd", "script", "commandLine", "command_line")
_SHELL_TOOLS = frozenset(
    {
        "bash",
        "sh",
        "zsh",
        "shell",
        "exec",
        "exec_command",
        "execute",
        "execute_command",
        "run",
        "run_command",
        "run_shell_command",
        "run_terminal_cmd",
        "terminal",
        "local_shell",
        "container.exec",
        "powershell",
        "cmd",
        "command",
    }
)
_DOLLAR = re.compile(r"^\s*\$ (.+?)\s*$", re.MULTILINE)


def command_lines(text: str) -> list[str]:
    """The commands of the ``$ `` prompt lines of ``text``, in order, as written."""
    if "$" not in text or "$ " not in text:  # a character is found faster
        return []
    return [match.group(1) for match in _DOLLAR.finditer(text)]


def is_shell_tool(name: str | None) -> bool:
    if not name:
        return False
    lowered = name.lower()
    return lowered in _SHELL_TOOLS or "bash" in lowered or "shell" in lowered


def call_command(decoded: bool, value: Any) -> str | None:
    """The command in a shell tool's arguments (``calls.decoded_arguments``' result), not
    blank; None when they hold none."""
    command: Any = None
    if decoded and isinstance(value, dict):
        for key in _COMMAND_KEYS:
            if key in value:
                command = value[key]
                break
    elif isinstance(value, list | str):
        command = value
    if isinstance(command, list) and all(isinstance(c, str) for c in command):
        if len(command) >= 3 and command[1] in ("-c", "-lc") and command[0].endswith("sh"):
            command = command[-1]
        else:
            command = " ".join(command)
    if not isinstance(command, str) or not command.strip():
        return None
    return command
