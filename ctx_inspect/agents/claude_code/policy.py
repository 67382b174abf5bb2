"""Claude Code (transcripts.md 1.6-1.7; the real runs of 2.1.329): auto-compaction, reactive
compaction and micro-compaction.

- ``manage`` (before a request): micro-compaction first when its time trigger fires (below),
  then compaction when the figure **reaches** the profile's threshold. The figure is the one the
  agent compares (replay rebuilds it, ``ClaudeCodeProfile.measure_basis``): 2.1 takes the
  latest response's usage (prompt + output) plus its own estimate of what came after that
  response's first record; 2.0 the usage alone. Which threshold depends on the version and the
  auto-compact window (``ClaudeCodeProfile.proactive``): with a window set, or before 2.1.120,
  ``window − min(max output, 20,000) − 13,000`` (2.0: ``window − 45,000``); with the window
  unset ("auto") from 2.1.120 there is none, and the agent compacts only after the provider
  refuses a request as too long (the figure is then that request's size, over the model's
  window: a *reactive* compaction, in the step after the refused request).
- A compaction replaces the conversation with one user message (kind SUMMARY,
  ``isCompactSummary`` in the transcript): ``SUMMARY_PREFIX`` + the summary. 2.1 keeps the
  latest response and what followed it verbatim after the summary (``preservedSegment``);
  2.0 keeps nothing. The system prompt is sent with every request, so system messages stay.
  An empty summary is a failed compaction.
- ``prune`` is micro-compaction: old tool results are cleared in place (``[Old tool result
  content cleared]``), keeping the ``MICROCOMPACT_KEEP_RECENT`` most recent results of the
  compactable tools (``COMPACTABLE_TOOLS``); results of other tools are neither counted nor
  cleared. Each tool_result block (one per ``tool_use`` id) is a unit. Claude Code fires it
  when more than ``MICROCOMPACT_GAP_MINUTES`` have passed since the last assistant message
  (its prompt cache has expired by then); without a clock we compare the newest message's
  timestamp with that assistant message's, and without timestamps it does not fire on its own.
  These three settings come from third-party reports of Claude Code's source (no real sample
  has a ``microcompact_boundary``) and are module constants; the same reports give the trigger
  as off by default (a server-side flag), so it runs only with ``time_based_microcompact``.
- ``admit`` / ``truncate``: Claude Code's tool-output limits are not covered by the
  reference nor the profile; nothing is modelled.
- ``after_request``: the reactive compaction, once the provider refused a request (2.1).
- ``undetermined``: a recorded compaction that, under the profile's settings, could only have
  followed a refusal that no file given records: replay says so instead of counting it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ctx_inspect.agents.claude_code.profile import ClaudeCodeProfile
from ctx_inspect.core.model import Message, PartType, RequestRejected, Role
from ctx_inspect.core.policies.base import (
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
from ctx_inspect.core.policies.blocks import (
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
from ctx_inspect.core.profiles import Profile

if TYPE_CHECKING:
    from ctx_inspect.core.replay import Decision, Situation

NAME = "claude-code"
SUMMARY_PREFIX = (
    "This session is being continued from a previous conversation that ran out of context. "
    "The conversation is summarized below:\n"
)
SUMMARY_PREFIX_21 = (  # 2.1.3xx
    "This session is being continued from a previous conversation that ran out of context. "
    "The summary below covers the earlier portion of the conversation.\n\n"
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
        if claude.time_based_microcompact and _idle_fires(idle_minutes(items)):
            micro = self.prune(work, claude, estimate)
            if micro.fired:
                results.append(micro)
                work = micro.items
        if claude.proactive() and claude.over_threshold(total(work)):
            results.append(self._compact(work, claude, estimate, summarizer, auto=True))
        return results

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
        """The reactive compaction once the provider refused a request as too long
        (``refused``; 2.1); nothing after an answered request (the agent checks before the
        next one, ``manage``)."""
        claude = require(profile, ClaudeCodeProfile, NAME)
        if refused is None or not claude.rule().reactive_compaction:
            return []  # 2.0 shows the refusal; the user compacts
        size = refused.tokens if refused.tokens is not None else figure
        return [self._compact(items, claude, estimate, summarizer, auto=True, refused=size)]

    def undetermined(self, recorded: Decision, profile: Profile, seen: Situation) -> str | None:
        """Why a recorded compaction cannot be judged, or None when it can: under these
        settings it could only have followed a refusal of the request as too long, and no
        input given records one (the session file never does), nor is the agent's own figure
        over the provider's limit."""
        claude = require(profile, ClaudeCodeProfile, NAME)
        if recorded.kind != "compaction" or recorded.trigger != "auto":
            return None
        if claude.proactive() or seen.refused is not None:
            return None
        if not claude.rule().reactive_compaction:
            return None
        figure = (
            ""
            if seen.figure is None
            else f"; the agent's own figure before it was {fmt(seen.figure)}"
        )
        return (
            f"with autocompact_window=auto, Claude Code {claude.version} has no threshold: it "
            f"compacts after the provider refuses a request as too long (over "
            f"{fmt(claude.provider_limit())}), and no input given records the refusal (the "
            f"session file never does{figure}). If the run set --autocompact / "
            f"autoCompactWindow / CLAUDE_CODE_AUTO_COMPACT_WINDOW, pass it with --set "
            f"autocompact_window=N"
        )

    def prune(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        *,
        force: bool = False,
    ) -> PolicyResult:
        """Micro-compaction; without ``force`` only when it is on and the idle gap passes the
        trigger."""
        claude = require(profile, ClaudeCodeProfile, NAME)
        idle = idle_minutes(items)
        details: dict[str, Any] = {
            "keep_recent": MICROCOMPACT_KEEP_RECENT,
            "gap_minutes": MICROCOMPACT_GAP_MINUTES,
            "idle_minutes": idle,
            "compactable_tools": sorted(COMPACTABLE_TOOLS),
        }
        if not force and not (claude.time_based_microcompact and _idle_fires(idle)):
            why = (
                "time-based micro-compaction is off (time_based_microcompact, Claude Code's "
                "default)"
                if not claude.time_based_microcompact
                else "no timestamps to measure the idle gap"
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
        refused: int | None = None,
    ) -> PolicyResult:
        """A compaction: the user's (``auto`` False), at the threshold, or after a refusal
        (``refused``: the refused request's size)."""
        tokens = total(items)
        budget = claude.output_reserve()
        reactive = auto and (refused is not None or not claude.proactive())
        trigger = "manual" if not auto else "reactive" if reactive else "auto"
        tail = preserved_tail(items) if claude.rule().counts_since_answer else []
        details: dict[str, Any] = {
            "trigger": trigger,
            "threshold": claude.threshold(),
            "pre_tokens": tokens,
            "summary_budget": budget,
            "preserved_tail": len(tail),
        }
        kept = set(tail)
        body = [i for i, item in enumerate(items) if not is_system(item.message) and i not in kept]
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
        prefix = SUMMARY_PREFIX_21 if claude.rule().counts_since_answer else SUMMARY_PREFIX
        message = summary_message(f"{items[body[-1]].id}:compact-summary", prefix + summary)
        systems = [i for i, item in enumerate(items) if is_system(item.message) and i not in kept]
        slots: list[Slot] = [*systems, message, *tail]
        result = rebuild(Action.COMPACT, NAME, items, slots, estimate, reason="", details=details)
        if trigger == "manual":
            why = "/compact"
        elif trigger == "reactive":
            size = f"{fmt(refused)} tokens" if refused is not None else f"{fmt(tokens)} tokens"
            why = (
                f"the provider refused the request ({size} > {fmt(claude.provider_limit())}): "
                "reactive compaction"
            )
        else:
            why = f"{fmt(tokens)} ≥ auto-compact threshold {fmt(claude.threshold())}"
        kept_text = f", the last {len(tail)} kept verbatim" if tail else ""
        result.reason = (
            f"{why}: {len(body)} messages replaced by the summary{kept_text}, {fmt(tokens)} -> "
            f"{fmt(result.tokens_after)} tokens"
        )
        return result


def preserved_tail(items: Sequence[ContextItem]) -> list[int]:
    """The positions 2.1 keeps verbatim after the summary: the latest response (from its first
    record: the records of one response are consecutive assistant messages) and everything
    after it."""
    last = next(
        (i for i in range(len(items) - 1, -1, -1) if items[i].message.role is Role.ASSISTANT),
        None,
    )
    if last is None:
        return []
    while last > 0 and items[last - 1].message.role is Role.ASSISTANT:
        last -= 1
    return list(range(last, len(items)))


POLICY: Policy = ClaudeCodePolicy()
