"""The dashboard state of a session that grows by appends: running totals, in-context flags and
timeline points brought up to date incrementally equal those computed from scratch."""

from __future__ import annotations

import random
from itertools import accumulate, pairwise
from pathlib import Path

import pytest

from ctx_inspect.app.config import build_profile
from ctx_inspect.app.loader import LoadedSession, counter_for, new_session
from ctx_inspect.core import running_totals as totals_module
from ctx_inspect.core.model import (
    Compacted,
    ContextReset,
    Event,
    FinalTurnForced,
    Message,
    MessageAdded,
    Part,
    PartType,
    Pruned,
    RequestSent,
    Role,
    ToolOutputAction,
    ToolOutputChanged,
    Usage,
    UsageReported,
)
from ctx_inspect.core.profiles import profile_names
from ctx_inspect.core.running_totals import RunningTotals, best_tokens
from ctx_inspect.core.session import Session
from ctx_inspect.core.window import Zone
from ctx_inspect.formats.registry import FormatSpec
from ctx_inspect.ui.state import SessionState, _ZoneOf
from ctx_inspect.ui.widgets.timeline_points import TimelinePoint


def message(mid: str, role: Role, size: int, *, visible: bool = True, thread: str = "main"):
    part = Part(type=PartType.TEXT, text="x" * size)
    return MessageAdded(
        message=Message(id=mid, role=role, parts=(part,), visible=visible, thread=thread)
    )


def random_run(seed: int, messages: int) -> list[Event]:
    """Messages (some hidden, some of a sub-agent) with requests, usage, compactions, resets,
    prunes, dropped tool outputs and forced final turns in between."""
    rng = random.Random(seed)
    events: list[Event] = [message("sys", Role.SYSTEM, 400)]
    ids: list[str] = ["sys"]
    for i in range(messages):
        mid = f"m{i}"
        roll = rng.random()
        events.append(
            message(
                mid,
                rng.choice([Role.USER, Role.ASSISTANT, Role.TOOL]),
                rng.randrange(1, 900),
                visible=roll > 0.05,
                thread="sub" if 0.05 < roll < 0.12 else "main",
            )
        )
        ids.append(mid)
        roll = rng.random()
        if roll < 0.3:
            events.append(RequestSent())
            if rng.random() < 0.7:
                events.append(UsageReported(usage=Usage(input=rng.randrange(100, 400_000))))
        elif roll < 0.34:
            retained = tuple(rng.sample(ids, min(3, len(ids))))
            events.append(Compacted(retained_ids=retained, tokens_before=80_000))
        elif roll < 0.37:
            events.append(ContextReset(keep_through=rng.choice(ids)))
        elif roll < 0.4:
            events.append(Pruned(message_ids=(rng.choice(ids),), applied=rng.random() < 0.8))
        elif roll < 0.42:
            events.append(
                ToolOutputChanged(action=ToolOutputAction.DROPPED, message_id=rng.choice(ids))
            )
        elif roll < 0.43:
            events.append(FinalTurnForced(reason="limit"))
    return events


def loaded(session: Session) -> LoadedSession:
    profile = build_profile("generic")
    spec = FormatSpec(name="test", description="t", reads="t", parser=None, sniff=lambda h: 0.0)
    return LoadedSession(session, Path("run.jsonl"), spec, profile, counter_for(profile), None)


def fresh_session() -> Session:
    profile = build_profile("generic")
    return new_session(profile, counter_for(profile), count_exact=False)


def expected_totals(session: Session, step: int) -> tuple[list[bool], list[int]]:
    """In context at ``step`` and running totals, from ``Session.in_context`` directly."""
    inside = set(session.in_context(step))
    mask = [i in inside for i in range(session.message_count)]
    tokens = (best_tokens(session, i) if mask[i] else 0 for i in range(len(mask)))
    return mask, list(accumulate(tokens))


def batches(events: list[Event], seed: int) -> list[list[Event]]:
    rng = random.Random(seed)
    out, start = [], 0
    while start < len(events):
        size = rng.randrange(1, 40)
        out.append(events[start : start + size])
        start += size
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_running_totals_kept_up_to_date_equal_those_from_scratch(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(totals_module, "BLOCK", 16)  # many blocks, partial ones included
    session = fresh_session()
    totals = RunningTotals(session)
    rng = random.Random(seed)
    for batch in batches(random_run(seed, 400), seed):
        session.append(batch)
        steps = len(session.all_steps())
        if rng.random() > 0.3 or steps == 0:
            continue
        for step in {steps, rng.randrange(1, steps + 1), max(1, steps - 1)}:
            mask, running = expected_totals(session, step)
            for index in range(session.message_count):
                assert totals.in_context(index, step) == mask[index], (index, step)
                if mask[index]:
                    assert totals.total(index, step) == running[index], (index, step)
    assert sum(1 for _ in session.events_of(Compacted, ContextReset)) > 5  # it was tested
    assert any(not session.table.flags[i] & 1 for i in range(session.message_count))


def test_rows_of_a_grown_state_equal_those_of_a_new_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(totals_module, "BLOCK", 16)
    session = fresh_session()
    grown = SessionState(loaded(session))
    events = random_run(7, 600)
    for batch in batches(events, 7):
        session.append(batch)
        grown.grew()
        last = grown.step_count()
        grown.row(session.message_count - 1)  # asked for on the way, as the view does
        if last > 3:
            grown.move(last - 2)
            grown.row(0)
            grown.move(None)
    fresh = SessionState(loaded(session))
    assert grown.step_count() == fresh.step_count() == len(session.all_steps()) > 10
    for step in (None, 1, grown.step_count() // 2, grown.step_count()):
        grown.move(step)
        fresh.move(step)
        rows = [grown.row(i) for i in range(session.message_count)]
        assert rows == [fresh.row(i) for i in range(session.message_count)]
        assert any(row.running > 0 for row in rows)
        assert any(not row.in_context for row in rows)


def test_points_of_a_grown_state_equal_those_of_a_new_one() -> None:
    session = fresh_session()
    grown = SessionState(loaded(session))
    seen: list[list[TimelinePoint]] = []
    for batch in batches(random_run(11, 500), 11):
        session.append(batch)
        grown.grew()
        seen.append(list(grown.points()))
    fresh = SessionState(loaded(session))
    points = list(fresh.points())
    assert list(grown.points()) == points
    assert len(points) == len(session.all_steps())
    assert [p.step for p in points] == [s.step for s in session.all_steps()]
    assert [p.tokens for p in points] == [s.tokens for s in session.all_steps()]
    assert [p.peak for p in points] == [s.peak for s in session.all_steps()]
    profile = fresh.profile
    assert [p.zone for p in points] == [profile.zone(s.peak) for s in session.all_steps()]
    assert {p.zone for p in points} == set(Zone)
    markers = {name for p in points for name in p.markers}
    assert markers == {"compaction", "reset", "prune", "dropped", "final_turn"}
    # a step's point, once the step is over and its usage reported, never changed again
    final = {p.step: p for p in points}
    for before, after in pairwise(seen):
        assert [p for p in before[:-2] if final[p.step] != p] == []
        assert len(after) >= len(before)


def test_a_change_that_is_not_an_append_starts_again() -> None:
    session = fresh_session()
    session.append(random_run(5, 200))
    state = SessionState(loaded(session))
    before = list(state.points())
    rows_before = [state.row(i) for i in range(session.message_count)]
    other = fresh_session()
    other.append(random_run(6, 50))
    state.replace_session(other)
    fresh = SessionState(loaded(other))
    assert list(state.points()) == list(fresh.points()) != before
    rows = [state.row(i) for i in range(other.message_count)]
    assert rows == [fresh.row(i) for i in range(other.message_count)]
    assert rows != rows_before[: len(rows)]


@pytest.mark.parametrize("name", profile_names())
def test_zones_of_many_counts_are_the_profile_zones(name: str) -> None:
    profile = build_profile(name)
    zone_of = _ZoneOf(profile)
    edges = {profile.warning_threshold(), profile.threshold(), profile.context_window or 0}
    counts = {0, 1, 10**12, *range(0, 2_000_000, 997)}
    counts |= {edge + delta for edge in edges for delta in (-2, -1, 0, 1, 2) if edge + delta >= 0}
    assert [zone_of(n) for n in sorted(counts)] == [profile.zone(n) for n in sorted(counts)]
    assert {zone_of(n) for n in counts} == set(Zone) or not profile.has_threshold()
