"""Replay mechanics with a small threshold policy: anchoring, agreement, divergence."""

from __future__ import annotations

import gc
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from ctx_inspect.agents.generic.profile import GenericProfile
from ctx_inspect.app.config import build_profile
from ctx_inspect.core.collector import collector_paused
from ctx_inspect.core.model import (
    TRIGGER_NOT_RECORDED,
    Compacted,
    ContextMeasured,
    ContextReset,
    Event,
    FinalTurnForced,
    LogLine,
    Message,
    MessageAdded,
    MessageKind,
    Part,
    PartType,
    Pruned,
    RequestRejected,
    RequestSent,
    Role,
    ToolOutputAction,
    ToolOutputChanged,
    Usage,
    UsageReported,
)
from ctx_inspect.core.policies.base import (
    Action,
    ContextItem,
    ItemChange,
    ItemStatus,
    PolicyResult,
    admitted,
    replace_text,
    summary_message,
    total,
    unchanged,
)
from ctx_inspect.core.profiles import Profile, make_profile, profile_names
from ctx_inspect.core.replay import (
    FAILED_HERE,
    Decision,
    ReplayResult,
    Situation,
    _acted_on,
    compare,
    recorded_decisions,
    replay,
)
from ctx_inspect.core.session import MessageRow, Session
from ctx_inspect.core.summarize import LocalSummarizer


def chars4(message: Message) -> int:
    return len(message.text) // 4


class EchoSummarizer:
    def summarize(self, messages: Sequence[Message], budget_tokens: int) -> str:
        return "summary"


@dataclass
class ThresholdPolicy:
    """Compacts to [system..., summary] when the context is above ``limit``."""

    limit: int
    name: str = "threshold"

    def admit(self, item, items, profile, estimate):
        return None

    def manage(self, items, profile, estimate, summarizer):
        tokens = total(items)
        if tokens <= self.limit:
            return []
        kept = [i for i in items if i.message.role is Role.SYSTEM]
        summary = ContextItem(summary_message("sum", "s" * 40), 10)
        changes = [
            ItemChange(
                i.id,
                ItemStatus.KEPT if i in kept else ItemStatus.SUMMARIZED,
                i.tokens,
                i.tokens if i in kept else 0,
            )
            for i in items
        ]
        return [
            PolicyResult(
                Action.COMPACT,
                self.name,
                True,
                f"{tokens} > {self.limit}",
                [*kept, summary],
                [*changes, ItemChange("sum", ItemStatus.ADDED, 0, 10)],
                tokens,
                total([*kept, summary]),
            )
        ]

    def prune(self, items, profile, estimate, *, force=False):
        return unchanged(Action.PRUNE, self.name, items, "no prune")

    def compact(self, items, profile, estimate, summarizer, *, force=False):
        return unchanged(Action.COMPACT, self.name, items, "manual only in manage")

    def truncate(self, items, profile, estimate, *, force=False):
        return unchanged(Action.TRUNCATE, self.name, items, "no truncate")


def msg(mid: str, role: Role, tokens: int, kind: MessageKind = MessageKind.MESSAGE) -> MessageAdded:
    return MessageAdded(
        message=Message(
            id=mid, role=role, kind=kind, parts=(Part(type=PartType.TEXT, text="x" * tokens * 4),)
        )
    )


def profile() -> Profile:
    return build_profile("generic")


def recorded_run() -> Session:
    """System (10), then a tool output of 100 before each of 10 requests; the agent compacted
    just before request 6 (610 tokens) down to system + summary (20)."""
    s = Session(estimator=chars4)
    events: list[Event] = [msg("sys", Role.SYSTEM, 10)]
    for step in range(1, 11):
        events.append(msg(f"t{step}", Role.TOOL, 100, MessageKind.TOOL_RESULT))
        if step == 6:
            events += [
                Compacted(trigger="auto", retained_ids=()),
                msg("sum-rec", Role.USER, 10, MessageKind.SUMMARY),
            ]
        events.append(RequestSent())
    s.append(events)
    return s


def test_replaying_the_recorded_setting_reproduces_its_decisions_and_figures() -> None:
    session = recorded_run()
    recorded = [s.tokens for s in session.steps]
    assert recorded[4] == 510 and recorded[5] == 20 and recorded[6] == 120
    result = replay(
        session,
        profile(),
        estimate=chars4,
        summarizer=EchoSummarizer(),
        policy=ThresholdPolicy(limit=600),
    )
    assert [d.kind for d in result.decisions] == ["compaction"]
    assert result.decisions[0].step == 6
    assert result.agreement == 1.0
    assert result.disagreements == []
    assert [s.tokens for s in result.steps] == recorded
    assert result.steps[5].peak == 610


def test_a_higher_threshold_postpones_the_compaction_and_reports_it() -> None:
    session = recorded_run()
    result = replay(
        session,
        profile(),
        estimate=chars4,
        summarizer=EchoSummarizer(),
        policy=ThresholdPolicy(limit=750),
    )
    assert [d.step for d in result.decisions] == [8]
    assert result.agreement == 0.0
    assert {"step": 6, "recorded": ["compaction"], "replayed": []} in result.disagreements
    assert {"step": 8, "recorded": [], "replayed": ["compaction"]} in result.disagreements
    # step 7 keeps what the recording removed: 10 + 7 outputs of 100
    assert result.steps[6].tokens == 710
    assert result.steps[7].tokens == 20  # system + the replay's own summary
    assert result.steps[7].peak == 810


def test_a_figures_only_log_replays_through_the_overhead_item() -> None:
    session = Session()
    figures = [50_000, 90_000, 130_000, 150_000, 20_000, 60_000]
    events: list[Event] = []
    for i, tokens in enumerate(figures, start=1):
        events.append(ContextMeasured(tokens=tokens))
        if i == 4:
            events.append(Compacted(tokens_before=150_000, tokens_after=10_000))
        events.append(RequestSent())
    session.append(events)
    assert [s.tokens for s in session.steps] == [50_000, 90_000, 130_000, 10_000, 20_000, 60_000]
    result = replay(
        session,
        profile(),
        estimate=chars4,
        summarizer=EchoSummarizer(),
        policy=ThresholdPolicy(limit=100_000),
    )
    # compacts at step 3 (130,000 > 100,000); the recorded compaction at 4 is not repeated
    assert [d.step for d in result.decisions] == [3]
    assert result.steps[3].tokens == 150_000 - 130_000 + 10
    assert result.steps[2].messages == 1  # only the summary is left of the unknown conversation


def test_compare_matches_by_step_and_kind() -> None:
    rec = [Decision(3, "compaction"), Decision(5, "final_turn")]
    rep = [Decision(3, "compaction"), Decision(6, "final_turn")]
    agreement, diffs = compare(rec, rep)
    assert agreement == 0.5
    assert diffs == [
        {"step": 5, "recorded": ["final_turn"], "replayed": []},
        {"step": 6, "recorded": [], "replayed": ["final_turn"]},
    ]
    assert compare([], [])[0] == 1.0


def test_recorded_decisions_are_placed_at_their_steps() -> None:
    session = recorded_run()
    assert [(d.step, d.kind) for d in recorded_decisions(session)] == [(6, "compaction")]


def busy_run() -> Session:
    """Every kind of event between messages, most of which replay does not act on."""
    s = Session(estimator=chars4)
    events: list[Event] = [msg("sys", Role.SYSTEM, 10), LogLine(text="started")]
    for step in range(1, 6):
        events += [
            msg(f"t{step}", Role.TOOL, 100, MessageKind.TOOL_RESULT),
            UsageReported(usage=Usage(input=100 * step, output=5)),
            ContextMeasured(tokens=100 * step),
        ]
        if step == 2:
            events.append(Pruned(tokens_before=300, tokens_after=200, reason="old outputs"))
        if step == 3:
            events += [
                Compacted(trigger="auto", retained_ids=()),
                msg("sum-rec", Role.USER, 10, MessageKind.SUMMARY),
            ]
        if step == 4:
            events += [
                ToolOutputChanged(action=ToolOutputAction.DROPPED, tokens=50, tool="bash"),
                FinalTurnForced(projected_tokens=900, limit_tokens=800, reason="budget"),
                ContextReset(keep_through="sys"),
            ]
        events += [RequestSent(), LogLine(text=f"request {step}")]
    events.append(msg("last", Role.USER, 5))
    s.append(events)
    return s


def test_replay_reads_the_messages_and_the_events_it_acts_on_in_their_order() -> None:
    session = busy_run()
    acted = [
        ("message", item.position) if isinstance(item, MessageRow) else ("event", item)
        for item in _acted_on(session)
    ]
    expected = [
        ("message", raw) if isinstance(raw, int) else ("event", raw)
        for raw in session.raw_events()
        if isinstance(raw, int | RequestSent | Compacted | ContextReset | ToolOutputChanged)
    ]
    assert acted == expected
    assert [kind for kind, _ in acted].count("message") == session.message_count == 8
    assert sum(isinstance(e, RequestSent) for _, e in acted) == 5
    assert not any(isinstance(e, UsageReported | ContextMeasured | LogLine) for _, e in acted)


def test_recorded_decisions_of_every_kind_in_order() -> None:
    decisions = recorded_decisions(busy_run())
    assert [(d.step, d.kind) for d in decisions] == [
        (2, "prune"),
        (3, "compaction"),
        (4, "dropped"),
        (4, "final_turn"),
    ]
    assert decisions[0].tokens_before == 300 and decisions[0].tokens_after == 200
    assert decisions[3].tokens_before == 900 and decisions[3].tokens_after == 800


def test_reused_estimates_replay_alike_without_estimating_again() -> None:
    session = recorded_run()
    calls: list[str] = []

    def counted(message: Message) -> int:
        calls.append(message.id)
        return chars4(message)

    fresh = replay(session, profile(), estimate=counted, summarizer=EchoSummarizer(),
                   policy=ThresholdPolicy(limit=750))  # fmt: skip
    assert calls
    calls.clear()
    reused = replay(session, profile(), estimate=counted, summarizer=EchoSummarizer(),
                    policy=ThresholdPolicy(limit=750), reuse_estimates=True)  # fmt: skip
    assert calls == []  # every message's estimate came from the session
    assert reused.steps == fresh.steps and reused.decisions == fresh.decisions
    assert [(i.id, i.tokens) for i in reused.items] == [(i.id, i.tokens) for i in fresh.items]


@dataclass
class CuttingPolicy(ThresholdPolicy):
    """Cuts every tool output to 40 characters as it enters (admit's result: the output)."""

    def admit(self, item, items, profile, estimate):
        return admitted(
            Action.TRUNCATE,
            self.name,
            item,
            replace_text(item.message, "c" * 40),
            estimate,
            reason="cut",
            details={},
        )


def test_an_admitted_output_enters_the_context_as_admit_returned_it() -> None:
    result = replay(recorded_run(), profile(), estimate=chars4, summarizer=EchoSummarizer(),
                    policy=CuttingPolicy(limit=10_000))  # fmt: skip
    outputs = [i for i in result.items if i.id.startswith("t")]
    assert [(i.tokens, i.message.text) for i in outputs][:1] == [(10, "c" * 40)]
    assert all(i.index is not None for i in outputs)
    truncated = [d for d in result.decisions if d.kind == "truncated"]
    assert truncated and all((d.tokens_before, d.tokens_after) == (100, 10) for d in truncated)
    assert result.steps[0].estimated == 10 + 10  # the system prompt and the cut output


def added(mid: str, role: Role, kind: MessageKind, *parts: Part) -> MessageAdded:
    return MessageAdded(message=Message(id=mid, role=role, kind=kind, parts=parts))


def coding_run(turns: int = 40) -> Session:
    """A user request, then tool calls and outputs of 600-2,400 tokens (paths, errors), a
    request before each call, so that every policy prunes or compacts under a small window."""
    s = Session(estimator=chars4)
    ask = Part(type=PartType.TEXT, text="Fix the failing test in src/app.py")
    events: list[Event] = [
        msg("sys", Role.SYSTEM, 50),
        added("u0", Role.USER, MessageKind.MESSAGE, ask),
    ]
    for turn in range(turns):
        call = f"c{turn}"
        said = Part(type=PartType.TEXT, text=f"I will run the tests again ({turn}).")
        run = Part(
            type=PartType.TOOL_CALL,
            tool_name="bash",
            call_id=call,
            arguments='{"command": "pytest tests/test_app.py"}',
        )
        line = f"src/mod{turn % 7}.py:{turn}: AssertionError: expected 3, got {turn}\n"
        output = Part(
            type=PartType.TOOL_RESULT,
            text=line * (40 * (1 + turn % 4)),
            tool_name="bash",
            call_id=call,
        )
        events += [
            RequestSent(),
            added(f"a{turn}", Role.ASSISTANT, MessageKind.TOOL_CALL, said, run),
            added(f"t{turn}", Role.TOOL, MessageKind.TOOL_RESULT, output),
        ]
    events.append(RequestSent())
    s.append(events)
    return s


@pytest.mark.parametrize("name", profile_names())
def test_a_replay_makes_no_reference_cycle_and_leaves_the_collector_as_it_was(name: str) -> None:
    """``freeze`` moves what a replay made out of the collector's way for good: that is only
    sound while a replay makes no cycle, which would then never be collected."""
    session = coding_run()
    # Fifth counts no tool output and compresses only when asked to
    sets = ["context_window=400", "auto_compress=true"] if name == "fifth" else []
    chosen = build_profile(name, sets=sets or ["context_window=16000"])
    # objects a load froze before stay frozen, as found: thawing them would leave a full pass
    # over everything this process has read to the next test's collection
    frozen_before = gc.get_freeze_count()
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        result = replay(session, chosen, estimate=chars4, summarizer=LocalSummarizer())
        assert not gc.isenabled()  # a disabled collector stays disabled
        assert result.decisions  # the policy acted: its paths ran
        del result
        assert gc.collect() == 0
    finally:
        if was_enabled:
            gc.enable()
    frozen = gc.get_freeze_count()
    replay(session, chosen, estimate=chars4, summarizer=LocalSummarizer())
    assert gc.isenabled() == was_enabled
    assert gc.get_freeze_count() == frozen  # nothing frozen unless asked
    try:
        with collector_paused(freeze=True):  # as a headless command keeps what it made
            replay(session, chosen, estimate=chars4, summarizer=LocalSummarizer())
        assert gc.get_freeze_count() > frozen
        assert gc.isenabled() == was_enabled
    finally:
        if not frozen_before:
            gc.unfreeze()  # the test process's objects go back to the collector


def test_an_output_the_recording_dropped_is_restored_at_its_recorded_size() -> None:
    """The recording replaced a tool output that did not fit: the replay puts one of the
    recorded size back (its text is unknown), so the replayed policy decides again."""
    s = Session(estimator=chars4)
    placeholder = Part(type=PartType.TOOL_RESULT, text="(dropped)", tool_name="bash", call_id="c")
    s.append(
        [
            msg("sys", Role.SYSTEM, 10),
            RequestSent(),
            ToolOutputChanged(
                action=ToolOutputAction.DROPPED, tokens=500, tool="bash", message_id="t1"
            ),
            added("t1", Role.TOOL, MessageKind.TOOL_RESULT, placeholder),
            msg("t2", Role.TOOL, 20, MessageKind.TOOL_RESULT),
            RequestSent(),
        ]
    )
    result = replay(s, profile(), estimate=chars4, summarizer=EchoSummarizer())
    sizes = {item.id: item.tokens for item in result.items}
    assert sizes["t1"] >= 500 and sizes["t2"] == 20  # only the dropped one is restored
    assert "content is unknown" in next(i for i in result.items if i.id == "t1").message.text


# -- the user's commands, failed attempts, hooks -----------------------------------------------


@dataclass
class ManualPolicy(ThresholdPolicy):
    """``ThresholdPolicy`` whose forced compaction (the user's command) compacts too."""

    def compact(
        self, items: Any, profile: Any, estimate: Any, summarizer: Any, *, force: bool = False
    ) -> PolicyResult:
        compacted: list[PolicyResult] = ThresholdPolicy(limit=-1).manage(  # type: ignore[no-untyped-call]
            items, profile, estimate, summarizer
        )
        return compacted[0] if force else unchanged(Action.COMPACT, self.name, items, "no")


def commanded_run(trigger: str, *, failed: bool = False, requests: int = 5) -> Session:
    """Requests after 100-token outputs; before request 4 a compaction (``trigger``)."""
    s = Session(estimator=chars4)
    events: list[Event] = [msg("sys", Role.SYSTEM, 10)]
    for step in range(1, requests + 1):
        events.append(msg(f"t{step}", Role.TOOL, 100, MessageKind.TOOL_RESULT))
        if step == 4:
            events.append(Compacted(trigger=trigger, failed=failed, error="Overloaded" * failed))
            if not failed:
                events.append(msg("sum-rec", Role.USER, 10, MessageKind.SUMMARY))
        events.append(RequestSent())
    s.append(events)
    return s


def test_a_manual_compaction_is_the_users_command_and_is_obeyed() -> None:
    session = commanded_run("manual")
    result = replay(
        session, profile(), estimate=chars4, summarizer=EchoSummarizer(), policy=ManualPolicy(10**6)
    )
    assert [(d.step, d.kind) for d in result.decisions] == [(4, "compaction")]
    assert result.decisions[0].detail.startswith("manual: the user's command")
    assert result.agreement == 1.0
    # without a policy that can compact on command, the decision is not reproduced
    plain = replay(
        session,
        profile(),
        estimate=chars4,
        summarizer=EchoSummarizer(),
        policy=ThresholdPolicy(10**6),
    )
    assert plain.agreement == 0.0


def test_a_failed_compaction_is_a_decision_and_the_context_stays() -> None:
    session = commanded_run("auto", failed=True, requests=4)
    (recorded,) = recorded_decisions(session)
    assert (recorded.step, recorded.kind, recorded.detail) == (
        4,
        "compaction",
        "auto (failed: Overloaded)",
    )
    result = replay(
        session,
        profile(),
        estimate=chars4,
        summarizer=EchoSummarizer(),
        policy=ThresholdPolicy(350),
    )
    assert result.agreement == 1.0
    (decision,) = result.decisions
    assert decision.tokens_after is None and "failed in the recording" in decision.detail
    # the context was kept: every step as recorded
    assert [s.tokens for s in result.steps] == [s.tokens for s in session.steps]


@dataclass
class HookedPolicy(ThresholdPolicy):
    """Decides after a request, from its figure; says a recorded prune cannot be replayed."""

    figures: list[int] = field(default_factory=list)

    def manage(self, items: Any, profile: Any, estimate: Any, summarizer: Any) -> list[Any]:
        return []

    def after_request(
        self,
        items: Any,
        profile: Any,
        estimate: Any,
        summarizer: Any,
        *,
        figure: int,
        refused: Any = None,
    ) -> list[PolicyResult]:
        self.figures.append(figure)
        if figure <= self.limit:
            return []
        results: list[PolicyResult] = ThresholdPolicy(limit=-1).manage(  # type: ignore[no-untyped-call]
            items, profile, estimate, summarizer
        )
        results[0].details["decided_on"] = figure
        return results[:1]

    def undetermined(self, recorded: Decision, profile: Any, seen: Situation) -> str | None:
        return "not in the file" if recorded.kind == "prune" else None


def test_the_after_request_hook_and_undetermined_decisions() -> None:
    session = recorded_run()
    session.append([Pruned(applied=True, reason="prune")])
    policy = HookedPolicy(limit=500)
    result = replay(session, profile(), estimate=chars4, summarizer=EchoSummarizer(), policy=policy)
    # the hook gets the figure of the request just answered: 510 at step 5, so it compacts
    # before request 6, deciding on 510
    assert policy.figures[:5] == [110, 210, 310, 410, 510]
    (compaction,) = result.decisions
    assert (compaction.step, compaction.tokens_before) == (6, 510)
    assert [(d.kind, why) for d, why in result.undetermined] == [("prune", "not in the file")]
    assert result.agreement == 1.0  # the prune is not counted either way


class LimitedProfile(GenericProfile):
    """A provider that refuses a request over 450 tokens."""

    def provider_limit(self) -> int:
        return 450


@dataclass
class ReactivePolicy(HookedPolicy):
    """Compacts (whatever the figure: ``limit`` -1) only once the provider refused a request;
    notes what ``undetermined`` is given."""

    heard: list[tuple[int, int | None]] = field(default_factory=list)
    seen: dict[int, Situation] = field(default_factory=dict)

    def after_request(
        self,
        items: Any,
        profile: Any,
        estimate: Any,
        summarizer: Any,
        *,
        figure: int,
        refused: RequestRejected | None = None,
    ) -> list[PolicyResult]:
        if refused is None:
            return []
        self.heard.append((figure, refused.tokens))
        return super().after_request(items, profile, estimate, summarizer, figure=figure)

    def undetermined(self, recorded: Decision, profile: Any, seen: Situation) -> str | None:
        self.seen[recorded.step] = seen
        return None


def test_a_request_over_the_providers_limit_is_refused_and_the_agent_hears_it() -> None:
    """The profile gives the provider's limit: the replayed request of 510 (step 5) is over
    it, so the policy hears the refusal before request 6, and compacts there, as recorded."""
    session = recorded_run()
    policy = ReactivePolicy(limit=-1)
    result = replay(
        session, LimitedProfile(), estimate=chars4, summarizer=EchoSummarizer(), policy=policy
    )
    assert policy.heard == [(510, 510)]
    (compaction,) = result.decisions
    assert (compaction.step, compaction.kind, compaction.trigger) == (6, "compaction", "reactive")
    assert result.agreement == 1.0
    # what the replay knew at the recorded compaction's step: the figure, and the refusal
    seen = policy.seen[6]
    assert seen.has_messages and seen.figure == 610
    assert seen.refused is not None and (seen.refused.tokens, seen.refused.limit) == (510, 450)
    # without the provider's limit nothing was refused: the agent never compacts
    unlimited = ReactivePolicy(limit=-1)
    plain = replay(
        session, profile(), estimate=chars4, summarizer=EchoSummarizer(), policy=unlimited
    )
    assert unlimited.heard == [] and plain.decisions == [] and plain.agreement == 0.0
    assert unlimited.seen[6].refused is None


# -- a figures-only log of an agent whose guard logs its decisions --------------------------------


def figures_session(*events: Event) -> Session:
    session = Session()
    session.append(list(events))
    return session


def guard_replay(session: Session, limit: int = 10_000) -> ReplayResult:
    """Under the aiagent profile: a window whose limit is ``limit`` (buffer 0, output 0)."""
    prof = make_profile(
        "aiagent", {"context_window": limit, "buffer_tokens": 0, "max_output_tokens": 0}
    )
    return replay(session, prof, estimate=chars4, summarizer=EchoSummarizer())


def test_a_change_the_budget_caused_is_decided_again_one_for_size_is_made_again() -> None:
    stored = ToolOutputChanged(
        action=ToolOutputAction.SPILLED, tokens=3_000, tokens_after=100, projected_tokens=11_000
    )
    cut = ToolOutputChanged(action=ToolOutputAction.SPILLED, tokens=9_000, tokens_after=100)
    session = figures_session(
        ContextMeasured(tokens=5_000), RequestSent(), stored, cut, ContextMeasured(tokens=8_100)
    )
    session.append([RequestSent()])
    result = guard_replay(session)
    assert [(d.step, d.kind) for d in result.recorded] == [(2, "truncated"), (2, "truncated")]
    assert result.agreement == 1.0
    # a limit where the output fits: it stays, whole (the recording kept 100 of its 3,000)
    roomy = guard_replay(session, 12_000)
    assert [(d.step, d.kind, d.detail) for d in roomy.decisions] == [
        (2, "truncated", "cut for its size, as recorded")
    ]
    assert roomy.steps[1].tokens == 8_100 + 2_900


def test_a_final_turn_not_forced_by_the_context_is_made_again() -> None:
    session = figures_session(
        ContextMeasured(tokens=2_000),
        RequestSent(),
        FinalTurnForced(reason="max_turns", turn=2, max_turns=2),
        ContextMeasured(tokens=3_000),
        RequestSent(final_turn=True),
    )
    result = guard_replay(session)
    assert result.agreement == 1.0 and result.disagreements == []
    assert [(d.step, d.kind, d.detail) for d in result.decisions] == [
        (2, "final_turn", "max_turns")
    ]


def test_a_decision_after_the_last_request_is_said_so_not_counted() -> None:
    session = figures_session(
        ContextMeasured(tokens=2_000),
        RequestSent(),
        FinalTurnForced(reason="context", projected_tokens=12_000, limit_tokens=10_000),
    )
    result = guard_replay(session)
    assert result.agreement == 1.0 and result.disagreements == []
    ((late, why),) = result.undetermined
    assert (late.step, late.kind) == (2, "final_turn")
    assert "after the recording's last request" in why


# -- what a recording knows better than a replay ---------------------------------------------


@dataclass
class CompactAt:
    """Compacts to [system..., summary] before the requests in ``steps`` (counted by calls),
    with ``details`` on each result; ``compact`` (the recovery path) does the same."""

    steps: tuple[int, ...]
    details: dict[str, object]
    name: str = "compact-at"
    calls: int = 0
    recovers: bool = False  # compacts after a refused request
    adopts_recorded_compaction: bool = False
    decides_after_each_turn: bool = False

    def admit(self, item, items, profile, estimate):
        return None

    def after_request(self, items, profile, estimate, summarizer, *, figure, refused=None):
        if not self.recovers or refused is None:
            return []
        size = refused.tokens if refused.tokens is not None else figure
        result = self._result(items)
        result.details["decided_on"] = size
        result.reason = f"recovery: the provider refused the request ({size:,} tokens)"
        return [result]

    def undetermined(self, recorded: Decision, profile: Any, seen: Situation) -> str | None:
        if recorded.detail.startswith(TRIGGER_NOT_RECORDED):
            return "the recording does not say what caused it"
        return None

    def _result(self, items: Sequence[ContextItem]) -> PolicyResult:
        kept = [i for i in items if i.message.role is Role.SYSTEM]
        summary = ContextItem(summary_message("sum", "s" * 40), 10)
        changes = [ItemChange(i.id, ItemStatus.SUMMARIZED, i.tokens, 0) for i in items]
        return PolicyResult(
            Action.COMPACT,
            self.name,
            True,
            "compact",
            [*kept, summary],
            [*changes, ItemChange("sum", ItemStatus.ADDED, 0, 10)],
            total(items),
            total([*kept, summary]),
            dict(self.details),
        )

    def manage(self, items, profile, estimate, summarizer):
        self.calls += 1
        return [self._result(items)] if self.calls in self.steps else []

    def prune(self, items, profile, estimate, *, force=False):
        return unchanged(Action.PRUNE, self.name, items, "no prune")

    def compact(self, items, profile, estimate, summarizer, *, force=False):
        return self._result(items)

    def truncate(self, items, profile, estimate, *, force=False):
        return unchanged(Action.TRUNCATE, self.name, items, "no truncate")


def run_of(events: list[Event]) -> Session:
    session = Session(estimator=chars4)
    session.append(events)
    return session


def tool_steps(count: int, extra: dict[int, list[Event]] | None = None) -> list[Event]:
    """System (10), a tool output of 100 before each request; ``extra`` before request n."""
    events: list[Event] = [msg("sys", Role.SYSTEM, 10)]
    for step in range(1, count + 1):
        events.append(msg(f"t{step}", Role.TOOL, 100, MessageKind.TOOL_RESULT))
        events += (extra or {}).get(step, [])
        events.append(RequestSent())
    return events


def test_a_failed_attempt_is_a_decision_the_replay_follows() -> None:
    failed = Compacted(trigger="auto", failed=True, error="nothing to compact")
    session = run_of(tool_steps(5, {3: [failed]}))
    assert [(d.step, d.failed) for d in recorded_decisions(session)] == [(3, True)]
    result = replay(
        session, profile(), estimate=chars4, summarizer=EchoSummarizer(), policy=CompactAt((3,), {})
    )
    assert result.agreement == 1.0 and result.disagreements == []
    (decision,) = result.decisions
    assert decision.failed and FAILED_HERE in decision.detail
    assert decision.tokens_after is None
    assert [s.tokens for s in result.steps] == [s.tokens for s in session.steps]  # nothing cut


def test_where_both_compact_the_recording_is_taken_from_there() -> None:
    recorded: list[Event] = [Compacted(trigger="auto", retained_ids=("t3",))]
    session = run_of(tool_steps(5, {3: recorded}))
    figures = [s.tokens for s in session.steps]
    assert figures[2] == 10 + 100  # the system prompt and the kept output
    policy = CompactAt((3,), {}, adopts_recorded_compaction=True)
    result = replay(session, profile(), estimate=chars4, summarizer=EchoSummarizer(), policy=policy)
    # the replay's own compaction would keep only its summary: the recording shows what the
    # agent's compaction kept, and its figures are the replay's from there
    assert [s.tokens for s in result.steps] == figures
    (decision,) = result.decisions
    assert decision.tokens_after == figures[2] and "taken from here on" in decision.detail
    # a policy that does not take it keeps its own result (only its summary is the recording's)
    own = replay(
        session, profile(), estimate=chars4, summarizer=EchoSummarizer(), policy=CompactAt((3,), {})
    )
    assert own.steps[2].tokens == 10 + 10


def test_a_compaction_for_the_next_prompt_waits_for_it() -> None:
    events = tool_steps(4)
    events.insert(-1, msg("u2", Role.USER, 5))  # a new prompt before the last request
    session = run_of(events)
    policy = CompactAt((2,), {"takes_effect": "next_prompt"})
    result = replay(session, profile(), estimate=chars4, summarizer=EchoSummarizer(), policy=policy)
    tokens = [s.tokens for s in result.steps]
    assert tokens[:3] == [110, 210, 310]  # the prompt in progress goes on with its list
    assert tokens[3] == 10 + 10 + 100 + 100 + 5  # system, summary, the outputs since, prompt
    assert result.decisions[0].tokens_after == tokens[3]


class DigestOnce(CompactAt):
    """Hides the oldest tool output and appends a digest of it, in the loop's list only."""

    def _result(self, items: Sequence[ContextItem]) -> PolicyResult:
        first = next(i for i in items if i.message.role is Role.TOOL)
        hidden = ContextItem(first.message.model_copy(update={"visible": False}), 0, first.index)
        digest = ContextItem(summary_message("digest", "d" * 20), 5)
        new = [hidden if i is first else i for i in items] + [digest]
        changes = [
            ItemChange(first.id, ItemStatus.ARCHIVED, first.tokens, 0),
            ItemChange("digest", ItemStatus.ADDED, 0, 5),
        ]
        return PolicyResult(
            Action.PRUNE, self.name, True, "digest", new, changes, total(items), total(new),
            dict(self.details),
        )  # fmt: skip


def test_what_the_loop_alone_had_is_gone_with_the_prompt() -> None:
    events = tool_steps(3)
    events.insert(-1, msg("u2", Role.USER, 5))
    session = run_of(events)
    policy = DigestOnce((2,), {"loop_only": True, "undetermined": "the files do not show it"})
    result = replay(session, profile(), estimate=chars4, summarizer=EchoSummarizer(), policy=policy)
    # 10 + 200 at request 2 less the hidden output, plus the digest; back with the prompt
    assert [s.tokens for s in result.steps] == [110, 115, 315]
    assert result.disagreements == [] and result.agreement == 1.0
    assert [(d["step"], d["kind"], d["reason"]) for d in result.left_out] == [
        (2, "prune", "the files do not show it")
    ]


def test_a_refused_request_is_followed_by_the_agents_recovery() -> None:
    refusal = RequestRejected(reason="prompt is too long", tokens=400, limit=350)
    recovered = Compacted(trigger="context_limit_recovery", retained_ids=())
    events = [
        *tool_steps(3),
        refusal,
        recovered,
        msg("sum-rec", Role.USER, 10, MessageKind.SUMMARY),
    ]
    events.append(RequestSent())  # request 4: the retry
    session = run_of(events)
    policy = CompactAt((), {}, recovers=True)
    result = replay(session, profile(), estimate=chars4, summarizer=EchoSummarizer(), policy=policy)
    assert [(d.step, d.kind) for d in result.decisions] == [(4, "compaction")]
    assert "the provider refused the request (400 tokens)" in result.decisions[0].detail
    assert result.decisions[0].tokens_before == 400  # the provider's own figure
    assert result.agreement == 1.0
    # a replay whose request stays under the provider's limit is not refused: the provider
    # counted 400 where the replay counts 310; a replay that compacted at request 2 sends
    # 110 less, so 290 by the provider's count, under 350
    smaller = CompactAt((2,), {}, recovers=True)
    quiet = replay(session, profile(), estimate=chars4, summarizer=EchoSummarizer(), policy=smaller)
    assert [(d.step, d.kind) for d in quiet.decisions] == [(2, "compaction")]
    assert quiet.agreement == 0.0


def test_a_compaction_of_unknown_cause_is_followed_not_compared() -> None:
    unknown = Compacted(trigger=TRIGGER_NOT_RECORDED, retained_ids=("t3",))
    session = run_of(tool_steps(5, {3: [unknown]}))
    policy = CompactAt((), {}, adopts_recorded_compaction=True)
    result = replay(session, profile(), estimate=chars4, summarizer=EchoSummarizer(), policy=policy)
    assert result.agreement == 1.0 and result.disagreements == []
    assert [s.tokens for s in result.steps] == [s.tokens for s in session.steps]
    assert [(d.step, why) for d, why in result.undetermined] == [
        (3, "the recording does not say what caused it")
    ]


def test_a_decision_after_the_last_request_is_replayed_where_the_recording_has_one() -> None:
    failed = Compacted(trigger="auto", failed=True, error="nothing to compact")
    events = [*tool_steps(2), msg("t3", Role.TOOL, 100, MessageKind.TOOL_RESULT), failed]
    session = run_of(events)
    # its third call: the build-up after the last request
    policy = CompactAt((3,), {}, decides_after_each_turn=True)
    result = replay(session, profile(), estimate=chars4, summarizer=EchoSummarizer(), policy=policy)
    assert [(d.step, d.failed) for d in result.decisions] == [(3, True)]
    assert result.agreement == 1.0 and result.requests == 2
    # the build-up after the last request is a step of its own there, with that decision
    live = result.steps[-1]
    assert live.live_end and [(d.step, d.failed) for d in live.decisions] == [(3, True)]


def test_a_response_carries_the_replayed_figure_of_its_request() -> None:
    events: list[Event] = [msg("sys", Role.SYSTEM, 10), msg("u", Role.USER, 90)]
    events += [RequestSent(), UsageReported(usage=Usage(input=130, output=7, total=137))]
    events += [msg("a", Role.ASSISTANT, 2), msg("t", Role.TOOL, 50, MessageKind.TOOL_RESULT)]
    events.append(RequestSent())
    session = run_of(events)
    seen: list[int | None] = []

    class Probe(CompactAt):
        def manage(self, items, profile, estimate, summarizer):
            seen.extend(i.reported for i in items if i.message.role is Role.ASSISTANT)
            return []

    replay(session, profile(), estimate=chars4, summarizer=EchoSummarizer(), policy=Probe((), {}))
    assert seen == [137]  # the request's figure as replayed (130) and its output (7)
