"""The Go agent's compactors, as one compaction of a context: ``Session.Compact`` (the
``compactor`` setting ``session``, what the json and RPC modes run: the part after the previous
compaction, cut at a user message) or the library's ``Compactor.Compact`` (``in_memory``: split
by the keep-recent budget, then a digest of the recent tool results beyond the cutoff).

Without ``force`` it compacts only when ``ShouldCompact`` holds; with ``force`` as the agent's
recovery path (a context-length error) and its ``compact`` command do, whatever the estimate.
Decided at a turn's end, a compaction that fails is still a decision (``failed``), and one
decided during a prompt takes effect from the next prompt (``takes_effect``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctx_inspect.agents.goagent.messages import (
    DIGEST_HEADER,
    EMPTY_OUTPUT,
    SESSION_SUMMARY_PREFIX,
    SESSION_SUMMARY_SUFFIX,
    SUMMARY_PREFIX,
    archive,
    digest_line,
    fmt,
    go_text,
    is_tool_result,
    trim_with_tail,
    user_message,
    visible_tool_results,
)
from ctx_inspect.agents.goagent.profile import NAME, GoAgentProfile
from ctx_inspect.agents.goagent.trigger import (
    DEFAULT_KEEP_RECENT,
    Trigger,
    Window,
    derived_limits,
    first_kept,
    part_of,
    split_by_token_budget,
    trigger_figures,
    trigger_of,
)
from ctx_inspect.core.model import Message, MessageKind, Role
from ctx_inspect.core.policies.base import (
    Action,
    ContextItem,
    Estimate,
    ItemChange,
    ItemStatus,
    PolicyResult,
    Summarizer,
    replace_text,
    summary_message,
    total,
    unchanged,
)
from ctx_inspect.errors import InspectorError

SUMMARY_BUDGET_TOKENS = 800  # the compaction prompt asks to "Keep under 800 tokens"


def compact(
    items: Sequence[ContextItem],
    profile: GoAgentProfile,
    estimate: Estimate,
    summarizer: Summarizer,
    *,
    force: bool,
    reported: Mapping[str, int] | None,
    trigger: Trigger | None = None,
    recovery: bool = False,
) -> PolicyResult:
    """``trigger``: ``trigger_of(items)``, when the caller has it already;
    ``recovery``: the loop's recovery after a refused request (its summary says so).

    At a turn's end (``manage``: the trigger was evaluated with ``turn_end``), a
    compaction the trigger decided on that then fails (nothing to cut, no summary) is
    still a decision: it fires, changing nothing, with ``failed`` in its details; and one
    decided without a new prompt after it takes effect from the next prompt
    (``takes_effect``): the running loop keeps its own list."""
    turn_end = trigger is not None and not force
    if trigger is None:
        trigger = trigger_of(items, profile, reported)
    n, tokens, fires = trigger.prompt, trigger.tokens, trigger.fires
    end = len(items) - trigger.incoming
    prompt, messages, arriving = items[:n], items[n:end], items[end:]
    figures = trigger_figures(trigger.messages, tokens, trigger.origin, trigger.anchor, profile)
    figures["compactor"] = profile.compactor
    if not force and not fires:
        return unchanged(Action.COMPACT, NAME, items, _no_trigger(figures), **figures)
    decided = fires and turn_end
    if not messages:
        return _failed(items, "nothing to compact", figures, decided)
    if profile.compactor == "session":
        split = _session_split(items, n, end, profile, figures)
    else:
        split = _memory_split(messages, profile, figures)
    if isinstance(split, str):
        return _failed(items, split, figures, decided)
    left_out, old, recent = split
    previous = [m.message for m in left_out if m.message.kind is MessageKind.SUMMARY]
    projected = _project_for_summary(old, profile)
    if not projected and not previous:
        return _failed(items, "no agent-visible messages to summarize", figures, decided)
    try:
        summary = summarizer.summarize([*previous, *projected], SUMMARY_BUDGET_TOKENS)
    except InspectorError as exc:  # Compact returns the error; the agent keeps its messages
        return _failed(items, f"failed to generate summary: {exc}", figures, decided)
    if not summary.strip():
        return _failed(items, "failed to generate summary: empty summary", figures, decided)

    if profile.compactor == "session":
        how = "recovery:" if recovery else ""
        summary_id = f"{NAME}:summary:{len(recent)}:{how}{old[-1].id}"
        text = SESSION_SUMMARY_PREFIX + summary + SESSION_SUMMARY_SUFFIX
        recent_items, digest = list(recent), None
        recent_changes: list[ItemChange] = []
    else:
        summary_id, text = f"{NAME}:summary:{old[-1].id}", SUMMARY_PREFIX + summary
        recent_items, recent_changes, digest = _digest_recent(recent, profile, estimate)
    summary_item_message = summary_message(summary_id, text, Role.USER)
    summary_item = ContextItem(summary_item_message, estimate(summary_item_message))

    changes = [
        ItemChange(m.message.id, ItemStatus.SUMMARIZED, m.tokens, 0)
        if m.message.kind is MessageKind.SUMMARY
        else ItemChange(
            m.message.id, ItemStatus.DROPPED, m.tokens, 0, "kept by the previous compaction"
        )
        for m in left_out
    ]
    changes += [
        ItemChange(m.message.id, ItemStatus.SUMMARIZED, m.tokens, 0)
        if m.message.visible
        else ItemChange(m.message.id, ItemStatus.DROPPED, m.tokens, 0, "hidden, left out")
        for m in old
    ]
    changes.extend(recent_changes)
    changes.append(ItemChange(summary_item.id, ItemStatus.ADDED, 0, summary_item.tokens, "summary"))
    new_items = [*prompt, summary_item, *recent_items]
    if digest is not None:
        new_items.append(digest)
        changes.append(ItemChange(digest.id, ItemStatus.ADDED, 0, digest.tokens, "digest"))
    new_items.extend(arriving)
    figures["archived_in_recent"] = len(
        [c for c in recent_changes if c.status is ItemStatus.ARCHIVED]
    )
    figures["messages_after"] = len(new_items) - len(prompt) - len(arriving)
    before, after = total(items), total(new_items)
    if fires and not force:
        why = _trigger_text(figures)
    else:
        why = "compaction requested (the agent's recovery path and compact command)"
    if decided:
        # the figure the agent compared, and what the compaction took off it
        before, after = tokens, tokens - (before - after)
        figures["figure"] = tokens
        if not arriving:
            figures["takes_effect"] = "next_prompt"
    return PolicyResult(
        action=Action.COMPACT,
        policy=NAME,
        fired=True,
        reason=(
            f"{why}: {len(old)} messages summarized, {len(recent)} kept "
            f"({fmt(before)} → {fmt(after)} tokens)"
        ),
        items=new_items,
        changes=changes,
        tokens_before=before,
        tokens_after=after,
        details=figures,
    )


def _memory_split(
    messages: Sequence[ContextItem], profile: GoAgentProfile, figures: dict[str, Any]
) -> tuple[Sequence[ContextItem], Sequence[ContextItem], Sequence[ContextItem]] | str:
    """``Compactor.Compact``: (left out, summarized, kept), or why nothing is."""
    keep_tokens = derived_limits(profile).keep_recent_tokens
    figures["keep_recent_tokens"] = keep_tokens
    if keep_tokens > 0:
        sizes = [m.tokens if m.message.visible else 0 for m in messages]
        start = split_by_token_budget(sizes, keep_tokens)
        if start == 0:
            return (
                f"every message fits the keep-recent budget {fmt(keep_tokens)}: "
                "nothing older to summarize"
            )
    else:
        keep_count = profile.keep_recent if profile.keep_recent > 0 else DEFAULT_KEEP_RECENT
        figures["keep_recent"] = keep_count
        if len(messages) <= keep_count:
            return f"{len(messages)} messages ≤ keep-recent {keep_count}: nothing to compact"
        start = len(messages) - keep_count
    figures["old_messages"] = start
    figures["recent_messages"] = len(messages) - start
    return (), messages[:start], messages[start:]


def _session_split(
    items: Sequence[ContextItem],
    start: int,
    end: int,
    profile: GoAgentProfile,
    figures: dict[str, Any],
) -> tuple[Sequence[ContextItem], Sequence[ContextItem], Sequence[ContextItem]] | str:
    """``Session.Compact`` on the agent's list ``items[start:end]``: the part after the
    latest compaction, cut where the keep-recent budget is reached, moved back to a user
    message (never the part's first): (left out, summarized, kept), or the agent's
    error."""
    layout = part_of(items, start, end)
    if layout.first >= end:
        return "already compacted"
    part = Window(items, layout.first, end)
    keep_tokens = derived_limits(profile).keep_recent_tokens
    figures["keep_recent_tokens"] = keep_tokens
    users = [u - layout.first for u in layout.users]
    cut = first_kept(part, users, keep_tokens, profile)
    if cut <= 0:
        return "nothing to compact"
    first = layout.first - start
    figures["old_messages"] = cut
    figures["recent_messages"] = len(part) - cut
    figures["left_out"] = first
    messages = items[start:end]
    return messages[:first], messages[first : first + cut], messages[first + cut :]


def _trigger_text(figures: Mapping[str, Any]) -> str:
    if figures.get("limit") is not None:
        return f"estimated {fmt(figures['context_tokens'])} ≥ limit {fmt(figures['limit'])}"
    return f"{figures['messages']} messages ≥ max {figures.get('max_messages')}"


def _no_trigger(figures: Mapping[str, Any]) -> str:
    if not figures["auto_compact"]:
        return "auto-compaction is off"
    if figures.get("limit") is not None:
        return f"estimated {fmt(figures['context_tokens'])} < limit {fmt(figures['limit'])}"
    return f"{figures['messages']} messages < max {figures.get('max_messages')}"


def _failed(
    items: Sequence[ContextItem], error: str, figures: dict[str, Any], decided: bool
) -> PolicyResult:
    """The compactor's error. A decided compaction still fires (the decision was made),
    changing nothing; a requested one does not."""
    if not decided:
        return unchanged(
            Action.COMPACT, NAME, items, f"compaction failed: {error}", error=error, **figures
        )
    tokens = figures["context_tokens"]
    why = _trigger_text(figures)
    return PolicyResult(
        action=Action.COMPACT,
        policy=NAME,
        fired=True,
        reason=f"{why}: compaction failed: {error}",
        items=list(items),
        changes=[],
        tokens_before=tokens,
        tokens_after=tokens,
        details={**figures, "failed": True, "error": error, "figure": tokens},
    )


def _project_for_summary(old: Sequence[ContextItem], profile: GoAgentProfile) -> list[Message]:
    """``projectMessagesForSummary``: visible messages, tool results clipped."""
    projected: list[Message] = []
    for item in old:
        message = item.message
        if not message.visible:
            continue
        if is_tool_result(message):
            text = trim_with_tail(
                go_text(message).strip() or EMPTY_OUTPUT, profile.summary_tool_result_runes
            )
            message = replace_text(message, text)
        projected.append(message)
    return projected


def _digest_recent(
    recent: Sequence[ContextItem], profile: GoAgentProfile, estimate: Estimate
) -> tuple[list[ContextItem], list[ItemChange], ContextItem | None]:
    """``compactToolResultsInRecent``: archive the oldest visible tool results beyond the
    cutoff and append one digest of them."""
    changes: list[ItemChange] = []
    cutoff = profile.tool_call_cutoff
    items = list(recent)
    if cutoff <= 0 or len(recent) <= cutoff:  # too few messages to pass the cutoff
        return items, changes, None
    visible = visible_tool_results(recent)
    excess = len(visible) - cutoff
    if excess <= 0:
        return items, changes, None
    lines: list[str] = []
    for idx in visible[:excess]:
        original = recent[idx]
        items[idx], change = archive(original, estimate)
        changes.append(change)
        lines.append(digest_line(original.message))
    message = user_message(
        f"{NAME}:digest:{recent[-1].id}",
        DIGEST_HEADER + "\n" + "\n".join(lines),
        MessageKind.TOOL_SUMMARY,
    )
    return items, changes, ContextItem(message, estimate(message))
