"""What a tool call's arguments name: the paths in them and, for a shell tool, the command.

Arguments are read as JSON when they are JSON (else as text). A string under a key that names a
path (``path``, ``file_path``, ``notebook_path``, ...) is a path as it is, put on one line; any
other string is read for paths like a text (``paths.paths_in``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from ctx_inspect.core.facts.commands import call_command, is_shell_tool
from ctx_inspect.core.facts.lines import one_line
from ctx_inspect.core.facts.paths import paths_in

PATH_KEYS = frozenset(
    {
        "path",
        "paths",
        "file",
        "files",
        "file_path",
        "filepath",
        "filename",
        "target_file",
        "notebook_path",
        "old_path",
        "new_path",
        "source",
        "destination",
        "dir",
        "directory",
    }
)
_PATH_VALUE_CHARS = 300  # a path-keyed string this long or longer is read like a text


class CallFacts(NamedTuple):
    """What one call's arguments name."""

    paths: list[str] | None  # in order of mention, maybe repeated; None: no arguments
    decoded: bool  # the arguments were JSON (else ``paths`` is distinct already)
    command: str | None  # a shell tool's command, not blank


def call_facts(
    tool_name: str | None, arguments: str | None, read: Callable[[str], str] = str
) -> CallFacts:
    """The paths and command of a call of ``tool_name`` with ``arguments``. ``read`` gives
    what is read of a string that is read like a text (all of it by default)."""
    decoded, value = decoded_arguments(arguments)
    paths: list[str] | None = None
    if decoded:
        paths = []
        for key, string in json_strings(value):
            if key in PATH_KEYS and "\n" not in string and 0 < len(string) < _PATH_VALUE_CHARS:
                paths.append(one_line(string))
            else:
                paths.extend(paths_in(read(string)))
    elif isinstance(value, str):
        paths = paths_in(read(value))
    command = call_command(decoded, value) if is_shell_tool(tool_name) else None
    return CallFacts(paths, decoded, command)


def decoded_arguments(text: str | None) -> tuple[bool, Any]:
    """``(True, value)`` for JSON arguments, else ``(False, text)`` (``None`` when empty)."""
    if not text:
        return False, None
    try:
        return True, json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than the decoder goes
        return False, text


def json_strings(value: Any) -> Iterable[tuple[str | None, str]]:
    """Every string in a decoded JSON value, with the key it sits under."""
    stack: list[tuple[str | None, Any]] = [(None, value)]
    out: list[tuple[str | None, str]] = []
    while stack:
        key, current = stack.pop()
        if isinstance(current, str):
            out.append((key, current))
        elif isinstance(current, dict):
            stack.extend((str(k), v) for k, v in reversed(list(current.items())))
        elif isinstance(current, list):
            stack.extend((key, v) for v in reversed(current))
    return out
