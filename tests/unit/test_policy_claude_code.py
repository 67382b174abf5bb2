"""Claude Code's policy (transcripts.md 1.6-1.7): auto-compaction at the threshold, and
micro-compaction of old tool results."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from ctx_inspect.agents.claude_code.policy import (
    MICROCOMPACT_KEEP_RECENT,
    POLICY,
    SUMMARY_PREFIX,
    SUMMARY_PREFIX_21,
    ClaudeCodePolicy,
    idle_minutes,
    preserved_tail,
)
from ctx_inspect.agents.claude_code.profile import ClaudeCodeProfile
from ctx_inspect.core.model import Message, MessageKind, Part, PartType, RequestRejected, Role
from ctx_inspect.core.policies import policy_for
from ctx_inspect.core.policies.base import Action, ContextItem, ItemStatus, full_changes
from ctx_inspect.core.replay import Decision, Situation

PROFILE = ClaudeCodeProfile()
TIMED = ClaudeCodeProfile(time_based_microcompact=True)  # the server-side flag on
MARKER = "[Old tool result content cleared]"
NO_SIZE = RequestRejected(reason="prompt is too long")  # a refusal without the provider's count


def estimate(message: Message) -> int:
    return PROFILE.estimate(message)


def text(role: Role, mid: str, body: str = "hello", at: str | None = None) -> Message:
    return Message(id=mid, role=role, parts=(Part(type=PartType.TEXT, text=body),), timestamp=at)


def results(mid: str, *calls: tuple[str, str], at: str | None = None) -> Message:
    """A user message of tool results: (call id, tool name) each."""
    return Message(
        id=mid,
        role=Role.USER,
        kind=MessageKind.TOOL_RESULT,
        timestamp=at,
        parts=tuple(
            Part(type=PartType.TOOL_RESULT, text="r" * 4_000, call_id=call, tool_name=name)
            for call, name in calls
        ),
    )


def item(message: Message, tokens: int | None = None) -> ContextItem:
    return ContextItem(message, estimate(message) if tokens is None else tokens)


class FakeSummarizer:
    def __init__(self, summary: str = "Analysis: we fixed it") -> None:
        self.summary = summary
        self.calls: list[tuple[list[Message], int]] = []

    def summarize(self, messages: Sequence[Message], budget_tokens: int) -> str:
        self.calls.append((list(messages), budget_tokens))
        return self.summary


def sized(tokens: int) -> list[ContextItem]:
    """A conversation whose items total ``tokens`` (the reported usage gives the figures)."""
    return [
        item(text(Role.SYSTEM, "sys", "You are Claude Code."), 20_000),
        item(text(Role.USER, "u1"), 10),
        item(text(Role.ASSISTANT, "a1"), tokens - 20_010),
    ]


def test_registered() -> None:
    assert policy_for("claude-code") is POLICY


def test_auto_compaction_when_the_count_reaches_the_threshold() -> None:
    assert PROFILE.threshold() == 167_000
    summarizer = FakeSummarizer()
    assert POLICY.manage(sized(166_999), PROFILE, estimate, summarizer) == []
    items = sized(167_000)
    (compaction,) = POLICY.manage(items, PROFILE, estimate, summarizer)
    assert compaction.fired and compaction.details["trigger"] == "auto"
    # 2.1 keeps the latest response (and what followed it) verbatim after the summary
    assert [i.id for i in compaction.items] == ["sys", "u1:compact-summary", "a1"]
    summary = compaction.items[1].message
    assert summary.role is Role.USER and summary.kind is MessageKind.SUMMARY
    assert summary.text == SUMMARY_PREFIX_21 + "Analysis: we fixed it"
    assert summary.text.startswith(
        "This session is being continued from a previous conversation that ran out of "
        "context. The summary below covers the earlier portion of the conversation.\n\n"
    )
    assert [c.status for c in full_changes(items, compaction)] == [
        ItemStatus.KEPT,
        ItemStatus.SUMMARIZED,
        ItemStatus.KEPT,
        ItemStatus.ADDED,
    ]
    assert compaction.details["preserved_tail"] == 1
    assert summarizer.calls[0][1] == 20_000  # min(max output, 20,000)
    assert [m.id for m in summarizer.calls[0][0]] == ["u1"]


def test_20_summarises_everything() -> None:
    older = ClaudeCodeProfile(version="2.0.64")
    summarizer = FakeSummarizer()
    (compaction,) = POLICY.manage(sized(160_000), older, estimate, summarizer)
    assert [i.id for i in compaction.items] == ["sys", "a1:compact-summary"]
    assert compaction.items[1].message.text == SUMMARY_PREFIX + "Analysis: we fixed it"
    assert compaction.details["preserved_tail"] == 0


def test_the_tail_is_the_whole_latest_response_and_what_followed() -> None:
    items = [
        item(text(Role.USER, "u1")),
        item(text(Role.ASSISTANT, "a1")),
        item(results("r1", ("c1", "Read"))),
        item(text(Role.ASSISTANT, "a2-thinking")),
        item(text(Role.ASSISTANT, "a2-call")),
        item(results("r2", ("c2", "Read"))),
        item(text(Role.USER, "reminder")),
    ]
    assert preserved_tail(items) == [3, 4, 5, 6]
    assert preserved_tail([item(text(Role.USER, "u"))]) == []


def test_reactive_without_an_auto_compact_window() -> None:
    """2.1.329 with the window unset: no threshold; only a request over the model's window
    (refused by the provider) is compacted, after the refusal."""
    reactive = ClaudeCodeProfile(version="2.1.329")
    assert not reactive.proactive()
    assert reactive.threshold() == 200_000 and reactive.strict_threshold()
    # no check before a request, whatever the figure
    assert not POLICY.manage(sized(250_000), reactive, estimate, FakeSummarizer())
    policy = ClaudeCodePolicy()
    refusal = RequestRejected(tokens=208_031, limit=200_000)
    (refused,) = policy.after_request(
        sized(150_000), reactive, estimate, FakeSummarizer(), figure=150_000, refused=refusal
    )
    assert refused.fired
    assert refused.details["trigger"] == "reactive" and refused.tokens_before == 150_000
    assert "refused the request (208,031 tokens > 200,000)" in refused.reason
    # an answered request: nothing (the check is before the next request)
    assert not policy.after_request(sized(250_000), reactive, estimate, FakeSummarizer(), figure=1)
    # a refusal without the provider's count: the request's own figure stands for it
    (sizeless,) = policy.after_request(
        sized(200_001), reactive, estimate, FakeSummarizer(), figure=200_001, refused=NO_SIZE
    )
    assert "(200,001 tokens > 200,000)" in sizeless.reason
    # 2.0 has no reactive compaction: the refusal is shown and the user compacts
    older = ClaudeCodeProfile(version="2.0.64")
    assert not policy.after_request(
        sized(1_000), older, estimate, FakeSummarizer(), figure=1_000, refused=refusal
    )
    windowed = reactive.model_copy(update={"autocompact_window": 150_000})
    assert windowed.proactive() and windowed.threshold() == 117_000
    (threshold,) = POLICY.manage(sized(117_000), windowed, estimate, FakeSummarizer())
    assert threshold.details["trigger"] == "auto"
    # before 2.1.120 an unset window still meant the 167k threshold
    assert ClaudeCodeProfile(version="2.1.119").threshold() == 167_000


def test_what_replay_cannot_judge() -> None:
    reactive = ClaudeCodeProfile(version="2.1.329")
    policy = ClaudeCodePolicy()
    auto = Decision(9, "compaction", 123_610, 20_763, "auto", trigger="auto")
    seen = Situation(True, 123_610)
    why = policy.undetermined(auto, reactive, seen)
    assert why is not None and "no input given records the refusal" in why
    assert "123,610" in why and "--set autocompact_window=N" in why
    # a refusal is known
    assert policy.undetermined(auto, reactive, Situation(True, 123_610, NO_SIZE)) is None
    manual = Decision(9, "compaction", 123_610, 20_763, "manual", trigger="manual")
    assert policy.undetermined(manual, reactive, seen) is None
    windowed = reactive.model_copy(update={"autocompact_window": 150_000})
    assert policy.undetermined(auto, windowed, seen) is None
    assert policy.undetermined(auto, ClaudeCodeProfile(version="2.0.64"), seen) is None
    assert policy.undetermined(Decision(9, "prune", trigger="auto"), reactive, seen) is None


def test_the_threshold_follows_the_profile() -> None:
    lowered = PROFILE.model_copy(update={"autocompact_pct_override": 50.0})
    assert lowered.threshold() == 90_000
    assert POLICY.manage(sized(90_000), lowered, estimate, FakeSummarizer())
    older = ClaudeCodeProfile(version="2.0.64")
    assert older.threshold() == 155_000
    assert POLICY.manage(sized(155_000), older, estimate, FakeSummarizer())
    assert not POLICY.manage(sized(154_999), older, estimate, FakeSummarizer())


def test_manual_and_failed_compaction() -> None:
    small = sized(30_000)
    assert not POLICY.compact(small, PROFILE, estimate, FakeSummarizer()).fired
    manual = POLICY.compact(small, PROFILE, estimate, FakeSummarizer(), force=True)
    assert manual.fired and manual.details["trigger"] == "manual"
    failed = POLICY.compact(sized(180_000), PROFILE, estimate, FakeSummarizer(""), force=True)
    assert not failed.fired and failed.details["failed"] is True


# -- micro-compaction ----------------------------------------------------------------------


def tool_run(n: int, name: str = "Read") -> list[ContextItem]:
    out: list[ContextItem] = [item(text(Role.USER, "task", at="2026-01-01T10:00:00Z"))]
    for k in range(n):
        out.append(item(text(Role.ASSISTANT, f"a{k}", at="2026-01-01T10:00:00Z")))
        out.append(item(results(f"r{k}", (f"c{k}", name), at="2026-01-01T10:00:00Z")))
    return out


def test_microcompaction_keeps_the_last_five_compactable_results() -> None:
    items = tool_run(8)
    result = POLICY.prune(items, PROFILE, estimate, force=True)
    assert MICROCOMPACT_KEEP_RECENT == 5
    cleared = [c.id for c in result.changes if c.status is ItemStatus.PRUNED]
    assert cleared == ["r0", "r1", "r2"]
    assert result.items[2].message.parts[0].text == MARKER
    assert result.items[2].message.parts[0].call_id == "c0"
    assert result.tokens_after < result.tokens_before
    assert not POLICY.prune(result.items, PROFILE, estimate, force=True).fired


def test_other_tools_are_neither_counted_nor_cleared() -> None:
    items = [
        *tool_run(6),
        item(text(Role.ASSISTANT, "ax")),
        item(results("task-out", ("cx", "Task"), ("cy", "mcp__github__search"))),
    ]
    result = POLICY.prune(items, PROFILE, estimate, force=True)
    assert [c.id for c in result.changes if c.status is ItemStatus.PRUNED] == ["r0"]


def test_each_tool_result_block_is_a_unit() -> None:
    batch = results("batch", *((f"b{k}", "Bash") for k in range(7)))
    result = POLICY.prune([item(text(Role.USER, "u")), item(batch)], PROFILE, estimate, force=True)
    parts = result.items[1].message.parts
    assert [p.text == MARKER for p in parts] == [True, True] + [False] * 5


def test_the_time_trigger() -> None:
    def session(last_user_at: str | None) -> list[ContextItem]:
        return [
            *tool_run(7),
            item(text(Role.ASSISTANT, "done", at="2026-01-01T10:00:00Z")),
            item(text(Role.USER, "back", at=last_user_at)),
        ]

    assert idle_minutes(session("2026-01-01T11:00:00Z")) == 60
    assert not POLICY.prune(session("2026-01-01T11:00:00Z"), TIMED, estimate).fired
    assert POLICY.prune(session("2026-01-01T11:00:01Z"), TIMED, estimate).fired
    no_time = POLICY.prune(session(None), TIMED, estimate)
    assert not no_time.fired and "no timestamps" in no_time.reason
    # Claude Code's default: the trigger is off, whatever the gap
    off = POLICY.prune(session("2026-01-01T12:00:00Z"), PROFILE, estimate)
    assert not off.fired and "time_based_microcompact" in off.reason
    assert POLICY.manage(session("2026-01-01T12:00:00Z"), PROFILE, estimate, FakeSummarizer()) == []
    (micro,) = POLICY.manage(session("2026-01-01T12:00:00Z"), TIMED, estimate, FakeSummarizer())
    assert micro.action is Action.PRUNE and micro.fired
    assert POLICY.manage(session("2026-01-01T10:30:00Z"), TIMED, estimate, FakeSummarizer()) == []


def test_microcompaction_before_auto_compaction() -> None:
    items = [
        *tool_run(7),
        item(text(Role.ASSISTANT, "done", at="2026-01-01T10:00:00Z"), 170_000),
        item(text(Role.USER, "back", at="2026-01-01T12:00:00Z")),
    ]
    micro, compaction = POLICY.manage(items, TIMED, estimate, FakeSummarizer())
    assert micro.fired and compaction.fired
    assert compaction.tokens_before == micro.tokens_after
    combined = POLICY.compact(items, TIMED, estimate, FakeSummarizer())
    # the summary, then the latest response and the prompt after it, kept verbatim
    assert combined.fired and [i.id for i in combined.items][1:] == ["done", "back"]
    assert combined.tokens_before == sum(i.tokens for i in items)


def test_no_truncation_modelled() -> None:
    items = tool_run(1)
    assert POLICY.admit(items[-1], items[:-1], PROFILE, estimate) is None
    assert not POLICY.truncate(items, PROFILE, estimate, force=True).fired


@settings(max_examples=50, deadline=None)
@given(st.lists(st.sampled_from(["Read", "Bash", "Task", "Grep"]), max_size=20))
def test_microcompaction_properties(names: list[str]) -> None:
    items = [item(text(Role.USER, "u"))]
    for k, name in enumerate(names):
        items.append(item(results(f"r{k}", (f"c{k}", name))))
    result = POLICY.prune(items, PROFILE, estimate, force=True)
    assert result.tokens_after <= result.tokens_before
    compactable = [k for k, name in enumerate(names) if name != "Task"]
    kept = set(compactable[-MICROCOMPACT_KEEP_RECENT:])
    for k, name in enumerate(names):
        cleared = result.items[k + 1].message.parts[0].text == MARKER
        assert cleared == (name != "Task" and k not in kept)
    assert not POLICY.prune(result.items, PROFILE, estimate, force=True).fired
