"""The facts' detectors: each faster way against a plainly written reference, and what each
kind takes and leaves.

``extract`` finds what the plain rules find: the paths its tokens name, the ``$`` prompt lines'
commands, the lines ``errors._error_hit`` accepts, the identifiers ``_IDENTIFIER`` finds. The
fast ways (tokens found one by one where they are sparse, memos, error lines read from the end,
identifiers found word by word) are held to the same output on tricky texts and generated
ones."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctx_inspect.core.facts import (
    Fact,
    FactKind,
    errors,
    extract,
    fact_texts,
    identifiers,
    message_fact_texts,
    paths,
)
from ctx_inspect.core.facts.errors import error_lines, last_error_lines
from ctx_inspect.core.facts.paths import paths_in
from ctx_inspect.core.model import Message, MessageKind, Part, PartType, Role

_DOLLAR_LINE = re.compile(r"^\s*\$ (.+?)\s*$", re.MULTILINE)


def reference(text: str) -> set[Fact]:
    """The facts of ``text`` by the plain rules."""
    found = {Fact(FactKind.PATH, path) for path in reference_paths(text)}
    for match in _DOLLAR_LINE.finditer(text):
        command = " ".join(match.group(1).split())
        if command:
            found.add(Fact(FactKind.COMMAND, command))
    for line in text.splitlines():
        hit = reference_error_hit(line)
        if hit:
            found.add(Fact(FactKind.ERROR, hit[:160]))
    for match in identifiers._IDENTIFIER.finditer(text):
        found.add(Fact(FactKind.IDENTIFIER, match.group(0)))
    return found


def of_kind(found: set[Fact], kind: FactKind) -> set[str]:
    return {f.text for f in found if f.kind is kind}


TRICKY = [
    "",
    "\n",
    "\n\n\r\n",
    "error",
    "ERROR",
    "Error: boom\r\nok\r\nValueError\r\n",
    "myerror here\nerrors are plural\nerror_code=3\nterror!",
    "errorerror\nexceptional\nNullPointerException",
    "not found\nnot  found\nnot\tfound\nnot\nfound\nnotfound\nnot founder",
    "segmentation fault (core dumped)\nsegmentation  fault",
    "could not\ncouldnot\ncannot\ncan not\nundefined\nundefinedness\nfataly\n fatal ",
    "  \t  Traceback (most recent call last):\n  File x\nKeyError: 'a'",
    "line one\nFAILED tests/test_a.py::test_b - assert 1 == 2\nline three",
    "permission denied\ndenied.\n_denied\ndenied_\npanic!\npanicked",
    "ÉRROR and érror and ſegmentation fault and İndefined and ıgnored failure",
    "Kelvin: FATAL, ɑerror, error\u00a0x, error\u200bx, errorα, αerror",
    "x" * 300 + " error " + "y" * 300,
    "error at the end",
    "at the start: error",
    "src/a.py src/a.py: ./b.py ../c/d.go ~/e/f.rs /usr/lib/g.so a//b http://h.io/i.js",
    "x.py. y.md, z.toml; w.lock: v.txt/ /tmp/ / . .. ... ./ ../ ~/ ~",
    "a.b.c/d.e-f@g+h/~i  dir/sub.dir/file.tar.gz  pkg@1.2.3/lib  +x/y  -a/b.c",
    "name.pyc x.pyx y.py2 z.py_ q.ts.d w.tsx",
    "_/x __init__.py _private/a.py a/_b c-d/e_f.py é/ü.py αβ/γ.md 1/2 12.py",
    "read_records parse_line_buffer camelCase PascalCaseName HTTPServer ab_ _ab a_b_c x1_y2",
    "getURL toJSON iPhone Abc aB abC ABc a_B a_1 a__b a_b_ é_a a_é readRecordsNow_x",
    "$ pytest -q\n> make build\n# rm -rf x\n  $   ls -la  \n$x\n$ a\n$\n ls",
    '{"command": "make\\nbuild"} {"cmd":"ls -la"} {"command": ""} {"cmd": "a"}',
    '{"command": "make\nbuild", "cmd" :  "echo \\"hi\\""}',
    "C:\\Users\\x\\file.py and C:/Users/x/file.py",
    "\u2028error\u2028x\u0085error\x0cerror\x0bfailed\x1cfatal",
    "tab\terror\ttab\r\rcarriage error\r",
    "🙂 error 🙂\n🙂/x.py 🙂_a emoji_b 𝒳rror",
]


@pytest.mark.parametrize("text", TRICKY)
def test_tricky_texts_give_the_reference_facts(text: str) -> None:
    assert extract(text) == reference(text)


def test_the_tricky_texts_hold_every_kind_and_tell_near_misses_apart() -> None:
    """So that the comparison above compares something."""
    found = set().union(*(reference(text) for text in TRICKY))
    assert all(of_kind(found, kind) for kind in FactKind)
    # a word inside another, a word alone, a negation, a banner and its rules, a class name
    text = "myerror here\nERROR\nno errors\n=== FAILURES ===\n=== 1 failed, 2 passed ===\n"
    text += "IndexError: x"
    errors_found = of_kind(extract(text), FactKind.ERROR)
    assert errors_found == {"1 failed, 2 passed", "IndexError: x"}
    assert of_kind(extract("a\r\nError:  x\r\nb"), FactKind.ERROR) == {"Error: x"}
    assert of_kind(extract("ſome failure here"), FactKind.ERROR) == {"ſome failure here"}
    # a path with its line number, a bare file name, a folder of three; not a word pair
    text = "src/a.py:12: x, see Makefile in web/src/components a//b and/or user@host.com"
    assert of_kind(extract(text), FactKind.PATH) == {"src/a.py", "Makefile", "web/src/components"}
    assert of_kind(extract("$ make  test\n> npm run\n# Heading"), FactKind.COMMAND) == {"make test"}
    assert of_kind(extract("camelCase snake_case Plain ab_ HTTPServer"), FactKind.IDENTIFIER) == {
        "camelCase",
        "snake_case",
    }


# Texts made of pieces that sit near the edges of the patterns.
_PIECES = [
    "error",
    "Error",
    "ERROR",
    "Exception",
    "traceback",
    "FAILED",
    "failure",
    "fatal",
    "panic",
    "denied",
    "not found",
    "not",
    "found",
    "cannot",
    "could not",
    "undefined",
    "segmentation fault",
    "src/a.py",
    "./b.go",
    "~/c",
    "../d.md",
    "/e",
    "x.toml",
    "a//b",
    "read_records",
    "camelCase",
    "PascalCase",
    "HTTPServer",
    "$ ls",
    "> make",
    "# rm x",
    '"command": "',
    '"cmd":"',
    "\\",
    '"',
    ": ",
    "\n",
    "\r\n",
    " ",
    "\t",
    ".",
    "/",
    "_",
    "-",
    "@",
    "+",
    "~",
    ",",
    ";",
    "ſ",
    "ı",
    "İ",
    "K",
    "é",
    "α",
    "🙂",
    "\u2028",
    "\x85",
]
_ALPHABET = 'aAeErRoOxX_./-@+~:;,$>#"\\ \t\r\n0123456789ſıİKéα🙂\u2028\x85'
_texts = st.one_of(
    st.text(alphabet=_ALPHABET, max_size=80),
    st.lists(
        st.one_of(st.sampled_from(_PIECES), st.text(alphabet=_ALPHABET, max_size=3)), max_size=30
    ).map("".join),
)


@settings(max_examples=600, deadline=None)
@given(_texts)
@example("not found")
@example("x/error.py\nErrorCode_x")
def test_generated_texts_give_the_reference_facts(text: str) -> None:
    assert extract(text) == reference(text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_any_text_gives_the_reference_facts(text: str) -> None:
    assert extract(text) == reference(text)


def test_fact_texts_are_extracts_texts_by_kind() -> None:
    text = TRICKY[-6] + "\n" + TRICKY[4] + "\n" + TRICKY[-9]
    by_kind = fact_texts(text)
    assert set(by_kind) == set(FactKind)
    assert {Fact(kind, value) for kind, values in by_kind.items() for value in values} == (
        extract(text)
    )


def test_a_messages_facts_add_its_calls_paths_and_command() -> None:
    arguments = '{"command": ["bash", "-lc", "make  test\\nmake lint"], "path": "docs/a b.md"}'
    call = Message(
        id="c",
        role=Role.ASSISTANT,
        kind=MessageKind.TOOL_CALL,
        parts=(Part(type=PartType.TOOL_CALL, tool_name="bash", call_id="c", arguments=arguments),),
    )
    found = message_fact_texts(call)
    assert "make test" in found[FactKind.COMMAND]  # the command's first line
    assert "docs/a b.md" in found[FactKind.PATH]  # a path-keyed value as it is
    assert found[FactKind.PATH] >= fact_texts(call.text)[FactKind.PATH]
    not_a_shell = call.model_copy(
        update={"parts": (call.parts[0].model_copy(update={"tool_name": "read_file"}),)}
    )
    assert message_fact_texts(not_a_shell)[FactKind.COMMAND] == set()


def test_lowering_keeps_each_character_where_the_error_words_need_it() -> None:
    """The cheap filter before error lines are read looks for the words in ``text.lower()``:
    it relies on every character the case-blind pattern takes for a letter of the words
    lowering to that letter, except for the few (``_FOLDS_TO_ASCII``) whose texts are read
    line by line whatever they hold."""
    everything = "".join(chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c < 0xE000)
    folds = set(errors._FOLDS_TO_ASCII)
    for letter in set("".join(errors._ERROR_WORDS)):
        takes = set(re.findall(letter, everything, re.IGNORECASE))
        assert letter in takes
        assert {ch for ch in takes if ch.lower() != letter} <= folds


@pytest.mark.corpus
def test_real_samples_give_the_reference_facts(corpus: Path) -> None:
    files = [p for p in sorted(corpus.rglob("*")) if p.is_file()]
    assert files
    for path in files:
        text = path.read_bytes()[:200_000].decode("utf-8", errors="replace")
        assert extract(text) == reference(text), path


# -- error lines read from the end -------------------------------------------------------------


ERROR_LINES = [
    "Error: x",
    "Error:  x",
    "=== Error: x ===",
    "no errors",
    "0 failed, 3 passed",
    "TypeError: bad",
    "ok",
    "___error thing",
    "FA\u0130LED now",
    "Traceback (most recent call last):",
    "src/a.py:1: error in a",
    "",
    "\tError:\tx",
    # the longest word of these is in the others: only a shorter one tells them apart
    "module_configuration error in alpha",
    "module_configuration error in beta",
    "module_configuration error in alpha!",
    "a fatal error: module_configuration",
    "nothing to see in this long line of module_configuration text",
    "errorless failing panicky words",
]


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.sampled_from(ERROR_LINES), max_size=14),
    st.sampled_from(["\n", "\r\n", "\u2028", "\n\n"]),
    st.booleans(),
    st.booleans(),
    st.integers(1, 4),
    st.sampled_from([1, 3, 8, 40, 512]),
)
def test_the_last_error_lines_read_from_the_end_are_the_distinct_last_ones(
    lines: list[str],
    separator: str,
    is_error: bool,
    trailing: bool,
    keep: int,
    window: int,
) -> None:
    # ASCII text broken by "\n" alone is read from the end in windows: small ones here make
    # the search widen, and cross lines longer than a window
    body = separator.join(lines) + (separator if trailing else "")
    expected = list(dict.fromkeys(error_lines(body, is_error)))[-keep:]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(errors, "_ERROR_WINDOW", window)
        assert last_error_lines(body, is_error, keep) == expected


# the same error line with other spacing, and lines with the same words in another order
SPACED_ERROR_LINES = [
    "parse error in alpha",
    "parse  error in alpha",
    "parse\terror in alpha",
    "parse\x1ferror in alpha",
    " parse error in alpha ",
    "=== parse error in alpha ===",
    "alpha in parse error",
    "in alpha parse error",
    "parse error in",
    "error in alpha",
    "all good",
]


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.sampled_from(SPACED_ERROR_LINES), max_size=12),
    st.booleans(),
    st.integers(1, 4),
)
def test_an_error_line_met_again_with_other_spacing_counts_once(
    lines: list[str], is_error: bool, keep: int
) -> None:
    body = "\n".join(lines)
    expected = list(dict.fromkeys(error_lines(body, is_error)))[-keep:]
    assert last_error_lines(body, is_error, keep) == expected


def test_a_cut_line_whose_words_all_come_earlier_is_read_from_the_end() -> None:
    # a head and a tail joined: the tail's first line is cut, its words are all in earlier
    # lines, but no earlier line is it
    head = "\n".join(f"src/m{i}.py:{i}: parse error value retry" for i in range(30))
    body = f"{head}\n... (truncated) ...\nvalue retry parse error\nsrc/z.py:99: fatal error here"
    assert last_error_lines(body, False, 3) == [
        "src/m29.py:29: parse error value retry",
        "value retry parse error",
        "src/z.py:99: fatal error here",
    ]
    # the same line earlier with other spacing: it counts there, before the last three
    for space in ("  ", "\t", "\x1f", " \t "):
        spaced = body.replace(
            "src/m3.py:3: parse error value retry", f"value{space}retry parse error"
        )
        assert last_error_lines(spaced, False, 3) == [
            "src/m28.py:28: parse error value retry",
            "src/m29.py:29: parse error value retry",
            "src/z.py:99: fatal error here",
        ]
    assert last_error_lines(body, False, 3) == list(dict.fromkeys(error_lines(body, False)))[-3:]


def test_the_last_error_lines_of_a_long_output_come_from_its_end() -> None:
    filler = "\n".join(f"src/mod{i}.py:{i}: all good here" for i in range(400))
    body = f"src/a.py:1: error one\n{filler}\nsrc/b.py:2: error two\nsrc/c.py:3: error three\n"
    assert last_error_lines(body, False, 2) == [
        "src/b.py:2: error two",
        "src/c.py:3: error three",
    ]
    assert last_error_lines(body, False, 3) == [
        "src/a.py:1: error one",
        "src/b.py:2: error two",
        "src/c.py:3: error three",
    ]
    # the same line twice counts once, at its first place
    twice = "src/c.py:3: error three\nok\n" + body
    assert last_error_lines(twice, False, 3) == [
        "src/c.py:3: error three",
        "src/a.py:1: error one",
        "src/b.py:2: error two",
    ]


# -- paths ---------------------------------------------------------------------------------------


def reference_paths(body: str) -> list[str]:
    """The paths in ``body``, its tokens as ``_TOKEN`` finds them, newest mention last."""
    latest: dict[str, None] = {}
    for token in reversed(paths._TOKEN.findall(body)):
        if "/" not in token and "." not in token and token not in paths._BARE_FILES:
            continue
        path = paths._LINE_SUFFIX.sub("", token.strip(".:!?"))
        if paths._looks_like_path(path) and path not in latest:
            latest[path] = None
    return list(reversed(latest))


path_words = st.sampled_from(
    [
        "src/a.py",
        "src/a.py:12:",
        "src/a.py:1:2:3",
        "src/a.py:\u0663",
        "./b.ts.",
        "~/c/d",
        "ab/cd/ef",
        "a/b",
        "a.b",
        "v1.2",
        "..",
        "/",
        "e.g.",
        "Makefile",
        "Makefile:",
        "Gemfile.lock",
        "README",
        "MD",
        "user@host.com",
        "http://x.y/z.py",
        "\u00dfrc/\u00e4.py",
        "src/\ud800.py",
        "word",
        "more words of prose here",
        "x" * 70,
    ]
)
token_breaks = st.sampled_from(
    [
        *(" ", "  ", "\t", "\n", "\r\n", "\x0b", "\x0c", "\x1c", "\x1f", "\x85", "\xa0"),
        *("\u2028", "\u3000", *"()[]{}<>'\"`,;|="),
    ]
)
texts_with_paths = st.lists(st.tuples(path_words, token_breaks), max_size=120).map(
    lambda pieces: "".join(word + gap for word, gap in pieces)
)


@settings(max_examples=400, deadline=None)
@given(
    texts_with_paths,
    st.sampled_from(
        [
            {},  # as it is
            # ASCII texts: every token found one by one, or the first one found, then the rest
            # split whole
            {"_MARKED_MIN": 0, "_CHARS_PER_MARK": 0, "_CHARS_PER_MARKED": 0},
            {"_MARKED_MIN": 0, "_CHARS_PER_MARK": 0, "_MARKED_SLACK": -(10**9)},
        ]
    ),
)
def test_the_paths_in_a_text_are_those_its_tokens_name(
    body: str, settings_: dict[str, int]
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        for name, value in settings_.items():
            patch.setattr(paths, name, value)
        assert paths_in(body) == reference_paths(body)
        assert paths_in(body) == reference_paths(body)  # from the memo
        ascii_body = body.encode("ascii", "ignore").decode()
        assert paths_in(ascii_body) == reference_paths(ascii_body)
    assert paths._tokens(body) == paths._TOKEN.findall(body)


@given(st.text(alphabet=st.sampled_from(list(":0123456789a.\u0663\u00b2")), max_size=12))
def test_a_line_suffix_is_taken_away_as_the_expression_does(token: str) -> None:
    assert paths._without_line_suffix(token) == paths._LINE_SUFFIX.sub("", token)


def reference_error_hit(raw: str) -> str:
    if not errors._ERROR.search(raw):
        return ""
    line = errors._undecorated(raw)
    if not line or not errors._ERROR.search(line) or errors._NOT_ERROR.search(line):
        return ""
    return line if errors._TWO_WORDS.search(line) else ""


error_words = st.sampled_from(
    [
        *("no", "No", "NO", "0", "10", "zero", "without", "WithOut", "errors", "Error:"),
        *("failed", "FAILURES", "exception", "IndexError", "x", "ok", "===", "---", "___"),
        *("a_b", "fa\u0130led", "\u0131", "exception\u017f", "\u212a", "\u00e9"),
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(error_words, st.sampled_from([" ", "  ", "\t", "", "\xa0"]))))
def test_error_lines_are_what_the_expressions_find(pieces: list[tuple[str, str]]) -> None:
    raw = "".join(word + gap for word, gap in pieces)
    assert errors._error_hit(raw) == reference_error_hit(raw)
