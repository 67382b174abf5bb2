"""OpenCode 1.18's policy: the prune at the end of a loop (opt-in), compaction after a request
whose count reaches usable (or that the provider refused), with a verbatim tail."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from ctx_inspect.agents.opencode.policy import (
    COMPACTION_REQUEST_TEXT,
    CONTINUE_TEXT,
    POLICY,
    OpenCodePolicy,
    model_json_chars,
    scan,
    select_tail,
)
from ctx_inspect.agents.opencode.profile import OpenCodeProfile
from ctx_inspect.core.model import Message, MessageKind, Part, PartType, RequestRejected, Role
from ctx_inspect.core.policies import policy_for
from ctx_inspect.core.policies.base import (
    Action,
    ContextItem,
    ItemChange,
    ItemStatus,
    full_changes,
)

PROFILE = OpenCodeProfile()
PRUNING = OpenCodeProfile(prune=True)  # compaction.prune: true (off by default in 1.18)
HOOKS = OpenCodePolicy()  # the policy with the hooks replay calls (after a request, loop end)
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
    found = POLICY.prune(items, PRUNING, estimate)
    assert (found.details["total"], found.details["pruned"]) == (60_000, 20_000)
    assert not found.fired and "20,000 ≤ minimum 20,000" in found.reason
    crossing = ctx(
        user("uA"),
        tool("old", result(20_000, call="o")),
        tool("recent", result(40_001, call="r")),
        *protected_tail(),
    )
    pruned = POLICY.prune(crossing, PRUNING, estimate)
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
    pruned = POLICY.prune(items, PRUNING, estimate)
    assert pruned.details["total"] == 70_000
    assert pruned.details["skipped_protected"] == 1
    changes = by_id(full_changes(items, pruned))
    assert changes["skill"].status is ItemStatus.KEPT
    assert changes["old"].status is ItemStatus.PRUNED
    custom = PRUNING.model_copy(update={"protected_tools": ()})
    assert by_id(full_changes(items, POLICY.prune(items, custom, estimate)))["skill"].status is (
        ItemStatus.PRUNED
    )


def test_an_assistant_summary_stops_the_scan() -> None:
    before = [user("u0"), tool("ancient", result(90_000, call="a"))]
    after = [user("uA"), tool("recent", result(35_000, call="r")), *protected_tail()]
    summary = assistant("summary", "what we did", MessageKind.SUMMARY)
    stopped = POLICY.prune(ctx(*before, summary, *after), PRUNING, estimate)
    assert stopped.details["stopped_by"] == "summary"
    assert stopped.details["total"] == 35_000 and not stopped.fired
    # a user-role summary (Claude Code style) does not stop OpenCode's scan
    user_summary = Message(
        id="s",
        role=Role.USER,
        kind=MessageKind.SUMMARY,
        parts=(Part(type=PartType.TEXT, text="summary"),),
    )
    assert POLICY.prune(ctx(*before, user_summary, *after), PRUNING, estimate).fired


def test_an_already_compacted_part_stops_the_scan() -> None:
    items = ctx(
        user("uA"),
        tool("ancient", result(90_000, call="a")),
        tool("cleared", result(0, call="x", text=MARKER)),
        tool("recent", result(35_000, call="r")),
        *protected_tail(),
    )
    plan = scan(items, PRUNING)
    assert plan.stopped_by == "compacted" and plan.total == 35_000
    assert not POLICY.prune(items, PRUNING, estimate).fired
    without = [i for i in items if i.id != "cleared"]
    assert POLICY.prune(without, PRUNING, estimate).fired


def test_only_completed_outputs_count() -> None:
    items = ctx(
        user("uA"),
        tool("old", result(25_000, call="o")),
        tool("failed", result(90_000, call="f", error=True)),
        tool("recent", result(40_000, call="r")),
        *protected_tail(),
    )
    pruned = POLICY.prune(items, PRUNING, estimate)
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
    pruned = POLICY.prune(items, PRUNING, estimate)
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
    assert scan(items, PRUNING).turns == 2


def test_prune_is_opt_in_and_runs_at_the_end_of_a_loop() -> None:
    items = ctx(
        user("uA"),
        tool("old", result(30_000, call="o")),
        tool("recent", result(40_000, call="r")),
        *protected_tail(),
    )
    assert PROFILE.prune is False  # 1.18's default: compaction.prune is off
    assert OpenCodePolicy().finish(items, PROFILE, estimate) == []
    assert not POLICY.prune(items, PROFILE, estimate).fired
    assert "off (the default)" in POLICY.prune(items, PROFILE, estimate).reason
    assert POLICY.prune(items, PROFILE, estimate, force=True).fired  # by hand: always
    (at_end,) = OpenCodePolicy().finish(items, PRUNING, estimate)
    assert at_end.fired and at_end.action is Action.PRUNE
    # nothing is decided from the context about to be sent, even far over every budget
    assert POLICY.manage(items, PRUNING, estimate, FakeSummarizer()) == []


def test_every_user_message_counts_and_a_summary_inside_the_last_two_does_not_stop() -> None:
    """The walk counts compaction requests and synthetic messages as user messages, and it
    checks for a summary only once two have been seen (a prune across a compaction)."""
    request = Message(
        id="req",
        role=Role.USER,
        kind=MessageKind.META,
        parts=(Part(type=PartType.TEXT, text=COMPACTION_REQUEST_TEXT),),
    )
    cont = Message(
        id="cont",
        role=Role.USER,
        kind=MessageKind.ATTACHMENT,
        parts=(Part(type=PartType.TEXT, text=CONTINUE_TEXT),),
    )
    items = ctx(
        user("uA"),
        tool("old", result(30_000, call="o")),
        tool("recent", result(40_000, call="r")),
        request,
        assistant("summary", "what we did", MessageKind.SUMMARY),
        cont,
        assistant("last"),
    )
    plan = scan(items, PRUNING)
    assert plan.turns == 3 and plan.stopped_by is None
    assert (plan.total, plan.pruned) == (70_000, 30_000)
    # the same history with the summary before the second user message from the end stops
    late = ctx(
        user("uA"),
        tool("old", result(30_000, call="o")),
        assistant("summary", "what we did", MessageKind.SUMMARY),
        user("uB"),
        tool("recent", result(40_000, call="r")),
        user("uC"),
    )
    assert scan(late, PRUNING).stopped_by == "summary"


def test_pruning_the_hidden_history_frees_nothing() -> None:
    hidden = Message(
        id="gone",
        role=Role.TOOL,
        kind=MessageKind.TOOL_RESULT,
        parts=(result(60_000, call="g"),),
        visible=False,
    )
    items = [ContextItem(user("uA"), 2), ContextItem(hidden, 0), *ctx(*protected_tail())]
    pruned = POLICY.prune(items, PRUNING, estimate)
    assert pruned.fired and pruned.details["pruned"] == 60_000  # the part that crossed 40,000
    assert pruned.tokens_after == pruned.tokens_before
    assert pruned.items[1].tokens == 0 and pruned.items[1].message.parts[0].text == MARKER


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


def test_compaction_when_the_last_request_reaches_usable() -> None:
    assert PROFILE.usable() == 168_000
    summarizer = FakeSummarizer()
    items = _sized(1_000)  # the context does not matter: the answered request's count does
    assert HOOKS.after_request(items, PROFILE, estimate, summarizer, figure=167_999) == []
    (compaction,) = HOOKS.after_request(items, PROFILE, estimate, summarizer, figure=168_000)
    assert compaction.fired and compaction.details["trigger"] == "auto"
    assert compaction.details["decided_on"] == 168_000
    assert "count 168,000 ≥ usable 168,000" in compaction.reason
    shown = [(i.message.role, i.message.kind) for i in compaction.items if i.message.visible]
    assert shown == [
        (Role.SYSTEM, MessageKind.MESSAGE),
        (Role.USER, MessageKind.META),
        (Role.ASSISTANT, MessageKind.SUMMARY),
        (Role.USER, MessageKind.ATTACHMENT),
    ]
    texts = [i.message.text for i in compaction.items if i.message.visible]
    assert texts[1:] == [COMPACTION_REQUEST_TEXT, "## Goal\nship it", CONTINUE_TEXT]
    # the summarised head stays in the history, hidden and weightless
    hidden = [i for i in compaction.items if not i.message.visible]
    assert [(i.id, i.tokens) for i in hidden] == [("u1", 0), ("a1", 0)]
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
    off = PROFILE.model_copy(update={"auto": False})
    assert HOOKS.after_request(items, off, estimate, summarizer, figure=200_000) == []


def test_a_refused_request_brings_an_overflow_compaction() -> None:
    refused = RequestRejected(reason="maximum context length is 55000 tokens", limit=55_000)
    items = ctx(user("u1", "read the logs"), assistant("a1"), user("u2", "and now this"))
    (overflow,) = HOOKS.after_request(
        items, PROFILE, estimate, FakeSummarizer(), figure=10, refused=refused
    )
    assert overflow.details["trigger"] == "overflow"
    assert "refused the request as too long (maximum context length" in overflow.reason
    shown = [i for i in overflow.items if i.message.visible]
    # the last user message is sent again after the summary, as a copy OpenCode writes
    assert [i.message.text for i in shown] == [
        COMPACTION_REQUEST_TEXT,
        "## Goal\nship it",
        "and now this",
    ]
    assert shown[-1].id == "u2:opencode-replay" and shown[-1].message.kind is MessageKind.ATTACHMENT
    off = PROFILE.model_copy(update={"auto": False})
    assert (
        HOOKS.after_request(items, off, estimate, FakeSummarizer(), figure=10, refused=refused)
        == []
    )


def test_the_compaction_request_already_there_is_used() -> None:
    """At the recording's own compaction its request message is in the context: the compaction
    uses it, and leaves the continuation to the recording."""
    request = Message(
        id="req",
        role=Role.USER,
        kind=MessageKind.META,
        parts=(Part(type=PartType.TEXT, text=COMPACTION_REQUEST_TEXT),),
    )
    items = ctx(user("u1", "hi"), assistant("a1"), request)
    (compaction,) = HOOKS.after_request(items, PROFILE, estimate, FakeSummarizer(), figure=170_000)
    shown = [i.id for i in compaction.items if i.message.visible]
    assert shown == ["req", "a1:opencode-summary"]  # no continuation of its own


def test_manual_compaction_has_no_continue_text_and_auto_off_never_compacts() -> None:
    manual = POLICY.compact(_sized(1_000), PROFILE, estimate, FakeSummarizer(), force=True)
    assert manual.fired and manual.items[-1].message.kind is MessageKind.SUMMARY
    assert manual.details["trigger"] == "manual"
    assert CONTINUE_TEXT not in [i.message.text for i in manual.items]
    off = PROFILE.model_copy(update={"auto": False})
    over = _sized(170_000)
    assert "auto is off" in POLICY.compact(over, off, estimate, FakeSummarizer()).reason
    assert POLICY.compact(over, PROFILE, estimate, FakeSummarizer()).fired
    assert not POLICY.compact(_sized(1_000), PROFILE, estimate, FakeSummarizer()).fired


def test_empty_summary_leaves_the_context() -> None:
    items = _sized(170_000)
    failed = POLICY.compact(items, PROFILE, estimate, FakeSummarizer(""), force=True)
    assert not failed.fired and failed.items == items


# -- the verbatim tail -----------------------------------------------------------------------


def read(mid: str, chars: int) -> list[Message]:
    """An assistant step that reads a file of ``chars`` characters, and its output."""
    call = Part(type=PartType.TOOL_CALL, tool_name="read", call_id=f"c-{mid}", arguments="{}")
    return [
        Message(id=mid, role=Role.ASSISTANT, kind=MessageKind.TOOL_CALL, parts=(call,)),
        tool(f"{mid}-out", result(0, name="read", call=f"c-{mid}", text="x" * chars)),
    ]


def tail_of(items: list[ContextItem], profile: OpenCodeProfile = PROFILE) -> str | None:
    start = select_tail(items, list(range(len(items))), profile).start
    return items[start].id if start is not None else None


def test_the_tail_budget_follows_the_usable_window() -> None:
    assert PROFILE.preserve_recent() == 15_000  # min(15000, 168000 // 4)
    card = OpenCodeProfile(context_window=100_000, output_limit=8_000)
    assert (card.usable(), card.preserve_recent()) == (92_000, 15_000)
    small = OpenCodeProfile(context_window=64_000, output_limit=8_000)
    assert small.preserve_recent() == 14_000  # floor(56000 × 0.25)
    tiny = OpenCodeProfile(context_window=10_000, output_limit=8_000)
    assert tiny.preserve_recent() == 2_000  # never below 2,000
    assert OpenCodeProfile(preserve_recent_tokens=500).preserve_recent() == 500


def test_whole_turns_are_kept_while_they_fit_then_one_is_split() -> None:
    # turns of about 10,500 tokens of reads each; the budget is 15,000
    items = ctx(
        user("t1"),
        *read("r1", 42_000),
        user("t2"),
        *read("r2", 20_000),
        *read("r3", 20_000),
        *read("r4", 20_000),
    )
    # t2 does not fit whole: it is split at the latest step from which the rest fits
    assert tail_of(items) == "r3"
    small = ctx(user("t1"), *read("r1", 60_000), user("t2"), *read("r2", 4_000))
    assert tail_of(small) == "t2"  # t2 fits whole, t1 (about 15,000 more) does not
    both = ctx(user("t1"), *read("r1", 8_000), user("t2"), *read("r2", 4_000))
    assert tail_of(both) is None  # everything fits: the tail would start at the first message
    limited = OpenCodeProfile(tail_turns=1)
    assert tail_of(both, limited) == "t2"
    assert tail_of(both, OpenCodeProfile(tail_turns=0)) is None


def test_a_tool_result_is_never_where_the_tail_starts() -> None:
    items = ctx(user("t1"), *read("r1", 70_000), *read("r2", 50_000))
    assert tail_of(items) == "r2"  # the turn is split where an OpenCode message starts
    call = Part(type=PartType.TOOL_CALL, tool_name="read", call_id="c", arguments="a" * 4_000)
    wordy = Message(id="r2", role=Role.ASSISTANT, kind=MessageKind.TOOL_CALL, parts=(call,))
    output = tool("r2-out", result(0, name="read", call="c", text="x" * 56_000))
    # the output alone would fit in 15,000, the step it belongs to does not
    assert tail_of(ctx(user("t1"), *read("r1", 70_000), wordy, output)) is None
    assert model_json_chars(output) > 56_000


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
    pruned = POLICY.prune(items, PRUNING, estimate, force=True)
    assert pruned.tokens_after <= pruned.tokens_before
    users = [i for i, m in enumerate(messages) if m.role is Role.USER]
    boundary = users[-2] if len(users) >= 2 else 0
    for i, change in enumerate(full_changes(items, pruned)):
        if i > boundary or messages[i].tool_name == "skill":
            assert change.status is ItemStatus.KEPT
    again = POLICY.prune(pruned.items, PRUNING, estimate, force=True)
    assert not again.fired
