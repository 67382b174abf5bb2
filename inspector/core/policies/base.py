"""What every agent policy is: a pure function from the context to a new context and a report.

A policy never writes anything: it takes the messages in context (with the agent's own token
estimate for each) and the profile, and returns the new list of items, what happened to each
original item, and a report of what it did and why. The same functions serve a manual action in
the dashboard (``force=True``: act now, whatever the thresholds say, but with the agent's own
protections) and replay (``force=False``: act only where the agent would have).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from inspector.core.model import Message, MessageKind, Part, PartType, Role
from inspector.core.profiles import Profile


class Action(StrEnum):
    PRUNE = "prune"
    COMPACT = "compact"
    TRUNCATE = "truncate"  # a tool output shortened (middle-out, head-and-tail, spill)
    DROP = "drop"  # a tool output replaced because it does not fit
    FINAL_TURN = "final_turn"  # the agent forces its last turn (the context does not change)


class ItemStatus(StrEnum):
    KEPT = "kept"
    PRUNED = "pruned"  # content cleared, the message stays
    TRUNCATED = "truncated"  # content shortened
    SUMMARIZED = "summarized"  # removed; its content went into a summary
    ARCHIVED = "archived"  # hidden from the model, kept for the user
    DROPPED = "dropped"  # removed outright
    ADDED = "added"  # created by the policy (a summary, a digest)


@dataclass(frozen=True)
class ContextItem:
    """A message in context with the agent's own estimate of its size."""

    message: Message
    tokens: int
    index: int | None = None  # the session's message index; None for items a policy created

    @property
    def id(self) -> str:
        return self.message.id


@dataclass(frozen=True)
class ItemChange:
    id: str
    status: ItemStatus
    tokens_before: int
    tokens_after: int
    note: str = ""


@dataclass
class PolicyResult:
    action: Action
    policy: str
    fired: bool  # whether anything changed (or, without force, whether the agent would act)
    reason: str  # why, or why not, in one sentence
    items: list[ContextItem]  # the context after
    changes: list[ItemChange]  # one per original item, then one per added item
    tokens_before: int
    tokens_after: int
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def tokens_saved(self) -> int:
        return self.tokens_before - self.tokens_after


class Summarizer(Protocol):
    """Writes the summary a compaction keeps (see ``inspector.core.summarize``)."""

    def summarize(self, messages: Sequence[Message], budget_tokens: int) -> str: ...


Estimate = Callable[[Message], int]


def total(items: Sequence[ContextItem]) -> int:
    return sum(item.tokens for item in items)


def unchanged(
    action: Action, policy: str, items: Sequence[ContextItem], reason: str, **details: Any
) -> PolicyResult:
    """The result of a policy that decided not to act."""
    tokens = total(items)
    return PolicyResult(
        action=action,
        policy=policy,
        fired=False,
        reason=reason,
        items=list(items),
        changes=[ItemChange(i.id, ItemStatus.KEPT, i.tokens, i.tokens) for i in items],
        tokens_before=tokens,
        tokens_after=tokens,
        details=details,
    )


def replace_text(message: Message, text: str) -> Message:
    """The message with its content replaced by ``text`` (tool results stay tool results)."""
    first = message.parts[0] if message.parts else None
    part_type = first.type if first is not None else PartType.TEXT
    if part_type not in (PartType.TEXT, PartType.TOOL_RESULT):
        part_type = PartType.TEXT
    part = Part(
        type=part_type,
        text=text,
        tool_name=first.tool_name if first is not None else None,
        call_id=first.call_id if first is not None else None,
    )
    return message.model_copy(update={"parts": (part,)})


def summary_message(message_id: str, text: str, role: Role = Role.USER) -> Message:
    return Message(
        id=message_id,
        role=role,
        kind=MessageKind.SUMMARY,
        parts=(Part(type=PartType.TEXT, text=text),),
    )


class Policy(Protocol):
    """One agent's context management, as pure functions.

    ``admit`` runs when a tool output is about to enter the context (truncation, spill, drop);
    ``manage`` runs before each model request and returns what the agent does there, in order
    (an empty list when it does nothing); ``prune``, ``compact`` and ``truncate`` are the
    actions a user can trigger by hand (``force=True``) with this agent's algorithm.
    """

    name: str

    def admit(
        self,
        item: ContextItem,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
    ) -> PolicyResult | None: ...

    def manage(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        summarizer: Summarizer,
    ) -> list[PolicyResult]: ...

    def prune(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        *,
        force: bool = False,
    ) -> PolicyResult: ...

    def compact(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        summarizer: Summarizer,
        *,
        force: bool = False,
    ) -> PolicyResult: ...

    def truncate(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        *,
        force: bool = False,
    ) -> PolicyResult: ...
