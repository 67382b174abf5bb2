"""The top bar: which file, read how, against which window, and whether it is followed live."""

from __future__ import annotations

from dataclasses import dataclass

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual.geometry import Size
from textual.reactive import reactive
from textual.widget import Widget

from ctx_inspect.safe_text import visible
from ctx_inspect.ui.widgets.zone_gauge import badge, rich_color

SEP = "  ·  "


def _line(text: str) -> str:
    return visible(text, keep_layout=False)


def shorten_left(text: str, cells: int) -> str:
    """``text`` cut from the left to fit ``cells``, with "…" in front (at a "/" if cheap)."""
    if cell_len(text) <= cells:
        return text
    if cells <= 1:
        return "…"[:cells]
    kept: list[str] = []
    room = cells - 1
    for char in reversed(text):
        room -= cell_len(char)
        if room < 0:
            break
        kept.append(char)
    tail = "".join(reversed(kept))
    slash = tail.find("/")
    if 0 < slash <= 6 and slash < len(tail) - 1:  # start at a directory when that costs little
        tail = tail[slash:]
    return "…" + tail


@dataclass(frozen=True)
class HeaderInfo:
    """What the header shows: ``follow`` None means a saved file, ``what_if`` labels a branch,
    ``window_assumed`` says the window is the profile's default, not the agent's."""

    file: str = ""
    format: str = ""
    profile: str = ""
    model: str | None = None
    window: int = 0
    tokenizer: str = ""
    follow: str | None = None
    what_if: str | None = None
    window_assumed: bool = False


class HeaderBar(Widget):
    """File, format, profile, model, window, tokenizer, follow state and the what-if label."""

    DEFAULT_CSS = """
    HeaderBar {
        text-wrap: nowrap;
        text-overflow: ellipsis;
        height: auto;
        max-height: 2;
        background: $panel;
    }
    """

    info: reactive[HeaderInfo] = reactive(HeaderInfo, layout=True)

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.refresh())

    def update_header(
        self,
        *,
        file: str,
        format: str,
        profile: str,
        model: str | None,
        window: int,
        tokenizer: str,
        follow: str | None,
        what_if: str | None = None,
        window_assumed: bool = False,
    ) -> None:
        """Show these values (``HeaderInfo``)."""
        self.info = HeaderInfo(
            file, format, profile, model, window, tokenizer, follow, what_if, window_assumed
        )

    @property
    def what_if(self) -> str | None:
        return self.info.what_if

    def _details(self) -> str:
        info = self.info
        window = f"window {info.window:,}" if info.window > 0 else "window unknown"
        if info.window > 0 and info.window_assumed:
            window += " (assumed)"
        fields = [
            f"format {info.format}",
            f"profile {info.profile}",
            f"model {info.model or 'unknown'}",
            window,
            f"tokenizer {info.tokenizer}",
        ]
        return _line(SEP.join(fields))

    def _head(self) -> Text:
        head = Text()
        what_if = self.info.what_if
        if what_if:
            accent = rich_color(self, "accent", "warning")
            head.append_text(badge(f"WHAT-IF {_line(what_if)}", accent, self))
            head.append(" ")
        return head

    def _follow(self) -> Text:
        follow = self.info.follow
        if follow is None:
            return Text("saved file", Style(dim=True))
        names = ("success",) if follow == "following" else ("warning", "accent")
        glyph = "●" if follow == "following" else "◌"
        return Text(f"{glyph} {_line(follow)}", Style(color=rich_color(self, *names)))

    def _lines(self, width: int) -> list[Text]:
        head, follow, details = self._head(), self._follow(), self._details()
        file = _line(self.info.file)
        fixed = head.cell_len + cell_len(SEP) * 2 + follow.cell_len + cell_len(details)
        if fixed + cell_len(file) <= width:
            line = head + Text(file, Style(bold=True)) + SEP + details + SEP + follow
            return [line]
        room = max(1, width - head.cell_len - cell_len(SEP) - follow.cell_len)
        first = head + Text(shorten_left(file, room), Style(bold=True)) + SEP + follow
        return [first, Text(details)]

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._lines(width))

    def render(self) -> Text:
        text = Text("\n", end="").join(self._lines(max(1, self.content_size.width)))
        text.no_wrap = True
        text.overflow = "ellipsis"
        return text
