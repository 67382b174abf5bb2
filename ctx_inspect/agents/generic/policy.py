"""ctx-inspect's own policy for plain chat arrays and agents we do not know.

The generic policy is **not** any agent's algorithm: it is a neutral baseline of ours, driven by
the ``generic`` profile's threshold scheme (``README.md`` of this package):

- ``manage``: nothing until the count is over the threshold (strictly above
  ``compact_ratio`` × the effective window); then prune, then compact if still over.
- ``prune``: old tool outputs are cleared oldest first, only as far as needed to bring the
  context back under the warning level, and never the most recent tool outputs within a
  protected budget of ``PROTECT_RATIO`` × the effective window (counted newest first).
- ``compact``: system messages + one summary + the last ``KEEP_RECENT_MESSAGES`` messages; the
  tail is widened so it never starts with a tool result whose call would be summarised away.
- ``admit`` / ``truncate``: the profile sets no tool-output limit, so nothing is truncated.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctx_inspect.agents.generic.profile import GenericProfile
from ctx_inspect.core.policies.base import (
    Action,
    ContextItem,
    ContextList,
    Estimate,
    Policy,
    PolicyResult,
    Summarizer,
    summary_message,
    total,
    unchanged,
)
from ctx_inspect.core.policies.blocks import (
    CLEARED_MARKER,
    Slot,
    clear_output,
    fmt,
    in_place,
    is_cleared,
    is_system,
    is_tool_output,
    rebuild,
    require,
)
from ctx_inspect.core.profiles import Profile

NAME = "generic"
PROTECT_RATIO = 0.25  # recent tool outputs up to this share of the effective window are kept
KEEP_RECENT_MESSAGES = 4  # compaction keeps system + summary + this many recent messages
SUMMARY_BUDGET_TOKENS = 4_096  # what we ask of the summarizer
SUMMARY_HEADER = "[Summary of the earlier conversation]\n"


UNCLEARED_MARK = "generic:uncleared-tool-outputs"  # no uncleared tool output before it


def _prune_plan(
    items: Sequence[ContextItem], profile: GenericProfile
) -> tuple[list[int], int, int, int]:
    """(positions to clear oldest first, protected tokens, target, tokens recoverable).

    The scan starts at the context's ``UNCLEARED_MARK`` (a ``ContextList`` that an earlier
    prune left): before it every tool output is cleared already."""
    protect_budget = int(profile.limit_parts().effective * PROTECT_RATIO)
    target = profile.warning_threshold()
    mark = items.marked(UNCLEARED_MARK) if isinstance(items, ContextList) else None
    start = mark[0] if mark is not None else 0
    outputs = [
        i
        for i in range(start, len(items))
        if is_tool_output(items[i].message) and not _cleared(items[i])
    ]
    protected = 0
    candidates: list[int] = []
    for i in reversed(outputs):
        if not candidates and protected + items[i].tokens <= protect_budget:
            protected += items[i].tokens
        else:
            candidates.append(i)
    candidates.reverse()  # oldest first
    current = total(items)
    chosen: list[int] = []
    recoverable = 0
    for i in candidates:
        if current - recoverable < target:
            break
        chosen.append(i)
        recoverable += items[i].tokens
    return chosen, protected, target, recoverable


def _cleared(item: ContextItem) -> bool:
    return is_cleared(item.message, CLEARED_MARKER)


def _tail_start(items: Sequence[ContextItem], keep: int) -> int:
    """Where the kept tail starts: the last ``keep`` non-system messages, widened backwards so
    that no kept tool result loses the assistant message that called it."""
    body = [i for i, item in enumerate(items) if not is_system(item.message)]
    if not body:
        return len(items)
    start = body[max(0, len(body) - keep)] if keep > 0 else len(items)
    while start < len(items) and start > 0 and is_tool_output(items[start].message):
        start -= 1
    return start


class GenericPolicy:
    """ctx-inspect's neutral policy (see the module docstring)."""

    name = NAME  # a policy made of this one (a plug-in's) names its results with its own

    def admit(
        self,
        item: ContextItem,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
    ) -> PolicyResult | None:
        return None

    def manage(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        summarizer: Summarizer,
    ) -> list[PolicyResult]:
        generic = require(profile, GenericProfile, self.name)
        tokens = total(items)
        if not generic.over_threshold(tokens):
            return []
        pruned = self.prune(items, generic, estimate, force=True)
        results = [pruned]
        if generic.over_threshold(pruned.tokens_after):
            results.append(self.compact(pruned.items, generic, estimate, summarizer, force=True))
        return results

    def prune(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        *,
        force: bool = False,
    ) -> PolicyResult:
        generic = require(profile, GenericProfile, self.name)
        tokens = total(items)
        threshold = generic.threshold()
        if not force and not generic.over_threshold(tokens):
            return unchanged(
                Action.PRUNE,
                self.name,
                items,
                f"{fmt(tokens)} ≤ threshold {fmt(threshold)}: nothing to prune",
                threshold=threshold,
            )
        chosen, protected, target, recoverable = _prune_plan(items, generic)
        details = {
            "threshold": threshold,
            "target": target,
            "protected_tokens": protected,
            "protect_ratio": PROTECT_RATIO,
            "outputs": len(chosen),
            "recoverable": recoverable,
        }
        if not chosen:
            why = (
                f"{fmt(tokens)} < target {fmt(target)}"
                if tokens < target
                else f"no tool output outside the protected {fmt(protected)} recent tokens"
            )
            return unchanged(Action.PRUNE, self.name, items, f"nothing pruned: {why}", **details)
        replacements = {i: clear_output(items[i].message, CLEARED_MARKER) for i in chosen}
        result = in_place(
            Action.PRUNE,
            self.name,
            items,
            replacements,
            estimate,
            reason=(
                f"cleared {len(chosen)} old tool outputs (~{fmt(recoverable)} tokens) toward "
                f"the warning level {fmt(target)}, keeping {fmt(protected)} recent tokens"
            ),
            details=details,
        )
        if isinstance(result.items, ContextList):
            # the chosen are the oldest uncleared outputs: none is left before the last one
            result.items.mark(UNCLEARED_MARK, chosen[-1] + 1)
        return result

    def compact(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        summarizer: Summarizer,
        *,
        force: bool = False,
    ) -> PolicyResult:
        generic = require(profile, GenericProfile, self.name)
        tokens = total(items)
        threshold = generic.threshold()
        if not force and not generic.over_threshold(tokens):
            return unchanged(
                Action.COMPACT,
                self.name,
                items,
                f"{fmt(tokens)} ≤ threshold {fmt(threshold)}: no compaction",
                threshold=threshold,
            )
        start = _tail_start(items, KEEP_RECENT_MESSAGES)
        middle = [i for i, item in enumerate(items) if i < start and not is_system(item.message)]
        details: dict[str, Any] = {
            "threshold": threshold,
            "keep_recent": KEEP_RECENT_MESSAGES,
            "summarized": len(middle),
            "summary_budget": SUMMARY_BUDGET_TOKENS,
        }
        if not middle:
            return unchanged(
                Action.COMPACT,
                self.name,
                items,
                "nothing older than the kept tail to summarise",
                **details,
            )
        summary = summarizer.summarize([items[i].message for i in middle], SUMMARY_BUDGET_TOKENS)
        if not summary:
            return unchanged(
                Action.COMPACT,
                self.name,
                items,
                "compaction failed: the summary is empty",
                **details,
            )
        anchor = items[middle[-1]].id
        message = summary_message(f"{anchor}:generic-summary", SUMMARY_HEADER + summary)
        systems = [i for i in range(start) if is_system(items[i].message)]
        slots: list[Slot] = [*systems, message, *range(start, len(items))]
        return rebuild(
            Action.COMPACT,
            self.name,
            items,
            slots,
            estimate,
            reason=(
                f"summarised {len(middle)} messages, kept {len(systems)} system and "
                f"{len(items) - start} recent"
            ),
            details=details,
        )

    def truncate(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        *,
        force: bool = False,
    ) -> PolicyResult:
        require(profile, GenericProfile, self.name)
        return unchanged(
            Action.TRUNCATE, self.name, items, "the generic profile sets no tool-output limit"
        )


POLICY: Policy = GenericPolicy()
