"""Fifth's context manager (reference 4.2, seed 004): levels, capacity, compression, the options."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctx_inspect.agents.fifth.levels import (
    PRIORITY_WEIGHTS,
    counted_tokens,
    is_old,
    level_of,
    priority_score,
    recency_score,
)
from ctx_inspect.agents.fifth.policy import NOT_CALLED, POLICY
from ctx_inspect.agents.fifth.profile import FifthProfile
from ctx_inspect.core.model import Message, MessageKind, Part, PartType, Role
from ctx_inspect.core.policies import policy_for
from ctx_inspect.core.policies.base import (
    Action,
    ContextItem,
    ItemStatus,
    Policy,
    full_changes,
    summary_message,
    total,
)
from ctx_inspect.core.profiles import default_profile, make_profile
from ctx_inspect.errors import ConfigError

NOW = datetime(2026, 1, 29, 12, 0, 0, tzinfo=UTC)


def fifth(**overrides: object) -> FifthProfile:
    profile = make_profile("fifth", overrides)
    assert isinstance(profile, FifthProfile)
    return profile


DEFAULT = fifth()
AUTO = fifth(auto_compress=True)


def estimate(message: Message) -> int:
    return DEFAULT.estimate(message)


def stamp(minutes_ago: float) -> str:
    return (NOW - timedelta(minutes=minutes_ago)).isoformat()


_counter = iter(range(1_000_000))


def item(
    role: Role,
    tokens: int,
    minutes_ago: float | None = 0,
    text: str | None = None,
    kind: MessageKind | None = None,
    id: str | None = None,
) -> ContextItem:
    n = next(_counter)
    if kind is None:
        kind = MessageKind.TOOL_RESULT if role is Role.TOOL else MessageKind.MESSAGE
    part_type = PartType.TOOL_RESULT if kind is MessageKind.TOOL_RESULT else PartType.TEXT
    message = Message(
        id=id or f"m{n}",
        role=role,
        kind=kind,
        parts=(Part(type=part_type, text=text if text is not None else f"message {n}"),),
        timestamp=None if minutes_ago is None else stamp(minutes_ago),
    )
    return ContextItem(message, tokens, n)


def sys(tokens: int, minutes_ago: float | None = 60) -> ContextItem:
    return item(Role.SYSTEM, tokens, minutes_ago)


def user(tokens: int, minutes_ago: float | None = 0, text: str | None = None) -> ContextItem:
    return item(Role.USER, tokens, minutes_ago, text)


def asst(tokens: int, minutes_ago: float | None = 0, text: str | None = None) -> ContextItem:
    return item(Role.ASSISTANT, tokens, minutes_ago, text)


def tool(tokens: int, minutes_ago: float | None = 0) -> ContextItem:
    return item(Role.TOOL, tokens, minutes_ago)


class FakeSummarizer:
    def __init__(self, text: str = "the summary") -> None:
        self.text = text
        self.calls: list[tuple[list[str], int]] = []

    def summarize(self, messages: Sequence[Message], budget_tokens: int) -> str:
        self.calls.append(([m.id for m in messages], budget_tokens))
        return self.text


class FailingSummarizer:
    def summarize(self, messages: Sequence[Message], budget_tokens: int) -> str:
        raise RuntimeError("summarizer down")


def conversation(old: int, recent: int, tokens: int = 100, latest: float = 0) -> list[ContextItem]:
    """A system prompt, ``old`` user/assistant messages 10-30 min old, then ``recent`` fresh."""
    items = [sys(500)]
    for i in range(old):
        items.append((user if i % 2 == 0 else asst)(tokens, 30 - i))
    for _ in range(recent):
        items.append(asst(tokens, latest))
    return items


# --------------------------------------------------------------------------------------------
# The contract


def test_the_registry_finds_the_policy_and_it_satisfies_the_contract() -> None:
    policy: Policy = POLICY
    assert policy_for("fifth") is POLICY
    assert policy.name == "fifth"


def test_another_agents_profile_is_refused() -> None:
    with pytest.raises(ConfigError, match="fifth profile"):
        POLICY.prune([user(10)], default_profile("baseagent"), estimate, force=True)


# --------------------------------------------------------------------------------------------
# Levels and capacity (reference 4.2)


def test_levels_system_1_user_and_assistant_3_tool_4() -> None:
    assert level_of(sys(1).message, DEFAULT) == 1
    assert level_of(user(1).message, DEFAULT) == 3
    assert level_of(asst(1).message, DEFAULT) == 3
    assert level_of(tool(1).message, DEFAULT) == 4
    # A tool result the transcript files under the user role is still tool output.
    anthropic_style = item(Role.USER, 1, kind=MessageKind.TOOL_RESULT)
    assert level_of(anthropic_style.message, DEFAULT) == 4


def test_tool_output_is_invisible_to_capacity() -> None:
    items = [sys(1000), user(2000), tool(50_000)]
    assert counted_tokens(items, DEFAULT) == 3000
    # 53,000 tokens in the context, but the manager sees 3,000 (18 %): nothing to do.
    assert POLICY.manage(items, AUTO, estimate, FakeSummarizer()) == []
    result = POLICY.compact(items, AUTO, estimate, FakeSummarizer())
    assert result.details["capacity"] == 18
    assert result.details["level_tokens"] == {1: 1000, 2: 0, 3: 2000, 4: 50_000}


def test_capacity_is_integer_percent_and_acts_at_81_not_80() -> None:
    # 12,959 / 16,000 = 80.99 % → 80 (not > 80); 12,960 → 81.
    below = [sys(958), asst(12_000, 30), user(1, 0)]
    at = [sys(959), asst(12_000, 30), user(1, 0)]
    assert counted_tokens(below, AUTO) == 12_959
    assert AUTO.capacity(12_959) == 80
    assert POLICY.manage(below, AUTO, estimate, FakeSummarizer()) == []
    assert not POLICY.compact(below, AUTO, estimate, FakeSummarizer()).fired
    results = POLICY.manage(at, AUTO, estimate, FakeSummarizer())
    assert len(results) == 1
    assert results[0].details["capacity"] == 81
    assert results[0].fired


def test_auto_compress_is_never_called_by_fifth_so_manage_is_idle_by_default() -> None:
    items = [sys(1000), *[user(1500, 30 - i) for i in range(10)], user(10, 0)]  # 100 %
    assert DEFAULT.auto_compress is False
    assert POLICY.manage(items, DEFAULT, estimate, FakeSummarizer()) == []
    result = POLICY.compact(items, DEFAULT, estimate, FakeSummarizer())
    assert not result.fired
    assert "never called" in result.reason


def test_manage_says_that_fifth_never_calls_it() -> None:
    items = [sys(1000), *[user(1500, 30 - i) for i in range(10)], user(10, 0)]
    [result] = POLICY.manage(items, AUTO, estimate, FakeSummarizer())
    assert result.action is Action.COMPACT
    assert result.details["called_by_fifth"] is False
    assert NOT_CALLED in result.reason
    assert "capacity 100% > trigger 80%" in result.reason


def test_manage_compresses_level_3_then_tries_level_2_when_still_over() -> None:
    # Twelve old 1,200-token messages: the pass takes ten, two stay; still over 80 %.
    items = [sys(1000), *[asst(1200, 40 - i) for i in range(12)], user(1000, 0)]
    fake = FakeSummarizer()
    [result] = POLICY.manage(items, AUTO, estimate, fake)
    passes = result.details["passes"]
    assert [p["level"] for p in passes] == [3]  # 1000 + 2×1200 + 1000 + summary: under
    heavy = [sys(1000), *[asst(1200, 40 - i) for i in range(10)], *[user(1500, 0)] * 1]
    heavy += [asst(1500, 0) for _ in range(8)]  # 13,500 fresh tokens keep it over
    [result] = POLICY.manage(heavy, AUTO, estimate, fake)
    passes = result.details["passes"]
    assert [p["level"] for p in passes] == [3, 2]
    # Nothing is ever stored at level 2, so its pass finds nothing.
    assert passes[1]["eligible"] == 0 and passes[1]["compressed_ids"] == []
    assert result.details["capacity_after"] > 80
    assert len(fake.calls) == 2  # one per manage call: level 2 had nothing to summarise


def test_manage_does_nothing_when_over_but_nothing_is_old_enough() -> None:
    items = [sys(1000), *[asst(1500, 5) for _ in range(10)]]
    assert POLICY.manage(items, AUTO, estimate, FakeSummarizer()) == []


# --------------------------------------------------------------------------------------------
# Compression (ctx-compress-level)


def test_compress_takes_at_most_ten_oldest_level_3_messages() -> None:
    items = conversation(old=14, recent=2)
    fake = FakeSummarizer()
    result = POLICY.compact(items, DEFAULT, estimate, fake, force=True)
    assert result.fired
    compressed = [i.id for i in items[1:11]]  # the ten oldest (30, 29, ... 21 min)
    assert fake.calls == [(compressed, 500)]
    assert result.details["compressed_ids"] == compressed
    assert result.details["eligible"] == 14


def test_oldest_first_follows_the_timestamps_not_the_positions() -> None:
    late_first = [asst(10, 7 + i) for i in range(12)]  # position 0 is the newest (7 min)
    fake = FakeSummarizer()
    POLICY.compact([*late_first, user(1, 0)], DEFAULT, estimate, fake, force=True)
    [(ids, _budget)] = fake.calls
    assert ids == [i.id for i in late_first[2:]]  # the ten oldest, 9-18 min


def test_age_is_whole_minutes_above_five_so_eligible_from_six_minutes() -> None:
    profile = DEFAULT
    assert profile.age_threshold_seconds == 300
    latest = user(1, 0).message
    assert not is_old(asst(1, 5 + 59 / 60).message, NOW, profile)  # 5 min 59 s → 5 min
    assert is_old(asst(1, 6).message, NOW, profile)  # 6 min
    assert not is_old(asst(1, 5.5).message, NOW, profile)
    items = [asst(10, 5 + 59 / 60), asst(10, 6), ContextItem(latest, 1)]
    fake = FakeSummarizer()
    result = POLICY.compact(items, profile, estimate, fake, force=True)
    assert result.details["compressed_ids"] == [items[1].id]


def test_now_is_the_latest_message_never_the_clock() -> None:
    # Everything happened in 2001 within four minutes: nothing is old relative to the last one.
    base = datetime(2001, 1, 1, tzinfo=UTC)
    items = [
        ContextItem(
            Message(
                id=f"x{i}",
                role=Role.USER,
                parts=(Part(type=PartType.TEXT, text="hi"),),
                timestamp=(base + timedelta(minutes=i)).isoformat(),
            ),
            10,
        )
        for i in range(5)
    ]
    result = POLICY.compact(items, DEFAULT, estimate, FakeSummarizer(), force=True)
    assert not result.fired
    assert result.details["now"] == (base + timedelta(minutes=4)).isoformat()


def test_summary_is_inserted_at_level_3_in_place_and_the_sources_are_dropped() -> None:
    items = conversation(old=3, recent=2)
    result = POLICY.compact(items, DEFAULT, estimate, FakeSummarizer("short summary"), force=True)
    ids = [i.id for i in result.items]
    summary = result.items[1]
    assert ids == [items[0].id, summary.id, items[4].id, items[5].id]
    assert summary.message.kind is MessageKind.SUMMARY
    assert summary.message.text == "short summary"
    assert level_of(summary.message, DEFAULT) == 3
    assert summary.tokens == estimate(summary.message) == len("short summary") // 4
    changes = full_changes(items, result)
    statuses = [c.status for c in changes[: len(items)]]
    assert statuses == [ItemStatus.KEPT, *[ItemStatus.SUMMARIZED] * 3, *[ItemStatus.KEPT] * 2]
    statuses_added = changes[len(items) :]
    assert [c.status for c in statuses_added] == [ItemStatus.ADDED]
    assert result.tokens_before == total(items)
    assert result.tokens_after == total(result.items) == 500 + summary.tokens + 200


def test_summaries_keep_their_level() -> None:
    made_at_2 = summary_message("s2", "x").model_copy(update={"name": "fifth level 2"})
    assert level_of(made_at_2, DEFAULT) == 2
    foreign = summary_message("s", "x")  # another agent's summary: by its role
    assert level_of(foreign, DEFAULT) == 3


def test_summaries_are_never_compressed_again() -> None:
    items = conversation(old=3, recent=1)
    first = POLICY.compact(items, DEFAULT, estimate, FakeSummarizer(), force=True)
    later = [*first.items, user(1, -10)]  # ten minutes on: the summary is old now
    again = POLICY.compact(later, DEFAULT, estimate, FakeSummarizer(), force=True)
    assert first.items[1].id not in again.details["compressed_ids"]


def test_compact_is_the_compress_command_level_3_only() -> None:
    items = [sys(500, 60), tool(800, 60), user(100, 60), asst(100, 60), user(1, 0)]
    result = POLICY.compact(items, DEFAULT, estimate, FakeSummarizer(), force=True)
    assert result.details["compressed_ids"] == [items[2].id, items[3].id]
    kept = {i.id for i in result.items}
    assert items[0].id in kept and items[1].id in kept  # level 1 and level 4 untouched


def test_compact_without_force_follows_the_trigger_when_auto_compress_is_replayed() -> None:
    light = conversation(old=4, recent=1)  # 900 tokens: 5 %
    result = POLICY.compact(light, AUTO, estimate, FakeSummarizer())
    assert not result.fired and "≤ trigger 80%" in result.reason
    heavy = [sys(1000), *[user(1500, 30 - i) for i in range(8)], user(10, 0)]  # 81 %
    result = POLICY.compact(heavy, AUTO, estimate, FakeSummarizer())
    assert result.fired and NOT_CALLED in result.reason


def test_summary_budget_is_the_profiles_summary_max_tokens() -> None:
    fake = FakeSummarizer()
    POLICY.compact(conversation(3, 1), fifth(summary_max_tokens=123), estimate, fake, force=True)
    assert fake.calls[0][1] == 123


def test_batch_size_and_age_come_from_the_profile() -> None:
    profile = fifth(compress_batch=2, age_threshold_seconds=60)
    items = [asst(10, 1.5), asst(10, 2), asst(10, 3), user(1, 0)]
    fake = FakeSummarizer()
    POLICY.compact(items, profile, estimate, fake, force=True)
    assert fake.calls[0][0] == [items[1].id, items[2].id]  # > 1 whole minute: 2 and 3, oldest


def test_undated_messages_count_as_old() -> None:
    items = [user(10, None), asst(10, None), user(10, 0)]
    result = POLICY.compact(items, DEFAULT, estimate, FakeSummarizer(), force=True)
    assert result.details["compressed_ids"] == [items[0].id, items[1].id]
    assert result.details["undated"] == 2


def test_a_failing_summarizer_leaves_the_context_untouched() -> None:
    items = conversation(old=5, recent=1)
    before = list(items)
    with pytest.raises(RuntimeError, match="summarizer down"):
        POLICY.compact(items, DEFAULT, estimate, FailingSummarizer(), force=True)
    with pytest.raises(RuntimeError):
        POLICY.manage(
            [sys(1000), *[user(1500, 30 - i) for i in range(10)]], AUTO, estimate,
            FailingSummarizer(),
        )  # fmt: skip
    assert items == before
    assert all(a is b for a, b in zip(items, before, strict=True))


# --------------------------------------------------------------------------------------------
# The README's priority score (not in Fifth's code)


def test_priority_score_is_the_readmes_weighted_sum() -> None:
    assert PRIORITY_WEIGHTS == (0.3, 0.2, 0.4, 0.1)
    m = asst(1, 9, text="zzzz").message
    assert priority_score(m, NOW) == pytest.approx(0.3 * (1 / (1 + 9)))
    assert priority_score(m, NOW, explicit=True) == pytest.approx(0.03 + 0.1)
    task = "parser crash fix"
    relevant = asst(1, 9, text="parser crash").message
    # Jaccard {parser, crash} vs {parser, crash}: 1 (the 3-letter "fix" is not a term).
    assert priority_score(relevant, NOW, task=task) == pytest.approx(0.03 + 0.4)
    later = [user(1, 0, text="the parser again").message]
    # "parser" mentioned once later; own mentions 2 (parser, crash): 1 / 3.
    assert priority_score(relevant, NOW, later=later) == pytest.approx(0.03 + 0.2 / 3)


def test_fifths_own_recency_score_is_100_over_one_plus_minutes() -> None:
    assert recency_score(asst(1, 0).message, NOW) == 100
    assert recency_score(asst(1, 3.9).message, NOW) == 25  # 3 whole minutes: 100 // 4
    assert recency_score(asst(1, None).message, NOW) == 0


def test_compact_by_priority_takes_the_lowest_scored_first_and_says_fifth_lacks_it() -> None:
    profile = fifth(compress_batch=1)
    on_task = asst(10, 10, text="the tokenizer bug in lexer.py")
    off_task = asst(10, 20, text="weather chatter, unrelated")
    fresher_off = asst(10, 7, text="lunch plans, nothing else")
    items = [on_task, off_task, fresher_off, user(1, 0, text="fix the tokenizer bug in lexer.py")]
    by_age = POLICY.compact(items, profile, estimate, FakeSummarizer(), force=True)
    assert by_age.details["compressed_ids"] == [off_task.id]  # the oldest
    fake = FakeSummarizer()
    by_score = POLICY.compact(items, profile, estimate, fake, force=True, order="priority")
    # off_task (20 min, unrelated) scores lowest: 0.3 / 21; on_task scores on relevance.
    assert by_score.details["compressed_ids"] == [off_task.id]
    assert "does not implement" in by_score.reason
    assert "does not implement" in by_score.details["note"]
    profile2 = fifth(compress_batch=1, age_threshold_seconds=0)
    items2 = [on_task, fresher_off, user(1, 0, text="fix the tokenizer bug in lexer.py")]
    by_age2 = POLICY.compact(items2, profile2, estimate, FakeSummarizer(), force=True)
    by_score2 = POLICY.compact(
        items2, profile2, estimate, FakeSummarizer(), force=True, order="priority"
    )
    assert by_age2.details["compressed_ids"] == [on_task.id]  # older
    assert by_score2.details["compressed_ids"] == [fresher_off.id]  # less relevant
    with pytest.raises(ConfigError):
        POLICY.compact(items, profile, estimate, fake, force=True, order="random")  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# Tool output: admit, prune, truncate


def test_admit_and_truncate_never_touch_tool_output() -> None:
    big = tool(100_000)
    assert POLICY.admit(big, [sys(10)], DEFAULT, estimate) is None
    result = POLICY.truncate([sys(10), big], DEFAULT, estimate, force=True)
    assert not result.fired and result.items == [result.items[0], big]


def test_prune_without_force_never_fires_fifth_keeps_tool_output() -> None:
    items = [sys(10_000), user(5000), tool(9000)]
    result = POLICY.prune(items, DEFAULT, estimate)
    assert not result.fired
    assert "never drops tool output" in result.reason


def test_prune_drops_level_4_beyond_the_remaining_space_oldest_first() -> None:
    old_tool, mid_tool, new_tool = tool(1500, 20), tool(1500, 10), tool(1500, 0)
    items = [sys(2000), user(11_000, 30), old_tool, mid_tool, new_tool]  # 3,000 left
    result = POLICY.prune(items, DEFAULT, estimate, force=True)
    assert result.fired
    assert result.details["level4_budget"] == 3000
    assert result.details["dropped_ids"] == [old_tool.id]
    assert [c.status for c in full_changes(items, result)][2:] == [
        ItemStatus.DROPPED,
        ItemStatus.KEPT,
        ItemStatus.KEPT,
    ]
    assert result.tokens_after == result.tokens_before - 1500
    within = [sys(2000), user(11_000, 30), mid_tool, new_tool]
    assert not POLICY.prune(within, DEFAULT, estimate, force=True).fired


# --------------------------------------------------------------------------------------------
# Properties


roles = st.sampled_from([Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.TOOL])
entries = st.lists(
    st.tuples(roles, st.integers(0, 3000), st.one_of(st.none(), st.integers(0, 60))),
    max_size=25,
)


def build(spec: list[tuple[Role, int, int | None]]) -> list[ContextItem]:
    return [item(role, tokens, minutes) for role, tokens, minutes in spec]


@settings(max_examples=80, deadline=None)
@given(entries)
def test_compaction_only_ever_touches_old_level_3_messages(spec) -> None:
    items = build(spec)
    snapshot = list(items)
    result = POLICY.compact(items, DEFAULT, estimate, FakeSummarizer("s"), force=True)
    assert items == snapshot
    changes = full_changes(items, result)
    assert len(changes) == len(items) + (1 if result.fired else 0)
    assert result.tokens_before == total(items) and result.tokens_after == total(result.items)
    for change, original in zip(changes, items, strict=False):
        if change.status is not ItemStatus.KEPT:
            assert level_of(original.message, DEFAULT) == 3
            assert is_old(original.message, datetime.fromisoformat(result.details["now"])
                          if result.details["now"] else None, DEFAULT)  # fmt: skip
    assert sum(c.status is ItemStatus.SUMMARIZED for c in result.changes) <= 10


@settings(max_examples=80, deadline=None)
@given(entries)
def test_prune_never_adds_tokens_touches_only_tool_output_and_is_idempotent(spec) -> None:
    items = build(spec)
    result = POLICY.prune(items, DEFAULT, estimate, force=True)
    assert result.tokens_after <= result.tokens_before
    for change, original in zip(full_changes(items, result), items, strict=True):
        if change.status is not ItemStatus.KEPT:
            assert level_of(original.message, DEFAULT) == 4
    assert counted_tokens(result.items, DEFAULT) == counted_tokens(items, DEFAULT)
    assert not POLICY.prune(result.items, DEFAULT, estimate, force=True).fired
