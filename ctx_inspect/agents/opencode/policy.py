"""OpenCode 1.18 (``packages/opencode/src/session/{compaction,overflow,prompt,processor}.ts``),
as real runs of ``opencode-ai`` 1.18.33 show it.

- The count (``isOverflow``): the **last answered request's** ``tokens.total`` (prompt plus
  answer; else input + output + cache read + cache write) against ``usable``, not strict
  (``count >= usable``). OpenCode checks at every step-finish and again at the start of a loop
  on the last finished answer, so it decides *after* a request, from that request's figure:
  ``after_request`` (replay gives it the figure of the request just answered). Nothing is
  decided from the context about to be sent: ``manage`` does nothing.
- The provider refusing a request as too long (``ContextOverflowError``): an **overflow**
  compaction follows (``after_request`` with the refusal), unless ``compaction.auto`` is off.
  It summarises what came before the last user message and sends that message again (a copy)
  after the summary; what the refused turn had done since is dropped.
- Compaction summarises the **head** and keeps a verbatim **tail** (``select``): user turns
  (user messages that are not compaction requests, each up to the next one) are taken newest
  first, at most ``tail_turns`` of them, while their size fits ``preserve_recent``; the first
  that does not fit is split at the latest message from which the rest of it fits. Sizes are
  OpenCode's estimate of the model messages' JSON (a quarter of its length; approximated
  here). The context is then: the compaction request (rendered "What did we do so far?"), the
  summary, the tail, and after an automatic compaction the synthetic "Continue if you have
  next steps, ..." (after an overflow one, a copy of the last user message instead).
- The summarised head stays in the session's history, hidden from the model (``visible``
  false, no tokens): OpenCode's prune walks the whole history, not what the model sees.
- Prune (``compaction.prune``, **off by default** in 1.18): once, when the prompt loop exits
  (``finish``). It walks the history newest first counting user messages (compaction requests
  and synthetic ones too) and skips until ``protect_last_turns`` (2) have been seen; then it
  stops at an assistant summary or at an already-compacted output. Completed tool outputs
  (``protected_tools`` excluded) are estimated ``Math.round(length / 4)``; past the first
  ``prune_protect`` tokens they are queued, and marked only if they hold more than
  ``prune_minimum``. A marked output reads ``[Old tool result content cleared]``.
- ``admit`` / ``truncate``: OpenCode's own tool-output truncation is not modelled.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ctx_inspect.agents.opencode.profile import OpenCodeProfile
from ctx_inspect.core.estimate import estimate_text
from ctx_inspect.core.model import Message, MessageKind, Part, PartType, RequestRejected, Role
from ctx_inspect.core.policies.base import (
    Action,
    ContextItem,
    Estimate,
    ItemStatus,
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
    clear_parts,
    fmt,
    in_place,
    is_system,
    is_tool_output,
    rebuild,
    require,
)
from ctx_inspect.core.profiles import Profile

if TYPE_CHECKING:
    from ctx_inspect.core.replay import Decision, Situation

NAME = "opencode"
COMPACTION_REQUEST_TEXT = "What did we do so far?"  # what a compaction part becomes for the model
# the reason of a prune the files report without the parts it marked (a log beside stdouts)
PARTS_NOT_SHOWN = "prune (the outputs it marked are not in these files)"
CONTINUE_TEXT = (
    "Continue if you have next steps, or stop and ask for clarification if you are unsure how "
    "to proceed."
)
# the per-message and per-part JSON around the texts of a model message (role, type, ids)
_MESSAGE_JSON = 30
_PART_JSON = 30
_CALL_JSON = 60


def is_compaction_request(message: Message) -> bool:
    """The user message that starts a compaction (OpenCode renders it "What did we do so
    far?")."""
    return (
        message.role is Role.USER
        and message.kind is MessageKind.META
        and len(message.parts) == 1
        and message.parts[0].text == COMPACTION_REQUEST_TEXT
    )


def is_user_message(message: Message) -> bool:
    """What OpenCode's prune counts as a user message: every one, compaction requests and the
    synthetic ones included, but not carriers of tool results nor bookkeeping of ours."""
    if message.role is not Role.USER or is_tool_output(message):
        return False
    return message.kind is not MessageKind.META or is_compaction_request(message)


def starts_turn(message: Message) -> bool:
    """A user turn of ``select``: a user message the model sees that is not a compaction
    request."""
    return message.visible and is_user_message(message) and not is_compaction_request(message)


@dataclass(frozen=True)
class PruneScan:
    """What ``SessionCompaction.prune`` found (it logs ``found`` with ``pruned`` and ``total``)."""

    total: int  # output tokens counted
    pruned: int  # of which beyond the protected budget
    parts: tuple[tuple[int, int], ...]  # (position, part index) queued, newest first
    stopped_by: str | None  # "summary" or "compacted"
    stopped_at: int | None  # the position where the scan stopped
    turns: int  # user messages passed
    skipped_protected: int  # outputs of protected tools passed over


def scan(items: Sequence[ContextItem], profile: OpenCodeProfile) -> PruneScan:
    """The prune's backward walk over the history, without pruning anything."""
    counted = pruned = turns = skipped = 0
    queued: list[tuple[int, int]] = []
    stopped_by: str | None = None
    stopped_at: int | None = None
    for position in range(len(items) - 1, -1, -1):
        message = items[position].message
        if is_user_message(message):
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


def model_json_chars(message: Message) -> int:
    """About the length of the JSON of a message as OpenCode sends it to the model: its texts
    as JSON strings and the fixed structure around them (role, part types, call ids)."""
    chars = _MESSAGE_JSON
    for part in message.parts:
        if part.type is PartType.TOOL_CALL:
            chars += _CALL_JSON + len(part.arguments or "")
            chars += len(part.call_id or "") + len(part.tool_name or "")
        elif part.type is PartType.IMAGE:
            chars += _PART_JSON + len(part.media_type or "") + len(part.text)
        else:
            chars += _PART_JSON + len(json.dumps(part.text, ensure_ascii=False))
            if part.type is PartType.TOOL_RESULT:
                chars += len(part.call_id or "") + len(part.tool_name or "")
    return chars


def json_tokens(chars: int) -> int:
    """``Token.estimate`` of a JSON text of ``chars`` characters: ``Math.round(chars / 4)``."""
    return (chars + 2) // 4


def _hidden(message: Message) -> Message:
    return message.model_copy(update={"visible": False})


def _visible_only(estimate: Estimate) -> Estimate:
    """The agent's estimate for the messages the model sees; nothing for the hidden history."""

    def measure(message: Message) -> int:
        return estimate(message) if message.visible else 0

    return measure


@dataclass(frozen=True)
class Tail:
    start: int | None  # the position where the verbatim tail starts (None: no tail)
    budget: int
    turns: int  # user turns considered
    split: bool  # the tail starts inside a turn


def select_tail(
    items: Sequence[ContextItem], positions: Sequence[int], opencode: OpenCodeProfile
) -> Tail:
    """``SessionCompaction.select`` over the messages at ``positions`` (in order): where the
    verbatim tail starts."""
    budget = min(opencode.preserve_recent(), opencode.usable())
    limit = opencode.tail_turns
    starts = [i for i, p in enumerate(positions) if starts_turn(items[p].message)]
    if limit <= 0 or not starts:
        return Tail(None, budget, 0, False)
    ends = [*starts[1:], len(positions)]
    turns = list(zip(starts, ends, strict=True))[-limit:]
    chars = [model_json_chars(items[p].message) for p in positions]

    def size(first: int, end: int) -> int:
        return json_tokens(2 + sum(chars[first:end]))  # the messages as one JSON array

    used = 0
    keep: int | None = None
    split = False
    for first, end in reversed(turns):
        tokens = size(first, end)
        if used + tokens <= budget:
            used += tokens
            keep = first
            continue
        remaining = budget - used
        if remaining > 0:
            for start in range(first + 1, end):
                if items[positions[start]].message.role is Role.TOOL:
                    continue  # not where an OpenCode message starts
                if size(start, end) <= remaining:
                    keep, split = start, True
                    break
        break
    if keep is None or keep == 0:
        return Tail(None, budget, len(turns), False)
    return Tail(positions[keep], budget, len(turns), split)


class OpenCodePolicy:
    name = NAME

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
        """Nothing: OpenCode decides after a request, from its answer (``after_request``)."""
        require(profile, OpenCodeProfile, NAME)
        return []

    def after_request(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        summarizer: Summarizer,
        *,
        figure: int,
        refused: RequestRejected | None = None,
    ) -> list[PolicyResult]:
        """What OpenCode does once a request is answered (``figure``: its count) or refused as
        too long: an automatic compaction when the count reaches usable, an overflow one after
        the refusal; either only when ``compaction.auto`` is on."""
        opencode = require(profile, OpenCodeProfile, NAME)
        if not opencode.auto:
            return []
        usable = opencode.usable()
        if refused is not None:
            said = f" ({refused.reason})" if refused.reason else ""
            why = f"the provider refused the request as too long{said}"
            size = refused.tokens if refused.tokens is not None else figure
            return [self._compact(items, opencode, estimate, summarizer, "overflow", why, size)]
        if not opencode.over_threshold(figure):
            return []
        why = f"the last request's count {fmt(figure)} ≥ usable {fmt(usable)}"
        return [self._compact(items, opencode, estimate, summarizer, "auto", why, figure)]

    def finish(
        self, items: Sequence[ContextItem], profile: Profile, estimate: Estimate
    ) -> list[PolicyResult]:
        """What OpenCode does when its prompt loop exits: the prune, when it is enabled."""
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
                Action.PRUNE,
                NAME,
                items,
                "compaction.prune is off (the default): OpenCode does not prune",
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
        """Forced: a manual ``/compact`` (no "Continue" text). Otherwise what OpenCode would do
        with the context's size as its count."""
        opencode = require(profile, OpenCodeProfile, NAME)
        tokens = total(items)
        if force:
            return self._compact(
                items, opencode, estimate, summarizer, "manual", "manual compaction", tokens
            )
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
        why = f"{fmt(tokens)} ≥ usable {fmt(usable)}"
        return self._compact(items, opencode, estimate, summarizer, "auto", why, tokens)

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

    def undetermined(self, recorded: Decision, profile: Profile, seen: Situation) -> str | None:
        """Why a recorded decision cannot be replayed from this recording, if it cannot: which
        outputs a prune marks, and what a compaction summarises, depend on messages a log of
        requests does not hold."""
        if recorded.kind == "prune" and recorded.detail == PARTS_NOT_SHOWN:
            return (
                "the outputs this prune marked are not in these files (a log's prune beside "
                "stdouts): read opencode.db"
            )
        if seen.has_messages or recorded.kind not in ("prune", "compaction"):
            return None
        return (
            f"the {recorded.kind} depends on the session's messages, which this file does not "
            "hold (read opencode.db, or merge it with this file)"
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
            "when": "once, when the prompt loop exits",
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
            _visible_only(estimate),
            reason=f"{found}; marked {len(plan.parts)} tool outputs compacted",
            details=details,
        )

    def _compact(
        self,
        items: Sequence[ContextItem],
        opencode: OpenCodeProfile,
        estimate: Estimate,
        summarizer: Summarizer,
        trigger: str,
        why: str,
        count: int,
    ) -> PolicyResult:
        budget = opencode.max_output()
        details: dict[str, Any] = {
            "trigger": trigger,
            "usable": opencode.usable(),
            "count": count,
            "figure": count,  # what OpenCode compared with usable (explain's "projected")
            "decided_on": count,  # the decision's before: the count that crossed
            "summary_budget": budget,
        }
        shown = [
            p
            for p, item in enumerate(items)
            if item.message.visible and not is_system(item.message)
        ]
        # a compaction request already there (the recording's own) is this compaction's
        request = shown[-1] if shown and is_compaction_request(items[shown[-1]].message) else None
        candidates = [p for p in shown if p != request]
        replayed: int | None = None  # the user message an overflow compaction sends again
        dropped: list[int] = []  # what followed it: neither summarised nor kept
        if trigger == "overflow":
            users = [p for p in candidates if starts_turn(items[p].message)]
            if users:
                replayed = users[-1]
                dropped = [p for p in candidates if p > replayed]
                candidates = [p for p in candidates if p < replayed]
        tail = select_tail(items, candidates, opencode)
        head = [p for p in candidates if tail.start is None or p < tail.start]
        kept = [p for p in candidates if tail.start is not None and p >= tail.start]
        details.update(
            preserve_recent=tail.budget,
            tail_turns=opencode.tail_turns,
            tail_start=items[tail.start].id if tail.start is not None else None,
            tail_split=tail.split,
            summarised=len(head),
        )
        if not head:
            return unchanged(Action.COMPACT, NAME, items, "nothing to compact", **details)
        summary = summarizer.summarize([items[p].message for p in head], budget)
        if not summary:
            return unchanged(
                Action.COMPACT,
                NAME,
                items,
                "compaction failed: the summary is empty; the context is unchanged",
                failed=True,
                **details,
            )
        anchor = items[head[-1]].id
        slots: list[Slot] = []
        gone = {*head, *dropped}
        if replayed is not None:
            gone.add(replayed)
        for position, item in enumerate(items):
            if position in gone:
                slots.append((position, _hidden(item.message)))
            elif position != request:
                slots.append(position)
        slots.append(
            request
            if request is not None
            else _user(f"{anchor}:opencode-compaction", COMPACTION_REQUEST_TEXT, MessageKind.META)
        )
        slots.append(summary_message(f"{anchor}:opencode-summary", summary, role=Role.ASSISTANT))
        if request is None:
            # the recording's own compaction brings its continuation after its summary
            if trigger == "auto":
                slots.append(
                    _user(f"{anchor}:opencode-continue", CONTINUE_TEXT, MessageKind.ATTACHMENT)
                )
            elif trigger == "overflow" and replayed is not None:
                copy = items[replayed].message
                slots.append(
                    copy.model_copy(
                        update={"id": f"{copy.id}:opencode-replay", "kind": MessageKind.ATTACHMENT}
                    )
                )
        result = rebuild(
            Action.COMPACT,
            NAME,
            items,
            slots,
            _visible_only(estimate),
            reason="",
            details=details,
            modified=ItemStatus.SUMMARIZED,
        )
        if dropped or replayed is not None:
            lost = {items[p].id for p in dropped}
            if replayed is not None:
                lost.add(items[replayed].id)  # a copy of it follows the summary
            result.changes = [
                replace(c, status=ItemStatus.DROPPED) if c.id in lost else c for c in result.changes
            ]
        kept_note = f", {len(kept)} kept verbatim" if kept else ", no verbatim tail"
        result.reason = (
            f"{why}: {trigger} compaction, {len(head)} messages summarised{kept_note}; "
            f"{fmt(result.tokens_before)} -> {fmt(result.tokens_after)} tokens"
        )
        return result


def _user(message_id: str, text: str, kind: MessageKind) -> Message:
    return Message(
        id=message_id, role=Role.USER, kind=kind, parts=(Part(type=PartType.TEXT, text=text),)
    )


POLICY: Policy = OpenCodePolicy()
