"""ai-agent's context guard arithmetic (reference 2.4), checked against hand-computed figures."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctx_inspect.agents.aiagent.guard import (
    DEFAULT_TARGET,
    ContextGuard,
    GuardTargetConfig,
    Trigger,
)
from ctx_inspect.agents.aiagent.profile import (
    DEFAULT_CONTEXT_BUFFER_TOKENS,
    DEFAULT_CONTEXT_WINDOW_TOKENS,
    AiAgentProfile,
)
from ctx_inspect.core.model import GuardEvaluated, GuardStatus, GuardTarget, Usage

SONNET = GuardTargetConfig("anthropic", "claude-sonnet-4-5", 200_000, 8_192, 50_000)  # 141,808
SMALL = GuardTargetConfig("openai", "gpt-4", 128_000, 8_192, 16_384)  # 103,424


def guard(
    *targets: GuardTargetConfig, current: int = 0, pending: int = 0, new: int = 0, schema: int = 0
) -> ContextGuard:
    return ContextGuard(
        targets=targets or (SONNET,), current=current, pending=pending, new=new, schema=schema
    )


# -- limits ------------------------------------------------------------------------------------


def test_limit_is_window_minus_buffer_minus_max_output() -> None:
    assert SONNET.limit() == 141_808
    assert SMALL.limit() == 103_424  # the seed's worked example
    parts = guard().limit_parts(SONNET)
    assert (parts.window, parts.buffer, parts.max_output) == (200_000, 8_192, 50_000)
    assert parts.effective == 141_808


def test_max_output_defaults_to_a_quarter_of_the_window() -> None:
    target = GuardTargetConfig("p", "m", 131_073, 8_192)
    assert target.max_output() == 32_768  # floor(131073 / 4)
    assert target.limit() == 131_073 - 8_192 - 32_768
    profile_guard = ContextGuard.for_profile(AiAgentProfile())
    assert profile_guard.min_limit() == 90_112 == AiAgentProfile().limit()


def test_limit_is_never_negative() -> None:
    assert GuardTargetConfig("p", "m", 10_000, 8_192, 5_000).limit() == 0


def test_synthetic_default_target_uses_the_agent_defaults() -> None:
    (target,) = ContextGuard().effective_targets()
    assert target.provider == target.model == DEFAULT_TARGET
    assert target.context_window == DEFAULT_CONTEXT_WINDOW_TOKENS == 131_072
    assert target.buffer_tokens == DEFAULT_CONTEXT_BUFFER_TOKENS == 8_192


# -- evaluate ------------------------------------------------------------------------------------


def test_projection_is_current_pending_new_extra_without_schema() -> None:
    ev = guard(current=100, pending=20, new=3, schema=9_406).evaluate(extra=7)
    assert ev.projected == 130
    assert ev.schema == 9_406
    assert ev.with_schema == 130 + 9_406


def test_blocked_is_strict() -> None:
    assert not guard(current=141_808).evaluate().any_blocked
    ev = guard(current=141_809).evaluate()
    assert ev.any_blocked
    assert ev.blocked[0].limit == 141_808
    assert ev.blocked[0].projected == 141_809


def test_a_zero_limit_never_blocks() -> None:
    zero = GuardTargetConfig("p", "m", 10_000, 8_192, 5_000)
    assert not guard(zero, current=10**9).evaluate().any_blocked


def test_schema_alone_never_blocks() -> None:
    ev = guard(current=141_000, schema=50_000).evaluate()
    assert ev.with_schema > 141_808
    assert not ev.any_blocked


def test_evaluation_becomes_a_guard_event_and_back() -> None:
    ev = guard(SONNET, SMALL, current=120_000, pending=5, new=6, schema=9).evaluate(extra=1)
    event = ev.to_event(status=GuardStatus.SKIP, trigger="turn_preflight")
    assert event.projection == 120_012
    assert [t.blocked for t in event.targets] == [False, True]
    back = ContextGuard.from_event(event)
    assert back.counters() == {"current": 120_000, "pending": 5, "new": 6, "schema": 9}
    assert back.evaluate(extra=1) == ev


def test_targets_from_a_printed_event_keep_their_max_output() -> None:
    event = GuardEvaluated(
        current=1,
        targets=(
            GuardTarget(
                context_window=200_000, buffer_tokens=8_192, max_output_tokens=50_000, limit=0
            ),
        ),
    )
    assert ContextGuard.from_event(event).min_limit() == 141_808


# -- evaluateForProvider -------------------------------------------------------------------------


def test_ok_when_nothing_is_blocked() -> None:
    decision = guard(SONNET, SMALL, current=50_000).provider_decision("openai", "gpt-4")
    assert decision.status is GuardStatus.OK
    assert decision.provider_eval


def test_final_when_every_target_is_blocked() -> None:
    g = guard(SONNET, SMALL, current=150_000)
    assert g.evaluate_for_provider("openai", "gpt-4") == "final"
    assert g.evaluate_for_provider("anthropic", "claude-sonnet-4-5") is GuardStatus.FINAL


def test_skip_when_this_provider_is_blocked_but_others_are_not() -> None:
    g = guard(SONNET, SMALL, current=120_000)
    assert g.evaluate_for_provider("openai", "gpt-4") is GuardStatus.SKIP
    assert g.evaluate_for_provider("anthropic", "claude-sonnet-4-5") is GuardStatus.OK


def test_final_when_the_only_target_is_the_synthetic_default() -> None:
    g = ContextGuard(current=90_113)
    assert g.evaluate_for_provider("anything", "else") is GuardStatus.FINAL
    assert ContextGuard(current=90_112).evaluate_for_provider("a", "b") is GuardStatus.OK


def test_schema_only_overflow_is_ok() -> None:
    decision = guard(current=140_000, schema=9_406).provider_decision(
        "anthropic", "claude-sonnet-4-5"
    )
    assert decision.status is GuardStatus.OK
    assert decision.schema_only_overflow
    assert decision.base == 140_000 <= decision.limit == 141_808


def test_schema_only_early_return_prints_no_provider_eval() -> None:
    # Two targets with the same name: the one found first fits, the other is blocked. The
    # base fits this provider's limit, so the agent returns 'ok' before provider-eval.
    big = GuardTargetConfig("anthropic", "claude-sonnet-4-5", 400_000, 8_192, 50_000)
    g = guard(big, SONNET, current=150_000)
    decision = g.provider_decision("anthropic", "claude-sonnet-4-5")
    assert decision.status is GuardStatus.OK
    assert not decision.provider_eval
    assert g.provider_decision("other", "model").provider_eval


# -- the turn runner -------------------------------------------------------------------------


def test_final_is_enforced_only_when_projected_minus_schema_exceeds_the_limit() -> None:
    inside = guard(current=151_350, schema=9_600).turn_preflight("anthropic", "claude-sonnet-4-5")
    assert inside.status is GuardStatus.FINAL
    assert not inside.enforced  # 151,350 − 9,600 = 141,750 ≤ 141,808
    assert inside.guard.forced_final is None
    over = guard(current=151_350, schema=9_406).turn_preflight("anthropic", "claude-sonnet-4-5")
    assert over.enforced  # 151,350 − 9,406 = 141,944 > 141,808
    assert over.guard.forced_final == Trigger.TURN_PREFLIGHT


def test_forced_final_shrinks_the_schema_and_re_evaluates() -> None:
    g = guard(current=131_000, pending=20_350, schema=9_406)
    pre = g.turn_preflight("anthropic", "claude-sonnet-4-5", final_schema_tokens=1_200)
    assert pre.enforced
    assert (pre.schema_before, pre.schema_after) == (9_406, 1_200)
    assert pre.guard.counters() == {"current": 151_350, "pending": 0, "new": 0, "schema": 1_200}
    assert pre.post_shrink is not None and pre.post_shrink.projected == 151_350
    assert pre.still_over_limit  # logged, and the request goes anyway


def test_enforcing_can_bring_the_context_back_under_the_limit() -> None:
    # new is reset by the enforce (it is not committed), so the post-shrink check may pass.
    g = guard(current=130_000, new=30_000, schema=100)
    pre = g.turn_preflight("anthropic", "claude-sonnet-4-5", final_schema_tokens=50)
    assert pre.enforced
    assert not pre.still_over_limit


def test_skip_changes_no_counter() -> None:
    g = guard(SONNET, SMALL, current=120_000, pending=3)
    pre = g.turn_preflight("openai", "gpt-4")
    assert pre.status is GuardStatus.SKIP
    assert pre.guard == g and not pre.enforced


# -- tool preflight ----------------------------------------------------------------------------


def test_tool_reservation_that_fits_goes_into_new() -> None:
    res = guard(current=100_000, new=2_000).reserve_tool_output(5_000)
    assert res.ok and res.reason is None
    assert res.guard.new == 7_000
    assert res.evaluation.projected == 107_000


def test_tool_reservation_that_does_not_fit_forces_the_final_turn() -> None:
    # The reference's CONTEXT_DEBUG example: 131,000 + 0 + 2,100 + 18,250 = 151,350.
    res = guard(current=131_000, new=2_100).reserve_tool_output(18_250)
    assert not res.ok
    assert res.reason == "token_budget_exceeded"
    assert res.evaluation.projected == 151_350
    assert res.enforced and res.guard.forced_final == Trigger.TOOL_PREFLIGHT
    assert res.guard.new == 0  # reset by the enforce
    assert res.available_tokens == 141_808 - 131_000  # the base after the enforce
    assert not res.guard.can_execute_tool()


def test_available_tokens_use_the_smallest_blocked_limit_and_never_go_negative() -> None:
    res = guard(SONNET, SMALL, current=120_000).reserve_tool_output(30_000)
    assert res.available_tokens == 0  # min(141,808, 103,424) − 120,000 < 0
    res2 = guard(SONNET, SMALL, current=100_000).reserve_tool_output(30_000)
    assert res2.available_tokens == 103_424 - 100_000


def test_only_the_first_refusal_enforces() -> None:
    first = guard(current=141_000, pending=500).reserve_tool_output(1_000)
    second = first.guard.add_new_tokens(12).reserve_tool_output(1_000)
    assert first.enforced and not second.enforced
    assert second.guard.new == 12  # not reset a second time
    assert not second.ok


# -- life cycle --------------------------------------------------------------------------------


def test_counter_life_cycle_of_one_turn() -> None:
    g = guard().loop_init(3_121)  # step 1
    assert g.counters() == {"current": 0, "pending": 3_121, "new": 0, "schema": 0}
    g = g.before_request()  # step 2
    assert (g.current, g.pending, g.new) == (3_121, 0, 0)
    g = g.after_response(Usage(input=1_523, cache_read=2_000, cache_write=100, output=456))
    assert g.current == 1_523 + 2_000 + 100 + 456  # step 3
    g = g.reserve_tool_output(700).guard  # step 4
    assert g.new == 700
    g = g.before_retry()  # step 5
    assert (g.pending, g.new) == (700, 0)
    g = g.add_new_tokens(50).enforce()  # step 6
    assert (g.current, g.pending, g.new) == (4_079 + 700, 0, 0)


def test_before_request_takes_an_explicit_context_figure() -> None:
    g = guard(current=10, pending=5, new=99).before_request(ctx_tokens=1_000)
    assert (g.current, g.pending, g.new) == (1_005, 0, 0)


def test_after_response_keeps_new_and_accepts_a_plain_figure() -> None:
    g = guard(current=1, pending=2, new=3).after_response(500)
    assert (g.current, g.pending, g.new) == (500, 0, 3)


def test_methods_return_new_guards_so_replay_can_branch() -> None:
    g = guard(current=100, pending=10)
    a = g.before_request()
    b = g.reserve_tool_output(50).guard
    assert g.counters()["current"] == 100 and g.pending == 10 and g.new == 0
    assert a.current == 110 and b.new == 50
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.current = 5  # type: ignore[misc]


def test_request_metrics_pass_pending_as_new_and_count_the_buffer_in_the_percent() -> None:
    # "LLM request prepared [ctx 128004, new 2110, expected 130114 + output 50000 = 94% of 200000]"
    m = guard(current=128_004, pending=2_110, new=777, schema=9_406).build_metrics(
        "anthropic", "claude-sonnet-4-5"
    )
    assert (m.ctx_tokens, m.new_tokens, m.expected_tokens) == (128_004, 2_110, 130_114)
    assert m.expected_pct == 94  # (130,114 + 8,192 + 50,000) / 200,000
    assert m.max_output_tokens == 50_000 and m.schema_tokens == 9_406


# -- properties --------------------------------------------------------------------------------

counts = st.integers(min_value=0, max_value=400_000)


@given(counts, counts, counts, counts, st.integers(min_value=0, max_value=300_000))
def test_blocked_iff_projection_exceeds_a_positive_limit(
    current: int, pending: int, new: int, schema: int, window: int
) -> None:
    target = GuardTargetConfig("p", "m", window, 8_192)
    ev = guard(target, current=current, pending=pending, new=new, schema=schema).evaluate()
    limit = target.limit()
    assert ev.any_blocked == (limit > 0 and current + pending + new > limit)


@given(counts, counts, counts, st.integers(min_value=0, max_value=100_000))
def test_a_refused_reservation_never_adds_the_output(
    current: int, pending: int, new: int, tokens: int
) -> None:
    g = guard(current=current, pending=pending, new=new)
    res = g.reserve_tool_output(tokens)
    if res.ok:
        assert res.guard.new == new + tokens
        assert res.evaluation.projected <= 141_808
    else:
        assert res.guard.base <= g.base
        assert res.available_tokens is not None and res.available_tokens >= 0


@given(counts, counts, counts, counts)
def test_schema_only_overflow_is_never_final(
    current: int, pending: int, new: int, schema: int
) -> None:
    g = guard(current=current, pending=pending, new=new, schema=schema)
    if g.base <= 141_808:
        assert g.evaluate_for_provider("anthropic", "claude-sonnet-4-5") is GuardStatus.OK


# -- the guard's copies ------------------------------------------------------------------------


@given(
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.integers(0, 10**4),
    st.booleans(),
)
def test_a_changed_guard_is_what_dataclasses_replace_makes(
    current: int, pending: int, new: int, schema: int, exceeded: bool
) -> None:
    start = guard(SONNET, SMALL, current=5, pending=6, new=7, schema=8)
    changed = start.with_counters(current, pending, new)
    assert changed == dataclasses.replace(start, current=current, pending=pending, new=new)
    assert (start.current, start.pending, start.new) == (5, 6, 7)  # the original is unchanged
    assert changed.targets is start.targets
    flagged = changed._replaced(tool_budget_exceeded=exceeded, schema=schema)
    assert flagged == dataclasses.replace(changed, tool_budget_exceeded=exceeded, schema=schema)
    assert type(flagged) is ContextGuard and hash(flagged) == hash(
        dataclasses.replace(changed, tool_budget_exceeded=exceeded, schema=schema)
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        flagged.current = 1  # type: ignore[misc]
