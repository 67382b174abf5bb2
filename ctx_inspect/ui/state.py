"""What the dashboard shows of one session: the session (or a what-if branch of it), the
cursor, and the values each widget needs (as the widgets' own row and point types).

A session being read or followed grows by appends (``SessionState.grew``): the values that
only depend on the past (points of the steps that are over, running totals) are then brought up
to date from where they stopped rather than computed again, and none is kept per message as a
Python object. Any other change (``touch``) drops them.
"""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctx_inspect.app.loader import LoadedSession, new_session
from ctx_inspect.core.counters import Counters, counters_at
from ctx_inspect.core.diff import ActionDiff, diff_action
from ctx_inspect.core.model import (
    Compacted,
    ContextReset,
    DebugTopic,
    Event,
    FinalTurnForced,
    GuardEvaluated,
    LogLine,
    Marker,
    ParseIssue,
    Pruned,
    RequestRejected,
    ToolOutputAction,
    ToolOutputChanged,
    UsageReported,
)
from ctx_inspect.core.policies.base import Action, ContextItem, PolicyResult, Summarizer
from ctx_inspect.core.profiles import Profile
from ctx_inspect.core.replay import WhatIfStart, replay
from ctx_inspect.core.session import Session, StepState
from ctx_inspect.core.session_query import SessionQuery
from ctx_inspect.core.whatif import continued_events
from ctx_inspect.core.window import Zone
from ctx_inspect.ui.widgets.events_view import EventRow
from ctx_inspect.ui.widgets.messages_view import MessageRow
from ctx_inspect.ui.widgets.timeline_points import TimelinePoints


@dataclass
class WhatIf:
    label: str
    step: int
    session: Session
    result: PolicyResult


_MARKER_OF_EVENT = {
    Compacted: "compaction",
    Pruned: "prune",
    FinalTurnForced: "final_turn",
    ContextReset: "reset",
    RequestRejected: "rejected",
}


class _Points:
    """The timeline's points of one session under one profile, kept up to date as it grows."""

    MARKED = (Compacted, Pruned, FinalTurnForced, ContextReset, ToolOutputChanged, RequestRejected)

    def __init__(self, query: SessionQuery, profile: Profile, generation: int) -> None:
        self.query = query
        self.session = query.session
        self.profile = profile
        self.generation = generation
        self.points = TimelinePoints()
        self.closed = 0  # closed steps when last brought up to date
        self.events = -1  # the session's length then
        self.marker_events = 0  # marker events taken in
        self.markers: dict[int, set[str]] = {}  # step -> marker names
        self.zone = _ZoneOf(profile)

    def update(self) -> TimelinePoints:
        session = self.session
        if len(session) == self.events:
            return self.points
        self.events = len(session)
        self._take_markers()
        query = self.query
        closed = query.closed_steps
        # the last step that was over may have been given its usage since: redo it too
        start = max(0, min(self.closed, closed) - 1)
        points, zone, markers = self.points, self.zone, self.markers
        points.truncate(start)
        empty: set[str] = set()
        for step, tokens, peak in query.closed_figures(start):
            points.add(step, tokens, peak, zone(peak), markers.get(step, empty))
        self.closed = closed
        live = query.open_step()
        if live is not None:
            peak = live.peak
            points.add(live.step, live.tokens, peak, zone(peak), markers.get(live.step, empty))
        return points

    def _take_markers(self) -> None:
        session = self.session
        found = session.events_of(*self.MARKED)
        for index, event in itertools.islice(found, self.marker_events, None):
            self.marker_events += 1
            name = _MARKER_OF_EVENT.get(type(event))
            if isinstance(event, ToolOutputChanged) and event.action is ToolOutputAction.DROPPED:
                name = "dropped"
            if isinstance(event, Pruned) and not event.applied:
                name = None
            if name is not None:
                self.markers.setdefault(session.step_at(index), set()).add(name)


class _ZoneOf:
    """``profile.zone`` for many counts: zones rise with the count (safe, warning, overflow),
    so the two counts where they change are found once, from ``profile.zone`` itself."""

    def __init__(self, profile: Profile) -> None:
        self.warning = _first_count(profile, lambda zone: zone is not Zone.SAFE)
        self.overflow = _first_count(profile, lambda zone: zone is Zone.OVERFLOW)

    def __call__(self, tokens: int) -> Zone:
        if tokens < self.warning:
            return Zone.SAFE
        return Zone.WARNING if tokens < self.overflow else Zone.OVERFLOW


def _first_count(profile: Profile, reached: Callable[[Zone], bool]) -> int:
    """The smallest count from 0 whose zone has ``reached`` (a huge one when none has)."""
    high = 2**62
    if not reached(profile.zone(high)):
        return 2**63 - 1
    low = -1  # counts below 0 are taken as 0's zone
    if reached(profile.zone(0)):
        return -(2**63)
    while high - low > 1:
        middle = (low + high) // 2
        if reached(profile.zone(middle)):
            high = middle
        else:
            low = middle
    return high


class SessionState:
    """One opened session in the dashboard."""

    def __init__(self, loaded: LoadedSession, *, follow: str | None = None) -> None:
        self.loaded = loaded
        self.original = loaded.session
        self.follow = follow  # None for a saved file, else a follow-state text
        self.cursor: int | None = None  # None: stay at the live end
        self.branches: list[WhatIf] = []
        self.version = 0  # bumped on every change (appends included)
        self._generation = 0  # bumped on changes that are not appends
        self._cache: dict[tuple[str, int, int], Any] = {}
        self._points: _Points | None = None
        self._query: SessionQuery | None = None

    # -- what is shown ---------------------------------------------------------------------

    @property
    def session(self) -> Session:
        return self.branches[-1].session if self.branches else self.original

    @property
    def profile(self) -> Profile:
        return self.loaded.profile

    @property
    def what_if(self) -> str | None:
        return self.branches[-1].label if self.branches else None

    @property
    def name(self) -> str:
        return self.loaded.name

    def touch(self) -> None:
        """The session changed (not only by appends): drop every cached value."""
        self.version += 1
        self._generation += 1
        self._cache.clear()
        self._points = None
        self._query = None

    def grew(self) -> None:
        """Events were appended to the session: values about the past are kept and brought up
        to date when next asked for."""
        self.version += 1
        self._cache.clear()

    def replace_session(self, session: Session) -> None:
        """A followed whole input was re-read into a new session."""
        self.original = session
        self.loaded.session = session
        self.touch()

    def steps(self) -> list[StepState]:
        """Every step (made from the session's columns: prefer ``step_count`` and
        ``state_at``)."""
        key = ("steps", self.version, len(self.branches))
        cached = self._cache.get(key)
        if cached is None:
            cached = self._cache[key] = self.session.all_steps()
        result: list[StepState] = cached
        return result

    def step_count(self) -> int:
        return self.session.step_count()

    def step(self) -> int | None:
        """The step under the cursor (the last step when the cursor follows the live end)."""
        count = self.step_count()
        if count == 0:
            return None
        if self.cursor is None:
            return count
        return max(1, min(self.cursor, count))

    def move(self, step: int | None) -> None:
        """Move the cursor; moving to the last step of a followed file re-attaches to the end."""
        count = self.step_count()
        if step is not None and self.follow is not None and step >= count:
            step = None
        self.cursor = step

    # -- values for the widgets ------------------------------------------------------------

    def state_at(self, step: int | None = None) -> StepState | None:
        step = step or self.step()
        if not step:
            return None
        key = ("state", self.version, step)
        if key not in self._cache:
            self._cache[key] = self.session.state_of(step)
        result: StepState | None = self._cache[key]
        return result

    def counters(self, step: int | None = None) -> Counters | None:
        return counters_at(self.session, self.profile, step or self.step())

    def gauge(self, step: int | None = None) -> dict[str, Any]:
        state = self.state_at(step)
        tokens = state.tokens if state is not None else 0
        profile = self.profile
        origin = state.describe() if state is not None else "estimated"
        if self.session.info.get("context_note"):
            # a stream of messages only (its reader says what it cannot show)
            origin += " · the messages this input shows: it shows no context management"
        return {
            "tokens": tokens,
            "window": profile.context_window,
            "warning": profile.warning_threshold(),
            "threshold": profile.threshold(),
            "zone": profile.zone(tokens),
            "origin": origin,
            "effective_limit": profile.limit_parts().effective,
        }

    def points(self) -> TimelinePoints:
        """The timeline's points: one per step, kept as columns and updated in place as the
        session grows (a reader tells what changed from ``TimelinePoints.changed_since``)."""
        cache = self._points
        if (
            cache is None
            or cache.session is not self.session
            or cache.profile is not self.profile
            or cache.generation != self._generation
        ):
            cache = self._points = _Points(self.query, self.profile, self._generation)
        return cache.update()

    @property
    def query(self) -> SessionQuery:
        """The questions asked of the session shown (kept up to date as it grows)."""
        query = self._query
        if query is None or query.session is not self.session:
            query = self._query = SessionQuery(self.session)
        return query

    def row(self, index: int) -> MessageRow:
        facts = self.query.message(index, self.step() or 0)
        window = self.profile.context_window or 1
        return MessageRow(
            index=index,
            role=facts.role,
            kind=facts.kind,
            tokens=facts.tokens,
            share=facts.tokens / window,
            running=facts.running,
            flags=", ".join(facts.flags),
            origin=facts.origin,
            tool=facts.tool,
            in_context=facts.in_context,
        )

    def event_indices(self) -> array[int]:
        """The indices of the events that are not messages, in order."""
        key = ("events", self.version, len(self.branches))
        cached = self._cache.get(key)
        if cached is None:
            cached = self._cache[key] = self.session.non_message_indices()
        result: array[int] = cached
        return result

    def event_row(self, position: int) -> EventRow:
        index = self.event_indices()[position]
        event = self.session.event(index)
        return EventRow(
            index, self.session.step_at(index), event.type, _topic(event), _summary(event)
        )

    # -- acting ----------------------------------------------------------------------------

    def context_items(self, step: int | None, estimate: Any) -> list[ContextItem]:
        from ctx_inspect.app.commands import context_items

        return context_items(self.session, self.profile, step, estimate)

    def preview(
        self, action: Action, profile: Profile, summarizer: Summarizer, step: int | None = None
    ) -> tuple[list[ContextItem], PolicyResult, ActionDiff]:
        """What an action would do at the cursor, with the diff; nothing is changed yet."""
        from ctx_inspect.app.commands import act, check_simulable
        from ctx_inspect.app.loader import estimator_for

        estimate = estimator_for(profile)
        check_simulable(self.session, step or self.step())
        items = self.context_items(step or self.step(), estimate)
        result = act(items, profile, action, estimate, summarizer)
        return items, result, diff_action(items, result)

    def branch_for(
        self,
        result: PolicyResult,
        step: int | None = None,
        profile: Profile | None = None,
        summarizer: Summarizer | None = None,
    ) -> WhatIf:
        """An action's result as a what-if branch, nothing changed yet (it can be made in a
        worker thread): the session through ``step``'s build-up, the action, then the rest of
        the session replayed from there under ``profile``'s policy (the one that acted; the
        session's by default), each later figure an estimate. The input is never touched."""
        from ctx_inspect.app.config import build_summarizer
        from ctx_inspect.app.loader import estimator_for
        from ctx_inspect.core.sweep import estimates_alike

        step = step or self.step() or 1
        profile = profile or self.profile
        label = (
            f"what-if {len(self.branches) + 1}: {result.action.value} ({result.policy}) "
            f"at step {step}"
        )
        replayed = replay(
            self._read_with_profile(),
            profile,
            estimate=estimator_for(profile),
            summarizer=summarizer or build_summarizer(None),
            reuse_estimates=estimates_alike(self.profile, profile),
            what_if=WhatIfStart(step, result),
        )
        events = continued_events(self.session, step, result, label, replayed)
        session = new_session(self.profile, self.loaded.counter, count_exact=True)
        session.append(events)
        return WhatIf(label, step, session, result)

    def _read_with_profile(self) -> Session:
        """The session shown, its messages estimated by the profile's own rule (a file read as
        it grows is estimated without a tokenizer until it is read: read again with it), so
        that a replay takes the session's estimates as its own."""
        session = self.session
        if not (self.profile.uses_counter() and session.estimate_chars is not None):
            return session
        again = new_session(self.profile, self.loaded.counter, count_exact=True)
        again.append(list(session.events()))
        return again

    def add(self, branch: WhatIf) -> None:
        """Show a what-if branch (``branch_for``) on top of the others."""
        self.branches.append(branch)
        self.cursor = None
        self.touch()

    def apply(self, result: PolicyResult, step: int | None = None) -> WhatIf:
        """Keep an action's result as a what-if branch under the session's own policy
        (``branch_for``), shown at once."""
        branch = self.branch_for(result, step)
        self.add(branch)
        return branch

    def undo(self) -> WhatIf | None:
        if not self.branches:
            return None
        branch = self.branches.pop()
        self.cursor = None
        self.touch()
        return branch

    def export(self, path: Path) -> int:
        """Write the session shown (a what-if branch included) in the native format."""
        from ctx_inspect.formats.native import export_events

        profile = self.profile
        settings = profile.model_dump(mode="json", exclude_defaults=True, exclude={"name", "agent"})
        settings["context_window"] = profile.context_window
        # the profile and settings it was made with: the file reopens with them
        header = {"source": str(self.loaded.path), "profile": profile.name, "settings": settings}
        if self.what_if:
            header["what_if"] = self.what_if
        return export_events(path, self.session.events(), header_extra=header)


def _topic(event: Event) -> str:
    if isinstance(event, DebugTopic):
        return event.name
    if isinstance(event, LogLine):
        return event.tag or event.level or "log"
    return event.type


def _summary(event: Event) -> str:
    if isinstance(event, DebugTopic):
        return ", ".join(f"{k}={v}" for k, v in list(event.payload.items())[:6])
    if isinstance(event, LogLine | Marker):
        return event.text.splitlines()[0] if event.text else ""
    if isinstance(event, ParseIssue):
        return f"line {event.line}: {event.reason}"
    if isinstance(event, UsageReported):
        u = event.usage
        return f"prompt {u.prompt_tokens:,}, output {u.output:,}"
    if isinstance(event, GuardEvaluated):
        return (
            f"current {event.current:,} pending {event.pending:,} new {event.new:,} "
            f"schema {event.schema_tokens:,} → projected {event.projection:,}"
        )
    if isinstance(event, Compacted):
        state = "failed" if event.failed else f"{event.tokens_before} → {event.tokens_after}"
        return f"{event.trigger}: {state}"
    if isinstance(event, Pruned):
        return f"recovered {event.tokens_recovered}, applied {event.applied}"
    if isinstance(event, FinalTurnForced):
        return f"{event.reason}: projected {event.projected_tokens} vs {event.limit_tokens}"
    if isinstance(event, RequestRejected):
        size = f"{event.tokens:,} tokens" if event.tokens is not None else "size not given"
        limit = f" > {event.limit:,}" if event.limit is not None else ""
        return f"refused: {size}{limit}: {event.reason}"
    if isinstance(event, ToolOutputChanged):
        return f"{event.action.value} {event.tool or ''} {event.tokens or ''}".strip()
    data = event.model_dump(exclude_none=True, exclude_defaults=True, exclude={"span", "type"})
    return ", ".join(f"{k}={v}" for k, v in list(data.items())[:5])
