"""Counters at a step: the agent's own when it logs them, derived otherwise."""

from __future__ import annotations

from ctx_inspect.app.config import build_profile
from ctx_inspect.core.counters import counters_at
from ctx_inspect.core.model import (
    Compacted,
    ContextMeasured,
    GuardEvaluated,
    GuardStatus,
    GuardTarget,
    RequestSent,
    Usage,
    UsageReported,
)
from ctx_inspect.core.session import Session
from ctx_inspect.core.window import Zone


def test_derived_counters_follow_usage_and_compaction() -> None:
    profile = build_profile("generic")
    s = Session()
    s.append(
        [
            RequestSent(),
            UsageReported(usage=Usage(input=10_000, output=500)),
            ContextMeasured(tokens=14_000),
            RequestSent(),
            UsageReported(usage=Usage(input=14_000, output=300)),
            Compacted(tokens_before=14_300, tokens_after=2_000),
            RequestSent(),
        ]
    )
    second = counters_at(s, profile, 2)
    assert second is not None
    assert (second.current, second.new, second.projected) == (10_500, 3_500, 14_000)
    assert second.limit == 128_000 and not second.recorded
    assert second.status is GuardStatus.OK and second.zone is Zone.SAFE
    third = counters_at(s, profile, 3)
    assert third is not None and (third.current, third.new) == (2_000, 0)
    assert counters_at(Session(), profile) is None


def test_logged_guard_counters_are_shown_as_logged() -> None:
    profile = build_profile("aiagent")
    s = Session()
    target = GuardTarget(
        provider="anthropic",
        model="m",
        context_window=200_000,
        buffer_tokens=8_192,
        max_output_tokens=50_000,
        limit=141_808,
        projected=151_350,
        blocked=True,
    )
    s.append(
        [
            GuardEvaluated(
                current=131_000,
                pending=0,
                new=2_100,
                schema_tokens=9_406,
                extra=18_250,
                targets=(target,),
            ),
            RequestSent(),
        ]
    )
    c = counters_at(s, profile, 1)
    assert c is not None and c.recorded
    assert c.projected == 151_350 and c.limit == 141_808 and c.over_by == 9_542
    assert (c.parts.window, c.parts.buffer, c.parts.max_output) == (200_000, 8_192, 50_000)
    assert c.status is GuardStatus.FINAL
    assert c.schema == 9_406
