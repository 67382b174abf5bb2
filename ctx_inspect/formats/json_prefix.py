"""Reading JSON that may be cut short (the head of a file): complete values as they are, and of
a cut array or object its complete leading items."""

from __future__ import annotations

import json
import re
from typing import Any

_MISSING: Any = object()
_DECODER = json.JSONDecoder()
_WS = re.compile(r"[ \t\n\r]*")


def parse_prefix(text: str, max_depth: int = 8) -> Any:
    """Parse JSON that may be cut short: complete values as they are; a cut array or object keeps
    its complete leading items (and, recursively, what can be read of the cut one). None when
    nothing at the root can be read."""
    value, _, _ = _prefix(text, 0, max_depth)
    return None if value is _MISSING else value


def _skip_ws(text: str, pos: int) -> int:
    match = _WS.match(text, pos)
    return match.end() if match else pos


def _prefix(text: str, pos: int, depth: int) -> tuple[Any, int, bool]:
    pos = _skip_ws(text, pos)
    try:
        value, end = _DECODER.raw_decode(text, pos)
        return value, end, True
    except (ValueError, RecursionError):
        pass
    if depth <= 0 or pos >= len(text):
        return _MISSING, pos, False
    opener = text[pos]
    if opener == "[":
        return _prefix_array(text, pos + 1, depth)
    if opener == "{":
        return _prefix_object(text, pos + 1, depth)
    if opener == '"':
        return text[pos + 1 :], len(text), False  # a cut string: its raw start will do
    return _MISSING, pos, False


def _prefix_array(text: str, pos: int, depth: int) -> tuple[Any, int, bool]:
    items: list[Any] = []
    n = len(text)
    while True:
        pos = _skip_ws(text, pos)
        if pos < n and text[pos] == "]":
            return items, pos + 1, True
        item, pos, done = _prefix(text, pos, depth - 1)
        if item is not _MISSING:
            items.append(item)
        if not done:
            return items, pos, False
        pos = _skip_ws(text, pos)
        if pos < n and text[pos] == ",":
            pos += 1
            continue
        if pos < n and text[pos] == "]":
            return items, pos + 1, True
        return items, pos, False


def _prefix_object(text: str, pos: int, depth: int) -> tuple[Any, int, bool]:
    obj: dict[str, Any] = {}
    n = len(text)
    while True:
        pos = _skip_ws(text, pos)
        if pos < n and text[pos] == "}":
            return obj, pos + 1, True
        try:
            key, pos = _DECODER.raw_decode(text, pos)
        except ValueError:
            return obj, pos, False
        if not isinstance(key, str):
            return obj, pos, False
        pos = _skip_ws(text, pos)
        if pos >= n or text[pos] != ":":
            return obj, pos, False
        value, pos, done = _prefix(text, pos + 1, depth - 1)
        if value is not _MISSING:
            obj[key] = value
        if not done:
            return obj, pos, False
        pos = _skip_ws(text, pos)
        if pos < n and text[pos] == ",":
            pos += 1
            continue
        if pos < n and text[pos] == "}":
            return obj, pos + 1, True
        return obj, pos, False
