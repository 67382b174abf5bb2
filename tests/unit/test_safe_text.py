"""safe_text: what never reaches a terminal as it is, in text and in JSON."""

from __future__ import annotations

import json
import re
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from ctx_inspect import safe_text

HIDDEN_CATEGORIES = {"Cc", "Cf", "Cs", "Zl", "Zp"}
# the other default-ignorable characters (Unicode's Default_Ignorable_Code_Point) that are not Cf
OTHER_IGNORABLE = [
    "\u034f",
    "\u115f",
    "\u1160",
    "\u17b4",
    "\u17b5",
    "\u180b",
    "\u180c",
    "\u180d",
    "\u180f",
    "\u3164",
    "\ufe00",
    "\ufe0d",
    "\uffa0",
    "\U000e0100",
    "\U000e01ef",
    "\U000e0fff",
]
SAFE_OUTPUT = re.compile(r"[^\x00-\x08\x0b-\x1f\x7f-\x9f]*")


def hidden_characters() -> list[str]:
    return [
        chr(code)
        for code in range(0x110000)
        if unicodedata.category(chr(code)) in HIDDEN_CATEGORIES
    ]


def test_every_control_format_and_separator_character_is_shown() -> None:
    chars = hidden_characters()
    assert len(chars) > 2000  # C0, C1, the format characters and the surrogates
    shown = safe_text.visible("x".join(chars), keep_layout=False)
    left = [c for c in shown if unicodedata.category(c) in HIDDEN_CATEGORIES]
    assert left == []
    assert safe_text.visible("x".join(OTHER_IGNORABLE)) == "x".join(
        f"⟨U+{ord(c):04X}⟩" for c in OTHER_IGNORABLE
    )


def test_escape_sequences_become_characters() -> None:
    osc = "\x1b]0;title\x07\x1b]52;c;aGk=\x1b\\\x9b2J\x9d8;;u\x9c\x08\r"
    assert safe_text.visible(osc) == ("␛]0;title␇␛]52;c;aGk=␛\\⟨U+009B⟩2J⟨U+009D⟩8;;u⟨U+009C⟩␈␍")
    assert safe_text.visible("a\n\tb") == "a\n\tb"
    assert safe_text.visible("a\n\tb", keep_layout=False) == "a␊␉b"
    assert safe_text.visible("tag\U000e0001\U000e0068\U000e007f") == (
        "tag⟨U+E0001⟩⟨U+E0068⟩⟨U+E007F⟩"
    )


def test_one_presentation_selector_after_a_glyph_is_kept() -> None:
    assert safe_text.visible("⚠\ufe0f ok ❤\ufe0e") == "⚠\ufe0f ok ❤\ufe0e"
    assert safe_text.visible("\ufe0fa") == "⟨U+FE0F⟩a"  # after nothing
    assert safe_text.visible("a \ufe0f") == "a ⟨U+FE0F⟩"  # after a space
    assert safe_text.visible("⚠\ufe0f\ufe0f\ufe0e") == "⚠\ufe0f⟨U+FE0F⟩⟨U+FE0E⟩"  # a run
    assert safe_text.visible("a\u200b\ufe0f") == "a⟨U+200B⟩⟨U+FE0F⟩"  # after an invisible
    assert safe_text.visible("x\ufe01\U000e0100") == "x⟨U+FE01⟩⟨U+E0100⟩"  # other selectors


@given(st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=200))
def test_visible_maps_back_and_leaves_nothing_hidden(raw: str) -> None:
    shown = safe_text.visible(raw)
    assert safe_text.is_safe(shown)
    assert all(unicodedata.category(c) not in HIDDEN_CATEGORIES for c in shown if c not in "\n\t")
    if not set("⟨⟩␀␛␡␊␉").intersection(raw) and not re.search("[\u2400-\u241f]", raw):
        assert safe_text.restore(shown) == raw
        assert safe_text.restore(safe_text.visible(raw, keep_layout=False)) == raw


@given(st.recursive(st.text(max_size=30), lambda inner: st.lists(inner, max_size=4)))
def test_json_text_is_the_same_json_with_nothing_raw(value: object) -> None:
    text = safe_text.json_text({"k\x9b": value, "v": ["\u202e\x7f\ud800\U000e0041"]})
    assert json.loads(text) == {"k\x9b": value, "v": ["\u202e\x7f\ud800\U000e0041"]}
    assert safe_text.is_safe(text)
    assert SAFE_OUTPUT.fullmatch(text)
    assert "\\udb40\\udc41" in text  # U+E0041 as JSON spells an astral character


def test_json_text_keeps_its_layout() -> None:
    text = safe_text.json_text({"a": "x\ny\u200b"}, indent=1)
    assert text == '{\n "a": "x\\ny\\u200b"\n}'


def test_safe_data_reaches_keys_and_nested_values() -> None:
    data = {"m\x1b": [{"t": "a\x9bb"}, ("c\u202e", 3)], "n": None, "f": 1.5}
    assert safe_text.safe_data(data) == {
        "m␛": [{"t": "a⟨U+009B⟩b"}, ["c⟨U+202E⟩", 3]],
        "n": None,
        "f": 1.5,
    }


def test_json_text_escapes_every_selector() -> None:
    text = safe_text.json_text(["⚠\ufe0f", "\ufe0f"])
    assert text == '["⚠\\ufe0f", "\\ufe0f"]'
