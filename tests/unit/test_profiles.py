"""Agent profiles: the reference's worked examples, zone boundaries, and every error path."""

from __future__ import annotations

import json
from typing import TypeVar

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from ctx_inspect.agents.aiagent.profile import AiAgentProfile
from ctx_inspect.agents.baseagent.profile import BaseAgentProfile
from ctx_inspect.agents.claude_code.profile import CLAUDE_CODE_AUTOCOMPACT, ClaudeCodeProfile
from ctx_inspect.agents.codex.profile import CodexProfile
from ctx_inspect.agents.fifth.profile import FifthProfile
from ctx_inspect.agents.goagent.profile import GoAgentProfile
from ctx_inspect.agents.opencode.profile import OpenCodeProfile
from ctx_inspect.core.model import Message, Part, PartType, Role
from ctx_inspect.core.profiles import (
    Profile,
    default_profile,
    make_profile,
    profile_from,
    profile_names,
)
from ctx_inspect.core.window import LimitParts, Zone
from ctx_inspect.errors import ConfigError

P = TypeVar("P", bound=Profile)


def of(cls: type[P], profile: Profile) -> P:
    assert isinstance(profile, cls)
    return profile


def zones(profile: Profile, *counts: int) -> list[Zone]:
    return [profile.zone(n) for n in counts]


def test_profile_names() -> None:
    assert profile_names() == (
        "baseagent", "opencode", "guide", "aiagent", "goagent", "fifth", "claude-code", "codex",
        "generic",
    )  # fmt: skip
    for name in profile_names():
        profile = default_profile(name)
        assert profile.name == name
        assert profile.agent == name


def test_limit_parts_effective() -> None:
    assert LimitParts(window=200_000, buffer=8_192, max_output=50_000).effective == 141_808
    assert LimitParts(window=100, buffer=80, max_output=80).effective == 0


# -- BaseAgent ---------------------------------------------------------------------------


def test_baseagent_reference_example() -> None:
    p = default_profile("baseagent")
    assert p.limit_parts().effective == 168_000
    assert p.threshold() == 142_800
    # "[compaction] Context: 148213 tokens (88.2% of 168000)" then "Context overflow detected"
    assert f"{p.percent_of_limit(148_213):.1f}" == "88.2"
    assert p.over_threshold(148_213)
    assert p.zone(148_213) is Zone.OVERFLOW
    # total > usable * 0.85 is strict: exactly 142,800 does not trigger
    assert not p.over_threshold(142_800)
    assert p.over_threshold(142_801)
    assert f"{p.percent_of_limit(5_432):.1f}" == "3.2"  # docs/usage.md start-up line


def test_baseagent_defaults() -> None:
    p = BaseAgentProfile()
    assert (p.prune_protect, p.prune_minimum, p.summary_max_tokens) == (40_000, 20_000, 4096)
    assert (p.tool_output_max_tokens, p.max_iterations, p.estimator) == (2500, 200, "baseagent")


# -- OpenCode ----------------------------------------------------------------------------


def test_opencode_overflow_is_inclusive() -> None:
    p = default_profile("opencode")
    assert p.threshold() == 168_000
    assert p.over_threshold(168_000)
    assert not p.over_threshold(167_999)
    assert p.zone(168_000) is Zone.OVERFLOW
    assert p.zone(167_999) is Zone.WARNING


def test_opencode_usable_variants() -> None:
    # with an input limit: input − reserved, reserved = min(20000, max output)
    assert make_profile("opencode", {"input_limit": 150_000}).threshold() == 130_000
    p = make_profile("opencode", {"input_limit": 150_000, "reserved": 5_000})
    assert p.threshold() == 145_000
    assert p.limit_parts() == LimitParts(window=150_000, buffer=5_000, max_output=0)
    # a small output limit lowers both the output reserve and the default reserved
    p = of(OpenCodeProfile, make_profile("opencode", {"output_limit": 8_000}))
    assert p.threshold() == 192_000
    assert p.reserved_tokens() == 8_000
    # output limit 0 (unknown) falls back to OUTPUT_TOKEN_MAX
    assert make_profile("opencode", {"output_limit": 0}).threshold() == 168_000
    # input limit 0 is unset (JavaScript truthiness)
    assert make_profile("opencode", {"input_limit": 0}).threshold() == 168_000


def test_opencode_zero_window_never_overflows() -> None:
    p = make_profile("opencode", {"context_window": 0})
    assert not p.has_threshold()
    assert not p.over_threshold(10**9)
    assert p.zone(10**9) is Zone.SAFE
    assert p.settings()["threshold"] is None


def test_opencode_prune_settings() -> None:
    p = of(OpenCodeProfile, default_profile("opencode"))
    assert p.protected_tools == ("skill",)
    # 1.18: compaction.prune is off unless the config turns it on
    assert (p.prune, p.prune_protect, p.prune_minimum) == (False, 40_000, 20_000)
    assert p.percent_of_limit(100_000) == 50.0  # against model.limit.context
    assert (p.tail_turns, p.preserve_recent_tokens, p.preserve_recent()) == (2, None, 15_000)
    assert make_profile("opencode", {"prune": True}).settings()["prune"] is True


# -- the guide ---------------------------------------------------------------------------


def test_guide_zones() -> None:
    p = default_profile("guide")
    assert p.threshold() == 153_000
    assert p.warning_threshold() == 126_000
    assert zones(p, 125_999, 126_000, 153_000, 153_001) == [
        Zone.SAFE, Zone.WARNING, Zone.WARNING, Zone.OVERFLOW,
    ]  # fmt: skip
    assert f"{p.percent_of_limit(90_000):.1f}" == "50.0"


# -- ai-agent ----------------------------------------------------------------------------


def test_aiagent_worked_example() -> None:
    p = of(
        AiAgentProfile,
        make_profile("aiagent", {"context_window": 200_000, "max_output_tokens": 50_000}),
    )
    assert p.buffer_tokens == 8_192
    assert p.threshold() == 141_808
    assert not p.blocked(141_808)
    assert p.blocked(141_809)
    assert p.zone(141_808) is Zone.WARNING
    assert p.zone(141_809) is Zone.OVERFLOW


def test_aiagent_default_limit() -> None:
    p = default_profile("aiagent")
    assert p.limit_parts() == LimitParts(window=131_072, buffer=8_192, max_output=32_768)
    assert p.threshold() == 90_112


def test_aiagent_zero_limit_never_blocks() -> None:
    p = make_profile("aiagent", {"context_window": 10_000, "max_output_tokens": 10_000})
    assert p.threshold() == 0
    assert not p.over_threshold(1_000_000)
    assert p.zone(1_000_000) is Zone.SAFE


def test_aiagent_percent_matches_its_log_line() -> None:
    # "LLM request prepared [ctx 128004, new 2110, expected 130114 + output 50000 = 94% of 200000]"
    p = make_profile("aiagent", {"context_window": 200_000, "max_output_tokens": 50_000})
    assert round(p.percent_of_limit(130_114)) == 94


def test_aiagent_tokenizer_decides_the_counter() -> None:
    assert not default_profile("aiagent").uses_counter()
    p = make_profile("aiagent", {"tokenizer": "tiktoken:cl100k_base"})
    assert p.uses_counter()
    assert p.counter_encoding() == "cl100k_base"
    assert make_profile("aiagent", {"tokenizer": "claude"}).counter_encoding() is None
    with pytest.raises(ConfigError, match="tokenizer"):
        make_profile("aiagent", {"tokenizer": " "})


# -- goagent -----------------------------------------------------------------------------


def test_goagent_unknown_window_uses_max_tokens_inclusive() -> None:
    p = default_profile("goagent")
    assert p.threshold() == 8_000
    assert p.over_threshold(8_000)
    assert not p.over_threshold(7_999)
    assert isinstance(p, GoAgentProfile)
    assert p.effective_keep_recent_tokens() == 4_000  # clamped to limit / 2
    assert not p.compacts_on_messages(500)  # there is a token limit


def test_goagent_window_minus_reserve() -> None:
    p = make_profile("goagent", {"context_window": 200_000})
    assert isinstance(p, GoAgentProfile)
    assert p.threshold() == 183_616
    assert p.effective_keep_recent_tokens() == 20_000
    assert p.limit_source() == "context_window"
    # a window smaller than the reserve falls back to max_tokens
    assert make_profile("goagent", {"context_window": 10_000}).threshold() == 8_000
    # a reserve of 0 means the default 16384
    assert make_profile("goagent", {"context_window": 20_000, "reserve_tokens": 0}).threshold() == (
        20_000 - 16_384
    )


def test_goagent_message_fallback_without_token_limit() -> None:
    p = make_profile("goagent", {"max_tokens": 0})
    assert isinstance(p, GoAgentProfile)
    assert not p.has_threshold()
    assert p.limit_source() == "none"
    assert p.compacts_on_messages(50)
    assert not p.compacts_on_messages(49)
    assert p.zone(10**6) is Zone.SAFE


def test_goagent_tool_output_limits() -> None:
    p = GoAgentProfile()
    assert (p.tool_output_max_lines, p.tool_output_max_bytes) == (2_000, 51_200)
    assert (p.tool_output_max_chars, p.tool_output_large_threshold) == (204_800, 204_800)
    assert p.tool_output_truncate_mode == "head_tail"
    assert (p.tool_call_cutoff, p.tool_summary_strategy, p.auto_compact) == (10, "llm", True)


# -- Fifth -------------------------------------------------------------------------------


def test_fifth_capacity_trigger() -> None:
    p = default_profile("fifth")
    assert isinstance(p, FifthProfile)
    assert p.context_window == p.total_budget == 16_000
    # ctx-capacity is an integer percentage; > 80 means 81%: 12,960 tokens
    assert p.threshold() == 12_960
    assert not p.over_threshold(12_959)
    assert p.over_threshold(12_960)
    assert p.capacity(12_847) == 80  # the stats example "Total: 12847 / 16000 (80 %)"


@given(st.integers(0, 100_000), st.integers(0, 100), st.integers(1, 50_000))
def test_fifth_threshold_matches_integer_capacity(tokens: int, trigger: int, budget: int) -> None:
    p = make_profile("fifth", {"capacity_trigger": trigger, "total_budget": budget})
    assert p.over_threshold(tokens) == (tokens * 100 // budget > trigger)


def test_fifth_levels() -> None:
    p = FifthProfile()
    assert p.level_for_role("system") == 1
    assert p.level_for_role(Role.ASSISTANT) == 3
    assert p.level_for_role("tool") == 4
    assert not p.counts_toward_capacity("tool")
    assert p.counts_toward_capacity("user")
    assert p.level_budgets() == {1: 2_000, 2: 4_000, 3: 8_000}


def test_fifth_window_is_the_total_budget() -> None:
    assert of(FifthProfile, make_profile("fifth", {"context_window": 1_000})).total_budget == 1_000
    assert make_profile("fifth", {"total_budget": 1_000}).context_window == 1_000
    with pytest.raises(ConfigError, match="same figure"):
        make_profile("fifth", {"context_window": 1_000, "total_budget": 2_000})


# -- Claude Code -------------------------------------------------------------------------


def test_claude_code_21_threshold() -> None:
    p = default_profile("claude-code")
    assert isinstance(p, ClaudeCodeProfile)
    assert p.threshold() == 167_000
    assert p.hard_limit() == 180_000
    assert p.over_threshold(167_000)
    assert zones(p, 146_999, 147_000, 166_999, 167_000) == [
        Zone.SAFE, Zone.WARNING, Zone.WARNING, Zone.OVERFLOW,
    ]  # fmt: skip
    assert p.percent_of_limit(167_000) == 83.5


def test_claude_code_pct_override_only_lowers() -> None:
    assert make_profile("claude-code", {"autocompact_pct_override": 50.0}).threshold() == 90_000
    assert make_profile("claude-code", {"autocompact_pct_override": 95}).threshold() == 167_000
    assert make_profile("claude-code", {"autocompact_pct_override": 100}).threshold() == 167_000
    with pytest.raises(ConfigError, match="autocompact_pct_override"):
        make_profile("claude-code", {"autocompact_pct_override": 0})


def test_claude_code_20_matches_observed_155k() -> None:
    assert CLAUDE_CODE_AUTOCOMPACT["2.0"].buffer_tokens == 45_000
    p = make_profile("claude-code", {"version": "2.0.64"})
    assert p.threshold() == 155_000
    assert not p.over_threshold(154_999)
    assert p.over_threshold(156_953)  # the 2.0.64 sample's preTokens


def test_claude_code_versions_and_windows() -> None:
    assert make_profile("claude-code", {"version": "2.1.31"}).threshold() == 167_000
    with pytest.raises(ConfigError, match="no auto-compact rule"):
        make_profile("claude-code", {"version": "1.0"})
    assert ClaudeCodeProfile.window_for_model("claude-opus-4-6[1m]") == 1_000_000
    assert ClaudeCodeProfile.window_for_model("claude-sonnet-4-5") == 200_000
    assert ClaudeCodeProfile.window_for_model(None) == 200_000
    assert make_profile("claude-code", {"context_window": 1_000_000}).threshold() == 967_000
    assert make_profile("claude-code", {"max_output_tokens": 8_000}).threshold() == 179_000
    assert make_profile("claude-code", {"autocompact_buffer_tokens": 0}).threshold() == 180_000


# -- Codex -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tokens", "left"),
    [(0, 100.0), (12_000, 100.0), (135_200, 50.0), (196_800, 25.0), (258_400, 0.0), (300_000, 0.0)],
)
def test_codex_percent_left(tokens: int, left: float) -> None:
    p = of(CodexProfile, default_profile("codex"))
    assert p.percent_left(tokens) == pytest.approx(left)
    assert p.percent_of_limit(tokens) == pytest.approx(100.0 - left)


def test_codex_threshold() -> None:
    p = default_profile("codex")
    assert isinstance(p, CodexProfile)
    assert p.nominal_window() == 272_000
    assert p.threshold() == 244_800  # 90% of the nominal window
    assert p.over_threshold(244_800)
    assert make_profile("codex", {"auto_compact_token_limit": 200_000}).threshold() == 200_000
    assert (
        of(CodexProfile, make_profile("codex", {"context_window": 10_000})).percent_left(5_000)
        == 0.0
    )


# -- generic -----------------------------------------------------------------------------


def test_generic_zones() -> None:
    p = default_profile("generic")
    assert p.threshold() == 115_200
    assert p.warning_threshold() == 89_600
    assert zones(p, 89_599, 89_600, 115_200, 115_201) == [
        Zone.SAFE, Zone.WARNING, Zone.WARNING, Zone.OVERFLOW,
    ]  # fmt: skip


# -- every profile -----------------------------------------------------------------------


@pytest.mark.parametrize("name", profile_names())
@given(a=st.integers(0, 2_000_000), b=st.integers(0, 2_000_000))
def test_zone_is_monotonic(name: str, a: int, b: int) -> None:
    p = default_profile(name)
    lo, hi = sorted((a, b))
    order = [Zone.SAFE, Zone.WARNING, Zone.OVERFLOW]
    assert order.index(p.zone(lo)) <= order.index(p.zone(hi))
    assert (p.zone(hi) is Zone.OVERFLOW) == p.over_threshold(hi)


@pytest.mark.parametrize("name", profile_names())
def test_zone_boundaries_are_where_the_profile_says(name: str) -> None:
    p = default_profile(name)
    first = p.first_overflow()
    assert first is not None
    assert p.zone(first) is Zone.OVERFLOW
    assert p.zone(first - 1) is not Zone.OVERFLOW
    warning = p.warning_threshold()
    assert 0 < warning < first
    assert p.zone(warning) is Zone.WARNING
    assert p.zone(warning - 1) is Zone.SAFE


@pytest.mark.parametrize("name", profile_names())
def test_settings_list_every_field_and_derived_figure(name: str) -> None:
    p = default_profile(name)
    settings = p.settings()
    assert list(settings)[:3] == ["name", "agent", "description"]
    for key in ("effective_limit", "threshold", "threshold_strict", "warning_threshold"):
        assert key in settings
    assert settings["threshold"] == p.threshold()
    hidden = {"warning_ratio"} if p.warning_field != "warning_ratio" else set()
    assert set(type(p).model_fields) - hidden <= set(settings)
    json.dumps(settings)  # plain data


@pytest.mark.parametrize("name", profile_names())
def test_round_trip_through_the_agent_field(name: str) -> None:
    p = default_profile(name)
    again = profile_from(p.model_dump())
    assert type(again) is type(p)
    assert again == p


def test_profiles_are_frozen_and_the_base_is_abstract() -> None:
    p = default_profile("baseagent")
    with pytest.raises(ValidationError):
        p.context_window = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        Profile.model_validate(
            {
                "name": "x",
                "agent": "x",
                "description": "",
                "context_window": 1,
                "estimator": "exact",
            }
        )


def test_estimate_passes_a_counter_only_when_the_agent_uses_one() -> None:
    class Counter:
        calls = 0

        def count(self, text: str) -> int:
            Counter.calls += 1
            return 1000

    m = Message(id="m", role=Role.USER, parts=(Part(type=PartType.TEXT, text="abcdefgh"),))
    assert default_profile("baseagent").estimate(m, Counter()) == 6
    # approximate tokenizer: "role:user\nabcdefgh" is 18 chars -> 5, + 4 = 9 (JSON 36 bytes -> 9)
    assert default_profile("aiagent").estimate(m, Counter()) == 9
    assert Counter.calls == 0
    assert default_profile("generic").estimate(m, Counter()) == 1003
    assert Counter.calls == 1


# -- make_profile errors -----------------------------------------------------------------


def test_unknown_profile_suggests_close_names() -> None:
    with pytest.raises(ConfigError) as info:
        make_profile("aiagnet", {})
    line = info.value.one_line()
    assert "aiagnet" in line
    assert "did you mean aiagent" in line
    assert "\n" not in line
    with pytest.raises(ConfigError, match="Unknown profile"):
        default_profile("claude")


def test_unknown_key_suggests_close_keys() -> None:
    with pytest.raises(ConfigError, match=r"no setting 'buffer_token'.*did you mean buffer_tokens"):
        make_profile("aiagent", {"buffer_token": 1})
    with pytest.raises(ConfigError, match="'agent'"):
        make_profile("aiagent", {"agent": "baseagent"})


def test_wrong_type_names_key_and_expected_type() -> None:
    with pytest.raises(ConfigError, match=r"aiagent\.context_window: expected an integer, got"):
        make_profile("aiagent", {"context_window": "200000"})
    with pytest.raises(ConfigError, match=r"expected an integer, got number 2\.0"):
        make_profile("aiagent", {"buffer_tokens": 2.0})
    with pytest.raises(ConfigError, match="expected an integer, got boolean"):
        make_profile("aiagent", {"buffer_tokens": True})
    with pytest.raises(ConfigError, match="expected a list of strings"):
        make_profile("opencode", {"protected_tools": [1]})
    with pytest.raises(ConfigError, match="expected one of 'llm', 'heuristic', 'off'"):
        make_profile("goagent", {"tool_summary_strategy": "always"})
    with pytest.raises(ConfigError, match="max_output_tokens: expected an integer"):
        make_profile("aiagent", {"max_output_tokens": "big"})


def test_value_constraints() -> None:
    with pytest.raises(ConfigError, match=r"context_window.*greater than or equal to 0"):
        make_profile("generic", {"context_window": -1})
    with pytest.raises(ConfigError, match="warning_ratio"):
        make_profile("generic", {"warning_ratio": 0.5})  # generic's warning is its own
    with pytest.raises(ConfigError, match=r"warning_ratio.*less than or equal to 1"):
        make_profile("baseagent", {"warning_ratio": 1.5})
    with pytest.raises(ConfigError, match="finite"):
        make_profile("baseagent", {"warning_ratio": float("nan")})
    with pytest.raises(ConfigError, match="unknown estimator"):
        make_profile("generic", {"estimator": "magic"})
    with pytest.raises(ConfigError, match="prune_ratio <= compact_ratio"):
        make_profile("guide", {"prune_ratio": 0.9})


def test_overrides_apply() -> None:
    p = make_profile("baseagent", {"warning_ratio": 0.5, "protect_last_turns": 3, "name": "mine"})
    assert p.name == "mine"
    assert p.warning_threshold() == 71_400
    p2 = of(OpenCodeProfile, make_profile("opencode", {"protected_tools": ["skill", "read"]}))
    assert p2.protected_tools == ("skill", "read")
    assert make_profile("baseagent", {"estimator": "exact"}).estimator == "exact"


def test_codex_settings_under_codex_names() -> None:
    """config.toml's names reach the same settings; ours still work; the limit is capped."""
    assert make_profile("codex", {"model_auto_compact_token_limit": 60_000}).threshold() == 60_000
    assert make_profile("codex", {"auto_compact_token_limit": 60_000}).threshold() == 60_000
    capped = make_profile("codex", {"model_auto_compact_token_limit": 300_000})
    assert capped.threshold() == 244_800  # never above 90% of the model's window
    assert make_profile("codex", {"model_auto_compact_token_limit": 0}).threshold() == 244_800
    configured = of(CodexProfile, make_profile("codex", {"model_context_window": 200_000}))
    assert configured.context_window == 190_000  # what Codex reports: 95% of it
    assert configured.nominal_window() == 200_000 and configured.threshold() == 180_000
    with pytest.raises(ConfigError, match="95% of model_context_window"):
        make_profile("codex", {"model_context_window": 200_000, "context_window": 200_000})
    with pytest.raises(ConfigError, match="did you mean model_auto_compact_token_limit"):
        make_profile("codex", {"model_auto_compact_token_limt": 1})
