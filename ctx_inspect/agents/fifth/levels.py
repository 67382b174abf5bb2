"""Fifth's levels, the age of a message and its capacity, as its policy reads them.

A message's level is the one Fifth stores it at (system 1, user and assistant 3, tool output 4;
a summary keeps its own, named ``fifth level <N>``); the total counts levels 1 to 3. "Now" is
the time of the latest message in the context, never the clock. The README's priority score,
which Fifth does not implement, is here too (``priority_score``), for ``compact(order=
"priority")``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import UTC, datetime

from ctx_inspect.agents.fifth.profile import FifthProfile
from ctx_inspect.core.model import Message, MessageKind, PartType
from ctx_inspect.core.policies.base import ContextItem

SUMMARY_NAME = "fifth level {level}"  # our summaries carry their level in ``Message.name``
TOOL_LEVEL = 4
# The README's weights for recency, references, task relevance and the explicit mark.
PRIORITY_WEIGHTS: tuple[float, float, float, float] = (0.3, 0.2, 0.4, 0.1)
_SUMMARY_NAME = re.compile(r"^fifth level (\d+)$")
_WORD = re.compile(r"[\w./~-]{4,}")
_STOPWORD_LIST = (
    "that this with from have been were will would there their about which into then than "
    "also just like what when where your they them some more only very"
)
_STOPWORDS = frozenset(_STOPWORD_LIST.split())


# --------------------------------------------------------------------------------------------
# Levels, time and capacity


def level_of(message: Message, profile: FifthProfile) -> int:
    """The level Fifth stores ``message`` at: our summaries keep theirs, tool output is 4."""
    if message.kind is MessageKind.SUMMARY and message.name:
        match = _SUMMARY_NAME.match(message.name)
        if match:
            return int(match.group(1))
    if message.kind is MessageKind.TOOL_RESULT or any(
        p.type is PartType.TOOL_RESULT for p in message.parts
    ):
        return TOOL_LEVEL  # ctx-add-tool, whatever role the transcript gave it
    return profile.level_for_role(message.role.value)


def parse_time(value: str | None) -> datetime | None:
    """An ISO 8601 timestamp (or epoch seconds / milliseconds) as an aware UTC datetime."""
    if not value:
        return None
    text = value.strip()
    try:
        if re.fullmatch(r"\d+(\.\d+)?", text):
            number = float(text)
            return datetime.fromtimestamp(number / 1000 if number > 1e11 else number, UTC)
        parsed = datetime.fromisoformat(text)
    except (ValueError, OverflowError, OSError):
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def latest_time(items: Sequence[ContextItem]) -> datetime | None:
    """ "Now" for a decision: the time of the latest message in the context."""
    times = [t for t in (parse_time(i.message.timestamp) for i in items) if t is not None]
    return max(times) if times else None


def age_minutes(message: Message, now: datetime | None) -> int | None:
    """Whole minutes of age, truncated like SQLite's ``CAST(... AS INTEGER)``; None if unknown."""
    created = parse_time(message.timestamp)
    if created is None or now is None:
        return None
    return math.trunc((now - created).total_seconds() / 60)


def is_old(message: Message, now: datetime | None, profile: FifthProfile) -> bool:
    """Eligible for compression: whole minutes of age > ``age_threshold_seconds / 60``."""
    minutes = age_minutes(message, now)
    return minutes is None or minutes > profile.age_threshold_seconds // 60


def level_tokens(items: Sequence[ContextItem], profile: FifthProfile) -> dict[int, int]:
    sums = {1: 0, 2: 0, 3: 0, TOOL_LEVEL: 0}
    for item in items:
        level = level_of(item.message, profile)
        sums[level] = sums.get(level, 0) + item.tokens
    return sums


def counted_tokens(items: Sequence[ContextItem], profile: FifthProfile) -> int:
    """``ctx-total-tokens``: levels 1-3 only, messages and summaries."""
    return sum(i.tokens for i in items if level_of(i.message, profile) in profile.COUNTED_LEVELS)


def over_trigger(tokens: int, profile: FifthProfile) -> bool:
    return profile.capacity(tokens) > profile.capacity_trigger


# --------------------------------------------------------------------------------------------
# The design document's priority score (not in Fifth's code)


def recency_score(message: Message, now: datetime | None) -> int:
    """Fifth's own ``ctx-recency-score``, ``100 / (1 + minutes)`` in integers. Nothing calls it."""
    minutes = age_minutes(message, now)
    return 100 // (1 + max(0, minutes)) if minutes is not None else 0


def _terms(text: str) -> list[str]:
    return [
        w
        for w in (m.group().lower().strip("./-~") for m in _WORD.finditer(text))
        if len(w) >= 4 and w not in _STOPWORDS
    ]


def priority_score(
    message: Message,
    now: datetime | None,
    *,
    later: Sequence[Message] = (),
    task: str | None = None,
    explicit: bool = False,
    weights: tuple[float, float, float, float] = PRIORITY_WEIGHTS,
) -> float:
    """The README's ``w1·Recency + w2·References + w3·TaskRelevance + w4·Explicit``.

    - Recency is ``1 / (1 + minutes since created)`` (fractional minutes; 0 when the age is
      unknown);
    - References is ``mentions later / all mentions`` of the message's words (four letters or
      more, paths included) in ``later``;
    - TaskRelevance stands in for the README's semantic similarity, which needs embeddings: the
      overlap (Jaccard) of the message's words with ``task``'s;
    - Explicit is 1 when the message was marked important.

    Fifth does not implement this score; see the module docstring.
    """
    w_recency, w_references, w_relevance, w_explicit = weights
    created = parse_time(message.timestamp)
    recency = 0.0
    if created is not None and now is not None:
        minutes = max(0.0, (now - created).total_seconds() / 60)
        recency = 1 / (1 + minutes)
    own = _terms(message.text)
    vocabulary = set(own)
    references = 0.0
    if vocabulary:
        mentioned = sum(1 for m in later for w in _terms(m.text) if w in vocabulary)
        references = mentioned / (len(own) + mentioned)
    relevance = 0.0
    if task and vocabulary:
        wanted = set(_terms(task))
        union = vocabulary | wanted
        relevance = len(vocabulary & wanted) / len(union) if union else 0.0
    return (
        w_recency * recency
        + w_references * references
        + w_relevance * relevance
        + w_explicit * (1.0 if explicit else 0.0)
    )
