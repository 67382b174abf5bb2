"""Fifth's context manager (seed 004; reference section 4.2) as a policy (its levels, ages and
capacity are ``levels.py``).

Fifth (``quivent/fifth``, ``examples/context-manager/main.fs``) keeps messages in SQLite at four
levels: system at level 1, user and assistant at level 3, tool output at level 4; summaries keep
the level they were made at. Its total counts levels 1-3 only (messages and summaries), so tool
output never moves its capacity, the integer percentage ``total × 100 / total_budget``.

- ``compress`` (the manual command, our ``compact``): take up to 10 level-3 messages older than
  the age threshold, oldest first; summarise them (500 tokens); store the summary at level 3;
  delete the sources. No capacity test.
- ``ctx-auto-compress`` (our ``manage``): when the capacity is above the trigger (``> 80``, so it
  acts at 81 %), compress level 3, then level 2 if still above. The word exists but nothing in
  Fifth calls it: we replay it only when the profile's ``auto_compress`` is true, and every
  result says so. No message is ever stored at level 2, so its pass always finds nothing.
- Age: SQLite's ``CAST((julianday('now') - julianday(created_at)) * 1440 AS INTEGER) > 300 / 60``,
  i.e. whole minutes of age above 5: a message is eligible from 6 minutes (360 s). "Now" is the
  time of the latest message in the context, never the clock. A message without a timestamp
  has an unknown age and counts as old.
- The README's priority score (recency, references, task relevance, explicit mark) is not in
  Fifth's code; only an unused ``100 / (1 + minutes)`` recency score is. ``priority_score`` and
  ``compact(order="priority")`` are the design document's option, not the program's behaviour.
- Fifth never drops, truncates or prunes tool output: it stores it whole at level 4 and leaves it
  out of the total (and out of ``build``). ``prune(force=True)`` applies the README's "volatile,
  dropped when space is needed" rule instead: level-4 output beyond the space left by levels 1-3
  is dropped, oldest first.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from ctx_inspect.agents.fifth.levels import (
    SUMMARY_NAME,
    TOOL_LEVEL,
    counted_tokens,
    is_old,
    latest_time,
    level_of,
    level_tokens,
    over_trigger,
    parse_time,
    priority_score,
)
from ctx_inspect.agents.fifth.profile import FifthProfile
from ctx_inspect.core.model import MessageKind, Role
from ctx_inspect.core.policies.base import (
    Action,
    ContextItem,
    Estimate,
    ItemChange,
    ItemStatus,
    PolicyResult,
    Summarizer,
    summary_message,
    total,
    unchanged,
)
from ctx_inspect.core.policies.blocks import require
from ctx_inspect.core.profiles import Profile
from ctx_inspect.errors import ConfigError

NAME = "fifth"
NOT_CALLED = (
    "ctx-auto-compress exists in Fifth but nothing calls it; replayed because auto_compress = true"
)
NO_PRIORITY = (
    "Fifth does not implement the README's priority score (only an unused 100/(1+minutes) "
    "recency score exists): this order is the design document's option"
)

Order = Literal["age", "priority"]


# --------------------------------------------------------------------------------------------
# Compression


def _chronology(items: Sequence[ContextItem]) -> list[tuple[datetime | None, int]]:
    """A sort key per item for "ORDER BY created_at": its time (an undated item takes the time
    of the dated item before it), then its position."""
    keys: list[tuple[datetime | None, int]] = []
    last: datetime | None = None
    for position, item in enumerate(items):
        created = parse_time(item.message.timestamp)
        if created is not None:
            last = created
        keys.append((last, position))
    return keys


def _sort_key(key: tuple[datetime | None, int]) -> tuple[bool, datetime, int]:
    when, position = key
    return (when is not None, when or datetime.min.replace(tzinfo=UTC), position)


def _current_task(items: Sequence[ContextItem]) -> str | None:
    for item in reversed(items):
        m = item.message
        if m.role is Role.USER and m.kind is MessageKind.MESSAGE and m.text.strip():
            return m.text
    return None


def _eligible(
    items: Sequence[ContextItem], level: int, now: datetime | None, profile: FifthProfile
) -> list[int]:
    """Positions of the messages ``ctx-get-old-messages`` would return at ``level`` (all of them,
    before the batch limit): stored messages of that level, older than the threshold."""
    return [
        position
        for position, item in enumerate(items)
        if item.message.kind not in (MessageKind.SUMMARY, MessageKind.META)
        and level_of(item.message, profile) == level
        and is_old(item.message, now, profile)
    ]


def _pick(
    items: Sequence[ContextItem],
    eligible: list[int],
    now: datetime | None,
    profile: FifthProfile,
    order: Order,
) -> tuple[list[int], dict[str, float]]:
    chronology = _chronology(items)
    if order == "age":
        ranked = sorted(eligible, key=lambda p: _sort_key(chronology[p]))
        return sorted(ranked[: profile.compress_batch]), {}
    task = _current_task(items)
    messages = [i.message for i in items]
    scores = {
        p: priority_score(messages[p], now, later=messages[p + 1 :], task=task) for p in eligible
    }
    ranked = sorted(eligible, key=lambda p: (scores[p], _sort_key(chronology[p])))
    chosen = ranked[: profile.compress_batch]
    return sorted(chosen), {items[p].id: round(scores[p], 6) for p in chosen}


def _compress_level(
    items: Sequence[ContextItem],
    level: int,
    now: datetime | None,
    profile: FifthProfile,
    estimate: Estimate,
    summarizer: Summarizer,
    order: Order,
) -> tuple[list[ContextItem], ContextItem | None, dict[str, Any]]:
    """``ctx-compress-level``: the new items, the summary item (None when nothing was old
    enough) and the figures of the pass."""
    eligible = _eligible(items, level, now, profile)
    chosen, scores = _pick(items, eligible, now, profile, order)
    undated = sum(1 for p in eligible if parse_time(items[p].message.timestamp) is None)
    info: dict[str, Any] = {
        "level": level,
        "eligible": len(eligible),
        "undated": undated,
        "compressed_ids": [items[p].id for p in chosen],
        "compressed_tokens": sum(items[p].tokens for p in chosen),
    }
    if scores:
        info["priority_scores"] = scores
    if not chosen:
        return list(items), None, info
    sources = [items[p].message for p in chosen]
    # The summary comes first: if it fails, nothing has been built and the caller's items stand.
    text = summarizer.summarize(sources, profile.summary_max_tokens)
    summary = summary_message(f"fifth-summary-L{level}-{sources[0].id}", text).model_copy(
        update={
            "name": SUMMARY_NAME.format(level=level),
            "timestamp": now.isoformat() if now is not None else None,
        }
    )
    summary_item = ContextItem(summary, estimate(summary), None)
    removed = set(chosen)
    out: list[ContextItem] = []
    for position, item in enumerate(items):
        if position == chosen[0]:
            out.append(summary_item)
        if position not in removed:
            out.append(item)
    info["summary_id"] = summary.id
    info["summary_tokens"] = summary_item.tokens
    return out, summary_item, info


def _compaction_result(
    items: Sequence[ContextItem],
    new_items: list[ContextItem],
    summaries: list[ContextItem],
    reason: str,
    details: dict[str, Any],
) -> PolicyResult:
    kept = {id(i) for i in new_items}
    into = ", ".join(s.id for s in summaries)
    changes: list[ItemChange] = []
    for item in items:
        if id(item) not in kept:
            changes.append(
                ItemChange(item.id, ItemStatus.SUMMARIZED, item.tokens, 0, f"into {into}")
            )
    changes.extend(ItemChange(s.id, ItemStatus.ADDED, 0, s.tokens) for s in summaries)
    return PolicyResult(
        action=Action.COMPACT,
        policy=NAME,
        fired=True,
        reason=reason,
        items=new_items,
        changes=changes,
        tokens_before=total(items),
        tokens_after=total(new_items),
        details=details,
    )


def _when(minutes: int) -> str:
    return f"older than {minutes} min"


class FifthPolicy:
    name = NAME

    def admit(
        self,
        item: ContextItem,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
    ) -> PolicyResult | None:
        """Fifth stores tool output whole, at level 4: nothing to truncate or drop."""
        require(profile, FifthProfile, NAME)
        return None

    def manage(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        summarizer: Summarizer,
    ) -> list[PolicyResult]:
        """``ctx-auto-compress`` (only when ``auto_compress``: Fifth itself never calls it)."""
        fifth = require(profile, FifthProfile, NAME)
        if not fifth.auto_compress or not over_trigger(total(items), fifth):
            return []  # levels 1-3 hold at most the whole context: not over the trigger either
        counted = counted_tokens(items, fifth)
        if not over_trigger(counted, fifth):
            return []
        now = latest_time(items)
        current = list(items)
        summaries: list[ContextItem] = []
        passes: list[dict[str, Any]] = []
        for level in (3, 2):
            if level == 2 and not over_trigger(counted_tokens(current, fifth), fifth):
                break
            current, summary, info = _compress_level(
                current, level, now, fifth, estimate, summarizer, "age"
            )
            info["capacity_after"] = fifth.capacity(counted_tokens(current, fifth))
            passes.append(info)
            if summary is not None:
                summaries.append(summary)
        if not summaries:
            return []
        after = counted_tokens(current, fifth)
        done = "; ".join(
            f"level {p['level']}: {len(p['compressed_ids'])} message(s)"
            if p["compressed_ids"]
            else f"level {p['level']}: nothing (Fifth stores no message there)"
            if p["level"] == 2
            else f"level {p['level']}: nothing old enough"
            for p in passes
        )
        reason = (
            f"capacity {fifth.capacity(counted)}% > trigger {fifth.capacity_trigger}% "
            f"({counted:,} of {fifth.total_budget:,} tokens at levels 1-3): compressed {done}, "
            f"now {fifth.capacity(after)}% ({after:,}); {NOT_CALLED}"
        )
        details = self._details(fifth, items, now, counted, after)
        details.update(
            {
                "trigger_rule": "capacity > capacity_trigger",
                "called_by_fifth": False,
                "note": NOT_CALLED,
                "passes": passes,
            }
        )
        return [_compaction_result(items, current, summaries, reason, details)]

    def compact(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        summarizer: Summarizer,
        *,
        force: bool = False,
        order: Order = "age",
    ) -> PolicyResult:
        """The ``compress`` command: level 3 only, up to ``compress_batch`` old messages.

        ``force=False`` acts only where Fifth would on its own: never, unless the profile's
        ``auto_compress`` replays ``ctx-auto-compress`` and the capacity is above the trigger.
        ``order="priority"`` takes the lowest-scored messages first (the README's option).
        """
        fifth = require(profile, FifthProfile, NAME)
        if order not in ("age", "priority"):
            raise ConfigError("Invalid order", f"order must be 'age' or 'priority', got {order!r}")
        now = latest_time(items)
        counted = counted_tokens(items, fifth)
        capacity = fifth.capacity(counted)
        details = self._details(fifth, items, now, counted, counted)
        details["order"] = order
        if order == "priority":
            details["note"] = NO_PRIORITY
        if not force:
            if not fifth.auto_compress:
                return unchanged(
                    Action.COMPACT,
                    NAME,
                    items,
                    "Fifth compresses only when told to (the compress command); "
                    "ctx-auto-compress is never called (auto_compress = false)",
                    **details,
                )
            if not over_trigger(counted, fifth):
                return unchanged(
                    Action.COMPACT,
                    NAME,
                    items,
                    f"capacity {capacity}% ≤ trigger {fifth.capacity_trigger}% "
                    f"({counted:,} of {fifth.total_budget:,} tokens at levels 1-3)",
                    **details,
                )
        new_items, summary, info = _compress_level(
            items, 3, now, fifth, estimate, summarizer, order
        )
        details.update(info)
        minutes = fifth.age_threshold_seconds // 60
        if summary is None:
            return unchanged(
                Action.COMPACT,
                NAME,
                items,
                f"no level-3 message {_when(minutes)} (whole minutes, so from {minutes + 1} min) "
                f"to compress; capacity {capacity}%",
                **details,
            )
        after = counted_tokens(new_items, fifth)
        details["counted_tokens_after"] = after
        details["capacity_after"] = fifth.capacity(after)
        picked = "lowest-scored" if order == "priority" else "oldest"
        undated = f", {info['undated']} of them without a timestamp" if info["undated"] else ""
        reason = (
            f"compressed the {len(info['compressed_ids'])} {picked} level-3 message(s) "
            f"{_when(minutes)} ({info['eligible']} eligible{undated}) into one summary of "
            f"{summary.tokens:,} tokens: levels 1-3 {counted:,} → {after:,} tokens "
            f"({capacity}% → {fifth.capacity(after)}%)"
        )
        if not force:
            reason += f"; {NOT_CALLED}"
            details["called_by_fifth"] = False
        if order == "priority":
            reason += f"; {NO_PRIORITY}"
        return _compaction_result(items, new_items, [summary], reason, details)

    def prune(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        *,
        force: bool = False,
    ) -> PolicyResult:
        """Level-4 tool output beyond the space levels 1-3 leave, dropped oldest first
        (``force=True`` only: Fifth itself never drops tool output)."""
        fifth = require(profile, FifthProfile, NAME)
        now = latest_time(items)
        counted = counted_tokens(items, fifth)
        details = self._details(fifth, items, now, counted, counted)
        tool_positions = [
            p for p, i in enumerate(items) if level_of(i.message, fifth) == TOOL_LEVEL
        ]
        tool_tokens = sum(items[p].tokens for p in tool_positions)
        budget = max(0, fifth.total_budget - counted)
        details.update(
            {
                "level4_tokens": tool_tokens,
                "level4_budget": budget,
                "level4_budget_rule": "total_budget - tokens at levels 1-3 (README: remaining)",
                "called_by_fifth": False,
            }
        )
        if not force:
            return unchanged(
                Action.PRUNE,
                NAME,
                items,
                f"Fifth never drops tool output: its {tool_tokens:,} tokens at level 4 are "
                "stored whole, outside the capacity total",
                **details,
            )
        if tool_tokens <= budget:
            return unchanged(
                Action.PRUNE,
                NAME,
                items,
                f"level-4 tool output {tool_tokens:,} ≤ the {budget:,} tokens levels 1-3 leave "
                f"of {fifth.total_budget:,}",
                **details,
            )
        chronology = _chronology(items)
        excess = tool_tokens - budget
        dropped: set[int] = set()
        freed = 0
        for position in sorted(tool_positions, key=lambda p: _sort_key(chronology[p])):
            if freed >= excess:
                break
            dropped.add(position)
            freed += items[position].tokens
        new_items = [i for p, i in enumerate(items) if p not in dropped]
        changes = [
            ItemChange(i.id, ItemStatus.DROPPED, i.tokens, 0, "level-4 tool output")
            for p, i in enumerate(items)
            if p in dropped
        ]
        details["dropped_ids"] = [items[p].id for p in sorted(dropped)]
        details["level4_tokens_after"] = tool_tokens - freed
        return PolicyResult(
            action=Action.PRUNE,
            policy=NAME,
            fired=True,
            reason=(
                f"level-4 tool output {tool_tokens:,} > the {budget:,} tokens levels 1-3 leave "
                f"of {fifth.total_budget:,}: dropped {len(dropped)} output(s), oldest first "
                f"({freed:,} tokens); the README's rule, Fifth itself never drops tool output"
            ),
            items=new_items,
            changes=changes,
            tokens_before=total(items),
            tokens_after=total(new_items),
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
        fifth = require(profile, FifthProfile, NAME)
        counted = counted_tokens(items, fifth)
        return unchanged(
            Action.TRUNCATE,
            NAME,
            items,
            "Fifth never truncates tool output: it stores it whole at level 4",
            **self._details(fifth, items, latest_time(items), counted, counted),
        )

    @staticmethod
    def _details(
        fifth: FifthProfile,
        items: Sequence[ContextItem],
        now: datetime | None,
        counted: int,
        counted_after: int,
    ) -> dict[str, Any]:
        return {
            "now": now.isoformat() if now is not None else None,
            "counted_tokens": counted,
            "counted_tokens_after": counted_after,
            "capacity": fifth.capacity(counted),
            "capacity_after": fifth.capacity(counted_after),
            "capacity_trigger": fifth.capacity_trigger,
            "total_budget": fifth.total_budget,
            "level_tokens": level_tokens(items, fifth),
            "level_budgets": fifth.level_budgets(),
            "age_threshold_seconds": fifth.age_threshold_seconds,
            "age_rule": "whole minutes of age > age_threshold_seconds // 60",
            "compress_batch": fifth.compress_batch,
            "summary_max_tokens": fifth.summary_max_tokens,
            "auto_compress": fifth.auto_compress,
        }


POLICY = FifthPolicy()
