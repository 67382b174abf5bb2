"""When the Go agent compacts, and where it cuts (``pkg/compact/compact.go``,
``pkg/session/compaction.go``).

The estimate (``EstimateContextTokens``) is the provider-reported usage of the last visible
assistant message plus the agent's heuristic for the messages after it. A response's item
carries that figure (``ContextItem.reported``; replay gives the replayed request's figure plus
its output), else ``reported`` (message id → the provider's total, or input + output + cache
read + cache write) gives it; without either the estimate is the heuristic over every visible
message, the agent's own fallback. At a turn's end a new prompt is not counted: the agent adds
it after its decision (``ShouldCompact``: the estimate against the effective limit, else the
message count against ``max_messages``).

The agent keeps its system prompt outside its message list: leading system and developer
items are neither counted, nor split, nor summarized here; they stay first.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, overload

from ctx_inspect.agents.goagent.profile import NAME, GoAgentProfile
from ctx_inspect.core.model import MessageKind, Role
from ctx_inspect.core.policies.base import ContextItem, ContextList, visible_total

# keepRecentMessages: a KeepRecent of 0 or less means the default, the profile's own default.
DEFAULT_KEEP_RECENT: int = GoAgentProfile.model_fields["keep_recent"].default

_PROMPT_ROLES = (Role.SYSTEM, Role.DEVELOPER)


def prompt_length(items: Sequence[ContextItem]) -> int:
    """How many leading system prompt items ``items`` has."""
    n = 0
    while n < len(items) and items[n].message.role in _PROMPT_ROLES:
        n += 1
    return n


def _figure_of(item: ContextItem, reported: Mapping[str, int] | None) -> int:
    """The provider's figure for a model response (the item's own, else from ``reported``)."""
    if item.reported is not None:
        return item.reported
    return reported.get(item.message.id, 0) if reported else 0


def context_tokens(
    messages: Sequence[ContextItem], reported: Mapping[str, int] | None = None
) -> tuple[int, str, str | None]:
    """``EstimateContextTokens``: (tokens, "reported" or "estimated", the anchor message id).

    The anchor is the last visible assistant message with a positive reported figure (its
    item's ``reported``, else ``reported[id]``); the messages after it add their heuristic
    estimate (hidden ones count 0). Without one, the heuristic over every visible message.
    """
    for i in range(len(messages) - 1, -1, -1):
        item = messages[i]
        message = item.message
        if not message.visible or message.role is not Role.ASSISTANT:
            continue
        usage = _figure_of(item, reported)
        if usage > 0:
            trailing = sum(m.tokens for m in messages[i + 1 :] if m.message.visible)
            return usage + trailing, "reported", message.id
    return sum([m.tokens for m in messages if m.message.visible]), "estimated", None


class Limits(NamedTuple):
    """What a profile derives for the trigger and the split (each call builds its window)."""

    active: bool  # has_threshold()
    threshold: int
    source: str  # limit_source()
    keep_recent_tokens: int  # effective_keep_recent_tokens()


# by profile (a profile is frozen: what it derives does not change); replay asks every request
_LIMITS: dict[int, tuple[GoAgentProfile, Limits]] = {}


def derived_limits(profile: GoAgentProfile) -> Limits:
    found = _LIMITS.get(id(profile))
    if found is not None and found[0] is profile:
        return found[1]
    limits = Limits(
        profile.has_threshold(),
        profile.threshold(),
        profile.limit_source(),
        profile.effective_keep_recent_tokens(),
    )
    if len(_LIMITS) >= 64:
        _LIMITS.clear()
    _LIMITS[id(profile)] = (profile, limits)
    return limits


class Trigger(NamedTuple):
    """``ShouldCompact`` on a context: its leading prompt items, the estimate and the verdict."""

    prompt: int  # how many leading system prompt items the context has
    messages: int  # how many items follow them (the agent's message list)
    tokens: int
    origin: str  # "reported" or "estimated"
    anchor: str | None
    fires: bool
    incoming: int = 0  # trailing user messages of a prompt that started after the decision


def _fires(messages: int, tokens: int, profile: GoAgentProfile) -> bool:
    """Tokens ≥ the effective limit, else the message count ≥ ``max_messages`` when there is
    no token limit; never when auto-compaction is off."""
    if not profile.auto_compact:
        return False
    limits = derived_limits(profile)
    if limits.active:
        return tokens >= limits.threshold
    return profile.max_messages > 0 and messages >= profile.max_messages


def trigger_figures(
    messages: int, tokens: int, origin: str, anchor: str | None, profile: GoAgentProfile
) -> dict[str, Any]:
    limits = derived_limits(profile)
    details: dict[str, Any] = {
        "context_tokens": tokens,
        "tokens_origin": origin,
        "usage_anchor": anchor,
        "limit_source": limits.source,
        "messages": messages,
        "auto_compact": profile.auto_compact,
    }
    if limits.active:
        details["limit"] = limits.threshold
    else:
        details["limit"] = None
        details["max_messages"] = profile.max_messages
    return details


_NO_ANCHOR = "goagent:no-usage-before"  # a ContextList mark: no response figure before it


def new_prompt_length(items: Sequence[ContextItem], start: int = 0) -> int:
    """The trailing user messages (from ``start`` on): a new prompt, which the agent adds to
    its list after its turn-end decision (the decision a request's build-up stands for)."""
    n = 0
    while n < len(items) - start:
        message = items[len(items) - 1 - n].message
        if message.role is not Role.USER or message.kind is not MessageKind.MESSAGE:
            break
        n += 1
    return n


def _anchor_at(
    items: Sequence[ContextItem], prompt: int, end: int, reported: Mapping[str, int] | None
) -> tuple[int, int] | None:
    """(position, figure) of the last visible response with a figure before ``end``. On a
    ``ContextList`` the part already searched in vain is marked, not searched again."""
    mark = items.marked(_NO_ANCHOR) if isinstance(items, ContextList) else None
    stop = max(prompt, mark[0]) if mark is not None else prompt
    for i in range(end - 1, stop - 1, -1):
        item = items[i]
        message = item.message
        if message.visible and message.role is Role.ASSISTANT:
            usage = _figure_of(item, reported)
            if usage > 0:
                return i, usage
    if isinstance(items, ContextList) and not reported:
        items.mark(_NO_ANCHOR, end)
    return None


def trigger_of(
    items: Sequence[ContextItem],
    profile: GoAgentProfile,
    reported: Mapping[str, int] | None,
    *,
    turn_end: bool = False,
) -> Trigger:
    """``ShouldCompact`` on ``items``. ``turn_end``: as the agent evaluates it when a turn
    ends, before the request ``items`` stand for: a new prompt at their end is left out."""
    prompt = prompt_length(items)
    incoming = new_prompt_length(items, prompt) if turn_end else 0
    end = len(items) - incoming
    count = end - prompt
    anchor = _anchor_at(items, prompt, end, reported)
    if anchor is not None:
        position, usage = anchor
        trailing = sum([m.tokens for m in items[position + 1 : end] if m.message.visible])
        tokens, origin, anchor_id = usage + trailing, "reported", items[position].message.id
    else:
        # the heuristic over the visible messages: the context's visible total (kept up to
        # date by a ``ContextList``) less the prompt's and the new prompt's
        outside = [*items[:prompt], *items[end:]]
        tokens = visible_total(items) - sum([i.tokens for i in outside if i.message.visible])
        origin, anchor_id = "estimated", None
    return Trigger(
        prompt, count, tokens, origin, anchor_id, _fires(count, tokens, profile), incoming
    )


def should_compact(
    messages: Sequence[ContextItem],
    profile: GoAgentProfile,
    reported: Mapping[str, int] | None = None,
) -> tuple[bool, dict[str, Any]]:
    """``ShouldCompact`` and its figures: tokens ≥ the effective limit, else the message count
    ≥ ``max_messages`` when there is no token limit."""
    tokens, origin, anchor = context_tokens(messages, reported)
    figures = trigger_figures(len(messages), tokens, origin, anchor, profile)
    return _fires(len(messages), tokens, profile), figures


_SUMMARY_KEPT = re.compile(rf"^{NAME}:summary:(\d+):")


class Window(Sequence[ContextItem]):
    """``items[start:end]`` without the copy (read from the end, mostly)."""

    def __init__(self, items: Sequence[ContextItem], start: int, end: int) -> None:
        self._items, self._start, self._len = items, start, max(0, end - start)

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> ContextItem: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[ContextItem]: ...

    def __getitem__(self, index: int | slice) -> ContextItem | Sequence[ContextItem]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._len))]
        if not 0 <= index < self._len:
            raise IndexError(index)
        return self._items[self._start + index]


_PART = "goagent:part"  # a ContextList mark: the part after the latest compaction, as read


class SessionPart(NamedTuple):
    """The session's part of the agent's list after its latest compaction."""

    first: int  # where it starts in the items
    users: list[int]  # where its user messages are (a compaction can cut only there)


def part_of(items: Sequence[ContextItem], start: int, end: int) -> SessionPart:
    """The part of ``items[start:end]`` after the latest summary and the messages that
    compaction kept (a summary this policy wrote names how many; one read from a recording is
    taken to keep none), and its user messages. On a context list what was read is marked, and
    only what came after it is read again."""
    head = int(items.has_head) if isinstance(items, ContextList) else 0
    summary, kept, users, upto = -1, 0, [], start
    mark = items.marked(_PART) if isinstance(items, ContextList) else None
    if mark is not None and mark[1][0] + head <= end:
        upto, summary, kept, users = mark[1]
        upto += head
        summary = summary + head if summary >= 0 else -1
        users = [u + head for u in users]
    for i in range(upto, end):
        message = items[i].message
        if message.kind is MessageKind.SUMMARY:
            found = _SUMMARY_KEPT.match(message.id)
            summary, kept, users = i, int(found[1]) if found else 0, []
        elif message.role is Role.USER:
            users.append(i)
    first = min(end, summary + 1 + kept) if summary >= 0 else start
    if isinstance(items, ContextList):
        # kept while what is replaced comes after the summary (outputs archived in place)
        at = summary + 1 if summary >= 0 else start
        data = (end - head, summary - head if summary >= 0 else -1, kept, [u - head for u in users])
        items.mark(_PART, at, data)
    return SessionPart(first, [u for u in users if u >= first])


def first_kept(
    part: Sequence[ContextItem], users: Sequence[int], keep_tokens: int, profile: GoAgentProfile
) -> int:
    """``findFirstKeptIndex``: walk back from the newest message until the kept estimates
    reach ``keep_tokens`` (or keep the newest ``keep_recent`` messages when it is 0), then
    back to a user message (``users``: their positions in ``part``); 0 when that is the part's
    first message (nothing to compact)."""
    if keep_tokens <= 0:
        keep = profile.keep_recent if profile.keep_recent > 0 else DEFAULT_KEEP_RECENT
        if len(part) <= keep:
            return 0
        cut = len(part) - keep
    else:
        used = 0
        cut = len(part)
        for i in range(len(part) - 1, -1, -1):
            used += part[i].tokens if part[i].message.visible else 0
            cut = i
            if used >= keep_tokens:
                break
        if cut <= 0 or cut >= len(part):
            return 0
    at = bisect_right(users, cut) - 1
    return users[at] if at >= 0 else 0


def recoveries_in_prompt(items: Sequence[ContextItem]) -> int:
    """How many recoveries the loop made since the prompt began (summaries it wrote after
    the latest user message)."""
    count = 0
    for i in range(len(items) - 1, -1, -1):
        message = items[i].message
        if message.role is Role.USER and message.kind is MessageKind.MESSAGE:
            break
        if message.kind is MessageKind.SUMMARY and ":recovery:" in message.id:
            count += 1
    return count


def split_by_token_budget(tokens: Sequence[int], budget: int) -> int:
    """``splitMessagesByTokenBudget``: the index where the recent messages start.

    Walks back from the newest message adding each estimate until the next would pass the
    budget; the newest message is always kept, even alone over the budget. 0 means every
    message is recent (nothing to summarize).
    """
    n = len(tokens)
    if n == 0:
        return 0
    if budget <= 0:
        return n - 1
    used = 0
    start = n
    for i in range(n - 1, -1, -1):
        if used + tokens[i] > budget and start != n:
            break
        used += tokens[i]
        start = i
    return max(start, 0)
