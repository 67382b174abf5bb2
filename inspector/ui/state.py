"""What the dashboard shows of one session: the session (or a what-if branch of it), the
cursor, and the values each widget needs (as the widgets' own row and point types)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inspector.core.counters import Counters, counters_at
from inspector.core.diff import ActionDiff, diff_action
from inspector.core.model import (
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
    ToolOutputAction,
    ToolOutputChanged,
    UsageReported,
)
from inspector.core.policies.base import Action, ContextItem, PolicyResult, Summarizer
from inspector.core.profiles import Profile
from inspector.core.session import Flag, Session, StepState, kind_name, role_name
from inspector.core.whatif import branch_events
from inspector.loader import LoadedSession, new_session
from inspector.ui.widgets.events_view import EventRow
from inspector.ui.widgets.messages_view import MessageRow
from inspector.ui.widgets.timeline_view import TimelinePoint


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
}


class SessionState:
    """One opened session in the dashboard."""

    def __init__(self, loaded: LoadedSession, *, follow: str | None = None) -> None:
        self.loaded = loaded
        self.original = loaded.session
        self.follow = follow  # None for a saved file, else a follow-state text
        self.cursor: int | None = None  # None: stay at the live end
        self.branches: list[WhatIf] = []
        self.version = 0
        self._cache: dict[tuple[str, int, int], Any] = {}

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
        """The session grew or changed: drop cached values."""
        self.version += 1
        self._cache.clear()

    def replace_session(self, session: Session) -> None:
        """A followed whole input was re-read into a new session."""
        self.original = session
        self.loaded.session = session
        self.touch()

    def steps(self) -> list[StepState]:
        key = ("steps", self.version, len(self.branches))
        cached = self._cache.get(key)
        if cached is None:
            cached = self._cache[key] = self.session.all_steps()
        result: list[StepState] = cached
        return result

    def step(self) -> int | None:
        """The step under the cursor (the last step when the cursor follows the live end)."""
        count = len(self.steps())
        if count == 0:
            return None
        if self.cursor is None:
            return count
        return max(1, min(self.cursor, count))

    def move(self, step: int | None) -> None:
        """Move the cursor; moving to the last step of a followed file re-attaches to the end."""
        count = len(self.steps())
        if step is not None and self.follow is not None and step >= count:
            step = None
        self.cursor = step

    # -- values for the widgets ------------------------------------------------------------

    def state_at(self, step: int | None = None) -> StepState | None:
        step = step or self.step()
        steps = self.steps()
        return steps[step - 1] if step and 0 < step <= len(steps) else None

    def counters(self, step: int | None = None) -> Counters | None:
        return counters_at(self.session, self.profile, step or self.step())

    def gauge(self, step: int | None = None) -> dict[str, Any]:
        state = self.state_at(step)
        tokens = state.tokens if state is not None else 0
        profile = self.profile
        return {
            "tokens": tokens,
            "window": profile.context_window,
            "warning": profile.warning_threshold(),
            "threshold": profile.threshold(),
            "zone": profile.zone(tokens),
            "origin": state.origin.value if state is not None else "estimated",
            "effective_limit": profile.limit_parts().effective,
        }

    def points(self) -> list[TimelinePoint]:
        key = ("points", self.version, len(self.branches))
        cached = self._cache.get(key)
        if cached is not None:
            result: list[TimelinePoint] = cached
            return result
        markers: dict[int, set[str]] = {}
        session = self.session
        for index, event in session.non_message_events():
            name = _MARKER_OF_EVENT.get(type(event))
            if isinstance(event, ToolOutputChanged) and event.action is ToolOutputAction.DROPPED:
                name = "dropped"
            if isinstance(event, Pruned) and not event.applied:
                name = None
            if name is not None:
                markers.setdefault(session.step_at(index), set()).add(name)
        zone = self.profile.zone
        points = [
            TimelinePoint(
                s.step, s.tokens, s.peak, zone(s.peak), frozenset(markers.get(s.step, ()))
            )
            for s in self.steps()
        ]
        self._cache[key] = points
        return points

    def context_mask(self, step: int | None) -> list[bool]:
        """Which messages were in context at ``step`` (all of them visible and main)."""
        key = ("mask", self.version, step or 0)
        cached = self._cache.get(key)
        if cached is None:
            indices = set(self.session.in_context(step))
            cached = self._cache[key] = [i in indices for i in range(self.session.message_count)]
        result: list[bool] = cached
        return result

    def running(self, step: int | None) -> list[int]:
        key = ("running", self.version, step or 0)
        cached = self._cache.get(key)
        if cached is None:
            mask = self.context_mask(step)
            table = self.session.table
            tokens = (_best(table, i) if inside else 0 for i, inside in enumerate(mask))
            cached = self._cache[key] = list(itertools.accumulate(tokens))
        result: list[int] = cached
        return result

    def row(self, index: int) -> MessageRow:
        step = self.step()
        table = self.session.table
        mask = self.context_mask(step)
        running = self.running(step)
        tokens = _best(table, index)
        flags = table.flags[index]
        window = self.profile.context_window or 1
        names = [name for bit, name in _FLAG_NAMES if flags & bit]
        if not flags & int(Flag.VISIBLE):
            names.append("hidden")
        kind = kind_name(table.kind[index])
        if kind in ("summary", "archived"):
            names.append(kind)
        tool = table.tool[index]
        return MessageRow(
            index=index,
            role=role_name(table.role[index]),
            kind=kind,
            tokens=tokens,
            share=tokens / window,
            running=running[index] if mask[index] else 0,
            flags=", ".join(names),
            origin=_origin(table, index),
            tool=table.tools[tool] if tool >= 0 else None,
            in_context=mask[index],
        )

    def event_indices(self) -> list[int]:
        key = ("events", self.version, len(self.branches))
        cached = self._cache.get(key)
        if cached is None:
            cached = self._cache[key] = [i for i, _ in self.session.non_message_events()]
        result: list[int] = cached
        return result

    def event_row(self, position: int) -> EventRow:
        index = self.event_indices()[position]
        event = self.session.event(index)
        return EventRow(
            index, self.session.step_at(index), event.type, _topic(event), _summary(event)
        )

    # -- acting ----------------------------------------------------------------------------

    def context_items(self, step: int | None, estimate: Any) -> list[ContextItem]:
        from inspector.commands import context_items

        return context_items(self.session, self.profile, step, estimate)

    def preview(
        self, action: Action, profile: Profile, summarizer: Summarizer, step: int | None = None
    ) -> tuple[list[ContextItem], PolicyResult, ActionDiff]:
        """What an action would do at the cursor, with the diff; nothing is changed yet."""
        from inspector.commands import act, estimator_for

        estimate = estimator_for(profile)
        items = self.context_items(step or self.step(), estimate)
        result = act(items, profile, action, estimate, summarizer)
        return items, result, diff_action(items, result)

    def apply(self, result: PolicyResult, step: int | None = None) -> WhatIf:
        """Keep an action's result as a what-if branch (the input file is never touched)."""
        step = step or self.step() or 1
        label = (
            f"what-if {len(self.branches) + 1}: {result.action.value} ({result.policy}) "
            f"at step {step}"
        )
        events = branch_events(self.session, step, result, label)
        session = new_session(
            self.profile, self.loaded.counter, count_exact=self.original.count_exact
        )
        session.append(events)
        branch = WhatIf(label, step, session, result)
        self.branches.append(branch)
        self.cursor = None
        self.touch()
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
        from inspector.formats.native import export_events

        header = {"source": str(self.loaded.path), "profile": self.profile.name}
        if self.what_if:
            header["what_if"] = self.what_if
        return export_events(path, self.session.events(), header_extra=header)


_FLAG_NAMES = (
    (int(Flag.PRUNED), "pruned"),
    (int(Flag.DROPPED), "dropped"),
    (int(Flag.TRUNCATED), "truncated"),
    (int(Flag.REMOVED), "removed"),
)


def _best(table: Any, index: int) -> int:
    reported = table.reported[index]
    if reported >= 0:
        return int(reported)
    exact = table.exact[index]
    return int(exact if exact >= 0 else table.estimate[index])


def _origin(table: Any, index: int) -> str:
    if table.reported[index] >= 0:
        return "reported"
    return "exact" if table.exact[index] >= 0 else "estimated"


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
    if isinstance(event, ToolOutputChanged):
        return f"{event.action.value} {event.tool or ''} {event.tokens or ''}".strip()
    data = event.model_dump(exclude_none=True, exclude_defaults=True, exclude={"span", "type"})
    return ", ".join(f"{k}={v}" for k, v in list(data.items())[:5])
