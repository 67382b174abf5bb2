"""File paths named in a text: the tokens that look like paths.

A token is a run of characters between whitespace, quotes, brackets, commas, semicolons, "|" and
"=" (``_TOKEN``). It names a path, once its trailing ".:!?" and its ``:line`` or ``:line:col``
suffix are taken away, when it looks like one (``_looks_like_path``): a name with a known
extension or a bare file name (``Makefile``); an absolute, ``./``, ``../`` or ``~/`` path with a
segment of two letters; a relative path to a file with an extension or a bare file name, or of
three segments or more of two characters or more each (``web/src/components``, not ``and/or``).
Never a URL or an e-mail address.

``paths_in`` gives each path once, in the order of their latest mention. It is fast where it
matters: what a token names is remembered (bounded memos, ``forget_memos`` empties them), and
in a long ASCII text where tokens worth reading are sparse they are found one by one instead of
splitting the whole text.
"""

from __future__ import annotations

import re

_EXTENSION_LIST = (
    "py pyi pyx js mjs cjs ts tsx jsx json jsonl md mdx rst txt toml yaml yml ini cfg conf go "
    "rs c h cc cpp cxx hpp cs java kt kts scala rb php pl swift m mm sh bash zsh fish ps1 bat "
    "fs fth 4th sql html htm css scss sass less vue svelte xml csv tsv log lock env mod sum "
    "gradle proto graphql tf lua r dart ex exs erl hs ml clj el vim ipynb png jpg jpeg gif svg "
    "pdf zip gz tgz tar db sqlite patch diff tcss"
)
_EXTENSIONS = frozenset(_EXTENSION_LIST.split())
_BARE_FILES = frozenset({"Makefile", "Dockerfile", "Justfile", "Gemfile", "Rakefile", "Procfile"})

_TOKEN = re.compile(r"[^\s'\"`()\[\]{}<>,;|=]+")
# ``_TOKEN``'s breaks other than whitespace, made spaces: ``split`` then gives the same tokens
_TOKEN_BREAKS = bytes.maketrans(b"'\"`()[]{}<>,;|=", b" " * 15)
_LINE_SUFFIX = re.compile(r"(?::\d+){1,2}$")
_PATH_CHARS = re.compile(r"[\w./~+@-]+")
_LETTER = re.compile(r"[A-Za-z]")
_TWO_LETTERS = re.compile(r"[A-Za-z]{2}")
_EMAIL = re.compile(r"^[^/]+@[^/]+\.[A-Za-z]+$")


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


_PATH_OF: dict[str, str] = {}  # the path ``paths_in`` reads from a token, or "", bounded
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
    """The path a token names, as ``paths_in`` reads it, or "" (most words: no path without a
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


def paths_in(text: str) -> list[str]:
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


def forget_memos() -> None:
    """Empty the memos of what tokens name, as in a new process."""
    _PATH_OF.clear()
    _LOOKS_LIKE_PATH.clear()
