"""tiancaiamao/ai's policy: trigger, token-budget split, digest, tool summaries, output limits."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctx_inspect.agents.aiagent.profile import AiAgentProfile
from ctx_inspect.agents.goagent.messages import digest_line, heuristic_tool_summary
from ctx_inspect.agents.goagent.policy import POLICY
from ctx_inspect.agents.goagent.profile import GoAgentProfile
from ctx_inspect.agents.goagent.tool_output import limit_tool_output
from ctx_inspect.agents.goagent.trigger import context_tokens, derived_limits, split_by_token_budget
from ctx_inspect.core.model import Message, MessageKind, Part, PartType, Role
from ctx_inspect.core.policies.base import (
    Action,
    ContextItem,
    ContextList,
    ItemStatus,
    Policy,
    full_changes,
)
from ctx_inspect.errors import ConfigError, InspectorError

_: Policy = POLICY  # the module satisfies the policy contract

# no window: the 8,000 MaxTokens fallback; keep-recent 4,000. The library's own compactor
# (the split by the keep-recent budget); the session compactor's tests set ``SESSION``.
PROFILE = GoAgentProfile(compactor="in_memory")
SESSION = GoAgentProfile()


def est(message: Message) -> int:
    return PROFILE.estimate(message)


class FailingSummarizer:
    def summarize(self, messages: Sequence[Message], budget_tokens: int) -> str:
        raise InspectorError("summarizer failed", "context deadline exceeded")


class FakeSummarizer:
    def __init__(self, text: str = "SUMMARY") -> None:
        self.text = text
        self.calls: list[tuple[list[Message], int]] = []

    def summarize(self, messages: Sequence[Message], budget_tokens: int) -> str:
        self.calls.append((list(messages), budget_tokens))
        return self.text


def text_msg(mid: str, role: Role, text: str, visible: bool = True) -> Message:
    return Message(id=mid, role=role, parts=(Part(type=PartType.TEXT, text=text),), visible=visible)


def tool_msg(mid: str, text: str, name: str = "read", error: bool = False) -> Message:
    part = Part(
        type=PartType.TOOL_RESULT, text=text, tool_name=name, call_id=f"call-{mid}", is_error=error
    )
    return Message(id=mid, role=Role.TOOL, kind=MessageKind.TOOL_RESULT, parts=(part,))


def it(message: Message, tokens: int | None = None) -> ContextItem:
    return ContextItem(message, est(message) if tokens is None else tokens)


def user(mid: str, tokens: int, text: str = "") -> ContextItem:
    return it(text_msg(mid, Role.USER, text or f"{mid} says"), tokens)


def assistant(mid: str, tokens: int, visible: bool = True) -> ContextItem:
    return it(text_msg(mid, Role.ASSISTANT, f"{mid} answers", visible), tokens)


def tool(mid: str, tokens: int = 10, text: str = "", **kw: object) -> ContextItem:
    return it(tool_msg(mid, text or f"output of {mid}", **kw), tokens)  # type: ignore[arg-type]


# -- trigger -----------------------------------------------------------------------------------


def test_compaction_triggers_when_the_estimate_reaches_the_limit() -> None:
    at = [user("u", 4_000), assistant("a", 3_000), tool("t", 1_000)]
    below = [user("u", 4_000), assistant("a", 3_000), tool("t", 999)]
    assert [r.action for r in POLICY.manage(at, PROFILE, est, FakeSummarizer())] == [Action.COMPACT]
    assert POLICY.manage(below, PROFILE, est, FakeSummarizer()) == []
    not_fired = POLICY.compact(below, PROFILE, est, FakeSummarizer())
    assert not not_fired.fired and "estimated 7,999 < limit 8,000" in not_fired.reason


def test_the_estimate_starts_from_the_last_visible_assistant_usage() -> None:
    items = [
        user("u", 5_000),
        assistant("a1", 100),
        tool("t", 500),
        assistant("a2", 100, visible=False),  # hidden: its usage is not used
        tool("t2", 400),
    ]
    reported = {"a1": 7_000, "a2": 99_999}
    assert context_tokens(items, reported) == (7_900, "reported", "a1")
    assert context_tokens(items) == (6_000, "estimated", None)  # the heuristic fallback
    assert POLICY.manage(items, PROFILE, est, FakeSummarizer(), reported=reported) == []
    reported["a1"] = 7_100  # 7,100 + 500 + 400 = 8,000 ≥ 8,000
    (result,) = POLICY.manage(items, PROFILE, est, FakeSummarizer(), reported=reported)
    assert result.details["context_tokens"] == 8_000
    assert result.details["tokens_origin"] == "reported"


def test_the_limit_is_the_window_minus_the_reserve_when_the_window_is_known() -> None:
    profile = GoAgentProfile(compactor="in_memory", context_window=100_000)
    items = [user("u", 83_615), assistant("a", 1)]
    assert POLICY.compact(items, profile, est, FakeSummarizer()).details["limit"] == 83_616
    assert POLICY.compact(items, profile, est, FakeSummarizer()).fired


def test_without_a_token_limit_the_message_count_triggers() -> None:
    profile = GoAgentProfile(compactor="in_memory", max_tokens=0)
    items = [user(f"u{i}", 10**6) for i in range(49)]
    assert not POLICY.compact(items, profile, est, FakeSummarizer()).fired
    fired = POLICY.compact([*items, user("u49", 1)], profile, est, FakeSummarizer())
    assert fired.fired and "50 messages ≥ max 50" in fired.reason


def test_auto_compaction_off_only_stops_the_automatic_path() -> None:
    profile = GoAgentProfile(compactor="in_memory", auto_compact=False)
    items = [user("u", 9_000), assistant("a", 10)]
    assert POLICY.manage(items, profile, est, FakeSummarizer()) == []
    assert POLICY.compact(items, profile, est, FakeSummarizer(), force=True).fired


# -- split -------------------------------------------------------------------------------------


def test_at_least_one_message_is_kept_even_when_it_alone_exceeds_the_budget() -> None:
    assert split_by_token_budget([10, 10, 50_000], 4_000) == 2
    items = [user("u", 100), assistant("a", 100), user("huge", 50_000)]
    result = POLICY.compact(items, PROFILE, est, FakeSummarizer())
    assert result.fired
    assert [i.id for i in result.items][1:] == ["huge"]
    assert result.details["recent_messages"] == 1


def test_the_keep_recent_budget_is_clamped_to_half_the_limit() -> None:
    assert PROFILE.keep_recent_tokens == 20_000
    items = [user(f"m{i}", 1_000) for i in range(10)]  # 10,000 ≥ 8,000
    result = POLICY.compact(items, PROFILE, est, FakeSummarizer())
    assert result.details["keep_recent_tokens"] == 4_000  # 8,000 / 2, not 20,000
    assert [i.id for i in result.items[1:]] == ["m6", "m7", "m8", "m9"]
    assert split_by_token_budget([1_000] * 10, 20_000) == 0  # unclamped: nothing to summarize


def test_the_split_counts_messages_when_the_token_budget_is_zero() -> None:
    profile = GoAgentProfile(compactor="in_memory", keep_recent_tokens=0, keep_recent=3)
    items = [user(f"m{i}", 1_000) for i in range(10)]
    result = POLICY.compact(items, profile, est, FakeSummarizer())
    assert [i.id for i in result.items[1:]] == ["m7", "m8", "m9"]
    zero = GoAgentProfile(
        compactor="in_memory", keep_recent_tokens=0, keep_recent=0
    )  # 0 means the default 5
    result = POLICY.compact(items, zero, est, FakeSummarizer())
    assert len(result.items) == 1 + 5


def test_nothing_is_compacted_when_every_message_fits_the_budget() -> None:
    items = [user("u", 100), assistant("a", 100)]
    result = POLICY.compact(items, PROFILE, est, FakeSummarizer(), force=True)
    assert not result.fired and "fits the keep-recent budget" in result.reason


# -- the rebuilt context -------------------------------------------------------------------------


def test_the_summary_comes_first_then_the_recent_messages() -> None:
    system = it(text_msg("sys", Role.SYSTEM, "you are an agent"), 50_000)
    items = [system, user("u", 5_000), assistant("a", 3_500), user("u2", 1_000)]
    summarizer = FakeSummarizer("the gist")
    result = POLICY.compact(items, PROFILE, est, summarizer)
    assert result.fired and result.action is Action.COMPACT
    assert [i.id for i in result.items] == ["sys", "goagent:summary:a", "u2"]  # 4,500 > 4,000
    summary = result.items[1].message
    assert summary.role is Role.USER and summary.kind is MessageKind.SUMMARY
    assert summary.text == "[Previous conversation summary]\n\nthe gist"
    assert [(c.id, c.status) for c in full_changes(items, result)] == [
        ("sys", ItemStatus.KEPT),
        ("u", ItemStatus.SUMMARIZED),
        ("a", ItemStatus.SUMMARIZED),
        ("u2", ItemStatus.KEPT),
        ("goagent:summary:a", ItemStatus.ADDED),
    ]
    assert result.details["context_tokens"] == 9_500  # the system prompt is not counted
    assert result.tokens_after == 50_000 + result.items[1].tokens + 1_000


def test_the_summarizer_sees_visible_messages_with_tool_output_clipped() -> None:
    long_output = "H" * 1_500 + "T" * 1_500
    hidden = it(text_msg("old", Role.USER, "archived", visible=False), 0)
    items = [hidden, tool("t", 9_000, long_output), user("u2", 100)]
    summarizer = FakeSummarizer()
    result = POLICY.compact(items, PROFILE, est, summarizer)
    (messages, budget), *_ = summarizer.calls
    assert budget == 800
    assert [m.id for m in messages] == ["t"]
    assert messages[0].text == "H" * 1_200 + "\n... (truncated) ...\n" + "T" * 600
    assert result.changes[0].status is ItemStatus.DROPPED  # hidden, left out


def test_recent_tool_results_beyond_the_cutoff_are_archived_with_a_digest() -> None:
    recent = [tool(f"t{i}", 10, f"line {i}\nmore") for i in range(12)]
    items = [user("u", 9_000), *recent]
    result = POLICY.compact(items, PROFILE, est, FakeSummarizer())
    by_id = {i.id: i for i in result.items}
    for old in ("t0", "t1"):
        archived = by_id[old].message
        assert not archived.visible and archived.kind is MessageKind.ARCHIVED
        assert archived.text == f"line {old[1:]}\nmore"  # kept for the user
        assert by_id[old].tokens == 0
    assert all(by_id[f"t{i}"].message.visible for i in range(2, 12))
    digest = result.items[-1].message
    assert digest.role is Role.USER and digest.kind is MessageKind.TOOL_SUMMARY
    assert digest.visible
    assert digest.text == (
        "[Compaction tool digest]\n- read (ok): line 0 more\n- read (ok): line 1 more"
    )
    statuses = {c.id: c.status for c in full_changes(items, result)}
    assert statuses["t0"] is ItemStatus.ARCHIVED and statuses["t2"] is ItemStatus.KEPT
    assert statuses[digest.id] is ItemStatus.ADDED
    assert result.details["archived_in_recent"] == 2


def test_digest_lines() -> None:
    long = "x" * 250
    assert digest_line(tool_msg("a", "one\ntwo\n")) == "- read (ok): one two"
    assert digest_line(tool_msg("b", long, name=" ")) == "- unknown (ok): " + "x" * 200
    assert digest_line(tool_msg("c", "  ", name="bash", error=True)) == (
        "- bash (error): (empty output)"
    )


def test_a_failed_summary_leaves_the_context_as_it_was() -> None:
    items = [user("u", 9_000), assistant("a", 10)]
    result = POLICY.compact(items, PROFILE, est, FakeSummarizer("  \n"))
    assert not result.fired and result.items == items
    assert "compaction failed" in result.reason
    failed = POLICY.compact(items, PROFILE, est, FailingSummarizer())
    assert not failed.fired and "context deadline exceeded" in failed.reason


def test_a_failing_llm_tool_summary_falls_back_to_the_heuristic() -> None:
    items = [tool(f"t{i}", 10) for i in range(11)]
    (result,) = POLICY.manage(items, PROFILE, est, FailingSummarizer())
    assert 'Tool "read" finished with status ok' in result.items[-1].message.text
    assert result.details["heuristic_summaries"] == 1


# -- per-turn tool summaries -------------------------------------------------------------------


def test_tool_results_beyond_the_cutoff_are_archived_and_summarized_each_turn() -> None:
    items = [user("u", 10), *[tool(f"t{i}", 10) for i in range(12)]]
    summarizer = FakeSummarizer("two facts")
    (result,) = POLICY.manage(items, PROFILE, est, summarizer)
    assert result.action is Action.PRUNE and result.fired
    assert [i.id for i in result.items[:13]] == [i.id for i in items]  # all still present
    assert not result.items[1].message.visible and not result.items[2].message.visible
    assert result.items[1].message.kind is MessageKind.ARCHIVED
    added = result.items[13:]
    assert [a.message.text for a in added] == [
        "[Tool output summary]\nTool: read\nCall ID: call-t0\nStatus: ok\ntwo facts",
        "[Tool output summary]\nTool: read\nCall ID: call-t1\nStatus: ok\ntwo facts",
    ]
    assert all(a.message.kind is MessageKind.TOOL_SUMMARY for a in added)
    assert all(a.message.role is Role.USER for a in added)
    assert len(summarizer.calls) == 2


def test_the_heuristic_summary_keeps_head_and_tail() -> None:
    message = tool_msg("t", "A" * 600 + "B" * 600, name="grep", error=True)
    assert heuristic_tool_summary(message, 800) == (
        'Tool "grep" finished with status error. Output excerpt:\n'
        + "A" * 533
        + "\n... (truncated) ...\n"
        + "B" * 267
    )


def test_an_empty_llm_summary_falls_back_to_the_heuristic_and_long_ones_are_clipped() -> None:
    items = [*[tool(f"t{i}", 10) for i in range(11)]]
    (fallback,) = POLICY.manage(items, PROFILE, est, FakeSummarizer(""))
    assert 'Tool "read" finished with status ok' in fallback.items[-1].message.text
    (clipped,) = POLICY.manage(items, PROFILE, est, FakeSummarizer("z" * 5_000))
    assert clipped.items[-1].message.text.endswith("\n" + "z" * 1_200)


def test_tool_summaries_follow_the_strategy() -> None:
    items = [*[tool(f"t{i}", 10) for i in range(11)]]
    off = GoAgentProfile(tool_summary_strategy="off")
    assert POLICY.manage(items, off, est, FakeSummarizer()) == []
    assert not POLICY.prune(items, off, est).fired
    forced = POLICY.prune(items, off, est, force=True)
    assert forced.fired and "finished with status ok" in forced.items[-1].message.text
    heuristic = GoAgentProfile(tool_summary_strategy="heuristic")
    summarizer = FakeSummarizer()
    POLICY.manage(items, heuristic, est, summarizer)
    assert summarizer.calls == []


def test_tool_summaries_are_idempotent() -> None:
    items = [*[tool(f"t{i}", 10) for i in range(15)]]
    first = POLICY.prune(items, PROFILE, est)
    assert first.fired and first.details["archived"] == 5
    second = POLICY.prune(first.items, PROFILE, est, force=True)
    assert not second.fired and "≤ cutoff 10" in second.reason


# -- tool output limits ------------------------------------------------------------------------


def test_lines_are_cut_head_and_tail_with_a_notice() -> None:
    profile = GoAgentProfile(tool_output_max_lines=4)
    text = "\n".join(f"l{i}" for i in range(10))
    limited = limit_tool_output(text, profile)
    assert limited is not None and limited.truncated_by == "lines"
    # The shown figures are measured on the cut text, marker line included (hence 39 > 29).
    assert limited.text == (
        "l0\nl1\n... [truncated 6 lines] ...\nl8\nl9"
        "\n\n[tool output truncated: showing 5/10 lines, 39B/29B bytes, 39/29 chars]"
    )


def test_head_mode_and_small_line_limits_keep_the_head() -> None:
    text = "\n".join(f"l{i}" for i in range(10))
    head_mode = GoAgentProfile(tool_output_max_lines=4, tool_output_truncate_mode="head")
    head = limit_tool_output(text, head_mode)
    assert head is not None and head.text.startswith("l0\nl1\nl2\nl3\n\n[tool output truncated")
    three = limit_tool_output(text, GoAgentProfile(tool_output_max_lines=3))
    assert three is not None and three.text.startswith("l0\nl1\nl2\n\n")


def test_runes_then_bytes_are_cut_without_splitting_a_character() -> None:
    chars = limit_tool_output("é" * 100, GoAgentProfile(tool_output_max_chars=10))
    assert chars is not None and chars.truncated_by == "chars"
    assert chars.text.startswith("é" * 10 + "\n\n")
    assert "showing 1/1 lines, 20B/200B bytes, 10/100 chars" in chars.text
    data = limit_tool_output("é" * 100, GoAgentProfile(tool_output_max_bytes=11))
    assert data is not None and data.truncated_by == "bytes"
    assert data.text.startswith("é" * 5 + "\n\n")  # 5 × 2 bytes; the 6th would split


def test_very_large_outputs_are_spilled_but_no_file_is_written() -> None:
    text = "w" * 2_001
    limited = limit_tool_output(text, GoAgentProfile(tool_output_large_threshold=2_000))
    assert limited is not None and limited.spilled
    sha = hashlib.sha256(text.encode()).hexdigest()
    assert limited.text.startswith("[tool output too large: 2001 chars]\nSaved to: ")
    assert "(simulated" in limited.text
    assert limited.text.endswith(f"\nSHA256: {sha}")


def test_admit_applies_the_limits_to_tool_outputs_only() -> None:
    profile = GoAgentProfile(tool_output_max_lines=4)
    big = it(tool_msg("t", "\n".join("x" * 10 for _ in range(50))))
    result = POLICY.admit(big, [user("u", 5)], profile, est)
    assert result is not None and result.action is Action.TRUNCATE
    assert [i.id for i in result.items] == ["t"]  # admit's result: the admitted output alone
    assert [c.status for c in result.changes] == [ItemStatus.TRUNCATED]
    assert result.items[-1].tokens == est(result.items[-1].message) < big.tokens
    assert POLICY.admit(tool("small"), [], profile, est) is None
    assert POLICY.admit(user("u", 5, "\n" * 100), [], profile, est) is None


def test_truncate_applies_the_limits_to_every_tool_output() -> None:
    profile = GoAgentProfile(tool_output_max_chars=5)
    items = [user("u", 5, "long user text"), tool("t1", text="abcdefgh"), tool("t2", text="ab")]
    result = POLICY.truncate(items, profile, est)
    assert [c.status for c in full_changes(items, result)] == [
        ItemStatus.KEPT,
        ItemStatus.TRUNCATED,
        ItemStatus.KEPT,
    ]
    assert not POLICY.truncate(items[2:], profile, est).fired


def reference_limit(text: str, profile: GoAgentProfile) -> tuple[str, dict[str, object]] | None:
    """``truncateToolContent`` written plainly: each measure taken again on the text it is
    about, the bytes always encoded (what ``limit_tool_output`` must agree with)."""

    def lines(s: str) -> int:
        return 0 if s == "" else s.count("\n") + 1

    def size(s: str) -> int:
        return len(s.encode("utf-8", "surrogatepass"))

    def human(n: int) -> str:
        if n < 1024:
            return f"{n}B"
        return f"{n / 1024:.1f}KB" if n / 1024 < 1024 else f"{n / 1024 / 1024:.1f}MB"

    if text == "":
        return None
    total = {"total_lines": lines(text), "total_bytes": size(text), "total_chars": len(text)}
    if 0 < profile.tool_output_large_threshold < len(text):
        return None  # the spill notice is checked on its own
    max_lines = profile.tool_output_max_lines
    max_bytes = profile.tool_output_max_bytes
    max_chars = profile.tool_output_max_chars
    if max_lines <= 0 and max_bytes <= 0 and max_chars <= 0:
        return None
    limit = max_lines if max_lines > 0 else lines(text)
    split = text.split("\n")
    if (
        len(split) <= limit
        and (max_bytes <= 0 or size(text) <= max_bytes)
        and (max_chars <= 0 or len(text) <= max_chars)
    ):
        return None
    output = text
    if len(split) > limit:
        if profile.tool_output_truncate_mode != "head_tail" or limit < 4:
            output = "\n".join(split[:limit])
        else:
            marker = f"... [truncated {len(split) - limit} lines] ..."
            tail = split[len(split) - (limit - limit // 2) :]
            output = "\n".join([*split[: limit // 2], marker, *tail])
    by = "lines" if output != text else ""
    if max_chars > 0:
        output = output[:max_chars]
    if not by and len(output) < len(text):
        by = "chars"
    if 0 < max_bytes < size(output):
        output = output.encode("utf-8", "surrogatepass")[:max_bytes].decode("utf-8", "ignore")
    if not by and size(output) < size(text):
        by = "bytes"
    shown = {"output_lines": lines(output), "output_bytes": size(output)}
    notice = (
        f"\n\n[tool output truncated: showing {shown['output_lines']}/{total['total_lines']} "
        f"lines, {human(shown['output_bytes'])}/{human(total['total_bytes'])} bytes, "
        f"{len(output)}/{len(text)} chars]"
    )
    figures = {"spilled": False, "truncated_by": by, **total, **shown}
    return output + notice, {**figures, "output_chars": len(output)}


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.sampled_from(["a", "bc", " ", "\n", "\r\n", "é", "😀", "\ud800", "\x00"]),
        max_size=60,
    ),
    st.tuples(*[st.integers(min_value=-2, max_value=3)] * 3),
    st.tuples(*[st.integers(min_value=0, max_value=1)] * 3),
    st.booleans(),
)
def test_the_limits_agree_with_the_plain_algorithm(
    pieces: list[str], offsets: tuple[int, int, int], off: tuple[int, int, int], head: bool
) -> None:
    # limits around the text's own size (under, at and over each, or off), ASCII or not
    text = "".join(pieces)
    sizes = (text.count("\n") + 1, len(text.encode("utf-8", "surrogatepass")), len(text))
    max_lines, max_bytes, max_chars = (
        0 if disabled else max(1, n + d) for n, d, disabled in zip(sizes, offsets, off, strict=True)
    )
    profile = GoAgentProfile(
        tool_output_max_lines=max_lines,
        tool_output_max_bytes=max_bytes,
        tool_output_max_chars=max_chars,
        tool_output_truncate_mode="head" if head else "head_tail",
    )
    limited = limit_tool_output(text, profile)
    expected = reference_limit(text, profile)
    assert (limited is None) == (expected is None)
    if limited is not None and expected is not None:
        assert (limited.text, limited.as_dict()) == expected


def test_an_ascii_output_cut_by_characters_then_bytes_counts_the_lines_it_keeps() -> None:
    text = "ab\n" * 10  # 30 characters, 11 lines
    for limits, shown in (
        ({"tool_output_max_chars": 7, "tool_output_max_bytes": 20}, "3/11 lines, 7B/30B"),
        ({"tool_output_max_chars": 20, "tool_output_max_bytes": 8}, "3/11 lines, 8B/30B"),
        ({"tool_output_max_chars": 0, "tool_output_max_bytes": 9}, "4/11 lines, 9B/30B"),
        ({"tool_output_max_chars": 9, "tool_output_max_bytes": 9}, "4/11 lines, 9B/30B"),
    ):
        limited = limit_tool_output(text, GoAgentProfile(**limits))  # type: ignore[arg-type]
        assert limited is not None and f"showing {shown} bytes" in limited.text
    # the line limit cuts first: the lines are those of the cut text
    limited = limit_tool_output(text, GoAgentProfile(tool_output_max_lines=4))
    assert limited is not None and "showing 5/11 lines" in limited.text


def test_a_line_cut_that_changes_nothing_is_not_reported_as_one() -> None:
    # five lines over a limit of four, the middle one the marker itself: the cut text is the
    # text, so the characters are what cut it (and the lines shown are counted on it)
    text = "a\nb\n... [truncated 1 lines] ...\nc\nd"
    limited = limit_tool_output(
        text, GoAgentProfile(tool_output_max_lines=4, tool_output_max_chars=3)
    )
    assert limited is not None and limited.truncated_by == "chars"
    assert (limited.output_lines, limited.output_chars) == (2, 3)


def test_manage_acts_alike_on_a_context_list_and_a_plain_list() -> None:
    system = it(text_msg("sys", Role.SYSTEM, "prompt"), 500)
    for body in (
        [user("u", 3_000), tool("t", 2_500), assistant("a", 3_000), tool("t2", 100)],
        [user("u", 100), assistant("a", 100, visible=False)],  # nothing to do
        [tool(f"t{i}", 400) for i in range(12)],  # tool summaries, then compaction
        [tool(f"t{i}", 10) for i in range(10)],  # at the cutoff: no summary
    ):
        items = [system, *body]
        plain = POLICY.manage(items, PROFILE, est, FakeSummarizer())
        kept = POLICY.manage(ContextList(items), PROFILE, est, FakeSummarizer())
        assert plain == kept
        assert all(r.fired for r in plain)
        actions = [r.action for r in plain]
        compact = POLICY.compact(
            plain[0].items if plain and actions[0] is Action.PRUNE else items,
            PROFILE,
            est,
            FakeSummarizer(),
        )
        assert (Action.COMPACT in actions) == compact.fired
        if compact.fired:  # the same compaction (manage measures it as the agent decided it)
            assert (plain[-1].items, plain[-1].changes) == (compact.items, compact.changes)


def test_the_policy_needs_the_goagent_profile() -> None:
    with pytest.raises(ConfigError):
        POLICY.prune([], AiAgentProfile(), est)


# -- properties --------------------------------------------------------------------------------


@given(
    st.lists(st.integers(min_value=0, max_value=10_000), min_size=1, max_size=40),
    st.integers(min_value=1, max_value=30_000),
)
def test_the_split_keeps_one_message_and_stays_in_budget_beyond_it(
    tokens: list[int], budget: int
) -> None:
    start = split_by_token_budget(tokens, budget)
    assert 0 <= start <= len(tokens) - 1
    recent = tokens[start:]
    assert len(recent) == 1 or sum(recent) <= budget
    if start > 0:
        assert sum(tokens[start - 1 :]) > budget


@given(
    st.lists(st.integers(min_value=0, max_value=5_000), min_size=1, max_size=30),
    st.integers(min_value=0, max_value=25),
)
def test_compaction_keeps_the_prompt_and_accounts_for_every_item(
    sizes: list[int], tool_every: int
) -> None:
    system = it(text_msg("sys", Role.SYSTEM, "prompt"), 123)
    body = [
        tool(f"m{i}", n) if tool_every and i % max(1, tool_every) == 0 else user(f"m{i}", n)
        for i, n in enumerate(sizes)
    ]
    items = [system, *body]
    result = POLICY.compact(items, PROFILE, est, FakeSummarizer(), force=True)
    assert result.items[0] == system
    originals = [c for c in full_changes(items, result) if c.status is not ItemStatus.ADDED]
    assert [c.id for c in originals] == [i.id for i in items]
    kept_ids = {i.id for i in result.items}
    for change in originals:
        present = change.id in kept_ids
        assert present == (change.status in (ItemStatus.KEPT, ItemStatus.ARCHIVED))
    assert result.tokens_after == sum(i.tokens for i in result.items)


def test_the_figures_a_profile_derives_are_its_own_whichever_profile_came_first() -> None:
    # each profile's limits are derived once and kept by profile: a second profile, equal in
    # all but one setting, gets its own (the first one's are not reused for it)
    wide = GoAgentProfile(context_window=100_000)
    narrow = GoAgentProfile(compactor="in_memory", context_window=40_000, keep_recent_tokens=30_000)
    for profile in (wide, narrow, PROFILE, wide):
        limits = derived_limits(profile)
        assert limits == (
            profile.has_threshold(),
            profile.threshold(),
            profile.limit_source(),
            profile.effective_keep_recent_tokens(),
        )
    assert derived_limits(wide).threshold == 83_616 and derived_limits(narrow).threshold == 23_616
    assert derived_limits(narrow).keep_recent_tokens == 11_808  # half the limit, under the setting
    assert derived_limits(GoAgentProfile(max_tokens=0)).active is False
    items = [user("u", 30_000), assistant("a", 1)]
    assert POLICY.compact(items, narrow, est, FakeSummarizer()).fired
    assert not POLICY.compact(items, wide, est, FakeSummarizer()).fired


# -- the session compactor (json / RPC mode) -----------------------------------------------------


def answered(mid: str, tokens: int, usage: int) -> ContextItem:
    """An assistant response with the provider's figure for it."""
    item = assistant(mid, tokens)
    return ContextItem(item.message, item.tokens, reported=usage)


def test_the_session_compactor_cuts_at_a_user_message_after_the_first() -> None:
    items = [
        user("u1", 20),
        answered("a1", 10, 3_000),
        tool("t1", 2_500),
        user("u2", 20),
        answered("a2", 10, 6_000),
        tool("t2", 2_500),
        answered("a3", 10, 8_520),
        tool("t3", 2_500),
    ]
    result = POLICY.compact(items, SESSION, est, FakeSummarizer("gist"), force=True)
    # the newest 4,000 (keep-recent, half the 8,000 limit) end at t2; back to u2
    assert [i.id for i in result.items] == ["goagent:summary:5:t1", "u2", "a2", "t2", "a3", "t3"]
    assert result.items[0].message.text == (
        "The conversation history before this point was compacted into the following summary:"
        "\n\n<summary>\ngist\n</summary>"
    )
    assert result.details["old_messages"] == 3 and result.details["recent_messages"] == 5
    # the part after this compaction starts after the messages it kept: no user message there
    again = POLICY.compact(
        [*result.items, answered("a4", 10, 9_000), tool("t4", 5_000)],
        SESSION,
        est,
        FakeSummarizer(),
        force=True,
    )
    assert not again.fired and again.reason == "compaction failed: nothing to compact"
    assert (
        POLICY.compact(result.items, SESSION, est, FakeSummarizer(), force=True).reason
        == "compaction failed: already compacted"
    )


def test_nothing_to_compact_when_the_only_user_message_comes_first() -> None:
    items = [user("u1", 20), answered("a1", 10, 5_000), tool("t1", 5_000)]
    (result,) = POLICY.manage(items, SESSION, est, FakeSummarizer())
    # decided at the turn's end (5,000 + 5,000 ≥ 8,000), and the compactor failed: a decision
    assert result.fired and result.details["failed"] and result.items == items
    assert result.details["error"] == "nothing to compact"
    assert (result.tokens_before, result.tokens_after) == (10_000, 10_000)
    assert result.reason == "estimated 10,000 ≥ limit 8,000: compaction failed: nothing to compact"


def test_a_compaction_decided_during_a_prompt_takes_effect_from_the_next() -> None:
    body = [
        user("u1", 20),
        answered("a1", 10, 3_000),
        tool("t1", 3_000),
        user("u2", 20),
        answered("a2", 10, 6_100),
        tool("t2", 4_000),
    ]
    (during,) = POLICY.manage(body, SESSION, est, FakeSummarizer())
    assert during.details["takes_effect"] == "next_prompt"
    # the agent's figure (6,100 + 4,000), and what the compaction takes off it
    assert during.tokens_before == 10_100
    assert during.tokens_before - during.tokens_after == during.tokens_saved
    # a request after a new prompt: the decision was made before the prompt came in; the
    # compaction applies now and the prompt follows the kept messages
    ended = [*body[:-1], answered("a2", 10, 10_100), user("u3", 20)]
    (at_start,) = POLICY.manage(ended, SESSION, est, FakeSummarizer())
    assert "takes_effect" not in at_start.details
    assert at_start.details["context_tokens"] == 10_100  # u3 is not counted
    assert [i.id for i in at_start.items][-1] == "u3"


def test_the_agents_figure_is_the_last_response_and_what_follows_it() -> None:
    items = [user("u", 50), answered("a1", 10, 4_000), tool("t", 3_000), user("u2", 50)]
    figure = context_tokens(items)
    assert figure == (4_000 + 3_000 + 50, "reported", "a1")
    below = POLICY.manage([*items[:3], tool("t2", 999)], SESSION, est, FakeSummarizer())
    assert below == []  # 4,000 + 3,000 + 999 < 8,000
    # on a context list, a context without any response figure is not searched again
    plain = ContextList([user(f"u{i}", 10) for i in range(5)])
    assert POLICY.manage(plain, SESSION, est, FakeSummarizer()) == []
    plain.append(tool("big", 9_000))
    (fired,) = POLICY.manage(plain, SESSION, est, FakeSummarizer())
    assert fired.details["tokens_origin"] == "estimated"


# -- outputs the agent already cut ---------------------------------------------------------------


def recorded_output(text: str, limits: GoAgentProfile) -> ContextItem:
    limited = limit_tool_output(text, limits)
    assert limited is not None
    return tool("t", text=limited.text)


def test_an_output_the_agent_cut_is_not_cut_again() -> None:
    whole = "\n".join(f"line {i:04d} " + "x" * 40 for i in range(1_000))  # 50,999 bytes
    recorded = recorded_output(whole, GoAgentProfile(tool_output_max_bytes=16_384))
    same = POLICY.admit(recorded, [], GoAgentProfile(tool_output_max_bytes=16_384), est)
    assert same is not None and same.fired
    assert same.items[0].message.text == recorded.message.text
    assert same.tokens_before == -(-50_999 // 4)  # the whole output, from the notice
    tighter = POLICY.admit(recorded, [], GoAgentProfile(tool_output_max_bytes=4_096), est)
    assert tighter is not None and tighter.fired
    assert "showing" in tighter.items[0].message.text
    assert "4.0KB/49.8KB bytes" in tighter.items[0].message.text
    wider = POLICY.admit(recorded, [], GoAgentProfile(tool_output_max_bytes=32_768), est)
    assert wider is not None and wider.fired and "keep about 32,768" in wider.reason
    assert 32_768 <= len(wider.items[0].message.text) < 32_768 + 200
    whole_kept = POLICY.admit(recorded, [], GoAgentProfile(), est)  # 50 KiB: not cut
    assert whole_kept is not None and not whole_kept.fired and whole_kept.details["restored"]
    assert whole_kept.items[0].tokens == -(-50_999 // 4)


def test_a_head_and_tail_cut_keeps_its_marker_line() -> None:
    whole = "\n".join(f"row {i}" for i in range(1_000))
    limits = GoAgentProfile(tool_output_max_lines=300)
    recorded = recorded_output(whole, limits)
    assert "... [truncated 700 lines] ..." in recorded.message.text
    result = POLICY.admit(recorded, [], limits, est)
    assert result is not None and result.items[0].message.text == recorded.message.text
