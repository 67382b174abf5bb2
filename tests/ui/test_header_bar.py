"""HeaderBar: one line when it fits, two when not, the file shortened from the left."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult

from ctx_inspect.ui.widgets.header_bar import HeaderBar, shorten_left

LONG = "/home/user/projects/agents/runs/2024-11-21/a-session-with-a-long-name.jsonl"


class HeaderApp(App[None]):
    def compose(self) -> ComposeResult:
        yield HeaderBar()


def lines(header: HeaderBar) -> list[str]:
    rendered = header.render()
    assert isinstance(rendered, Text)
    return rendered.plain.split("\n")


def show(header: HeaderBar, **changes: object) -> None:
    values: dict[str, object] = {
        "file": "run.log",
        "format": "native",
        "profile": "ai-agent",
        "model": "gpt-4o",
        "window": 128_000,
        "tokenizer": "o200k_base",
        "follow": None,
    }
    values.update(changes)
    header.update_header(**values)  # type: ignore[arg-type]


async def test_one_line_when_everything_fits() -> None:
    app = HeaderApp()
    async with app.run_test(size=(140, 5)) as pilot:
        header = app.query_one(HeaderBar)
        show(header)
        await pilot.pause()
        assert lines(header) == [
            "run.log  ·  format native  ·  profile ai-agent  ·  model gpt-4o  ·  "
            "window 128,000  ·  tokenizer o200k_base  ·  saved file"
        ]
        assert header.size.height == 1


async def test_two_lines_and_a_shortened_path_when_narrow() -> None:
    app = HeaderApp()
    async with app.run_test(size=(60, 5)) as pilot:
        header = app.query_one(HeaderBar)
        show(header, file=LONG, follow="following", model=None, window=0)
        await pilot.pause()
        first, second = lines(header)
        assert header.size.height == 2
        assert first == "…2024-11-21/a-session-with-a-long-name.jsonl  ·  ● following"
        assert "a-session-with-a-long-name.jsonl" in first
        assert len(first) <= 60
        assert second.startswith("format native  ·  profile ai-agent  ·  model unknown")


async def test_follow_states_and_the_what_if_label() -> None:
    app = HeaderApp()
    async with app.run_test(size=(140, 5)) as pilot:
        header = app.query_one(HeaderBar)
        show(header, follow="paused (cursor moved)", what_if="pruned step 12")
        await pilot.pause()
        rendered = header.render()
        assert isinstance(rendered, Text)
        assert rendered.plain.startswith(" WHAT-IF pruned step 12 ")
        style = rendered.get_style_at_offset(app.console, 1)
        assert style.bgcolor is not None and style.bold  # a badge, not plain text
        assert "◌ paused (cursor moved)" in rendered.plain
        show(header, follow="waiting for file")
        await pilot.pause()
        assert lines(header)[0].endswith("◌ waiting for file")
        assert "WHAT-IF" not in lines(header)[0]


async def test_file_names_are_data_not_markup() -> None:
    app = HeaderApp()
    async with app.run_test(size=(140, 5)) as pilot:
        header = app.query_one(HeaderBar)
        show(header, file="[bold]x\x1b[31m\n.log")
        await pilot.pause()
        assert lines(header)[0].startswith("[bold]x␛[31m␊.log  ·  ")


def test_shorten_left() -> None:
    assert shorten_left("short", 10) == "short"
    assert shorten_left("/home/user/projects/file.jsonl", 20) == "…projects/file.jsonl"
    assert shorten_left("/home/user/projects/file.jsonl", 27) == "…/user/projects/file.jsonl"
    assert shorten_left("/a/verylongdirectoryname/file.log", 20) == "…ectoryname/file.log"
    assert shorten_left("abcdef", 4) == "…def"
    assert shorten_left("abcdef", 1) == "…"


async def test_control_characters_in_the_fields_are_shown() -> None:
    app = HeaderApp()
    async with app.run_test(size=(200, 5)):
        header = app.query_one(HeaderBar)
        show(header, file="a\tb\x7f\x9b.log", model="m\x1b]0;t\x07\u202e", what_if="w\u200b")
        text = "\n".join(lines(header))
        assert "a␉b␡⟨U+009B⟩.log" in text
        assert "m␛]0;t␇⟨U+202E⟩" in text
        assert "WHAT-IF w⟨U+200B⟩" in text
