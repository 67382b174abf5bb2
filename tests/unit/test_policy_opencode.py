"""OpenCode's policy (reference 6.1, 6.2): part-level prune after the loop, compaction at usable."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.core.model import Message, MessageKind, Part, PartType, Role
from inspector.core.policies import policy_for
from inspector.core.policies.base import (
    Action,
    ContextItem,
    ItemChange,
    ItemStatus,
    full_changes,
)
from inspector.core.policies.opencode import CONTINUE_TEXT, POLICY, OpenCodePolicy, scan
from inspector.core.profiles import OpenCodeProfile

PROFILE = OpenCodeProfile()
MARKER = "[Old tool result content cleared]"


def estimate(message: Message) -> int:
    return PROFILE.estimate(message)


def user(mid: str, body: str = "please") -> Message:
    return Message(id=mid, role=Role.USER, parts=(Part(type=PartType.TEXT, text=body),))


def assistant(mid: str, body: str = "ok", kind: MessageKind = MessageKind.MESSAGE) -> Message:
    return Message(
        id=mid, role=Role.ASSISTANT, kind=kind, parts=(Part(type=PartType.TEXT, text=body),)
    )


def result(
    tokens: int, name: str = "bash", call: str = "c", error: bool = False, text: str | None = None
) -> Part:
    """A tool-result part whose estimate (round(len/4)) is ``tokens``."""
    return Part(
        type=PartType.TOOL_RESULT,
        text="o" * (tokens * 4) if text is None else text,
        tool_name=name,
        call_id=call,
        is_error=error,
    )


def tool(mid: str, *parts: Part) -> Message:
    return Message(id=mid, role=Role.TOOL, kind=MessageKind.TOOL_RESULT, parts=parts)


def ctx(*messages: Message) -> list[ContextItem]:
    return [ContextItem(m, estimate(m), i) for i, m in enumerate(messages)]


def protected_tail() -> list[Message]:
    """Two user turns whose outputs are always protected."""
    return [user("uB"), tool("after-B", result(30_000, call="b")), user("uC"), assistant("last")]


class FakeSummarizer:
    def __init__(self, summary: str = "## Goal\nship it") -> None:
        self.summary = summary
        self.calls: list[tuple[list[Message], int]] = []

    def summarize(self, messages: Sequence[Message], budget_tokens: int) -> str:
        self.calls.append((list(messages), budget_tokens))
        return self.summary


def by_id(changes: Sequence[ItemChange]) -> dict[str, ItemChange]:
    return {c.id: c for c in changes}


def test_registered() -> None:
    assert policy_for("opencode") is POLICY


# -- prune ---------------------------------------------------------------------------------


def test_protected_budget_is_strict_and_the_minimum_is_strict() -> None:
    items = ctx(
        user("uA"),
        tool("old", result(20_000, call="o")),
        tool("recent", result(40_000, call="r")),
        *protected_tail(),
    )
    found = POLICY.prune(items, PROFILE, estimate)
    assert (found.details["total"], found.details["pruned"]) == (60_000, 20_000)
    assert not found.fired and "20,000 ≤ minimum 20,000" in found.reason
    crossing = ctx(
        user("uA"),
        tool("old", result(20_000, call="o")),
        tool("recent", result(40_001, call="r")),
        *protected_tail(),
    )
    pruned = POLICY.prune(crossing, PROFILE, estimate)
    assert pruned.fired
    changes = by_id(full_changes(crossing, pruned))
    assert changes["recent"].status is ItemStatus.PRUNED  # it took the total past 40,000
    assert changes["old"].status is ItemStatus.PRUNED
    assert changes["after-B"].status is ItemStatus.KEPT
    assert pruned.items[1].message.parts[0].text == MARKER


def test_skill_outputs_are_neither_counted_nor_pruned() -> None:
    items = ctx(
        user("uA"),
        tool("old", result(30_000, call="o")),
        tool("skill", result(50_000, name="skill", call="s")),
        tool("recent", result(40_000, call="r")),
        *protected_tail(),
    )
    pruned = POLICY.prune(items, PROFILE, estimate)
    assert pruned.details["total"] == 70_000
    assert pruned.details["skipped_protected"] == 1
    changes = by_id(full_changes(items, pruned))
    assert changes["skill"].status is ItemStatus.KEPT
    assert changes["old"].status is ItemStatus.PRUNED
    custom = PROFILE.model_copy(update={"protected_tools": ()})
    assert by_id(full_changes(items, POLICY.prune(items, custom, estimate)))["skill"].status is (
        ItemStatus.PRUNED
    )


def test_an_assistant_summary_stops_the_scan() -> None:
    before = [user("u0"), tool("ancient", result(90_000, call="a"))]
    after = [user("uA"), tool("recent", result(35_000, call="r")), *protected_tail()]
    summary = assistant("summary", "what we did", MessageKind.SUMMARY)
    stopped = POLICY.prune(ctx(*before, summary, *after), PROFILE, estimate)
    assert stopped.details["stopped_by"] == "summary"
    assert stopped.details["total"] == 35_000 and not stopped.fired
    # a user-role summary (Claude Code style) does not stop OpenCode's scan
    user_summary = Message(
        id="s",
        role=Role.USER,
        kind=MessageKind.SUMMARY,
        parts=(Part(type=PartType.TEXT, text="summary"),),
    )
    assert POLICY.prune(ctx(*before, user_summary, *after), PROFILE, estimate).fired


def test_an_already_compacted_part_stops_the_scan() -> None:
    items = ctx(
        user("uA"),
        tool("ancient", result(90_000, call="a")),
        tool("cleared", result(0, call="x", text=MARKER)),
        tool("recent", result(35_000, call="r")),
        *protected_tail(),
    )
    plan = scan(items, PROFILE)
    assert plan.stopped_by == "compacted" and plan.total == 35_000
    assert not POLICY.prune(items, PROFILE, estimate).fired
    without = [i for i in items if i.id != "cleared"]
    assert POLICY.prune(without, PROFILE, estimate).fired


def test_only_completed_outputs_count() -> None:
    items = ctx(
        user("uA"),
        tool("old", result(25_000, call="o")),
        tool("failed", result(90_000, call="f", error=True)),
        tool("recent", result(40_000, call="r")),
        *protected_tail(),
    )
    pruned = POLICY.prune(items, PROFILE, estimate)
    assert pruned.details["total"] == 65_000
    changes = by_id(full_changes(items, pruned))
    assert changes["failed"].status is ItemStatus.KEPT
    assert changes["old"].status is ItemStatus.PRUNED


def test_parts_are_the_unit_newest_first() -> None:
    batch = Message(
        id="batch",
        role=Role.USER,
        kind=MessageKind.TOOL_RESULT,
        parts=(
            result(30_000, call="p1"),
            Part(type=PartType.IMAGE, call_id="p1", media_type="image/png", data_bytes=9),
            result(30_000, call="p2"),
            result(25_000, call="p3"),
        ),
    )
    items = ctx(user("uA"), batch, *protected_tail())
    pruned = POLICY.prune(items, PROFILE, estimate)
    # newest first: p3 (25,000) and p2 (55,000 > 40,000: queued), then p1
    assert pruned.details["pruned"] == 60_000
    parts = pruned.items[1].message.parts
    assert [p.text == MARKER for p in parts] == [True, True, False]
    assert all(p.type is PartType.TOOL_RESULT for p in parts)  # p1's image went with it
    assert full_changes(items, pruned)[1].status is ItemStatus.PRUNED


def test_the_tool_result_carrier_is_not_a_user_turn() -> None:
    items = ctx(
        user("uA"),
        tool("old", result(70_000, call="o")),
        Message(
            id="anthropic-results",
            role=Role.USER,
            kind=MessageKind.TOOL_RESULT,
            parts=(result(10, call="z"),),
        ),
        user("uC"),
    )
    assert scan(items, PROFILE).turns == 2


def test_prune_setting_and_finish() -> None:
    items = ctx(
        user("uA"),
        tool("old", result(30_000, call="o")),
        tool("recent", result(40_000, call="r")),
        *protected_tail(),
    )
    (at_end,) = OpenCodePolicy().finish(items, PROFILE, estimate)
    assert at_end.fired and at_end.action is Action.PRUNE
    off = PROFILE.model_copy(update={"prune": False})
    assert OpenCodePolicy().finish(items, off, estimate) == []
    assert not POLICY.prune(items, off, estimate).fired
    assert POLICY.prune(items, off, estimate, force=True).fired
    # manage never prunes, even far over the protected budget
    assert POLICY.manage(items, PROFILE, estimate, FakeSummarizer()) == []


# -- compaction ----------------------------------------------------------------------------


def _sized(tokens: int) -> list[ContextItem]:
    """[system, user, assistant] totalling ``tokens`` (the system prompt takes the rest)."""
    rest = [user("u1", "hi"), assistant("a1")]
    room = tokens - sum(estimate(m) for m in rest)
    pad = Message(
        id="sys", role=Role.SYSTEM, parts=(Part(type=PartType.TEXT, text="s" * room * 4),)
    )
    items = ctx(pad, *rest)
    assert sum(i.tokens for i in items) == tokens
    return items


def test_overflow_when_the_count_reaches_usable() -> None:
    assert PROFILE.usable() == 168_000
    summarizer = FakeSummarizer()
    assert POLICY.manage(_sized(167_999), PROFILE, estimate, summarizer) == []
    items = _sized(168_000)
    (compaction,) = POLICY.manage(items, PROFILE, estimate, summarizer)
    assert compaction.fired and compaction.details["auto"] is True
    roles = [(i.message.role, i.message.kind) for i in compaction.items]
    assert roles == [
        (Role.SYSTEM, MessageKind.MESSAGE),
        (Role.USER, MessageKind.MESSAGE),
        (Role.ASSISTANT, MessageKind.SUMMARY),
        (Role.USER, MessageKind.MESSAGE),
    ]
    assert compaction.items[1].message.text == "What did we do so far?"
    assert compaction.items[2].message.text == "## Goal\nship it"
    assert compaction.items[3].message.text == CONTINUE_TEXT
    assert [c.status for c in full_changes(items, compaction)] == [
        ItemStatus.KEPT,
        ItemStatus.SUMMARIZED,
        ItemStatus.SUMMARIZED,
        ItemStatus.ADDED,
        ItemStatus.ADDED,
        ItemStatus.ADDED,
    ]
    assert summarizer.calls[0][1] == 32_000  # the model's max output
    assert [m.id for m in summarizer.calls[0][0]] == ["u1", "a1"]


def test_manual_compaction_has_no_continue_text_and_auto_off_never_compacts() -> None:
    manual = POLICY.compact(_sized(1_000), PROFILE, estimate, FakeSummarizer(), force=True)
    assert manual.fired and manual.items[-1].message.kind is MessageKind.SUMMARY
    assert CONTINUE_TEXT not in [i.message.text for i in manual.items]
    off = PROFILE.model_copy(update={"auto": False})
    over = _sized(170_000)
    assert POLICY.manage(over, off, estimate, FakeSummarizer()) == []
    assert "auto is off" in POLICY.compact(over, off, estimate, FakeSummarizer()).reason
    assert POLICY.compact(over, PROFILE, estimate, FakeSummarizer()).fired
    assert not POLICY.compact(_sized(1_000), PROFILE, estimate, FakeSummarizer()).fired


def test_empty_summary_leaves_the_context() -> None:
    items = _sized(170_000)
    failed = POLICY.compact(items, PROFILE, estimate, FakeSummarizer(""), force=True)
    assert not failed.fired and failed.items == items


def test_no_truncation_modelled() -> None:
    items = ctx(user("u"), tool("t", result(100_000)))
    assert POLICY.admit(items[1], items[:1], PROFILE, estimate) is None
    assert not POLICY.truncate(items, PROFILE, estimate, force=True).fired


# -- properties ----------------------------------------------------------------------------

step = st.one_of(
    st.just(("user", 0, "")),
    st.tuples(
        st.just("tool"),
        st.integers(min_value=8, max_value=30_000),
        st.sampled_from(["bash", "read", "skill"]),
    ),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(step, max_size=16))
def test_prune_properties(shape: list[tuple[str, int, str]]) -> None:
    messages: list[Message] = [user("u-first")]
    for n, (kind, size, name) in enumerate(shape):
        if kind == "user":
            messages.append(user(f"u{n}"))
        else:
            messages.append(tool(f"t{n}", result(size, name=name, call=f"c{n}")))
    items = ctx(*messages)
    pruned = POLICY.prune(items, PROFILE, estimate, force=True)
    assert pruned.tokens_after <= pruned.tokens_before
    users = [i for i, m in enumerate(messages) if m.role is Role.USER]
    boundary = users[-2] if len(users) >= 2 else 0
    for i, change in enumerate(full_changes(items, pruned)):
        if i > boundary or messages[i].tool_name == "skill":
            assert change.status is ItemStatus.KEPT
    again = POLICY.prune(pruned.items, PROFILE, estimate, force=True)
    assert not again.fired
