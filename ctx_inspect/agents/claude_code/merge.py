"""``--merge`` of one Claude Code run's files as one session: its session transcript, its
sub-agent files and its stream-json stdout (one per invocation), each record taken once
(``FormatSpec.stream_merge`` of both formats).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ctx_inspect.agents.claude_code.records import SESSION_FORMAT
from ctx_inspect.core.model import (
    Compacted,
    Event,
    MessageAdded,
    RequestRejected,
    RequestSent,
    SessionInfo,
    UsageReported,
)


def merge_streams(streams: Sequence[Sequence[Event]], formats: Sequence[str]) -> list[Event]:
    """One session of one run's Claude Code files (``FormatSpec.stream_merge``; ``formats``:
    each stream's format name): its session transcript, its sub-agent
    files, and its stream-json stdout (one per invocation). They repeat each other record for
    record (the same uuids, the same response ids), so each record is taken once, from the
    session transcript first (its usage is the final one; the stdout's assistant lines carry a
    streaming partial output count), and what only the stdout shows is added (the CLI's status
    lines, a refusal, the run's result and window). A sub-agent file's lines become the
    sub-agent's thread, as the stdout names it (``agent-<id>``), when the run's main session
    or stdout is merged too. Events are ordered by their timestamps, each file in its own
    order (a line without a timestamp takes the one before it)."""
    ranked = sorted(
        range(len(streams)), key=lambda index: (formats[index] != SESSION_FORMAT, index)
    )  # session transcripts first, each group in the order given
    agents = [
        _agent_of(events) if name == SESSION_FORMAT else None
        for name, events in zip(formats, streams, strict=True)
    ]
    rethread = any(agent is None for agent in agents)
    seen = _Seen()
    keyed: list[tuple[str, int, int, Event]] = []
    for rank, index in enumerate(ranked):
        events = streams[index]
        agent = agents[index]
        thread = f"agent-{agent}" if agent is not None and rethread else None
        taken = list(_taken(events, thread, seen))
        # the lines before a file's first timestamp (an invocation's init, status and
        # compaction lines) take that timestamp
        last = next((e.timestamp for e in taken if e.timestamp), "")
        for seq, event in enumerate(taken):
            last = max(last, event.timestamp or "")
            keyed.append((last, rank, seq, event))
    keyed.sort(key=lambda item: (item[0], item[1], item[2]))
    return _relabel_reactive([item[3] for item in keyed])


class _Seen:
    """What the files merged so far recorded: messages, responses and their usage, refusals and
    compactions, per thread."""

    def __init__(self) -> None:
        self.messages: set[tuple[str, str]] = set()
        self.requests: set[tuple[str, str]] = set()
        self.usage: set[tuple[str, str]] = set()
        self.refusals: set[tuple[str, str | None, int | None, str]] = set()
        self.compactions: dict[tuple[str, str, int | None, int | None], int] = {}


def _agent_of(events: Sequence[Event]) -> str | None:
    """The agent id a sub-agent file names, else None."""
    for event in events:
        if isinstance(event, SessionInfo) and isinstance(event.extra.get("agent_id"), str):
            return str(event.extra["agent_id"])
    return None


def _taken(events: Sequence[Event], thread: str | None, seen: _Seen) -> Iterator[Event]:
    """The events of one file that no file before it recorded, moved to ``thread`` when given
    (a sub-agent file's own session facts are left out then)."""
    mine = _Seen()
    skip_request = False
    for position, event in enumerate(events):
        if thread is not None:
            if isinstance(event, SessionInfo):
                continue
            event = _rethreaded(event, thread)
        if isinstance(event, MessageAdded):
            key = (event.message.thread, event.message.id)
            if key in seen.messages:
                continue
            mine.messages.add(key)
        elif isinstance(event, RequestSent):
            if event.request_id is None:
                following = events[position + 1] if position + 1 < len(events) else None
                refusal = _refusal_key(following) if following is not None else None
                skip_request = refusal is not None and refusal in seen.refusals
                if skip_request:
                    continue
            else:
                key = (event.thread, event.request_id)
                if key in seen.requests:
                    continue
                mine.requests.add(key)
        elif isinstance(event, UsageReported) and event.request_id is not None:
            key = (event.thread, event.request_id)
            if key in seen.usage:
                continue
            mine.usage.add(key)
        elif isinstance(event, RequestRejected):
            refusal = _refusal_key(event)
            assert refusal is not None
            if skip_request:
                skip_request = False
                continue
            mine.refusals.add(refusal)
        elif isinstance(event, Compacted):
            figures = (event.thread, event.trigger, event.tokens_before, event.tokens_after)
            if seen.compactions.get(figures, 0) > 0:
                seen.compactions[figures] -= 1  # the same compaction, recorded again
                continue
            mine.compactions[figures] = mine.compactions.get(figures, 0) + 1
        yield event
    seen.messages |= mine.messages
    seen.requests |= mine.requests
    seen.usage |= mine.usage
    seen.refusals |= mine.refusals
    for figures, count in mine.compactions.items():
        seen.compactions[figures] = seen.compactions.get(figures, 0) + count


def _refusal_key(event: Event) -> tuple[str, str | None, int | None, str] | None:
    if not isinstance(event, RequestRejected):
        return None
    return (event.thread, event.timestamp, event.tokens, event.reason)


def _rethreaded(event: Event, thread: str) -> Event:
    if isinstance(event, MessageAdded):
        message = event.message.model_copy(update={"thread": thread})
        return event.model_copy(update={"message": message})
    if getattr(event, "thread", None) == "main":
        return event.model_copy(update={"thread": thread})
    return event


def _relabel_reactive(events: list[Event]) -> list[Event]:
    """An automatic compaction that follows a refusal (seen in one file, the compaction in
    another) is a reactive one."""
    refused: set[str] = set()
    out: list[Event] = []
    for event in events:
        if isinstance(event, RequestRejected):
            refused.add(event.thread)
        elif isinstance(event, RequestSent) and event.request_id is not None:
            refused.discard(event.thread)
        elif isinstance(event, Compacted) and event.thread in refused:
            refused.discard(event.thread)
            if event.trigger == "auto":
                event = event.model_copy(update={"trigger": "reactive"})
        out.append(event)
    return out
