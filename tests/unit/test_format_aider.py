"""Aider chat history reader: chats, user input, console output, replies, rounded usage."""

from __future__ import annotations

import bisect
import re
from pathlib import Path
from typing import Any

import pytest

from ctx_inspect.app.config import build_profile
from ctx_inspect.app.loader import load_session
from ctx_inspect.core.model import (
    ContextReset,
    Event,
    MessageAdded,
    MessageKind,
    ParseIssue,
    RequestSent,
    Role,
    SessionInfo,
    UsageReported,
)
from ctx_inspect.formats import aider, registry
from ctx_inspect.formats.aider import AiderParser, parse_count
from ctx_inspect.formats.registry import HEAD_BYTES, Head

DATA = Path(__file__).parents[1] / "data" / "aider"
TYPICAL = "typical.aider.chat.history.md"
FIXTURES = (TYPICAL, "truncated.aider.chat.history.md", "invalid_utf8.aider.chat.history.md")


def parse(data: bytes, sizes: list[int] | None = None) -> tuple[list[Event], AiderParser]:
    parser = AiderParser(0, "x")
    out: list[Event] = []
    pos = 0
    for size in sizes or []:
        out.extend(parser.feed(data[pos : pos + size]))
        pos += size
    out.extend(parser.feed(data[pos:]))
    out.extend(parser.finish())
    return out, parser


def read(data: bytes, sizes: list[int] | None = None) -> list[Event]:
    return parse(data, sizes)[0]


def fixture(name: str) -> bytes:
    return (DATA / name).read_bytes()


def messages(events: list[Event]) -> list[MessageAdded]:
    return [e for e in events if isinstance(e, MessageAdded)]


def of_type(events: list[Event], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def kinds(events: list[Event]) -> list[str]:
    return [e.message.role.value if isinstance(e, MessageAdded) else e.type for e in events]


def assert_every_line_accounted(data: bytes, events: list[Event]) -> None:
    starts = [0]
    for i, byte in enumerate(data):
        if byte == 0x0A:
            starts.append(i + 1)
    covered: set[int] = set()
    for event in events:
        span = event.span
        if span is None:
            continue
        first = bisect.bisect_right(starts, span.offset)
        last = bisect.bisect_right(starts, span.offset + max(span.length - 1, 0))
        covered.update(range(first, last + 1))
    lines = {i for i, raw in enumerate(data.split(b"\n"), start=1) if raw.strip()}
    assert lines <= covered


# -- the typical history -------------------------------------------------------------------


def test_typical_history_order() -> None:
    data = fixture(TYPICAL)
    events = read(data)
    assert not of_type(events, ParseIssue)
    assert_every_line_accounted(data, events)
    assert kinds(events) == [
        "info",
        "info",
        "info",
        "info",
        "info",
        "tool",  # the banner, one META message
        "user",
        "request",
        "usage",
        "assistant",
        "user",  # /add
        "tool",
        "user",  # /ask
        "request",
        "usage",
        "assistant",
        "tool",  # a three-line traceback
        "user",  # /clear
        "reset",
        "user",
        "request",
        "assistant",
        "tool",  # ^C: the Tokens line after it still belongs to the reply's request
        "usage",
        "request",  # a Tokens line with no reply: a request of its own
        "usage",
        "user",
        "request",  # a reply with no Tokens line
        "assistant",
        "reset",
        "info",
        "info",
        "info",
        "tool",
        "user",
        "request",
        "assistant",
        "tool",
        "usage",
    ]


def test_messages_and_their_kinds() -> None:
    added = [m.message for m in messages(read(fixture(TYPICAL)))]
    by_id = {m.id: m for m in added}
    banner = by_id["L4"]
    assert banner.kind is MessageKind.META and not banner.visible and banner.role is Role.TOOL
    assert banner.text.splitlines()[1] == "Aider v0.86.1"
    user = by_id["L10"]
    assert user.kind is MessageKind.MESSAGE and user.visible
    assert user.text == "Explain the retry logic in client.py\nand keep it short."
    reply = by_id["L13"]
    assert reply.role is Role.ASSISTANT and reply.model == "gpt-4o"
    assert reply.text == (
        "The retry loop lives in `fetch()`:\n\n"
        "> quoted from the docstring: retries three times\n\n"
        "#### Details\n"
        "It sleeps 2 ** attempt seconds between tries."
    )
    add = by_id["L22"]
    assert add.kind is MessageKind.META and not add.visible and add.text == "/add client.py"
    ask = by_id["L25"]
    assert ask.kind is MessageKind.MESSAGE and ask.visible
    traceback = by_id["L30"]
    assert traceback.kind is MessageKind.META
    assert traceback.text.splitlines() == [
        "Traceback (most recent call last):",
        '  File "client.py", line 3, in <module>',
        "ValueError: bad",
    ]
    clear = by_id["L34"]
    assert clear.text == "/clear" and not clear.visible
    assert by_id["L57"].model == "claude-sonnet-4"


def test_usage_figures_and_session_info() -> None:
    events = read(fixture(TYPICAL))
    usages = [e.usage for e in of_type(events, UsageReported)]
    assert [(u.input, u.cache_read, u.cache_write, u.output) for u in usages] == [
        (1000, 800, 200, 77),
        (12000, 0, 0, 1234),
        (2500, 0, 0, 10),
        (800, 0, 0, 3),
        (3000, 0, 0, 45),
    ]
    assert [u.prompt_tokens for u in usages] == [1200, 12000, 2500, 800, 3000]
    resets = of_type(events, ContextReset)
    assert [(r.reason, r.keep_through) for r in resets] == [("clear", None), ("new-chat", None)]
    infos = of_type(events, SessionInfo)
    chats = [i for i in infos if i.agent == "aider"]
    assert [i.extra["chat_started"] for i in chats] == [
        "2025-06-01 09:15:02",
        "2025-06-02 10:00:00",
    ]
    assert all("rounded" in i.extra["usage_note"] for i in chats)
    assert [i.version for i in infos if i.version] == ["0.86.1", "0.86.2"]
    assert [i.model for i in infos if i.model] == ["gpt-4o", "claude-sonnet-4"]
    assert {"weak_model": "gpt-4o-mini"} in [i.extra for i in infos]
    assert {"repo_map_tokens": 1024} in [i.extra for i in infos]


def test_history_in_a_session() -> None:
    loaded = load_session(
        DATA / TYPICAL, build_profile("generic"), format_spec=aider.SPEC, count_exact=False
    )
    session = loaded.session
    assert [s.reported for s in session.steps] == [1200, 12000, 2500, 800, None, 3000]
    # after /clear, the first request sees only the new question
    live = [session.table.ids[i] for i in session.in_context(3)]
    assert live == ["L36"]
    live = [session.table.ids[i] for i in session.in_context(6)]
    assert live == ["L55"]  # the second chat starts empty


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("577", 577),
        ("3.0k", 3000),
        ("2.4k", 2400),
        ("12k", 12000),
        ("1,234", 1234),
        ("1.2M", 1_200_000),
        ("x", 0),
    ],
)
def test_parse_count(text: str, value: int) -> None:
    assert parse_count(text) == value


# -- bad input -----------------------------------------------------------------------------


def test_truncated_last_line_is_still_read() -> None:
    data = fixture("truncated.aider.chat.history.md")
    events = read(data)
    assert not of_type(events, ParseIssue)
    # the cut Tokens line still names "sent"; the received figure is lost
    usage = of_type(events, UsageReported)
    assert [(u.usage.input, u.usage.output) for u in usage] == [(1200, 0)]
    assert kinds(events)[-3:] == ["request", "usage", "assistant"]


def test_invalid_utf8_is_replaced_and_flagged() -> None:
    events = read(fixture("invalid_utf8.aider.chat.history.md"))
    issues = of_type(events, ParseIssue)
    assert len(issues) == 1 and "UTF-8" in issues[0].reason and issues[0].line == 4
    assert [m.message.text for m in messages(events)] == ["caf\ufffd please", "fine é here"]


def test_plain_text_without_header_is_read_as_replies() -> None:
    events = read(b"just a note\n\n#### hello  \n")
    assert kinds(events) == ["request", "assistant", "user"]


def test_crlf() -> None:
    data = fixture(TYPICAL)
    assert [m.message for m in messages(read(data.replace(b"\n", b"\r\n")))] == [
        m.message for m in messages(read(data))
    ]


# -- sniffing ------------------------------------------------------------------------------


def head(data: bytes, name: str = "notes.md") -> Head:
    return Head(path=Path(name), data=data[:HEAD_BYTES])


def test_sniff() -> None:
    assert aider.sniff(head(fixture(TYPICAL))) == 0.95
    assert (
        aider.sniff(head(b"\xef\xbb\xbf\n\n# aider chat started at 2025-01-01 00:00:00\n")) == 0.95
    )
    assert aider.sniff(head(b"#### hi\n", ".aider.chat.history.md")) == 0.9
    assert aider.sniff(head(b"# My notes\n# aider chat started at 2025-01-01 00:00:00\n")) == 0.0
    assert aider.sniff(head(b'{"type":"session_meta","payload":{}}\n')) == 0.0
    assert aider.sniff(head(b"")) == 0.0


@pytest.mark.parametrize("name", [*FIXTURES])
def test_fixtures_are_detected(name: str) -> None:
    assert registry.detect(DATA / name).name == "aider"


# -- the real sample -----------------------------------------------------------------------

TOKENS = re.compile(r"^> Tokens: ([\d.,]+)(k?) sent, ([\d.,]+)(k?) received\.", re.MULTILINE)


def figure(number: str, k: str) -> int:
    value = float(number.replace(",", ""))
    return round(value * 1000) if k else int(value)


@pytest.mark.corpus
def test_real_history(corpus: Path) -> None:
    files = sorted((corpus / "aider").glob("*.aider.chat.history.md"))
    assert files
    for path in files:
        assert registry.detect(path).name == "aider"
        data = path.read_bytes()
        events = read(data)
        assert not of_type(events, ParseIssue)
        assert_every_line_accounted(data, events)
        text = data.decode()
        expected = [(figure(m[0], m[1]), figure(m[2], m[3])) for m in TOKENS.findall(text)]
        assert len(expected) == text.count("> Tokens: ")
        requests = of_type(events, RequestSent)
        usages = of_type(events, UsageReported)
        assert len(requests) == len(usages) == len(expected)
        assert [(u.usage.prompt_tokens, u.usage.output) for u in usages] == expected
        users = [m for m in messages(events) if m.message.role is Role.USER]
        assert len(users) == len(re.findall(r"(?:^|\n\n)#### ", text))
        replies = [m for m in messages(events) if m.message.role is Role.ASSISTANT]
        assert len(replies) == len(expected)  # every reply has its Tokens line here
