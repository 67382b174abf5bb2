"""The thread / turn / item JSONL event stream, a building block for the readers of agents that
write it: Codex's ``codex exec --json`` stdout, and BaseAgent's stdout, which copies it.

One JSON object per line, its kind in ``type``. ``thread.started`` -> ``SessionInfo`` (the
agent, ``session_id``, and a note that this stream cannot show context management:
``extra["context_note"]``); an ``agent_message`` item -> an assistant text message; a
``command_execution`` item -> on ``item.started`` an assistant tool call (a command written
``name(arguments)`` gives the tool name and its arguments), on ``item.completed`` the tool result
(``aggregated_output``; ``failed`` / a non-zero ``exit_code`` marks an error) with id ``<item
id>:result``. Each model response prints its text first (if any), then its tool calls, and
nothing between two responses: a response without text cannot be told from more calls of the
response before it. So ``RequestSent`` goes before every ``agent_message`` and before a tool call
that opens a response, and a count of requests from this stream alone is a lower bound.
``turn.completed`` usage is the total over every model call of the turn, not a request's size
-> ``SessionInfo(extra={"turn_usage": ...})``; ``turn.failed`` and ``error`` ->
``LogLine(level="error")``; ``turn.started`` and unknown event types -> ``LogLine``. Lines that
are not JSON objects (banners other programs print into the stream, some ANSI-coloured) ->
``LogLine(level="foreign")``; a line that starts like a JSON object but is not one is a
``ParseIssue``.

An agent's reader derives from ``ItemEventsParser``, names its format, its agent and its note,
and adds the items only it writes (``_item``) or the events it treats otherwise (``_event``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, ClassVar

from ctx_inspect.core.model import (
    Event,
    LogLine,
    Message,
    MessageAdded,
    MessageKind,
    Part,
    PartType,
    RequestSent,
    Role,
    SessionInfo,
    SourceSpan,
)
from ctx_inspect.formats.base import LineParser, decode_text, shown
from ctx_inspect.formats.jsinspect import strip_ansi

# a command written as a call: ``name(arguments)``
_COMMAND = re.compile(r"^([\w.:\-]+)\((.*)\)$", re.S)


class ItemEventsParser(LineParser):
    """The thread / turn / item events of one agent's stream (see the module docstring)."""

    agent: ClassVar[str | None] = None  # the agent ``thread.started`` names
    context_note: ClassVar[str] = ""  # what this stream cannot show, said on ``thread.started``
    # whether a tool call that follows a tool result belongs to the response that is open (an
    # agent that prints nothing between two responses, a response's text before its calls)
    response_spans_results: ClassVar[bool] = False

    def __init__(self, source: int = 0, path: str = "") -> None:
        super().__init__(source, path)
        self._after_text = False  # the last item was an agent_message (a response's text)

    def parse_line(self, line: bytes, span: SourceSpan) -> Iterable[Event]:
        out: list[Event] = []
        if not line.lstrip().startswith(b"{"):
            text = strip_ansi(decode_text(line, self, span, out)).rstrip()
            out.append(LogLine(text=text, level="foreign", span=span))
            return out
        value = self.load_json(line, span, out)
        if value is None:
            if not out:
                out.append(self.issue(span, "not an event object (null)", line))
            return out
        if not isinstance(value, dict):
            out.append(self.issue(span, "not an event object", line))
            return out
        kind = value.get("type")
        if not isinstance(kind, str):
            out.append(self.issue(span, "no event type", line))
            return out
        out.extend(self._event(kind, value, span, line))
        return out

    def _event(self, kind: str, value: dict[str, Any], span: SourceSpan, raw: bytes) -> list[Event]:
        if kind == "thread.started":
            thread_id = value.get("thread_id")
            return [
                SessionInfo(
                    agent=self.agent,
                    session_id=thread_id if isinstance(thread_id, str) else None,
                    extra={"context_note": self.context_note},
                    span=span,
                )
            ]
        if kind in ("item.started", "item.completed"):
            item = value.get("item")
            if not isinstance(item, dict):
                return [self.issue(span, f"{kind} without an item object", raw)]
            return self._item(kind, item, span, raw)
        if kind == "turn.completed":
            usage = value.get("usage")
            extra = {"turn_usage": usage} if isinstance(usage, dict) else {}
            return [SessionInfo(extra=extra, span=span)]
        if kind in ("turn.failed", "error"):
            error = value.get("error")
            message = error.get("message") if isinstance(error, dict) else value.get("message")
            text = f"{kind}: {message}" if isinstance(message, str) else kind
            return [LogLine(text=text, level="error", tag=kind, span=span)]
        return [LogLine(text=kind, tag=kind, span=span)]  # turn.started, item.updated, unknown

    def _item(self, kind: str, item: dict[str, Any], span: SourceSpan, raw: bytes) -> list[Event]:
        item_type = item.get("type")
        item_id = item.get("id")
        if not isinstance(item_id, str) or not item_id:
            item_id = f"line-{span.line}"
        if item_type == "agent_message" and kind == "item.completed":
            text = item.get("text")
            self._after_text = True
            message = Message(
                id=item_id,
                role=Role.ASSISTANT,
                parts=(Part(type=PartType.TEXT, text=text if isinstance(text, str) else ""),),
            )
            return [RequestSent(span=span), MessageAdded(message=message, span=span)]
        if item_type == "command_execution":
            command = item.get("command")
            command = command if isinstance(command, str) else ""
            if kind == "item.started":
                return self._call(item_id, command, span)
            return [self._result(item_id, command, item, span)]
        self._after_text = False
        return [LogLine(text=f"{kind} {shown(item_type, quoted=False)}", tag=kind, span=span)]

    def _call(self, item_id: str, command: str, span: SourceSpan) -> list[Event]:
        m = _COMMAND.match(command)
        name, arguments = (m.group(1), m.group(2)) if m else (command, None)
        message = Message(
            id=item_id,
            role=Role.ASSISTANT,
            kind=MessageKind.TOOL_CALL,
            parts=(
                Part(
                    type=PartType.TOOL_CALL,
                    tool_name=name or None,
                    call_id=item_id,
                    arguments=arguments,
                ),
            ),
        )
        out: list[Event] = [] if self._after_text else [RequestSent(span=span)]
        self._after_text = self.response_spans_results
        out.append(MessageAdded(message=message, span=span))
        return out

    def _result(
        self, item_id: str, command: str, item: dict[str, Any], span: SourceSpan
    ) -> MessageAdded:
        self._after_text = self._after_text and self.response_spans_results
        output = item.get("aggregated_output")
        exit_code = item.get("exit_code")
        failed = item.get("status") == "failed" or (
            isinstance(exit_code, int) and not isinstance(exit_code, bool) and exit_code != 0
        )
        text = output if isinstance(output, str) else ""
        return tool_result(item_id, text, command or None, failed, span)


def tool_result(
    item_id: str, text: str, tool_name: str | None, failed: bool, span: SourceSpan
) -> MessageAdded:
    """The result of the tool call ``item_id`` (its id ``<item id>:result``)."""
    message = Message(
        id=f"{item_id}:result",
        role=Role.TOOL,
        kind=MessageKind.TOOL_RESULT,
        parts=(
            Part(
                type=PartType.TOOL_RESULT,
                text=text,
                tool_name=tool_name,
                call_id=item_id,
                is_error=failed,
            ),
        ),
    )
    return MessageAdded(message=message, span=span)
