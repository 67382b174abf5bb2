"""Snapshots of the messages table, the message detail and the events table (100x30)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.app import App, ComposeResult
from textual.pilot import Pilot

from ctx_inspect.core.model import Message, MessageKind, Part, PartType, Role
from ctx_inspect.ui.widgets.events_view import EventRow, EventsView
from ctx_inspect.ui.widgets.message_detail import MessageDetail
from ctx_inspect.ui.widgets.messages_view import MessageRow, MessagesView

SIZE = (100, 30)
SnapCompare = Callable[..., bool]

ROLES = ("system", "user", "assistant", "tool", "assistant", "tool")
KINDS = ("message", "message", "tool_call", "tool_result", "summary", "tool_result")
FLAGS = ("", "", "", "pruned", "summary", "dropped,removed")


def message_row(index: int) -> MessageRow:
    role, kind = ROLES[index % 6], KINDS[index % 6]
    tokens = 40 + (index * 37) % 900
    return MessageRow(
        index=index,
        role=role,
        kind=kind,
        tokens=tokens,
        share=tokens / 8_192,
        running=sum(40 + (i * 37) % 900 for i in range(index + 1)),
        flags=FLAGS[index % 6],
        origin=("reported", "exact", "estimated")[index % 3],
        tool="[bold]bash[/bold]\x1b[31m" if role == "tool" else None,
        in_context=index % 6 != 5,
    )


def event_row(index: int) -> EventRow:
    kinds = ("debug", "log", "guard", "compaction", "prune", "tool_output", "final_turn")
    kind = kinds[index % len(kinds)]
    topic = "context-guard/evaluate" if kind == "debug" else kind
    summary = f"[red]event[/red] {index} \x1b]8;;http://x\x07link\x1b]8;;\x07 \x1b[1mbold\x00"
    return EventRow(index, index // 3, kind, topic, summary)


ADVERSARIAL = (
    "Rich markup: [bold]red[/bold] [link=http://evil]click[/link]\n"
    "ANSI: \x1b[31mred\x1b[0m  OSC 8: \x1b]8;;http://x\x07link\x1b]8;;\x07\n"
    "BEL \x07 NUL \x00 CR \r tab\tend\n" + "a long line " * 20
)


class MessagesApp(App[None]):
    def compose(self) -> ComposeResult:
        yield MessagesView()

    def on_mount(self) -> None:
        view = self.query_one(MessagesView)
        view.set_source(60, message_row)
        view.cursor = 3
        view.focus()


class DetailApp(App[None]):
    def compose(self) -> ComposeResult:
        yield MessageDetail()

    def on_mount(self) -> None:
        message = Message(
            id="msg-42",
            role=Role.ASSISTANT,
            kind=MessageKind.TOOL_CALL,
            model="test-model",
            parts=(
                Part(type=PartType.TEXT, text=ADVERSARIAL),
                Part(type=PartType.THINKING, text="Considering [i]options[/i]."),
                Part(
                    type=PartType.TOOL_CALL,
                    tool_name="bash",
                    call_id="call_1",
                    arguments='{"command": "printf \'\\\\e[31m\'", "timeout": 30}',
                ),
                Part(
                    type=PartType.TOOL_RESULT,
                    tool_name="bash",
                    text="\x1b[31mfailed",
                    is_error=True,
                ),
                Part(type=PartType.IMAGE, media_type="image/png", data_bytes=48_213),
            ),
        )
        header = "#43  msg-42  assistant / tool_call  1,234 tokens (exact)  added at step 7"
        self.query_one(MessageDetail).show(message, header=header)


class EventsApp(App[None]):
    def compose(self) -> ComposeResult:
        yield EventsView()

    def on_mount(self) -> None:
        view = self.query_one(EventsView)
        view.set_source(200, event_row)
        view.cursor = 2
        view.focus()


async def _filtered(pilot: Pilot[Any]) -> None:
    view = pilot.app.query_one(EventsView)
    view.set_filter("topic:context-guard/evaluate")
    while view.filtering:
        await pilot.pause(0.01)
    await pilot.pause()


def test_messages_view(snap_compare: SnapCompare) -> None:
    assert snap_compare(MessagesApp(), terminal_size=SIZE)


def test_messages_view_scrolled(snap_compare: SnapCompare) -> None:
    assert snap_compare(MessagesApp(), terminal_size=SIZE, press=["pagedown", "down"])


def test_message_detail(snap_compare: SnapCompare) -> None:
    assert snap_compare(DetailApp(), terminal_size=SIZE)


def test_events_view(snap_compare: SnapCompare) -> None:
    assert snap_compare(EventsApp(), terminal_size=SIZE)


def test_events_view_filtered(snap_compare: SnapCompare) -> None:
    assert snap_compare(EventsApp(), terminal_size=SIZE, run_before=_filtered)
