"""Transcript text as safe Rich ``Text``: content is data, never markup (DESIGN.md, decision 8).

This is the one place that turns text from a transcript into something the screen shows:

- no markup is interpreted: we only ever build ``Text(...)`` from strings, never
  ``Text.from_markup``, so ``[bold]x[/bold]`` is shown as those characters;
- control, format and invisible characters are shown visibly and never reach the terminal, with
  the forms of :mod:`ctx_inspect.safe_text` (the boundary headless output uses too): C0 controls as
  their Unicode control pictures (ESC ``\\x1b`` → ``␛``, BEL → ``␇``, NUL → ``␀``, CR → ``␍``),
  DEL as ``␡``, and C1 controls, bidirectional overrides, zero-width and tag characters, line and
  paragraph separators and lone surrogates as ``⟨U+XXXX⟩``; a whole escape sequence such as
  ``\\x1b[31m`` or an OSC 8 hyperlink is therefore displayed character by character, with no
  colour and no link;
- tabs are expanded to spaces (``tab_size``), newlines separate lines;
- long lines are either wrapped to a width (:func:`wrap`) or cut with an explicit count of what
  was left out (:func:`one_line`, :func:`to_text`).

The mapping from a control character to its visible form is one-to-one; :func:`restore` is its
inverse on text that did not already contain visible forms.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache

from rich.cells import cell_len, chop_cells, get_character_cell_size, set_cell_size
from rich.style import Style
from rich.text import Text

from ctx_inspect.safe_text import restore, visible, visible_form

__all__ = ["ELLIPSIS", "fit", "lines", "one_line", "restore", "sanitize_line", "to_text", "visible"]

ELLIPSIS = "…"
NEWLINE_FORM = visible_form("\n")  # ␊


def sanitize_line(line: str, *, tab_size: int = 4) -> str:
    """One line (no newline inside) made safe: controls visible, tabs expanded."""
    if "\n" in line:
        line = line.replace("\n", NEWLINE_FORM)
    return visible(line).expandtabs(tab_size)


def lines(text: str, *, tab_size: int = 4) -> list[str]:
    """``text`` split on newlines, each line made safe by :func:`sanitize_line`."""
    return [sanitize_line(line, tab_size=tab_size) for line in text.split("\n")]


def one_line(text: str, limit: int = 500, *, tab_size: int = 4) -> str:
    """The first ``limit`` characters of ``text`` as a single safe line (for table cells).

    Newlines show as ``␊``; only the first ``limit`` characters are ever looked at, so a huge
    string costs no more than a short one.
    """
    cut = len(text) > limit
    head = text[: max(0, limit - 1)] if cut else text
    safe = visible(head.expandtabs(tab_size), keep_layout=False)
    return safe + ELLIPSIS if cut else safe


def fit(text: str, width: int, *, align: str = "left") -> str:
    """A safe single line padded or cut (with ``…``) to exactly ``width`` cells."""
    if width <= 0:
        return ""
    safe = one_line(text, limit=width * 2 + 1)
    size = cell_len(safe)
    if size > width:
        return set_cell_size(safe, width - 1) + ELLIPSIS
    padding = " " * (width - size)
    return padding + safe if align == "right" else safe + padding


def wrap(line: str, width: int) -> list[str]:
    """Split an already safe line into rows for ``width`` cells, at spaces when it can.

    Joined, the rows give back ``line`` exactly: a row keeps the spaces after its last word (they
    may pass the width and are cropped on screen); a word longer than the width is cut.
    """
    width = max(1, width)
    if line.isascii() or _single_cells().issuperset(line):
        return [line] if len(line) <= width else _wrap_single_cells(line, width)
    return [line] if cell_len(line) <= width else _wrap_cells(line, width)


@cache
def _single_cells() -> frozenset[str]:
    """Characters one cell wide up to U+2BFF (Latin, Greek, Cyrillic, punctuation, arrows,
    symbols, box drawing, the control pictures): text made of them wraps by length."""
    return frozenset(
        char for char in map(chr, range(0x20, 0x2C00)) if get_character_cell_size(char) == 1
    )


def _wrap_single_cells(line: str, width: int) -> list[str]:
    rows: list[str] = []
    start, size = 0, len(line)
    while size - start > width:
        end = start + width
        cut = line.rfind(" ", start + 1, end + 1)
        stop = end if cut < 0 else cut + 1
        while stop < size and line[stop] == " ":
            stop += 1
        rows.append(line[start:stop])
        start = stop
    if start < size:
        rows.append(line[start:])
    return rows


_WORD = re.compile(r"[^ ]+ *| +")  # words end at plain spaces, as in the single-cell path


def _wrap_cells(line: str, width: int) -> list[str]:
    rows: list[str] = []
    current, used = "", 0
    for word in _WORD.findall(line):
        needed = cell_len(word.rstrip(" "))
        if used + needed <= width:
            current, used = current + word, used + cell_len(word)
            continue
        if current:
            rows.append(current)
        if needed <= width:
            current, used = word, cell_len(word)
        else:
            # a character wider than the rows makes Rich start with an empty piece: none is
            # kept (the character gets a row of its own)
            *whole, current = [piece for piece in chop_cells(word, width) if piece]
            rows.extend(whole)
            used = cell_len(current)
    if current:
        rows.append(current)
    return rows or [""]


def to_text(
    text: str,
    *,
    style: str | Style = "",
    tab_size: int = 4,
    max_line: int = 10_000,
    max_lines: int | None = None,
) -> Text:
    """``text`` as a multi-line Rich ``Text`` that is safe to render.

    Lines longer than ``max_line`` characters are cut with ``… (N more characters)``; past
    ``max_lines`` lines the rest is replaced by ``… N more lines``. Rich markup is never parsed.
    """
    raw_lines = text.split("\n")
    shown: Iterable[str] = raw_lines if max_lines is None else raw_lines[:max_lines]
    out: list[str] = []
    for raw in shown:
        if len(raw) > max_line:
            extra = len(raw) - max_line
            out.append(sanitize_line(raw[:max_line], tab_size=tab_size))
            out[-1] += f" {ELLIPSIS} ({extra:,} more characters)"
        else:
            out.append(sanitize_line(raw, tab_size=tab_size))
    if max_lines is not None and len(raw_lines) > max_lines:
        out.append(f"{ELLIPSIS} {len(raw_lines) - max_lines:,} more lines")
    return Text("\n".join(out), style=style, no_wrap=False, end="")
