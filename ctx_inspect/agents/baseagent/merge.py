"""One session of the two streams of a BaseAgent run (``--merge``, in either order).

The stderr log (``reader_log.py``) holds the requests, BaseAgent's figures and its decisions;
the stdout (``reader_events.py``) holds the messages. The log's requests are the run's, the
stdout's messages are placed in the iterations they answer, by the log's ``Executing tool:
<name>`` lines, and the self-verification prompt the log announces is put in as a user message
(a stand-in: its text is in neither stream).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ctx_inspect.agents.baseagent.reader_events import BaseAgentEventsParser
from ctx_inspect.agents.baseagent.reader_log import ITERATION, BaseAgentLogParser
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
)

_LOG = BaseAgentLogParser.format_name
_EVENTS = BaseAgentEventsParser.format_name
_EXECUTING = re.compile(r"^Executing tool: (.*)$", re.S)
_VERIFICATION = "Requesting self-verification before completion"
VERIFICATION_TEXT = (
    "(BaseAgent's self-verification prompt: it asks the model to check its work before "
    "finishing; its text is in neither stream)"
)


def merge_run(streams: Sequence[Sequence[Event]], names: Sequence[str]) -> list[Event] | None:
    """One session of a run's stderr log and stdout (``--merge``, in either order), see
    ``merged_events``; None for streams that are not one log and one stdout."""
    if sorted(names) != sorted((_LOG, _EVENTS)):
        return None
    return merged_events([(n, list(events)) for n, events in zip(names, streams, strict=True)])


def merged_events(streams: list[tuple[str, list[Event]]]) -> list[Event]:
    """One session of a run's stderr log and stdout events.

    The log's requests are the run's (one per iteration, and one per summarisation call); the
    stdout's messages are placed in the iterations they answer: after an iteration's request,
    its response's text, then one tool call and its result for each ``Executing tool`` line
    (which names the tool, in order). The log's ``Requesting self-verification`` adds the user
    message BaseAgent sends then (its text is in neither stream: a stand-in of that role, so
    that the turns the prune protects are where they were). The stdout's own requests, and its
    note that it cannot show context management, are left out. Where the two disagree (a tool
    that is not the one the log names, items left over), a warning says from where.
    """
    log = [e for name, events in streams if name == _LOG for e in events]
    stdout = [e for name, events in streams if name != _LOG for e in events]
    if not any(isinstance(e, RequestSent) and not e.compaction for e in log):
        return [*log, *stdout]  # no iteration to place the messages in: each keeps its own
    cursor = _Stdout(stdout)
    out: list[Event] = []
    answering = False  # after an iteration's request, until the next iteration
    for event in log:
        if isinstance(event, RequestSent):
            answering = not event.compaction
            if answering:
                out.extend(cursor.notes())
                out.append(event)
                out.extend(cursor.text())
                continue
        elif answering and isinstance(event, LogLine) and event.tag == "loop":
            if m := _EXECUTING.match(event.text):
                out.append(event)
                out.extend(cursor.call(m.group(1), event))
                continue
            if event.text == _VERIFICATION:
                out.append(event)
                out.append(_verification(cursor.prompts, event))
                cursor.prompts += 1
                continue
            if ITERATION.match(event.text):
                answering = False
        out.append(event)
    out.extend(cursor.rest())
    return out


def _verification(number: int, after: LogLine) -> MessageAdded:
    message = Message(
        id=f"self-verification-{number + 1}",
        role=Role.USER,
        kind=MessageKind.ATTACHMENT,
        parts=(Part(type=PartType.TEXT, text=VERIFICATION_TEXT),),
        timestamp=after.timestamp,
    )
    return MessageAdded(message=message, timestamp=after.timestamp)


class _Stdout:
    """The stdout's events, taken in order as the log's iterations place them."""

    def __init__(self, events: list[Event]) -> None:
        self.events: list[Event] = []
        for event in events:
            if isinstance(event, RequestSent):
                continue  # the log counts the requests
            if isinstance(event, SessionInfo) and "context_note" in event.extra:
                extra = {k: v for k, v in event.extra.items() if k != "context_note"}
                event = event.model_copy(update={"extra": extra})
            self.events.append(event)
        self.pos = 0
        self.prompts = 0  # self-verification prompts added
        self.warned = False

    def _next(self) -> Message | None:
        for event in self.events[self.pos :]:
            if isinstance(event, MessageAdded):
                return event.message
        return None

    def notes(self) -> list[Event]:
        """The events up to the next message."""
        start = self.pos
        while self.pos < len(self.events) and not isinstance(self.events[self.pos], MessageAdded):
            self.pos += 1
        return self.events[start : self.pos]

    def _take(self) -> list[Event]:
        out = self.notes()
        if self.pos < len(self.events):
            out.append(self.events[self.pos])
            self.pos += 1
        return out

    def text(self) -> list[Event]:
        """A response's text, which comes before its tool calls, when it has one."""
        message = self._next()
        if message is None or message.role is not Role.ASSISTANT:
            return []
        if message.kind is not MessageKind.MESSAGE:
            return []
        return self._take()

    def call(self, tool: str, line: LogLine) -> list[Event]:
        """The call the log's ``Executing tool`` line names, and its result."""
        message = self._next()
        if message is None or message.kind is not MessageKind.TOOL_CALL:
            return self._warn(line, f"no tool call of {tool!r} in the stdout here")
        out = self._take()
        if message.tool_name != tool:
            out.extend(
                self._warn(line, f"the stdout's call is {message.tool_name!r}, not {tool!r}")
            )
        result = self._next()
        if result is not None and result.kind is MessageKind.TOOL_RESULT:
            out.extend(self._take())
        return out

    def rest(self) -> list[Event]:
        """What no iteration took: at the end, said once when it holds messages."""
        rest = self.events[self.pos :]
        self.pos = len(self.events)
        left = sum(1 for e in rest if isinstance(e, MessageAdded))
        if left and not self.warned:
            rest.append(
                LogLine(
                    text=f"--merge: {left} stdout messages after the log's last iteration",
                    level="warn",
                    tag="merge",
                )
            )
        return rest

    def _warn(self, line: LogLine, what: str) -> list[Event]:
        if self.warned:
            return []
        self.warned = True
        text = f"--merge: the stdout and the stderr log disagree from here ({what})"
        return [LogLine(text=text, level="warn", tag="merge", timestamp=line.timestamp)]
