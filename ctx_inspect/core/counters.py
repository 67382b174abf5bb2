"""The guard's four counters at any step, for every agent.

ai-agent logs its own counters (``GuardEvaluated``); they are shown as they were. For every
other agent the same projection is derived from the session: ``current`` is what the previous
request left in context (its prompt plus its output when the provider reported them), ``new``
is what the build-up added since, ``schema`` the tool schemas when the input states them, and
the projection is compared with the profile's effective limit (window − buffer − max output).
"""

from __future__ import annotations

from dataclasses import dataclass

from ctx_inspect.core.model import GuardStatus
from ctx_inspect.core.profiles import Profile
from ctx_inspect.core.session import Session, StepState
from ctx_inspect.core.window import LimitParts, Zone


@dataclass(frozen=True)
class Counters:
    step: int
    current: int
    pending: int
    new: int
    schema: int
    extra: int
    projected: int
    limit: int
    parts: LimitParts
    status: GuardStatus
    zone: Zone
    recorded: bool  # the agent logged these counters itself

    @property
    def over_by(self) -> int:
        return self.projected - self.limit


def counters_at(session: Session, profile: Profile, step: int | None = None) -> Counters | None:
    """The counters at ``step`` (1-based; default: the latest), or None for an empty session."""
    count = session.step_count()
    if not count:
        return None
    index = count - 1 if step is None else max(0, min(step, count) - 1)
    state = session.state_of(index + 1)
    assert state is not None
    previous = session.state_of(index) if index > 0 else None
    parts = profile.limit_parts()
    if state.guard is not None:
        guard = state.guard
        target = next((t for t in guard.targets if t.blocked), None) or (
            guard.targets[0] if guard.targets else None
        )
        if target is not None:
            parts = LimitParts(
                window=target.context_window,
                buffer=target.buffer_tokens,
                max_output=target.max_output_tokens,
            )
        limit = target.limit if target is not None else parts.effective
        projected = guard.projection
        status = guard.status or (
            GuardStatus.FINAL if limit and projected > limit else GuardStatus.OK
        )
        return Counters(
            state.step,
            guard.current,
            guard.pending,
            guard.new,
            guard.schema_tokens,
            guard.extra,
            projected,
            limit,
            parts,
            status,
            profile.zone(projected),
            True,
        )
    current = _left_by(previous)
    tokens = state.tokens
    if tokens < current:  # a prune or compaction in the build-up: the context starts over
        current = tokens
    new = tokens - current
    schema = _schema(session)
    projected = current + new
    limit = parts.effective
    status = GuardStatus.FINAL if profile.over_threshold(projected) else GuardStatus.OK
    return Counters(
        state.step,
        current,
        0,
        new,
        schema,
        0,
        projected,
        limit,
        parts,
        status,
        profile.zone(projected),
        False,
    )


def _left_by(previous: StepState | None) -> int:
    """What the previous request left in context: its prompt and its output."""
    if previous is None:
        return 0
    if previous.usage is not None:
        return previous.usage.context_after
    return previous.tokens


def _schema(session: Session) -> int:
    value = session.info.get("tool_schema_tokens")
    return value if isinstance(value, int) else 0
