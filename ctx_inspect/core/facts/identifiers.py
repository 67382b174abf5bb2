"""Identifiers: the names a text holds in snake_case, camelCase or PascalCase
(``read_records``, ``parseLine``, ``HttpServer``; not ``HTTPServer`` nor a plain word).

Why the search can skip most of a text. A regular expression tries every position of the text,
slowly, unless it starts with a plain character (then it jumps from one occurrence of that
character to the next) or a character class (it steps over the characters outside). Every match
of ``_IDENTIFIER`` is a whole word (``\\w+``) holding "_" or a capital A-Z: the identifiers are
what ``_IDENTIFIER`` finds in each such word taken alone. Such a word is its head (before its
first "_", say) and the rest: the rest is a match of ``_\\w*+``, and the head is what
``_([^\\W_]*+)(?!\\w)`` takes in the reversed text (reversed). Each word holding "_" gives one
of each, in order: they pair.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Iterable

_IDENTIFIER = re.compile(
    r"\b(?:[a-z]+(?:_[a-z0-9]+)+|[a-z]+(?:[A-Z][a-z0-9]+)+|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+)\b"
)
_Stretch = tuple[str | None, re.Pattern[str], re.Pattern[str]]
# (the character the word holds, its rest, its head reversed)
_UNDERSCORE_WORDS: _Stretch = ("_", re.compile(r"_\w*+"), re.compile(r"_([^\W_]*+)(?!\w)"))
_CAPITAL_WORDS: _Stretch = (None, re.compile(r"[A-Z]\w*+"), re.compile(r"[A-Z]([^\WA-Z]*+)(?!\w)"))
_APART = "\0"  # in no word


def identifiers_in(text: str) -> set[str]:
    """The identifiers of ``text``, each once."""
    # No capital A-Z when lowering changes nothing.
    words = (_UNDERSCORE_WORDS,) if text.lower() == text else (_UNDERSCORE_WORDS, _CAPITAL_WORDS)
    found: set[str] = set()
    for word in _stretches(words, text, text[::-1]):
        found.update(_IDENTIFIER.findall(word))
    return found


def _stretches(kinds: Iterable[_Stretch], text: str, reversed_text: str) -> set[str]:
    """The distinct stretches of ``text`` of each kind, each its head joined to its rest."""
    out: set[str] = set()
    for char, rest, head_reversed in kinds:
        if char is not None and char not in text:
            continue
        heads = head_reversed.findall(reversed_text)
        if not heads:
            continue
        # Reversed all at once, the heads read as they do in ``text``, and in its order.
        heads = _APART.join(heads)[::-1].split(_APART)
        tails = rest.findall(text)
        if len(heads) != len(tails):
            raise AssertionError("a stretch without its head")  # never, by construction
        out.update(map(operator.add, heads, tails))
    return out
