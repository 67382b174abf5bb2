"""The BaseAgent guide's generic recipe (seed 001, ``astuces/03-context-management.md``).

No real tool runs this recipe (reference 1.4, last bullet); it is a generic profile for the
dashboard, implemented as the seed writes it:

- ``manage`` (``manage_context``): above ``prune_ratio`` × window (strictly, 70% of 180,000)
  replace every tool output but the last ``keep_last_first`` (5) with
  ``[output pruned - context limit]``; if the re-estimated total is still strictly above
  ``compact_ratio`` × window (85%), keep only the last ``keep_last_second`` (2); if still above,
  AI compaction: every system message + ``[Previous conversation summary]\\n<summary>`` as a user
  message + the last ``keep_recent_messages`` (4) messages. One result per stage that runs.
  ``critical_ratio`` (95%) is declared by the recipe and never used; we report it in details.
- ``admit`` / ``truncate``: ``middle_out_truncate(max_bytes=50000)``: an output longer than the
  limit keeps ``limit // 2 - 50`` characters at each end around
  ``[... {len - limit} bytes truncated ...]``. The seed measures ``len()`` of a Python string,
  i.e. characters, although it calls them bytes; so do we.

Where the seed's snippets misbehave at the edges we take the evident intent: ``keep_last=0``
prunes every output (``list[:-0]`` would prune none), a system message among the last four is
not repeated after the summary, and nothing is summarised when only system messages and the
kept tail remain.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctx_inspect.agents.guide.profile import GuideProfile
from ctx_inspect.core.model import Message
from ctx_inspect.core.policies.base import (
    Action,
    ContextItem,
    ContextList,
    Estimate,
    ItemStatus,
    Policy,
    PolicyResult,
    Summarizer,
    admitted,
    replace_text,
    summary_message,
    total,
    unchanged,
)
from ctx_inspect.core.policies.blocks import (
    Slot,
    chain,
    clear_output,
    content_text,
    fmt,
    in_place,
    is_cleared,
    is_system,
    is_tool_output,
    rebuild,
    require,
)
from ctx_inspect.core.profiles import Profile

NAME = "guide"
PRUNE_MARKER = "[output pruned - context limit]"
SUMMARY_HEADER = "[Previous conversation summary]\n"
SUMMARY_BUDGET_TOKENS = 4_096  # the recipe sets no limit on the summary; ours


def middle_out(text: str, max_chars: int) -> str | None:
    """The seed's ``middle_out_truncate``; None when the text fits."""
    if len(text) <= max_chars:
        return None
    keep = max(0, max_chars // 2 - 50)
    tail = text[len(text) - keep :] if keep else ""
    return f"{text[:keep]}\n\n[... {len(text) - max_chars} bytes truncated ...]\n\n{tail}"


PRUNED_MARK = "guide:older-outputs-pruned"  # every tool output before it is pruned


def _keep_last(
    items: Sequence[ContextItem], keep: int, stage: str, guide: GuideProfile, estimate: Estimate
) -> PolicyResult:
    """``prune_tool_outputs(messages, keep_last=keep)``.

    The scan starts at the context's ``PRUNED_MARK`` (a ``ContextList`` that an earlier
    prune left): every tool output before it is pruned already, and the mark holds their
    number."""
    mark = items.marked(PRUNED_MARK) if isinstance(items, ContextList) else None
    start, earlier = mark if mark is not None else (0, 0)
    outputs = [i for i in range(start, len(items)) if is_tool_output(items[i].message)]
    older = outputs[: max(0, len(outputs) - keep)]
    replacements = {
        i: clear_output(items[i].message, PRUNE_MARKER)
        for i in older
        if not is_cleared(items[i].message, PRUNE_MARKER)
    }
    details: dict[str, Any] = {
        "stage": stage,
        "keep_last": keep,
        "tool_outputs": earlier + len(outputs),
        "outputs": len(replacements),
        "prune_above": guide.prune_above(),
        "threshold": guide.threshold(),
    }
    if not replacements:
        return unchanged(
            Action.PRUNE,
            NAME,
            items,
            f"{stage}: no tool output older than the last {keep} left to prune "
            f"({earlier + len(outputs)} in context)",
            **details,
        )
    result = in_place(Action.PRUNE, NAME, items, replacements, estimate, reason="", details=details)
    result.reason = (
        f"{stage}: pruned {len(replacements)} tool outputs, kept the last {keep}: "
        f"{fmt(result.tokens_before)} -> {fmt(result.tokens_after)} tokens"
    )
    if isinstance(result.items, ContextList):
        # every output but the last ``keep`` is pruned now
        position = outputs[len(older)] if len(older) < len(outputs) else len(items)
        result.items.mark(PRUNED_MARK, position, earlier + len(older))
    return result


def _prune_stages(
    items: Sequence[ContextItem], guide: GuideProfile, estimate: Estimate, *, force: bool
) -> list[PolicyResult]:
    """Stages 1 and 2 of ``manage_context`` (stage 1 regardless of the count when forced)."""
    results: list[PolicyResult] = []
    work: Sequence[ContextItem] = items
    if force or total(work) > guide.prune_above():
        first = _keep_last(work, guide.keep_last_first, "stage 1", guide, estimate)
        results.append(first)
        work = first.items
    if total(work) > guide.threshold():
        second = _keep_last(work, guide.keep_last_second, "stage 2", guide, estimate)
        results.append(second)
    return results


def _combine(results: list[PolicyResult], action: Action) -> PolicyResult:
    combined = results[0]
    for step in results[1:]:
        combined = chain(
            combined,
            step,
            action=action,
            reason=f"{combined.reason}; {step.reason}",
            details={**combined.details, **step.details},
        )
    return combined


def _compaction(
    items: Sequence[ContextItem],
    guide: GuideProfile,
    estimate: Estimate,
    summarizer: Summarizer,
) -> PolicyResult:
    """``compact_messages``: system messages + summary + the last few messages."""
    keep = guide.keep_recent_messages
    recent = set(range(max(0, len(items) - keep), len(items))) if keep else set()
    systems = [i for i, item in enumerate(items) if is_system(item.message)]
    middle = [i for i in range(len(items)) if i not in recent and i not in systems]
    details: dict[str, Any] = {
        "stage": "stage 3",
        "keep_recent": keep,
        "summarized": len(middle),
        "summary_budget": SUMMARY_BUDGET_TOKENS,
        "threshold": guide.threshold(),
    }
    if not middle:
        return unchanged(
            Action.COMPACT,
            NAME,
            items,
            "stage 3: nothing between the system messages and the last "
            f"{keep} messages to summarise",
            **details,
        )
    summary = summarizer.summarize([items[i].message for i in middle], SUMMARY_BUDGET_TOKENS)
    message = summary_message(f"{items[middle[-1]].id}:guide-summary", SUMMARY_HEADER + summary)
    tail = [i for i in sorted(recent) if i not in systems]
    slots: list[Slot] = [*systems, message, *tail]
    result = rebuild(Action.COMPACT, NAME, items, slots, estimate, reason="", details=details)
    result.reason = (
        f"stage 3: summarised {len(middle)} messages, kept {len(systems)} system and the last "
        f"{len(tail)}: {fmt(result.tokens_before)} -> {fmt(result.tokens_after)} tokens"
    )
    return result


class GuidePolicy:
    name = NAME

    def admit(
        self,
        item: ContextItem,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
    ) -> PolicyResult | None:
        """Middle-out truncation of a tool output as it enters the context (the result is
        about the output alone)."""
        guide = require(profile, GuideProfile, NAME)
        cut = _cut(item.message, guide)
        if cut is None:
            return None
        size = len(content_text(item.message))
        return admitted(
            Action.TRUNCATE,
            NAME,
            item,
            cut,
            estimate,
            reason=(
                f"tool output of {fmt(size)} characters > {fmt(guide.truncate_max_bytes)}: "
                "middle-out truncated"
            ),
            details={"chars": size, "max_bytes": guide.truncate_max_bytes},
        )

    def manage(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        summarizer: Summarizer,
    ) -> list[PolicyResult]:
        guide = require(profile, GuideProfile, NAME)
        tokens = total(items)
        results = _prune_stages(items, guide, estimate, force=False)
        work = results[-1].items if results else items
        if total(work) > guide.threshold():
            results.append(_compaction(work, guide, estimate, summarizer))
        for result in results:
            result.details["critical"] = tokens > guide.critical_above()
        return results

    def prune(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        *,
        force: bool = False,
    ) -> PolicyResult:
        guide = require(profile, GuideProfile, NAME)
        results = _prune_stages(items, guide, estimate, force=force)
        if not results:
            tokens = total(items)
            return unchanged(
                Action.PRUNE,
                NAME,
                items,
                f"{fmt(tokens)} ≤ {fmt(guide.prune_above())} (70% line): the recipe does not prune",
                prune_above=guide.prune_above(),
            )
        return _combine(results, Action.PRUNE)

    def compact(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        summarizer: Summarizer,
        *,
        force: bool = False,
    ) -> PolicyResult:
        """Forced: stage 3 now. Otherwise as ``manage``: the prune stages first, compaction only
        if the pruned context is still over the threshold."""
        guide = require(profile, GuideProfile, NAME)
        if force:
            return _compaction(items, guide, estimate, summarizer)
        stages = _prune_stages(items, guide, estimate, force=False)
        work = stages[-1].items if stages else items
        if total(work) <= guide.threshold():
            return unchanged(
                Action.COMPACT,
                NAME,
                items,
                f"{fmt(total(work))} ≤ threshold {fmt(guide.threshold())}"
                + (" after pruning" if stages else "")
                + ": no compaction",
                threshold=guide.threshold(),
            )
        compacted = _compaction(work, guide, estimate, summarizer)
        if not compacted.fired:
            return unchanged(Action.COMPACT, NAME, items, compacted.reason, **compacted.details)
        return _combine([*stages, compacted], Action.COMPACT) if stages else compacted

    def truncate(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        *,
        force: bool = False,
    ) -> PolicyResult:
        guide = require(profile, GuideProfile, NAME)
        cuts = {
            i: cut for i, item in enumerate(items) if (cut := _cut(item.message, guide)) is not None
        }
        limit = guide.truncate_max_bytes
        if not cuts:
            return unchanged(
                Action.TRUNCATE,
                NAME,
                items,
                f"no tool output over {fmt(limit)} characters",
                max_bytes=limit,
            )
        return in_place(
            Action.TRUNCATE,
            NAME,
            items,
            cuts,
            estimate,
            reason=f"middle-out truncated {len(cuts)} tool outputs to {fmt(limit)} characters",
            details={"max_bytes": limit, "outputs": len(cuts)},
            status=ItemStatus.TRUNCATED,
        )


def _cut(message: Message, guide: GuideProfile) -> Message | None:
    if not is_tool_output(message):
        return None
    cut = middle_out(content_text(message), guide.truncate_max_bytes)
    return None if cut is None else replace_text(message, cut)


POLICY: Policy = GuidePolicy()
