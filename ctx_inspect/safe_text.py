"""Text from an input made safe for a terminal: the one boundary every writer goes through.

Anything that came from an input (message text, model names, compaction triggers, tool names,
session titles, sub-agent ids, file names, error texts that quote them) is hostile: it may hold
escape sequences that retitle the window (OSC 0/2), write the clipboard (OSC 52), print links
(OSC 8) or move the cursor, and invisible characters that reorder or hide text. Nothing here
imports Rich or Textual: the headless writers (``ctx_inspect.cli``, ``ctx_inspect.render``) and the
dashboard's ``ctx_inspect.ui.plain`` all take their safe forms from this module.

What is never sent as it is, and its visible form:

- C0 controls as their Unicode control pictures (ESC ``\\x1b`` → ``␛``, BEL → ``␇``, BS → ``␈``,
  CR → ``␍``, NUL → ``␀``), DEL as ``␡``; newline and tab are kept when the layout is kept;
- everything else as ``⟨U+XXXX⟩``: the C1 controls (U+0080..U+009F; U+009B is a CSI and U+009D
  an OSC on many terminals), every Unicode format character (category Cf: the bidi marks,
  embeddings, overrides and isolates of "trojan source", zero-width space and joiners, the word
  joiner and invisible operators, the soft hyphen, the byte order mark, the tag characters
  U+E0000..U+E007F that can spell a hidden message), the line and paragraph separators, lone
  surrogates, and the other default-ignorable characters that draw nothing (the combining
  grapheme joiner, the Hangul fillers, Khmer's inherent vowels, Mongolian's free variation
  selectors, the reserved U+E0000..U+E0FFF);
- variation selectors (U+FE00..U+FE0F, U+E0100..U+E01EF), with one exception: a single emoji or
  text presentation selector (U+FE0E, U+FE0F) right after a character that draws something is
  kept. Model output is full of ``⚠️`` and ``❤️``, which carry U+FE0F, and showing it would
  break every such emoji; one selector after a glyph can only choose how that glyph looks. Any
  other selector, a run of them, or one after a space, a control or nothing is shown, so text
  hidden in variation selectors (a byte per selector) stays visible.

The mapping is one-to-one and :func:`restore` is its inverse on text that held no visible forms.
JSON keeps the strings themselves (:func:`json_text` escapes the same characters as ``\\uXXXX``).
"""

from __future__ import annotations

import json
import re
from typing import Any

# Ranges (inclusive) of the characters shown as ⟨U+XXXX⟩ (besides the C0 controls and DEL, shown
# as control pictures). Every Cf, Zl, Zp and Cs character of the running Python's Unicode data is
# in them (a test checks it).
HEX_CODED: tuple[tuple[int, int], ...] = (
    (0x0080, 0x009F),  # C1 controls
    (0x00AD, 0x00AD),  # soft hyphen
    (0x034F, 0x034F),  # combining grapheme joiner
    (0x0600, 0x0605),  # Arabic number signs (prepended concatenation marks)
    (0x061C, 0x061C),  # Arabic letter mark
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x115F, 0x1160),  # Hangul fillers
    (0x17B4, 0x17B5),  # Khmer inherent vowels
    (0x180B, 0x180F),  # Mongolian free variation selectors and vowel separator
    (0x200B, 0x200F),  # zero-width space, non-joiner, joiner; LRM, RLM
    (0x2028, 0x202E),  # line and paragraph separators; bidi embeddings and overrides
    (0x2060, 0x206F),  # word joiner, invisible operators, bidi isolates, deprecated formats
    (0x3164, 0x3164),  # Hangul filler
    (0xD800, 0xDFFF),  # lone surrogates
    (0xFE00, 0xFE0F),  # variation selectors (see the exception above)
    (0xFEFF, 0xFEFF),  # byte order mark / zero-width no-break space
    (0xFFA0, 0xFFA0),  # halfwidth Hangul filler
    (0xFFF0, 0xFFFB),  # reserved; interlinear annotation
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),  # Egyptian hieroglyph format controls
    (0x1BCA0, 0x1BCA3),  # shorthand format controls
    (0x1D173, 0x1D17A),  # musical symbol format controls
    (0xE0000, 0xE0FFF),  # tag characters, variation selectors supplement, reserved
)


def _class(ranges: tuple[tuple[int, int], ...]) -> str:
    return "".join(
        re.escape(chr(low)) if low == high else f"{re.escape(chr(low))}-{re.escape(chr(high))}"
        for low, high in ranges
    )


_HIDDEN = _class(HEX_CODED)
# the presentation selectors U+FE0E and U+FE0F are found by _SELECTOR_ALONE instead
_REPLACED = tuple((low, 0xFE0D) if low == 0xFE00 else (low, high) for low, high in HEX_CODED)
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


_Patterns = tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]


def _patterns(controls: str, ranges: tuple[tuple[int, int], ...] = _REPLACED) -> _Patterns:
    """For ASCII text, for text with no character beyond U+FFFF, and for any text (a class
    with characters beyond U+FFFF is several times slower to scan, and such text is rare)."""
    bmp = _class(tuple(r for r in ranges if r[1] <= 0xFFFF))
    return (
        re.compile(f"[{controls}\x7f]"),
        re.compile(f"[{controls}\x7f{bmp}]"),
        re.compile(f"[{controls}\x7f{_class(ranges)}]"),
    )


_KEEP_LAYOUT = _patterns(r"\x00-\x08\x0b-\x1f")
_ALL = _patterns(r"\x00-\x1f")
_JSON = _patterns(r"\x00-\x08\x0b-\x1f", HEX_CODED)  # every selector too
# a presentation selector after nothing, or after a character that draws nothing
_SELECTOR_ALONE = re.compile(f"[\ufe0e\ufe0f](?<![^\\x00-\\x20\\x7f{_HIDDEN}].)")
_VISIBLE = re.compile(r"⟨U\+([0-9A-F]{4,6})⟩|[\u2400-\u241f\u2421]")


def _unsafe(text: str, patterns: _Patterns) -> re.Pattern[str]:
    """The one of ``patterns`` to scan ``text`` with."""
    ascii_only, bmp, full = patterns
    if text.isascii():
        return ascii_only
    return bmp if _ASTRAL.search(text) is None else full


def _has_selector(text: str) -> bool:
    return "\ufe0f" in text or "\ufe0e" in text


def visible_form(char: str) -> str:
    """The visible form of one character that is never sent as it is."""
    code = ord(char)
    if code < 0x20:
        return chr(0x2400 + code)
    if code == 0x7F:
        return "\u2421"  # ␡
    return f"⟨U+{code:04X}⟩"


def _form(match: re.Match[str]) -> str:
    return visible_form(match.group())


def visible(text: str, *, keep_layout: bool = True) -> str:
    """``text`` with every control, format and invisible character replaced by its visible form.

    With ``keep_layout`` newlines and tabs are left as they are; without it they become ``␊``
    and ``␉`` too (for text that must stay on one line).
    """
    if _has_selector(text):  # first: what precedes a selector is still as it was
        text = _SELECTOR_ALONE.sub(_form, text)
    return _unsafe(text, _KEEP_LAYOUT if keep_layout else _ALL).sub(_form, text)


def is_safe(text: str, *, keep_layout: bool = True) -> bool:
    """Whether :func:`visible` would leave ``text`` as it is."""
    if _has_selector(text) and _SELECTOR_ALONE.search(text):
        return False
    return _unsafe(text, _KEEP_LAYOUT if keep_layout else _ALL).search(text) is None


def _restored(match: re.Match[str]) -> str:
    code = match.group(1)
    if code is None:
        picture = ord(match.group())
        return "\x7f" if picture == 0x2421 else chr(picture - 0x2400)
    char = chr(int(code, 16))
    return char if visible_form(char) == match.group() and not is_safe(char) else match.group()


def restore(text: str) -> str:
    """The inverse of :func:`visible` (both modes) on text that had no visible forms already."""
    return _VISIBLE.sub(_restored, text)


def safe_data(value: Any) -> Any:
    """``value`` with every string in it (dictionary keys too) made :func:`visible`, keeping
    newlines and tabs; numbers, booleans and None as they are. For headless text output, where
    a renderer lays the strings out: they are made safe before their width is measured."""
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, dict):
        return {safe_data(k): safe_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [safe_data(item) for item in value]
    return value


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code > 0xFFFF:  # as a UTF-16 surrogate pair, as JSON spells it
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def json_text(value: Any, **options: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, **options)`` with every character that
    :func:`visible` may replace written as a ``\\uXXXX`` escape (``json.dumps`` escapes the C0
    controls itself, but not C1, DEL, format characters or lone surrogates), every variation
    selector included (JSON is read by programs: no emoji to keep whole). The result is the
    same JSON (it decodes to the same strings) and prints safely on a terminal."""
    text = json.dumps(value, ensure_ascii=False, **options)
    # outside strings json.dumps writes only ASCII, and its C0 escapes are already done: what
    # is left to escape is inside strings, where a \\uXXXX escape is always valid
    return _unsafe(text, _JSON).sub(_json_escape, text)
