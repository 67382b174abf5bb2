"""tiancaiamao/ai, the Go agent (seed 003, commit 7bc6f19): its context management as a policy.

- ``admit``: ``truncateToolContent`` on one tool output (``tool_output.py``). An output that
  already carries the agent's truncation notice keeps the agent's cut (or is cut further, or
  sized larger from the notice): it is never cut twice.
- ``manage``: what happens between a turn's tool executions and the next request, in order:
  the per-turn tool-result summaries (``maybeSummarizeToolResults``: while more visible tool
  results than ``tool_call_cutoff`` remain, the oldest is archived and a
  ``[Tool output summary]`` message is appended), reported as a PRUNE; then auto-compaction
  (``tryAutoCompact``) when the estimate reaches the effective limit (``trigger.py``), reported
  as a COMPACT (``compaction.py``).
- ``prune``: the tool-result summaries alone, with the heuristic summary (no summarizer is
  given to ``prune``; the agent uses the same text when its LLM summary fails). With
  ``force`` it runs even when the strategy is ``off``.
- ``compact``: the session's compaction or the library's; without ``force`` only when
  ``ShouldCompact`` holds; with ``force`` as the agent's recovery path and its ``compact``
  command do, whatever the estimate.
- ``after_request``: the recovery after the provider refused a request as too long.
- ``truncate``: the tool-output limits applied to every tool result in context.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ctx_inspect.agents.goagent.compaction import compact
from ctx_inspect.agents.goagent.messages import (
    EMPTY_OUTPUT,
    archive,
    fmt,
    go_text,
    heuristic_tool_summary,
    is_tool_result,
    output_of,
    tool_summary_text,
    trim_runes,
    trim_with_tail,
    user_message,
    visible_tool_results,
)
from ctx_inspect.agents.goagent.profile import NAME, GoAgentProfile
from ctx_inspect.agents.goagent.tool_output import (
    SPILL_PATH,
    RecordedCut,
    ToolOutputLimit,
    cuts,
    limit_tool_output,
    recorded_cut,
    recut,
)
from ctx_inspect.agents.goagent.trigger import new_prompt_length, recoveries_in_prompt, trigger_of
from ctx_inspect.core.model import TRIGGER_NOT_RECORDED, Message, MessageKind, RequestRejected
from ctx_inspect.core.policies.base import (
    Action,
    ContextItem,
    ContextList,
    Estimate,
    ItemChange,
    ItemStatus,
    PolicyResult,
    Summarizer,
    admitted,
    replace_text,
    total,
    unchanged,
)
from ctx_inspect.core.profiles import Profile
from ctx_inspect.errors import ConfigError, InspectorError

if TYPE_CHECKING:
    from ctx_inspect.core.replay import Decision, Situation

UNRECORDED_SUMMARIES = (
    "the agent summarizes tool results in its running loop's list only: its stdout, session "
    "and log never show it"
)


def _profile(profile: Profile) -> GoAgentProfile:
    if not isinstance(profile, GoAgentProfile):
        raise ConfigError(
            "profile mismatch",
            f"the goagent policy needs the goagent profile, not {profile.name!r}",
        )
    return profile


def _summaries_due(items: Sequence[ContextItem], profile: GoAgentProfile) -> bool:
    """Whether the per-turn tool summaries act (without ``force``)."""
    cutoff = profile.tool_call_cutoff
    # a context of no more items than the cutoff cannot hold more tool results than it
    if cutoff <= 0 or profile.tool_summary_strategy == "off" or len(items) <= cutoff:
        return False
    return len(visible_tool_results(items)) > cutoff


class GoAgentPolicy:
    """tiancaiamao/ai's context management as a policy."""

    name = NAME
    # replay: it decides at every turn's end, the last one included; whether its session
    # compactor fails depends on what its asynchronous writer had written, which the recording
    # shows and a replay cannot see
    decides_after_each_turn = True
    adopts_recorded_compaction = True

    # -- admit / truncate -------------------------------------------------------------------

    def admit(
        self,
        item: ContextItem,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
    ) -> PolicyResult | None:
        """The tool-output limits on one output (the result is about that output alone)."""
        prof = _profile(profile)
        if not is_tool_result(item.message):
            return None
        text = output_of(item.message)
        cut = recorded_cut(text)
        if cut is not None:
            return self._admit_recorded(item, cut, prof, estimate)
        limited = limit_tool_output(text, prof)
        if limited is None:
            return None
        how = (
            "spilled to a file (simulated)" if limited.spilled else f"cut by {limited.truncated_by}"
        )
        return admitted(
            Action.TRUNCATE,
            NAME,
            item,
            replace_text(item.message, limited.text),
            estimate,
            reason=self._limit_reason(limited, prof),
            details={**limited.as_dict(), "spill_path": SPILL_PATH if limited.spilled else None},
            note=how,
        )

    @staticmethod
    def _admit_recorded(
        item: ContextItem, cut: RecordedCut, profile: GoAgentProfile, estimate: Estimate
    ) -> PolicyResult:
        """An output the agent already cut (or spilled), as these limits would have it: the
        same cut when they cut it the same way; cut further from what the agent kept; or, when
        they keep more, the kept part grown to that size with filler (the recording holds no
        more of it). An output these limits leave whole is restored at its size, and the
        result does not fire (``restored``)."""
        text, reason = recut(cut, profile, output_of(item.message))
        details = {
            "recorded_cut": True,
            "total_bytes": cut.total_bytes,
            "kept_bytes": cut.kept_bytes,
            "spilled": cut.spilled,
        }
        message = replace_text(item.message, text)
        if not cuts(cut, profile):
            tokens = estimate(message)
            return PolicyResult(
                action=Action.TRUNCATE,
                policy=NAME,
                fired=False,
                reason=reason,
                items=[ContextItem(message, tokens, item.index)],
                changes=[ItemChange(item.id, ItemStatus.KEPT, item.tokens, tokens, reason)],
                tokens_before=cut.total_tokens,
                tokens_after=tokens,
                details={**details, "restored": True},
            )
        result = admitted(
            Action.TRUNCATE,
            NAME,
            item,
            message,
            estimate,
            reason=reason,
            details=details,
            note="spilled (recorded)" if cut.spilled else "cut (recorded)",
        )
        result.tokens_before = cut.total_tokens
        return result

    @staticmethod
    def _limit_reason(limited: ToolOutputLimit, profile: GoAgentProfile) -> str:
        if limited.spilled:
            return (
                f"output of {fmt(limited.total_chars)} chars > large-output threshold "
                f"{fmt(profile.tool_output_large_threshold)}: replaced by a spill notice "
                "(simulated, no file written)"
            )
        return (
            f"output of {fmt(limited.total_lines)} lines / {fmt(limited.total_bytes)} bytes / "
            f"{fmt(limited.total_chars)} chars over the limits "
            f"({fmt(profile.tool_output_max_lines)} lines, "
            f"{fmt(profile.tool_output_max_bytes)} bytes, "
            f"{fmt(profile.tool_output_max_chars)} chars): cut by {limited.truncated_by}"
        )

    def truncate(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        *,
        force: bool = False,
    ) -> PolicyResult:
        """The tool-output limits on every tool result in context. The agent applies them to
        each output as it arrives, so ``force`` changes nothing."""
        prof = _profile(profile)
        new_items: list[ContextItem] = []
        changes: list[ItemChange] = []
        count = 0
        for item in items:
            limited = (
                limit_tool_output(output_of(item.message), prof)
                if is_tool_result(item.message)
                else None
            )
            if limited is None:
                new_items.append(item)
                continue
            message = replace_text(item.message, limited.text)
            tokens = estimate(message)
            new_items.append(ContextItem(message, tokens, item.index))
            note = "spilled (simulated)" if limited.spilled else f"cut by {limited.truncated_by}"
            changes.append(ItemChange(item.id, ItemStatus.TRUNCATED, item.tokens, tokens, note))
            count += 1
        if count == 0:
            return unchanged(
                Action.TRUNCATE, NAME, items, "no tool output exceeds the tool-output limits"
            )
        before, after = total(items), total(new_items)
        return PolicyResult(
            action=Action.TRUNCATE,
            policy=NAME,
            fired=True,
            reason=f"{count} tool output(s) over the limits cut: {fmt(before)} → {fmt(after)}",
            items=new_items,
            changes=changes,
            tokens_before=before,
            tokens_after=after,
            details={"truncated": count},
        )

    # -- per-turn tool-result summaries -----------------------------------------------------

    def _tool_summaries(
        self,
        items: Sequence[ContextItem],
        profile: GoAgentProfile,
        estimate: Estimate,
        summarizer: Summarizer | None,
        *,
        force: bool,
    ) -> PolicyResult:
        cutoff = profile.tool_call_cutoff
        strategy = profile.tool_summary_strategy
        visible = visible_tool_results(items)
        figures: dict[str, Any] = {
            "visible_tool_results": len(visible),
            "cutoff": cutoff,
            "strategy": strategy,
        }
        if cutoff <= 0:
            return unchanged(
                Action.PRUNE,
                NAME,
                items,
                "tool_call_cutoff is 0: tool summaries are off",
                **figures,
            )
        if strategy == "off" and not force:
            return unchanged(
                Action.PRUNE, NAME, items, "the tool summary strategy is off", **figures
            )
        excess = len(visible) - cutoff
        if excess <= 0:
            return unchanged(
                Action.PRUNE,
                NAME,
                items,
                f"visible tool results {len(visible)} ≤ cutoff {cutoff}",
                **figures,
            )
        replacements: dict[int, ContextItem] = {}
        changes: list[ItemChange] = []
        added: list[ContextItem] = []
        fallbacks = 0
        for idx in visible[:excess]:  # oldest first, one per iteration as the agent does
            original = items[idx]
            summary, fell_back = self._summarize_tool(original.message, profile, summarizer)
            fallbacks += fell_back
            replacements[idx], change = archive(original, estimate)
            changes.append(change)
            message = user_message(
                f"{NAME}:tool-summary:{original.id}",
                tool_summary_text(original.message, summary),
                MessageKind.TOOL_SUMMARY,
            )
            added.append(ContextItem(message, estimate(message)))
        # on a context list, the marks before the first archived output stay valid
        new_items: list[ContextItem]
        if isinstance(items, ContextList):
            new_items = items.replaced(replacements)
        else:
            new_items = [replacements.get(i, item) for i, item in enumerate(items)]
        new_items.extend(added)
        changes.extend(
            ItemChange(a.id, ItemStatus.ADDED, 0, a.tokens, "[Tool output summary]") for a in added
        )
        before, after = total(items), total(new_items)
        return PolicyResult(
            action=Action.PRUNE,
            policy=NAME,
            fired=True,
            reason=(
                f"visible tool results {len(visible)} > cutoff {cutoff}: the oldest {excess} "
                f"archived and summarized ({fmt(before)} → {fmt(after)} tokens)"
            ),
            items=new_items,
            changes=changes,
            tokens_before=before,
            tokens_after=after,
            details={
                **figures,
                "archived": excess,
                "heuristic_summaries": fallbacks,
                "undetermined": UNRECORDED_SUMMARIES,
                "loop_only": True,  # the running loop's list: gone when the prompt ends
                "replaced_at": sorted(replacements),  # positions in the items given
            },
        )

    @staticmethod
    def _summarize_tool(
        message: Message, profile: GoAgentProfile, summarizer: Summarizer | None
    ) -> tuple[str, bool]:
        """(summary, whether the heuristic fallback was used)."""
        heuristic = heuristic_tool_summary(message, profile.tool_summary_heuristic_runes)
        if summarizer is None or profile.tool_summary_strategy != "llm":
            return heuristic, True
        raw = trim_with_tail(
            go_text(message).strip() or EMPTY_OUTPUT, profile.tool_summary_input_chars
        )
        clipped = replace_text(message, raw)
        try:
            text = summarizer.summarize([clipped], max(1, profile.tool_summary_output_runes // 4))
        except InspectorError:  # the agent falls back to the heuristic text on an LLM error
            return heuristic, True
        text = text.strip()
        if not text:
            return heuristic, True
        return trim_runes(text, profile.tool_summary_output_runes), False

    # -- the contract -----------------------------------------------------------------------

    def manage(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        summarizer: Summarizer,
        *,
        reported: Mapping[str, int] | None = None,
    ) -> list[PolicyResult]:
        """After a turn's tools, before the next request: tool summaries, then auto-compaction."""
        prof = _profile(profile)
        results: list[PolicyResult] = []
        current: Sequence[ContextItem] = items
        # replay asks before every request and keeps only what fires: when a step does
        # nothing, no result is written for it
        # the loop summarizes tool results after they come in: never before a prompt's first
        # request
        if _summaries_due(current, prof) and not new_prompt_length(current):
            summaries = self._tool_summaries(current, prof, estimate, summarizer, force=False)
            if summaries.fired:
                results.append(summaries)
                current = summaries.items
        trigger = trigger_of(current, prof, reported, turn_end=True)
        if trigger.fires:
            compaction = compact(
                current,
                prof,
                estimate,
                summarizer,
                force=False,
                reported=reported,
                trigger=trigger,
            )
            if compaction.fired:
                results.append(compaction)
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
        """The recovery after the provider refused a request as too long (``loop.go``): the
        compactor on the loop's list, once per prompt (``max_compaction_recoveries``); a
        recovery that fails is still a decision."""
        prof = _profile(profile)
        if refused is None or prof.max_compaction_recoveries <= 0:
            return []
        if recoveries_in_prompt(items) >= prof.max_compaction_recoveries:
            return []
        size = refused.tokens if refused.tokens is not None else figure
        said = f" ({refused.reason})" if refused.reason else ""
        why = f"recovery: the provider refused the request ({fmt(size)} tokens) as too long{said}"
        result = compact(
            items, prof, estimate, summarizer, force=True, reported=None, recovery=True
        )
        details = {**result.details, "recovery": True, "decided_on": size}
        if not result.fired:
            details.update(failed=True, error=result.details.get("error"))
            result = replace(result, fired=True, items=list(items))
        return [replace(result, reason=f"{why}; {result.reason}", details=details)]

    def undetermined(self, recorded: Decision, profile: Profile, seen: Situation) -> str | None:
        """Why a recorded decision cannot be replayed from this recording, if it cannot: a
        session file does not say what caused a compaction (a refusal by the provider it does
        not record, say)."""
        if recorded.kind == "compaction" and recorded.detail.startswith(TRIGGER_NOT_RECORDED):
            return (
                "the recording does not say what caused this compaction (for one, a provider's "
                "refusal it does not record): replay follows it and does not judge it"
            )
        return None

    def prune(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        *,
        force: bool = False,
    ) -> PolicyResult:
        return self._tool_summaries(items, _profile(profile), estimate, None, force=force)

    def compact(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        summarizer: Summarizer,
        *,
        force: bool = False,
        reported: Mapping[str, int] | None = None,
    ) -> PolicyResult:
        return compact(
            items, _profile(profile), estimate, summarizer, force=force, reported=reported
        )


POLICY = GoAgentPolicy()
