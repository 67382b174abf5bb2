"""BaseAgent ("SuperAgent", seed 000): ``src/core/compaction.py`` and ``src/utils/truncate.py``.

What the agent does, as reference 1.4 reads it from its code:

- ``manage`` (start of every loop iteration): overflow when the estimated total is strictly
  above ``compact_ratio`` × usable (142,800 of 168,000). Then the backward tool-output prune;
  if that brings the total under the threshold, the pruned copy is sent **for this request
  only** (``details["persistent"] = False``: the loop keeps its unpruned list). Otherwise AI
  compaction of the (pruned) messages: the context becomes exactly the original system prompt
  plus one user message ``SUMMARY_PREFIX + summary``; nothing recent is kept. An empty summary
  is a failed compaction and the messages are returned as they were.
- The prune walks backwards counting user messages and skips everything until it has passed
  ``protect_last_turns`` (2) of them, so everything after the second-to-last user message is
  protected. Each tool output counts ``floor(len/4)``; the output that takes the running total
  strictly past ``prune_protect`` is itself prunable, and so is every older one; the scan stops
  at an output already equal to the marker. It prunes only if the prunable sum is strictly
  above ``prune_minimum``.
- ``admit``: every tool output is middle-out truncated to ``tool_output_max_tokens`` measured as
  UTF-8 bytes / ``tool_output_bytes_per_token``, head and tail 50/50.

A BaseAgent conversation is ``[system, user(instruction), user("Current directory and files:
..."), assistant, tool, ...]``: every tool output follows the last two user messages, so the
prune finds nothing ("Prune scan: 0 total tokens, 0 prunable") until later user messages (the
self-verification reminder, image injections) appear, and overflow goes straight to compaction.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctx_inspect.agents.baseagent.profile import BaseAgentProfile
from ctx_inspect.core.estimate import estimate_text
from ctx_inspect.core.model import Message, MessageKind, Role
from ctx_inspect.core.policies.base import (
    Action,
    ContextItem,
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
    content_text,
    fmt,
    in_place,
    is_tool_output,
    is_user_turn,
    rebuild,
    require,
)
from ctx_inspect.core.profiles import Profile

NAME = "baseagent"
PRUNE_MARKER = "[Old tool result content cleared]"
SUMMARY_PREFIX = (
    "Another language model started to solve this problem and produced a summary of its "
    "thinking process. You also have access to the state of the tools that were used. Use "
    "this to build on the work that has already been done and avoid duplicating work.\n\n"
    "Here is the summary from the previous context:\n\n"
)
_TRUNCATED = re.compile(r"\n\n\.\.\.\d+ tokens truncated\.\.\.\n\n")


@dataclass(frozen=True)
class PruneScan:
    """What the backward scan found (the agent logs ``Prune scan: {scanned} total tokens,
    {prunable} prunable``)."""

    scanned: int  # tool-output tokens counted past the protected turns
    prunable: int  # of which beyond the protected budget
    positions: tuple[int, ...]  # the prunable outputs, newest first
    stopped_at: int | None  # an already-cleared output that ended the scan
    turns: int  # user messages passed


def scan(items: Sequence[ContextItem], profile: BaseAgentProfile) -> PruneScan:
    """``prune_old_tool_outputs``' backward walk, without pruning anything."""
    scanned = prunable = turns = 0
    positions: list[int] = []
    stopped_at: int | None = None
    for position in range(len(items) - 1, -1, -1):
        message = items[position].message
        if is_user_turn(message):
            turns += 1
        if turns < profile.protect_last_turns or not is_tool_output(message):
            continue
        text = content_text(message)
        if text == PRUNE_MARKER:
            stopped_at = position
            break
        tokens = estimate_text(profile.estimator, text)
        scanned += tokens
        if scanned > profile.prune_protect:
            prunable += tokens
            positions.append(position)
    return PruneScan(scanned, prunable, tuple(positions), stopped_at, turns)


def middle_out(text: str, max_tokens: int, bytes_per_token: int) -> str | None:
    """``middle_out_truncate``: None when the text fits (UTF-8 bytes // 4 ≤ max tokens), else
    the head and tail halves of ``max_tokens × bytes_per_token`` bytes around the marker.

    Cuts fall on byte offsets and partial characters are dropped, as the agent's
    ``decode(errors="ignore")`` does. (With a limit of 0 the agent's ``bytes[-0:]`` would keep
    the whole text as the tail; we keep an empty tail instead.)
    """
    data = text.encode("utf-8", "surrogatepass")
    if len(data) // bytes_per_token <= max_tokens:
        return None
    max_bytes = max_tokens * bytes_per_token
    head_bytes = max_bytes // 2
    tail_bytes = max_bytes - head_bytes
    head = data[:head_bytes].decode("utf-8", "ignore")
    tail = data[len(data) - tail_bytes :].decode("utf-8", "ignore") if tail_bytes else ""
    kept = len(head.encode("utf-8")) + len(tail.encode("utf-8"))
    removed = (len(data) - kept) // bytes_per_token
    return f"{head}\n\n...{removed} tokens truncated...\n\n{tail}"


def _truncated(item: ContextItem, profile: BaseAgentProfile) -> Message | None:
    """The tool output middle-out truncated, or None when it fits or was truncated already."""
    if not is_tool_output(item.message):
        return None
    text = content_text(item.message)
    if _TRUNCATED.search(text):
        return None  # the agent truncated it when it arrived
    cut = middle_out(text, profile.tool_output_max_tokens, profile.tool_output_bytes_per_token)
    return None if cut is None else replace_text(item.message, cut)


class BaseAgentPolicy:
    name = NAME

    # -- admit ---------------------------------------------------------------------------

    def admit(
        self,
        item: ContextItem,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
    ) -> PolicyResult | None:
        """Middle-out truncation of a tool output as it enters the context (the result is
        about the output alone; ``items``, the context before it, does not matter here)."""
        agent = require(profile, BaseAgentProfile, NAME)
        cut = _truncated(item, agent)
        if cut is None:
            return None
        size = len(content_text(item.message).encode("utf-8", "surrogatepass"))
        approx = size // agent.tool_output_bytes_per_token
        limit = agent.tool_output_max_bytes()
        return admitted(
            Action.TRUNCATE,
            NAME,
            item,
            cut,
            estimate,
            reason=(
                f"tool output of {fmt(size)} bytes (~{fmt(approx)} tokens) > "
                f"{fmt(agent.tool_output_max_tokens)}: middle-out truncated to "
                f"{fmt(limit)} bytes"
            ),
            details={"bytes": size, "max_tokens": agent.tool_output_max_tokens, "max_bytes": limit},
        )

    # -- manage --------------------------------------------------------------------------

    def manage(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        summarizer: Summarizer,
    ) -> list[PolicyResult]:
        """``manage_context``: nothing below the threshold; else the prune (its result even when
        it skips, as the agent logs its scan), then compaction if still overflowing."""
        agent = require(profile, BaseAgentProfile, NAME)
        if not agent.over_threshold(total(items)):
            return []
        pruned = self._prune(items, agent, estimate)
        if not agent.over_threshold(pruned.tokens_after):
            return [pruned]
        return [pruned, self._compact(pruned.items, agent, estimate, summarizer)]

    # -- manual actions ------------------------------------------------------------------

    def prune(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        *,
        force: bool = False,
    ) -> PolicyResult:
        agent = require(profile, BaseAgentProfile, NAME)
        tokens = total(items)
        if not force and not agent.over_threshold(tokens):
            return unchanged(
                Action.PRUNE,
                NAME,
                items,
                f"{fmt(tokens)} ≤ threshold {fmt(agent.threshold())}: BaseAgent prunes only "
                "on overflow",
                threshold=agent.threshold(),
                persistent=False,
            )
        return self._prune(items, agent, estimate)

    def compact(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        summarizer: Summarizer,
        *,
        force: bool = False,
    ) -> PolicyResult:
        """Forced: compaction now. Otherwise only where ``manage`` would compact (overflow that
        the prune does not resolve), summarising the pruned copy as the agent does."""
        agent = require(profile, BaseAgentProfile, NAME)
        if force:
            return self._compact(items, agent, estimate, summarizer)
        tokens = total(items)
        threshold = agent.threshold()
        if not agent.over_threshold(tokens):
            return unchanged(
                Action.COMPACT,
                NAME,
                items,
                f"{fmt(tokens)} ≤ threshold {fmt(threshold)}: no overflow, no compaction",
                threshold=threshold,
            )
        pruned = self._prune(items, agent, estimate)
        if not agent.over_threshold(pruned.tokens_after):
            return unchanged(
                Action.COMPACT,
                NAME,
                items,
                f"pruning alone brings {fmt(tokens)} to {fmt(pruned.tokens_after)} ≤ threshold "
                f"{fmt(threshold)}: no compaction",
                threshold=threshold,
            )
        compacted = self._compact(pruned.items, agent, estimate, summarizer)
        if not compacted.fired:
            return unchanged(Action.COMPACT, NAME, items, compacted.reason, **compacted.details)
        if not pruned.fired:
            return compacted
        return chain(
            pruned,
            compacted,
            action=Action.COMPACT,
            reason=f"{pruned.reason}; then {compacted.reason}",
            details={**compacted.details, "prune": pruned.details},
        )

    def truncate(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        *,
        force: bool = False,
    ) -> PolicyResult:
        """Middle-out truncation of every tool output over the limit (the agent truncates each
        output as it arrives, so ``force`` changes nothing)."""
        agent = require(profile, BaseAgentProfile, NAME)
        cuts = {
            i: cut for i, item in enumerate(items) if (cut := _truncated(item, agent)) is not None
        }
        limit = agent.tool_output_max_tokens
        details = {"max_tokens": limit, "max_bytes": agent.tool_output_max_bytes()}
        if not cuts:
            return unchanged(
                Action.TRUNCATE,
                NAME,
                items,
                f"no tool output over {fmt(limit)} tokens (UTF-8 bytes / "
                f"{agent.tool_output_bytes_per_token})",
                **details,
            )
        return in_place(
            Action.TRUNCATE,
            NAME,
            items,
            cuts,
            estimate,
            reason=f"middle-out truncated {len(cuts)} tool outputs to {fmt(limit)} tokens",
            details={**details, "outputs": len(cuts)},
            status=ItemStatus.TRUNCATED,
        )

    # -- the agent's two stages ----------------------------------------------------------

    def _prune(
        self, items: Sequence[ContextItem], agent: BaseAgentProfile, estimate: Estimate
    ) -> PolicyResult:
        plan = scan(items, agent)
        tokens = total(items)
        threshold = agent.threshold()
        details: dict[str, Any] = {
            "threshold": threshold,
            "scanned": plan.scanned,
            "prunable": plan.prunable,
            "protect": agent.prune_protect,
            "minimum": agent.prune_minimum,
            "protect_last_turns": agent.protect_last_turns,
            "user_turns_passed": plan.turns,
            "stopped_at": items[plan.stopped_at].id if plan.stopped_at is not None else None,
            "outputs": len(plan.positions),
            "persistent": False,  # the loop keeps its unpruned list
        }
        head = f"Prune scan: {plan.scanned} total tokens, {plan.prunable} prunable"
        if plan.prunable <= agent.prune_minimum:
            return unchanged(
                Action.PRUNE,
                NAME,
                items,
                f"{head}; skipped: prunable {fmt(plan.prunable)} ≤ minimum "
                f"{fmt(agent.prune_minimum)}",
                **details,
            )
        replacements = {i: replace_text(items[i].message, PRUNE_MARKER) for i in plan.positions}
        result = in_place(
            Action.PRUNE, NAME, items, replacements, estimate, reason=head, details=details
        )
        verdict = (
            "still over the threshold"
            if agent.over_threshold(result.tokens_after)
            else "sufficient, for this request only"
        )
        result.reason = (
            f"{head}: {len(plan.positions)} tool outputs cleared, {fmt(tokens)} -> "
            f"{fmt(result.tokens_after)} tokens ({verdict}; threshold {fmt(threshold)})"
        )
        return result

    def _compact(
        self,
        items: Sequence[ContextItem],
        agent: BaseAgentProfile,
        estimate: Estimate,
        summarizer: Summarizer,
    ) -> PolicyResult:
        budget = agent.summary_max_tokens
        details: dict[str, Any] = {"summary_budget": budget, "threshold": agent.threshold()}
        if not items:
            return unchanged(Action.COMPACT, NAME, items, "nothing to compact", **details)
        summary = summarizer.summarize([item.message for item in items], budget)
        if not summary:
            return unchanged(
                Action.COMPACT,
                NAME,
                items,
                "Compaction failed: empty response; the messages are returned unchanged",
                failed=True,
                **details,
            )
        # The original system prompt stays, and so does a stand-in (META) for a system prompt
        # and tool schemas that a transcript does not show.
        system = next((i for i, x in enumerate(items) if _is_prompt(x.message)), None)
        stand_ins = [i for i, x in enumerate(items) if x.message.kind is MessageKind.META]
        fixed = [i for i in stand_ins if items[i].message.role is Role.SYSTEM]
        message = summary_message(f"{items[-1].id}:baseagent-summary", SUMMARY_PREFIX + summary)
        kept = sorted({*fixed, *([] if system is None else [system])})
        slots: list[Slot] = [*kept, message]
        # loop.py adopts the result only when the message count drops; a stand-in holds an
        # unknown number of messages (at least three in a real BaseAgent run).
        details["persistent"] = bool(stand_ins) or len(slots) < len(items)
        result = rebuild(Action.COMPACT, NAME, items, slots, estimate, reason="", details=details)
        result.reason = (
            f"Compaction result: {fmt(result.tokens_before)} -> {fmt(result.tokens_after)} "
            f"tokens, {len(items)} -> {len(slots)} messages (system prompt + summary)"
        )
        return result


def _is_prompt(message: Message) -> bool:
    return message.role is Role.SYSTEM and message.kind is not MessageKind.META


POLICY: Policy = BaseAgentPolicy()
