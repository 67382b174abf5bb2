"""OpenCode (``packages/opencode/src/session/compaction.ts``, early-2026 v1.1 era; reference 6).

- ``manage`` (before each request): overflow when the count **reaches** the usable window
  (``count >= usable``, 168,000 for a 200K model) and ``compaction.auto`` is on; then
  compaction: a user message (rendered to the model as "What did we do so far?"), the
  compaction agent's assistant summary (kind SUMMARY) and, because it is automatic, the
  synthetic user text "Continue if you have next steps, ...". The context is then those plus
  whatever follows; the system prompt is rebuilt with every request, so system messages stay.
  OpenCode prunes **once, after the prompt loop exits**, never per request: ``manage`` only
  compacts and ``finish`` runs the prune (replay calls it at the end of a run).
- ``prune``: tool **parts** are the unit (each TOOL_RESULT part of a message, newest first).
  Walk messages newest first counting user turns and skip until ``protect_last_turns`` (2) have
  been passed; stop entirely at an assistant summary and at the first already-compacted part
  (its output reads ``[Old tool result content cleared]``, which is what OpenCode sends for a
  part marked compacted). Only completed outputs count (ours: results that are not errors);
  outputs of ``protected_tools`` (``skill``) are neither counted nor pruned. Each output is
  estimated with the profile's rule; once the running total is strictly above
  ``prune_protect`` the part is queued, and the queue is pruned only if it holds strictly more
  than ``prune_minimum``. A pruned part's attachments go with it.
- ``admit`` / ``truncate``: OpenCode's own tool-output truncation is not covered by the
  reference nor the profile; nothing is modelled.
- Newer versions keep a verbatim tail on compaction (``tail_turns``, ``preserve_recent_tokens``);
  the profile models the early-2026 version, which keeps none.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from inspector.core.estimate import estimate_text
from inspector.core.model import Message, MessageKind, Part, PartType, Role
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
    clear_parts,
    fmt,
    in_place,
    is_system,
    is_user_turn,
    rebuild,
    require,
)
from inspector.core.profiles import OpenCodeProfile, Profile

NAME = "opencode"
COMPACTION_REQUEST_TEXT = "What did we do so far?"
CONTINUE_TEXT = (
    "Continue if you have next steps, or stop and ask for clarification if you are unsure how "
    "to proceed."
)


@dataclass(frozen=True)
class PruneScan:
    """What ``SessionCompaction.prune`` found (it logs ``found`` with ``pruned`` and ``total``)."""

    total: int  # output tokens counted
    pruned: int  # of which beyond the protected budget
    parts: tuple[tuple[int, int], ...]  # (position, part index) queued, newest first
    stopped_by: str | None  # "summary" or "compacted"
    stopped_at: int | None  # the position where the scan stopped
    turns: int  # user turns passed
    skipped_protected: int  # outputs of protected tools passed over


def scan(items: Sequence[ContextItem], profile: OpenCodeProfile) -> PruneScan:
    """The prune's backward walk over messages and parts, without pruning anything."""
    counted = pruned = turns = skipped = 0
    queued: list[tuple[int, int]] = []
    stopped_by: str | None = None
    stopped_at: int | None = None
    for position in range(len(items) - 1, -1, -1):
        message = items[position].message
        if is_user_turn(message):
            turns += 1
        if turns < profile.protect_last_turns:
            continue
        if message.role is Role.ASSISTANT and message.kind is MessageKind.SUMMARY:
            stopped_by, stopped_at = "summary", position
            break
        for index in range(len(message.parts) - 1, -1, -1):
            part = message.parts[index]
            if part.type is not PartType.TOOL_RESULT or part.is_error:
                continue  # only completed tool outputs
            if part.tool_name in profile.protected_tools:
                skipped += 1
                continue
            if part.text == CLEARED_MARKER:
                stopped_by, stopped_at = "compacted", position
                break
            tokens = estimate_text(profile.estimator, part.text)
            counted += tokens
            if counted > profile.prune_protect:
                pruned += tokens
                queued.append((position, index))
        if stopped_by is not None:
            break
    return PruneScan(counted, pruned, tuple(queued), stopped_by, stopped_at, turns, skipped)


class OpenCodePolicy:
    name = NAME
    prune_after_loop = True  # replay: call ``finish`` once the run's prompt loop is over

    def admit(
        self,
        item: ContextItem,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
    ) -> PolicyResult | None:
        require(profile, OpenCodeProfile, NAME)
        return None

    def manage(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        summarizer: Summarizer,
    ) -> list[PolicyResult]:
        """Auto-compaction on overflow; the prune is not per request (see ``finish``)."""
        opencode = require(profile, OpenCodeProfile, NAME)
        if not opencode.auto or not opencode.over_threshold(total(items)):
            return []
        return [self._compact(items, opencode, estimate, summarizer, auto=True)]

    def finish(
        self, items: Sequence[ContextItem], profile: Profile, estimate: Estimate
    ) -> list[PolicyResult]:
        """What OpenCode does after the prompt loop exits: the prune, when it is enabled."""
        opencode = require(profile, OpenCodeProfile, NAME)
        if not opencode.prune:
            return []
        return [self._prune(items, opencode, estimate)]

    def prune(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        *,
        force: bool = False,
    ) -> PolicyResult:
        """The prune; without ``force`` only if ``compaction.prune`` is on (it then runs at
        the end of every prompt loop, whatever the count)."""
        opencode = require(profile, OpenCodeProfile, NAME)
        if not force and not opencode.prune:
            return unchanged(
                Action.PRUNE, NAME, items, "compaction.prune is off: OpenCode does not prune"
            )
        return self._prune(items, opencode, estimate)

    def compact(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        summarizer: Summarizer,
        *,
        force: bool = False,
    ) -> PolicyResult:
        """Forced: a manual ``/compact`` (no "Continue" text). Otherwise the auto-compaction
        ``manage`` would run."""
        opencode = require(profile, OpenCodeProfile, NAME)
        if force:
            return self._compact(items, opencode, estimate, summarizer, auto=False)
        tokens = total(items)
        usable = opencode.usable()
        if not opencode.over_threshold(tokens):
            return unchanged(
                Action.COMPACT,
                NAME,
                items,
                f"{fmt(tokens)} < usable {fmt(usable)}: no overflow",
                usable=usable,
            )
        if not opencode.auto:
            return unchanged(
                Action.COMPACT,
                NAME,
                items,
                f"{fmt(tokens)} ≥ usable {fmt(usable)} but compaction.auto is off",
                usable=usable,
            )
        return self._compact(items, opencode, estimate, summarizer, auto=True)

    def truncate(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        *,
        force: bool = False,
    ) -> PolicyResult:
        require(profile, OpenCodeProfile, NAME)
        return unchanged(
            Action.TRUNCATE, NAME, items, "OpenCode's tool-output truncation is not modelled"
        )

    # -- the two algorithms --------------------------------------------------------------

    def _prune(
        self, items: Sequence[ContextItem], opencode: OpenCodeProfile, estimate: Estimate
    ) -> PolicyResult:
        plan = scan(items, opencode)
        details: dict[str, Any] = {
            "total": plan.total,
            "pruned": plan.pruned,
            "protect": opencode.prune_protect,
            "minimum": opencode.prune_minimum,
            "protect_last_turns": opencode.protect_last_turns,
            "protected_tools": list(opencode.protected_tools),
            "skipped_protected": plan.skipped_protected,
            "user_turns_passed": plan.turns,
            "stopped_by": plan.stopped_by,
            "stopped_at": items[plan.stopped_at].id if plan.stopped_at is not None else None,
            "parts": len(plan.parts),
            "when": "once, after the prompt loop exits",
        }
        found = f"found: pruned={plan.pruned} total={plan.total}"
        if plan.pruned <= opencode.prune_minimum:
            return unchanged(
                Action.PRUNE,
                NAME,
                items,
                f"{found}; nothing pruned: {fmt(plan.pruned)} ≤ minimum "
                f"{fmt(opencode.prune_minimum)}",
                **details,
            )
        by_message: dict[int, list[int]] = defaultdict(list)
        for position, index in plan.parts:
            by_message[position].append(index)
        replacements = {
            position: clear_parts(items[position].message, indices, CLEARED_MARKER)
            for position, indices in by_message.items()
        }
        return in_place(
            Action.PRUNE,
            NAME,
            items,
            replacements,
            estimate,
            reason=f"{found}; marked {len(plan.parts)} tool parts compacted",
            details=details,
        )

    def _compact(
        self,
        items: Sequence[ContextItem],
        opencode: OpenCodeProfile,
        estimate: Estimate,
        summarizer: Summarizer,
        *,
        auto: bool,
    ) -> PolicyResult:
        tokens = total(items)
        budget = opencode.max_output()
        details: dict[str, Any] = {
            "auto": auto,
            "usable": opencode.usable(),
            "count": tokens,
            "summary_budget": budget,
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
        anchor = items[body[-1]].id
        added: list[Message] = [
            _user(f"{anchor}:opencode-compaction", COMPACTION_REQUEST_TEXT),
            summary_message(f"{anchor}:opencode-summary", summary, role=Role.ASSISTANT),
        ]
        if auto:
            added.append(_user(f"{anchor}:opencode-continue", CONTINUE_TEXT))
        systems = [i for i, item in enumerate(items) if is_system(item.message)]
        slots: list[Slot] = [*systems, *added]
        trigger = (
            f"{fmt(tokens)} ≥ usable {fmt(opencode.usable())}: auto-compaction"
            if auto
            else "manual compaction"
        )
        result = rebuild(Action.COMPACT, NAME, items, slots, estimate, reason="", details=details)
        result.reason = (
            f"{trigger}: {len(body)} messages summarised, {fmt(tokens)} -> "
            f"{fmt(result.tokens_after)} tokens"
        )
        return result


def _user(message_id: str, text: str) -> Message:
    return Message(id=message_id, role=Role.USER, parts=(Part(type=PartType.TEXT, text=text),))


POLICY: Policy = OpenCodePolicy()
