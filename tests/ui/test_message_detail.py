"""MessageDetail: every part as plain text; adversarial content verbatim; huge content lazily."""

from __future__ import annotations

import asyncio
import html
import re
import time

from textual.app import App, ComposeResult

from ctx_inspect.core.model import Message, MessageKind, Part, PartType, Role
from ctx_inspect.ui.widgets.message_detail import MessageDetail, human_bytes, pretty_json

WIDTH, HEIGHT = 100, 30
ADVERSARIAL = (
    "[bold]red[/bold] [link=http://evil]x[/link] \x1b[31mred\x1b[0m "
    "\x1b]8;;http://x\x07link\x1b]8;;\x07 \x07\x00\r"
)
ADVERSARIAL_SHOWN = (
    "[bold]red[/bold] [link=http://evil]x[/link] ␛[31mred␛[0m ␛]8;;http://x␇link␛]8;;␇ ␇␀␍"
)


def tool_message() -> Message:
    return Message(
        id="msg-7",
        role=Role.ASSISTANT,
        kind=MessageKind.TOOL_CALL,
        model="gpt-test",
        visible=False,
        parts=(
            Part(type=PartType.TEXT, text="Let me look.\n" + ADVERSARIAL),
            Part(type=PartType.THINKING, text="pondering"),
            Part(
                type=PartType.TOOL_CALL,
                tool_name="[i]bash[/i]",
                call_id="call_1",
                arguments='{"cmd": "ls", "args": [1, 2]}',
            ),
            Part(
                type=PartType.TOOL_RESULT,
                tool_name="bash",
                call_id="call_1",
                text="boom",
                is_error=True,
            ),
            Part(
                type=PartType.IMAGE, media_type="image/png", data_bytes=12_590, text="iVBORw0KGgo="
            ),
            Part(type=PartType.ATTACHMENT, tool_name="notes.md", text="attached\ttext"),
        ),
    )


class DetailApp(App[None]):
    def compose(self) -> ComposeResult:
        yield MessageDetail()


def screen_text(app: App[None]) -> str:
    """The text of the exported screenshot, as a person would read it."""
    svg = app.export_screenshot()
    pieces = re.findall(r"<text [^>]*>([^<]*)</text>", svg)
    return html.unescape("".join(pieces)).replace("\xa0", " ")


def test_helpers() -> None:
    assert pretty_json('{"a": [1]}') == '{\n  "a": [\n    1\n  ]\n}'
    assert pretty_json("not json {") == "not json {"
    assert pretty_json('{"broken": ') == '{"broken": '
    assert human_bytes(900) == "900 bytes"
    assert human_bytes(12_590) == "12.3 KiB (12,590 bytes)"


async def test_shows_header_and_every_part_with_a_label() -> None:
    app = DetailApp()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        detail = app.query_one(MessageDetail)
        detail.show(tool_message(), header="#8  msg-7  1,234 tokens (exact)  added at step 3")
        await pilot.pause()
        lines = [row.rstrip() for row in detail.lines]
        assert lines[0] == "#8  msg-7  1,234 tokens (exact)  added at step 3"
        assert lines[1] == "model: gpt-test  hidden from the model"
        for expected in (
            "▸ text",
            "Let me look.",
            ADVERSARIAL_SHOWN,
            "▸ thinking",
            "pondering",
            "▸ tool call [i]bash[/i]  (id call_1)",
            '  "cmd": "ls",',
            "▸ tool result bash  (id call_1)  ERROR",
            "boom",
            "▸ image  image/png, 12.3 KiB (12,590 bytes)",
            "▸ attachment notes.md",
            "attached    text",
        ):
            assert expected in lines, expected
        assert not any("iVBOR" in row for row in lines)  # no image bytes


async def test_adversarial_content_is_displayed_verbatim_and_not_interpreted() -> None:
    app = DetailApp()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        detail = app.query_one(MessageDetail)
        detail.show(tool_message())
        await pilot.pause()
        shown = screen_text(app)
        assert ADVERSARIAL_SHOWN in shown
        assert "[i]bash[/i]" in shown
        assert "\x1b" not in shown and "\x07" not in shown and "\x00" not in shown

        row = next(y for y, text in enumerate(detail.lines) if text.startswith("[bold]red"))
        strip = detail.render_line(row)
        base = detail.rich_style
        for segment in strip:
            style = segment.style
            assert style is not None
            assert style.link is None and not style.meta.get("@click")
            assert not style.bold and not style.italic  # no markup applied
            assert style.color == base.color  # no colour from the content
        svg = app.export_screenshot()
        assert "http://evil" not in re.sub(r"<text [^>]*>[^<]*</text>", "", svg)  # not a link


async def test_default_header_none_and_payloads() -> None:
    app = DetailApp()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        detail = app.query_one(MessageDetail)
        detail.show(None)
        await pilot.pause()
        assert detail.lines == ["no message selected"]

        detail.show(Message(id="m1", role=Role.USER))
        assert detail.lines[0] == "m1  user / message"
        assert "(no content)" in detail.lines

        detail.show_payload("event 3 · debug", {"name": "[b]x[/b]", "payload": {"ü": "\x1b[2J"}})
        await pilot.pause()
        assert detail.lines[0] == "event 3 · debug"
        assert detail.lines[2:] == [
            "{",
            '  "name": "[b]x[/b]",',
            '  "payload": {',
            '    "ü": "\\u001b[2J"',
            "  }",
            "}",
        ]
        detail.show_payload("log", "plain \x1b[1mtext\x1b[0m")
        assert detail.lines == ["log", "", "plain ␛[1mtext␛[0m"]


async def test_long_lines_wrap_and_rewrap_on_resize() -> None:
    app = DetailApp()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        detail = app.query_one(MessageDetail)
        words = " ".join(f"word{i}" for i in range(400))
        detail.show_payload("long", words)
        await pilot.pause()
        width = detail.scrollable_content_region.width
        body = detail.lines[2:]
        assert len(body) > 1
        assert all(len(row.rstrip()) <= width for row in body)
        assert "".join(body) == words
        await pilot.resize_terminal(60, HEIGHT)
        await pilot.pause()
        narrow = detail.scrollable_content_region.width
        assert narrow < width
        assert all(len(row.rstrip()) <= narrow for row in detail.lines[2:])
        assert "".join(detail.lines[2:]) == words


async def test_ten_megabytes_do_not_freeze() -> None:
    app = DetailApp()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        detail = app.query_one(MessageDetail)
        line = "0123456789 abcdefghij \x1b[31m ✓ " * 3
        text = "\n".join(f"{i:07d} {line}" for i in range(100_000))  # ~10 MB
        assert len(text) > 9_000_000
        message = Message(id="big", role=Role.TOOL, parts=(Part(type=PartType.TEXT, text=text),))
        started = time.perf_counter()
        detail.show(message)
        assert time.perf_counter() - started < 3  # about 0.1 s: split, and one slice
        assert detail.laying_out  # the rest is wrapped in slices
        assert len(detail.lines) < 20_000
        await pilot.pause()
        assert detail.lines[3].startswith("0000000 0123456789")  # the first screen is there
        deadline = time.monotonic() + 60
        while detail.laying_out and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert not detail.laying_out
        detail.focus()
        await pilot.press("end")
        await pilot.pause()
        last = "".join(segment.text for segment in detail.render_line(HEIGHT - 1))
        assert last.rstrip().endswith("✓")
        assert any(text.startswith("0099999 ") for text in detail.lines[-3:])
