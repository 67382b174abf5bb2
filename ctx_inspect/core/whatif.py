"""What-if branches: the session as it would be had a prune, compaction or truncation been
applied at a step. A branch is a new list of events (never a change to the input): the
recording up to the step, a marker, the action's own event, then the new context; then the
rest of the recording as a replay from there under the chosen policy made it
(``continued_events``): the recorded messages the replayed agent took in, its own decisions,
and at every step from the applied one its replayed figure, an estimate (``ContextMeasured``
of origin ``estimated``), never the recording's reported figures."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ctx_inspect.core.model import (
    Compacted,
    ContextMeasured,
    ContextReset,
    Event,
    FinalTurnForced,
    GuardEvaluated,
    Marker,
    MessageAdded,
    Origin,
    Pruned,
    RequestRejected,
    RequestSent,
    ToolOutputAction,
    ToolOutputChanged,
    UsageReported,
)
from ctx_inspect.core.policies.base import Action, ContextItem, ItemStatus, PolicyResult
from ctx_inspect.core.replay import OVERHEAD_ID, WHAT_IF, Decision, ReplayResult, ReplayStep
from ctx_inspect.core.session import MAIN_THREAD, Session

# what the recording did that a what-if's replay decides again, and its figures: left out
_RECORDED_ONLY = (
    UsageReported,
    ContextMeasured,
    RequestRejected,
    GuardEvaluated,
    Compacted,
    Pruned,
    ToolOutputChanged,
    FinalTurnForced,
)


@dataclass(frozen=True)
class Branch:
    label: str  # e.g. "what-if 1: compact (claude-code) at step 12"
    step: int
    events: list[Event]
    result: PolicyResult


def branch_events(session: Session, step: int, result: PolicyResult, label: str) -> list[Event]:
    """The events of the branch: the recording through ``step``'s build-up, then the action."""
    events: list[Event] = list(session.events(0, _build_up_end(session, step)))
    events.append(Marker(text=f"{label}: {result.reason}"))
    events.append(_action_event(result))
    # the new context replaces the old one exactly: drop it all, then add what the action kept,
    # changed or created (with fresh ids, so the originals stay readable in the history)
    events.append(ContextReset(keep_through=None, keep_system=False, reason="what-if"))
    suffix = _suffix(label)
    for item in result.items:
        if item.id == OVERHEAD_ID:
            continue
        message = item.message.model_copy(update={"id": item.id + suffix, "thread": MAIN_THREAD})
        events.append(MessageAdded(message=message, tokens=None))
    return events


def _build_up_end(session: Session, step: int) -> int:
    """Where ``step``'s build-up ends: its request's event (the end, for the live end)."""
    count = session.step_count()
    state = session.state_of(step)
    if state is None:
        raise ValueError(f"step {step} is not in 1..{count}")
    return state.request_event if state.request_event is not None else state.last_event + 1


def _suffix(label: str) -> str:
    """What the branch adds to the ids of the messages it puts in again."""
    return f"~{label.split(':')[0].replace(' ', '-')}"


def continued_events(
    session: Session, step: int, result: PolicyResult, label: str, replayed: ReplayResult
) -> list[Event]:
    """The branch's events (``branch_events``), then the rest of the recording as
    ``replayed`` (a replay with this action at ``step``, ``replay(what_if=...)``) made it:
    every recorded event but what the agent decided and the figures it reported; the
    recorded messages the replayed agent took in; before each request from ``step`` on, the
    replayed decisions of its build-up and its replayed figure (labelled estimated); the same
    after the last request when the replay has a step there."""
    events = branch_events(session, step, result, label)
    stop = _build_up_end(session, step)
    builder = _Continuation(_suffix(label), result, replayed, step)
    for index, raw in enumerate(session.raw_events(stop), stop):
        if isinstance(raw, int):
            if raw in builder.taken:
                events.append(session.event(index))
                builder.entered(session.record(raw).id)
            continue
        if isinstance(raw, _RECORDED_ONLY) and getattr(raw, "thread", MAIN_THREAD) == MAIN_THREAD:
            continue
        if isinstance(raw, RequestSent) and raw.thread == MAIN_THREAD:
            events.extend(builder.before_request())
        elif isinstance(raw, ContextReset) and raw.thread == MAIN_THREAD:
            raw = builder.reset(raw)
        events.append(raw)
    events.extend(builder.at_the_end())
    return events


class _Continuation:
    """The events a what-if's replay adds to the rest of the recording, step by step."""

    def __init__(self, suffix: str, result: PolicyResult, replayed: ReplayResult, step: int):
        self.suffix = suffix
        self.label = f"{WHAT_IF}, replayed under {result.policy}"
        self.steps = {s.step: s for s in replayed.steps if s.step >= step}
        self.step = step  # the step whose request comes next
        # the branch's id of each replayed item in its context (what the action kept was put
        # in again under new ids), and what is in the branch's context
        self.ids = {i.id: i.id + suffix for i in result.items if i.id != OVERHEAD_ID}
        self.live = set(self.ids.values())
        self.results = {
            (r.step, id(r.result)): r.result for r in replayed.results if r.step >= step
        }
        # the recorded messages the replayed agent took in (by their position)
        self.taken = {
            i.index for s in self.steps.values() for i in s.items or () if i.index is not None
        }
        # (a message the replay took in and removed in the same build-up is in no step's
        # context: it is taken in, then removed by the decision, as replayed)
        self.taken |= {
            i.index
            for r in replayed.results
            if r.step >= step
            for i in r.before
            if i.index is not None
        }

    def entered(self, message_id: str) -> None:
        self.ids.setdefault(message_id, message_id)
        self.live.add(self.ids[message_id])

    def reset(self, event: ContextReset) -> ContextReset:
        keep = event.keep_through
        if keep is None:
            self.live.clear()
            return event
        return event.model_copy(update={"keep_through": self.ids.get(keep, keep)})

    def before_request(self) -> Iterator[Event]:
        replayed = self.steps.get(self.step)
        self.step += 1
        if replayed is not None:
            yield from self._step(replayed)

    def at_the_end(self) -> Iterator[Event]:
        replayed = self.steps.get(self.step)
        if replayed is not None and replayed.live_end:
            yield from self._step(replayed)

    def _step(self, replayed: ReplayStep) -> Iterator[Event]:
        for decision in replayed.decisions:
            if not decision.detail.startswith(WHAT_IF):
                yield from self._decision(decision, replayed)
        yield ContextMeasured(tokens=replayed.tokens, origin=Origin.ESTIMATED, label=self.label)

    def _decision(self, d: Decision, replayed: ReplayStep) -> Iterator[Event]:
        if d.kind == "compaction":
            if d.failed:
                yield Compacted(trigger=d.trigger or "replay", failed=True, error=d.detail)
                return
            items = [i for i in replayed.items or () if i.id != OVERHEAD_ID]
            kept = [self.ids[i.id] for i in items if self.ids.get(i.id) in self.live]
            yield Compacted(
                trigger=d.trigger or "replay",
                tokens_before=d.tokens_before,
                tokens_after=d.tokens_after,
                retained_ids=tuple(kept),
                keep_system=False,
                messages_after=len(items),
            )
            self.live = set(kept)
            yield from self._written(items, replayed.step)
        elif d.kind == "prune":
            pruned = [
                self.ids.get(c.id, c.id)
                for (at, _), r in self.results.items()
                if at == replayed.step and r.action is Action.PRUNE
                for c in r.changes
                if c.status is ItemStatus.PRUNED
            ]
            yield Pruned(
                tokens_before=d.tokens_before,
                tokens_after=d.tokens_after,
                message_ids=tuple(pruned) if d.persistent else (),
                persistent=d.persistent,
                reason=d.detail,
            )
        elif d.kind == "final_turn":
            yield FinalTurnForced(
                reason=d.detail, projected_tokens=d.tokens_before, limit_tokens=d.tokens_after
            )
        else:
            action = ToolOutputAction.DROPPED if d.kind == "dropped" else ToolOutputAction.TRUNCATED
            yield ToolOutputChanged(
                action=action, tokens=d.tokens_before, tokens_after=d.tokens_after
            )

    def _written(self, items: list[ContextItem], step: int) -> Iterator[Event]:
        """What the replayed compaction wrote (its summary): put in under new ids."""
        for item in items:
            if item.id in self.ids:
                continue
            new_id = f"{item.id}{self.suffix}-{step}"
            self.ids[item.id] = new_id
            self.live.add(new_id)
            message = item.message.model_copy(update={"id": new_id, "thread": MAIN_THREAD})
            yield MessageAdded(message=message, tokens=None)


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
