"""What every agent policy is: a pure function from the context to a new context and a report.

A policy never writes anything: it takes the messages in context (with the agent's own token
estimate for each) and the profile, and returns the new list of items, what happened to the
original items it did not keep as they were, and a report of what it did and why. The same
functions serve a manual action in the dashboard (``force=True``: act now, whatever the
thresholds say, but with the agent's own protections) and replay (``force=False``: act only
where the agent would have).

Cost: replay calls ``manage`` before every request and ``admit`` for every tool output, with a
``ContextList`` whose token total is kept as it grows (``total`` reads it in O(1)). A policy's
checks that decide whether to act must not scan the whole context when nothing fires; work in
proportion to the context is for when it fires (a compaction rebuilds it), and a firing that
repeats at every request works in proportion to the newest messages only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from itertools import compress
from operator import attrgetter, not_
from typing import Any, Protocol, Self, SupportsIndex, overload

from ctx_inspect.core.model import Message, MessageKind, Part, PartType, Role
from ctx_inspect.core.profiles import Profile
from ctx_inspect.core.unvalidated import build, shared_set


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
    # a model response: the provider's figure for the request it answered (its prompt and
    # this output), as reported or, in a replay, as the replayed request would have had it
    reported: int | None = None

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
    """What a policy did.

    ``changes`` lists the original items that were not kept as they were (pruned, truncated,
    summarised, archived, dropped), in their original order, then the items the policy added;
    an original item absent from ``changes`` was kept (``diff.diff_action`` fills the kept rows
    back in). ``admit``'s result is about the admitted item only: ``items`` holds that item as
    it enters the context, ``changes`` its one change, and the token figures are its own.
    """

    action: Action
    policy: str
    fired: bool  # whether anything changed (or, without force, whether the agent would act)
    reason: str  # why, or why not, in one sentence
    items: list[ContextItem]  # the context after (admit: the admitted item alone)
    changes: list[ItemChange]  # the items not kept as they were, in order, then the added ones
    tokens_before: int
    tokens_after: int
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def tokens_saved(self) -> int:
        return self.tokens_before - self.tokens_after


class Summarizer(Protocol):
    """Writes the summary a compaction keeps (see ``ctx_inspect.core.summarize``)."""

    def summarize(self, messages: Sequence[Message], budget_tokens: int) -> str: ...


Estimate = Callable[[Message], int]


_TOKENS = attrgetter("tokens")
_VISIBLE = attrgetter("message.visible")


class ContextList(list[ContextItem]):
    """A context that keeps its token totals up to date as it changes (replay's context).

    - ``tokens_total`` is the sum of the items' tokens and ``hidden_tokens`` that of the items
      the model does not see (``message.visible`` false): ``total`` and ``visible_total`` read
      them in O(1). Every mutating list method keeps them right; a slice is a plain list.
    - A *head* item (replay's overhead: what the transcript does not show) can be put first
      and taken away again (``push_head``, ``pop_head``) without disturbing the marks.
    - *Marks* let a policy that acts again and again on a growing context skip what it has
      already been through: ``mark(key, position, data)`` records that the items before
      ``position`` hold nothing ``key`` looks for, ``marked(key)`` reads it back. Marks count
      positions from the first item after the head; appending keeps them, ``replaced`` drops
      those that reach a replaced item, and any other change drops them all.
    """

    tokens_total: int
    hidden_tokens: int
    has_head: bool

    def __init__(self, items: Iterable[ContextItem] = ()) -> None:
        super().__init__(items)
        self.has_head = False
        self._marks: dict[str, tuple[int, Any]] = {}
        self._recount()

    # -- totals ----------------------------------------------------------------------------

    def _recount(self) -> None:
        tokens = list(map(_TOKENS, self))
        self.tokens_total = sum(tokens)
        self.hidden_tokens = sum(compress(tokens, map(not_, map(_VISIBLE, self))))

    def _add(self, item: ContextItem, sign: int) -> None:
        self.tokens_total += sign * item.tokens
        if not item.message.visible:
            self.hidden_tokens += sign * item.tokens

    def _changed(self) -> None:
        """A change other than an append: the marks may no longer hold, and the head may be
        gone."""
        self._marks.clear()
        self.has_head = False

    # -- head and marks --------------------------------------------------------------------

    def push_head(self, item: ContextItem) -> None:
        """``item`` first, as the head (there must be none yet)."""
        if self.has_head:
            raise ValueError("the context has a head already")
        super().insert(0, item)
        self._add(item, 1)
        self.has_head = True

    def pop_head(self) -> ContextItem:
        """Take the head away."""
        if not self.has_head:
            raise ValueError("the context has no head")
        item = super().pop(0)
        self._add(item, -1)
        self.has_head = False
        return item

    def mark(self, key: str, position: int, data: Any = None) -> None:
        """The items before ``position`` hold nothing ``key`` looks for (``data``: what the
        policy wants to remember about them)."""
        self._marks[key] = (position - self.has_head, data)

    def marked(self, key: str) -> tuple[int, Any] | None:
        """(position, data) of ``key``'s mark, if it still holds."""
        found = self._marks.get(key)
        if found is None:
            return None
        return found[0] + self.has_head, found[1]

    def copy(self) -> ContextList:
        """A copy, with the same totals, head and marks (no recount)."""
        new = ContextList.__new__(ContextList)
        list.__init__(new, self)
        new.tokens_total = self.tokens_total
        new.hidden_tokens = self.hidden_tokens
        new.has_head = self.has_head
        new._marks = dict(self._marks)
        return new

    def replaced(self, replacements: Mapping[int, ContextItem]) -> ContextList:
        """A copy with the items at some positions replaced; the totals follow, the head stays
        and the marks that do not reach a replaced position too."""
        new = self.copy()
        for position, item in replacements.items():
            new._add(self[position], -1)
            list.__setitem__(new, position, item)
            new._add(item, 1)
        if replacements:
            first = min(replacements) - self.has_head
            new._marks = {k: v for k, v in new._marks.items() if v[0] <= first}
        return new

    # -- list methods ----------------------------------------------------------------------

    def append(self, item: ContextItem) -> None:
        super().append(item)
        self._add(item, 1)

    def extend(self, items: Iterable[ContextItem]) -> None:
        added = list(items)
        super().extend(added)
        for item in added:
            self._add(item, 1)

    def __iadd__(self, items: Iterable[ContextItem]) -> Self:  # type: ignore[override,misc]
        self.extend(items)
        return self

    def insert(self, index: SupportsIndex, item: ContextItem) -> None:
        super().insert(index, item)
        self._add(item, 1)
        self._changed()

    def pop(self, index: SupportsIndex = -1) -> ContextItem:
        item = super().pop(index)
        self._add(item, -1)
        self._changed()
        return item

    def remove(self, item: ContextItem) -> None:
        super().remove(item)
        self._add(item, -1)
        self._changed()

    def clear(self) -> None:
        super().clear()
        self.tokens_total = self.hidden_tokens = 0
        self._changed()

    @overload
    def __setitem__(self, index: SupportsIndex, item: ContextItem) -> None: ...
    @overload
    def __setitem__(self, index: slice, item: Iterable[ContextItem]) -> None: ...
    def __setitem__(self, index: SupportsIndex | slice, item: Any) -> None:
        if isinstance(index, slice):
            super().__setitem__(index, item)
            self._recount()
        else:
            old = self[index]
            super().__setitem__(index, item)
            self._add(old, -1)
            self._add(item, 1)
        self._changed()

    def __delitem__(self, index: SupportsIndex | slice) -> None:
        if isinstance(index, slice):
            super().__delitem__(index)
            self._recount()
        else:
            old = self[index]
            super().__delitem__(index)
            self._add(old, -1)
        self._changed()

    def __imul__(self, times: SupportsIndex) -> Self:
        super().__imul__(times)
        self._recount()
        self._changed()
        return self

    def sort(self, *args: Any, **kwargs: Any) -> None:
        super().sort(*args, **kwargs)
        self._changed()

    def reverse(self) -> None:
        super().reverse()
        self._changed()


def total(items: Sequence[ContextItem]) -> int:
    """The items' tokens: O(1) for a ``ContextList``."""
    if isinstance(items, ContextList):
        return items.tokens_total
    return sum(map(_TOKENS, items))


def visible_total(items: Sequence[ContextItem]) -> int:
    """The tokens of the items the model sees: O(1) for a ``ContextList``."""
    if isinstance(items, ContextList):
        return items.tokens_total - items.hidden_tokens
    return sum(item.tokens for item in items if item.message.visible)


def unchanged(
    action: Action, policy: str, items: Sequence[ContextItem], reason: str, **details: Any
) -> PolicyResult:
    """The result of a policy that decided not to act (every item kept: no changes)."""
    tokens = total(items)
    return PolicyResult(
        action=action,
        policy=policy,
        fired=False,
        reason=reason,
        items=list(items),
        changes=[],
        tokens_before=tokens,
        tokens_after=tokens,
        details=details,
    )


def admitted(
    action: Action,
    policy: str,
    item: ContextItem,
    message: Message,
    estimate: Estimate,
    *,
    reason: str,
    details: Mapping[str, Any],
    status: ItemStatus = ItemStatus.TRUNCATED,
    note: str = "",
) -> PolicyResult:
    """``admit``'s result: ``item`` enters the context as ``message`` (re-estimated)."""
    tokens = estimate(message)
    return PolicyResult(
        action=action,
        policy=policy,
        fired=True,
        reason=reason,
        items=[ContextItem(message, tokens, item.index)],
        changes=[ItemChange(item.id, status, item.tokens, tokens, note)],
        tokens_before=item.tokens,
        tokens_after=tokens,
        details=dict(details),
    )


def full_changes(before: Sequence[ContextItem], result: PolicyResult) -> list[ItemChange]:
    """One change per item of ``before`` in order (KEPT for those ``result`` does not list),
    then the changes of the items that were not in ``before`` (the added ones)."""
    listed: dict[str, list[ItemChange]] = {}
    for change in result.changes:
        listed.setdefault(change.id, []).append(change)
    out: list[ItemChange] = []
    for item in before:
        changes = listed.get(item.id)
        if changes:
            out.append(changes.pop(0))
        else:
            out.append(ItemChange(item.id, ItemStatus.KEPT, item.tokens, item.tokens))
    seen = {item.id for item in before}
    out.extend(c for c in result.changes if c.id not in seen)
    return out


# Policies write a message or a part for every output they cut and every summary: these are
# built from values that are valid already (a str, a member of the enum, the fields of a
# validated part), without validating them again; each is equal to the validated one, with the
# same fields set.
_PART_FIELDS: dict[str, Any] = {
    name: None if info.is_required() else info.default for name, info in Part.model_fields.items()
}
_MESSAGE_FIELDS: dict[str, Any] = {
    name: None if info.is_required() else info.default
    for name, info in Message.model_fields.items()
}
_TEXT_PART_SET = shared_set({"type", "text"})
_REPLACED_PART_SET = shared_set({"type", "text", "tool_name", "call_id"})
_SUMMARY_SET = shared_set({"id", "role", "kind", "parts"})


def text_part(text: str) -> Part:
    """``Part(type=PartType.TEXT, text=text)``."""
    if type(text) is not str:
        return Part(type=PartType.TEXT, text=text)
    part: Part = build(Part, {**_PART_FIELDS, "type": PartType.TEXT, "text": text}, _TEXT_PART_SET)
    return part


def replace_text(message: Message, text: str) -> Message:
    """The message with its content replaced by ``text`` (tool results stay tool results)."""
    first = message.parts[0] if message.parts else None
    part_type = first.type if first is not None else PartType.TEXT
    if part_type is not PartType.TEXT and part_type is not PartType.TOOL_RESULT:
        part_type = PartType.TEXT
    tool_name = first.tool_name if first is not None else None
    call_id = first.call_id if first is not None else None
    if type(message) is not Message or type(text) is not str:
        part = Part(type=part_type, text=text, tool_name=tool_name, call_id=call_id)
        return message.model_copy(update={"parts": (part,)})
    data = {**_PART_FIELDS, "type": part_type, "text": text}
    data["tool_name"], data["call_id"] = tool_name, call_id
    part = build(Part, data, _REPLACED_PART_SET)
    # ``model_copy(update={"parts": ...})``: the same values, "parts" among the fields set
    fields = message.__pydantic_fields_set__
    if "parts" not in fields:
        fields = shared_set(fields | {"parts"})
    copied: Message = build(Message, {**message.__dict__, "parts": (part,)}, fields)
    return copied


def summary_message(message_id: str, text: str, role: Role = Role.USER) -> Message:
    if type(message_id) is not str or type(role) is not Role:
        return Message(id=message_id, role=role, kind=MessageKind.SUMMARY, parts=(text_part(text),))
    data = {
        **_MESSAGE_FIELDS,
        "id": message_id,
        "role": role,
        "kind": MessageKind.SUMMARY,
        "parts": (text_part(text),),
    }
    message: Message = build(Message, data, _SUMMARY_SET)
    return message


class Policy(Protocol):
    """One agent's context management, as pure functions.

    ``admit`` runs when a tool output is about to enter the context (truncation, spill, drop)
    and returns None when the output enters as it is, else a result about that output alone;
    ``manage`` runs before each model request and returns what the agent does there, in order
    (an empty list when it does nothing); ``prune``, ``compact`` and ``truncate`` are the
    actions a user can trigger by hand (``force=True``) with this agent's algorithm. Replay
    also calls the optional ``after_request``, ``finish`` and ``undetermined`` of a policy that
    defines them (``ctx_inspect.core.replay``: ``AfterRequest``, ``LoopEnd``, ``Undetermined``).
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
