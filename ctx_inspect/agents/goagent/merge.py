"""``--merge`` of one run of the Go agent: its stdout, log files and session files as one
session (``merge_run``, the ``stream_merge`` of its three formats).

- With a stdout, it holds the conversation: every request, message and compaction attempt is
  taken from it once. A session file adds what came before this invocation (a resumed
  session's history) and the summaries of the compactions (the stdout does not show them); a
  log adds its lines and the provider's refusals, with their figures.
- Without one, the session file holds the conversation; a log adds the compaction attempts the
  session does not record (failed ones), the trigger of those it does, and the refused requests.
- A log's times carry no zone: it is placed by what it shares with the other streams.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ctx_inspect.agents.goagent.figures import FIGURE_LABEL, RECOVERY
from ctx_inspect.agents.goagent.records import (
    EVENTS_FORMAT,
    LOG_FORMAT,
    SESSION_FORMAT,
    instant_ns,
)
from ctx_inspect.core.model import (
    Compacted,
    ContextMeasured,
    Event,
    LogLine,
    MessageAdded,
    MessageKind,
    RequestRejected,
    RequestSent,
    SessionInfo,
)

MATCH_NS = 5 * 1_000_000_000  # a session's compaction entry and the stdout's outcome: 5 s
ZONE_STEP_NS = 15 * 60 * 1_000_000_000  # time zones differ by whole quarter hours
_LOG_PROMPT = "[Agent] Starting prompt"
_FAILED_REQUEST = "model request failed"


@dataclass
class _Timed:
    """An event of one stream with the instant it sorts at."""

    at: int
    rank: int  # 0: the stream that holds the conversation; then the others
    seq: float
    event: Event


def _instants(events: Sequence[Event], shift: int = 0) -> list[int]:
    """Each event's instant, carried forward (and never going back) from the events that have
    one, so that a stream keeps its own order."""
    out: list[int] = []
    last = 0
    for event in events:
        at = instant_ns(event.timestamp)
        if at is not None:
            last = max(last, at + shift)
        out.append(last)
    return out


def _zone_offset(pairs: Sequence[tuple[int, int]]) -> int:
    """How far a log's zone-less times are from UTC: the median gap between the log's records
    and the same moments elsewhere, to the nearest quarter hour (0 without any)."""
    if not pairs:
        return 0
    gaps = sorted(other - log for log, other in pairs)
    gap = gaps[len(gaps) // 2]
    return round(gap / ZONE_STEP_NS) * ZONE_STEP_NS


def _is_prompt_start(event: Event) -> bool:
    return isinstance(event, LogLine) and _LOG_PROMPT in event.text


def _log_offset(log: Sequence[Event], anchors: Sequence[Event]) -> int:
    """The zone offset of a log, from what it shares with the stdout or the session: its
    compaction outcomes, else the prompts it starts (the stdout's ``agent_start``)."""
    own = _instants(log)
    others = _instants(anchors)
    mine = [own[i] for i, e in enumerate(log) if isinstance(e, Compacted)]
    theirs = [others[i] for i, e in enumerate(anchors) if isinstance(e, Compacted)]
    if not theirs or not mine:
        mine = [own[i] for i, e in enumerate(log) if _is_prompt_start(e)]
        theirs = [
            others[i]
            for i, e in enumerate(anchors)
            if isinstance(e, LogLine) and e.text.startswith("agent_start")
        ]
    return _zone_offset(list(zip(mine, theirs, strict=False)))


def _nearest(at: int, candidates: Sequence[tuple[int, int]], used: set[int]) -> int | None:
    """The unused candidate (instant, position) nearest ``at``, within ``MATCH_NS``."""
    best: tuple[int, int] | None = None
    for when, position in candidates:
        gap = abs(when - at)
        if position not in used and gap <= MATCH_NS and (best is None or gap < best[0]):
            best = (gap, position)
    return None if best is None else best[1]


def _one_refusal_per_request(events: list[Event]) -> list[Event]:
    """A refused request is told once: the most informative of its refusals stays."""
    out: list[Event] = []
    told: int | None = None  # where the latest request's refusal is in ``out``
    for event in events:
        if isinstance(event, RequestSent):
            told = None
        elif isinstance(event, RequestRejected):
            if told is not None:
                kept = out[told]
                assert isinstance(kept, RequestRejected)
                if (event.tokens, event.limit) != (None, None) and (kept.tokens, kept.limit) == (
                    None,
                    None,
                ):
                    out[told] = event
                continue
            told = len(out)
        out.append(event)
    return out


def _add_session_history(timed: list[_Timed], sessions: Sequence[list[Event]]) -> None:
    """What a session file adds to a stdout: its history before this invocation, and the
    summary of each compaction the stdout shows."""
    # this invocation's first event (the header's time is the session's creation)
    start = min(
        (t.at for t in timed if t.at > 0 and not isinstance(t.event, SessionInfo)), default=0
    )
    done = [
        (t.at, position)
        for position, t in enumerate(timed)
        if isinstance(t.event, Compacted) and not t.event.failed
    ]
    used: set[int] = set()
    # the stdout's own messages (a prompt is made just before its run starts)
    shown = {_message_key(t.event) for t in timed if isinstance(t.event, MessageAdded)}
    for events in sessions:
        instants = _instants(events)
        compaction_at: int | None = None
        for seq, (at, event) in enumerate(zip(instants, events, strict=True)):
            if at < start:
                if not (isinstance(event, MessageAdded) and _message_key(event) in shown):
                    timed.append(_Timed(at, 1, seq, event))
                continue
            if isinstance(event, Compacted):
                compaction_at = at
            elif (
                compaction_at is not None
                and isinstance(event, MessageAdded)
                and event.message.kind is MessageKind.SUMMARY
            ):
                position = _nearest(compaction_at, done, used)
                compaction_at = None
                if position is not None:
                    used.add(position)
                    outcome = timed[position]
                    timed.append(_Timed(outcome.at, 0, outcome.seq + 0.5, event))


def _message_key(event: Event) -> tuple[str, str | None, str] | None:
    """A message as both the stdout and the session write it: role, time made, text."""
    if not isinstance(event, MessageAdded):
        return None
    message = event.message
    return message.role.value, message.timestamp, message.text


def _failed_requests(timed: Sequence[_Timed]) -> list[tuple[int, int]]:
    """The stdout's requests that got no answer: (instant, position)."""
    out: list[tuple[int, int]] = []
    for position, t in enumerate(timed):
        if not isinstance(t.event, RequestSent) or position + 1 >= len(timed):
            continue
        after = timed[position + 1].event
        if isinstance(after, RequestRejected) or (
            isinstance(after, LogLine) and after.text.startswith(_FAILED_REQUEST)
        ):
            out.append((t.at, position))
    return out


def _add_log(timed: list[_Timed], log: list[Event], base: list[Event], *, has_stdout: bool) -> None:
    """A log's records that the conversation's own stream does not hold."""
    instants = _instants(log, _log_offset(log, base))
    failed = _failed_requests(timed) if has_stdout else []
    compactions = [
        (t.at, position)
        for position, t in enumerate(timed)
        if isinstance(t.event, Compacted) and t.rank == 0
    ]
    told: set[int] = set()
    matched: set[int] = set()
    recovery: tuple[int, float] | None = None  # where the latest recovery attempt is
    for seq, (at, event) in enumerate(zip(instants, log, strict=True)):
        if isinstance(event, RequestSent):
            recovery = None
            continue  # the conversation's stream has every request
        if isinstance(event, RequestRejected):
            if has_stdout:
                # the loop logs the error just before it ends the turn: the refused request
                # is the stdout's next unanswered one
                request = next(
                    (p for when, p in failed if when >= at - MATCH_NS and p not in told), None
                )
                if request is not None:
                    told.add(request)
                    timed.append(_Timed(timed[request].at, 0, timed[request].seq + 0.25, event))
                    continue
            else:
                # the session has no record of a request nobody answered; it came before the
                # recovery the agent attempted (a failed one is logged before the error)
                sent = RequestSent(timestamp=event.timestamp, span=event.span)
                where = recovery or (at, seq - 0.5)
                timed.append(_Timed(where[0], 2, where[1], sent))
            recovery = None
            timed.append(_Timed(at, 2, seq, event))
            continue
        if isinstance(event, Compacted) and event.trigger == RECOVERY:
            recovery = (at, seq - 0.5)
        if isinstance(event, Compacted):
            if has_stdout:
                continue  # the stdout has every attempt, with its figure
            if not event.failed:
                position = _nearest(at, [c for c in compactions if c[1] not in matched], matched)
                if position is not None:
                    matched.add(position)
                    recorded = timed[position].event
                    assert isinstance(recorded, Compacted)
                    timed[position].event = recorded.model_copy(
                        update={
                            "trigger": event.trigger,
                            "messages_before": recorded.messages_before or event.messages_before,
                        }
                    )
                    continue
        timed.append(_Timed(at, 2, seq, event))


def merge_run(streams: Sequence[Sequence[Event]], names: Sequence[str]) -> list[Event] | None:
    """One session of a run's stdout, log files and session files.

    - With a stdout, it holds the conversation: every request, message and compaction attempt
      is taken from it once. A session file adds what came before this invocation (a resumed
      session's history) and the summaries of the compactions (the stdout does not show them);
      a log adds its lines and the provider's refusals, with their figures.
    - Without one, the session file holds the conversation; a log adds the compaction attempts
      the session does not record (failed ones), the trigger of those it does, and the refused
      requests.
    - A log's times carry no zone: it is placed by what it shares with the other streams.
    """
    named = list(zip(names, streams, strict=True))
    stdouts = [list(events) for name, events in named if name == EVENTS_FORMAT]
    logs = [list(events) for name, events in named if name == LOG_FORMAT]
    sessions = [list(events) for name, events in named if name == SESSION_FORMAT]
    conversation = stdouts or sessions  # the stream that holds the conversation
    base = [e for events in conversation for e in events]
    timed = [
        _Timed(at, 0, i, e)
        for events in conversation
        for i, (at, e) in enumerate(zip(_instants(events), events, strict=True))
    ]
    if stdouts:
        _add_session_history(timed, sessions)
    for log in logs:
        _add_log(timed, log, base, has_stdout=bool(stdouts))
    timed.sort(key=lambda t: (t.at, t.rank, t.seq))
    events = [t.event for t in timed]
    if stdouts or logs:  # these record the attempts a session file does not
        events = [_attempts_recorded(e) for e in events]
    return _decided_on_the_figure(_one_refusal_per_request(events))


def _attempts_recorded(event: Event) -> Event:
    if isinstance(event, SessionInfo) and "unrecorded" in event.extra:
        extra = {k: v for k, v in event.extra.items() if k != "unrecorded"}
        return event.model_copy(update={"extra": extra})
    return event


def _decided_on_the_figure(events: list[Event]) -> list[Event]:
    """Each auto-compaction attempt with the figure the agent compared with its limit: the
    agent's own figure measured since the latest request (a session's ``tokensBefore`` is
    measured on the session's copy, which may lag behind the agent's list)."""
    figure: int | None = None
    out: list[Event] = []
    for event in events:
        if isinstance(event, RequestSent):
            figure = None
        elif isinstance(event, ContextMeasured) and event.label == FIGURE_LABEL:
            figure = event.tokens
        elif (
            isinstance(event, Compacted)
            and event.trigger == "auto"
            and figure is not None
            and event.tokens_before != figure
        ):
            event = event.model_copy(update={"tokens_before": figure})
        out.append(event)
    return out
