"""The summaries a compaction keeps, and which summarizer writes them.

Policies take a ``Summarizer`` (``ctx_inspect.core.policies.base``): anything with
``summarize(messages, budget_tokens) -> str``. Two exist:

- ``LocalSummarizer`` (here), the default: deterministic, offline, extractive. It keeps what
  compaction prompts ask an agent to keep (the task, the files, the commands, the errors and
  their fixes, the decisions, the next steps), one fact per line under a section header, and
  drops the least valuable lines until the text fits the budget.
- ``OpenAICompatibleSummarizer`` (``ctx_inspect.core.endpoint``): a server the user configured.

``summarizer_from_config`` chooses between them. Both raise before returning anything, so a
failed summary never leaves a half-built context: policies call ``summarize`` before they
change anything.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate, chain
from typing import Any, NamedTuple

from ctx_inspect.core.endpoint import MAX_TIMEOUT_SECONDS, OpenAICompatibleSummarizer
from ctx_inspect.core.estimate import Counter
from ctx_inspect.core.model import Message, MessageKind, Part, PartType, Role
from ctx_inspect.core.policies.base import Summarizer
from ctx_inspect.errors import ConfigError

__all__ = [
    "LocalSummarizer",
    "summarizer_from_config",
]


# --------------------------------------------------------------------------------------------
# Text helpers

_SPACES = re.compile(r"\s+")


def _one_line(text: str) -> str:
    """Whitespace runs as one space, no leading or trailing space (``\\s`` and ``str.split``
    agree on what whitespace is)."""
    if text.isprintable() and "  " not in text and text[:1] != " " and text[-1:] != " ":
        return text  # one line already: the only whitespace a printable text holds is " "
    return " ".join(text.split())


def _chars_over_four(text: str) -> int:
    """The default measure: a token per four characters, rounded up (never under-counts)."""
    return -(-len(text) // 4)


_CONTENT_TYPES = (PartType.TEXT, PartType.TOOL_RESULT, PartType.ATTACHMENT)
_ERROR_TYPES = (PartType.TEXT, PartType.TOOL_RESULT)  # the parts error lines are read from


def _content_texts(message: Message) -> list[str]:
    return [p.text for p in message.parts if p.type in _CONTENT_TYPES and p.text]


def _plain_texts(message: Message) -> list[str]:
    return [p.text for p in message.parts if p.type is PartType.TEXT and p.text]


def _tool_calls(message: Message) -> list[Part]:
    return [p for p in message.parts if p.type is PartType.TOOL_CALL]


def _parse_json(text: str | None) -> tuple[bool, Any]:
    if not text:
        return False, None
    try:
        return True, json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than the decoder goes
        return False, text


def _strings(value: Any) -> Iterable[tuple[str | None, str]]:
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


# --------------------------------------------------------------------------------------------
# What the local summarizer extracts

_EXTENSION_LIST = (
    "py pyi pyx js mjs cjs ts tsx jsx json jsonl md mdx rst txt toml yaml yml ini cfg conf go "
    "rs c h cc cpp cxx hpp cs java kt kts scala rb php pl swift m mm sh bash zsh fish ps1 bat "
    "fs fth 4th sql html htm css scss sass less vue svelte xml csv tsv log lock env mod sum "
    "gradle proto graphql tf lua r dart ex exs erl hs ml clj el vim ipynb png jpg jpeg gif svg "
    "pdf zip gz tgz tar db sqlite patch diff tcss"
)
_EXTENSIONS = frozenset(_EXTENSION_LIST.split())
_BARE_FILES = frozenset({"Makefile", "Dockerfile", "Justfile", "Gemfile", "Rakefile", "Procfile"})
_PATH_KEYS = frozenset(
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
_TOKEN = re.compile(r"[^\s'\"`()\[\]{}<>,;|=]+")
# ``_TOKEN``'s breaks other than whitespace, made spaces: ``split`` then gives the same tokens
_TOKEN_BREAKS = bytes.maketrans(b"'\"`()[]{}<>,;|=", b" " * 15)
_LINE_SUFFIX = re.compile(r"(?::\d+){1,2}$")
_PATH_CHARS = re.compile(r"[\w./~+@-]+")
_LETTER = re.compile(r"[A-Za-z]")
_TWO_LETTERS = re.compile(r"[A-Za-z]{2}")
_EMAIL = re.compile(r"^[^/]+@[^/]+\.[A-Za-z]+$")
_DOLLAR = re.compile(r"^\s*\$ (.+?)\s*$", re.MULTILINE)
_ERROR = re.compile(
    r"(?i:\b(?:errors?|exceptions?|traceback|failed|failures?|fatal|panic(?:ked)?)\b)"
    r"|[a-z](?:Error|Exception)\b"  # IndexError, NullPointerException
)
_NOT_ERROR = re.compile(
    r"\b(?:0|no|zero|without)\s+(?:errors?|exceptions?|failures?|failed)\b", re.IGNORECASE
)
_DECISION = re.compile(
    r"\b(decided|decide|decision|will|won't|instead|because|chose|choose|opted|going to|"
    r"i'll|we'll|prefer|rather than|switch(?:ed|ing)? to)\b",
    re.IGNORECASE,
)
_PLAN = re.compile(
    r"\b(todo|to-do|next|then|i will|i'll|we will|we'll|let's|need to|needs to|should|"
    r"remaining|left to|still|plan|going to)\b",
    re.IGNORECASE,
)
_LIST_ITEM = re.compile(r"^\s*(?:[-*•]\s+(?:\[[ xX]\]\s*)?|\d+[.)]\s+)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")
_DECORATION = re.compile(r"^[=\-*#_~ ]{3,}|[=\-*#_~ ]{3,}$")
_RULE_CHARS = frozenset("=-*#_~ ")  # a line without one at either end has no banner rule
_TWO_WORDS = re.compile(r"[A-Za-z]+[^A-Za-z]+[A-Za-z]")  # at least two runs of letters
_ERROR_LOWER = re.compile(
    r"\b(?:errors?|exceptions?|traceback|failed|failures?|fatal|panic(?:ked)?)\b"
)  # ``_ERROR``'s case-insensitive part, for lower-cased ASCII text
_ERROR_CAMEL = re.compile(r"[a-z](?:Error|Exception)\b")  # and its case-sensitive part
_ERROR_WORDS = ("error", "exception", "traceback", "fail", "fatal", "panic")
_FOLDS_TO_ASCII = "\u0130\u0131\u017f\u212a"  # İ ı ſ K: IGNORECASE matches them to i, s, k
_NEXT_LINE = re.compile(r"\s*(todo|next)\b", re.IGNORECASE)
_MIN_SENTENCE = 12
_ERRORS_PER_MESSAGE = 3


def _looks_like_path(token: str) -> bool:
    if not 2 <= len(token) <= 300 or "://" in token or not _PATH_CHARS.fullmatch(token):
        return False
    if _EMAIL.match(token) or not _LETTER.search(token):
        return False
    last = token.rstrip("/").rsplit("/", 1)[-1]
    stem, dot, ext = last.rpartition(".")
    has_ext = bool(dot and stem.strip(".") and ext in _EXTENSIONS)
    if "/" not in token:
        return has_ext or token in _BARE_FILES
    if token.startswith(("/", "./", "../", "~/")):
        segments = [s for s in token.split("/") if s not in ("", ".", "..", "~")]
        return any(_TWO_LETTERS.search(s) for s in segments)
    if has_ext or last in _BARE_FILES:
        return True
    segments = token.rstrip("/").split("/")
    return len(segments) >= 3 and all(len(s) >= 2 for s in segments)


def _without_line_suffix(token: str) -> str:
    """``_LINE_SUFFIX.sub("", token)`` for a token (a token holds no line break, before which
    ``$`` would match too): its last one or two ``:digits`` groups taken away (``\\d`` matches
    what ``isdecimal`` accepts)."""
    head, colon, digits = token.rpartition(":")
    if not colon or not digits.isdecimal():
        return token
    first, colon, digits = head.rpartition(":")
    return first if colon and digits.isdecimal() else head


_PATH_OF: dict[str, str] = {}  # the path ``_paths_in`` reads from a token, or "", bounded
# memo of ``_looks_like_path`` (a pure function), bounded: the tokens of one path with other
# ``:line`` suffixes (``src/a.py:12:``, ``src/a.py:40:``) read it once
_LOOKS_LIKE_PATH: dict[str, bool] = {}
_PATH_MEMO_SIZE = 65_536


def _path_of(token: str) -> str | None:
    """The path a token names (trailing punctuation and ``:line`` suffix removed), if any."""
    token = _without_line_suffix(token.strip(".:!?"))
    looks = _LOOKS_LIKE_PATH.get(token)
    if looks is None:
        if len(_LOOKS_LIKE_PATH) >= _PATH_MEMO_SIZE:
            _LOOKS_LIKE_PATH.clear()
        looks = _LOOKS_LIKE_PATH[token] = _looks_like_path(token)
    return token if looks else None


def _read_path(token: str) -> str:
    """The path a token names, as ``_paths_in`` reads it, or "" (most words: no path without a
    slash or an extension)."""
    if "/" not in token and "." not in token and token not in _BARE_FILES:
        return ""
    return _path_of(token) or ""


def _tokens(text: str) -> list[str]:
    """The tokens ``_TOKEN`` finds in ``text``: its breaks made spaces, then ``split``. The
    breaks are ASCII, so they are made spaces in the text's UTF-8 form, faster than by
    ``str.translate`` (no other character has an ASCII byte in UTF-8; "surrogatepass" keeps
    lone surrogates as they are, both ways)."""
    utf8 = text.encode("utf-8", "surrogatepass").translate(_TOKEN_BREAKS)
    return utf8.decode("utf-8", "surrogatepass").split()


# An ASCII text's bytes with its whitespace and ``_TOKEN``'s other breaks made spaces (its
# tokens are then the runs of other bytes, as ``split`` finds them) and a "/" for each
# character that makes a token worth reading (``_read_path``): a slash, a dot, or one of
# ``_BARE_FILES``'s first letters (each of them holds its own)
_ASCII_SPACES = bytes(c for c in range(128) if chr(c).isspace())
_FIRST_LETTERS = "".join(sorted({name[0] for name in _BARE_FILES})).encode()
_MARKED = bytes.maketrans(
    _ASCII_SPACES + b"'\"`()[]{}<>,;|=" + b"." + _FIRST_LETTERS,
    b" " * (len(_ASCII_SPACES) + 15) + b"/" * (1 + len(_FIRST_LETTERS)),
)
# A token found on its own costs about as much as splitting 40 characters: the tokens worth
# reading are found one by one in ASCII texts of at least ``_MARKED_MIN`` characters where
# they are fewer. The text's head tells at first (at most one marked character per
# ``_CHARS_PER_MARK`` in its first ``_MARKED_HEAD``), then the tokens found so far (at most
# one per ``_CHARS_PER_MARKED`` characters, past the first ``_MARKED_SLACK``).
_MARKED_MIN = 128
_MARKED_HEAD = 512
_CHARS_PER_MARK = 21
_CHARS_PER_MARKED = 40
_MARKED_SLACK = 160


def _marked_tokens(text: str) -> list[str] | None:
    """The tokens of an ASCII text that ``_read_path`` may read a path from, in order, among
    a few others (words with a bare file's first letter): the runs between the spaces around
    each "/" of its ``_MARKED`` form. None when they are too many (splitting costs less)."""
    marked = text.encode().translate(_MARKED)
    head = min(len(marked), _MARKED_HEAD)
    if marked.count(b"/", 0, head) * _CHARS_PER_MARK > head:
        return None
    find, rfind = marked.find, marked.rfind
    tokens: list[str] = []
    spent = -_MARKED_SLACK
    at = find(b"/")
    while at >= 0:
        end = find(b" ", at)
        if end < 0:
            tokens.append(text[rfind(b" ", 0, at) + 1 :])
            break
        tokens.append(text[rfind(b" ", 0, at) + 1 : end])
        spent += _CHARS_PER_MARKED
        if spent > end:
            return None
        at = find(b"/", end)
    return tokens


def _paths_in(text: str) -> list[str]:
    """The paths named in ``text``, each once, in the order of their latest mention (tokens as
    ``_TOKEN`` finds them): from the tokens worth reading alone where they are few
    (``_marked_tokens``), else from every distinct token, newest first."""
    memo = _PATH_OF
    tokens = _marked_tokens(text) if len(text) >= _MARKED_MIN and text.isascii() else None
    if tokens is not None:
        # the tokens not found here are words ``_read_path`` reads no path from
        try:
            latest = dict.fromkeys(map(memo.__getitem__, reversed(tokens)))
        except KeyError:  # a token read for the first time
            if len(memo) + len(tokens) > _PATH_MEMO_SIZE:
                memo.clear()
            read: dict[str, str] = {}  # not the memo itself, which another thread may clear
            for token in tokens:
                path = memo.get(token)
                if path is None:
                    path = memo[token] = _read_path(token)
                read[token] = path
            latest = dict.fromkeys(map(read.__getitem__, reversed(tokens)))
        latest.pop("", None)
        return list(reversed(latest))
    latest = {}
    for token in dict.fromkeys(reversed(_tokens(text))):
        if "/" not in token and "." not in token and token not in _BARE_FILES:
            continue  # most words: no path without a slash or an extension
        path = memo.get(token)
        if path is None:
            if len(memo) >= _PATH_MEMO_SIZE:
                memo.clear()
            path = memo[token] = _path_of(token) or ""
        if path and path not in latest:
            latest[path] = None
    return list(reversed(latest))


def _is_shell_tool(name: str | None) -> bool:
    if not name:
        return False
    lowered = name.lower()
    return lowered in _SHELL_TOOLS or "bash" in lowered or "shell" in lowered


def _command_in(parsed: bool, value: Any) -> str | None:
    """The command in a shell tool's arguments (``_parse_json``'s result)."""
    command: Any = None
    if parsed and isinstance(value, dict):
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
    return _first_line(command)


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if len(lines) <= 1:
        return lines[0] if lines else ""
    return f"{lines[0]} (+{len(lines) - 1} more lines)"


def _dash_item(line: str) -> bool:
    """Whether ``line`` starts with "- " and a character ``_LIST_ITEM`` would not take away
    too (a space or a check box): its marker is then exactly "- ", found faster."""
    return line.startswith("- ") and not line[2:3].isspace() and line[2:3] != "["


def _unlisted(line: str) -> str:
    """``line`` without its list marker (``- ``, ``* [x] ``, ``1. ``), stripped."""
    if _dash_item(line):
        return line[2:].strip()
    first = line.lstrip()[:1]
    if first in ("-", "*", "•") or first.isdecimal():
        line = _LIST_ITEM.sub("", line)
    return line.strip()


def _sentences(text: str) -> list[str]:
    out: list[str] = []
    for line in text.splitlines():
        line = _unlisted(line)
        if line:
            out.extend(s.strip() for s in _SENTENCE_END.split(line) if s.strip())
    return out


def _is_error_line(line: str) -> bool:
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
    line = _one_line(line)
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
    line = _one_line(raw)
    if line[:1] in _RULE_CHARS or line[-1:] in _RULE_CHARS:
        line = _DECORATION.sub("", line)  # rules off its ends: still on one line
        if not line or not _has_error_word(line):
            return ""
    # ``_is_error_line``, less what cannot change: spaces do not change what ``_ERROR`` finds
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


def _error_lines(text: str, is_error: bool) -> list[str]:
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


def _last_error_lines(text: str, is_error: bool, keep: int) -> list[str]:
    """``list(dict.fromkeys(_error_lines(text, is_error)))[-keep:]``, read from the end.

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
        return _error_lines(text, is_error)  # no error line: at most the failed tool's line
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
            return list(dict.fromkeys(_error_lines(text, is_error)))[-keep:]
        found.append(hit)
        if len(found) >= keep:
            break
    if not found:
        return _error_lines(text, is_error)
    found.reverse()
    return found


_LONGEST_ERROR_WORD = max(map(len, _ERROR_WORDS))
_ERROR_WINDOW = 512  # characters searched for error words at first, from the end


def _last_error_lines_lf(text: str, is_error: bool, keep: int) -> list[str]:
    """``_last_error_lines`` of an ASCII text whose only line break is "\n" (ASCII
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
                return list(dict.fromkeys(_error_lines(text, is_error)))[-keep:]
            # not before ``start`` as it is: when the lines hold no whitespace but single
            # spaces (no tab, no "\x1f", no two spaces in a row), a line is on one line already
            # but for a space at either end, so no line before makes ``hit`` (an error line is
            # its raw line on one line, or a part of it)
            if plain is None:
                plain = "  " not in text and "\t" not in text and "\x1f" not in text
            if not plain and _may_repeat(hit, text, start):
                return list(dict.fromkeys(_error_lines(text, is_error)))[-keep:]
            found.append(hit)
            if len(found) >= keep:
                break
        bound = start
        low = min(low, bound)  # a line longer than the window: nothing searched before it
        for i, position in enumerate(last):
            if position >= start:  # in the line just read: look before it
                last[i] = find(_ERROR_WORDS[i], low, start)
    if not found:
        return _error_lines(text, is_error)
    found.reverse()
    return found


def _is_heading(line: str) -> bool:
    line = line.strip()
    return line.endswith(":") and len(line) <= 40


@dataclass(frozen=True)
class _Section:
    key: str
    header: str
    weight: float  # a line's value is its section's weight plus its recency in the section


# Our own wording. Output order is this order; the weights say what goes first when the budget
# is short (commands before files, files before decisions, ..., the first request last).
_SECTIONS: tuple[_Section, ...] = (
    _Section("task", "Task (what the user asked):", 5.0),
    _Section("earlier", "Carried over from an earlier summary:", 4.5),
    _Section("files", "Files touched:", 2.5),
    _Section("commands", "Commands run:", 2.0),
    _Section("errors", "Errors and what was done about them:", 3.5),
    _Section("decisions", "Decisions and their reasons:", 3.0),
    _Section("next", "Where it stopped, next steps:", 4.0),
)
_FIRST_REQUEST_BONUS = 100.0


# What is read of a long text: its head and its tail. Facts cluster at the ends of tool outputs
# (the command's first lines, the error and the summary line at the end); the middle of a long
# listing repeats itself. Cuts fall on line breaks (else on a space) within these windows.
SCAN_HEAD_CHARS = 4_000
SCAN_TAIL_CHARS = 2_000


def _scanned(text: str) -> str:
    """``text`` when it is at most ``SCAN_HEAD_CHARS + SCAN_TAIL_CHARS`` characters long, else
    its head and tail (whole lines when the windows hold a line break) joined by a line break."""
    head, tail = SCAN_HEAD_CHARS, SCAN_TAIL_CHARS
    if len(text) <= head + tail:
        return text
    first = text[:head]
    cut = first.rfind("\n")
    if cut < 0:
        cut = first.rfind(" ")
    if cut > 0:
        first = first[:cut]
    last = text[len(text) - tail :] if tail > 0 else ""
    cut = last.find("\n")
    if cut < 0:
        cut = last.find(" ")
    if cut >= 0:
        last = last[cut + 1 :]
    return f"{first}\n{last}"


class _Facts(NamedTuple):
    """What one message contributes to a summary (see ``_message_facts``)."""

    kind: str  # "meta" (nothing but its text as an assistant's), "summary" or "message"
    earlier: tuple[str, ...] = ()  # an earlier summary's lines
    request: str = ""  # a user's request, on one line
    files: tuple[str, ...] = ()  # one line each, distinct, in order of their latest mention
    commands: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()  # the last few distinct error lines
    decisions: tuple[str, ...] = ()  # in order, repeats included
    said: bool = False  # an assistant's message with text (what ``resolution`` can read)
    resolution: str = ""  # its first sentence that is not an error line nor a heading
    text: str = ""  # an assistant's text (for the next steps, read from the last one)


def _latest(lines: list[str]) -> list[str]:
    """Each line once, at its latest place (in the order of their latest mention)."""
    return list(reversed(dict.fromkeys(reversed(lines))))


def _distinct_lines(lines: Iterable[str], *, one_line: bool = True) -> tuple[str, ...]:
    """One-line forms, without empty ones, each once at its latest place (``_latest`` over
    them). ``one_line=False``: the lines are in that form already."""
    ordered: dict[str, None] = {}
    for line in lines:
        if one_line:
            line = _one_line(line)
        if line:
            ordered.pop(line, None)
            ordered[line] = None
    return tuple(ordered)


def _resolution(text: str) -> str:
    for line in text.splitlines():
        if line.strip() and not _is_error_line(line) and not _is_heading(line):
            sentences = _sentences(line)
            return sentences[0] if sentences else ""
    return ""


def _carried_over(text: str) -> tuple[str, ...]:
    """What an earlier summary's text carries over: its lines without list markers, less the
    empty ones and the headings (lines that end with a colon), on one line each, distinct."""
    lines = (_unlisted(line) for line in text.splitlines())
    return _distinct_lines(line for line in lines if line and not line.endswith(":"))


def _then(first: tuple[str, ...], then: tuple[str, ...]) -> tuple[str, ...]:
    """``_distinct_lines(first + then)`` for two tuples of distinct one-line lines."""
    if not first:
        return then
    later = set(then)
    return (*(line for line in first if line not in later), *then)


def _summary_lines(text: str, rendered: Mapping[str, tuple[str, ...]] | None) -> tuple[str, ...]:
    """``_carried_over(text)``, taken from ``rendered`` when ``text`` ends with a summary this
    summarizer wrote (after a prefix that ends a line: a policy's header)."""
    if rendered:
        for summary, lines in rendered.items():
            if text.endswith(summary):
                prefix = text[: len(text) - len(summary)]
                if not prefix or prefix.endswith("\n"):
                    return _then(_carried_over(prefix), lines)
    return _carried_over(text)


def _message_facts(
    message: Message, rendered: Mapping[str, tuple[str, ...]] | None = None
) -> _Facts:
    """One message's facts, from the head and tail of each long text (``_scanned``); an
    earlier summary is read whole (it is facts already), and so are a user's request and a
    tool call's arguments (decoded as JSON; their long strings scanned like texts)."""
    said = False
    resolution = text = ""
    if message.role is Role.ASSISTANT:
        text = _scanned("\n".join(_plain_texts(message)))
        said = bool(text.strip())
        resolution = _resolution(text) if said else ""
    if message.kind is MessageKind.META:
        return _Facts("meta", said=said, resolution=resolution, text=text)
    if message.kind is MessageKind.SUMMARY:
        earlier: tuple[str, ...] = ()
        for content in _content_texts(message):
            earlier = _then(earlier, _summary_lines(content, rendered))
        return _Facts("summary", earlier=earlier, said=said, resolution=resolution, text=text)
    request = ""
    if message.role is Role.USER and message.kind is MessageKind.MESSAGE:
        request = _one_line(" ".join(_plain_texts(message)))
    # the paths found, in pieces; one piece from ``_paths_in`` alone is distinct already
    pieces: list[list[str]] = []
    mixed = False  # a piece from a tool call's decoded arguments (not distinct)
    commands: list[str] = []
    error_texts: list[tuple[str, bool]] = []  # (scanned text, is_error) of each error source
    reads_errors = message.role is not Role.SYSTEM and message.role is not Role.DEVELOPER
    for part in message.parts:
        if part.type in _CONTENT_TYPES and part.text:
            content = _scanned(part.text)
            pieces.append(_paths_in(content))
            if "$" in content and "$ " in content:  # a character is found faster
                commands.extend(match.group(1) for match in _DOLLAR.finditer(content))
            if reads_errors and part.type in _ERROR_TYPES:
                error_texts.append((content, part.is_error))
    for call in _tool_calls(message):
        parsed, value = _parse_json(call.arguments)
        if parsed:
            piece: list[str] = []
            for key, string in _strings(value):
                if key in _PATH_KEYS and "\n" not in string and 0 < len(string) < 300:
                    piece.append(_one_line(string))
                else:
                    piece.extend(_paths_in(_scanned(string)))
            pieces.append(piece)
            mixed = True
        elif isinstance(value, str):
            pieces.append(_paths_in(_scanned(value)))
        if _is_shell_tool(call.tool_name):
            command = _command_in(parsed, value)
            if command:
                commands.append(command)
    errors: tuple[str, ...] = ()
    if len(error_texts) == 1:
        errors = tuple(_last_error_lines(*error_texts[0], _ERRORS_PER_MESSAGE))
    elif error_texts:
        found: list[str] = []
        for content, is_error in error_texts:
            found.extend(_error_lines(content, is_error))
        errors = tuple(list(dict.fromkeys(found))[-_ERRORS_PER_MESSAGE:])
    decisions: tuple[str, ...] = ()
    if message.role is Role.ASSISTANT:
        decisions = tuple(
            sentence
            for sentence in _sentences(text)
            if len(sentence) >= _MIN_SENTENCE and _DECISION.search(sentence)
        )
    if len(pieces) == 1 and not mixed:
        files = tuple(pieces[0])  # one ``_paths_in``: distinct, none empty
    else:
        files = _distinct_lines(chain.from_iterable(pieces), one_line=False)
    return _Facts(
        "message",
        (),
        request,
        files,
        _distinct_lines(commands) if commands else (),
        errors,
        decisions,
        said,
        resolution,
        text,
    )


def _fingerprint(message: Message) -> tuple[object, ...]:
    """What ``_message_facts`` reads of a message, as lengths and hashes (strings cache their
    hash, so this is cheap; it keeps no text alive)."""
    return (
        message.id,
        message.role,
        message.kind,
        tuple(
            [
                (p.type, len(p.text), hash(p.text), hash(p.arguments), p.is_error, p.tool_name)
                for p in message.parts
            ]
        ),
    )


_CHECK_BOXES = ("[ ]", "[x]", "[X]")  # what ``_LIST_ITEM`` takes away after a list marker


class _DropPlan(NamedTuple):
    """How ``LocalSummarizer.summarize`` drops lines when the budget is short, for given
    section sizes (it depends on nothing else; lines are counted section after section)."""

    order: list[int]  # the lines, the least valuable first
    owners: list[int]  # the section of each line of ``order``
    costs: list[int]  # what dropping each line of ``order`` takes off the rendering, less the line
    frame: int  # the rendering's length less its lines


# the plans for summaries of up to ``_PLANNED_LINES`` lines, by their section sizes
_PLANS: dict[tuple[int, ...], _DropPlan] = {}
_PLANS_SIZE = 512
_PLANNED_LINES = 256


def _drop_plan(sizes: tuple[int, ...]) -> _DropPlan:
    """The ``_DropPlan`` for sections of these sizes.

    A line's value is its section's weight plus its recency in the section; the first request
    gets a bonus. The least valuable go first, then on equal values the later section, then
    the older line: the lines are listed in that last order (the sections from the last, each
    oldest first), and sorting keeps the order of equal values, so sorting by value alone is
    enough (floats compare faster than tuples).

    The rendering: a block per section with lines, its header then "\n- " and a line per
    line, the blocks separated by "\n\n". A section's values grow with recency, so its newest
    line is the last of it to go, and its header and a "\n\n" go with it (another section is
    still shown, unless no line is left, when the count is all the lines whatever the
    length). The task's newest line is not its last one: the first request goes last of all.
    """
    known = _PLANS.get(sizes)
    if known is not None:
        return known
    values: list[float] = []
    owner: list[int] = []  # the section of each line
    emptied: dict[int, int] = {}  # the newest line of each section but the task: the header's cost
    for s_index, (section, size) in enumerate(zip(_SECTIONS, sizes, strict=True)):
        weight, share = section.weight, size + 1
        values += [weight + (p + 1) / share for p in range(size)]
        owner += [s_index] * size
        if size and s_index:
            emptied[len(values) - 1] = len(section.header) + 2
    if sizes[0]:  # the first request (the task is the first section)
        values[0] += _FIRST_REQUEST_BONUS
    listed: list[int] = []
    end = len(values)
    for size in reversed(sizes):
        listed += range(end - size, end)
        end -= size
    order = sorted(listed, key=values.__getitem__)
    shown = [section for section, size in zip(_SECTIONS, sizes, strict=True) if size]
    plan = _DropPlan(
        order,
        [owner[index] for index in order],
        [3 + emptied.get(index, 0) for index in order],  # with "- " and the line's break
        3 * len(order) + sum(len(section.header) for section in shown) + 2 * (len(shown) - 1),
    )
    if len(order) <= _PLANNED_LINES:
        if len(_PLANS) >= _PLANS_SIZE:
            _PLANS.clear()
        _PLANS[sizes] = plan
    return plan


def _fewest_dropped(plan: _DropPlan, texts: Sequence[str], budget_tokens: int) -> int:
    """The fewest lines to drop (in ``plan.order``) so that the rendering fits the budget under
    the default measure, a token per four characters: the rendering's length is kept as lines
    are dropped, without rendering (what ``summarize``'s search finds by rendering)."""
    limit = 4 * budget_tokens  # the longest rendering within the budget
    length = plan.frame + sum(map(len, texts))
    if length <= limit:
        return 0
    dropped = 0
    for index, cost in zip(plan.order, plan.costs, strict=True):
        length -= len(texts[index]) + cost
        dropped += 1
        if length <= limit:
            break
    return dropped


def _next_steps(last: str) -> list[str]:
    next_steps: list[str] = []
    for line in last.splitlines():
        if not line.strip() or _is_heading(line):
            continue
        if _dash_item(line):
            next_steps.append(_one_line(line[2:]))
            continue
        if _LIST_ITEM.match(line) or _NEXT_LINE.match(line):
            next_steps.append(_one_line(_LIST_ITEM.sub("", line)))
            continue
        next_steps.extend(
            s for s in _sentences(line) if len(s) >= _MIN_SENTENCE and _PLAN.search(s)
        )
    if not next_steps:
        sentences = _sentences(last)
        if sentences:
            next_steps.append(f"last said: {sentences[-1]}")
    return list(dict.fromkeys(_one_line(s) for s in next_steps if s.strip()))


def _extract(
    messages: Sequence[Message], facts_of: Callable[[Message], _Facts] = _message_facts
) -> dict[str, list[str]]:
    facts = [facts_of(m) for m in messages]
    requests: list[str] = []
    # every mention, in order (each fact's lines are on one line and not empty)
    earlier: list[str] = []
    files: list[str] = []
    commands: list[str] = []
    errors: list[str] = []
    decisions: list[str] = []
    summaries = 0  # the facts ``earlier`` comes from

    fixes: list[str] = []  # what each error was followed by, once one is met
    for index, fact in enumerate(facts):
        if fact.kind == "meta":
            continue
        if fact.kind == "summary":
            earlier += fact.earlier
            summaries += 1
            continue
        if fact.request:
            requests.append(fact.request)
        files += fact.files
        commands += fact.commands
        if fact.errors:
            if not fixes:
                fixes = _fixes(facts)
            errors += fact.errors[:-1]
            last_error = fact.errors[-1]
            errors.append(
                _one_line(f"{last_error} → {fixes[index]}") if fixes[index] else last_error
            )
        if fact.decisions:
            decisions.extend(filter(None, map(_one_line, fact.decisions)))

    last = next((f.text for f in reversed(facts) if f.said), "")
    next_steps = _next_steps(last) if last else []
    planned = set(next_steps)

    task = []
    if requests:
        task.append(f"first: {requests[0]}")
        later = list(dict.fromkeys(r for r in requests[1:] if r != requests[0]))
        task.extend(f"then: {r}" for r in later)
    return {
        "task": task,
        # one summary's lines are distinct already
        "earlier": earlier if summaries <= 1 else _latest(earlier),
        "files": _latest(files),
        "commands": _latest(commands),
        "errors": _latest(errors),
        "decisions": [d for d in _latest(decisions) if d not in planned] if decisions else [],
        "next": next_steps,
    }


def _fixes(facts: Sequence[_Facts]) -> list[str]:
    """What each message was followed by: the first sentence of the next assistant message
    with text (what an error line is followed by in the summary)."""
    fixes = [""] * len(facts)
    fix = ""
    for index in range(len(facts) - 1, -1, -1):
        fixes[index] = fix
        if facts[index].said:
            fix = facts[index].resolution
    return fixes


def forget_memos() -> None:
    """Empty the memos every summarizer in the process shares (paths read from tokens, drop
    plans), as in a new process: for a figure of a first summary, and for tests."""
    _PATH_OF.clear()
    _LOOKS_LIKE_PATH.clear()
    _PLANS.clear()


class LocalSummarizer:
    """An extractive summary, offline and deterministic (the same messages give the same text).

    ``counter`` measures the budget (anything with ``count(text) -> int``); without one a token
    is four characters, rounded up. Lines are whole facts: when the budget is short the least
    valuable lines go first (within a section, the oldest); a line is cut only when it is the
    last one left and alone longer than the budget.
    """

    CACHE_SIZE = 16_384  # messages whose facts are kept
    RENDERED_SIZE = 8  # summaries written last, with the lines they carry over

    def __init__(self, counter: Counter | None = None) -> None:
        self._counter = counter
        self._facts: dict[tuple[object, ...], _Facts] = {}
        self._rendered: dict[str, tuple[str, ...]] = {}

    def _facts_of(self, message: Message) -> _Facts:
        """A message's facts, cached by its id and a fingerprint of its content (replays in a
        sweep summarize the same messages many times)."""
        key = _fingerprint(message)
        facts = self._facts.get(key)
        if facts is None:
            if len(self._facts) >= self.CACHE_SIZE:
                del self._facts[next(iter(self._facts))]  # the oldest entry
            facts = self._facts[key] = _message_facts(message, self._rendered)
        return facts

    def measure(self, text: str) -> int:
        if not text:
            return 0
        return self._counter.count(text) if self._counter is not None else _chars_over_four(text)

    def summarize(self, messages: Sequence[Message], budget_tokens: int) -> str:
        if budget_tokens <= 0:
            return ""
        extracted = _extract(messages, self._facts_of)
        sections = [extracted[section.key] for section in _SECTIONS]  # each oldest first
        texts = list(chain.from_iterable(sections))  # every line, section after section
        if not texts:
            if not messages:
                return ""
            # nothing to extract (e.g. a conversation a log does not show): say so, briefly,
            # rather than return nothing, which agents treat as a failed compaction
            note = f"(summary of {len(messages)} messages: no task, file, command or error found)"
            return note if self.measure(note) <= budget_tokens else note[: budget_tokens * 4]
        plan = _drop_plan(tuple(map(len, sections)))
        order = plan.order

        def kept(dropped: int) -> list[list[str]]:
            """Each section's lines less the first ``dropped`` of ``order``.

            Within a section the values grow with recency, so the lines ``order`` takes from
            a section first are its oldest: a section keeps its newest lines. The first
            request is the exception: its bonus puts it last of all, after the task's other
            lines."""
            if not dropped:
                return sections
            taken = plan.owners[:dropped]
            lines = [items[taken.count(s_index) :] for s_index, items in enumerate(sections)]
            count = taken.count(0)
            if 0 < count < len(sections[0]):
                lines[0] = [sections[0][0], *sections[0][count + 1 :]]
            return lines

        def render(lines: list[list[str]]) -> str:
            return "\n\n".join(
                "\n- ".join([section.header, *body])  # "- " per line
                for section, body in zip(_SECTIONS, lines, strict=True)
                if body
            )

        if self._counter is None:
            low = _fewest_dropped(plan, texts, budget_tokens)
            if low < len(texts):
                lines = kept(low)
                return self._remember(render(lines), lines)
            return self._cut(texts[order[-1]], budget_tokens)
        low, high = 0, len(texts)  # the fewest lines to drop so that the text fits
        while low < high:
            middle = (low + high) // 2
            if self.measure(render(kept(middle))) <= budget_tokens:
                high = middle
            else:
                low = middle + 1
        while low < len(texts) and self.measure(render(kept(low))) > budget_tokens:
            low += 1  # a real tokenizer is not always monotone in removed lines
        if low < len(texts):
            lines = kept(low)
            return self._remember(render(lines), lines)
        return self._cut(texts[order[-1]], budget_tokens)

    def _remember(self, summary: str, sections: Sequence[Sequence[str]]) -> str:
        """Keep what ``summary`` (the rendering of ``sections``' lines) will carry over when it
        is summarized in turn (its lines are known: no need to read it again):
        ``_carried_over(summary)``.

        A line is rendered as ``"- " + text``, where ``text`` is on one line and not empty
        (every fact is), so it carries over as ``text`` itself (``_unlisted``), unless it
        starts with a check box (``[x] ...``) that ``_unlisted`` takes away with the dash, or
        it ends with a colon (a heading, left out).
        """
        lines = list(chain.from_iterable(sections))
        odd = [text for text in lines if text[0] == "[" or text[-1] == ":"]
        # ``_unlisted`` takes a check box away, but leaves a line that starts with another "["
        if any(text[:3] in _CHECK_BOXES or text[-1] == ":" for text in odd):
            carried = []
            for text in lines:
                if text[0] == "[":
                    text = _unlisted("- " + text)
                    if not text:
                        continue
                if text[-1] != ":":
                    carried.append(text)
            lines = carried
        if len(self._rendered) >= self.RENDERED_SIZE:
            del self._rendered[next(iter(self._rendered))]
        # each line once, at its latest place (``_distinct_lines``)
        self._rendered[summary] = tuple(reversed(dict.fromkeys(reversed(lines))))
        return summary

    def _cut(self, text: str, budget_tokens: int) -> str:
        """The one line left, alone, cut to the budget when it is longer."""
        if self.measure(text) <= budget_tokens:
            return text
        low, high = 0, len(text)  # the longest prefix that fits with its ellipsis
        while low < high:
            middle = (low + high + 1) // 2
            if self.measure(text[:middle].rstrip() + "…") <= budget_tokens:
                low = middle
            else:
                high = middle - 1
        if low == 0:
            return ""
        return text[:low].rstrip() + "…"


# --------------------------------------------------------------------------------------------
# Configuration

SUMMARIZER_KEYS: tuple[str, ...] = (
    "summarizer",
    "summarizer_base_url",
    "summarizer_model",
    "summarizer_api_key_env",
    "summarizer_timeout",
    "summarizer_retries",
    "summarizer_max_tokens",
)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _bad(key: str, expected: str, value: object) -> ConfigError:
    return ConfigError("Invalid summarizer setting", f"{key}: expected {expected}, got {value!r}")


def _text(config: Mapping[str, object], key: str) -> str:
    value = config.get(key)
    if value is None:
        raise ConfigError(
            "Invalid summarizer setting", f'{key} is required when summarizer = "openai"'
        )
    if not isinstance(value, str) or not value.strip():
        raise _bad(key, "a non-empty string", value)
    return value.strip()


def summarizer_from_config(config: Mapping[str, object]) -> Summarizer:
    """The summarizer the configuration asks for (``summarizer = "local"`` by default).

    Keys: ``summarizer`` (``"local"`` or ``"openai"``), and for ``"openai"``
    ``summarizer_base_url``, ``summarizer_model``, ``summarizer_api_key_env`` (the NAME of the
    environment variable that holds the key), ``summarizer_timeout`` (seconds: the most one
    summary takes, all attempts included), ``summarizer_retries`` and
    ``summarizer_max_tokens``. Other keys are left to their owners; an unknown
    ``summarizer_*`` key is an error.
    """
    for key in config:
        if key.startswith("summarizer") and key not in SUMMARIZER_KEYS:
            close = difflib.get_close_matches(key, SUMMARIZER_KEYS, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(
                "Invalid summarizer setting",
                f"unknown setting {key!r}{hint}; known: {', '.join(SUMMARIZER_KEYS)}",
            )
    kind = config.get("summarizer", "local")
    if kind == "local":
        return LocalSummarizer()
    if kind != "openai":
        raise _bad("summarizer", "'local' or 'openai'", kind)

    base_url = _text(config, "summarizer_base_url")
    model = _text(config, "summarizer_model")

    api_key_env = config.get("summarizer_api_key_env")
    if api_key_env is not None and (
        not isinstance(api_key_env, str) or not _ENV_NAME.fullmatch(api_key_env)
    ):
        # Never echo the value: it may be the key itself, pasted in the wrong place.
        raise ConfigError(
            "Invalid summarizer setting",
            "summarizer_api_key_env must be the NAME of an environment variable (letters, "
            "digits and underscores, e.g. OPENAI_API_KEY), not the key itself",
        )

    timeout = config.get("summarizer_timeout", 60)
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or not 0 < timeout <= MAX_TIMEOUT_SECONDS
    ):
        raise _bad(
            "summarizer_timeout",
            f"a number of seconds > 0 and at most {MAX_TIMEOUT_SECONDS:g}",
            timeout,
        )

    retries = config.get("summarizer_retries", 2)
    if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= 10:
        raise _bad("summarizer_retries", "an integer from 0 to 10", retries)

    max_tokens = config.get("summarizer_max_tokens")
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens <= 0
    ):
        raise _bad("summarizer_max_tokens", "an integer > 0", max_tokens)

    return OpenAICompatibleSummarizer(
        base_url,
        model,
        api_key_env=api_key_env,
        timeout=float(timeout),
        retries=retries,
        max_tokens=max_tokens,
    )
