"""Error lines: the lines of a text that say something failed.

A line is an error line when it holds one of the words ``_ERROR`` looks for ("error",
"exception", "traceback", "failed", "failure", "fatal", "panic", in any case, or a name such as
``IndexError``), is not a negation ("no errors", "0 failed", "without failures"), and holds two
runs of letters (not a banner such as ``=== FAILURES ===``). The line is given on one line,
without the banner rules around it (``=== 1 failed ===`` -> ``1 failed``): as a summary carries
it. A failed tool's output (``is_error``) gives its first line when no line looks like an error.

``error_lines`` reads a whole text; ``last_error_lines`` gives the last few distinct ones,
reading from the end (only as far back as it needs).
"""

from __future__ import annotations

import re
from itertools import accumulate

from ctx_inspect.core.facts.lines import one_line

_ERROR = re.compile(
    r"(?i:\b(?:errors?|exceptions?|traceback|failed|failures?|fatal|panic(?:ked)?)\b)"
    r"|[a-z](?:Error|Exception)\b"  # IndexError, NullPointerException
)
_NOT_ERROR = re.compile(
    r"\b(?:0|no|zero|without)\s+(?:errors?|exceptions?|failures?|failed)\b", re.IGNORECASE
)
_DECORATION = re.compile(r"^[=\-*#_~ ]{3,}|[=\-*#_~ ]{3,}$")
_RULE_CHARS = frozenset("=-*#_~ ")  # a line without one at either end has no banner rule
_TWO_WORDS = re.compile(r"[A-Za-z]+[^A-Za-z]+[A-Za-z]")  # at least two runs of letters
_ERROR_LOWER = re.compile(
    r"\b(?:errors?|exceptions?|traceback|failed|failures?|fatal|panic(?:ked)?)\b"
)  # ``_ERROR``'s case-insensitive part, for lower-cased ASCII text
_ERROR_CAMEL = re.compile(r"[a-z](?:Error|Exception)\b")  # and its case-sensitive part
_ERROR_WORDS = ("error", "exception", "traceback", "fail", "fatal", "panic")
_FOLDS_TO_ASCII = "\u0130\u0131\u017f\u212a"  # İ ı ſ K: IGNORECASE matches them to i, s, k


def is_error_line(line: str) -> bool:
    if not _has_error_word(line) or _NOT_ERROR.search(line):
        return False
    return _TWO_WORDS.search(line) is not None  # not a banner such as "=== FAILURES ==="


def _has_error_word(line: str) -> bool:
    """``_ERROR.search(line)``, faster on ASCII text (where its case-insensitive part matches
    exactly where its lower-case form matches the lower-cased line)."""
    if not line.isascii():
        return _ERROR.search(line) is not None
    return _ERROR_LOWER.search(line.lower()) is not None or _ERROR_CAMEL.search(line) is not None


def _undecorated(line: str) -> str:
    """A line without its banner rules (``=== 1 failed ===`` -> ``1 failed``)."""
    line = one_line(line)
    if line[:1] in _RULE_CHARS or line[-1:] in _RULE_CHARS:
        return _DECORATION.sub("", line)
    return line


def _negated(line: str) -> bool:
    """``_NOT_ERROR.search(line)`` for a line on one line: its only whitespace is single
    spaces, so an ASCII line (where ignoring case is lower-casing) can match only if its lower
    case holds "0 ", "no ", "zero " or "without "."""
    if line.isascii():
        low = line.lower()
        if "no " not in low and "0 " not in low and "zero " not in low and "without " not in low:
            return False
    return _NOT_ERROR.search(line) is not None


def _error_hit(raw: str) -> str:
    """The error line ``raw`` makes (undecorated, on one line), or ""."""
    if not _has_error_word(raw):
        return ""
    line = one_line(raw)
    if line[:1] in _RULE_CHARS or line[-1:] in _RULE_CHARS:
        line = _DECORATION.sub("", line)  # rules off its ends: still on one line
        if not line or not _has_error_word(line):
            return ""
    # ``is_error_line``, less what cannot change: spaces do not change what ``_ERROR`` finds
    return line if line and not _negated(line) and _TWO_WORDS.search(line) else ""


def _may_hold_error(low: str) -> bool:
    """Whether a lower-cased line holds one of ``_ERROR_WORDS``."""
    return (
        "error" in low
        or "fail" in low
        or "exception" in low
        or "traceback" in low
        or "fatal" in low
        or "panic" in low
    )


def error_lines(text: str, is_error: bool = False) -> list[str]:
    """The error lines of one part's text (a failed tool's first line when none looks like an
    error). A cheap filter first: every word ``_ERROR`` looks for holds one of
    ``_ERROR_WORDS`` in lower case, unless the text holds one of the four non-ASCII letters
    that its case-insensitive part also matches (then every line is tried)."""
    hits: list[str] = []
    lowered = text.lower()
    folds = any(c in text for c in _FOLDS_TO_ASCII)
    if folds or any(word in lowered for word in _ERROR_WORDS):
        # ``lower`` neither adds nor removes line breaks: the lines pair up
        for raw, low in zip(text.splitlines(), lowered.splitlines(), strict=True):
            if folds or _may_hold_error(low):
                hit = _error_hit(raw)
                if hit:
                    hits.append(hit)
    if not hits and is_error:
        hits = [line for line in map(_undecorated, text.splitlines()) if line][:1]
    return hits


def _may_repeat(hit: str, text: str, start: int) -> bool:
    """Whether an earlier line of ``text`` (before ``start``) may make the error line ``hit``
    too: every word of an error line lies within the raw line it comes from, so not when one of
    ``hit``'s words appears nowhere before (the longest is tried first, the likeliest)."""
    words = hit.split(" ")
    if text.find(max(words, key=len), 0, start) < 0:
        return False
    return all(text.find(word, 0, start) >= 0 for word in words)


# the line breaks of ``str.splitlines`` in ASCII text, less "\n"
_ASCII_BREAKS_BUT_LF = ("\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e")


def last_error_lines(text: str, is_error: bool, keep: int) -> list[str]:
    """``list(dict.fromkeys(error_lines(text, is_error)))[-keep:]``, read from the end.

    The last ``keep`` distinct error lines, each counted at its first occurrence: a line found
    from the end is a first occurrence when its longest word appears nowhere before it (every
    word of an error line lies within the raw line it comes from); when it does appear before,
    the whole text is read instead.
    """
    if text.isascii() and not any(c in text for c in _ASCII_BREAKS_BUT_LF):
        return _last_error_lines_lf(text, is_error, keep)
    lowered = text.lower()
    folds = any(c in text for c in _FOLDS_TO_ASCII)
    if not folds and not any(word in lowered for word in _ERROR_WORDS):
        return error_lines(text, is_error)  # no error line: at most the failed tool's line
    raw_lines = text.splitlines()
    starts = list(accumulate(map(len, text.splitlines(keepends=True)), initial=0))
    low_lines = lowered.splitlines()
    found: list[str] = []  # newest first
    for index in range(len(raw_lines) - 1, -1, -1):
        if not folds and not _may_hold_error(low_lines[index]):
            continue
        hit = _error_hit(raw_lines[index])
        if not hit:
            continue
        if hit in found or _may_repeat(hit, text, starts[index]):
            return list(dict.fromkeys(error_lines(text, is_error)))[-keep:]
        found.append(hit)
        if len(found) >= keep:
            break
    if not found:
        return error_lines(text, is_error)
    found.reverse()
    return found


_LONGEST_ERROR_WORD = max(map(len, _ERROR_WORDS))
_ERROR_WINDOW = 512  # characters searched for error words at first, from the end


def _last_error_lines_lf(text: str, is_error: bool, keep: int) -> list[str]:
    """``last_error_lines`` of an ASCII text whose only line break is "\n" (ASCII
    lower-casing keeps every offset): the lines that may hold an error are found from the end,
    by the last occurrence of each of ``_ERROR_WORDS`` before the line last read, searched in
    windows that widen backwards (the text is read only as far back as the lines it needs)."""
    lowered = text.lower()
    find = lowered.rfind
    found: list[str] = []  # newest first
    # ``last[i]``: the last occurrence of ``_ERROR_WORDS[i]`` in ``[low, bound)`` (-1: none),
    # where ``bound`` is the start of the line last read and ``[low, len(text))`` is searched
    low = len(text)
    bound = low
    last = [-1] * len(_ERROR_WORDS)
    window = _ERROR_WINDOW
    plain: bool | None = None  # whether the lines' only whitespace is single spaces, once asked
    while True:
        at = max(last)
        while at < 0 and low > 0:
            # widen the search; an occurrence may straddle the old edge ``low``
            high = min(bound, low + _LONGEST_ERROR_WORD - 1)
            low = max(0, low - window)
            window *= 2
            last = [find(word, low, high) for word in _ERROR_WORDS]
            at = max(last)
        if at < 0:
            break
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        hit = _error_hit(text[start:] if end < 0 else text[start:end])
        if hit:
            if hit in found or text.find(hit, 0, start) >= 0:
                return list(dict.fromkeys(error_lines(text, is_error)))[-keep:]
            # not before ``start`` as it is: when the lines hold no whitespace but single
            # spaces (no tab, no "\x1f", no two spaces in a row), a line is on one line already
            # but for a space at either end, so no line before makes ``hit`` (an error line is
            # its raw line on one line, or a part of it)
            if plain is None:
                plain = "  " not in text and "\t" not in text and "\x1f" not in text
            if not plain and _may_repeat(hit, text, start):
                return list(dict.fromkeys(error_lines(text, is_error)))[-keep:]
            found.append(hit)
            if len(found) >= keep:
                break
        bound = start
        low = min(low, bound)  # a line longer than the window: nothing searched before it
        for i, position in enumerate(last):
            if position >= start:  # in the line just read: look before it
                last[i] = find(_ERROR_WORDS[i], low, start)
    if not found:
        return error_lines(text, is_error)
    found.reverse()
    return found
