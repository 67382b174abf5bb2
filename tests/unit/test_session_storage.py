"""How the session stores what it keeps: frequent plain events packed as tuples and made again
on demand, the in-context set, the id index built on first use, 32-bit columns."""

from __future__ import annotations

from typing import Any

import pytest

from ctx_inspect.core.model import (
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
from ctx_inspect.core.packed import LogEntry, RequestEntry, UsageEntry, entry_event
from ctx_inspect.core.session import Session, _Live
from ctx_inspect.core.unvalidated import updated


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
    session = Session(pack_events=True)
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
    # what was kept is the columns' copy, not the object
    assert session._store.packed(0)
    assert session._store.get(0) is not event


def test_events_that_are_not_packed_are_kept_as_given() -> None:
    session = Session(pack_events=True)
    prune = Pruned(message_ids=("u1",), tokens_before=10, tokens_after=2)
    span_elsewhere = RequestSent(span=SourceSpan(source=-1, offset=0, length=0, line=0))
    session.append([_message("u1"), prune, span_elsewhere])
    assert not session._store.packed(0) and session._store.get(0) is prune
    assert not session._store.packed(1) and session._store.get(1) is span_elsewhere
    assert session.event(2) == span_elsewhere


def test_steps_carry_the_reported_usage() -> None:
    usage = Usage(input=300, cache_read=1200, output=40)
    session = Session(pack_events=True)
    session.append([_message("u1"), RequestSent(), UsageReported(usage=usage)])
    step = session.steps[0]
    assert step.usage == usage
    assert step.reported == usage.prompt_tokens == 1500
    session.rederive()  # from the stored (packed) events alone
    assert session.steps[0].usage == usage
    assert session.steps[0].reported == 1500


def test_strings_of_few_values_are_kept_once() -> None:
    session = Session(pack_events=True)
    threads = ["".join(["ma", "in"]) for _ in range(3)]  # equal, distinct objects
    session.append([RequestSent(thread=t) for t in threads])
    columns = session._store._columns[0]
    assert columns is not None
    column = columns.values["thread"]
    kept = [column[row] for row in range(len(column))]
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
    session = Session(pack_events=True)
    session.append([_message("a"), _message("b")])
    assert session.table._index_of is None
    assert session.table.index_of == {"a": 0, "b": 1}
    session.append([_message("c"), _message("a")])  # a repeated id: the last one wins
    assert session.table.index_of == {"a": 3, "b": 1, "c": 2}


def test_a_prune_finds_its_message_by_id_after_packed_events() -> None:
    session = Session(pack_events=True)
    body = "x" * 4000
    events: list[Any] = [_message("u1"), _message("t1", body), RequestSent()]
    events += [UsageReported(usage=Usage(input=2000)), Pruned(message_ids=("t1",))]
    events += [RequestSent()]
    session.append(events)
    record = session.record(1)
    assert record.flags & record.flags.PRUNED
    assert session.steps[1].estimated < session.steps[0].estimated


def test_an_absurd_reported_figure_is_clamped_not_an_error() -> None:
    session = Session(pack_events=True)
    event = _message("u1").model_copy(update={"tokens": 10**12})
    session.append([event])
    assert session.record(0).reported == 2**31 - 1


def _grown_session() -> Session:
    session = Session(pack_events=True)
    events: list[Any] = [_message("s0", "system prompt " * 20)]
    for n in range(1, 6):
        events += [_message(f"u{n}", "question " * (10 * n)), RequestSent(request_id=f"r{n}")]
        if n % 2:
            events.append(UsageReported(usage=Usage(input=100 * n, cache_read=7, output=5)))
        if n == 4:
            events.append(ContextMeasured(tokens=999, label="agent"))
    events.append(_message("u9", "an open step"))
    session.append(events)
    return session


def test_steps_are_kept_in_columns_and_read_back_as_states() -> None:
    session = _grown_session()
    steps = session.steps
    assert len(steps) == 5
    assert [s.step for s in steps] == [1, 2, 3, 4, 5]
    assert [s.reported for s in steps] == [107, None, 307, None, 507]
    assert [s.reported_label for s in steps] == ["usage", "", "usage", "", "usage"]
    assert steps[2].usage == Usage(input=300, cache_read=7, output=5)
    assert steps[1].usage is None
    assert steps[-1].step == 5 and steps[1:3] == [steps[1], steps[2]]
    # the agent's own figure arrived in step 5's build-up: it is that step's figure
    assert steps[4].reported == 507 and steps[4].peak_reported == 999
    with pytest.raises(IndexError):
        steps[5]
    # each closed step's events end where the next begins
    assert all(steps[i].last_event + 1 == steps[i + 1].first_event for i in range(4))
    assert session.step_at(steps[2].request_event or 0) == 3


def test_state_of_and_step_count_agree_with_all_steps() -> None:
    session = _grown_session()
    every = session.all_steps()
    assert session.step_count() == len(every) == 6
    for step in range(1, 7):
        assert session.state_of(step) == every[step - 1]
    assert session.state_of(0) is None and session.state_of(7) is None


def test_a_step_read_back_is_a_copy() -> None:
    session = _grown_session()
    state = session.steps[0]
    state.reported = 1
    assert session.steps[0].reported == 107


def test_usage_that_does_not_fit_the_columns_is_kept_as_given() -> None:
    huge = Usage(input=2**70, output=1)  # beyond 64 bits
    session = Session(pack_events=True)
    session.append([_message("u1"), RequestSent(), UsageReported(usage=huge)])
    assert not session._store.packed(1)
    assert session.steps[0].usage == huge
    assert session.event(2) == UsageReported(usage=huge)


def test_the_id_column_gives_back_every_string() -> None:
    from ctx_inspect.core.session import StringColumn

    texts = ["m1", "", "héllo wörld", "🙂 emoji", "\ud800 lone surrogate", "toolu_" + "x" * 300]
    column = StringColumn()
    column.append(texts[0])
    column.extend(texts[1:])
    assert len(column) == len(texts)
    assert list(column) == texts
    assert [column[i] for i in range(-len(texts), 0)] == texts
    assert column[1:3] == texts[1:3]
    with pytest.raises(IndexError):
        column[len(texts)]


def test_a_log_of_figures_alone_ends_at_its_last_request() -> None:
    """With no messages, the lines after the last request (a log's closing lines) are no step
    of their own: the final context is the last figure, not an empty estimate."""
    from ctx_inspect.core.model import LogLine

    session = Session(pack_events=True)
    session.append(
        [
            ContextMeasured(tokens=5380, label="compaction"),
            RequestSent(),
            ContextMeasured(tokens=5493, label="compaction"),
            RequestSent(),
            LogLine(text="[loop] No tool calls in response"),
        ]
    )
    assert session.step_count() == 2
    assert [s.tokens for s in session.all_steps()] == [5380, 5493]
    session.append([ContextMeasured(tokens=6000, label="compaction")])
    assert session.step_count() == 3
    assert session.all_steps()[-1].tokens == 6000
    session.append([_message("u1")])
    assert session.step_count() == 3


def test_a_message_after_the_last_request_opens_a_step() -> None:
    session = Session(pack_events=True)
    session.append([_message("u1"), RequestSent(), UsageReported(usage=Usage(input=50))])
    assert session.step_count() == 1
    session.append([_message("a1", "the answer")])
    assert session.step_count() == 2
    assert session.state_of(2) == session.all_steps()[-1]


def test_bodies_read_from_several_threads_come_back_whole() -> None:
    import threading

    from ctx_inspect.core.model import SourceSpan as Span

    texts = {f"m{i}": f"body of message {i} " * 5 for i in range(300)}

    def read_back(span: Span) -> list[Message]:
        mid = f"m{span.line}"
        return [_message(mid, texts[mid]).message]

    session = Session(body_reader=read_back, cache_size=16)
    session.append(
        [
            _message(mid, text).model_copy(
                update={"span": Span(source=0, offset=i, length=1, line=i)}
            )
            for i, (mid, text) in enumerate(texts.items())
        ]
    )
    errors: list[BaseException] = []

    def reader(offset: int) -> None:
        try:
            for round_ in range(20):
                for i in range((offset + round_) % 7, 300, 7):
                    assert session.body(i).text == texts[f"m{i}"]
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=reader, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(session._bodies) <= 16


def test_a_column_of_one_value_turns_into_a_list_when_another_comes() -> None:
    from ctx_inspect.core.columns import ObjectColumn

    column = ObjectColumn()
    for value in (None, None, None):
        column.append(value)
    assert column._items is None and len(column) == 3 and column[2] is None
    with pytest.raises(IndexError):
        column[3]
    column.append("2026-01-01T00:00:00Z")
    column.append(None)
    assert [column[i] for i in range(len(column))] == [None] * 3 + ["2026-01-01T00:00:00Z", None]
    assert column._items is not None


def test_a_span_number_too_large_keeps_the_event_as_given_and_the_columns_aligned() -> None:
    huge_span = SourceSpan(source=0, offset=2**64, length=1, line=1)
    events: list[Any] = [
        RequestSent(request_id="a", span=_span(1)),
        RequestSent(request_id="b", span=huge_span),
        RequestSent(request_id="c", span=_span(3)),
    ]
    session = Session(pack_events=True)
    session.append(events)
    store = session._store
    assert [store.packed(k) for k in range(3)] == [True, False, True]
    assert [session.event(i) for i in range(3)] == events


def test_packed_and_unpacked_sessions_hold_the_same() -> None:
    events: list[Any] = [_message("s0", "system " * 30)]
    for n in range(1, 30):
        events += [_message(f"u{n}", "ask " * n), RequestSent(request_id=f"r{n}", span=_span(n))]
        events += [UsageReported(usage=Usage(input=100 * n, output=n), span=_span(n))]
        events += [LogLine(text=f"line {n}", level="info"), ContextMeasured(tokens=90 * n)]
    packed, plain = Session(pack_events=True), Session()
    packed.append(events)
    plain.append(events)
    assert plain._store.packed(0) is False and packed._store.packed(0) is True
    assert list(packed.events()) == list(plain.events()) == events
    assert packed.all_steps() == plain.all_steps()


def test_a_steps_figures_read_from_the_columns_equal_the_step_made() -> None:
    session = _grown_session()
    steps = session.steps
    assert [steps.tokens(i) for i in range(len(steps))] == [s.tokens for s in steps]
    assert [steps.peak(i) for i in range(len(steps))] == [s.peak for s in steps]
    assert steps.peak(4) == 999 > steps.tokens(4)


def test_step_figures_are_the_figures_of_the_steps_made() -> None:
    session = _grown_session()
    made = session.all_steps()
    figures = list(session.step_figures())
    assert [(f.step, f.tokens, f.peak) for f in figures] == [
        (s.step, s.tokens, s.peak) for s in made
    ]
    assert len(figures) == session.step_count() == 6  # the open build-up is a step too


def _entries_and_events(n: int) -> tuple[list[Any], list[Any]]:
    """The same requests, usage reports and log lines as entries and as events (every field
    set, as a reader that builds them whole makes them)."""
    entries: list[Any] = []
    for i in range(n):
        where = (0, 1000 * i, 77, i + 1)
        entries.append(RequestEntry(f"t{i}", *where, "m", f"r{i}", "main", False, False))
        entries.append(
            UsageEntry(
                None, *where, 100 * i, 7, 0, 5, 0, None, False, "m", f"r{i}", "main", None, ""
            )
        )
        entries.append(LogEntry(f"t{i}", *where, f"progress {i % 3}", None, "progress"))
    return entries, [entry_event(entry) for entry in entries]


def test_entries_are_kept_as_the_events_they_stand_for() -> None:
    entries, events = _entries_and_events(40)
    for event in events:  # what a reader would have built, validated
        assert event == type(event).model_validate(event.model_dump())
        assert event.model_fields_set == set(type(event).model_fields)
    session = Session()  # entries are packed even where events are kept as given
    session.append([_message("u0"), *entries])
    plain = Session()
    plain.append([_message("u0"), *events])
    back = [session.event(i) for i in range(1, len(session))]
    assert back == events
    assert [b.model_fields_set for b in back] == [e.model_fields_set for e in events]
    assert session.all_steps() == plain.all_steps()
    assert list(session.events_of(LogLine)) == list(plain.events_of(LogLine))


def test_an_entry_that_does_not_fit_is_kept_as_its_event() -> None:
    entries, events = _entries_and_events(20)
    huge = UsageEntry(None, 0, 5, 7, 9, 2**70, 0, 0, 1, 0, None, False, "m", None, "main", None, "")
    session = Session()
    session.append([*entries, huge, *entries])
    store = session._store
    assert not store.packed(len(entries))
    assert session.event(len(entries)) == entry_event(huge)
    assert [session.event(i) for i in range(len(entries))] == events
    assert [session.event(len(entries) + 1 + i) for i in range(len(entries))] == events


def test_a_batch_is_packed_at_once_or_event_by_event_alike() -> None:
    events: list[Any] = []
    for n in range(60):
        span = _span(n) if n % 7 else None
        events.append(RequestSent(request_id=f"r{n}", span=span, model="m" if n % 3 else None))
        usage = Usage(input=n, output=1, total=None if n % 2 else n + 1)
        events.append(UsageReported(usage=usage, span=span, thread="main" if n % 5 else "t2"))
    at_once, one_by_one = Session(pack_events=True), Session(pack_events=True)
    at_once.append(events)
    for event in events:
        one_by_one.append([event])
    assert [at_once.event(i) for i in range(len(events))] == events
    assert [one_by_one.event(i) for i in range(len(events))] == events
    assert all(at_once._store.packed(k) for k in range(len(events)))


def test_updated_is_pydantic_model_copy() -> None:
    for model in [*PLAIN, _message("u1").message]:
        if "thread" not in type(model).model_fields:
            continue
        before = model.thread  # type: ignore[union-attr]
        ours, theirs = updated(model, {"thread": "t9"}), model.model_copy(update={"thread": "t9"})
        assert ours == theirs and repr(ours) == repr(theirs)
        assert ours.model_fields_set == theirs.model_fields_set
        assert model.thread == before  # type: ignore[union-attr]  # the original is untouched
