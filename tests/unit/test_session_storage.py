"""How the session stores what it keeps: frequent plain events packed as tuples and made again
on demand, the in-context set, the id index built on first use, 32-bit columns."""

from __future__ import annotations

from typing import Any

import pytest

from inspector.core.model import (
    ContextMeasured,
    Event,
    LogLine,
    Message,
    MessageAdded,
    Origin,
    Part,
    PartType,
    Pruned,
    RequestSent,
    Role,
    SourceSpan,
    Usage,
    UsageReported,
)
from inspector.core.session import _PACK_REST, Session, _Live


def _span(line: int) -> SourceSpan:
    return SourceSpan(source=0, offset=1000 * line, length=77, line=line)


def _message(mid: str, text: str = "hello there") -> MessageAdded:
    return MessageAdded(
        message=Message(id=mid, role=Role.USER, parts=(Part(type=PartType.TEXT, text=text),))
    )


PLAIN: list[Event] = [
    RequestSent(request_id="req_1", model="m-large", span=_span(3), timestamp="2026-01-01T00:00"),
    RequestSent(),
    UsageReported(
        usage=Usage(input=1234, cache_read=50_000, cache_write=7, output=99, total=51_340),
        request_id="req_1",
        span=_span(4),
    ),
    UsageReported(usage=Usage(input=10, input_includes_cache=True), thread="agent-2"),
    ContextMeasured(tokens=42_000, limit=200_000, percent=21.0, origin=Origin.ESTIMATED),
    LogLine(text="[compaction] starting", level="info", tag="compaction", span=_span(9)),
    UsageReported.model_validate({"type": "usage", "usage": {"input": 5}}),
]


@pytest.mark.parametrize("event", PLAIN, ids=lambda e: type(e).__name__)
def test_a_packed_event_comes_back_equal_field_for_field(event: Event) -> None:
    session = Session()
    session.append([_message("u1"), event, _message("u2")])
    back = session.event(1)
    assert type(back) is type(event)
    assert back == event
    assert repr(back) == repr(event)
    assert back.model_fields_set == event.model_fields_set
    assert back.model_dump() == event.model_dump()
    assert back.model_dump(exclude_unset=True) == event.model_dump(exclude_unset=True)
    assert list(session.events_of(type(event))) == [(1, event)]
    assert list(session.non_message_events()) == [(1, event)]
    assert list(session.raw_events()) == [0, event, 1]
    # what was kept is a tuple, not the object
    assert type(session._objects[0]) is tuple


def test_events_that_are_not_packed_are_kept_as_given() -> None:
    session = Session()
    prune = Pruned(message_ids=("u1",), tokens_before=10, tokens_after=2)
    span_elsewhere = RequestSent(span=SourceSpan(source=-1, offset=0, length=0, line=0))
    session.append([_message("u1"), prune, span_elsewhere])
    assert session._objects[0] is prune
    assert session._objects[1] is span_elsewhere
    assert session.event(2) == span_elsewhere


def test_steps_carry_the_reported_usage() -> None:
    usage = Usage(input=300, cache_read=1200, output=40)
    session = Session()
    session.append([_message("u1"), RequestSent(), UsageReported(usage=usage)])
    step = session.steps[0]
    assert step.usage == usage
    assert step.reported == usage.prompt_tokens == 1500
    session.rederive()  # from the stored (packed) events alone
    assert session.steps[0].usage == usage
    assert session.steps[0].reported == 1500


def test_strings_of_few_values_are_kept_once() -> None:
    session = Session()
    threads = ["".join(["ma", "in"]) for _ in range(3)]  # equal, distinct objects
    session.append([RequestSent(thread=t) for t in threads])
    at = 6 + _PACK_REST[0].index("thread")
    kept = [obj[at] for obj in session._objects if isinstance(obj, tuple)]
    assert kept == ["main"] * 3
    assert len({id(t) for t in kept}) == 1


def test_the_live_set_keeps_index_order_and_its_count() -> None:
    live = _Live()
    for index in (0, 5, 3, 4000, 5):
        live.add(index)
    assert list(live) == [0, 3, 5, 4000]
    assert len(live) == 4 and 3 in live and 4 not in live and 10**6 not in live
    for index in list(live):
        if index in (3, 4000):
            live.discard(index)
    live.discard(77)  # never there: nothing changes
    assert list(live) == [0, 5] and len(live) == 2


def test_the_id_index_is_built_on_first_use_and_kept_up_to_date() -> None:
    session = Session()
    session.append([_message("a"), _message("b")])
    assert session.table._index_of is None
    assert session.table.index_of == {"a": 0, "b": 1}
    session.append([_message("c"), _message("a")])  # a repeated id: the last one wins
    assert session.table.index_of == {"a": 3, "b": 1, "c": 2}


def test_a_prune_finds_its_message_by_id_after_packed_events() -> None:
    session = Session()
    body = "x" * 4000
    events: list[Any] = [_message("u1"), _message("t1", body), RequestSent()]
    events += [UsageReported(usage=Usage(input=2000)), Pruned(message_ids=("t1",))]
    events += [RequestSent()]
    session.append(events)
    record = session.record(1)
    assert record.flags & record.flags.PRUNED
    assert session.steps[1].estimated < session.steps[0].estimated


def test_an_absurd_reported_figure_is_clamped_not_an_error() -> None:
    session = Session()
    event = _message("u1").model_copy(update={"tokens": 10**12})
    session.append([event])
    assert session.record(0).reported == 2**31 - 1
