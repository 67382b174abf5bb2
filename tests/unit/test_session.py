"""The session: steps, derived state, compaction and prune membership, lazy bodies."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from ctx_inspect.core.model import (
    Compacted,
    ContextMeasured,
    ContextReset,
    Event,
    FinalTurnForced,
    Message,
    MessageAdded,
    MessageKind,
    Origin,
    ParseIssue,
    Part,
    PartType,
    Pruned,
    RequestRejected,
    RequestSent,
    Role,
    SourceSpan,
    Usage,
    UsageReported,
)
from ctx_inspect.core.session import Flag, Session


def msg(mid: str, role: Role, text: str, kind: MessageKind = MessageKind.MESSAGE) -> MessageAdded:
    ptype = PartType.TOOL_RESULT if kind is MessageKind.TOOL_RESULT else PartType.TEXT
    return MessageAdded(
        message=Message(id=mid, role=role, kind=kind, parts=(Part(type=ptype, text=text),))
    )


class FixedCounter:
    """Counts one token per character, so sums are easy to check by hand."""

    def __init__(self) -> None:
        self.calls = 0

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        self.calls += 1
        return [len(t) for t in texts]


def test_events_before_a_request_are_its_build_up_and_usage_belongs_to_the_request() -> None:
    s = Session()
    s.append([msg("s", Role.SYSTEM, "x" * 40), msg("u", Role.USER, "y" * 8), RequestSent()])
    s.append([UsageReported(usage=Usage(input=100, cache_read=900, cache_write=20, output=7))])
    s.append([msg("a", Role.ASSISTANT, "z" * 4), msg("t", Role.TOOL, "w" * 400), RequestSent()])
    assert [st.step for st in s.steps] == [1, 2]
    first, second = s.steps
    assert first.messages == 2
    assert first.estimated == 10 + 2
    assert first.reported == 1020 and first.origin is Origin.REPORTED
    assert first.usage is not None and first.usage.output == 7
    assert second.messages == 4
    # no figure of its own: the first step's reported 1,020 plus what was added since (the
    # reply and the tool output: 1 + 100 by the estimate), never the bare recount of 113
    assert second.reported is None and second.origin is Origin.ANCHORED
    assert second.estimated == 10 + 2 + 1 + 100
    assert (second.anchor, second.anchor_step, second.since) == (1020, 1, 1 + 100)
    assert second.tokens == 1020 + 1 + 100
    assert s.steps.tokens(1) == second.tokens
    assert second.describe() == "reported 1,020 at step 1 + 101 est. since"
    assert s.step_at(3) == 1  # the usage event
    assert s.step_at(4) == 2  # the assistant reply is the next step's build-up


def test_exact_counts_win_over_estimates_when_every_message_is_counted() -> None:
    counter = FixedCounter()
    s = Session(counter=counter, count_exact=True)
    s.append([msg("u", Role.USER, "hello"), RequestSent()])
    assert s.steps[0].exact == 5 + 3
    assert s.steps[0].origin is Origin.EXACT
    assert counter.calls >= 1


def test_compaction_removes_all_but_retained_and_system_messages() -> None:
    s = Session()
    s.append(
        [
            msg("s", Role.SYSTEM, "a" * 40),
            msg("u", Role.USER, "b" * 40),
            msg("t", Role.TOOL, "c" * 400, MessageKind.TOOL_RESULT),
            msg("k", Role.USER, "d" * 40),
            RequestSent(),
            Compacted(trigger="auto", retained_ids=("k",)),
            msg("sum", Role.USER, "e" * 80, MessageKind.SUMMARY),
            RequestSent(),
        ]
    )
    before, after = s.steps
    assert before.messages == 4
    assert after.messages == 3  # system, kept user message, summary
    assert after.estimated == 10 + 10 + 20
    removed = {r.id for r in s.records() if r.flags & Flag.REMOVED}
    assert removed == {"u", "t"}
    assert s.in_context(1) == [0, 1, 2, 3]
    assert [s.record(i).id for i in s.in_context(2)] == ["s", "k", "sum"]


def test_a_reset_drops_what_came_after_the_point_it_goes_back_to() -> None:
    s = Session()
    s.append(
        [
            msg("s", Role.SYSTEM, "a" * 40),
            msg("u1", Role.USER, "b" * 40),
            msg("a1", Role.ASSISTANT, "c" * 40),
            msg("u2", Role.USER, "d" * 40),
            ContextReset(keep_through="u1"),
            msg("u2b", Role.USER, "e" * 8),
            RequestSent(),
            ContextReset(keep_through=None, reason="clear"),
            RequestSent(),
            ContextReset(keep_through="never-seen"),
            RequestSent(),
        ]
    )
    assert [s.record(i).id for i in s.in_context(1)] == ["s", "u1", "u2b"]
    assert s.steps[0].estimated == 10 + 10 + 2
    assert s.steps[1].messages == 1  # only the system message survives a clear
    assert s.steps[2].messages == 1  # an unknown anchor changes nothing
    assert s.steps[0].compactions == 0


def test_a_failed_compaction_removes_nothing() -> None:
    s = Session()
    s.append([msg("u", Role.USER, "b" * 40), Compacted(failed=True, error="empty"), RequestSent()])
    assert s.steps[0].messages == 1


def test_agent_figures_are_reported_and_compaction_keeps_the_peak() -> None:
    s = Session()
    s.append(
        [
            ContextMeasured(tokens=148_213, limit=168_000, percent=88.2),
            Compacted(tokens_before=148_213, tokens_after=9_120),
            RequestSent(),
        ]
    )
    state = s.steps[0]
    assert state.reported == 9_120
    assert state.peak == 148_213
    assert state.compactions == 1


def test_prune_replaces_a_message_with_the_marker_and_rederive_is_stable() -> None:
    s = Session()
    s.append(
        [
            msg("t", Role.TOOL, "c" * 4000, MessageKind.TOOL_RESULT),
            RequestSent(),
            Pruned(message_ids=("t",), tokens_recovered=990),
            RequestSent(),
        ]
    )
    assert s.steps[0].estimated == 1000
    assert s.steps[1].estimated < 20
    assert s.record(0).flags & Flag.PRUNED
    snapshot = [(x.step, x.estimated, x.messages) for x in s.steps]
    s.rederive()
    assert [(x.step, x.estimated, x.messages) for x in s.steps] == snapshot


def test_live_state_shows_the_open_build_up() -> None:
    s = Session()
    s.append([msg("u", Role.USER, "b" * 40), RequestSent(), msg("t", Role.TOOL, "c" * 40)])
    live = s.live_state()
    assert live.step == 2 and live.messages == 2 and live.estimated == 20
    assert len(s.all_steps()) == 2
    s.append([FinalTurnForced(reason="context")])
    assert s.live_state().final_turn


def test_parse_issues_are_kept_and_indexed() -> None:
    s = Session()
    s.append([ParseIssue(reason="bad", line=3), msg("u", Role.USER, "x")])
    assert len(s.issues) == 1
    event = s.event(s.issues[0])
    assert isinstance(event, ParseIssue) and event.line == 3


def test_bodies_with_spans_are_read_back_lazily_and_cached() -> None:
    reads: list[SourceSpan] = []
    bodies = {
        10: Message(id="a", role=Role.USER, parts=(Part(type=PartType.TEXT, text="first"),)),
        20: Message(id="b", role=Role.USER, parts=(Part(type=PartType.TEXT, text="second"),)),
    }

    def reader(span: SourceSpan) -> list[Message]:
        reads.append(span)
        return [bodies[span.offset]]

    s = Session(body_reader=reader, cache_size=1)
    for offset, body in bodies.items():
        s.append([MessageAdded(message=body, span=SourceSpan(offset=offset, length=5, line=1))])
    assert not reads  # nothing read at append time
    assert s.body(0).text == "first"
    assert s.body(0).text == "first"
    assert len(reads) == 1  # cached
    assert s.body(1).text == "second"
    assert s.body(0).text == "first"  # evicted (cache of one) and read again
    assert len(reads) == 3
    assert s.record(0).flags & Flag.INLINE == 0


def _events_strategy() -> st.SearchStrategy[list[Event]]:
    message = st.builds(
        lambda i, n, role: msg(f"m{i}", role, "x" * n),
        st.integers(0, 10**6),
        st.integers(0, 400),
        st.sampled_from(list(Role)),
    )
    other = st.sampled_from([RequestSent(), Compacted(), Pruned(tokens_recovered=5)])
    return st.lists(st.one_of(message, other), max_size=40)


@settings(max_examples=60, deadline=None)
@given(_events_strategy(), st.integers(1, 7))
def test_appending_in_batches_equals_appending_at_once(events: list[Event], size: int) -> None:
    unique: list[Event] = []
    seen: set[str] = set()
    for e in events:  # ids must be unique within a session
        if isinstance(e, MessageAdded):
            if e.message.id in seen:
                continue
            seen.add(e.message.id)
        unique.append(e)
    whole = Session()
    whole.append(unique)
    parts = Session()
    for i in range(0, len(unique), size):
        parts.append(unique[i : i + size])
    assert [(x.step, x.messages, x.estimated) for x in whole.all_steps()] == [
        (x.step, x.messages, x.estimated) for x in parts.all_steps()
    ]
    assert len(whole) == len(parts) == len(unique)


def test_message_rows_agree_with_the_records() -> None:
    """A row says a message is sent in the main thread exactly when its record is visible and
    in the main thread (sub-agents' messages and hidden ones are not)."""
    s = Session()
    hidden = Message(
        id="h", role=Role.ASSISTANT, visible=False, parts=(Part(type=PartType.TEXT, text="n"),)
    )
    sub = Message(
        id="s1", role=Role.USER, thread="sub-1", parts=(Part(type=PartType.TEXT, text="go"),)
    )
    s.append(
        [
            msg("s", Role.SYSTEM, "x" * 40),
            MessageAdded(message=sub),
            msg("u", Role.USER, "y" * 8),
            MessageAdded(message=hidden),
            RequestSent(),
            msg("t", Role.TOOL, "w" * 400, MessageKind.TOOL_RESULT),
        ]
    )
    rows = list(s.message_rows())
    records = list(s.records())
    assert [r.sent_in_main for r in rows] == [True, False, True, False, True]
    assert [(r.position, r.kind, r.estimate, r.event_index) for r in rows] == [
        (r.index, r.kind, r.estimate, r.event_index) for r in records
    ]
    assert [r.sent_in_main for r in rows] == [r.visible and r.thread == "main" for r in records]


def test_the_live_end_is_the_last_reported_figure_plus_what_came_after() -> None:
    """What the dashboard opens at: the last request's reported size plus the reply and tool
    output since, counted exactly when every message is counted on both sides."""
    s = Session(counter=FixedCounter(), count_exact=True)
    s.append([msg("s", Role.SYSTEM, "x" * 40), msg("u", Role.USER, "hello"), RequestSent()])
    s.append([UsageReported(usage=Usage(input=5000))])
    s.append([msg("a", Role.ASSISTANT, "fine"), msg("t", Role.TOOL, "abc")])
    live = s.live_state()
    assert live.origin is Origin.ANCHORED
    assert live.exact is not None and s.steps[0].exact is not None
    assert live.since == live.exact - s.steps[0].exact > 0
    assert live.tokens == 5000 + live.since
    assert "exact since" in live.describe()


def test_a_later_figure_moves_the_anchor_and_a_new_conversation_drops_it() -> None:
    s = Session()
    s.append([msg("u", Role.USER, "y" * 400), RequestSent()])
    s.append([UsageReported(usage=Usage(input=9000))])
    s.append([msg("a", Role.ASSISTANT, "z" * 40), ContextMeasured(tokens=7000, label="agent")])
    s.append([msg("t", Role.TOOL, "w" * 80), RequestSent()])
    second = s.steps[1]
    # the agent's figure is this step's own: reported, not anchored
    assert (second.tokens, second.origin) == (7000, Origin.REPORTED)
    s.append([UsageReported(usage=Usage(input=0))])  # a zero report anchors nothing
    s.append([msg("b", Role.ASSISTANT, "q" * 40)])
    live = s.live_state()
    assert live.anchor == 7000 and live.anchor_step == 2
    assert live.tokens == 7000 + (20 + 10)  # the tool output after the figure, and the reply
    s.append([ContextReset(reason="clear"), msg("n", Role.USER, "n" * 40)])
    fresh = s.live_state()
    assert fresh.anchor is None and fresh.origin is Origin.ESTIMATED and fresh.tokens == 10


def test_a_refused_request_belongs_to_its_step_and_counts_only_towards_its_peak() -> None:
    s = Session()
    s.append([msg("u", Role.USER, "y" * 400), RequestSent()])
    s.append([RequestRejected(reason="prompt is too long", tokens=210_000, limit=200_000)])
    s.append([msg("u2", Role.USER, "again"), RequestSent()])
    first, second = s.steps
    assert first.rejected == 1 and second.rejected == 0
    assert first.reported is None and first.tokens == 100  # no invented size of what was sent
    assert first.peak == 210_000
    assert s.step_at(2) == 1
    assert s.steps.peak(0) == 210_000


def test_the_figure_that_forced_a_final_turn_counts_towards_its_steps_peak() -> None:
    s = Session()
    s.append([ContextMeasured(tokens=27_129), RequestSent()])
    forced = FinalTurnForced(reason="context", projected_tokens=38_308, limit_tokens=35_712)
    s.append([forced, ContextMeasured(tokens=32_898), RequestSent(final_turn=True)])
    last = s.steps[-1]
    assert (last.tokens, last.peak, last.final_turn) == (32_898, 38_308, True)


def test_a_step_with_a_forced_final_turn_keeps_the_evaluation_that_forced_it() -> None:
    from ctx_inspect.core.model import GuardEvaluated

    s = Session()
    s.append([msg("u", Role.USER, "y" * 40), RequestSent()])
    forcing = GuardEvaluated(current=32_898, new=5_410, projected=38_308)
    after = GuardEvaluated(current=32_898, projected=32_898)
    s.append([forcing, FinalTurnForced(reason="context"), after, RequestSent(final_turn=True)])
    assert s.steps[1].guard == forcing


def test_an_estimate_given_as_a_figure_stays_an_estimate() -> None:
    """A what-if's replayed figures are estimates: the step shows it, and so do the steps
    anchored on it; a report after it is reported again."""
    s = Session()
    s.append([msg("u", Role.USER, "y" * 400), RequestSent()])
    s.append([UsageReported(usage=Usage(input=9000))])
    estimate = ContextMeasured(tokens=4000, origin=Origin.ESTIMATED, label="what-if")
    s.append([msg("a", Role.ASSISTANT, "z" * 40), estimate, RequestSent()])
    second = s.steps[1]
    assert (second.tokens, second.origin) == (4000, Origin.ESTIMATED)
    assert second.describe() == "estimated (what-if)"
    s.append([msg("t", Role.TOOL, "w" * 80)])
    live = s.live_state()
    assert (live.tokens, live.origin) == (4000 + 20, Origin.ESTIMATED)
    assert live.describe() == "estimated 4,000 at step 2 + 20 est. since"
    # kept as columns: the closed step says the same when made again
    s.append([RequestSent(), UsageReported(usage=Usage(input=5000))])
    assert (s.steps[1].origin, s.steps[2].origin) == (Origin.ESTIMATED, Origin.REPORTED)
    assert s.steps[2].describe() == "reported (provider usage)"
