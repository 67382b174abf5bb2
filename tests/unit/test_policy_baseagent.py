"""BaseAgent's policy (seed 000, ref 1.4): overflow, backward prune, compaction, middle-out."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctx_inspect.agents.baseagent.policy import (
    POLICY,
    PRUNE_MARKER,
    SUMMARY_PREFIX,
    middle_out,
    scan,
)
from ctx_inspect.agents.baseagent.profile import BaseAgentProfile
from ctx_inspect.agents.generic.profile import GenericProfile
from ctx_inspect.core.model import Message, MessageKind, Part, PartType, Role
from ctx_inspect.core.policies import policy_for
from ctx_inspect.core.policies.base import Action, ContextItem, ItemStatus, Policy, full_changes

PROFILE = BaseAgentProfile()


def estimate(message: Message) -> int:
    return PROFILE.estimate(message)


def text(role: Role, mid: str, body: str, kind: MessageKind = MessageKind.MESSAGE) -> Message:
    return Message(id=mid, role=role, kind=kind, parts=(Part(type=PartType.TEXT, text=body),))


def system(mid: str = "sys", body: str = "You are SuperAgent.") -> Message:
    return text(Role.SYSTEM, mid, body)


def user(mid: str, body: str = "do the task") -> Message:
    return text(Role.USER, mid, body)


def assistant(mid: str, call: str = "c") -> Message:
    return Message(
        id=mid,
        role=Role.ASSISTANT,
        kind=MessageKind.TOOL_CALL,
        parts=(Part(type=PartType.TOOL_CALL, tool_name="shell", call_id=call, arguments="{}"),),
    )


def tool(mid: str, tokens: int, fill: str = "x") -> Message:
    """A tool output whose scan estimate (floor(len/4)) is exactly ``tokens``."""
    return Message(
        id=mid,
        role=Role.TOOL,
        kind=MessageKind.TOOL_RESULT,
        parts=(Part(type=PartType.TOOL_RESULT, text=fill * (tokens * 4), call_id=mid),),
    )


def ctx(*messages: Message) -> list[ContextItem]:
    return [ContextItem(m, estimate(m), i) for i, m in enumerate(messages)]


def padding(tokens: int) -> Message:
    """A system prompt that brings the total to the wanted size."""
    return system(body="p" * (tokens * 4))


class FakeSummarizer:
    def __init__(self, summary: str = "did things") -> None:
        self.summary = summary
        self.calls: list[tuple[list[Message], int]] = []

    def summarize(self, messages: Sequence[Message], budget_tokens: int) -> str:
        self.calls.append((list(messages), budget_tokens))
        return self.summary


def test_policy_is_registered_and_satisfies_the_contract() -> None:
    policy: Policy = policy_for("baseagent")
    assert policy is POLICY
    assert POLICY.name == "baseagent"


def test_wrong_profile_is_a_config_error() -> None:
    from ctx_inspect.errors import ConfigError

    with pytest.raises(ConfigError):
        POLICY.prune(ctx(user("u")), GenericProfile(), estimate, force=True)


# -- overflow ------------------------------------------------------------------------------


def _sized(total_tokens: int) -> list[ContextItem]:
    first = user("u1")
    pad = padding(total_tokens - estimate(first) - 4)  # a system message costs len/4 + 4
    items = ctx(pad, first)
    assert sum(i.tokens for i in items) == total_tokens
    return items


def test_overflow_is_strictly_above_85_percent_of_usable() -> None:
    summarizer = FakeSummarizer()
    assert POLICY.manage(_sized(142_800), PROFILE, estimate, summarizer) == []
    results = POLICY.manage(_sized(142_801), PROFILE, estimate, summarizer)
    assert [r.action for r in results] == [Action.PRUNE, Action.COMPACT]


# -- the prune -----------------------------------------------------------------------------


def test_typical_conversation_prunes_nothing_then_compacts_to_two_messages() -> None:
    items = ctx(
        system(body="s" * 40_000),
        user("instruction", "fix the bug"),
        user("listing", "Current directory and files:\n```\n.\n```"),
        assistant("a1", "c1"),
        tool("t1", 60_000),
        assistant("a2", "c2"),
        tool("t2", 60_000),
        assistant("a3", "c3"),
        tool("t3", 30_000),
    )
    summarizer = FakeSummarizer("progress so far")
    prune, compact = POLICY.manage(items, PROFILE, estimate, summarizer)
    assert prune.reason.startswith("Prune scan: 0 total tokens, 0 prunable")
    assert not prune.fired
    assert prune.details["persistent"] is False
    assert compact.fired
    assert len(compact.items) == 2
    assert compact.items[0].message == items[0].message
    summary = compact.items[1].message
    assert summary.role is Role.USER and summary.kind is MessageKind.SUMMARY
    assert summary.text == SUMMARY_PREFIX + "progress so far"
    assert summarizer.calls[0][1] == 4096
    assert [str(c.status) for c in compact.changes] == ["summarized"] * 8 + ["added"]
    assert [str(c.status) for c in full_changes(prune.items, compact)] == ["kept"] + [
        "summarized"
    ] * 8 + ["added"]
    assert compact.details["persistent"] is True
    assert compact.tokens_after == sum(i.tokens for i in compact.items)


def _protect_case(protected: int, older: int, pad: int = 0) -> list[ContextItem]:
    """Tool outputs before the second-to-last user message: ``protected`` then ``older``;
    ``pad`` tokens of system prompt."""
    return ctx(
        padding(pad),
        user("uA"),
        assistant("a1"),
        tool("old", older),
        assistant("a2"),
        tool("recent", protected),
        user("uB"),
        assistant("a3"),
        tool("after-B", 5_000),  # after the second-to-last user message: never scanned
        user("uC"),
        assistant("a4"),
        tool("after-C", 5_000),
    )


def test_exactly_40000_protected_and_20000_prunable_is_not_enough() -> None:
    result = POLICY.prune(_protect_case(40_000, 20_000), PROFILE, estimate, force=True)
    assert not result.fired
    assert result.details["scanned"] == 60_000
    assert result.details["prunable"] == 20_000
    assert "prunable 20,000 ≤ minimum 20,000" in result.reason


def test_one_token_more_than_the_minimum_prunes() -> None:
    items = _protect_case(40_000, 20_001)
    result = POLICY.prune(items, PROFILE, estimate, force=True)
    assert result.fired
    by_id = {c.id: c for c in full_changes(items, result)}
    assert by_id["old"].status is ItemStatus.PRUNED
    assert by_id["recent"].status is ItemStatus.KEPT
    assert result.items[3].message.text == PRUNE_MARKER
    assert by_id["old"].tokens_after == len(PRUNE_MARKER) // 4 + 4


def test_the_output_that_crosses_the_protected_budget_is_itself_pruned() -> None:
    result = POLICY.prune(_protect_case(40_001, 20_000), PROFILE, estimate, force=True)
    assert result.details["prunable"] == 60_001
    by_id = {c.id: c for c in result.changes}
    assert by_id["recent"].status is ItemStatus.PRUNED
    assert by_id["old"].status is ItemStatus.PRUNED


def test_everything_after_the_second_to_last_user_message_is_protected() -> None:
    items = _protect_case(40_001, 20_000)
    result = POLICY.prune(items, PROFILE, estimate, force=True)
    by_id = {c.id: c for c in full_changes(items, result)}
    assert by_id["after-B"].status is ItemStatus.KEPT
    assert by_id["after-C"].status is ItemStatus.KEPT
    assert result.details["user_turns_passed"] == 3


def test_the_marker_stops_the_scan() -> None:
    items = ctx(
        system(),
        user("u0"),
        assistant("a0"),
        tool("ancient", 90_000),
        assistant("a1"),
        Message(
            id="cleared",
            role=Role.TOOL,
            kind=MessageKind.TOOL_RESULT,
            parts=(Part(type=PartType.TOOL_RESULT, text=PRUNE_MARKER, call_id="x"),),
        ),
        assistant("a2"),
        tool("mid", 30_000),
        user("uB"),
        user("uC"),
    )
    result = POLICY.prune(items, PROFILE, estimate, force=True)
    assert result.details["stopped_at"] == "cleared"
    assert result.details["scanned"] == 30_000
    assert not result.fired
    without_marker = [i for i in items if i.id != "cleared"]
    assert POLICY.prune(without_marker, PROFILE, estimate, force=True).fired


def test_a_marker_inside_the_protected_turns_does_not_stop_the_scan() -> None:
    cleared = Message(
        id="cleared",
        role=Role.TOOL,
        kind=MessageKind.TOOL_RESULT,
        parts=(Part(type=PartType.TOOL_RESULT, text=PRUNE_MARKER),),
    )
    items = ctx(system(), user("u0"), tool("big", 70_000), user("uB"), cleared, user("uC"))
    plan = scan(items, PROFILE)
    assert plan.stopped_at is None
    assert plan.scanned == 70_000 and plan.prunable == 70_000


def test_prune_is_not_persisted_and_sufficient_prune_skips_compaction() -> None:
    items = _protect_case(40_000, 60_000, pad=40_000)
    # the total is over 142,800 and clearing 'old' brings it under
    assert sum(i.tokens for i in items) > 142_800
    summarizer = FakeSummarizer()
    results = POLICY.manage(items, PROFILE, estimate, summarizer)
    assert len(results) == 1
    (prune,) = results
    assert prune.fired and prune.details["persistent"] is False
    assert "for this request only" in prune.reason
    assert prune.tokens_after <= 142_800
    assert summarizer.calls == []


def test_prune_without_force_only_on_overflow() -> None:
    items = _protect_case(40_000, 30_000)
    assert sum(i.tokens for i in items) <= 142_800
    assert not POLICY.prune(items, PROFILE, estimate).fired
    assert POLICY.prune(items, PROFILE, estimate, force=True).fired


# -- compaction ----------------------------------------------------------------------------


def test_empty_summary_fails_and_returns_the_messages_unchanged() -> None:
    items = _sized(150_000)
    result = POLICY.compact(items, PROFILE, estimate, FakeSummarizer(""), force=True)
    assert not result.fired
    assert result.items == items
    assert "empty" in result.reason
    assert result.details["failed"] is True


def test_compaction_summarises_the_pruned_copy() -> None:
    items = _protect_case(40_000, 100_000, pad=150_000)
    summarizer = FakeSummarizer()
    prune, compact = POLICY.manage(items, PROFILE, estimate, summarizer)
    assert prune.fired
    sent = {m.id: m for m in summarizer.calls[0][0]}
    assert sent["old"].text == PRUNE_MARKER
    assert len(compact.items) == 2


def test_compact_without_force_follows_the_agent() -> None:
    below = _protect_case(40_000, 30_000)
    assert not POLICY.compact(below, PROFILE, estimate, FakeSummarizer()).fired
    pruning_suffices = _protect_case(40_000, 60_000, pad=40_000)
    result = POLICY.compact(pruning_suffices, PROFILE, estimate, FakeSummarizer())
    assert not result.fired and "pruning alone" in result.reason
    over = _protect_case(40_000, 100_000, pad=150_000)
    result = POLICY.compact(over, PROFILE, estimate, FakeSummarizer())
    assert result.fired and len(result.items) == 2
    by_id = {c.id: c for c in full_changes(over, result)}
    assert by_id["old"].status is ItemStatus.SUMMARIZED
    assert by_id["sys"].status is ItemStatus.KEPT


def test_compaction_of_two_messages_is_not_adopted_by_the_loop() -> None:
    items = ctx(system(), user("big", "b" * 600_000))
    result = POLICY.compact(items, PROFILE, estimate, FakeSummarizer(), force=True)
    assert result.fired and result.details["persistent"] is False


# -- middle-out truncation -----------------------------------------------------------------


def test_middle_out_measures_utf8_bytes_and_keeps_head_and_tail() -> None:
    assert middle_out("a" * 10_003, 2500, 4) is None  # 10,003 // 4 = 2,500: fits
    cut = middle_out("h" * 5_002 + "t" * 5_002, 2500, 4)
    assert cut is not None
    head, _, tail = cut.partition("\n\n...1 tokens truncated...\n\n")
    assert head == "h" * 5_000 and tail == "t" * 4 + "t" * 4_996
    # 2,501 three-byte characters are 7,503 bytes = 1,875 tokens: no truncation at 2,000
    assert middle_out("€" * 2_501, 2_000, 4) is None
    # at 1,000 tokens the 4,000 kept bytes cut characters, which are dropped
    cut = middle_out("€" * 2_501, 1_000, 4)
    assert cut is not None
    head, _, tail = cut.partition("\n\n...")
    assert head == "€" * 666 and tail.endswith("€" * 666)
    assert "...876 tokens truncated..." in cut  # (7,503 − 3,996) // 4


def test_admit_truncates_a_large_tool_output() -> None:
    context = ctx(system(), user("u"), assistant("a"))
    output = ContextItem(tool("big", 3_000), estimate(tool("big", 3_000)), 3)
    result = POLICY.admit(output, context, PROFILE, estimate)
    assert result is not None and result.fired
    assert [i.id for i in result.items] == ["big"]  # admit's result: the admitted output alone
    assert [c.status for c in result.changes] == [ItemStatus.TRUNCATED]
    assert (result.tokens_before, result.tokens_after) == (output.tokens, result.items[0].tokens)
    assert "...500 tokens truncated..." in result.items[-1].message.text
    small = ContextItem(tool("small", 2_500), 2_504, 3)
    assert POLICY.admit(small, context, PROFILE, estimate) is None
    assert (
        POLICY.admit(ContextItem(user("u2", "x" * 90_000), 1, 4), context, PROFILE, estimate)
        is None
    )


def test_truncate_every_tool_output_over_the_limit_once() -> None:
    items = ctx(system(), user("u"), tool("t1", 3_000), tool("t2", 100), tool("t3", 9_000))
    result = POLICY.truncate(items, PROFILE, estimate, force=True)
    assert [str(c.status) for c in full_changes(items, result)] == [
        "kept",
        "kept",
        "truncated",
        "kept",
        "truncated",
    ]
    again = POLICY.truncate(result.items, PROFILE, estimate, force=True)
    assert not again.fired  # already carries the marker


# -- properties ----------------------------------------------------------------------------

turn = st.one_of(
    st.just(("user", 0)),
    st.tuples(st.just("tool"), st.integers(min_value=16, max_value=30_000)),
)


def _conversation(shape: list[tuple[str, int]]) -> list[ContextItem]:
    messages: list[Message] = [system(), user("u-first")]
    for n, (kind, size) in enumerate(shape):
        if kind == "user":
            messages.append(user(f"u{n}"))
        else:
            messages.append(assistant(f"a{n}", f"c{n}"))
            messages.append(tool(f"t{n}", size))
    return ctx(*messages)


@settings(max_examples=60, deadline=None)
@given(st.lists(turn, max_size=14))
def test_prune_properties(shape: list[tuple[str, int]]) -> None:
    items = _conversation(shape)
    result = POLICY.prune(items, PROFILE, estimate, force=True)
    changes = full_changes(items, result)
    assert len(changes) == len(items) == len(result.items)
    assert result.tokens_after <= result.tokens_before
    assert result.tokens_after == sum(i.tokens for i in result.items)
    users = [i for i, item in enumerate(items) if item.message.role is Role.USER]
    boundary = users[-2] if len(users) >= 2 else 0
    for i, change in enumerate(changes):
        if i >= boundary:
            assert change.status is ItemStatus.KEPT
        assert change.status in (ItemStatus.KEPT, ItemStatus.PRUNED)
    again = POLICY.prune(result.items, PROFILE, estimate, force=True)
    assert not again.fired  # idempotent: the marker stops the second scan
    assert again.items == result.items


def stand_in(role: Role, tokens: int) -> ContextItem:
    """What replay puts first for context a log does not show (kind META)."""
    message = Message(
        id="__overhead__",
        role=role,
        kind=MessageKind.META,
        parts=(Part(type=PartType.TEXT, text="(not shown)"),),
    )
    return ContextItem(message, tokens)


def test_stand_ins_for_unseen_context() -> None:
    # a log without messages: the stand-in is the conversation, summarised; the count drops
    (prune, compact) = POLICY.manage(
        [stand_in(Role.USER, 150_000)], PROFILE, estimate, FakeSummarizer()
    )
    assert not prune.fired and prune.details["user_turns_passed"] == 0
    assert [i.message.kind for i in compact.items] == [MessageKind.SUMMARY]
    assert compact.details["persistent"] is True
    # unseen system prompt and tool schemas stay beside the real system prompt
    items = [stand_in(Role.SYSTEM, 150_000), *ctx(system(), user("u"), user("v"))]
    result = POLICY.compact(items, PROFILE, estimate, FakeSummarizer(), force=True)
    assert [i.id for i in result.items][:2] == ["__overhead__", "sys"]
    assert result.details["persistent"] is True
