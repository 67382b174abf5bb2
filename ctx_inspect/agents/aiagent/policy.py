"""netdata ai-agent (seed 002): a context guard that forces a final turn, and nothing else.

ai-agent never prunes and never compacts. Its context management is ``ContextGuard``
(``guard.py``): before each request it projects the counters against each target's
limit and, when nothing fits, shrinks the tools to the final report and forces the final turn;
before each tool output enters the context it reserves the output's tokens and, when they do
not fit, drops the output for ``(tool failed: context window budget exceeded)`` and forces the
final turn too.

- ``admit``: the size cap, then the tool preflight. Outputs over ``tool_response_max_bytes``
  are cut to that many UTF-8 bytes first (the tools orchestrator does this before it reserves
  tokens, when tool-output storage is off; with storage on, the output becomes a stored handle,
  which we do not model). The cut keeps the first and last halves around the marker
  ``[···TRUNCATED N bytes···]`` (``truncation.py``). The reference does not describe the cap;
  this comes from the agent's code, seen at a later commit than the seed's.
- ``manage``: the turn preflight (``ok`` → nothing; ``skip`` / ``final`` → a FINAL_TURN result,
  the context unchanged).
- ``prune`` / ``compact``: the agent has neither; the result is unchanged and says what the
  guard would do instead (its details carry the would-be forced final turn).
- ``truncate``: the size cap applied to every tool output in context.

Counters for replay, derived from the messages in context (``guard_for_items``):

- ``current``: the provider-reported context after the previous response (input + cache read +
  cache write + output), passed as ``reported_context`` when the session knows it; otherwise the
  sum of the agent's estimates of the messages up to and including the last assistant message.
  Before the first response there is no assistant message: current is 0 and the whole
  conversation is pending (``loop_init``).
- ``pending``: the messages after the last assistant message that are not tool outputs (retry
  and injected messages); at the turn preflight also the tool outputs, since the next attempt
  moves ``new`` into ``pending``.
- ``new``: at the tool preflight, the tool outputs admitted since the last assistant message.
- ``schema``: not in the messages; pass ``schema_tokens`` (the agent's ``schema-estimate``).

The sums use each item's own estimate. The agent estimates a list as
``max(sum of tokenizer counts, ceil(sum of JSON bytes / 4))``, which can be a few tokens below
the sum of the per-message maxima; reported usage, when given, makes ``current`` exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal
from weakref import WeakKeyDictionary

from ctx_inspect.agents.aiagent.guard import (
    DEFAULT_TARGET,
    TOOL_NO_OUTPUT,
    ContextGuard,
    GuardTargetConfig,
    Preflight,
)
from ctx_inspect.agents.aiagent.profile import AiAgentProfile
from ctx_inspect.agents.aiagent.truncation import truncate_to_bytes
from ctx_inspect.core.estimate import utf8_len
from ctx_inspect.core.model import (
    GuardEvaluated,
    GuardStatus,
    Message,
    Part,
    PartType,
    Role,
)
from ctx_inspect.core.policies.base import (
    Action,
    ContextItem,
    Estimate,
    ItemChange,
    ItemStatus,
    PolicyResult,
    Summarizer,
    replace_text,
    total,
    unchanged,
    visible_total,
)
from ctx_inspect.core.policies.blocks import fmt, is_tool_output, require
from ctx_inspect.core.profiles import Profile

NAME = "aiagent"

Phase = Literal["turn", "tool"]


# ------------------------------------------------------------------------------------------
# Helpers


def _output_text(message: Message) -> str:
    return "\n".join(
        p.text for p in message.parts if p.type in (PartType.TEXT, PartType.TOOL_RESULT)
    )


def _tool_output_tokens(text: str, estimate: Estimate) -> int:
    """The agent's reservation estimate: ``[{role: 'tool', content}]``, nothing else."""
    return estimate(
        Message(id="tool-output", role=Role.TOOL, parts=(Part(type=PartType.TEXT, text=text),))
    )


# ``_tool_output_tokens(TOOL_NO_OUTPUT, estimate)`` by estimate function (estimates are pure):
# replay adds the failure stub for every refused output
_STUB_TOKENS: WeakKeyDictionary[Estimate, int] = WeakKeyDictionary()


def _stub_tokens(estimate: Estimate) -> int:
    """The failure stub's reservation estimate, once per estimate function."""
    try:
        return _STUB_TOKENS[estimate]
    except KeyError:
        tokens = _STUB_TOKENS[estimate] = _tool_output_tokens(TOOL_NO_OUTPUT, estimate)
        return tokens
    except TypeError:  # a function that cannot be referenced weakly, or hashed
        return _tool_output_tokens(TOOL_NO_OUTPUT, estimate)


def guard_for_items(
    items: Sequence[ContextItem],
    profile: Profile,
    *,
    phase: Phase = "turn",
    reported_context: int | None = None,
    schema_tokens: int = 0,
    provider: str = DEFAULT_TARGET,
    model: str = DEFAULT_TARGET,
    targets: Sequence[GuardTargetConfig] | None = None,
) -> ContextGuard:
    """The guard's counters rebuilt from the messages in context (see the module docstring).

    Only the messages after the last assistant message are read (backward from the end); the
    rest is the visible total minus theirs, in O(1) for a ``ContextList``.
    """
    prof = require(profile, AiAgentProfile, NAME)
    guard = ContextGuard.for_profile(prof, provider, model, schema=schema_tokens)
    if targets:
        guard = guard.with_targets(targets)
    after = 0
    tools = 0
    found = False
    for position in range(len(items) - 1, -1, -1):
        message = items[position].message
        if not message.visible:
            continue
        if message.role is Role.ASSISTANT:
            found = True
            break
        after += items[position].tokens
        if is_tool_output(message):
            tools += items[position].tokens
    if not found:
        return guard.loop_init(visible_total(items))
    current = reported_context if reported_context is not None else visible_total(items) - after
    others = after - tools
    if phase == "tool":
        return guard.with_counters(current, others, tools)
    return guard.with_counters(current, others + tools, 0)


def _guard_as_recorded(
    items: Sequence[ContextItem], profile: AiAgentProfile, recorded: GuardEvaluated
) -> ContextGuard:
    """The guard at a preflight the agent logged, with ``items``' total as its projection
    (the recording's figure, or what replay made of it), under ``profile``'s limit."""
    total = visible_total(items)
    new = max(0, min(recorded.new, total))
    pending = max(0, min(recorded.pending, total - new))
    provider = model = DEFAULT_TARGET
    if recorded.targets:
        provider, model = recorded.targets[0].provider, recorded.targets[0].model
    guard = ContextGuard.for_profile(profile, provider, model, schema=recorded.schema_tokens)
    return guard.with_counters(total - pending - new, pending, new)


def _limit_of(blocked_limit: int | None, guard: ContextGuard) -> int:
    return blocked_limit if blocked_limit is not None else guard.min_limit()


# ------------------------------------------------------------------------------------------
# The policy


class AiAgentPolicy:
    """ai-agent's context guard as a policy."""

    name = NAME

    def admit(
        self,
        item: ContextItem,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        *,
        guard: ContextGuard | None = None,
        reported_context: int | None = None,
    ) -> PolicyResult | None:
        """A tool output about to enter the context: size cap, then the tool preflight.

        ``items`` is the context before the output (the output itself, if it comes last, is
        left out); the result is about the output alone. Without ``guard`` the counters are
        rebuilt from ``items`` (``guard_for_items``, tool phase).
        """
        prof = require(profile, AiAgentProfile, NAME)
        if not is_tool_output(item.message):
            return None
        context = items[:-1] if items and items[-1].id == item.id else items
        if guard is None:
            guard = guard_for_items(context, prof, phase="tool", reported_context=reported_context)
        original = _output_text(item.message)
        cap = prof.tool_response_max_bytes
        output = original
        capped = cap > 0 and utf8_len(original) > cap
        if capped:
            output = truncate_to_bytes(original, cap)
        if output == "":
            output = " "  # the orchestrator never sends an empty tool output

        details: dict[str, Any] = {
            "trigger": "tool_preflight",
            "tool": item.message.tool_name,
            "tool_response_max_bytes": cap,
            "original_bytes": utf8_len(original),
            "size_capped": capped,
            "counters_before": guard.counters(),
        }
        if not guard.can_execute_tool():
            return self._drop(item, estimate, guard, details, original, skipped=True)

        tokens = _tool_output_tokens(output, estimate)
        reservation = guard.reserve_tool_output(tokens)
        evaluation = reservation.evaluation
        details.update(
            {
                "tokens_estimated": tokens,
                "projected": evaluation.projected,
                "limit": _limit_of(evaluation.min_blocked_limit(), guard),
                "blocked": [b.as_dict() for b in evaluation.blocked],
            }
        )
        if not reservation.ok:
            details["available_tokens"] = reservation.available_tokens
            details["enforced"] = reservation.enforced
            return self._drop(item, estimate, reservation.guard, details, original)

        details["counters_after"] = reservation.guard.counters()
        details["final_turn"] = False
        if not capped:
            return None
        new_message = replace_text(item.message, output)
        new_tokens = estimate(new_message)
        new_item = ContextItem(new_message, new_tokens, item.index)
        details["final_bytes"] = utf8_len(output)
        return PolicyResult(
            action=Action.TRUNCATE,
            policy=NAME,
            fired=True,
            reason=(
                f"output of {fmt(utf8_len(original))} bytes > toolResponseMaxBytes "
                f"{fmt(cap)}: cut to {fmt(utf8_len(output))} bytes; projected "
                f"{fmt(evaluation.projected)} fits the limit {fmt(details['limit'])}"
            ),
            items=[new_item],
            changes=[
                ItemChange(
                    item.id,
                    ItemStatus.TRUNCATED,
                    item.tokens,
                    new_tokens,
                    f"cut to toolResponseMaxBytes ({fmt(cap)} bytes)",
                ),
            ],
            tokens_before=item.tokens,
            tokens_after=new_tokens,
            details=details,
        )

    def _drop(
        self,
        item: ContextItem,
        estimate: Estimate,
        guard: ContextGuard,
        details: dict[str, Any],
        original: str,
        *,
        skipped: bool = False,
    ) -> PolicyResult:
        new_message = replace_text(item.message, TOOL_NO_OUTPUT)
        new_tokens = estimate(new_message)
        # The executor adds the failure stub's own tokens to ``new`` after the refusal.
        after = guard.add_new_tokens(_stub_tokens(estimate))
        details.update(
            {
                "final_bytes": utf8_len(TOOL_NO_OUTPUT),
                "remaining_tokens": 0,
                "reason": "token_budget_exceeded",
                "dropped": True,
                "final_turn": True,
                "skipped": skipped,
                "counters_after": after.counters(),
            }
        )
        if skipped:
            reason = (
                "the tool budget was already exceeded: no further tool output enters "
                "(canExecuteTool is false)"
            )
        else:
            reason = (
                f"tool output of {fmt(details['tokens_estimated'])} tokens does not fit: "
                f"projected {fmt(details['projected'])} > limit {fmt(details['limit'])} "
                f"(available {fmt(details['available_tokens'])}); output dropped, "
                "final turn forced"
            )
        return PolicyResult(
            action=Action.DROP,
            policy=NAME,
            fired=True,
            reason=reason,
            items=[ContextItem(new_message, new_tokens, item.index)],
            changes=[
                ItemChange(
                    item.id,
                    ItemStatus.DROPPED,
                    item.tokens,
                    new_tokens,
                    f"output of {fmt(utf8_len(original))} bytes replaced by {TOOL_NO_OUTPUT}",
                ),
            ],
            tokens_before=item.tokens,
            tokens_after=new_tokens,
            details=details,
        )

    def manage(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        summarizer: Summarizer,
        *,
        guard: ContextGuard | None = None,
        reported_context: int | None = None,
        schema_tokens: int = 0,
        final_schema_tokens: int | None = None,
        provider: str = DEFAULT_TARGET,
        model: str = DEFAULT_TARGET,
        recorded: GuardEvaluated | None = None,
    ) -> list[PolicyResult]:
        """The turn preflight before a request. ``ok`` → []; ``skip`` / ``final`` → one
        FINAL_TURN result (the context is unchanged); ``final`` the runner does not enforce
        (the overflow is within the schema's size) → [].

        ``recorded``: the evaluation the agent logged at this preflight, for a context that is
        a figure alone (replay of a log): the figure is split into the counters as the log
        shows them (``new``, which forcing the final turn drops, and ``pending`` as logged, the
        rest ``current``), with the logged schema and target name."""
        prof = require(profile, AiAgentProfile, NAME)
        if guard is None and recorded is not None:
            guard = _guard_as_recorded(items, prof, recorded)
            if recorded.targets:
                provider, model = recorded.targets[0].provider, recorded.targets[0].model
        if guard is None:
            guard = guard_for_items(
                items,
                prof,
                phase="turn",
                reported_context=reported_context,
                schema_tokens=schema_tokens,
                provider=provider,
                model=model,
            )
        preflight = guard.turn_preflight(provider, model, final_schema_tokens=final_schema_tokens)
        if preflight.status is GuardStatus.OK:
            return []
        if preflight.status is GuardStatus.FINAL and not preflight.enforced:
            return []
        return [self._final_turn_result(items, preflight)]

    def _final_turn_result(self, items: Sequence[ContextItem], pre: Preflight) -> PolicyResult:
        decision = pre.decision
        evaluation = decision.evaluation
        entry = pre.blocked_entry or next(
            (b for b in evaluation.blocked if b.key == decision.key), None
        )
        limit = entry.limit if entry is not None else decision.limit
        crossed = f"projected {fmt(evaluation.projected)} > limit {fmt(limit)} for {decision.key}"
        if pre.status is GuardStatus.SKIP:
            reason = (
                f"{crossed}; other targets still fit, so this provider is skipped and the guard "
                "will enforce finalization"
            )
        else:
            reason = f"{crossed}: final turn forced, tools shrunk to the final report"
            if pre.schema_after != pre.schema_before:
                reason += f" (schema {fmt(pre.schema_before)} → {fmt(pre.schema_after)})"
            if pre.still_over_limit:
                reason += "; still over the limit after the shrink, sent anyway"
        details: dict[str, Any] = {
            "trigger": "turn_preflight",
            "status": pre.status.value,
            "final_turn": pre.enforced,
            "enforced": pre.enforced,
            "provider": decision.provider,
            "model": decision.model,
            "projected": evaluation.projected,
            "limit": limit,
            "base": decision.base,
            "blocked": [b.as_dict() for b in evaluation.blocked],
            "schema_before": pre.schema_before,
            "schema_after": pre.schema_after,
            "still_over_limit": pre.still_over_limit,
            "post_shrink_projected": (
                pre.post_shrink.projected if pre.post_shrink is not None else None
            ),
            "counters_before": {
                "current": evaluation.current,
                "pending": evaluation.pending,
                "new": evaluation.new,
                "schema": evaluation.schema,
            },
            "counters_after": pre.guard.counters(),
            # what enforcing leaves out of the final request's figure: the new tool outputs
            # (the prepared line after forcing shows ctx without them)
            "withheld": evaluation.new if pre.enforced else 0,
        }
        tokens = total(items)
        return PolicyResult(
            action=Action.FINAL_TURN,
            policy=NAME,
            fired=True,
            reason=reason,
            items=items[:] if isinstance(items, list) else list(items),  # a list copies fast
            changes=[],
            tokens_before=tokens,
            tokens_after=tokens,
            details=details,
        )

    def _no_reduction(
        self, action: Action, items: Sequence[ContextItem], profile: Profile, what: str
    ) -> PolicyResult:
        guard = guard_for_items(items, profile, phase="turn")
        pre = guard.turn_preflight(DEFAULT_TARGET, DEFAULT_TARGET)
        evaluation = pre.decision.evaluation
        would = pre.status is not GuardStatus.OK and (
            pre.enforced or pre.status is GuardStatus.SKIP
        )
        instead = (
            f"at projected {fmt(evaluation.projected)} against limit {fmt(pre.decision.limit)} "
            + ("it would force the final turn" if would else "its guard would let the request go")
        )
        return unchanged(
            action,
            NAME,
            items,
            f"ai-agent has no {what}: when the context does not fit it forces a final turn "
            f"instead; {instead}",
            status=pre.status.value,
            final_turn=would,
            projected=evaluation.projected,
            limit=pre.decision.limit,
        )

    def prune(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        *,
        force: bool = False,
    ) -> PolicyResult:
        return self._no_reduction(
            Action.PRUNE, items, require(profile, AiAgentProfile, NAME), "prune"
        )

    def compact(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        summarizer: Summarizer,
        *,
        force: bool = False,
    ) -> PolicyResult:
        return self._no_reduction(
            Action.COMPACT, items, require(profile, AiAgentProfile, NAME), "compaction"
        )

    def truncate(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        *,
        force: bool = False,
    ) -> PolicyResult:
        """Every tool output over ``tool_response_max_bytes`` cut to it. The agent applies the
        cap to each output as it arrives, so ``force`` changes nothing."""
        prof = require(profile, AiAgentProfile, NAME)
        cap = prof.tool_response_max_bytes
        if cap <= 0:
            return unchanged(
                Action.TRUNCATE, NAME, items, "toolResponseMaxBytes is 0: no size cap", cap=0
            )
        new_items: list[ContextItem] = []
        changes: list[ItemChange] = []
        cut = 0
        for item in items:
            text = _output_text(item.message)
            if not (is_tool_output(item.message) and utf8_len(text) > cap):
                new_items.append(item)
                continue
            message = replace_text(item.message, truncate_to_bytes(text, cap))
            tokens = estimate(message)
            new_items.append(ContextItem(message, tokens, item.index))
            changes.append(
                ItemChange(
                    item.id,
                    ItemStatus.TRUNCATED,
                    item.tokens,
                    tokens,
                    f"{fmt(utf8_len(text))} bytes cut to {fmt(cap)}",
                )
            )
            cut += 1
        if cut == 0:
            return unchanged(
                Action.TRUNCATE,
                NAME,
                items,
                f"no tool output exceeds toolResponseMaxBytes {fmt(cap)}",
                cap=cap,
            )
        before, after = total(items), total(new_items)
        return PolicyResult(
            action=Action.TRUNCATE,
            policy=NAME,
            fired=True,
            reason=(
                f"{cut} tool output(s) over toolResponseMaxBytes {fmt(cap)} cut: "
                f"{fmt(before)} → {fmt(after)} tokens"
            ),
            items=new_items,
            changes=changes,
            tokens_before=before,
            tokens_after=after,
            details={"cap": cap, "truncated": cut},
        )


POLICY = AiAgentPolicy()
