"""OpenAI Codex CLI (transcripts.md 2.3-2.4, and codex-rs 0.169): local auto-compaction.

- ``manage`` (before each request): auto-compaction when Codex's own figure **reaches**
  ``model_auto_compact_token_limit`` (the profile's threshold). Codex checks after a response
  that called tools, before sending the tools' outputs back (mid-turn), and before a new turn,
  before it records the user's message (pre-turn). Its figure (``get_total_token_usage``) is
  the last response's ``total_tokens`` plus its estimate (serialized bytes / 4) of the items
  added after the last item the model wrote: in replay, the profile's ``measure_basis()`` is
  "anchor" (the overhead item holds the reported total less the estimate of what it covered)
  and the estimator is Codex's, so the context's total is that figure, less the new user turn
  (the user's message and the context updates recorded with it), which Codex records only
  after its check. No compaction follows a refused request (``context_window_exceeded`` ends
  the turn in 0.169). The replacement
  history is the initial context (system / developer instructions, the ``# AGENTS.md
  instructions`` / ``<user_instructions>`` and ``<environment_context>`` messages, which Codex
  rebuilds), then the user's own messages, then one user message holding
  ``SUMMARY_PREFIX + "\\n" + summary``. Everything else (assistant messages, reasoning, tool
  calls and outputs, earlier summaries) goes into the summary.
- Which user messages: the reference is silent, so we follow Codex's source
  (``codex-rs/core/src/compact.rs``, ``build_compacted_history``): newest first within
  ``COMPACT_USER_MESSAGE_MAX_TOKENS`` (20,000) tokens counted as UTF-8 bytes / 4 rounded up;
  the message that does not fit is middle-truncated to the budget left and older ones are
  dropped. Only text survives (images are not carried over). Our truncation marker
  (``…N tokens truncated…``) approximates Codex's, whose format varies between versions.
- Codex does not prune, and its tool-output truncation (``truncation_policy``) is applied when
  outputs are recorded; neither the reference nor the profile covers it, so ``admit``,
  ``prune`` and ``truncate`` change nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctx_inspect.agents.codex.profile import CodexProfile
from ctx_inspect.core.model import Message, MessageKind, PartType, Role
from ctx_inspect.core.policies.base import (
    Action,
    ContextItem,
    Estimate,
    ItemStatus,
    Policy,
    PolicyResult,
    Summarizer,
    replace_text,
    summary_message,
    total,
    unchanged,
)
from ctx_inspect.core.policies.blocks import (
    Slot,
    content_text,
    fmt,
    is_system,
    is_user_turn,
    rebuild,
    require,
)
from ctx_inspect.core.profiles import Profile

NAME = "codex"
SUMMARY_PREFIX = (
    "Another language model started to solve this problem and produced a summary of its "
    "thinking process. You also have access to the state of the tools that were used by that "
    "language model. Use this to build on the work that has already been done and avoid "
    "duplicating work. Here is the summary produced by the other language model, use the "
    "information in this summary to  assist with your own analysis:"
)
COMPACT_USER_MESSAGE_MAX_TOKENS = 20_000  # compact.rs
APPROX_BYTES_PER_TOKEN = 4  # truncate.rs approx_token_count
SUMMARY_BUDGET_TOKENS = 4_096  # Codex sets no limit on the summary turn; ours
# User messages that carry context rather than the user's words (case-insensitive prefixes).
INITIAL_CONTEXT_PREFIXES = ("<environment_context>", "<user_instructions>", "# agents.md")
DROPPED_CONTEXT_PREFIXES = ("<turn_aborted>",)


def approx_tokens(text: str) -> int:
    return -(-len(text.encode("utf-8", "surrogatepass")) // APPROX_BYTES_PER_TOKEN)


def truncate_to(text: str, tokens: int) -> str:
    """``text`` cut in the middle to about ``tokens`` tokens (bytes / 4), on character
    boundaries, with the number of tokens removed in between."""
    data = text.encode("utf-8", "surrogatepass")
    budget = tokens * APPROX_BYTES_PER_TOKEN
    if len(data) <= budget:
        return text
    left = budget // 2
    right = budget - left
    head = data[:left].decode("utf-8", "ignore")
    tail = data[len(data) - right :].decode("utf-8", "ignore") if right else ""
    removed = len(data) - len(head.encode("utf-8")) - len(tail.encode("utf-8"))
    return f"{head}…{-(-removed // APPROX_BYTES_PER_TOKEN)} tokens truncated…{tail}"


def codex_figure(items: Sequence[ContextItem]) -> int:
    """What Codex compares with its limit before the next request: the items' total, less a
    user turn begun after the last item the model wrote (Codex checks before recording it)."""
    figure = total(items)
    last_model = max(
        (i for i, item in enumerate(items) if item.message.role is Role.ASSISTANT), default=-1
    )
    turn = None
    for i in range(len(items) - 1, last_model, -1):
        message = items[i].message
        if message.role is Role.USER and message.kind is MessageKind.MESSAGE:
            turn = i
            break
    if turn is None:
        return figure
    while turn - 1 > last_model and _context_update(items[turn - 1].message):
        turn -= 1
    return figure - sum(item.tokens for item in items[turn:])


def _context_update(message: Message) -> bool:
    """A message Codex records with a new turn: developer instructions, injected context."""
    return message.role is Role.DEVELOPER or (
        message.role is Role.USER and message.kind is MessageKind.ATTACHMENT
    )


def _starts(text: str, prefixes: tuple[str, ...]) -> bool:
    return text.lstrip().lower().startswith(prefixes)


def _role_of(message: Message) -> str:
    """How compaction treats a message: initial / user / drop / summarized."""
    if is_system(message):
        return "initial"
    if not is_user_turn(message):
        return "summarized"
    text = content_text(message)
    if _starts(text, INITIAL_CONTEXT_PREFIXES):
        return "initial"
    if (
        message.kind is MessageKind.SUMMARY
        or text.startswith(SUMMARY_PREFIX + "\n")
        or _starts(text, DROPPED_CONTEXT_PREFIXES)
    ):
        return "drop"
    return "user"


def select_user_messages(
    items: Sequence[ContextItem], positions: Sequence[int], budget: int
) -> list[tuple[int, str | None]]:
    """The user messages Codex carries over, oldest first: (position, truncated text or None)."""
    chosen: list[tuple[int, str | None]] = []
    remaining = budget
    for position in reversed(positions):
        if remaining <= 0:
            break
        text = content_text(items[position].message)
        tokens = approx_tokens(text)
        if tokens <= remaining:
            chosen.append((position, None))
            remaining -= tokens
        else:
            chosen.append((position, truncate_to(text, remaining)))
            break
    chosen.reverse()
    return chosen


class CodexPolicy:
    name = NAME

    def admit(
        self,
        item: ContextItem,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
    ) -> PolicyResult | None:
        require(profile, CodexProfile, NAME)
        return None

    def manage(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        summarizer: Summarizer,
    ) -> list[PolicyResult]:
        codex = require(profile, CodexProfile, NAME)
        figure = codex_figure(items)
        if not codex.over_threshold(figure):
            return []
        return [self._compact(items, codex, estimate, summarizer, auto=True, figure=figure)]

    def prune(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        *,
        force: bool = False,
    ) -> PolicyResult:
        require(profile, CodexProfile, NAME)
        return unchanged(
            Action.PRUNE, NAME, items, "Codex does not prune; compaction drops tool outputs"
        )

    def compact(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        summarizer: Summarizer,
        *,
        force: bool = False,
    ) -> PolicyResult:
        """Forced: ``/compact``. Otherwise only at the auto-compact limit."""
        codex = require(profile, CodexProfile, NAME)
        figure = codex_figure(items)
        if not force and not codex.over_threshold(figure):
            return unchanged(
                Action.COMPACT,
                NAME,
                items,
                f"{fmt(figure)} < auto-compact limit {fmt(codex.threshold())}",
                threshold=codex.threshold(),
            )
        return self._compact(items, codex, estimate, summarizer, auto=not force, figure=figure)

    def truncate(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        *,
        force: bool = False,
    ) -> PolicyResult:
        require(profile, CodexProfile, NAME)
        return unchanged(
            Action.TRUNCATE, NAME, items, "Codex's tool-output truncation is not modelled"
        )

    def _compact(
        self,
        items: Sequence[ContextItem],
        codex: CodexProfile,
        estimate: Estimate,
        summarizer: Summarizer,
        *,
        auto: bool,
        figure: int,
    ) -> PolicyResult:
        tokens = total(items)
        kinds = [_role_of(item.message) for item in items]
        initial = [i for i, kind in enumerate(kinds) if kind == "initial"]
        users = [i for i, kind in enumerate(kinds) if kind == "user"]
        chosen = select_user_messages(items, users, COMPACT_USER_MESSAGE_MAX_TOKENS)
        details: dict[str, Any] = {
            "trigger": "auto" if auto else "manual",
            "figure": figure,
            "threshold": codex.threshold(),
            "user_messages": len(users),
            "user_messages_kept": len(chosen),
            "user_budget": COMPACT_USER_MESSAGE_MAX_TOKENS,
            "summary_budget": SUMMARY_BUDGET_TOKENS,
        }
        summarized = [i for i, kind in enumerate(kinds) if kind != "initial"]
        if not summarized:
            return unchanged(Action.COMPACT, NAME, items, "nothing to compact", **details)
        summary = summarizer.summarize(
            [items[i].message for i in summarized], SUMMARY_BUDGET_TOKENS
        )
        slots: list[Slot] = list(initial)
        notes: dict[int, str] = {}
        for position, cut in chosen:
            message = items[position].message
            text_only = all(p.type is PartType.TEXT for p in message.parts)
            if cut is not None:
                slots.append((position, replace_text(message, cut)))
                notes[position] = "over the 20,000-token budget: truncated"
            elif text_only and len(message.parts) <= 1:
                slots.append(position)
            else:
                slots.append((position, replace_text(message, content_text(message))))
                notes[position] = "carried over as text only"
        for position in users:
            if position not in {p for p, _ in chosen}:
                notes[position] = "older than the user-message budget"
        anchor = items[summarized[-1]].id
        slots.append(summary_message(f"{anchor}:codex-summary", f"{SUMMARY_PREFIX}\n{summary}"))
        result = rebuild(
            Action.COMPACT,
            NAME,
            items,
            slots,
            estimate,
            reason="",
            details=details,
            modified=ItemStatus.TRUNCATED,
            notes=notes,
        )
        trigger = (
            f"{fmt(figure)} ≥ auto-compact limit {fmt(codex.threshold())}" if auto else "/compact"
        )
        result.reason = (
            f"{trigger}: kept the initial context and {len(chosen)} of {len(users)} user "
            f"messages, summarised the rest: {fmt(tokens)} -> {fmt(result.tokens_after)} tokens"
        )
        return result


POLICY: Policy = CodexPolicy()
