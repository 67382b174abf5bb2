"""A tolerant reader of Node's ``util.inspect`` text (what ``console.log`` prints for an object).

``util.inspect`` output is not JSON: keys are bare identifiers (or single-quoted when they are
not identifiers), strings use single quotes (double quotes or backticks when the text holds a
single quote), ``undefined`` appears literally, objects nested deeper than ``depth`` (2 for
``console.log``) become ``[Object]`` / ``[Array]``, long arrays end in ``... N more items``,
long strings in ``... N more characters``, class instances carry a prefix (``Foo { ... }``,
``Map(2) { 'a' => 1 }``, ``Set(1) { 1 }``), and on a terminal every value is ANSI-coloured.

``parse_inspect`` turns such text into Python values: objects to ``dict``, arrays and sets to
``list``, ``undefined`` and ``null`` to ``None``, ``NaN`` / ``Infinity`` to floats, BigInts to
``int``; anything it recognises but cannot represent (``[Function: f]``, ``[Object]``,
``[Circular *1]``, ``Symbol(x)``, dates) becomes its text. It raises ``InspectError`` (with the
character offset) on text that is not an inspected value. ``is_complete`` tells whether the
brackets of a (possibly partial) text are balanced, for readers that gather a multi-line block.
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["ANSI_RE", "InspectError", "is_complete", "parse_inspect", "strip_ansi"]

# CSI sequences (colours and the like); ``util.inspect`` escapes ESC inside strings, so a raw
# ESC byte in its output is always markup.
ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")

_IDENT = re.compile(r"[A-Za-z_$][\w$]*")
_NUMBER = re.compile(r"-?(?:\d[\d_]*(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)n?")
_SPECIAL_BRACKET = re.compile(
    r"\[(?:Object|Array|Function|AsyncFunction|GeneratorFunction|AsyncGeneratorFunction|class|"
    r"Getter|Setter|Getter/Setter|Circular|String|Number|Boolean|Symbol|BigInt|Date|RegExp|"
    r"Error|[A-Z]\w*Error)\b[^\]\n]*\]"
)
_MORE = re.compile(r"\.\.\.\s*\d+\s+more\s+(?:items?|characters?|properties|bytes)")
# the characters of a string literal up to its closing quote or an escape, by quote
_PLAIN_RUN = {quote: re.compile(rf"[^{quote}\\]*") for quote in "'\"`"}
_DATE = re.compile(r"-?\d{4,6}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z")
_CLASS_PREFIX = re.compile(r"([A-Za-z_$][\w$.]*)(?:\s*\(\d+\))?(?:\s*\[[^\]\n]*\])?\s*(?=[{\[])")
_ESCAPES = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    "0": "\0",
}
_CLOSERS = ",}]"


class InspectError(ValueError):
    """The text is not a value ``util.inspect`` prints."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(f"{message} at character {offset}")
        self.offset = offset


def strip_ansi(text: str) -> str:
    return ANSI_RE.sub("", text) if "\x1b" in text else text


def is_complete(text: str) -> bool:
    """True when ``text`` opens at least one bracket and closes every one it opens.

    Quoted strings are skipped, so brackets inside them do not count.
    """
    depth = 0
    opened = False
    quote = ""
    escaped = False
    for ch in text:
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
            continue
        if ch in "'\"`":
            quote = ch
        elif ch in "{[":
            depth += 1
            opened = True
        elif ch in "}]":
            depth -= 1
            if depth < 0:
                return False
    return opened and depth == 0 and not quote


def parse_inspect(text: str) -> Any:
    """The value printed by ``util.inspect`` in ``text`` (ANSI colours are ignored)."""
    reader = _Reader(strip_ansi(text))
    value = reader.value()
    reader.skip_ws()
    if reader.pos != len(reader.text):
        raise InspectError("unexpected text after the value", reader.pos)
    return value


# ``util.inspect`` prints two levels (``console.log``), a few more when asked: text nested
# deeper is no output of it, and reading it would exhaust Python's recursion
MAX_DEPTH = 100


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.depth = 0  # objects and arrays open

    # -- helpers ----------------------------------------------------------------------------

    def skip_ws(self) -> None:
        text = self.text
        n = len(text)
        while self.pos < n and text[self.pos] in " \t\r\n":
            self.pos += 1

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, ch: str) -> None:
        self.skip_ws()
        if self.peek() != ch:
            found = repr(self.peek()) if self.peek() else "the end"
            raise InspectError(f"expected {ch!r}, found {found}", self.pos)
        self.pos += 1

    def skip_more(self) -> bool:
        """Skip a ``... N more items`` marker; True when one was there."""
        self.skip_ws()
        match = _MORE.match(self.text, self.pos)
        if match:
            self.pos = match.end()
            return True
        return False

    # -- values -----------------------------------------------------------------------------

    def value(self) -> Any:
        self.skip_ws()
        text = self.text
        start = self.pos
        ch = self.peek()
        if not ch:
            raise InspectError("expected a value, found the end", start)
        if ch == "{":
            return self.container("}")
        if ch == "[":
            special = _SPECIAL_BRACKET.match(text, start)
            if special:
                self.pos = special.end()
                return self.after_tag(special.group(0))
            return self.container("]")
        if ch in "'\"`":
            return self.string()
        if ch == "<":
            return self.angle()
        date = _DATE.match(text, start)
        if date:
            self.pos = date.end()
            return date.group(0)
        number = _NUMBER.match(text, start)
        if number and not _IDENT.match(text, number.end()):
            self.pos = number.end()
            return _number(number.group(0))
        if text.startswith("-Infinity", start):
            self.pos += len("-Infinity")
            return -math.inf
        prefix = _CLASS_PREFIX.match(text, start)
        if prefix:
            self.pos = prefix.end()
            return self.value()
        ident = _IDENT.match(text, start)
        if ident:
            word = ident.group(0)
            self.pos = ident.end()
            if word in ("undefined", "null"):
                return None
            if word == "true":
                return True
            if word == "false":
                return False
            if word == "NaN":
                return math.nan
            if word == "Infinity":
                return math.inf
            if self.peek() == "(":  # Symbol(x), [Function] text and the like
                return word + self.balanced("(", ")")
            return word
        raise InspectError(f"unexpected character {ch!r}", start)

    def after_tag(self, tag: str) -> Any:
        """``[Object: null prototype] {...}`` and boxed values carry their content after the tag."""
        self.skip_ws()
        if ":" in tag and self.peek() in "{[":
            return self.value()
        return tag

    def balanced(self, open_ch: str, close_ch: str) -> str:
        start = self.pos
        depth = 0
        text = self.text
        while self.pos < len(text):
            ch = text[self.pos]
            self.pos += 1
            if ch == open_ch:
                depth += 1
            elif ch == close_ch:
                depth -= 1
                if depth == 0:
                    return text[start : self.pos]
        raise InspectError(f"unclosed {open_ch!r}", start)

    def angle(self) -> Any:
        """``<ref *1> {...}``, ``<pending>``, ``<3 empty items>``."""
        start = self.pos
        end = self.text.find(">", start)
        if end < 0:
            raise InspectError("unclosed '<'", start)
        tag = self.text[start : end + 1]
        self.pos = end + 1
        if tag.startswith("<ref"):
            return self.value()
        return tag

    def string(self) -> str:
        pieces = [self.one_string()]
        while True:  # older Node split long strings: 'abc' +\n  'def'
            save = self.pos
            self.skip_ws()
            if self.peek() == "+":
                self.pos += 1
                self.skip_ws()
                if self.peek() in "'\"`":
                    pieces.append(self.one_string())
                    continue
            self.pos = save
            break
        save = self.pos
        if not self.skip_more():  # 'aaaa'... 9990 more characters
            self.pos = save
        return "".join(pieces)

    def one_string(self) -> str:
        text = self.text
        quote = text[self.pos]
        start = self.pos
        self.pos += 1
        run = _PLAIN_RUN[quote].match
        out: list[str] = []
        while True:
            plain = run(text, self.pos)
            end = plain.end() if plain else len(text)
            out.append(text[self.pos : end])
            if end >= len(text):
                raise InspectError("unterminated string", start)
            self.pos = end + 1
            if text[end] == quote:
                return "".join(out)
            out.append(self.escape())

    def escape(self) -> str:
        text = self.text
        if self.pos >= len(text):
            raise InspectError("unterminated escape", self.pos)
        ch = text[self.pos]
        self.pos += 1
        if ch in _ESCAPES:
            return _ESCAPES[ch]
        if ch == "x":
            digits = text[self.pos : self.pos + 2]
            self.pos += 2
            return _code_point(digits, self.pos)
        if ch == "u":
            if self.peek() == "{":
                end = text.find("}", self.pos)
                if end < 0:
                    raise InspectError("bad \\u{...} escape", self.pos)
                digits = text[self.pos + 1 : end]
                self.pos = end + 1
            else:
                digits = text[self.pos : self.pos + 4]
                self.pos += 4
            return _code_point(digits, self.pos)
        if ch == "\n":  # a line continuation
            return ""
        return ch  # \\ \' \" \` and anything else stand for themselves

    def key(self) -> tuple[str, bool]:
        """An object key; the flag is False when no key was there (a Set member follows)."""
        self.skip_ws()
        text = self.text
        start = self.pos
        ch = self.peek()
        if ch in "'\"`":
            key = self.string()
        elif text.startswith("[Symbol(", start):  # [Symbol(foo)]: 1
            key = self.balanced("[", "]")
        else:
            match = _IDENT.match(text, start) or _NUMBER.match(text, start)
            if not match:
                return "", False
            key = match.group(0)
            self.pos = match.end()
        self.skip_ws()
        if self.peek() == ":":
            self.pos += 1
            return key, True
        self.pos = start
        return "", False

    def container(self, close: str) -> Any:
        """An object (``close`` is ``}``) or an array (``]``)."""
        if self.depth >= MAX_DEPTH:
            raise InspectError(f"nested more than {MAX_DEPTH} levels deep", self.pos)
        self.depth += 1
        try:
            return self._container(close)
        finally:
            self.depth -= 1

    def _container(self, close: str) -> Any:
        text = self.text
        start = self.pos
        self.pos += 1
        is_object = close == "}"
        keyed: dict[str, Any] = {}
        items: list[Any] = []
        while True:
            self.skip_ws()
            ch = self.peek()
            if not ch:
                raise InspectError(f"unclosed {text[start]!r}", start)
            if ch == close:
                self.pos += 1
                break
            if self.skip_more():
                pass
            elif (
                ch == "<"
                and text.startswith("<", self.pos)
                and "empty item" in text[self.pos : self.pos + 40]
            ):
                self.angle()  # holes in a sparse array
            else:
                key, has_key = self.key()
                if has_key:
                    keyed[key] = self.value()
                else:
                    item = self.value()
                    self.skip_ws()
                    if text.startswith("=>", self.pos):  # a Map entry
                        self.pos += 2
                        keyed[_map_key(item)] = self.value()
                    else:
                        items.append(item)
            self.skip_ws()
            ch = self.peek()
            if ch == ",":
                self.pos += 1
            elif ch != close:
                found = repr(ch) if ch else "the end"
                raise InspectError(f"expected ',' or {close!r}, found {found}", self.pos)
        if is_object:
            if items and not keyed:
                return items  # a Set
            if items:
                keyed["__items__"] = items
            return keyed
        if keyed and not items:
            return keyed  # an array-like shown with its keys only
        return items


def _number(token: str) -> int | float:
    token = token.replace("_", "")
    if token.endswith("n"):
        return int(token[:-1])
    if any(c in token for c in ".eE"):
        return float(token)
    return int(token)


def _code_point(digits: str, pos: int) -> str:
    try:
        return chr(int(digits, 16))
    except ValueError:
        raise InspectError(f"bad escape \\{digits}", pos) from None


def _map_key(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)
