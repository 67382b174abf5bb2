"""The stats summary's figures: the agent's own where it reported them, labelled where not."""

from __future__ import annotations

from ctx_inspect.core.model import (
    Message,
    MessageAdded,
    Part,
    PartType,
    RequestRejected,
    RequestSent,
    Role,
    Usage,
    UsageReported,
)
from ctx_inspect.core.profiles import make_profile
from ctx_inspect.core.session import Session
from ctx_inspect.core.stats import RunFacts, summarize

FACTS = RunFacts(path="run.jsonl", format="native", tokenizer="approximate")


def msg(mid: str, role: Role, text: str) -> MessageAdded:
    return MessageAdded(
        message=Message(id=mid, role=role, parts=(Part(type=PartType.TEXT, text=text),))
    )


def test_final_context_is_the_last_report_plus_what_came_after_and_peak_only_what_was_sent() -> (
    None
):
    s = Session()
    s.append([msg("u", Role.USER, "y" * 400), RequestSent()])
    s.append([UsageReported(usage=Usage(input=50_000))])
    s.append([msg("a", Role.ASSISTANT, "z" * 40), msg("t", Role.TOOL, "w" * 4000)])
    data = summarize(s, make_profile("generic", {}), FACTS)
    # the live end: 50,000 reported + 10 + 1,000 estimated since, labelled as such
    assert data["final_context_tokens"] == 51_010
    assert data["final_context_source"] == "anchored"
    assert data["final_context_note"] == "reported 50,000 at step 1 + 1,010 est. since"
    # the peak is the largest size that was sent, not the estimate of the next request
    assert (data["peak_context_tokens"], data["peak_context_source"]) == (50_000, "reported")
    assert data["peak_step"] == 1


def test_a_refused_request_is_listed_with_the_providers_figures() -> None:
    s = Session()
    s.append([msg("u", Role.USER, "y" * 400), RequestSent()])
    reason = "prompt is too long: 204213 tokens > 200000 maximum"
    s.append([RequestRejected(reason=reason, tokens=204_213, limit=200_000)])
    data = summarize(s, make_profile("generic", {}), FACTS)
    assert data["rejected_requests"] == [
        {"step": 1, "tokens": 204_213, "limit": 200_000, "reason": reason}
    ]
    assert data["peak_context_tokens"] == 204_213
