"""Facts are written on one line: a text's whitespace runs as one space, a command's first
line."""

from __future__ import annotations


def one_line(text: str) -> str:
    """Whitespace runs as one space, no leading or trailing space (``\\s`` and ``str.split``
    agree on what whitespace is)."""
    if text.isprintable() and "  " not in text and text[:1] != " " and text[-1:] != " ":
        return text  # one line already: the only whitespace a printable text holds is " "
    return " ".join(text.split())


def first_line(text: str, *, counted: bool = True) -> str:
    """The first line that is not blank, stripped ("" when every line is blank); with
    ``counted``, how many more there are after it (a command of several lines):
    ``"make (+2 more lines)"``."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if len(lines) <= 1 or not counted:
        return lines[0] if lines else ""
    return f"{lines[0]} (+{len(lines) - 1} more lines)"
