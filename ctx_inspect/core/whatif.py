"""What-if branches: the session as it would be had a prune, compaction or truncation been
applied at a step. A branch is a new list of events (never a change to the input): the
recording up to the step, a marker, the action's own event, then the new context."""

from __future__ import annotations

from dataclasses import dataclass

from ctx_inspect.core.model import (
    Compacted,
    ContextReset,
    Event,
    Marker,
    MessageAdded,
    Pruned,
    ToolOutputAction,
    ToolOutputChanged,
)
from ctx_inspect.core.policies.base import Action, ItemStatus, PolicyResult
from ctx_inspect.core.replay import OVERHEAD_ID
from ctx_inspect.core.session import MAIN_THREAD, Session


@dataclass(frozen=True)
class Branch:
    label: str  # e.g. "what-if 1: compact (claude-code) at step 12"
    step: int
    events: list[Event]
    result: PolicyResult


def branch_events(session: Session, step: int, result: PolicyResult, label: str) -> list[Event]:
    """The events of the branch: the recording through ``step``'s build-up, then the action."""
    states = session.all_steps()
    if not 1 <= step <= len(states):
        raise ValueError(f"step {step} is not in 1..{len(states)}")
    state = states[step - 1]
    stop = state.request_event if state.request_event is not None else state.last_event + 1
    events: list[Event] = list(session.events(0, stop))
    events.append(Marker(text=f"{label}: {result.reason}"))
    events.append(_action_event(result))
    # the new context replaces the old one exactly: drop it all, then add what the action kept,
    # changed or created (with fresh ids, so the originals stay readable in the history)
    events.append(ContextReset(keep_through=None, keep_system=False, reason="what-if"))
    suffix = f"~{label.split(':')[0].replace(' ', '-')}"
    for item in result.items:
        if item.id == OVERHEAD_ID:
            continue
        message = item.message.model_copy(update={"id": item.id + suffix, "thread": MAIN_THREAD})
        events.append(MessageAdded(message=message, tokens=None))
    return events


def _action_event(result: PolicyResult) -> Event:
    removed = tuple(
        c.id
        for c in result.changes
        if c.status is not ItemStatus.KEPT and c.status is not ItemStatus.ADDED
    )
    if result.action is Action.COMPACT:
        kept = tuple(i.id for i in result.items)
        return Compacted(
            trigger="what-if",
            tokens_before=result.tokens_before,
            tokens_after=result.tokens_after,
            retained_ids=kept,
            messages_before=None,
            messages_after=len(result.items),
        )
    if result.action is Action.PRUNE:
        return Pruned(
            tokens_before=result.tokens_before,
            tokens_after=result.tokens_after,
            tokens_recovered=result.tokens_saved,
            outputs_pruned=len(removed),
            message_ids=removed,
            reason="what-if",
        )
    return ToolOutputChanged(
        action=ToolOutputAction.TRUNCATED,
        tokens=result.tokens_before,
        tokens_after=result.tokens_after,
        replacement=f"{len(removed)} tool outputs truncated (what-if)",
    )
