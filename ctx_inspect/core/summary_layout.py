"""How a summary is laid out: its sections in order, with the weights that say which lines go
first when the budget is short, and the order lines are dropped in (``DropPlan``), which
depends on the sections' sizes alone and is kept for the sizes met most."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple


@dataclass(frozen=True)
class Section:
    key: str
    header: str
    weight: float  # a line's value is its section's weight plus its recency in the section


# Our own wording. Output order is this order; the weights say what goes first when the budget
# is short (commands before files, files before decisions, ..., the first request last).
SECTIONS: tuple[Section, ...] = (
    Section("task", "Task (what the user asked):", 5.0),
    Section("earlier", "Carried over from an earlier summary:", 4.5),
    Section("files", "Files touched:", 2.5),
    Section("commands", "Commands run:", 2.0),
    Section("errors", "Errors and what was done about them:", 3.5),
    Section("decisions", "Decisions and their reasons:", 3.0),
    Section("next", "Where it stopped, next steps:", 4.0),
)
FIRST_REQUEST_BONUS = 100.0


class DropPlan(NamedTuple):
    """How ``LocalSummarizer.summarize`` drops lines when the budget is short, for given
    section sizes (it depends on nothing else; lines are counted section after section)."""

    order: list[int]  # the lines, the least valuable first
    owners: list[int]  # the section of each line of ``order``
    costs: list[int]  # what dropping each line of ``order`` takes off the rendering, less the line
    frame: int  # the rendering's length less its lines


# the plans for summaries of up to ``_PLANNED_LINES`` lines, by their section sizes
_PLANS: dict[tuple[int, ...], DropPlan] = {}
_PLANS_SIZE = 512
_PLANNED_LINES = 256


def drop_plan(sizes: tuple[int, ...]) -> DropPlan:
    """The ``DropPlan`` for sections of these sizes.

    A line's value is its section's weight plus its recency in the section; the first request
    gets a bonus. The least valuable go first, then on equal values the later section, then
    the older line: the lines are listed in that last order (the sections from the last, each
    oldest first), and sorting keeps the order of equal values, so sorting by value alone is
    enough (floats compare faster than tuples).

    The rendering: a block per section with lines, its header then "\n- " and a line per
    line, the blocks separated by "\n\n". A section's values grow with recency, so its newest
    line is the last of it to go, and its header and a "\n\n" go with it (another section is
    still shown, unless no line is left, when the count is all the lines whatever the
    length). The task's newest line is not its last one: the first request goes last of all.
    """
    known = _PLANS.get(sizes)
    if known is not None:
        return known
    values: list[float] = []
    owner: list[int] = []  # the section of each line
    emptied: dict[int, int] = {}  # the newest line of each section but the task: the header's cost
    for s_index, (section, size) in enumerate(zip(SECTIONS, sizes, strict=True)):
        weight, share = section.weight, size + 1
        values += [weight + (p + 1) / share for p in range(size)]
        owner += [s_index] * size
        if size and s_index:
            emptied[len(values) - 1] = len(section.header) + 2
    if sizes[0]:  # the first request (the task is the first section)
        values[0] += FIRST_REQUEST_BONUS
    listed: list[int] = []
    end = len(values)
    for size in reversed(sizes):
        listed += range(end - size, end)
        end -= size
    order = sorted(listed, key=values.__getitem__)
    shown = [section for section, size in zip(SECTIONS, sizes, strict=True) if size]
    plan = DropPlan(
        order,
        [owner[index] for index in order],
        [3 + emptied.get(index, 0) for index in order],  # with "- " and the line's break
        3 * len(order) + sum(len(section.header) for section in shown) + 2 * (len(shown) - 1),
    )
    if len(order) <= _PLANNED_LINES:
        if len(_PLANS) >= _PLANS_SIZE:
            _PLANS.clear()
        _PLANS[sizes] = plan
    return plan


def fewest_dropped(plan: DropPlan, texts: Sequence[str], budget_tokens: int) -> int:
    """The fewest lines to drop (in ``plan.order``) so that the rendering fits the budget under
    the default measure, a token per four characters: the rendering's length is kept as lines
    are dropped, without rendering (what ``summarize``'s search finds by rendering)."""
    limit = 4 * budget_tokens  # the longest rendering within the budget
    length = plan.frame + sum(map(len, texts))
    if length <= limit:
        return 0
    dropped = 0
    for index, cost in zip(plan.order, plan.costs, strict=True):
        length -= len(texts[index]) + cost
        dropped += 1
        if length <= limit:
            break
    return dropped


def forget_plans() -> None:
    """Empty the kept drop plans, as in a new process."""
    _PLANS.clear()
