"""Aider chat histories: ``.aider.chat.history.md`` in each repository (Markdown, appended).

How aider writes the file, and what each piece becomes:

- ``# aider chat started at YYYY-MM-DD HH:MM:SS`` starts a chat: ``SessionInfo`` (agent
  "aider", the start time, and a note that aider's token figures are rounded); every chat after
  the first is also a ``ContextReset(reason="new-chat")``, since aider starts with an empty chat
  history unless told to restore it.
- ``#### <text>``: the user's input, one line per input line (consecutive lines form one
  message; a blank line ends it). Slash commands are META messages the model never sees
  (``visible=False``), except those that send their text to the model (``/ask``, ``/code``,
  ``/architect``, ``/context``, ``/help`` with a question), which are user messages; ``/clear``
  and ``/reset`` are a META message followed by ``ContextReset(reason="clear")``.
- ``> <text>``: aider's console output (banners, confirmations, errors): one META message per
  run of consecutive lines, not sent to the model. This includes ``> Add ... to the chat?``: the
  text added is not written to the file, so only the next "sent" figure shows it. A console
  message with several lines has ``> `` on its first line only; aider ends each one with two
  spaces, which is how its last line is found. The banner lines ``Aider vX``, ``Model:`` /
  ``Main model:``, ``Weak model:`` and ``Repo-map:`` also give ``SessionInfo``.
- Plain lines: the assistant's reply (blank lines inside it are kept). Inside a reply, a ``> ``
  or ``#### `` line is the model's own Markdown unless it ends with aider's two spaces.
- ``> Tokens: 3.0k sent, 1.2k cache write, 2.0k cache hit, 577 received. Cost: ...``: the usage
  of the request that produced the reply just before it (the line comes after the reply). The
  reply is held until its end is known, so the events come in step order: ``RequestSent``,
  ``UsageReported``, then the reply. "sent" is the whole prompt (aider's repo map and file
  contents included, which the file does not show): ``Usage(input = sent - cache write,
  cache_read = cache hit, cache_write = cache write, output = received,
  input_includes_cache=True)``, so ``prompt_tokens`` equals "sent". Figures are rounded by aider
  ("3.0k", "12k"; also "1,234" and "1.2M" are read). A Tokens line with no reply before it is a
  request of its own; a reply with no Tokens line is a request without usage.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from ctx_inspect.core.model import (
    ContextReset,
    Event,
    Message,
    MessageAdded,
    MessageKind,
    RequestSent,
    Role,
    SessionInfo,
    SourceSpan,
    Usage,
    UsageReported,
)
from ctx_inspect.formats.base import LineParser, decode_text
from ctx_inspect.formats.chat_common import text_part
from ctx_inspect.formats.registry import FormatSpec, Head, register

HEADER = re.compile(r"# aider chat started at (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\s*$")
NUMBER = r"([\d][\d,]*(?:\.\d+)?\s*[kKmM]?)"
TOKENS = re.compile(r">\s*Tokens:\s*" + NUMBER + r" sent\b")
RECEIVED = re.compile(NUMBER + r" received\b")
CACHE_WRITE = re.compile(NUMBER + r" cache write\b")
CACHE_HIT = re.compile(NUMBER + r" cache hit\b")
VERSION = re.compile(r"Aider v(\S+)")
MODEL = re.compile(r"(?:Main model|Model): (\S+)")
WEAK_MODEL = re.compile(r"Weak model: (\S+)")
REPO_MAP = re.compile(r"Repo-map: using (\d+) tokens")
PROMPT_COMMANDS = frozenset({"/ask", "/code", "/architect", "/context", "/help"})
CLEAR_COMMANDS = frozenset({"/clear", "/reset"})
USAGE_NOTE = "aider prints its token figures rounded (3.0k, 12k): usage is within 0.5% to 5%"


def parse_count(text: str) -> int:
    """Aider's rounded token figure ("3.0k", "12k", "1,234", "1.2M") as a number."""
    text = text.strip().replace(",", "")
    scale = 1
    if text[-1:] in "kK":
        scale, text = 1000, text[:-1]
    elif text[-1:] in "mM":
        scale, text = 1_000_000, text[:-1]
    try:
        return round(float(text.strip()) * scale)
    except ValueError:
        return 0


@dataclass
class _Block:
    """Consecutive lines that form one message."""

    kind: str  # "user", "console" or "reply"
    line: int
    offset: int
    end: int  # offset just past the last line
    lines: list[str] = field(default_factory=list)

    def span(self, source: int) -> SourceSpan:
        return SourceSpan(
            source=source, offset=self.offset, length=self.end - self.offset, line=self.line
        )


class AiderParser(LineParser):
    format_name = "aider"

    def __init__(self, source: int = 0, path: str = "") -> None:
        super().__init__(source, path)
        self._block: _Block | None = None
        self._prev_line = 0
        self._console_open = False  # a console message whose last line has not come yet
        self._awaiting_usage = False  # the latest reply's Tokens line may still come
        self._chats = 0
        self._model: str | None = None
        self._model_changes: list[tuple[int, str]] = []  # (line, model), for re-reads

    # -- lines ----------------------------------------------------------------------------

    def parse_line(self, line: bytes, span: SourceSpan) -> Iterable[Event]:
        out: list[Event] = []
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            text = decode_text(line, self, span, out)
        if span.offset == 0:
            text = text.lstrip("\ufeff")
        number = span.line
        blank_lines = number - self._prev_line - 1 if self._prev_line else 0
        self._prev_line = number
        end = span.offset + span.length
        block = self._block
        if blank_lines > 0:
            self._console_open = False
            if block is not None and block.kind != "reply":
                self._flush(out)
                block = None

        first = text[:1]
        if first == "#" and text.startswith("# aider chat started at "):
            header = HEADER.match(text)
            if header:
                self._flush(out)
                self._chat(header.group(1), span, out)
                return out

        in_reply = block is not None and block.kind == "reply"
        aider_mark = text.endswith("  ")
        if first == "#" and text.startswith("####") and (not in_reply or aider_mark):
            content = text[5:] if text.startswith("#### ") else text[4:]
            self._add("user", content.rstrip(" "), span, end, out)
            self._awaiting_usage = False
            return out
        if self._console_open and not in_reply:
            self._add("console", text.rstrip(" "), span, end, out)
            self._console_open = not aider_mark
            return out
        if first == ">":
            tokens = text.startswith("> Tokens:") and TOKENS.match(text) is not None
            if tokens:
                self._tokens(text, span, out)
                return out
            if not in_reply or aider_mark:
                content = text[2:] if text.startswith("> ") else text[1:]
                self._add("console", content.rstrip(" "), span, end, out)
                self._console_open = not aider_mark
                self._banner(content, span, out)
                return out
        if in_reply and block is not None:
            if blank_lines > 0:
                block.lines.extend([""] * blank_lines)
            block.lines.append(text)
            block.end = end
            return out
        self._flush(out)
        self._awaiting_usage = False
        self._block = _Block("reply", number, span.offset, end, [text])
        return out

    def end_of_input(self) -> Iterable[Event]:
        out: list[Event] = []
        self._flush(out)
        return out

    def messages_at(self, data: bytes, span: SourceSpan) -> list[Message]:
        """Re-read one message's lines, numbered as in the file."""
        fresh = type(self)(self.source, self.path)
        fresh._line_no = max(span.line - 1, 0)
        fresh._offset = span.offset
        index = bisect.bisect_right(self._model_changes, (span.line, "\uffff")) - 1
        fresh._model = self._model_changes[index][1] if index >= 0 else None
        events = [*fresh.feed(data + b"\n"), *fresh.finish()]
        return [e.message for e in events if isinstance(e, MessageAdded)]

    # -- pieces ---------------------------------------------------------------------------

    def _add(self, kind: str, text: str, span: SourceSpan, end: int, out: list[Event]) -> None:
        block = self._block
        if block is not None and block.kind == kind:
            block.lines.append(text)
            block.end = end
            return
        self._flush(out)
        self._block = _Block(kind, span.line, span.offset, end, [text])

    def _chat(self, started: str, span: SourceSpan, out: list[Event]) -> None:
        self._chats += 1
        self._awaiting_usage = False
        self._console_open = False
        if self._chats > 1:
            out.append(
                ContextReset(keep_through=None, keep_system=False, reason="new-chat", span=span)
            )
        out.append(
            SessionInfo(
                agent="aider",
                extra={"chat_started": started, "chats": self._chats, "usage_note": USAGE_NOTE},
                span=span,
            )
        )

    def _banner(self, text: str, span: SourceSpan, out: list[Event]) -> None:
        if match := VERSION.match(text):
            out.append(SessionInfo(version=match.group(1), span=span))
        elif match := MODEL.match(text):
            self._model = match.group(1)
            self._model_changes.append((span.line, self._model))
            out.append(SessionInfo(model=self._model, span=span))
        elif match := WEAK_MODEL.match(text):
            out.append(SessionInfo(extra={"weak_model": match.group(1)}, span=span))
        elif match := REPO_MAP.match(text):
            out.append(SessionInfo(extra={"repo_map_tokens": int(match.group(1))}, span=span))

    def _tokens(self, text: str, span: SourceSpan, out: list[Event]) -> None:
        sent_match = TOKENS.match(text)
        sent = parse_count(sent_match.group(1)) if sent_match else 0
        received = RECEIVED.search(text)
        write = CACHE_WRITE.search(text)
        hit = CACHE_HIT.search(text)
        cache_write = parse_count(write.group(1)) if write else 0
        usage = Usage(
            input=max(sent - cache_write, 0),
            cache_read=parse_count(hit.group(1)) if hit else 0,
            cache_write=min(cache_write, sent),
            output=parse_count(received.group(1)) if received else 0,
            input_includes_cache=True,
        )
        report = UsageReported(usage=usage, model=self._model, span=span)
        block = self._block
        if block is not None and block.kind == "reply":
            self._block = None
            self._reply(block, out, report)
        elif self._awaiting_usage:
            self._flush(out)
            out.append(report)
        else:
            self._flush(out)
            out.append(RequestSent(model=self._model, span=span))
            out.append(report)
        self._awaiting_usage = False

    def _reply(self, block: _Block, out: list[Event], usage: UsageReported | None) -> None:
        span = block.span(self.source)
        out.append(RequestSent(model=self._model, span=span))
        if usage is not None:
            out.append(usage)
        message = Message(
            id=f"L{block.line}",
            role=Role.ASSISTANT,
            parts=(text_part("\n".join(block.lines)),),
            model=self._model,
        )
        out.append(MessageAdded(message=message, span=span))
        self._awaiting_usage = usage is None

    def _flush(self, out: list[Event]) -> None:
        block = self._block
        if block is None:
            return
        self._block = None
        if block.kind == "reply":
            self._reply(block, out, None)
            return
        span = block.span(self.source)
        text = "\n".join(block.lines)
        msg_id = f"L{block.line}"
        if block.kind == "console":
            message = Message(
                id=msg_id,
                role=Role.TOOL,
                kind=MessageKind.META,
                parts=(text_part(text),),
                visible=False,
            )
            out.append(MessageAdded(message=message, span=span))
            return
        command = text.split(None, 1)[0] if text.startswith("/") else None
        has_args = command is not None and len(text.split(None, 1)) > 1
        visible = command is None or (command in PROMPT_COMMANDS and has_args)
        message = Message(
            id=msg_id,
            role=Role.USER,
            kind=MessageKind.MESSAGE if visible else MessageKind.META,
            parts=(text_part(text),),
            visible=visible,
        )
        out.append(MessageAdded(message=message, span=span))
        if command in CLEAR_COMMANDS:
            out.append(
                ContextReset(keep_through=None, keep_system=False, reason="clear", span=span)
            )


def sniff(head: Head) -> float:
    text = head.text.lstrip("\ufeff")
    for line in text.split("\n", 50)[:50]:
        if not line.strip():
            continue
        if HEADER.match(line.rstrip("\r")):
            return 0.95
        break
    if head.path.name.endswith(".aider.chat.history.md"):
        return 0.9
    return 0.0


SPEC = register(
    FormatSpec(
        name="aider",
        description="Aider chat histories (.aider.chat.history.md, Markdown)",
        reads=".aider.chat.history.md in each repository aider ran in (*.md)",
        parser=AiderParser,
        sniff=sniff,
        default_profile="generic",
    )
)
