"""plain: transcript text becomes safe Rich Text; controls visible, markup never interpreted."""

from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.console import Console

from ctx_inspect.ui import plain

ADVERSARIAL = (
    "[bold]red[/bold] [link=http://x]l[/link] \x1b[31mred\x1b[0m "
    "\x1b]8;;http://x\x07link\x1b]8;;\x07 bel\x07 nul\x00 cr\rdel\x7f csi\x9b rtl\u202e end"
)
FORBIDDEN_CATEGORIES = {"Cc", "Cf", "Cs", "Zl", "Zp"}
VISIBLE_CHARS = set("⟨⟩U+0123456789ABCDEF\u2421").union(map(chr, range(0x2400, 0x2420)))

any_text = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=200)


def unsafe(text: str, *, allow_newline: bool) -> list[str]:
    bad = []
    for char in text:
        if char == "\n" and allow_newline:
            continue
        if unicodedata.category(char) in FORBIDDEN_CATEGORIES:
            bad.append(char)
    return bad


def test_control_characters_have_visible_forms() -> None:
    safe = plain.visible(ADVERSARIAL)
    assert "␛[31mred␛[0m" in safe
    assert "␛]8;;http://x␇link␛]8;;␇" in safe
    assert "nul␀" in safe and "cr␍del␡" in safe and "bel␇" in safe
    assert "csi⟨U+009B⟩" in safe and "rtl⟨U+202E⟩" in safe
    assert "[bold]red[/bold]" in safe
    assert unsafe(safe, allow_newline=False) == []


def test_invisible_and_format_characters_are_shown() -> None:
    raw = "a\u200bb\u200dc\u2060d\U000e0041\U000e007fe\u00adf\ufeffg"
    assert plain.visible(raw) == (
        "a⟨U+200B⟩b⟨U+200D⟩c⟨U+2060⟩d⟨U+E0041⟩⟨U+E007F⟩e⟨U+00AD⟩f⟨U+FEFF⟩g"
    )
    assert plain.one_line("x\U000e0068\U000e0069") == "x⟨U+E0068⟩⟨U+E0069⟩"
    assert plain.lines("\u202eab\n\u2066c") == ["⟨U+202E⟩ab", "⟨U+2066⟩c"]


def test_layout_characters_are_kept_or_shown() -> None:
    assert plain.visible("a\tb\nc") == "a\tb\nc"
    assert plain.visible("a\tb\nc", keep_layout=False) == "a␉b␊c"
    assert plain.sanitize_line("a\tb") == "a   b"
    assert plain.lines("x\ty\n[b]") == ["x   y", "[b]"]


def test_to_text_is_plain_with_no_spans_and_renders_no_escape() -> None:
    text = plain.to_text(ADVERSARIAL + "\nsecond\tline")
    assert text.spans == []
    assert "[bold]red[/bold] [link=http://x]l[/link]" in text.plain
    assert text.plain.split("\n")[1] == "second  line"
    console = Console(width=300, force_terminal=True, color_system="truecolor")
    with console.capture() as capture:
        console.print(text)
    rendered = capture.get()
    assert "\x1b]8" not in rendered  # no hyperlink reaches the terminal
    assert "\x1b[31m" not in rendered  # the content's own colour is not applied
    assert "␛[31m" in rendered


def test_to_text_cuts_very_long_lines_and_many_lines() -> None:
    text = plain.to_text("a" * 50 + "\n" + "b\n" * 10, max_line=20, max_lines=3)
    lines = text.plain.split("\n")
    assert lines[0] == "a" * 20 + " … (30 more characters)"
    assert lines[1:3] == ["b", "b"]
    assert lines[3] == "… 9 more lines"  # 12 lines: the last one is empty


def test_one_line_and_fit_are_bounded() -> None:
    huge = "x\n" * 5_000_000
    line = plain.one_line(huge, limit=30)
    assert line == "x␊" * 14 + "x…"
    assert plain.fit("[b]héllo[/b]", 8) == "[b]héll…"
    assert plain.fit("42", 5, align="right") == "   42"
    assert cell_len(plain.fit("中文中文中文", 7)) == 7
    assert plain.fit("anything", 0) == ""


def test_wrap_breaks_at_spaces_and_cuts_long_words() -> None:
    assert plain.wrap("hello world this is a test", 10) == ["hello ", "world this ", "is a test"]
    assert plain.wrap("a" * 25, 10) == ["a" * 10, "a" * 10, "a" * 5]
    assert plain.wrap("中文 字 abc 中文中文中", 6) == ["中文 ", "字 abc ", "中文中", "文中"]
    assert plain.wrap("", 5) == [""]


@given(any_text)
def test_any_text_becomes_text_without_control_characters(raw: str) -> None:
    text = plain.to_text(raw)
    assert unsafe(text.plain, allow_newline=True) == []
    assert text.plain.count("\n") == raw.count("\n")
    assert unsafe(plain.one_line(raw), allow_newline=False) == []
    for line in plain.lines(raw):
        assert unsafe(line, allow_newline=False) == []


@given(any_text)
def test_visible_forms_map_back(raw: str) -> None:
    if VISIBLE_CHARS.intersection(raw):
        return  # the inverse is defined on text that had no visible forms already
    assert plain.restore(plain.visible(raw)) == raw
    assert plain.restore(plain.visible(raw, keep_layout=False)) == raw


def test_lone_surrogates_are_shown_not_sent() -> None:
    raw = "a\ud800b\udfffc"
    assert plain.visible(raw) == "a⟨U+D800⟩b⟨U+DFFF⟩c"
    assert plain.restore(plain.visible(raw)) == raw


@given(any_text, st.integers(min_value=1, max_value=40))
def test_wrap_keeps_every_character_and_fits(raw: str, width: int) -> None:
    line = plain.sanitize_line(raw)
    rows = plain.wrap(line, width)
    assert "".join(rows) == line
    assert all(rows) or rows == [""]  # no empty row (but for an empty line)
    for row in rows:
        visible_part = row.rstrip(" ")
        # a character wider than the rows goes alone, with the zero-width ones that follow it
        wide = [char for char in visible_part if cell_len(char) > 0]
        assert cell_len(visible_part) <= width or len(wide) == 1


def test_a_character_wider_than_the_rows_gets_one_row_with_its_zero_width_marks() -> None:
    assert plain.wrap("⺀\U000e0000", 1) == ["⺀\U000e0000"]
    assert plain.wrap("a 漢\u0301b", 1) == ["a ", "漢\u0301", "b"]
