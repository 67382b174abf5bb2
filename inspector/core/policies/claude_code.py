"""Claude Code (transcripts.md 1.6-1.7): auto-compaction and micro-compaction.

- ``manage`` (between requests): micro-compaction first when its time trigger fires (below),
  then auto-compaction when the count **reaches** the profile's threshold (167,000 for 2.1 with
  a 200K window; ``autocompact_pct_override`` can only lower it). Compaction replaces the whole
  conversation with one user message (kind SUMMARY, ``isCompactSummary`` in the transcript):
  ``SUMMARY_PREFIX`` + the summary. The system prompt is sent with every request, so system
  messages stay. Newer builds may keep a verbatim tail (``preservedMessages``); the profile has
  no such setting, so nothing recent is kept. An empty summary is a failed compaction.
- ``prune`` is micro-compaction: old tool results are cleared in place (``[Old tool result
  content cleared]``), keeping the ``MICROCOMPACT_KEEP_RECENT`` most recent results of the
  compactable tools (``COMPACTABLE_TOOLS``); results of other tools are neither counted nor
  cleared. Each tool_result block (one per ``tool_use`` id) is a unit. Claude Code fires it
  when more than ``MICROCOMPACT_GAP_MINUTES`` have passed since the last assistant message
  (its prompt cache has expired by then); without a clock we compare the newest message's
  timestamp with that assistant message's, and without timestamps it does not fire on its own.
  These three settings come from third-party reports of Claude Code's source (no real sample
  has a ``microcompact_boundary``) and are module constants until the profile has them.
- ``admit`` / ``truncate``: Claude Code's tool-output limits are not covered by the
  reference nor the profile; nothing is modelled.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from inspector.core.model import Message, PartType, Role
from inspector.core.policies.base import (
    Action,
    ContextItem,
    Estimate,
    Policy,
    PolicyResult,
    Summarizer,
    summary_message,
    total,
    unchanged,
)
from inspector.core.policies.generic import (
    CLEARED_MARKER,
    Slot,
    chain,
    clear_parts,
    fmt,
    in_place,
    is_system,
    rebuild,
    require,
)
from inspector.core.profiles import ClaudeCodeProfile, Profile

NAME = "claude-code"
SUMMARY_PREFIX = (
    "This session is being continued from a previous conversation that ran out of context. "
    "The conversation is summarized below:\n"
)
MICROCOMPACT_KEEP_RECENT = 5  # reported default of the time-based micro-compaction
MICROCOMPACT_GAP_MINUTES = 60  # reported: the gap since the last assistant message
COMPACTABLE_TOOLS: frozenset[str] = frozenset(
    {"Read", "Bash", "Grep", "Glob", "WebSearch", "WebFetch", "Edit", "Write"}
)


def _timestamp(message: Message) -> datetime | None:
    if not message.timestamp:
        return None
    try:
        moment = datetime.fromisoformat(message.timestamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def idle_minutes(items: Sequence[ContextItem]) -> float | None:
    """Minutes between the last assistant message and the newest message after it (the request
    about to be sent); None when either has no usable timestamp."""
    if not items:
        return None
    last = next(
        (i for i in range(len(items) - 1, -1, -1) if items[i].message.role is Role.ASSISTANT),
        None,
    )
    if last is None:
        return None
    start, end = _timestamp(items[last].message), _timestamp(items[-1].message)
    if start is None or end is None:
        return None
    return (end - start).total_seconds() / 60


def _idle_fires(idle: float | None) -> bool:
    """Whether the idle gap triggers micro-compaction on its own."""
    return idle is not None and idle > MICROCOMPACT_GAP_MINUTES


def compactable_results(items: Sequence[ContextItem]) -> list[tuple[int, int]]:
    """(position, part index) of every compactable tool result, oldest first."""
    found: list[tuple[int, int]] = []
    for position, item in enumerate(items):
        for index, part in enumerate(item.message.parts):
            if part.type is PartType.TOOL_RESULT and part.tool_name in COMPACTABLE_TOOLS:
                found.append((position, index))
    return found


class ClaudeCodePolicy:
    name = NAME

    def admit(
        self,
        item: ContextItem,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
    ) -> PolicyResult | None:
        require(profile, ClaudeCodeProfile, NAME)
        return None

    def manage(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        summarizer: Summarizer,
    ) -> list[PolicyResult]:
        claude = require(profile, ClaudeCodeProfile, NAME)
        results: list[PolicyResult] = []
        work: Sequence[ContextItem] = items
        if _idle_fires(idle_minutes(items)):  # else micro-compaction does not run (O(1) check)
            micro = self.prune(work, claude, estimate)
            if micro.fired:
                results.append(micro)
                work = micro.items
        if claude.over_threshold(total(work)):
            results.append(self._compact(work, claude, estimate, summarizer, auto=True))
        return results

    def prune(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        *,
        force: bool = False,
    ) -> PolicyResult:
        """Micro-compaction; without ``force`` only when the idle gap passes the trigger."""
        require(profile, ClaudeCodeProfile, NAME)
        idle = idle_minutes(items)
        details: dict[str, Any] = {
            "keep_recent": MICROCOMPACT_KEEP_RECENT,
            "gap_minutes": MICROCOMPACT_GAP_MINUTES,
            "idle_minutes": idle,
            "compactable_tools": sorted(COMPACTABLE_TOOLS),
        }
        if not force and not _idle_fires(idle):
            why = (
                "no timestamps to measure the idle gap"
                if idle is None
                else f"idle {idle:.0f} min ≤ {MICROCOMPACT_GAP_MINUTES} min"
            )
            return unchanged(Action.PRUNE, NAME, items, f"no micro-compaction: {why}", **details)
        results = compactable_results(items)
        older = results[: max(0, len(results) - MICROCOMPACT_KEEP_RECENT)]
        by_message: dict[int, list[int]] = defaultdict(list)
        for position, index in older:
            if items[position].message.parts[index].text != CLEARED_MARKER:
                by_message[position].append(index)
        cleared = sum(len(v) for v in by_message.values())
        details.update({"compactable": len(results), "cleared": cleared})
        if not by_message:
            return unchanged(
                Action.PRUNE,
                NAME,
                items,
                f"no compactable tool result older than the last {MICROCOMPACT_KEEP_RECENT} "
                f"to clear ({len(results)} in context)",
                **details,
            )
        replacements = {
            position: clear_parts(items[position].message, indices, CLEARED_MARKER)
            for position, indices in by_message.items()
        }
        result = in_place(
            Action.PRUNE, NAME, items, replacements, estimate, reason="", details=details
        )
        result.reason = (
            f"micro-compaction cleared {cleared} old tool results, kept the last "
            f"{MICROCOMPACT_KEEP_RECENT}: {fmt(result.tokens_before)} -> "
            f"{fmt(result.tokens_after)} tokens"
        )
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
        """Forced: ``/compact``. Otherwise what ``manage`` would do (micro-compaction when its
        trigger fires, then auto-compaction at the threshold)."""
        claude = require(profile, ClaudeCodeProfile, NAME)
        if force:
            return self._compact(items, claude, estimate, summarizer, auto=False)
        micro = self.prune(items, claude, estimate)
        work = micro.items if micro.fired else items
        tokens = total(work)
        threshold = claude.threshold()
        if not claude.over_threshold(tokens):
            return unchanged(
                Action.COMPACT,
                NAME,
                items,
                f"{fmt(tokens)} < auto-compact threshold {fmt(threshold)}",
                threshold=threshold,
            )
        compacted = self._compact(work, claude, estimate, summarizer, auto=True)
        if not compacted.fired:
            return unchanged(Action.COMPACT, NAME, items, compacted.reason, **compacted.details)
        if not micro.fired:
            return compacted
        return chain(
            micro,
            compacted,
            action=Action.COMPACT,
            reason=f"{micro.reason}; then {compacted.reason}",
            details={**compacted.details, "microcompact": micro.details},
        )

    def truncate(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        *,
        force: bool = False,
    ) -> PolicyResult:
        require(profile, ClaudeCodeProfile, NAME)
        return unchanged(
            Action.TRUNCATE, NAME, items, "Claude Code's tool-output limits are not modelled"
        )

    def _compact(
        self,
        items: Sequence[ContextItem],
        claude: ClaudeCodeProfile,
        estimate: Estimate,
        summarizer: Summarizer,
        *,
        auto: bool,
    ) -> PolicyResult:
        tokens = total(items)
        budget = claude.output_reserve()
        details: dict[str, Any] = {
            "trigger": "auto" if auto else "manual",
            "threshold": claude.threshold(),
            "pre_tokens": tokens,
            "summary_budget": budget,
            "preserved_tail": 0,
        }
        body = [i for i, item in enumerate(items) if not is_system(item.message)]
        if not body:
            return unchanged(Action.COMPACT, NAME, items, "nothing to compact", **details)
        summary = summarizer.summarize([items[i].message for i in body], budget)
        if not summary:
            return unchanged(
                Action.COMPACT,
                NAME,
                items,
                "compaction failed: the summary is empty; the context is unchanged",
                failed=True,
                **details,
            )
        message = summary_message(f"{items[body[-1]].id}:compact-summary", SUMMARY_PREFIX + summary)
        systems = [i for i, item in enumerate(items) if is_system(item.message)]
        slots: list[Slot] = [*systems, message]
        result = rebuild(Action.COMPACT, NAME, items, slots, estimate, reason="", details=details)
        trigger = (
            f"{fmt(tokens)} ≥ auto-compact threshold {fmt(claude.threshold())}"
            if auto
            else "/compact"
        )
        result.reason = (
            f"{trigger}: {len(body)} messages replaced by the summary, {fmt(tokens)} -> "
            f"{fmt(result.tokens_after)} tokens"
        )
        return result


POLICY: Policy = ClaudeCodePolicy()
