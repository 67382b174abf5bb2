"""What a viewer asks of a session: one message's facts at a step, the figures of the steps
from some step on, the open step; answered from the session's columns, which stay the session's
own (a viewer never reads them, so their layout can change without it).

A ``SessionQuery`` follows one session as it grows (appends): what it derives (the running
totals of ``core.running_totals``) is brought up to date when next asked for, not made again.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from ctx_inspect.core.running_totals import RunningTotals, best_tokens
from ctx_inspect.core.session import Flag, Session, StepState, kind_name, role_name

_FLAG_NAMES = (
    (int(Flag.PRUNED), "pruned"),
    (int(Flag.DROPPED), "dropped"),
    (int(Flag.TRUNCATED), "truncated"),
    (int(Flag.REMOVED), "removed"),
)
_VISIBLE = int(Flag.VISIBLE)


@dataclass(frozen=True, slots=True)
class MessageFacts:
    """One message as seen from one step."""

    index: int
    role: str
    kind: str
    tool: str | None
    tokens: int  # the best figure: reported, else exact, else estimated
    origin: str  # where ``tokens`` came from: reported / exact / estimated
    flags: tuple[str, ...]  # pruned, dropped, truncated, removed, hidden, summary, archived
    in_context: bool  # sent to the model at the step
    running: int  # tokens in context up to this message at the step (0 when it is not)


class StepFigure(NamedTuple):
    """A step's context figure and its peak (before management), without the step itself."""

    step: int
    tokens: int
    peak: int


class SessionQuery:
    """The questions a viewer asks of ``session`` (see the module)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._totals: RunningTotals | None = None

    def _running(self) -> RunningTotals:
        if self._totals is None:
            self._totals = RunningTotals(self.session)
        return self._totals

    # -- messages --------------------------------------------------------------------------

    def message(self, index: int, step: int) -> MessageFacts:
        """Message ``index`` at ``step`` (0: before the first step)."""
        table = self.session.table
        totals = self._running()
        inside = totals.in_context(index, step)
        flags = table.flags[index]
        names = [name for bit, name in _FLAG_NAMES if flags & bit]
        if not flags & _VISIBLE:
            names.append("hidden")
        kind = kind_name(table.kind[index])
        if kind in ("summary", "archived"):
            names.append(kind)
        tool = table.tool[index]
        return MessageFacts(
            index=index,
            role=role_name(table.role[index]),
            kind=kind,
            tool=table.tools[tool] if tool >= 0 else None,
            tokens=best_tokens(self.session, index),
            origin=self._origin(index),
            flags=tuple(names),
            in_context=inside,
            running=totals.total(index, step) if inside else 0,
        )

    def _origin(self, index: int) -> str:
        table = self.session.table
        if table.reported[index] >= 0:
            return "reported"
        return "exact" if table.exact[index] >= 0 else "estimated"

    # -- steps -----------------------------------------------------------------------------

    @property
    def closed_steps(self) -> int:
        """Steps that are over (a request was sent): their figures change no more, but for the
        last one's, which its usage may still bring."""
        return len(self.session.steps)

    def closed_figures(self, start: int = 0) -> Iterator[StepFigure]:
        """The figures of the closed steps from position ``start`` (0-based) on."""
        steps = self.session.steps
        tokens_of, peak_of = steps.tokens, steps.peak  # the columns: no step is made
        for i in range(start, len(steps)):
            yield StepFigure(i + 1, tokens_of(i), peak_of(i))

    def open_step(self) -> StepState | None:
        """The open build-up as a step, when it counts as one (``Session.open_step_shown``)."""
        session = self.session
        return session.live_state() if session.open_step_shown() else None
