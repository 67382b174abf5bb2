"""Explain: the figure that crossed, the counters at the decision, and suggestions that say how
they were found (confirmed by replay, or the agent's arithmetic on the file's figures)."""

from __future__ import annotations

from pathlib import Path

from ctx_inspect.app.config import build_summarizer
from ctx_inspect.app.loader import estimator_for
from ctx_inspect.core.explain import Explainer, Explanation
from ctx_inspect.core.model import (
    Compacted,
    FinalTurnForced,
    GuardEvaluated,
    GuardStatus,
    GuardTarget,
    Message,
    MessageAdded,
    Part,
    PartType,
    Pruned,
    RequestRejected,
    RequestSent,
    Role,
    Usage,
    UsageReported,
)
from ctx_inspect.core.profiles import Profile, make_profile
from ctx_inspect.core.session import Session

DATA = Path(__file__).parents[1] / "data"


def msg(mid: str, role: Role, text: str) -> MessageAdded:
    part = Part(type=PartType.TEXT, text=text)
    return MessageAdded(message=Message(id=mid, role=role, parts=(part,)))


def explain(session: Session, profile: Profile) -> list[Explanation]:
    return Explainer(
        session, profile, estimate_for=estimator_for, summarizer=build_summarizer(None)
    ).explain()


def test_a_prune_is_explained_with_the_figure_that_crossed_the_prune_threshold() -> None:
    profile = make_profile("baseagent", {})
    s = Session()
    s.append([msg("u", Role.USER, "y" * 400), RequestSent()])
    s.append([UsageReported(usage=Usage(input=150_000))])
    s.append([Pruned(tokens_before=150_000, tokens_after=90_000, tokens_recovered=60_000)])
    s.append([msg("t", Role.TOOL, "w" * 400), RequestSent()])
    (item,) = explain(s, profile)
    assert (item.event, item.step) == ("prune", 2)
    assert item.projected_tokens == 150_000
    assert item.limit_tokens == profile.prune_threshold() == 142_800
    assert item.reason == "60,000 tokens recovered"


def test_an_event_replay_cannot_reproduce_gets_labelled_arithmetic_on_the_logged_figure() -> None:
    """The log shows a compaction at 150,000 but not the messages that made it: replay cannot
    confirm any change, so the suggestion is the profile's arithmetic, and says so."""
    profile = make_profile("baseagent", {})
    s = Session()
    s.append([msg("u", Role.USER, "y" * 40), RequestSent()])
    s.append([Compacted(tokens_before=150_000, tokens_after=5_000)])
    s.append([msg("u2", Role.USER, "z" * 40), RequestSent()])
    (item,) = explain(s, profile)
    assert item.event == "compaction" and item.reproduced is False
    by_setting = {a["setting"]: a for a in item.avoid}
    window = by_setting["context_window"]
    assert window["confirmed"] is False
    # the smallest window whose threshold (0.85 of window - 32,000, strict) holds 150,000
    value = window["value"]
    assert not make_profile("baseagent", {"context_window": value}).over_threshold(150_000)
    assert make_profile("baseagent", {"context_window": value - 1}).over_threshold(150_000)


def test_a_refusal_is_explained_with_the_providers_figures() -> None:
    profile = make_profile("generic", {"context_window": 200_000})
    s = Session()
    s.append([msg("u", Role.USER, "y" * 40), RequestSent()])
    reason = "prompt is too long: 204213 tokens > 180000 maximum"
    s.append([RequestRejected(reason=reason, tokens=204_213, limit=180_000)])
    (item,) = explain(s, profile)
    assert item.event == "context_error" and item.step == 1
    assert (item.projected_tokens, item.limit_tokens) == (204_213, 180_000)
    assert item.avoid == [
        {"setting": "context_window", "value": 180_000, "from": 200_000, "confirmed": False}
    ]


def test_a_final_turn_shows_the_evaluation_that_forced_it_not_the_one_after() -> None:
    target = GuardTarget(
        context_window=48_000, buffer_tokens=8_192, max_output_tokens=4_096, limit=35_712
    )
    forcing = GuardEvaluated(
        current=32_898,
        new=5_410,
        schema_tokens=2_093,
        projected=38_308,
        targets=(target.model_copy(update={"blocked": True, "projected": 38_308}),),
        status=GuardStatus.FINAL,
    )
    after = GuardEvaluated(current=32_898, schema_tokens=469, projected=32_898, targets=(target,))
    s = Session()
    s.append([msg("u", Role.USER, "y" * 40), RequestSent()])
    s.append(
        [
            forcing,
            FinalTurnForced(reason="context", projected_tokens=38_308, limit_tokens=35_712),
            after,
            RequestSent(final_turn=True),
        ]
    )
    items = explain(s, make_profile("aiagent", {"context_window": 48_000}))
    final = next(i for i in items if i.event == "final_turn")
    assert final.counters is not None
    assert (final.counters["current"], final.counters["new"], final.counters["schema"]) == (
        32_898,
        5_410,
        2_093,
    )
    assert final.counters["projected"] == final.projected_tokens == 38_308
