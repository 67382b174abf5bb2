"""netdata ai-agent's context guard (``src/context-guard.ts``), as immutable values.

The guard keeps four counters and projects the next request against a limit per target
(provider and model):

- ``current``: the committed conversation. Set from the provider's usage after each response
  (input + cache read + cache write + output), and from the estimate before each request.
- ``pending``: estimated tokens not committed yet: the seed conversation before the first turn,
  and what a turn added once the next attempt starts.
- ``new``: tool outputs reserved during the current turn.
- ``schema``: the tool schemas' estimate (× 2.09). Printed, **never projected** (reference 2.4).

``projected = current + pending + new + extra``; each target's limit is
``max(0, window − buffer − max_output)`` with ``max_output`` the configured value, else
``floor(window / 4)``; a target is blocked when ``limit > 0 and projected > limit``.

Every method returns a new guard, so replay can branch from any point. The counter life cycle
of one turn (reference 2.4, steps 1-6) is ``loop_init`` (once), ``before_request``,
``after_response``, ``reserve_tool_output`` for each tool output, ``before_retry`` when the next
attempt starts, and ``enforce`` when the guard forces the final turn. The policy
(``policy.py``) decides through ``turn_preflight`` and ``reserve_tool_output``; the dashboard's
counters panel and ``explain`` read the evaluations the agent logged (``GuardEvaluated``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ctx_inspect.agents.aiagent.profile import (
    DEFAULT_CONTEXT_BUFFER_TOKENS,
    DEFAULT_CONTEXT_WINDOW_TOKENS,
    AiAgentProfile,
)
from ctx_inspect.core.model import GuardEvaluated, GuardStatus, GuardTarget, Usage
from ctx_inspect.core.window import LimitParts

# The synthetic target the agent uses when no provider/model target is configured.
DEFAULT_TARGET = "default"
TOKEN_BUDGET_EXCEEDED = "token_budget_exceeded"
TOOL_NO_OUTPUT = "(tool failed: context window budget exceeded)"  # llm-messages.ts: the stub


class Trigger(StrEnum):
    """Where the guard forced the final turn (the ``enforce`` debug topic's ``trigger``)."""

    TURN_PREFLIGHT = "turn_preflight"
    TOOL_PREFLIGHT = "tool_preflight"


@dataclass(frozen=True)
class GuardTargetConfig:
    """One provider/model the session may send to, with its window arithmetic."""

    provider: str
    model: str
    context_window: int
    buffer_tokens: int = DEFAULT_CONTEXT_BUFFER_TOKENS
    max_output_tokens: int | None = None  # None = floor(window / 4) (computeMaxOutputTokens)

    @property
    def key(self) -> str:
        return f"{self.provider}:{self.model}"

    def max_output(self) -> int:
        if self.max_output_tokens is not None:
            return self.max_output_tokens
        return max(0, self.context_window // 4)

    def limit_parts(self) -> LimitParts:
        return LimitParts(
            window=max(0, self.context_window),
            buffer=max(0, self.buffer_tokens),
            max_output=max(0, self.max_output()),
        )

    def limit(self) -> int:
        return max(0, self.context_window - self.buffer_tokens - self.max_output())

    @classmethod
    def from_profile(
        cls, profile: AiAgentProfile, provider: str = DEFAULT_TARGET, model: str = DEFAULT_TARGET
    ) -> GuardTargetConfig:
        return cls(
            provider=provider,
            model=model,
            context_window=profile.context_window,
            buffer_tokens=profile.buffer_tokens,
            max_output_tokens=profile.max_output_tokens,
        )

    @classmethod
    def from_event(cls, target: GuardTarget) -> GuardTargetConfig:
        """A target as the agent printed it (``evaluate-target``): its max output is explicit."""
        return cls(
            provider=target.provider,
            model=target.model,
            context_window=target.context_window,
            buffer_tokens=target.buffer_tokens,
            max_output_tokens=target.max_output_tokens,
        )


@dataclass(frozen=True)
class TargetEvaluation:
    """One target's line of an evaluation (``evaluate-target``, plus the verdict)."""

    provider: str
    model: str
    context_window: int
    buffer_tokens: int
    max_output_tokens: int
    limit: int
    projected: int

    @property
    def key(self) -> str:
        return f"{self.provider}:{self.model}"

    @property
    def blocked(self) -> bool:
        return self.limit > 0 and self.projected > self.limit

    @property
    def remaining(self) -> int:
        return self.limit - self.projected if self.limit > self.projected else 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "model": self.model,
            "limit": self.limit,
            "projected": self.projected,
        }

    def to_event(self) -> GuardTarget:
        return GuardTarget(
            provider=self.provider,
            model=self.model,
            context_window=self.context_window,
            buffer_tokens=self.buffer_tokens,
            max_output_tokens=self.max_output_tokens,
            limit=self.limit,
            projected=self.projected,
            blocked=self.blocked,
        )


@dataclass(frozen=True)
class Evaluation:
    """``evaluate(extra)``: the projection and each target's verdict."""

    projected: int
    current: int
    pending: int
    new: int
    schema: int
    extra: int
    targets: tuple[TargetEvaluation, ...]

    @property
    def base(self) -> int:
        """current + pending + new: the projection without the extra tokens."""
        return self.current + self.pending + self.new

    @property
    def blocked(self) -> tuple[TargetEvaluation, ...]:
        return tuple(t for t in self.targets if t.blocked)

    @property
    def any_blocked(self) -> bool:
        return any(t.blocked for t in self.targets)

    @property
    def all_blocked(self) -> bool:
        return bool(self.targets) and all(t.blocked for t in self.targets)

    @property
    def with_schema(self) -> int:
        """What the request really carries: the projection plus the tool schemas."""
        return self.projected + self.schema

    def min_blocked_limit(self) -> int | None:
        limits = [t.limit for t in self.blocked]
        return min(limits) if limits else None

    def to_event(
        self, status: GuardStatus | None = None, trigger: str | None = None
    ) -> GuardEvaluated:
        return GuardEvaluated(
            current=self.current,
            pending=self.pending,
            new=self.new,
            schema_tokens=self.schema,
            extra=self.extra,
            projected=self.projected,
            targets=tuple(t.to_event() for t in self.targets),
            status=status,
            trigger=trigger,
        )


@dataclass(frozen=True)
class ProviderDecision:
    """``evaluateForProvider``: may this provider/model take the next request?"""

    provider: str
    model: str
    status: GuardStatus
    evaluation: Evaluation
    limit: int  # this provider's limit (its target, else the first target)
    base: int  # current + pending + new
    provider_eval: bool  # whether the agent printed ``context-guard/provider-eval``
    schema_only_overflow: bool  # base fits the limit, base + schema does not

    @property
    def key(self) -> str:
        return f"{self.provider}:{self.model}"


@dataclass(frozen=True)
class Preflight:
    """The turn preflight as the turn runner does it, with the forced-final schema shrink."""

    decision: ProviderDecision
    guard: ContextGuard  # the guard after the preflight
    enforced: bool  # whether the runner forced the final turn
    blocked_entry: TargetEvaluation | None  # the entry the runner tested (final only)
    schema_before: int
    schema_after: int
    post_shrink: Evaluation | None  # re-evaluation after the shrink (enforced only)

    @property
    def status(self) -> GuardStatus:
        return self.decision.status

    @property
    def still_over_limit(self) -> bool:
        """After the shrink the context is still blocked: the agent logs and goes on."""
        return self.post_shrink is not None and self.post_shrink.any_blocked


@dataclass(frozen=True)
class ToolReservation:
    """``reserveToolOutput``: whether a tool output may enter the context."""

    ok: bool
    tokens: int
    evaluation: Evaluation
    guard: ContextGuard  # the guard after the reservation
    reason: str | None = None  # 'token_budget_exceeded' when refused
    available_tokens: int | None = None  # max(0, smallest blocked limit − base), when refused
    enforced: bool = False  # this refusal forced the final turn (the first refusal does)


@dataclass(frozen=True)
class RequestMetrics:
    """``buildMetrics``: the figures of ``LLM request prepared [...]``."""

    ctx_tokens: int
    new_tokens: int  # the agent passes ``pending`` here, not ``new``
    schema_tokens: int
    expected_tokens: int
    expected_pct: int | None
    context_window: int
    buffer_tokens: int
    max_output_tokens: int


@dataclass(frozen=True)
class ContextGuard:
    """The guard's state. Immutable: every method returns a new guard."""

    targets: tuple[GuardTargetConfig, ...] = ()
    current: int = 0
    pending: int = 0
    new: int = 0
    schema: int = 0
    tool_budget_exceeded: bool = False  # after a refused reservation no tool may execute
    forced_final: str | None = None  # the trigger that forced the final turn, once forced
    default_window: int = DEFAULT_CONTEXT_WINDOW_TOKENS
    default_buffer: int = DEFAULT_CONTEXT_BUFFER_TOKENS
    default_max_output: int | None = field(default=None)

    # -- construction ----------------------------------------------------------------------

    @classmethod
    def for_profile(
        cls,
        profile: AiAgentProfile,
        provider: str = DEFAULT_TARGET,
        model: str = DEFAULT_TARGET,
        *,
        current: int = 0,
        pending: int = 0,
        new: int = 0,
        schema: int = 0,
    ) -> ContextGuard:
        """A guard with one target built from the profile."""
        return cls(
            targets=(GuardTargetConfig.from_profile(profile, provider, model),),
            current=current,
            pending=pending,
            new=new,
            schema=schema,
            default_window=profile.context_window,
            default_buffer=profile.buffer_tokens,
            default_max_output=profile.max_output_tokens,
        )

    @classmethod
    def from_event(cls, event: GuardEvaluated) -> ContextGuard:
        """The guard as one ``GuardEvaluated`` event shows it (counters and targets)."""
        return cls(
            targets=tuple(GuardTargetConfig.from_event(t) for t in event.targets),
            current=event.current,
            pending=event.pending,
            new=event.new,
            schema=event.schema_tokens,
        )

    def with_targets(self, targets: Iterable[GuardTargetConfig]) -> ContextGuard:
        return self._replaced(targets=tuple(targets))

    def with_schema(self, tokens: int) -> ContextGuard:
        return self._replaced(schema=tokens)

    def with_counters(self, current: int, pending: int, new: int) -> ContextGuard:
        return self._replaced(current=current, pending=pending, new=new)

    def _replaced(self, **changes: Any) -> ContextGuard:
        """``dataclasses.replace(self, **changes)``, made faster by copying the fields (a
        guard has neither ``__post_init__`` nor init-only fields; replay makes several guards
        per request)."""
        guard: ContextGuard = object.__new__(type(self))
        fields = guard.__dict__
        fields.update(self.__dict__)
        fields.update(changes)
        return guard

    # -- figures ---------------------------------------------------------------------------

    @property
    def base(self) -> int:
        return self.current + self.pending + self.new

    def counters(self) -> dict[str, int]:
        return {
            "current": self.current,
            "pending": self.pending,
            "new": self.new,
            "schema": self.schema,
        }

    def effective_targets(self) -> tuple[GuardTargetConfig, ...]:
        """The configured targets, else the synthetic ``default`` one (``getTargets``)."""
        if self.targets:
            return self.targets
        return (
            GuardTargetConfig(
                provider=DEFAULT_TARGET,
                model=DEFAULT_TARGET,
                context_window=self.default_window,
                buffer_tokens=self.default_buffer,
                max_output_tokens=self.default_max_output,
            ),
        )

    def target_for(self, provider: str, model: str) -> GuardTargetConfig:
        """This provider/model's target, else the first one (as the agent falls back)."""
        targets = self.effective_targets()
        for target in targets:
            if target.provider == provider and target.model == model:
                return target
        return targets[0]

    def limit_parts(self, target: GuardTargetConfig) -> LimitParts:
        """(window, buffer, max output) of a target; ``.effective`` is its limit."""
        return target.limit_parts()

    def min_limit(self) -> int:
        return min(t.limit() for t in self.effective_targets())

    def evaluate(self, extra: int = 0) -> Evaluation:
        """``evaluate(extraTokens)``: the schema is not part of the projection."""
        projected = self.current + self.pending + self.new + extra
        rows = tuple(
            TargetEvaluation(
                provider=t.provider,
                model=t.model,
                context_window=t.context_window,
                buffer_tokens=t.buffer_tokens,
                max_output_tokens=t.max_output(),
                limit=t.limit(),
                projected=projected,
            )
            for t in self.effective_targets()
        )
        return Evaluation(
            projected=projected,
            current=self.current,
            pending=self.pending,
            new=self.new,
            schema=self.schema,
            extra=extra,
            targets=rows,
        )

    def provider_decision(self, provider: str, model: str) -> ProviderDecision:
        """``evaluateForProvider`` with every figure of the decision."""
        targets = self.effective_targets()
        evaluation = self.evaluate()
        limit = self.target_for(provider, model).limit()
        base = self.base
        key = f"{provider}:{model}"
        blocked = evaluation.blocked
        blocked_keys = {entry.key for entry in blocked}
        schema_only = limit > 0 and base <= limit < base + self.schema

        def decided(status: GuardStatus, printed: bool = True) -> ProviderDecision:
            return ProviderDecision(
                provider=provider,
                model=model,
                status=status,
                evaluation=evaluation,
                limit=limit,
                base=base,
                provider_eval=printed,
                schema_only_overflow=schema_only,
            )

        # "If the only overflow comes from schema tokens, allow the request": returns early,
        # before the provider-eval debug topic. The projection never holds the schema, so this
        # branch only runs when this key is blocked through another target of the same name.
        if limit > 0 and base <= limit and key in blocked_keys:
            return decided(GuardStatus.OK, printed=False)
        if not blocked:
            return decided(GuardStatus.OK)
        if len(blocked_keys) >= len(targets):
            return decided(GuardStatus.FINAL)
        if key in blocked_keys:
            return decided(GuardStatus.SKIP)
        if len(targets) == 1 and targets[0].provider == DEFAULT_TARGET:
            return decided(GuardStatus.FINAL)
        return decided(GuardStatus.OK)

    def evaluate_for_provider(self, provider: str, model: str) -> GuardStatus:
        """``'ok'``, ``'skip'`` or ``'final'`` for this provider/model."""
        return self.provider_decision(provider, model).status

    def build_metrics(self, provider: str, model: str) -> RequestMetrics:
        target = self.target_for(provider, model)
        expected = self.current + self.pending
        window = target.context_window
        pct: int | None = None
        if window > 0:
            ratio = (expected + target.buffer_tokens + target.max_output()) / window * 100
            pct = math.floor(ratio + 0.5)  # Math.round
        return RequestMetrics(
            ctx_tokens=self.current,
            new_tokens=self.pending,
            schema_tokens=self.schema,
            expected_tokens=expected,
            expected_pct=pct,
            context_window=window,
            buffer_tokens=target.buffer_tokens,
            max_output_tokens=target.max_output(),
        )

    def can_execute_tool(self) -> bool:
        return not self.tool_budget_exceeded

    # -- the turn runner ---------------------------------------------------------------------

    def turn_preflight(
        self, provider: str, model: str, *, final_schema_tokens: int | None = None
    ) -> Preflight:
        """Before a request: decide, and on ``'final'`` force the final turn.

        The runner enforces only when ``projected − schema > limit`` for this provider's
        blocked entry (else the first blocked entry). Since the projection never holds the
        schema, a context between ``limit`` and ``limit + schema`` gets ``'final'`` but is not
        enforced. When it enforces, the tools shrink to the final report alone (the schema
        becomes ``final_schema_tokens``, unchanged when not given) and the guard evaluates
        again; if still blocked the agent logs a warning and sends the request anyway.
        """
        decision = self.provider_decision(provider, model)
        if decision.status is not GuardStatus.FINAL:
            return Preflight(decision, self, False, None, self.schema, self.schema, None)
        blocked = decision.evaluation.blocked
        entry = next((b for b in blocked if b.key == decision.key), blocked[0])
        if entry.projected - self.schema <= entry.limit:
            return Preflight(decision, self, False, entry, self.schema, self.schema, None)
        after = self.enforce(Trigger.TURN_PREFLIGHT)
        if final_schema_tokens is not None:
            after = after.with_schema(final_schema_tokens)
        return Preflight(decision, after, True, entry, self.schema, after.schema, after.evaluate())

    def reserve_tool_output(self, tokens: int) -> ToolReservation:
        """Tool preflight: admit ``tokens`` into ``new``, or refuse and force the final turn."""
        evaluation = self.evaluate(tokens)
        if not evaluation.any_blocked:
            after = self._replaced(new=self.new + tokens)
            return ToolReservation(ok=True, tokens=tokens, evaluation=evaluation, guard=after)
        guard = self
        enforced = False
        if not guard.tool_budget_exceeded:
            guard = guard._replaced(tool_budget_exceeded=True).enforce(Trigger.TOOL_PREFLIGHT)
            enforced = True
        min_limit = evaluation.min_blocked_limit()
        assert min_limit is not None
        return ToolReservation(
            ok=False,
            tokens=tokens,
            evaluation=evaluation,
            guard=guard,
            reason=TOKEN_BUDGET_EXCEEDED,
            available_tokens=max(0, min_limit - guard.base),  # the base after the enforce
            enforced=enforced,
        )

    # -- the counter life cycle (reference 2.4) -------------------------------------------

    def loop_init(self, seed_tokens: int) -> ContextGuard:
        """Step 1: before the first turn, the seed conversation is pending."""
        return self._replaced(current=0, pending=seed_tokens, new=0)

    def before_request(self, ctx_tokens: int | None = None) -> ContextGuard:
        """Step 2: ``current = ctx + pending`` (ctx defaults to current); pending = new = 0."""
        ctx = self.current if ctx_tokens is None else ctx_tokens
        return self._replaced(current=ctx + self.pending, pending=0, new=0)

    def after_response(self, usage: Usage | int) -> ContextGuard:
        """Step 3: current = input + cache read + cache write + output; pending = 0."""
        tokens = usage if isinstance(usage, int) else usage.context_after
        return self._replaced(current=tokens, pending=0)

    def add_new_tokens(self, tokens: int) -> ContextGuard:
        """Step 4 without a check: the executor adds a failure stub's tokens this way."""
        return self._replaced(new=self.new + tokens)

    def before_retry(self) -> ContextGuard:
        """Step 5: before the next attempt, pending += new; new = 0."""
        return self._replaced(pending=self.pending + self.new, new=0)

    def enforce(self, trigger: str = Trigger.TURN_PREFLIGHT) -> ContextGuard:
        """Step 6: force the final turn; pending is committed to current and new is reset."""
        current = self.current + self.pending if self.pending > 0 else self.current
        return self._replaced(
            current=current,
            pending=0,
            new=0,
            forced_final=self.forced_final if self.forced_final is not None else str(trigger),
        )
