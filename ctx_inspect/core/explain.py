"""Explain: why a forced final turn, a dropped tool output, a compaction (an attempt that failed
too), a prune, a refused request or a context-limit error happened, and the smallest change of
one setting that would have avoided it.

For each such event: the counters and the limit's composition at that moment, the first step at
which the context crossed the limit, the largest messages in context, and per relevant setting
the smallest change, found by replay (so every suggestion is one that replay confirms).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ctx_inspect.core import agents
from ctx_inspect.core.agents import Knob
from ctx_inspect.core.model import (
    Compacted,
    FinalTurnForced,
    GuardEvaluated,
    LogLine,
    Message,
    Pruned,
    RequestRejected,
    ToolOutputAction,
    ToolOutputChanged,
)
from ctx_inspect.core.policies.base import Summarizer
from ctx_inspect.core.profiles import Profile, make_profile
from ctx_inspect.core.replay import ReplayResult, forced_by_context, replay
from ctx_inspect.core.session import Session
from ctx_inspect.errors import ConfigError

CONTRIBUTORS = 5
# A provider's refusal printed in a log that gives no ``RequestRejected`` event. The agent's own
# notices ("Context limit exceeded; forcing final turn") are decisions, not refusals.
_CONTEXT_ERROR = re.compile(
    r"context_length_exceeded|context_window_exceeded|maximum context length|"
    r"prompt is too long|input is too long",
    re.IGNORECASE,
)


_EVENT_KIND = {
    "final_turn": "final_turn",
    "dropped_tool_output": "dropped",
    "compaction": "compaction",
    "prune": "prune",
}


ARITHMETIC = "by the agent's arithmetic on the figure in the file; not confirmed by replay"
CONFIRMED = "confirmed by replay"


def how_found(avoid: dict[str, Any]) -> str:
    """How an ``avoid`` entry was found, in words."""
    return CONFIRMED if avoid.get("confirmed", True) else ARITHMETIC


NOT_REPRODUCED = (
    "replay under these settings does not have this event: no change can be confirmed to "
    "avoid it (the recording holds less than the agent knew)"
)


@dataclass
class Explanation:
    step: int
    event: str  # final_turn | dropped_tool_output | compaction | prune | context_error
    reason: str
    projected_tokens: int | None
    limit_tokens: int | None
    limit_parts: dict[str, int]
    first_crossed_step: int | None
    counters: dict[str, int] | None
    contributors: list[dict[str, Any]]
    avoid: list[dict[str, Any]] = field(default_factory=list)
    unavoidable: list[str] = field(default_factory=list)
    # whether replay under the current settings has the event at or before its step (None: not
    # searched); when it has not, no change can be confirmed to avoid it and none is searched
    reproduced: bool | None = None
    # how the agent's limit is made from its settings, when it is not window - buffer - output
    limit_formula: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "event": self.event,
            "reason": self.reason,
            "projected_tokens": self.projected_tokens,
            "limit_tokens": self.limit_tokens,
            "limit_parts": self.limit_parts,
            "limit_formula": self.limit_formula,
            "first_crossed_step": self.first_crossed_step,
            "counters": self.counters,
            "contributors": self.contributors,
            "avoid": self.avoid,
            "unavoidable": self.unavoidable,
            "reproduced": self.reproduced,
        }


class Explainer:
    """Explains every event of a session; replays are cached across events and knobs."""

    def __init__(
        self,
        session: Session,
        profile: Profile,
        *,
        estimate_for: Callable[[Profile], Callable[[Message], int]],
        summarizer: Summarizer,
        search: bool = True,
    ) -> None:
        self.session = session
        self.profile = profile
        self.estimate_for = estimate_for
        self.summarizer = summarizer
        self.search = search
        self._replays: dict[tuple[str, float], ReplayResult | None] = {}
        self._refusals = False  # the session has RequestRejected events (set by ``explain``)

    def explain(self) -> list[Explanation]:
        out = []
        self._refusals = any(True for _ in self.session.events_of(RequestRejected))
        for index, event in self.session.non_message_events():
            item = self._explain_event(index, event)
            if item is not None:
                out.append(item)
        return out

    # -- one event -------------------------------------------------------------------------

    def _explain_event(self, index: int, event: Any) -> Explanation | None:
        step = self.session.step_at(index)
        limit_known = True
        by_user = False  # the user's own decision: no limit crossed, no setting avoids it
        formula = ""
        if isinstance(event, FinalTurnForced):
            kind, reason = "final_turn", event.reason
            projected, limit = event.projected_tokens, event.limit_tokens
            if not forced_by_context(event.reason):
                # a turn limit or a finished task: no setting of the context avoids it
                reason = f"{event.reason}: the final turn was not forced by the context"
                limit_known, by_user = False, True
        elif isinstance(event, ToolOutputChanged) and event.action is ToolOutputAction.DROPPED:
            kind = "dropped_tool_output"
            reason = f"tool {event.tool or '?'} output of {event.tokens or '?'} tokens did not fit"
            projected, limit = event.projected_tokens, event.limit_tokens
        elif isinstance(event, Compacted) and not event.failed and event.trigger == "manual":
            kind, reason = "compaction", "manual compaction: the user's decision (/compact)"
            projected, limit, limit_known, by_user = event.tokens_before, None, False, True
        elif isinstance(event, Compacted):
            kind, reason = "compaction", f"{event.trigger} compaction"
            if event.failed:  # the agent decided to compact; its summary failed
                reason += f", failed ({event.error or 'no reason logged'})"
            # the figure the agent compared with its limit, when replay knows it; else the
            # context the compaction summarised
            projected = self._crossed(step) or event.tokens_before
            limit = self.profile.threshold()
            formula = self.profile.threshold_formula()
        elif isinstance(event, Pruned) and event.applied:
            recovered = event.tokens_recovered
            kind = "prune"
            reason = f"{recovered:,} tokens recovered" if recovered is not None else "pruned"
            projected = event.tokens_before
            limit = self.profile.prune_threshold()
            formula = self.profile.threshold_formula() if limit == self.profile.threshold() else ""
            if limit is None:
                limit_known = False
                reason += " (the agent prunes at fixed moments, whatever the size)"
        elif isinstance(event, RequestRejected):
            kind, reason = "context_error", f"refused by the provider: {event.reason[:200]}"
            projected, limit = event.tokens, event.limit
            limit_known = limit is not None
        elif (
            isinstance(event, LogLine) and not self._refusals and _CONTEXT_ERROR.search(event.text)
        ):
            kind, reason = "context_error", event.text[:200]
            projected, limit = None, self.profile.limit_parts().effective
        else:
            return None
        guard = self._guard_before(index, step)
        parts = self._limit_parts(guard)
        logged = projected is not None  # the figure that crossed is in the file
        if projected is None:
            projected = self._tokens_at(step, guard)
        if limit is None and limit_known:
            limit = parts["window"] - parts["buffer"] - parts["max_output"]
        first = self._first_crossed(step, limit)
        if first is None and projected is not None and limit is not None and projected >= limit:
            first = step  # crossed by the agent's own figure, which no recorded step shows
        explanation = Explanation(
            step=step,
            event=kind,
            reason=reason,
            projected_tokens=projected,
            limit_tokens=limit,
            limit_parts=parts,
            first_crossed_step=first,
            counters=_counters(guard),
            contributors=self._contributors(step),
            limit_formula=formula,
        )
        if by_user:
            return explanation
        if self.search and kind in _EVENT_KIND:
            self._find_avoiders(explanation, _EVENT_KIND[kind], arithmetic=logged)
        elif self.search and kind == "context_error" and projected and limit:
            self._window_above_provider(explanation, limit)
        return explanation

    def _crossed(self, step: int) -> int | None:
        """The figure the agent compared with its limit at ``step``, as replay under these
        settings computes it with the agent's own arithmetic (when its policy gives it)."""
        if not self.search:
            return None
        result = self._replay_as_is()
        if result is None:
            return None
        return next(
            (
                d.figure
                for d in result.decisions
                if d.step == step and d.kind == "compaction" and d.figure is not None
            ),
            None,
        )

    def _guard_before(self, index: int, step: int) -> GuardEvaluated | None:
        """The guard's evaluation that led to the event at ``index``: the last one before it
        (an evaluation logged after the decision describes the request the decision made)."""
        found: GuardEvaluated | None = None
        for at, event in self.session.events_of(GuardEvaluated):
            if at >= index:
                break
            if isinstance(event, GuardEvaluated):
                found = event
        if found is not None:
            return found
        states = self.session.all_steps()
        for state in reversed(states[:step]):
            if state.guard is not None:
                return state.guard
        return None

    def _limit_parts(self, guard: GuardEvaluated | None) -> dict[str, int]:
        if guard is not None and guard.targets:
            target = next((t for t in guard.targets if t.blocked), guard.targets[0])
            return {
                "window": target.context_window,
                "buffer": target.buffer_tokens,
                "max_output": target.max_output_tokens,
            }
        parts = self.profile.limit_parts()
        return {"window": parts.window, "buffer": parts.buffer, "max_output": parts.max_output}

    def _tokens_at(self, step: int, guard: GuardEvaluated | None) -> int:
        if guard is not None:
            return guard.projection
        states = self.session.all_steps()
        return states[step - 1].peak if 0 < step <= len(states) else 0

    def _first_crossed(self, step: int, limit: int | None) -> int | None:
        if limit is None:
            return None
        states = self.session.all_steps()[:step]
        first = None
        for state in reversed(states):
            figure = state.guard.projection if state.guard is not None else state.peak
            if figure > limit:
                first = state.step
            else:
                break
        return first

    def _contributors(self, step: int) -> list[dict[str, Any]]:
        records = [self.session.record(i) for i in self.session.in_context(step)]
        records.sort(key=lambda r: r.tokens()[0], reverse=True)
        return [
            {
                "step": r.step_added,
                "kind": r.kind.value,
                "role": r.role.value,
                "tool": r.tool_name,
                "tokens": r.tokens()[0],
                "id": r.id,
            }
            for r in records[:CONTRIBUTORS]
        ]

    # -- the smallest change that avoids it ------------------------------------------------

    def _find_avoiders(self, explanation: Explanation, kind: str, *, arithmetic: bool) -> None:
        step = explanation.step
        explanation.reproduced = self._happens(self._replay_as_is(), kind, step)
        if explanation.reproduced:
            self._search(explanation, lambda knob, v: self._avoids(knob, v, kind, step), True)
            return
        # every change would seem to avoid it: none can be confirmed; when the file gives the
        # figure that crossed, offer the agent's own arithmetic on it instead, labelled as such
        projected = explanation.projected_tokens
        if arithmetic and projected is not None:

            def below(knob: Knob, value: float) -> bool:
                return not _crosses(self._with(knob.setting, value), kind, projected)

            self._search(explanation, below, False)

    def _search(
        self, explanation: Explanation, avoids: Callable[[Knob, float], bool], confirmed: bool
    ) -> None:
        """Per knob, the smallest change for which ``avoids`` holds (a binary search between
        the current value, where the event happens, and the knob's bound)."""
        for knob in _knobs(self.profile.agent):
            current = self._current(knob)
            if current is None:
                continue
            bound = knob.bound(self.profile)
            if (bound - current) * knob.direction <= 0:
                continue
            if not avoids(knob, bound):
                explanation.unavoidable.append(knob.setting)
                continue
            scale = 1 / knob.step
            lo, hi = round(current * scale), round(bound * scale)  # fails, avoids
            while abs(hi - lo) > 1:
                mid = (lo + hi) // 2
                if avoids(knob, mid / scale):
                    hi = mid
                else:
                    lo = mid
            explanation.avoid.append(
                {
                    "setting": knob.setting,
                    "value": _plain(hi / scale),
                    "from": _plain(current),
                    "confirmed": confirmed,
                }
            )

    def _current(self, knob: Knob) -> float | None:
        value = getattr(self.profile, knob.setting, None)
        if value is None and knob.derived:
            value = self.profile.settings().get(knob.derived)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return float(value)

    def _window_above_provider(self, explanation: Explanation, provider_limit: int) -> None:
        """A refusal: the agent believed its window larger than the provider's limit."""
        window = self.profile.context_window
        if window > provider_limit:
            explanation.avoid.append(
                {
                    "setting": "context_window",
                    "value": provider_limit,
                    "from": window,
                    "confirmed": False,
                }
            )

    def _with(self, setting: str, value: float) -> Profile | None:
        overrides = {
            **self.profile.model_dump(exclude_defaults=True, exclude={"name", "agent"}),
            setting: _typed(self.profile, setting, value),
        }
        try:
            return make_profile(self.profile.name, overrides)
        except ConfigError:
            return None

    def _avoids(self, knob: Knob, value: float, kind: str, step: int) -> bool:
        result = self._replay_with(knob.setting, value)
        if result is None:
            return False
        return not self._happens(result, kind, step)

    @staticmethod
    def _happens(result: ReplayResult | None, kind: str, step: int) -> bool:
        if result is None:
            return False
        # the user's own compactions, and final turns forced for another reason than the
        # context, are made whatever the settings: they are not this event
        return any(
            d.kind == kind
            and d.step <= step
            and d.detail != "manual"
            and (kind != "final_turn" or forced_by_context(d.detail))
            for d in result.decisions
        )

    def _replay_as_is(self) -> ReplayResult | None:
        """The replay under the current settings (cached with the others)."""
        key = ("", 0.0)
        if key not in self._replays:
            self._replays[key] = replay(
                self.session,
                self.profile,
                estimate=self.estimate_for(self.profile),
                summarizer=self.summarizer,
            )
        return self._replays[key]

    def _replay_with(self, setting: str, value: float) -> ReplayResult | None:
        key = (setting, value)
        if key not in self._replays:
            profile = self._with(setting, value)
            if profile is None:
                self._replays[key] = None
            else:
                self._replays[key] = replay(
                    self.session,
                    profile,
                    estimate=self.estimate_for(profile),
                    summarizer=self.summarizer,
                )
        return self._replays[key]


def _crosses(profile: Profile | None, kind: str, projected: int) -> bool:
    """Whether ``projected`` crosses the agent's limit for ``kind`` under ``profile``."""
    if profile is None:
        return True  # a value the profile refuses avoids nothing
    if kind == "compaction":
        return profile.over_threshold(projected)
    if kind == "prune":
        limit = profile.prune_threshold()
        return limit is not None and projected > limit
    return projected > profile.limit_parts().effective


def _typed(profile: Profile, setting: str, value: float) -> int | float:
    field_info = type(profile).model_fields.get(setting)
    annotation = str(field_info.annotation) if field_info is not None else ""
    if "float" in annotation:
        return round(value, 6)
    return round(value)


def _plain(value: float) -> int | float:
    return int(value) if float(value).is_integer() else round(value, 6)


def _counters(guard: GuardEvaluated | None) -> dict[str, int] | None:
    if guard is None:
        return None
    return {
        "current": guard.current,
        "pending": guard.pending,
        "new": guard.new,
        "schema": guard.schema_tokens,
        "extra": guard.extra,
        "projected": guard.projection,
    }


def _knobs(name: str) -> tuple[Knob, ...]:
    """The settings explain may move for the agent ``name`` (none for an unknown agent)."""
    found = agents.find(name)
    return found.knobs if found is not None else ()
