"""netdata ai-agent's policy: the tool preflight, the turn preflight, the size cap (ref 2.4)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctx_inspect.agents.aiagent.guard import TOOL_NO_OUTPUT, ContextGuard, GuardTargetConfig
from ctx_inspect.agents.aiagent.policy import (
    POLICY,
    _stub_tokens,
    _tool_output_tokens,
    guard_for_items,
)
from ctx_inspect.agents.aiagent.profile import AiAgentProfile
from ctx_inspect.agents.aiagent.truncation import truncate_to_bytes
from ctx_inspect.agents.goagent.profile import GoAgentProfile
from ctx_inspect.core.model import GuardStatus, Message, MessageKind, Part, PartType, Role
from ctx_inspect.core.policies.base import Action, ContextItem, ItemStatus, Policy, full_changes
from ctx_inspect.errors import ConfigError

_: Policy = POLICY  # the module satisfies the policy contract

# 200k window, 50k output: limit 141,808 (the reference's Anthropic target). No size cap.
SONNET = AiAgentProfile(context_window=200_000, max_output_tokens=50_000, tool_response_max_bytes=0)
PROVIDER, MODEL = "anthropic", "claude-sonnet-4-5"


class NoSummary:
    def summarize(self, messages: Sequence[Message], budget_tokens: int) -> str:
        raise AssertionError("ai-agent never summarizes")


def chars4(message: Message) -> int:
    """A simple stand-in for the agent's estimate: ceil(characters / 4)."""
    return -(-len(message.text) // 4)


def msg(mid: str, role: Role, text: str) -> Message:
    if role is Role.TOOL:
        part = Part(type=PartType.TOOL_RESULT, text=text, tool_name="fs__read", call_id=mid)
        return Message(id=mid, role=role, kind=MessageKind.TOOL_RESULT, parts=(part,))
    return Message(id=mid, role=role, parts=(Part(type=PartType.TEXT, text=text),))


def it(mid: str, role: Role, tokens: int, text: str = "") -> ContextItem:
    return ContextItem(msg(mid, role, text or f"{mid} text"), tokens)


def conversation(*tool_tokens: int) -> list[ContextItem]:
    """system + user, one assistant turn, then tool outputs of the given sizes."""
    items = [it("s", Role.SYSTEM, 2_000), it("u", Role.USER, 1_000), it("a", Role.ASSISTANT, 500)]
    items += [it(f"t{i}", Role.TOOL, n) for i, n in enumerate(tool_tokens)]
    return items


# -- counters from the messages ----------------------------------------------------------------


def test_before_the_first_response_the_conversation_is_pending() -> None:
    items = [it("s", Role.SYSTEM, 2_000), it("u", Role.USER, 1_121)]
    guard = guard_for_items(items, SONNET)
    assert guard.counters() == {"current": 0, "pending": 3_121, "new": 0, "schema": 0}


def test_current_is_the_reported_usage_else_the_estimate_up_to_the_last_answer() -> None:
    items = conversation(2_100, 300)
    estimated = guard_for_items(items, SONNET, phase="tool")
    assert (estimated.current, estimated.pending, estimated.new) == (3_500, 0, 2_400)
    reported = guard_for_items(items, SONNET, phase="tool", reported_context=131_000)
    assert reported.current == 131_000
    turn = guard_for_items(items, SONNET, phase="turn", reported_context=131_000, schema_tokens=9)
    assert turn.counters() == {"current": 131_000, "pending": 2_400, "new": 0, "schema": 9}


def test_hidden_messages_do_not_count() -> None:
    items = conversation(2_100)
    hidden = ContextItem(msg("h", Role.USER, "x").model_copy(update={"visible": False}), 999)
    assert guard_for_items([*items, hidden], SONNET).base == guard_for_items(items, SONNET).base


# -- admit: the tool preflight -------------------------------------------------------------------


def test_a_tool_output_that_fits_is_left_alone() -> None:
    item = it("new", Role.TOOL, 1_000, "x" * 4_000)
    assert POLICY.admit(item, conversation(2_100), SONNET, chars4, reported_context=131_000) is None


def test_a_tool_output_that_does_not_fit_is_dropped_and_forces_the_final_turn() -> None:
    context = conversation(2_100)
    item = it("new", Role.TOOL, 18_300, "y" * 73_000)  # 18,250 tokens as the agent counts
    result = POLICY.admit(item, context, SONNET, chars4, reported_context=131_000)
    assert result is not None
    assert result.action is Action.DROP and result.fired
    assert len(result.items) == 1  # admit's result is about the admitted output alone
    assert result.items[-1].message.text == TOOL_NO_OUTPUT
    assert result.items[-1].message.kind is MessageKind.TOOL_RESULT
    assert [c.status for c in result.changes] == [ItemStatus.DROPPED]
    d = result.details
    assert d["final_turn"] is True and d["trigger"] == "tool_preflight"
    assert (d["tokens_estimated"], d["projected"], d["limit"]) == (18_250, 151_350, 141_808)
    assert d["available_tokens"] == 141_808 - 131_000
    assert d["counters_after"]["new"] == 12  # the failure stub's own tokens
    assert "projected 151,350 > limit 141,808" in result.reason
    assert result.tokens_before - result.tokens_after == 18_300 - 12


def test_no_tool_output_enters_once_the_budget_was_exceeded() -> None:
    guard = ContextGuard.for_profile(SONNET).reserve_tool_output(10**6).guard
    assert not guard.can_execute_tool()
    result = POLICY.admit(it("t", Role.TOOL, 1, "tiny"), [], SONNET, chars4, guard=guard)
    assert result is not None and result.action is Action.DROP
    assert result.details["skipped"] is True


def test_only_tool_outputs_are_admitted() -> None:
    assert POLICY.admit(it("a2", Role.ASSISTANT, 10**6), [], SONNET, chars4) is None


def test_outputs_over_the_byte_cap_are_cut_before_the_budget_check() -> None:
    capped = AiAgentProfile(context_window=200_000, max_output_tokens=50_000)
    assert capped.tool_response_max_bytes == 12_288
    text = "HEAD" + "z" * 72_900 + "TAIL"
    item = it("new", Role.TOOL, 18_300, text)
    # Uncapped it would not fit (see above); capped to 12,288 bytes it does.
    result = POLICY.admit(item, conversation(2_100), capped, chars4, reported_context=131_000)
    assert result is not None and result.action is Action.TRUNCATE
    out = result.items[-1].message.text
    assert len(out.encode()) <= 12_288
    assert out.startswith("HEAD") and out.endswith("TAIL")
    assert "[···TRUNCATED " in out and " bytes···]" in out
    assert result.details["final_turn"] is False
    assert result.changes[-1].status is ItemStatus.TRUNCATED


def test_truncation_keeps_both_halves_and_names_the_omitted_bytes() -> None:
    text = "a" * 600 + "b" * 600
    out = truncate_to_bytes(text, 300)
    # content budget 300 − 50 = 250: 125 bytes of head, 125 of tail
    assert out == "a" * 125 + "[···TRUNCATED 950 bytes···]" + "b" * 125
    assert truncate_to_bytes(text, 5_000) == text


def test_small_payloads_are_cut_without_a_marker() -> None:
    assert truncate_to_bytes("x" * 400, 100) == "x" * 100  # under 512 bytes: plain prefix


@given(st.text(min_size=0, max_size=3_000), st.integers(min_value=1, max_value=2_000))
def test_truncation_fits_the_cap_and_never_splits_a_character(text: str, cap: int) -> None:
    out = truncate_to_bytes(text, cap)
    assert len(out.encode("utf-8", "surrogatepass")) <= max(cap, 1)
    if len(text.encode("utf-8", "surrogatepass")) <= cap:
        assert out == text


# -- manage: the turn preflight ------------------------------------------------------------------


def test_nothing_happens_when_the_context_fits() -> None:
    results = POLICY.manage(
        conversation(2_100), SONNET, chars4, NoSummary(), reported_context=100_000
    )
    assert results == []


def test_final_turn_when_the_projection_passes_the_limit() -> None:
    items = conversation(2_100, 18_250)
    (result,) = POLICY.manage(
        items,
        SONNET,
        chars4,
        NoSummary(),
        reported_context=131_000,
        schema_tokens=9_406,
        final_schema_tokens=1_200,
        provider=PROVIDER,
        model=MODEL,
    )
    assert result.action is Action.FINAL_TURN and result.fired
    assert result.reason.startswith(
        "projected 151,350 > limit 141,808 for anthropic:claude-sonnet-4-5"
    )
    assert result.items == items and result.tokens_saved == 0
    assert all(c.status is ItemStatus.KEPT for c in result.changes)
    d = result.details
    assert d["status"] == "final" and d["final_turn"] is True
    assert (d["schema_before"], d["schema_after"]) == (9_406, 1_200)
    assert d["still_over_limit"] is True
    assert d["counters_after"] == {"current": 151_350, "pending": 0, "new": 0, "schema": 1_200}


def test_no_final_turn_when_the_overflow_is_within_the_schema() -> None:
    # 'final' from the guard, but projected − schema = 141,750 ≤ 141,808: not enforced.
    results = POLICY.manage(
        conversation(2_100, 18_250),
        SONNET,
        chars4,
        NoSummary(),
        reported_context=131_000,
        schema_tokens=9_600,
    )
    assert results == []


def test_schema_only_overflow_is_not_a_final_turn() -> None:
    results = POLICY.manage(
        conversation(2_000),
        SONNET,
        chars4,
        NoSummary(),
        reported_context=139_000,
        schema_tokens=9_406,
    )
    assert results == []


def test_skip_when_another_target_still_fits() -> None:
    big = GuardTargetConfig("other", "huge", 1_000_000, 8_192)
    guard = guard_for_items(
        conversation(2_100, 18_250),
        SONNET,
        reported_context=131_000,
        provider=PROVIDER,
        model=MODEL,
    )
    guard = guard.with_targets([*guard.targets, big])
    (result,) = POLICY.manage(
        conversation(2_100, 18_250),
        SONNET,
        chars4,
        NoSummary(),
        guard=guard,
        provider=PROVIDER,
        model=MODEL,
    )
    assert result.details["status"] == GuardStatus.SKIP.value
    assert result.details["final_turn"] is False
    assert "skipped" in result.reason


# -- manual actions ----------------------------------------------------------------------------


def test_there_is_no_prune_and_no_compaction() -> None:
    items = conversation(2_100, 150_000)
    for result in (
        POLICY.prune(items, SONNET, chars4, force=True),
        POLICY.compact(items, SONNET, chars4, NoSummary(), force=True),
    ):
        assert not result.fired and result.items == items
        assert "ai-agent has no" in result.reason
        assert result.details["final_turn"] is True
    small = POLICY.compact(conversation(10), SONNET, chars4, NoSummary(), force=True)
    assert small.details["final_turn"] is False


def test_truncate_cuts_every_tool_output_over_the_cap() -> None:
    profile = AiAgentProfile(tool_response_max_bytes=1_000)
    items = [
        it("u", Role.USER, 1, "q" * 5_000),
        it("t1", Role.TOOL, 1, "r" * 5_000),
        it("t2", Role.TOOL, 1, "s" * 10),
    ]
    for force in (False, True):
        result = POLICY.truncate(items, profile, chars4, force=force)
        assert result.fired
        assert [c.status for c in result.changes] == [ItemStatus.TRUNCATED]
        assert [c.status for c in full_changes(items, result)] == [
            ItemStatus.KEPT,
            ItemStatus.TRUNCATED,
            ItemStatus.KEPT,
        ]
        assert len(result.items[1].message.text.encode()) <= 1_000
        assert result.items[0].message.text == "q" * 5_000
    assert not POLICY.truncate(items[2:], profile, chars4).fired


def test_the_policy_needs_the_aiagent_profile() -> None:
    with pytest.raises(ConfigError):
        POLICY.truncate([], GoAgentProfile(), chars4)


def test_the_failure_stub_is_estimated_once_per_estimate_function() -> None:
    seen: list[str] = []

    def counting(message: Message) -> int:
        seen.append(message.text)
        return chars4(message) + 1

    expected = _tool_output_tokens(TOOL_NO_OUTPUT, counting)
    assert expected == -(-len(TOOL_NO_OUTPUT) // 4) + 1
    seen.clear()
    assert _stub_tokens(counting) == expected
    assert _stub_tokens(counting) == expected
    assert seen == [TOOL_NO_OUTPUT]  # estimated once
    # another function has its own figure; one that cannot be kept weakly is asked each time
    assert _stub_tokens(chars4) == -(-len(TOOL_NO_OUTPUT) // 4)

    class Unhashable:
        __hash__ = None  # type: ignore[assignment]

        def __call__(self, message: Message) -> int:
            seen.append(message.text)
            return 3

    seen.clear()
    unhashable = Unhashable()
    assert _stub_tokens(unhashable) == 3 and _stub_tokens(unhashable) == 3
    assert seen == [TOOL_NO_OUTPUT, TOOL_NO_OUTPUT]
    # a dropped output's stub counts into ``new`` with that figure (the reserved output not)
    item = it("new", Role.TOOL, 18_300, "y" * 73_000)
    result = POLICY.admit(item, conversation(2_100), SONNET, counting, reported_context=131_000)
    assert result is not None and result.action is Action.DROP
    assert result.details["counters_after"]["new"] == expected == 13
