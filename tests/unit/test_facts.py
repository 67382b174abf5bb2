"""``facts.extract`` finds exactly what its plain regular expressions find, faster.

The reference below is ``extract`` as it was: one ``finditer`` per kind over the whole text.
The fast one skips most of the text (see the comments in ``ctx_inspect/core/facts.py``); these
tests hold it to the same output, on tricky texts and generated ones."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctx_inspect.core import facts
from ctx_inspect.core.facts import Fact, FactKind, extract, fact_texts

# the expressions the fast path applies to the pieces it keeps, applied here to whole texts
_PATH = facts._PATH
_COMMAND_LINE = facts._COMMAND_LINE
_COMMAND_ARG = facts._COMMAND_ARG
_IDENTIFIER = facts._IDENTIFIER
_ERROR_LINE = re.compile(
    r"^.*(?:\w*(?:error|exception)|\b(?:traceback|failed|failure|fatal|panic|denied|not found|"
    r"cannot|could not|undefined|segmentation fault))\b.*$",
    re.IGNORECASE | re.MULTILINE,
)


def reference(text: str) -> set[Fact]:
    """``extract`` as it was."""
    found: set[Fact] = set()
    for match in _PATH.finditer(text):
        value = match.group(0).rstrip(".,:;")
        if len(value) >= 3 and any(ch.isalpha() for ch in value) and "//" not in value:
            found.add(Fact(FactKind.PATH, value))
    for pattern in (_COMMAND_LINE, _COMMAND_ARG):
        for match in pattern.finditer(text):
            found.add(Fact(FactKind.COMMAND, match.group(1).strip()))
    for match in _ERROR_LINE.finditer(text):
        line = match.group(0).strip()
        if line:
            found.add(Fact(FactKind.ERROR, line[:160]))
    for match in _IDENTIFIER.finditer(text):
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
    errors = of_kind(
        extract("myerror here\nerrors are plural\nERROR\nnot  found\nnot found"), FactKind.ERROR
    )
    assert errors == {"myerror here", "ERROR", "not found"}
    assert of_kind(extract("a\r\nError: x\r\nb"), FactKind.ERROR) == {"Error: x"}
    assert of_kind(extract("ſegmentation fault"), FactKind.ERROR) == {"ſegmentation fault"}
    assert of_kind(extract("src/a.py, ./b.go a//b"), FactKind.PATH) == {"src/a.py", "./b.go"}
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


def test_lowering_keeps_each_character_where_the_error_words_need_it() -> None:
    """The fast search for error lines looks for the words in ``text.lower()``, position for
    position: it relies on ``lower`` turning one character into one, and every character the
    case-blind pattern takes for a letter of the words into that letter, except for the few
    (``_UNLOWERED``) whose texts are searched with the pattern alone."""
    everything = "".join(chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c < 0xE000)
    unlowered = set(facts._UNLOWERED)
    assert {ch for ch in everything if len(ch.lower()) != 1} <= unlowered
    for letter in set("".join(facts._ERROR_WORDS)) - {" "}:
        takes = set(re.findall(letter, everything, re.IGNORECASE))
        assert letter in takes
        assert {ch for ch in takes if ch.lower() != letter} <= unlowered
    assert re.findall(" ", everything, re.IGNORECASE) == [" "]
    assert set(re.findall(r"[a-z][a-z ]+[a-z]", facts._ERROR_HIT.pattern)) == set(
        facts._ERROR_WORDS
    )


@pytest.mark.corpus
def test_real_samples_give_the_reference_facts(corpus: Path) -> None:
    files = [p for p in sorted(corpus.rglob("*")) if p.is_file()]
    assert files
    for path in files:
        text = path.read_bytes()[:200_000].decode("utf-8", errors="replace")
        assert extract(text) == reference(text), path
