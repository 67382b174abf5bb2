"""ctx-inspect's own generic policy, and the building blocks the agent policies share."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctx_inspect.agents.generic.policy import (
    KEEP_RECENT_MESSAGES,
    POLICY,
    PROTECT_RATIO,
    SUMMARY_HEADER,
)
from ctx_inspect.agents.generic.profile import GenericProfile
from ctx_inspect.core.model import Message, MessageKind, Part, PartType, Role
from ctx_inspect.core.policies import policy_for
from ctx_inspect.core.policies.base import (
    Action,
    ContextItem,
    ItemStatus,
    full_changes,
)
from ctx_inspect.core.policies.blocks import (
    CLEARED_MARKER,
    chain,
    clear_parts,
    in_place,
    is_tool_output,
    is_user_turn,
    rebuild,
)

PROFILE = GenericProfile()


def estimate(message: Message) -> int:
    return PROFILE.estimate(message)


def text(role: Role, mid: str, body: str = "hello") -> Message:
    return Message(id=mid, role=role, parts=(Part(type=PartType.TEXT, text=body),))


def call(mid: str, call_id: str) -> Message:
    return Message(
        id=mid,
        role=Role.ASSISTANT,
        kind=MessageKind.TOOL_CALL,
        parts=(Part(type=PartType.TOOL_CALL, tool_name="run", call_id=call_id, arguments="{}"),),
    )


def output(mid: str, tokens: int, call_id: str | None = None) -> Message:
    """A tool result the exact-without-tokenizer rule estimates at ``tokens`` + 3."""
    return Message(
        id=mid,
        role=Role.TOOL,
        kind=MessageKind.TOOL_RESULT,
        parts=(Part(type=PartType.TOOL_RESULT, text="z" * (tokens * 4), call_id=call_id or mid),),
    )


def ctx(*messages: Message) -> list[ContextItem]:
    return [ContextItem(m, estimate(m), i) for i, m in enumerate(messages)]


class FakeSummarizer:
    def __init__(self, summary: str = "earlier: set up the repo") -> None:
        self.summary = summary
        self.calls: list[tuple[list[Message], int]] = []

    def summarize(self, messages: Sequence[Message], budget_tokens: int) -> str:
        self.calls.append((list(messages), budget_tokens))
        return self.summary


def session(outputs: Sequence[int], system_tokens: int = 100) -> list[ContextItem]:
    messages = [text(Role.SYSTEM, "sys", "s" * (system_tokens * 4)), text(Role.USER, "u")]
    for n, size in enumerate(outputs):
        messages.append(call(f"a{n}", f"c{n}"))
        messages.append(output(f"t{n}", size, f"c{n}"))
    return ctx(*messages)


def test_registered() -> None:
    assert policy_for("generic") is POLICY


def test_manage_acts_only_strictly_above_the_threshold() -> None:
    assert PROFILE.threshold() == 115_200
    base = sum(i.tokens for i in session([10_000] * 4, system_tokens=0))
    at = session([10_000] * 4, system_tokens=115_200 - base)
    assert sum(i.tokens for i in at) == 115_200
    assert POLICY.manage(at, PROFILE, estimate, FakeSummarizer()) == []
    over = session([10_000] * 4, system_tokens=115_201 - base)
    results = POLICY.manage(over, PROFILE, estimate, FakeSummarizer())
    assert results[0].action is Action.PRUNE and results[0].fired


def test_prune_clears_oldest_first_down_to_the_warning_level() -> None:
    items = session([20_000] * 6, system_tokens=5_000)  # ~125,000 tokens
    result = POLICY.prune(items, PROFILE, estimate)
    assert result.fired
    cleared = [c.id for c in result.changes if c.status is ItemStatus.PRUNED]
    assert cleared == ["t0", "t1"]  # two suffice to go under 89,600
    assert result.details["target"] == PROFILE.warning_threshold() == 89_600
    assert result.tokens_after < 89_600
    assert result.items[3].message.parts[0].text == CLEARED_MARKER


def test_prune_never_touches_the_protected_recent_outputs() -> None:
    budget = int(PROFILE.limit_parts().effective * PROTECT_RATIO)
    assert budget == 32_000
    items = session([60_000, 15_000, 15_000], system_tokens=40_000)
    result = POLICY.prune(items, PROFILE, estimate, force=True)
    status = {c.id: c.status for c in full_changes(items, result)}
    assert status["t0"] is ItemStatus.PRUNED
    assert status["t1"] is ItemStatus.KEPT and status["t2"] is ItemStatus.KEPT
    assert result.details["protected_tokens"] == 2 * (15_000 + 3)
    # below the threshold nothing happens unless forced
    assert not POLICY.prune(session([1_000]), PROFILE, estimate).fired


def test_compaction_keeps_system_summary_and_the_last_messages() -> None:
    items = session([1_000] * 5)
    summarizer = FakeSummarizer()
    result = POLICY.compact(items, PROFILE, estimate, summarizer, force=True)
    ids = [i.id for i in result.items]
    assert KEEP_RECENT_MESSAGES == 4
    assert ids[0] == "sys" and ids[2:] == ["a3", "t3", "a4", "t4"]
    summary = result.items[1].message
    assert summary.kind is MessageKind.SUMMARY
    assert summary.text == SUMMARY_HEADER + "earlier: set up the repo"
    assert [m.id for m in summarizer.calls[0][0]] == ["u", "a0", "t0", "a1", "t1", "a2", "t2"]


def test_the_kept_tail_never_starts_with_an_orphan_tool_result() -> None:
    messages = [
        text(Role.SYSTEM, "sys"),
        text(Role.USER, "u"),
        Message(
            id="a",
            role=Role.ASSISTANT,
            parts=tuple(
                Part(type=PartType.TOOL_CALL, tool_name="run", call_id=f"c{k}") for k in range(4)
            ),
        ),
        *(output(f"t{k}", 10, f"c{k}") for k in range(4)),
    ]
    result = POLICY.compact(ctx(*messages), PROFILE, estimate, FakeSummarizer(), force=True)
    assert [i.id for i in result.items][2:] == ["a", "t0", "t1", "t2", "t3"]


def test_compaction_needs_something_to_summarise_and_a_summary() -> None:
    short = ctx(text(Role.SYSTEM, "s"), text(Role.USER, "u"), text(Role.ASSISTANT, "a"))
    assert not POLICY.compact(short, PROFILE, estimate, FakeSummarizer(), force=True).fired
    items = session([1_000] * 5)
    failed = POLICY.compact(items, PROFILE, estimate, FakeSummarizer(""), force=True)
    assert not failed.fired and failed.items == items
    assert not POLICY.compact(items, PROFILE, estimate, FakeSummarizer()).fired


def test_no_truncation() -> None:
    items = session([100_000])
    assert POLICY.admit(items[-1], items[:-1], PROFILE, estimate) is None
    assert not POLICY.truncate(items, PROFILE, estimate, force=True).fired


# -- building blocks -----------------------------------------------------------------------


def test_tool_outputs_and_user_turns() -> None:
    anthropic_results = Message(
        id="r",
        role=Role.USER,
        kind=MessageKind.TOOL_RESULT,
        parts=(Part(type=PartType.TOOL_RESULT, text="x"),),
    )
    assert is_tool_output(anthropic_results) and not is_user_turn(anthropic_results)
    assert is_tool_output(output("t", 1)) and is_user_turn(text(Role.USER, "u"))
    assert not is_tool_output(text(Role.ASSISTANT, "a"))
    stand_in = Message(id="__overhead__", role=Role.USER, kind=MessageKind.META)
    assert not is_user_turn(stand_in)


def test_clear_parts_drops_the_cleared_calls_images_only() -> None:
    message = Message(
        id="m",
        role=Role.USER,
        kind=MessageKind.TOOL_RESULT,
        parts=(
            Part(type=PartType.TOOL_RESULT, text="a", call_id="1"),
            Part(type=PartType.IMAGE, call_id="1"),
            Part(type=PartType.TOOL_RESULT, text="b", call_id="2"),
            Part(type=PartType.IMAGE, call_id="2"),
        ),
    )
    cleared = clear_parts(message, [0], "gone")
    assert [(p.type, p.text, p.call_id) for p in cleared.parts] == [
        (PartType.TOOL_RESULT, "gone", "1"),
        (PartType.TOOL_RESULT, "b", "2"),
        (PartType.IMAGE, "", "2"),
    ]
    assert message.parts[0].text == "a"  # inputs are never mutated


def test_rebuild_reports_what_it_did_not_keep_then_what_it_added() -> None:
    items = ctx(text(Role.SYSTEM, "s"), text(Role.USER, "u"), output("t", 100))
    added = text(Role.USER, "new", "summary")
    result = rebuild(
        Action.COMPACT,
        "x",
        items,
        [0, (2, text(Role.TOOL, "t", "short")), added],
        estimate,
        reason="r",
        details={},
        modified=ItemStatus.TRUNCATED,
    )
    assert [(c.id, c.status) for c in result.changes] == [
        ("u", ItemStatus.SUMMARIZED),
        ("t", ItemStatus.TRUNCATED),
        ("new", ItemStatus.ADDED),
    ]
    assert [(c.id, c.status) for c in full_changes(items, result)] == [
        ("s", ItemStatus.KEPT),
        ("u", ItemStatus.SUMMARIZED),
        ("t", ItemStatus.TRUNCATED),
        ("new", ItemStatus.ADDED),
    ]
    assert result.tokens_before == sum(i.tokens for i in items)
    assert result.tokens_after == sum(i.tokens for i in result.items)
    assert result.items[1].index == 2 and result.items[2].index is None


def test_chain_composes_a_prune_and_a_compaction() -> None:
    items = ctx(text(Role.SYSTEM, "s"), output("t", 100), text(Role.USER, "u"))
    first = in_place(
        Action.PRUNE,
        "x",
        items,
        {1: text(Role.TOOL, "t", "cleared")},
        estimate,
        reason="p",
        details={},
    )
    second = rebuild(
        Action.COMPACT,
        "x",
        first.items,
        [0, 1, text(Role.USER, "sum")],
        estimate,
        reason="c",
        details={},
    )
    both = chain(first, second, action=Action.COMPACT, reason="both", details={})
    assert [(c.id, c.status) for c in full_changes(items, both)] == [
        ("s", ItemStatus.KEPT),
        ("t", ItemStatus.PRUNED),
        ("u", ItemStatus.SUMMARIZED),
        ("sum", ItemStatus.ADDED),
    ]
    assert [c.id for c in both.changes] == ["t", "u", "sum"]  # the kept "s" is not listed
    assert both.changes[0].tokens_before == items[1].tokens
    assert both.tokens_before == first.tokens_before and both.tokens_after == second.tokens_after
    with pytest.raises(ValueError):
        chain(second, first, action=Action.COMPACT, reason="", details={})


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=20, max_value=40_000), max_size=10))
def test_prune_properties(outputs: list[int]) -> None:
    items = session(outputs, system_tokens=60_000)
    result = POLICY.prune(items, PROFILE, estimate, force=True)
    assert result.tokens_after <= result.tokens_before
    protected = 0
    for change, item in reversed(list(zip(full_changes(items, result), items, strict=True))):
        if not is_tool_output(item.message):
            continue
        if protected + item.tokens > 32_000:
            break
        protected += item.tokens
        assert change.status is ItemStatus.KEPT
    assert not POLICY.prune(result.items, PROFILE, estimate, force=True).fired
