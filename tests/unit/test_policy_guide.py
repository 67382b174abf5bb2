"""The guide's generic recipe (seed 001): 70 / 85 / 95 % of 180,000, keep 5 then 2, compaction."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from ctx_inspect.agents.guide.policy import POLICY, PRUNE_MARKER, SUMMARY_HEADER, middle_out
from ctx_inspect.agents.guide.profile import GuideProfile
from ctx_inspect.core.model import Message, MessageKind, Part, PartType, Role
from ctx_inspect.core.policies import policy_for
from ctx_inspect.core.policies.base import (
    Action,
    ContextItem,
    ItemChange,
    ItemStatus,
    full_changes,
)

PROFILE = GuideProfile()


def estimate(message: Message) -> int:
    return PROFILE.estimate(message)


def sized(tokens: int) -> str:
    """A text the guide estimates (len // 4 + 1) at exactly ``tokens``."""
    return "x" * ((tokens - 1) * 4)


def msg(role: Role, mid: str, tokens: int = 5) -> Message:
    return Message(id=mid, role=role, parts=(Part(type=PartType.TEXT, text=sized(tokens)),))


def tool(mid: str, tokens: int = 1_000) -> Message:
    return Message(
        id=mid,
        role=Role.TOOL,
        kind=MessageKind.TOOL_RESULT,
        parts=(Part(type=PartType.TOOL_RESULT, text=sized(tokens), call_id=mid),),
    )


def ctx(*messages: Message) -> list[ContextItem]:
    return [ContextItem(m, estimate(m), i) for i, m in enumerate(messages)]


def conversation(system_tokens: int, outputs: Sequence[int]) -> list[ContextItem]:
    messages = [msg(Role.SYSTEM, "sys", system_tokens), msg(Role.USER, "task")]
    for n, size in enumerate(outputs):
        messages.append(msg(Role.ASSISTANT, f"a{n}"))
        messages.append(tool(f"t{n}", size))
    return ctx(*messages)


def with_total(tokens: int, outputs: Sequence[int]) -> list[ContextItem]:
    """A conversation whose total is exactly ``tokens`` (the system prompt takes the rest)."""
    base = conversation(5, outputs)
    return conversation(5 + tokens - sum(i.tokens for i in base), outputs)


class FakeSummarizer:
    def __init__(self, summary: str = "summary") -> None:
        self.summary = summary
        self.calls: list[tuple[list[Message], int]] = []

    def summarize(self, messages: Sequence[Message], budget_tokens: int) -> str:
        self.calls.append((list(messages), budget_tokens))
        return self.summary


def status_of(changes: Sequence[ItemChange], mid: str) -> ItemStatus:
    return next(c.status for c in changes if c.id == mid)


def test_registered() -> None:
    assert policy_for("guide") is POLICY


def test_the_thresholds_come_from_the_profile() -> None:
    assert (PROFILE.prune_above(), PROFILE.threshold(), PROFILE.critical_above()) == (
        125_999,
        153_000,
        171_000,
    )


def test_stage_one_starts_strictly_above_70_percent() -> None:
    outputs = [1_000] * 8
    assert POLICY.manage(with_total(125_999, outputs), PROFILE, estimate, FakeSummarizer()) == []
    results = POLICY.manage(with_total(126_000, outputs), PROFILE, estimate, FakeSummarizer())
    assert [r.details["stage"] for r in results] == ["stage 1"]


def test_stage_one_keeps_the_last_five_tool_outputs() -> None:
    items = with_total(130_000, [1_000] * 8)
    (result,) = POLICY.manage(items, PROFILE, estimate, FakeSummarizer())
    pruned = [c.id for c in result.changes if c.status is ItemStatus.PRUNED]
    assert pruned == ["t0", "t1", "t2"]
    cleared = next(i for i in result.items if i.id == "t0")
    assert cleared.message.text == PRUNE_MARKER
    assert cleared.message.parts[0].call_id == "t0"
    assert cleared.tokens == len(PRUNE_MARKER) // 4 + 1
    assert result.tokens_after == result.tokens_before - 3 * (1_000 - cleared.tokens)


def test_stage_two_keeps_two_when_still_over_85_percent() -> None:
    # stage 1 clears t0 (small): still above 153,000, so stage 2 keeps only the last two
    items = with_total(160_000, [100, 20_000, 20_000, 20_000, 20_000, 20_000])
    results = POLICY.manage(items, PROFILE, estimate, FakeSummarizer())
    assert [r.details["stage"] for r in results] == ["stage 1", "stage 2"]
    second = results[1]
    assert [c.id for c in second.changes if c.status is ItemStatus.PRUNED] == ["t1", "t2", "t3"]
    assert second.tokens_after <= 153_000


def test_compaction_keeps_system_summary_and_the_last_four() -> None:
    items = with_total(170_000, [1_000] * 6)
    summarizer = FakeSummarizer("all done so far")
    results = POLICY.manage(items, PROFILE, estimate, summarizer)
    assert [r.action for r in results] == [Action.PRUNE, Action.PRUNE, Action.COMPACT]
    compact = results[-1]
    ids = [i.id for i in compact.items]
    assert ids[0] == "sys"
    assert ids[2:] == ["a4", "t4", "a5", "t5"]
    summary = compact.items[1].message
    assert summary.kind is MessageKind.SUMMARY and summary.role is Role.USER
    assert summary.text == SUMMARY_HEADER + "all done so far"
    sent = [m.id for m in summarizer.calls[0][0]]
    assert sent == ["task", "a0", "t0", "a1", "t1", "a2", "t2", "a3", "t3"]
    assert compact.changes[-1].status is ItemStatus.ADDED
    assert all(r.details["critical"] is False for r in results)


def test_the_critical_threshold_is_reported_but_changes_nothing() -> None:
    items = with_total(172_000, [1_000] * 6)
    results = POLICY.manage(items, PROFILE, estimate, FakeSummarizer())
    assert [r.action for r in results] == [Action.PRUNE, Action.PRUNE, Action.COMPACT]
    assert all(r.details["critical"] is True for r in results)


def test_a_system_message_in_the_tail_is_not_repeated() -> None:
    items = ctx(
        msg(Role.SYSTEM, "sys"),
        msg(Role.USER, "u"),
        msg(Role.ASSISTANT, "a"),
        msg(Role.SYSTEM, "late-sys"),
        msg(Role.USER, "u2"),
        msg(Role.ASSISTANT, "a2"),
    )
    result = POLICY.compact(items, PROFILE, estimate, FakeSummarizer(), force=True)
    ids = [i.id for i in result.items]
    assert ids[:2] == ["sys", "late-sys"]
    assert ids[3:] == ["a", "u2", "a2"]
    assert ids.count("late-sys") == 1
    nothing = POLICY.compact(items[:4], PROFILE, estimate, FakeSummarizer(), force=True)
    assert not nothing.fired


def test_compact_without_force_prunes_first_as_the_recipe_does() -> None:
    below = with_total(150_000, [1_000] * 6)
    assert not POLICY.compact(below, PROFILE, estimate, FakeSummarizer()).fired
    over = with_total(170_000, [1_000] * 6)
    result = POLICY.compact(over, PROFILE, estimate, FakeSummarizer())
    assert result.fired
    assert status_of(full_changes(over, result), "t5") is ItemStatus.KEPT
    assert status_of(full_changes(over, result), "t0") is ItemStatus.SUMMARIZED


def test_manual_prune() -> None:
    small = with_total(10_000, [1_000] * 7)
    assert not POLICY.prune(small, PROFILE, estimate).fired
    forced = POLICY.prune(small, PROFILE, estimate, force=True)
    assert [c.id for c in forced.changes if c.status is ItemStatus.PRUNED] == ["t0", "t1"]
    both = POLICY.prune(with_total(160_000, [100, *[20_000] * 5]), PROFILE, estimate)
    assert [c.id for c in both.changes if c.status is ItemStatus.PRUNED] == [
        "t0",
        "t1",
        "t2",
        "t3",
    ]


def test_middle_out_marker_and_halves() -> None:
    assert middle_out("a" * 50_000, 50_000) is None
    cut = middle_out("h" * 30_000 + "t" * 30_001, 50_000)
    assert cut is not None
    head, marker, tail = cut.split("\n\n")
    assert marker == "[... 10001 bytes truncated ...]"
    assert head == "h" * 24_950 and tail == "t" * 24_950


def test_admit_and_truncate() -> None:
    context = ctx(msg(Role.SYSTEM, "sys"), msg(Role.USER, "u"))
    big = tool("big", 20_000)  # 79,996 characters
    result = POLICY.admit(ContextItem(big, estimate(big)), context, PROFILE, estimate)
    assert result is not None
    assert [i.id for i in result.items] == ["big"]  # admit's result: the admitted output alone
    assert "[... 29996 bytes truncated ...]" in result.items[-1].message.text
    assert [c.status for c in result.changes] == [ItemStatus.TRUNCATED]
    fits = tool("fits", 12_500)  # 49,996 characters
    assert POLICY.admit(ContextItem(fits, estimate(fits)), context, PROFILE, estimate) is None
    items = ctx(msg(Role.SYSTEM, "sys"), big, fits)
    once = POLICY.truncate(items, PROFILE, estimate, force=True)
    assert [c.status for c in full_changes(items, once)] == [
        ItemStatus.KEPT,
        ItemStatus.TRUNCATED,
        ItemStatus.KEPT,
    ]
    assert not POLICY.truncate(once.items, PROFILE, estimate).fired


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=10, max_value=40_000), max_size=12))
def test_forced_prune_properties(outputs: list[int]) -> None:
    items = conversation(50, outputs)
    result = POLICY.prune(items, PROFILE, estimate, force=True)
    assert result.tokens_after <= result.tokens_before
    changes = full_changes(items, result)
    assert len(changes) == len(items)
    tools = [c for c in changes if c.id.startswith("t")]
    assert all(c.status is ItemStatus.KEPT for c in tools[-PROFILE.keep_last_second :])
    assert all(c.status is ItemStatus.KEPT for c in changes if not c.id.startswith("t"))
    again = POLICY.prune(result.items, PROFILE, estimate, force=True)
    if not PROFILE.over_threshold(result.tokens_after):
        assert not again.fired  # keeping the last five twice changes nothing
