"""The questions the dashboard asks of a session (``core.session_query``) answered from its
columns equal what the session's own records and steps say."""

from __future__ import annotations

from ctx_inspect.core.session import Flag
from ctx_inspect.core.session_query import SessionQuery, StepFigure
from tests.ui.test_state_growth import batches, fresh_session, random_run


def test_message_facts_are_the_records_seen_from_a_step() -> None:
    session = fresh_session()
    session.append(random_run(3, 300))
    query = SessionQuery(session)
    steps = session.step_count()
    assert steps > 10
    for step in (1, steps // 2, steps):
        inside = set(session.in_context(step))
        running = 0
        for index in range(session.message_count):
            facts = query.message(index, step)
            record = session.record(index)
            tokens, origin = record.tokens()
            running += tokens if index in inside else 0
            assert (facts.index, facts.role, facts.kind, facts.tool) == (
                index,
                record.role.value,
                record.kind.value,
                record.tool_name,
            )
            assert (facts.tokens, facts.origin) == (tokens, origin.value)
            assert facts.in_context == (index in inside)
            assert facts.running == (running if index in inside else 0)
            assert ("hidden" in facts.flags) == (not record.visible)
            assert ("pruned" in facts.flags) == bool(record.flags & Flag.PRUNED)


def test_step_figures_as_the_session_grows_are_its_steps() -> None:
    session = fresh_session()
    query = SessionQuery(session)
    for batch in batches(random_run(9, 400), 9):
        session.append(batch)
        figures = list(query.closed_figures())
        live = query.open_step()
        if live is not None:
            figures.append(StepFigure(live.step, live.tokens, live.peak))
        assert figures == [(s.step, s.tokens, s.peak) for s in session.all_steps()]
        assert query.closed_steps == len(figures) - (live is not None)
        tail = list(query.closed_figures(max(0, query.closed_steps - 2)))
        assert tail == figures[max(0, query.closed_steps - 2) : query.closed_steps]
