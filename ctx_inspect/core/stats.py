"""The summary of a session's context usage: what `ctx-inspect stats` prints.

``summarize`` returns plain data (JSON-ready); the same keys describe a replayed run.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ctx_inspect.core.model import (
    Compacted,
    FinalTurnForced,
    GuardEvaluated,
    Origin,
    ParseIssue,
    Pruned,
    RequestRejected,
    ToolOutputAction,
    ToolOutputChanged,
)
from ctx_inspect.core.profiles import Profile
from ctx_inspect.core.replay import REPLAY_TRIGGERS, ReplayResult
from ctx_inspect.core.session import Flag, Session, StepState, kind_name, role_name
from ctx_inspect.core.window import Zone

ISSUES_LISTED = 50


@dataclass(frozen=True)
class RunFacts:
    """What the summary says about where the session came from."""

    path: str
    format: str
    tokenizer: str


def recorded_window(session: Session) -> int | None:
    """The window the input itself records: the agent's own (session information, or its
    guard's first target)."""
    value = session.info.get("context_window")
    if isinstance(value, int) and value > 0:
        return value
    for _, event in session.events_of(GuardEvaluated):
        if isinstance(event, GuardEvaluated) and event.targets:
            return event.targets[0].context_window
    return None


def window_source(session: Session, profile: Profile) -> str:
    """Where the window in use comes from: ``recorded``, ``set`` or ``default``."""
    if recorded_window(session) == profile.context_window:
        return "recorded"
    return "set" if "context_window" in profile.model_fields_set else "default"


def assumed_settings(profile: Profile) -> dict[str, object]:
    """The settings no file of the agent records (``Profile.unrecorded_settings``) that the
    user did not set: the profile's defaults stand in for them (an unset default, None, is
    not listed)."""
    return {
        name: value
        for name in profile.unrecorded_settings
        if name not in profile.model_fields_set and (value := getattr(profile, name)) is not None
    }


def summarize(
    session: Session, profile: Profile, facts: RunFacts, *, per_step: bool = False
) -> dict[str, Any]:
    """``per_step``: add every step's figure (``context_per_step``, ``stats --steps``)."""
    # the steps are read as figures; only the few a key needs are made (``state_of``)
    last = session.state_of(session.step_count())
    window = _window(session, profile)
    peak_step, peak_tokens, peak_origin = _peak(session)
    return {
        "file": facts.path,
        "format": facts.format,
        "profile": profile.name,
        "tokenizer": facts.tokenizer,
        "context_window": window,
        "context_window_source": _window_source(session, profile, window),
        "assumed_settings": assumed_settings(profile),
        "threshold_tokens": profile.threshold(),
        "effective_limit": profile.limit_parts().effective,
        "model": session.info.get("model"),
        "items_total": len(session) - len(session.issues),
        "messages_total": session.message_count,
        "steps": len(session.steps),
        "parse_issues": len(session.issues),
        "peak_context_tokens": peak_tokens,
        "peak_context_source": peak_origin,
        "peak_step": peak_step,
        "final_context_tokens": last.tokens if last else 0,
        "final_context_source": last.origin.value if last else Origin.ESTIMATED.value,
        "final_context_note": last.describe() if last else "",
        "context_note": _context_note(session),
        "messages": _messages_by_role_and_kind(session),
        "zone_crossings": _zone_crossings(session, profile),
        "compactions": _compactions(session),
        "prunes": _prunes(session),
        "final_turns": _final_turns(session),
        "rejected_requests": _rejected(session),
        "dropped_tool_outputs": _count_tool_outputs(session, ToolOutputAction.DROPPED),
        "truncated_tool_outputs": _count_tool_outputs(session, ToolOutputAction.TRUNCATED),
        "spilled_tool_outputs": _count_tool_outputs(session, ToolOutputAction.SPILLED),
        "issues": _issues(session),
        **({"context_per_step": context_per_step(session)} if per_step else {}),
    }


def context_per_step(session: Session) -> list[dict[str, Any]]:
    """Every step's figure as the dashboard shows it (the build-up after the last request
    is the last step when it holds something: ``live_end``), with where it comes from."""
    out: list[dict[str, Any]] = []
    requests = len(session.steps)
    for state in session.all_steps():
        point: dict[str, Any] = {
            "step": state.step,
            "tokens": state.tokens,
            "source": state.origin.value,
            "note": state.describe(),
            "peak": state.peak,
        }
        if state.step > requests:
            point["live_end"] = True
        out.append(point)
    return out


def _window(session: Session, profile: Profile) -> int:
    value = session.info.get("context_window")
    if isinstance(value, int) and value > 0 and profile.context_window <= 0:
        return value
    return profile.context_window


def _context_note(session: Session) -> str:
    """What the input cannot show about the context, when its reader says (a stream without
    context management: its figures are the messages it shows, not the agent's context)."""
    note = session.info.get("context_note")
    return note if isinstance(note, str) else ""


def _window_source(session: Session, profile: Profile, window: int) -> str:
    """Where the window shown comes from: the file (the reader says which record), else the
    profile: a setting of the user's, or its default, which is an assumption."""
    if session.info.get("context_window") == window:
        source = session.info.get("context_window_source")
        return source if isinstance(source, str) and source else "reported in the file"
    if window_source(session, profile) == "default":
        return f"profile {profile.name} default, assumed: the input does not record the window"
    return f"profile {profile.name}, set by the user"


def _peak(session: Session) -> tuple[int | None, int, str]:
    """The largest context. A live end whose figure is anchored (the last reported figure plus
    an estimate of what came after) is what the next request would be, never a size that was
    sent or reported: it does not count when the session has figures of its own. Nor does the
    anchored figure of a request the provider refused (nothing reported its size)."""
    best_step, best_peak = 0, 0
    for figures in session.step_figures():
        if figures.sent and (not best_step or figures.peak > best_peak):
            best_step, best_peak = figures.step, figures.peak
    best = session.state_of(best_step)
    if best is None:
        return None, 0, Origin.ESTIMATED.value
    origin = Origin.REPORTED if best.peak_reported is not None else best.origin
    if best.peak_reported is not None and best.tokens > best.peak_reported:
        origin = best.origin
    if best.reported_origin is Origin.ESTIMATED:
        origin = Origin.ESTIMATED  # the step's figures are estimates (a what-if's, replayed)
    return best.step, best.peak, origin.value


def _messages_by_role_and_kind(session: Session) -> list[dict[str, Any]]:
    """Counts and tokens per (role, kind), read straight from the session's columns."""
    t = session.table
    # per (role code, kind code): count, tokens, estimated?, reported?, pruned, removed, hidden
    acc: dict[tuple[int, int], list[int]] = {}
    pruned_bit, removed_bit, visible_bit = int(Flag.PRUNED), int(Flag.REMOVED), int(Flag.VISIBLE)
    for role, kind, flags, estimate, exact, reported in zip(
        t.role, t.kind, t.flags, t.estimate, t.exact, t.reported, strict=True
    ):
        row = acc.get((role, kind))
        if row is None:
            row = acc[(role, kind)] = [0, 0, 0, 0, 0, 0, 0]
        row[0] += 1
        if reported >= 0:
            row[1] += reported
            row[3] = 1
        elif exact >= 0:
            row[1] += exact
        else:
            row[1] += estimate
            row[2] = 1
        if flags & pruned_bit:
            row[4] += 1
        if flags & removed_bit:
            row[5] += 1
        if not flags & visible_bit:
            row[6] += 1
    rows = []
    for (role, kind), (count, tokens, estimated, reported, pruned, removed, hidden) in acc.items():
        origin = Origin.ESTIMATED if estimated else Origin.REPORTED if reported else Origin.EXACT
        rows.append(
            {
                "role": role_name(role),
                "kind": kind_name(kind),
                "count": count,
                "tokens": tokens,
                "origin": origin.value,
                "pruned": pruned,
                "removed": removed,
                "hidden": hidden,
            }
        )
    return sorted(rows, key=lambda r: (-r["tokens"], r["role"], r["kind"]))


def _zone_crossings(session: Session, profile: Profile) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    previous = Zone.SAFE
    zone_of = _zones(profile)
    for step, tokens, peak, _ in session.step_figures():
        zone = zone_of(peak)
        if zone != previous:
            out.append({"step": step, "from": previous.value, "to": zone.value, "tokens": peak})
            previous = zone
        after = zone_of(tokens)
        if after != zone:
            out.append({"step": step, "from": zone.value, "to": after.value, "tokens": tokens})
            previous = after
    return out


_MAX_TOKENS = 1 << 62


def _zones(profile: Profile) -> Callable[[int], Zone]:
    """``profile.zone`` for many figures: zones are ordered by fullness (safe, then warning,
    then overflow as the context grows), so where each begins is found once, by bisection over
    ``profile.zone``, and a figure's zone is two comparisons (``zone`` itself is costly per call).
    """
    warning, overflow = _zone_starts(profile)

    def zone(tokens: int) -> Zone:
        if tokens >= overflow:
            return Zone.OVERFLOW
        if tokens >= warning:
            return Zone.WARNING
        return Zone.SAFE

    return zone


@functools.lru_cache(maxsize=32)
def _zone_starts(profile: Profile) -> tuple[int, int]:
    """The smallest figures in the warning and the overflow zones (once per profile: a file of
    a conversation per line summarizes many sessions with one profile)."""

    def first(zones: tuple[Zone, ...]) -> int:
        """The smallest figure whose zone is one of ``zones`` (past the top: none is)."""
        if profile.zone(_MAX_TOKENS) not in zones:
            return _MAX_TOKENS + 1
        lo, hi = 0, _MAX_TOKENS
        while lo < hi:
            mid = (lo + hi) // 2
            if profile.zone(mid) in zones:
                hi = mid
            else:
                lo = mid + 1
        return lo

    return first((Zone.WARNING, Zone.OVERFLOW)), first((Zone.OVERFLOW,))


def _compactions(session: Session) -> list[dict[str, Any]]:
    out = []
    for index, event in session.events_of(Compacted):
        assert isinstance(event, Compacted)
        step = session.step_at(index)
        before = event.tokens_before
        if before is None:
            before = _context_before(session, step)
        after = event.tokens_after
        if after is None and not event.failed:
            state = session.state_of(step)
            # a figure anchored across the compaction is no measure of what it left
            if (
                state is not None
                and state.request_event is not None
                and state.origin is not Origin.ANCHORED
                and _has_figure(state)
            ):
                after = state.tokens
        out.append(
            {
                "step": step,
                "trigger": event.trigger,
                "before_tokens": before,
                "after_tokens": after,
                "messages_before": event.messages_before,
                "messages_after": event.messages_after,
                "failed": event.failed,
                "error": event.error,
            }
        )
    return out


def _context_before(session: Session, step: int) -> int | None:
    """The context just before a compaction in ``step``'s build-up: the previous request's
    prompt plus its output when the provider reported them."""
    previous = session.state_of(step - 1)
    if previous is None:
        return None
    if previous.usage is not None:
        return previous.usage.context_after
    return previous.tokens if _has_figure(previous) else None


def _has_figure(state: StepState) -> bool:
    """Whether a step has a figure at all (a log of requests alone has none)."""
    return state.reported is not None or state.anchor is not None or state.messages > 0


def _prunes(session: Session) -> list[dict[str, Any]]:
    out = []
    for index, event in session.events_of(Pruned):
        if isinstance(event, Pruned) and event.applied:
            recovered = event.tokens_recovered
            if recovered is None and event.tokens_before is not None and event.tokens_after:
                recovered = event.tokens_before - event.tokens_after
            out.append(
                {
                    "step": session.step_at(index),
                    "tokens_recovered": recovered,
                    "outputs_pruned": event.outputs_pruned,
                    "tokens_before": event.tokens_before,
                    "tokens_after": event.tokens_after,
                    # False: a pruned copy served one request, the context kept everything
                    "persistent": event.persistent,
                    "reason": event.reason,
                }
            )
    return out


def _final_turns(session: Session) -> list[dict[str, Any]]:
    return [
        {
            "step": session.step_at(index),
            "reason": event.reason,
            "projected_tokens": event.projected_tokens,
            "limit_tokens": event.limit_tokens,
        }
        for index, event in session.events_of(FinalTurnForced)
        if isinstance(event, FinalTurnForced)
    ]


def _rejected(session: Session) -> list[dict[str, Any]]:
    return [
        {
            "step": session.step_at(index),
            "tokens": event.tokens,
            "limit": event.limit,
            "reason": event.reason,
        }
        for index, event in session.events_of(RequestRejected)
        if isinstance(event, RequestRejected)
    ]


def _count_tool_outputs(session: Session, action: ToolOutputAction) -> int:
    return sum(
        1
        for _, event in session.events_of(ToolOutputChanged)
        if isinstance(event, ToolOutputChanged) and event.action is action
    )


def _issues(session: Session) -> list[dict[str, Any]]:
    out = []
    for index in session.issues[:ISSUES_LISTED]:
        event = session.event(index)
        assert isinstance(event, ParseIssue)
        out.append(
            {
                "file": event.file,
                "line": event.line,
                "offset": event.offset,
                "reason": event.reason,
                "excerpt": event.excerpt,
            }
        )
    return out


def summarize_replay(session: Session, result: ReplayResult, facts: RunFacts) -> dict[str, Any]:
    """The replayed run, under the same keys as ``summarize``, plus the agreement with the
    recording and every step where they disagree."""
    profile = result.profile
    peak_step, peak = result.peak()
    by_step = {s.step: s for s in result.steps}
    peak_state = by_step.get(peak_step) if peak_step is not None else None
    if peak_state is None:
        source = Origin.ESTIMATED.value
    elif peak_state.peak == peak_state.recorded_peak:
        source = peak_state.origin.value
    else:
        source = Origin.ESTIMATED.value  # the replay moved away from the recorded figure
    final = result.steps[-1] if result.steps else None
    kinds = [d.kind for d in result.decisions]
    return {
        "file": facts.path,
        "format": facts.format,
        "profile": profile.name,
        "tokenizer": facts.tokenizer,
        "context_window": profile.context_window,
        "context_window_source": _window_source(session, profile, profile.context_window),
        "assumed_settings": assumed_settings(profile),
        "threshold_tokens": profile.threshold(),
        "effective_limit": profile.limit_parts().effective,
        "model": session.info.get("model"),
        "items_total": len(session) - len(session.issues),
        "messages_total": session.message_count,
        "steps": result.requests,
        "parse_issues": len(session.issues),
        "peak_context_tokens": peak,
        "peak_context_source": source,
        "peak_step": peak_step,
        "final_context_tokens": final.tokens if final else 0,
        "final_context_source": final.source.value if final else Origin.ESTIMATED.value,
        "zone_crossings": _replay_crossings(result),
        "compactions": [
            {
                "step": d.step,
                "trigger": d.trigger if d.trigger in REPLAY_TRIGGERS else "replay",
                "before_tokens": d.tokens_before,
                "after_tokens": d.tokens_after,
                "detail": d.detail,
                "failed": d.failed,
            }
            for d in result.decisions
            if d.kind == "compaction"
        ],
        "prunes": [
            {
                "step": d.step,
                "tokens_recovered": _saved(d.tokens_before, d.tokens_after),
                "detail": d.detail,
                "tokens_before": d.tokens_before,
                "tokens_after": d.tokens_after,
                "persistent": d.persistent,
            }
            for d in result.decisions
            if d.kind == "prune"
        ],
        "final_turns": [
            {
                "step": d.step,
                "reason": d.detail,
                "projected_tokens": d.tokens_before,
                "limit_tokens": profile.threshold(),
            }
            for d in result.decisions
            if d.kind == "final_turn"
        ],
        "dropped_tool_outputs": kinds.count("dropped"),
        "truncated_tool_outputs": kinds.count("truncated"),
        "tokens_saved": result.tokens_saved,
        "agreement": round(result.agreement, 4),
        "disagreements": result.disagreements,
        "undetermined": [
            *({**d.as_dict(), "reason": why, "recorded": True} for d, why in result.undetermined),
            *result.left_out,
        ],
        "recorded_decisions": [d.as_dict() for d in result.recorded],
        "curve": [
            {
                "step": s.step,
                "tokens": s.tokens,
                "recorded": s.recorded,
                "source": s.source.value,
                "request": s.request,
                "peak": s.peak,
                "zone": s.zone.value,
                **({"live_end": True} if s.live_end else {}),
            }
            for s in result.steps
        ],
    }


def _saved(before: int | None, after: int | None) -> int | None:
    if before is None or after is None:
        return None
    return before - after


def _replay_crossings(result: ReplayResult) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    previous = Zone.SAFE
    for state in result.steps:
        if state.zone != previous:
            out.append(
                {
                    "step": state.step,
                    "from": previous.value,
                    "to": state.zone.value,
                    "tokens": state.peak,
                }
            )
            previous = state.zone
    return out
