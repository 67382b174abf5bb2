"""The full content of one message (or one event's payload) as plain text.

Everything shown goes through ``ctx_inspect.ui.plain``: markup and escape sequences are displayed,
never interpreted. Lines are virtualised: the content is split into logical lines once, then
wrapped to the width in slices of a few milliseconds (the first screen at once), so a 10 MB
message neither freezes the UI nor becomes a million widgets.
"""

from __future__ import annotations

import json
import time
from typing import Any, ClassVar

from rich.text import Text
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.timer import Timer

from ctx_inspect.core.model import Message, Part, PartType
from ctx_inspect.ui import plain

CHUNK = 2048  # characters: longer lines are laid out piece by piece
PRETTY_JSON_LIMIT = 1_000_000  # characters: larger tool arguments are shown as they are
Line = tuple[str, str, bool]  # raw text (no newline), style key, continues the previous line


def pretty_json(text: str) -> str:
    """``text`` indented when it is a JSON object or array, else unchanged."""
    if len(text) > PRETTY_JSON_LIMIT or text.lstrip()[:1] not in ("{", "["):
        return text
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


def human_bytes(size: int) -> str:
    if size < 1024:
        return f"{size:,} bytes"
    value, exponent = float(size), 0
    while value >= 1024 and exponent < 3:
        value, exponent = value / 1024, exponent + 1
    return f"{value:.1f} {('B', 'KiB', 'MiB', 'GiB')[exponent]} ({size:,} bytes)"


class MessageDetail(ScrollView, can_focus=True):
    """One message: a header, then each part under a small label, all as plain text."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "message-detail--header",
        "message-detail--label",
        "message-detail--error",
        "message-detail--thinking",
        "message-detail--muted",
    }
    DEFAULT_CSS = """
    MessageDetail {
        overflow-x: hidden;
        overflow-y: scroll;
        & > .message-detail--header { text-style: bold; }
        & > .message-detail--label { color: $accent; text-style: bold; }
        & > .message-detail--error { color: $error; text-style: bold; }
        & > .message-detail--thinking { color: $text-muted; text-style: italic; }
        & > .message-detail--muted { color: $text-muted; }
        &:focus { background-tint: $foreground 5%; }
    }
    """
    SLICE_SECONDS: ClassVar[float] = 0.01
    MIN_LINES_PER_SLICE: ClassVar[int] = 100

    def __init__(
        self, *, name: str | None = None, id: str | None = None, classes: str | None = None
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._lines: list[Line] = []
        self._rows: list[tuple[str, str, int]] = []  # safe text, style key, logical line
        self._next_line = 0
        self._width = 0
        self._anchor: int | None = None  # logical line to scroll back to after a re-wrap
        self._timer: Timer | None = None

    # -- content ---------------------------------------------------------------------------

    @property
    def laying_out(self) -> bool:
        """True while long content is still being wrapped in the background."""
        return self._next_line < len(self._lines)

    @property
    def lines(self) -> list[str]:
        """The displayed rows (wrapped, safe), for tests and copy."""
        return [text for text, _key, _line in self._rows]

    def show(self, message: Message | None, *, header: str = "") -> None:
        """Show ``message``; ``header`` is the caller's summary (tokens, origin, steps...)."""
        lines: list[Line] = []
        if message is None:
            self._add(lines, "no message selected", "muted")
        else:
            self._add(lines, header or f"{message.id}  {message.role} / {message.kind}", "header")
            facts = [
                f"{label}: {value}"
                for label, value in (
                    ("model", message.model),
                    ("name", message.name),
                    ("time", message.timestamp),
                    ("parent", message.parent_id),
                    ("thread", None if message.thread == "main" else message.thread),
                )
                if value
            ]
            if not message.visible:
                facts.append("hidden from the model")
            if facts:
                self._add(lines, "  ".join(facts), "muted")
            if not message.parts:
                self._add(lines, "(no content)", "muted")
            for part in message.parts:
                lines.append(("", "", False))
                self._add_part(lines, part)
        self._set_lines(lines)

    def show_payload(self, title: str, payload: dict[str, Any] | str) -> None:
        """Show an event's payload: ``title``, then the payload as indented JSON or plain text."""
        if isinstance(payload, str):
            body = payload
        else:
            body = json.dumps(payload, indent=2, ensure_ascii=False, default=str)
        lines: list[Line] = []
        self._add(lines, title, "header")
        lines.append(("", "", False))
        self._add(lines, body, "")
        self._set_lines(lines)

    @staticmethod
    def _add(lines: list[Line], text: str, key: str) -> None:
        for line in text.split("\n"):
            lines.append((line[:CHUNK], key, False))
            lines.extend((line[i : i + CHUNK], key, True) for i in range(CHUNK, len(line), CHUNK))

    def _add_part(self, lines: list[Line], part: Part) -> None:
        ident = f"  (id {part.call_id})" if part.call_id else ""
        name = f" {part.tool_name}" if part.tool_name else ""
        if part.type is PartType.TOOL_CALL:
            self._add(lines, f"▸ tool call{name}{ident}", "label")
            if part.text:
                self._add(lines, part.text, "")
            self._add(lines, pretty_json(part.arguments or ""), "")
        elif part.type is PartType.TOOL_RESULT:
            error = "  ERROR" if part.is_error else ""
            key = "error" if part.is_error else "label"
            self._add(lines, f"▸ tool result{name}{ident}{error}", key)
            self._add(lines, part.text, "")
        elif part.type is PartType.IMAGE:
            media = part.media_type or "unknown type"
            self._add(lines, f"▸ image  {media}, {human_bytes(part.data_bytes)}", "label")
        elif part.type is PartType.THINKING:
            self._add(lines, "▸ thinking", "label")
            self._add(lines, part.text, "thinking")
        else:
            size = f"  {human_bytes(part.data_bytes)}" if part.data_bytes else ""
            self._add(lines, f"▸ {part.type.value}{name}{size}", "label")
            self._add(lines, part.text, "")

    # -- layout ------------------------------------------------------------------------------

    def _set_lines(self, lines: list[Line]) -> None:
        self._lines = lines
        self._anchor = None
        self._relayout()
        self.scroll_to(0, 0, animate=False, immediate=True, force=True)

    def _relayout(self) -> None:
        """Wrap from the start at the current width: the first slice now, the rest on ticks."""
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self._width = self.scrollable_content_region.width
        self._rows = []
        self._next_line = 0
        if self._width > 0:  # else wait for the first resize to know the width
            self._layout_slice()

    def _layout_slice(self) -> None:
        self._timer = None
        rows, lines, width = self._rows, self._lines, self._width
        deadline = time.perf_counter() + self.SLICE_SECONDS
        start = index = self._next_line
        anchor_row: int | None = None
        while index < len(lines):
            raw, key, continued = lines[index]
            safe = plain.sanitize_line(raw)
            owner = index
            if continued and rows:
                previous, _key, owner = rows.pop()
                safe = previous + safe
            if index == self._anchor:
                anchor_row = len(rows)
            rows.extend((piece, key, owner) for piece in plain.wrap(safe, width))
            index += 1
            if index - start >= self.MIN_LINES_PER_SLICE and time.perf_counter() > deadline:
                break
        self._next_line = index
        self.virtual_size = Size(width, len(rows) + (1 if self.laying_out else 0))
        if anchor_row is not None:
            self._anchor = None
            self.scroll_to(y=anchor_row, animate=False, immediate=True, force=True)
        if self.laying_out:
            self._timer = self.set_timer(0.001, self._layout_slice)
        self.refresh()

    def on_resize(self) -> None:
        width = self.scrollable_content_region.width
        if width > 0 and width != self._width and self._lines:
            top = self.scroll_offset.y
            self._anchor = self._rows[top][2] if top < len(self._rows) else None
            self._relayout()

    # -- rendering -------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base = self.rich_style
        index = self.scroll_offset.y + y
        if index < len(self._rows):
            safe, key, _line = self._rows[index]
            text = Text(safe, no_wrap=True, end="")
            if key:
                text.stylize(self.get_component_rich_style(f"message-detail--{key}"))
        elif index == len(self._rows) and self.laying_out:
            done = self._next_line / max(1, len(self._lines))
            text = Text(f"{plain.ELLIPSIS} laying out ({done:.0%})", no_wrap=True, end="")
            text.stylize(self.get_component_rich_style("message-detail--muted"))
        else:
            return Strip.blank(width, base)
        text.stylize_before(base)
        return Strip(text.render(self.app.console), text.cell_len).crop_extend(0, width, base)
