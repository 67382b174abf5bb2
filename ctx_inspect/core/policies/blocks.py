"""The small building blocks the agents' policies share: the profile a policy needs, how a
figure is printed in reasons, what a tool output, a user turn and a system message are, clearing
tool outputs, and laying out the result of a policy (``rebuild``, ``in_place``, ``chain``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from ctx_inspect.core.model import Message, MessageKind, Part, PartType, Role
from ctx_inspect.core.policies.base import (
    Action,
    ContextItem,
    ContextList,
    Estimate,
    ItemChange,
    ItemStatus,
    PolicyResult,
    replace_text,
    total,
)
from ctx_inspect.core.profiles import Profile
from ctx_inspect.errors import ConfigError

CLEARED_MARKER = "[Old tool result content cleared]"  # OpenCode, BaseAgent, Claude Code

_CONTENT_PARTS = frozenset({PartType.TEXT, PartType.TOOL_RESULT, PartType.ATTACHMENT})

P = TypeVar("P", bound=Profile)


def require(profile: Profile, cls: type[P], policy: str) -> P:
    """``profile`` as the profile class the policy reads its settings from."""
    if not isinstance(profile, cls):
        raise ConfigError(
            "Profile mismatch",
            f"the {policy} policy needs a {policy} profile, got {profile.agent!r}",
        )
    return profile


def fmt(n: int) -> str:
    """A token figure as we print it in reasons: ``18,200``."""
    return f"{n:,}"


def is_tool_output(message: Message) -> bool:
    """A tool result: an OpenAI ``tool`` message or an Anthropic user message of tool results."""
    return message.role is Role.TOOL or message.kind is MessageKind.TOOL_RESULT


def is_user_turn(message: Message) -> bool:
    """A user message the model sees that is not a carrier of tool results (a META stand-in,
    such as replay's "context the log does not show", is not a turn)."""
    return (
        message.role is Role.USER
        and message.kind is not MessageKind.META
        and not is_tool_output(message)
    )


def is_system(message: Message) -> bool:
    return message.role in (Role.SYSTEM, Role.DEVELOPER)


def content_text(message: Message) -> str:
    """The message's content as one string (text, tool-result and attachment parts)."""
    return "\n".join(p.text for p in message.parts if p.type in _CONTENT_PARTS)


def clear_parts(message: Message, part_indices: Iterable[int], marker: str) -> Message:
    """The message with the given tool-result parts' text replaced by ``marker``.

    Images that belong to a cleared result (same ``call_id``) are dropped with it, as OpenCode
    drops a compacted part's attachments and Claude Code replaces the whole result content.
    """
    chosen = set(part_indices)
    dropped_calls = {
        message.parts[i].call_id for i in chosen if message.parts[i].call_id is not None
    }
    parts: list[Part] = []
    for i, part in enumerate(message.parts):
        if i in chosen:
            parts.append(part.model_copy(update={"text": marker}))
        elif part.type is PartType.IMAGE and part.call_id in dropped_calls:
            continue
        else:
            parts.append(part)
    return message.model_copy(update={"parts": tuple(parts)})


def clear_output(message: Message, marker: str) -> Message:
    """A tool output with every result replaced by ``marker`` (one per call it answers)."""
    indices = [i for i, p in enumerate(message.parts) if p.type is PartType.TOOL_RESULT]
    if not indices:
        return replace_text(message, marker)
    return clear_parts(message, indices, marker)


def is_cleared(message: Message, marker: str) -> bool:
    """Whether ``clear_output(message, marker)`` would change nothing."""
    results = [p for p in message.parts if p.type is PartType.TOOL_RESULT]
    if results:
        return all(p.text == marker for p in results)
    return content_text(message) == marker


# A slot of a rebuilt context: an original item kept as is (its position in ``items``), an
# original item replaced by a new message (position, message), or a message the policy adds.
Slot = int | tuple[int, Message] | Message


def rebuild(
    action: Action,
    policy: str,
    items: Sequence[ContextItem],
    slots: Sequence[Slot],
    estimate: Estimate,
    *,
    reason: str,
    details: Mapping[str, Any],
    modified: ItemStatus = ItemStatus.PRUNED,
    removed: ItemStatus = ItemStatus.SUMMARIZED,
    notes: Mapping[int, str] | None = None,
    fired: bool | None = None,
) -> PolicyResult:
    """The result of a policy that lays out a new context from ``slots``.

    Originals left out of ``slots`` get ``removed``; replaced ones get ``modified`` and are
    re-estimated with the agent's own rule, as are added messages. Changes come for the
    originals that were not kept as they were, in order, then one per added message in slot
    order (``notes`` annotate them; a kept original has no change, so no note).
    """
    notes = notes or {}
    new_items: list[ContextItem] = []
    replaced: dict[int, ContextItem] = {}
    kept: set[int] = set()
    added: list[ContextItem] = []
    for slot in slots:
        if isinstance(slot, int):
            item = items[slot]
            kept.add(slot)
        elif isinstance(slot, tuple):
            position, message = slot
            original = items[position]
            item = ContextItem(message, estimate(message), original.index)
            replaced[position] = item
        else:
            item = ContextItem(slot, estimate(slot), None)
            added.append(item)
        new_items.append(item)
    changes: list[ItemChange] = []
    for position, item in enumerate(items):
        if position in replaced:
            after = replaced[position].tokens
            note = notes.get(position, "")
            changes.append(ItemChange(item.id, modified, item.tokens, after, note))
        elif position not in kept:
            changes.append(ItemChange(item.id, removed, item.tokens, 0, notes.get(position, "")))
    changes.extend(ItemChange(a.id, ItemStatus.ADDED, 0, a.tokens) for a in added)
    laid_out = ContextList(new_items)
    return PolicyResult(
        action=action,
        policy=policy,
        fired=bool(changes) if fired is None else fired,
        reason=reason,
        items=laid_out,
        changes=changes,
        tokens_before=total(items),
        tokens_after=laid_out.tokens_total,
        details=dict(details),
    )


def in_place(
    action: Action,
    policy: str,
    items: Sequence[ContextItem],
    replacements: Mapping[int, Message],
    estimate: Estimate,
    *,
    reason: str,
    details: Mapping[str, Any],
    status: ItemStatus = ItemStatus.PRUNED,
) -> PolicyResult:
    """The result of a policy that edits some items where they are (prune, truncate).

    The new items are a ``ContextList`` like ``items`` when ``items`` is one (its head and
    the marks before the first edit kept), else a list."""
    edited: dict[int, ContextItem] = {}
    changes: list[ItemChange] = []
    for position in sorted(replacements):
        original = items[position]
        message = replacements[position]
        item = ContextItem(message, estimate(message), original.index)
        edited[position] = item
        changes.append(ItemChange(original.id, status, original.tokens, item.tokens))
    new_items: list[ContextItem]
    if isinstance(items, ContextList):
        new_items = items.replaced(edited)
    else:
        new_items = list(items)
        for position, item in edited.items():
            new_items[position] = item
    before = total(items)
    return PolicyResult(
        action=action,
        policy=policy,
        fired=bool(changes),
        reason=reason,
        items=new_items,
        changes=changes,
        tokens_before=before,
        tokens_after=before + sum(c.tokens_after - c.tokens_before for c in changes),
        details=dict(details),
    )


def chain(
    first: PolicyResult,
    second: PolicyResult,
    *,
    action: Action,
    reason: str,
    details: Mapping[str, Any],
) -> PolicyResult:
    """One result for two steps, the first of which edited items in place (a prune before a
    compaction): each original item gets the second step's fate, or the first's if the second
    kept it."""
    positions = {item.id: p for p, item in enumerate(first.items)}
    if any(c.status is ItemStatus.ADDED or c.id not in positions for c in first.changes):
        raise ValueError("chain() needs a first step that edits items in place")
    firsts = {c.id: c for c in first.changes}
    seconds = {c.id: c for c in second.changes}
    changes: list[ItemChange] = []
    for item in first.items:
        change, then = firsts.get(item.id), seconds.get(item.id)
        if then is not None and then.status is ItemStatus.KEPT:
            then = None
        if change is None and then is None:
            continue  # kept by both
        status = then.status if then is not None else ItemStatus.KEPT
        if then is None and change is not None:
            status = change.status
        tokens_before = change.tokens_before if change is not None else item.tokens
        tokens_after = then.tokens_after if then is not None else item.tokens
        note = (then.note if then is not None else "") or (change.note if change else "")
        changes.append(ItemChange(item.id, status, tokens_before, tokens_after, note))
    changes.extend(c for c in second.changes if c.id not in positions)
    return PolicyResult(
        action=action,
        policy=second.policy,
        fired=first.fired or second.fired,
        reason=reason,
        items=list(second.items),
        changes=changes,
        tokens_before=first.tokens_before,
        tokens_after=second.tokens_after,
        details=dict(details),
    )
