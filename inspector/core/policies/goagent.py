"""tiancaiamao/ai, the Go agent (seed 003, commit 7bc6f19): compaction and tool-output limits.

- ``admit``: ``truncateToolContent``. An output of more than ``tool_output_large_threshold``
  runes is spilled to a file and replaced by a notice; the spill is **simulated**: the notice
  names a path that is never written. Otherwise the output is cut by lines (head and tail with
  ``... [truncated N lines] ...`` in ``head_tail`` mode), then runes, then bytes, and the
  ``[tool output truncated: showing ...]`` notice is appended.
- ``manage``: what happens between a turn's tool executions and the next request, in order:
  the per-turn tool-result summaries (``maybeSummarizeToolResults``: while more visible tool
  results than ``tool_call_cutoff`` remain, the oldest is archived and a
  ``[Tool output summary]`` message is appended), reported as a PRUNE; then auto-compaction
  (``tryAutoCompact``) when the estimate reaches the effective limit, reported as a COMPACT.
- ``prune``: the tool-result summaries alone, with the heuristic summary (no summarizer is
  given to ``prune``; the agent uses the same text when its LLM summary fails). With
  ``force`` it runs even when the strategy is ``off``.
- ``compact``: ``Compactor.Compact``. Without ``force`` only when ``ShouldCompact`` holds;
  with ``force`` as the agent's recovery path (a context-length error) and its ``compact``
  command do, whatever the estimate.
- ``truncate``: the tool-output limits applied to every tool result in context.

The estimate (``EstimateContextTokens``) is the provider-reported usage of the last visible
assistant message plus the agent's heuristic for the messages after it. Messages carry no
usage here: pass ``reported`` (message id → the provider's total, or input + output + cache
read + cache write) to ``manage`` and ``compact``; without it the estimate is the heuristic
over every visible message, the agent's own fallback.

The agent keeps its system prompt outside its message list: leading system and developer
items are neither counted, nor split, nor summarized here; they stay first.

Our ``Message`` has no ``userVisible`` flag: summaries and digests the agent marks
``userVisible=false`` are added as ordinary visible messages of kind ``tool_summary``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from inspector.core.estimate import utf8_len
from inspector.core.model import Message, MessageKind, Part, PartType, Role
from inspector.core.policies.base import (
    Action,
    ContextItem,
    Estimate,
    ItemChange,
    ItemStatus,
    PolicyResult,
    Summarizer,
    admitted,
    replace_text,
    summary_message,
    total,
    unchanged,
    visible_total,
)
from inspector.core.profiles import GoAgentProfile, Profile
from inspector.errors import ConfigError, InspectorError

NAME = "goagent"
SUMMARY_PREFIX = "[Previous conversation summary]\n\n"
DIGEST_HEADER = "[Compaction tool digest]"
TOOL_SUMMARY_HEADER = "[Tool output summary]"
DIGEST_LINE_RUNES = 200  # compactionToolDigestLine: trimRunes(text, 200)
TRUNCATED_MIDDLE = "\n... (truncated) ...\n"  # trimTextWithTail
EMPTY_OUTPUT = "(empty output)"
SUMMARY_BUDGET_TOKENS = 800  # the compaction prompt asks to "Keep under 800 tokens"
SPILL_PATH = "$TMPDIR/ai_tool_outputs/tool_output_<unix-ns>.txt (simulated: not written)"
# keepRecentMessages: a KeepRecent of 0 or less means the default, the profile's own default.
DEFAULT_KEEP_RECENT: int = GoAgentProfile.model_fields["keep_recent"].default

_OUTPUT_PARTS = (PartType.TEXT, PartType.TOOL_RESULT)
_PROMPT_ROLES = (Role.SYSTEM, Role.DEVELOPER)


# ------------------------------------------------------------------------------------------
# Text helpers (Go semantics: a rune is a Python code point)


def trim_runes(text: str, limit: int) -> str:
    """``trimRunes``: the first ``limit`` runes."""
    if limit <= 0 or len(text) <= limit:
        return text
    return text[:limit]


def trim_with_tail(text: str, limit: int) -> str:
    """``trimTextWithTail``: two thirds from the head, the rest from the tail."""
    if limit <= 0 or len(text) <= limit:
        return text
    head = max(1, limit * 2 // 3)
    tail = max(1, limit - limit * 2 // 3)
    return text[:head] + TRUNCATED_MIDDLE + text[len(text) - tail :]


def _go_text(message: Message) -> str:
    """``extractText``: the text blocks concatenated, no separator."""
    parts = message.parts
    if len(parts) == 1:  # most tool results: one block, nothing to join
        part = parts[0]
        if part.type in _OUTPUT_PARTS and part.text:
            return part.text
    joined = "".join(p.text for p in parts if p.type in _OUTPUT_PARTS and p.text)
    return joined or message.text


def _go_quote(text: str) -> str:
    """Go's ``%q`` for ordinary tool names."""
    out = ['"']
    for ch in text:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _fmt(n: int) -> str:
    return f"{n:,}"


def _profile(profile: Profile) -> GoAgentProfile:
    if not isinstance(profile, GoAgentProfile):
        raise ConfigError(
            "profile mismatch",
            f"the goagent policy needs the goagent profile, not {profile.name!r}",
        )
    return profile


_TOOL = Role.TOOL
_TOOL_RESULT = MessageKind.TOOL_RESULT


def _is_tool_result(message: Message) -> bool:
    return message.role is _TOOL or message.kind is _TOOL_RESULT


def _is_error(message: Message) -> bool:
    return any(p.is_error for p in message.parts)


def _call_id(message: Message) -> str:
    for part in message.parts:
        if part.call_id:
            return part.call_id
    return ""


def _status(message: Message) -> str:
    return "error" if _is_error(message) else "ok"


def _prompt_length(items: Sequence[ContextItem]) -> int:
    """How many leading system prompt items ``items`` has."""
    n = 0
    while n < len(items) and items[n].message.role in _PROMPT_ROLES:
        n += 1
    return n


# ------------------------------------------------------------------------------------------
# Tool output limits (pkg/agent/tool_output.go)


def _format_bytes(n: int) -> str:
    if n < 1024:
        return f"{n}B"
    kb = n / 1024.0
    if kb < 1024:
        return f"{kb:.1f}KB"
    return f"{kb / 1024.0:.1f}MB"


def _count_lines(text: str) -> int:
    return 0 if text == "" else text.count("\n") + 1


def _cut_lines(text: str, limit: int, mode: str) -> str:
    lines = text.split("\n")
    if limit <= 0 or len(lines) <= limit:
        return text
    if mode != "head_tail" or limit < 4:
        return "\n".join(lines[:limit])
    head = limit // 2
    tail = limit - head
    marker = f"... [truncated {len(lines) - limit} lines] ..."
    return "\n".join([*lines[:head], marker, *lines[len(lines) - tail :]])


def _cut_bytes(text: str, limit: int) -> str:
    if text.isascii():  # a byte per character: no character to split
        return text[:limit]
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", "ignore")


@dataclass(frozen=True)
class ToolOutputLimit:
    """What the limits did to one tool output."""

    text: str
    spilled: bool
    truncated_by: str  # "lines", "chars", "bytes", "spill" or ""
    total_lines: int
    total_bytes: int
    total_chars: int
    output_lines: int
    output_bytes: int
    output_chars: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "spilled": self.spilled,
            "truncated_by": self.truncated_by,
            "total_lines": self.total_lines,
            "total_bytes": self.total_bytes,
            "total_chars": self.total_chars,
            "output_lines": self.output_lines,
            "output_bytes": self.output_bytes,
            "output_chars": self.output_chars,
        }


def limit_tool_output(text: str, profile: GoAgentProfile) -> ToolOutputLimit | None:
    """``truncateToolContent`` on a tool output's text; None when it is left as it is."""
    if text == "":
        return None
    total_chars = len(text)
    is_ascii = text.isascii()
    total_bytes = total_chars if is_ascii else utf8_len(text)
    threshold = profile.tool_output_large_threshold
    if threshold > 0 and total_chars > threshold:
        total_lines = _count_lines(text)
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        notice = (
            f"[tool output too large: {total_chars} chars]\nSaved to: {SPILL_PATH}\n"
            f"SHA256: {digest}"
        )
        return ToolOutputLimit(
            notice,
            True,
            "spill",
            total_lines,
            total_bytes,
            total_chars,
            _count_lines(notice),
            utf8_len(notice),
            len(notice),
        )
    max_lines = profile.tool_output_max_lines
    max_bytes = profile.tool_output_max_bytes
    max_chars = profile.tool_output_max_chars
    if max_lines <= 0 and max_bytes <= 0 and max_chars <= 0:
        return None
    # An ASCII text has a byte per character: the character and the byte limits cut it at the
    # same point. Its newlines are counted in two pieces, before and after that point, so the
    # lines of what is kept come with the total (unless the line limit cuts first).
    cut = total_chars
    if is_ascii:
        if 0 < max_chars < cut:
            cut = max_chars
        if 0 < max_bytes < cut:
            cut = max_bytes
    kept_newlines = text.count("\n", 0, cut)
    total_lines = kept_newlines + text.count("\n", cut) + 1
    lines_limit = max_lines if max_lines > 0 else total_lines
    if (
        total_lines <= lines_limit
        and (max_bytes <= 0 or total_bytes <= max_bytes)
        and (max_chars <= 0 or total_chars <= max_chars)
    ):
        return None
    # the lines are counted already: only an output over the limit is split into lines
    output = (
        text
        if total_lines <= lines_limit
        else _cut_lines(text, lines_limit, profile.tool_output_truncate_mode)
    )
    by = "lines" if output != text else ""
    if max_chars > 0:
        output = trim_runes(output, max_chars)
    if not by and len(output) < total_chars:
        by = "chars"
    if max_bytes > 0:
        output = _cut_bytes(output, max_bytes)
    if not by and utf8_len(output) < total_bytes:
        by = "bytes"
    # unless the line limit cut it, the output is text[:cut]
    lines_kept = is_ascii and total_lines <= lines_limit
    out_lines = kept_newlines + 1 if lines_kept else _count_lines(output)
    out_bytes, out_chars = utf8_len(output), len(output)
    notice = (
        f"\n\n[tool output truncated: showing {out_lines}/{total_lines} lines, "
        f"{_format_bytes(out_bytes)}/{_format_bytes(total_bytes)} bytes, "
        f"{out_chars}/{total_chars} chars]"
    )
    return ToolOutputLimit(
        output + notice,
        False,
        by,
        total_lines,
        total_bytes,
        total_chars,
        out_lines,
        out_bytes,
        out_chars,
    )


def _output_of(message: Message) -> str:
    """``extractTextFromBlocks``: the text blocks of a tool result, concatenated."""
    parts = message.parts
    if len(parts) == 1:  # most tool results: one block, nothing to join
        part = parts[0]
        return part.text if part.type in _OUTPUT_PARTS else ""
    return "".join(p.text for p in parts if p.type in _OUTPUT_PARTS)


# ------------------------------------------------------------------------------------------
# Estimate and trigger (pkg/compact/compact.go)


def context_tokens(
    messages: Sequence[ContextItem], reported: Mapping[str, int] | None = None
) -> tuple[int, str, str | None]:
    """``EstimateContextTokens``: (tokens, "reported" or "estimated", the anchor message id).

    The anchor is the last visible assistant message with a positive reported figure; the
    messages after it add their heuristic estimate (hidden ones count 0).
    """
    if reported:
        for i in range(len(messages) - 1, -1, -1):
            message = messages[i].message
            if not message.visible or message.role is not Role.ASSISTANT:
                continue
            usage = reported.get(message.id, 0)
            if usage > 0:
                trailing = sum(m.tokens for m in messages[i + 1 :] if m.message.visible)
                return usage + trailing, "reported", message.id
    return sum([m.tokens for m in messages if m.message.visible]), "estimated", None


class _Limits(NamedTuple):
    """What a profile derives for the trigger and the split (each call builds its window)."""

    active: bool  # has_threshold()
    threshold: int
    source: str  # limit_source()
    keep_recent_tokens: int  # effective_keep_recent_tokens()


# by profile (a profile is frozen: what it derives does not change); replay asks every request
_LIMITS: dict[int, tuple[GoAgentProfile, _Limits]] = {}


def _limits(profile: GoAgentProfile) -> _Limits:
    found = _LIMITS.get(id(profile))
    if found is not None and found[0] is profile:
        return found[1]
    limits = _Limits(
        profile.has_threshold(),
        profile.threshold(),
        profile.limit_source(),
        profile.effective_keep_recent_tokens(),
    )
    if len(_LIMITS) >= 64:
        _LIMITS.clear()
    _LIMITS[id(profile)] = (profile, limits)
    return limits


class _Trigger(NamedTuple):
    """``ShouldCompact`` on a context: its leading prompt items, the estimate and the verdict."""

    prompt: int  # how many leading system prompt items the context has
    messages: int  # how many items follow them (the agent's message list)
    tokens: int
    origin: str  # "reported" or "estimated"
    anchor: str | None
    fires: bool


def _fires(messages: int, tokens: int, profile: GoAgentProfile) -> bool:
    """Tokens ≥ the effective limit, else the message count ≥ ``max_messages`` when there is
    no token limit; never when auto-compaction is off."""
    if not profile.auto_compact:
        return False
    limits = _limits(profile)
    if limits.active:
        return tokens >= limits.threshold
    return profile.max_messages > 0 and messages >= profile.max_messages


def _trigger_figures(
    messages: int, tokens: int, origin: str, anchor: str | None, profile: GoAgentProfile
) -> dict[str, Any]:
    limits = _limits(profile)
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


def _trigger(
    items: Sequence[ContextItem], profile: GoAgentProfile, reported: Mapping[str, int] | None
) -> _Trigger:
    prompt = _prompt_length(items)
    count = len(items) - prompt
    if reported:
        tokens, origin, anchor = context_tokens(items[prompt:], reported)
    else:
        # the heuristic over the visible messages: the context's visible total (kept up to
        # date by a ``ContextList``) less the prompt's
        tokens = visible_total(items) - sum([i.tokens for i in items[:prompt] if i.message.visible])
        origin, anchor = "estimated", None
    return _Trigger(prompt, count, tokens, origin, anchor, _fires(count, tokens, profile))


def should_compact(
    messages: Sequence[ContextItem],
    profile: GoAgentProfile,
    reported: Mapping[str, int] | None = None,
) -> tuple[bool, dict[str, Any]]:
    """``ShouldCompact`` and its figures: tokens ≥ the effective limit, else the message count
    ≥ ``max_messages`` when there is no token limit."""
    tokens, origin, anchor = context_tokens(messages, reported)
    figures = _trigger_figures(len(messages), tokens, origin, anchor, profile)
    return _fires(len(messages), tokens, profile), figures


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


# ------------------------------------------------------------------------------------------
# Messages the agent writes


def digest_line(message: Message) -> str:
    """``compactionToolDigestLine``: ``- <tool> (<ok|error>): <text>``."""
    name = (message.tool_name or "").strip() or "unknown"
    text = _go_text(message).strip() or EMPTY_OUTPUT
    text = trim_runes(text.replace("\n", " "), DIGEST_LINE_RUNES)
    return f"- {name} ({_status(message)}): {text}"


def heuristic_tool_summary(message: Message, runes: int) -> str:
    """``fallbackToolSummary``: the tool's name, status and a head-and-tail excerpt."""
    text = trim_with_tail(_go_text(message).strip() or EMPTY_OUTPUT, runes)
    name = _go_quote((message.tool_name or "").strip())
    return f"Tool {name} finished with status {_status(message)}. Output excerpt:\n{text}"


def tool_summary_text(message: Message, summary: str) -> str:
    return (
        f"{TOOL_SUMMARY_HEADER}\nTool: {(message.tool_name or '').strip()}\n"
        f"Call ID: {_call_id(message).strip()}\nStatus: {_status(message)}\n{summary.strip()}"
    )


def _user_message(message_id: str, text: str, kind: MessageKind) -> Message:
    return Message(
        id=message_id, role=Role.USER, kind=kind, parts=(Part(type=PartType.TEXT, text=text),)
    )


def _archived(message: Message) -> Message:
    return message.model_copy(update={"visible": False, "kind": MessageKind.ARCHIVED})


def _visible_tool_results(items: Sequence[ContextItem]) -> list[int]:
    return [i for i, it in enumerate(items) if it.message.visible and _is_tool_result(it.message)]


def _summaries_due(items: Sequence[ContextItem], profile: GoAgentProfile) -> bool:
    """Whether the per-turn tool summaries act (without ``force``)."""
    cutoff = profile.tool_call_cutoff
    # a context of no more items than the cutoff cannot hold more tool results than it
    if cutoff <= 0 or profile.tool_summary_strategy == "off" or len(items) <= cutoff:
        return False
    return len(_visible_tool_results(items)) > cutoff


# ------------------------------------------------------------------------------------------
# The policy


class GoAgentPolicy:
    """tiancaiamao/ai's context management as a policy."""

    name = NAME

    # -- admit / truncate -------------------------------------------------------------------

    def admit(
        self,
        item: ContextItem,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
    ) -> PolicyResult | None:
        """The tool-output limits on one output (the result is about that output alone)."""
        prof = _profile(profile)
        if not _is_tool_result(item.message):
            return None
        limited = limit_tool_output(_output_of(item.message), prof)
        if limited is None:
            return None
        how = (
            "spilled to a file (simulated)" if limited.spilled else f"cut by {limited.truncated_by}"
        )
        return admitted(
            Action.TRUNCATE,
            NAME,
            item,
            replace_text(item.message, limited.text),
            estimate,
            reason=self._limit_reason(limited, prof),
            details={**limited.as_dict(), "spill_path": SPILL_PATH if limited.spilled else None},
            note=how,
        )

    @staticmethod
    def _limit_reason(limited: ToolOutputLimit, profile: GoAgentProfile) -> str:
        if limited.spilled:
            return (
                f"output of {_fmt(limited.total_chars)} chars > large-output threshold "
                f"{_fmt(profile.tool_output_large_threshold)}: replaced by a spill notice "
                "(simulated, no file written)"
            )
        return (
            f"output of {_fmt(limited.total_lines)} lines / {_fmt(limited.total_bytes)} bytes / "
            f"{_fmt(limited.total_chars)} chars over the limits "
            f"({_fmt(profile.tool_output_max_lines)} lines, "
            f"{_fmt(profile.tool_output_max_bytes)} bytes, "
            f"{_fmt(profile.tool_output_max_chars)} chars): cut by {limited.truncated_by}"
        )

    def truncate(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        *,
        force: bool = False,
    ) -> PolicyResult:
        """The tool-output limits on every tool result in context. The agent applies them to
        each output as it arrives, so ``force`` changes nothing."""
        prof = _profile(profile)
        new_items: list[ContextItem] = []
        changes: list[ItemChange] = []
        count = 0
        for item in items:
            limited = (
                limit_tool_output(_output_of(item.message), prof)
                if _is_tool_result(item.message)
                else None
            )
            if limited is None:
                new_items.append(item)
                continue
            message = replace_text(item.message, limited.text)
            tokens = estimate(message)
            new_items.append(ContextItem(message, tokens, item.index))
            note = "spilled (simulated)" if limited.spilled else f"cut by {limited.truncated_by}"
            changes.append(ItemChange(item.id, ItemStatus.TRUNCATED, item.tokens, tokens, note))
            count += 1
        if count == 0:
            return unchanged(
                Action.TRUNCATE, NAME, items, "no tool output exceeds the tool-output limits"
            )
        before, after = total(items), total(new_items)
        return PolicyResult(
            action=Action.TRUNCATE,
            policy=NAME,
            fired=True,
            reason=f"{count} tool output(s) over the limits cut: {_fmt(before)} → {_fmt(after)}",
            items=new_items,
            changes=changes,
            tokens_before=before,
            tokens_after=after,
            details={"truncated": count},
        )

    # -- per-turn tool-result summaries -----------------------------------------------------

    def _tool_summaries(
        self,
        items: Sequence[ContextItem],
        profile: GoAgentProfile,
        estimate: Estimate,
        summarizer: Summarizer | None,
        *,
        force: bool,
    ) -> PolicyResult:
        cutoff = profile.tool_call_cutoff
        strategy = profile.tool_summary_strategy
        visible = _visible_tool_results(items)
        figures: dict[str, Any] = {
            "visible_tool_results": len(visible),
            "cutoff": cutoff,
            "strategy": strategy,
        }
        if cutoff <= 0:
            return unchanged(
                Action.PRUNE,
                NAME,
                items,
                "tool_call_cutoff is 0: tool summaries are off",
                **figures,
            )
        if strategy == "off" and not force:
            return unchanged(
                Action.PRUNE, NAME, items, "the tool summary strategy is off", **figures
            )
        excess = len(visible) - cutoff
        if excess <= 0:
            return unchanged(
                Action.PRUNE,
                NAME,
                items,
                f"visible tool results {len(visible)} ≤ cutoff {cutoff}",
                **figures,
            )
        new_items = list(items)
        changes: list[ItemChange] = []
        added: list[ContextItem] = []
        fallbacks = 0
        for idx in visible[:excess]:  # oldest first, one per iteration as the agent does
            original = items[idx]
            summary, fell_back = self._summarize_tool(original.message, profile, summarizer)
            fallbacks += fell_back
            archived = _archived(original.message)
            archived_tokens = estimate(archived)
            new_items[idx] = ContextItem(archived, archived_tokens, original.index)
            changes.append(
                ItemChange(
                    original.id,
                    ItemStatus.ARCHIVED,
                    original.tokens,
                    archived_tokens,
                    "hidden from the model, kept for the user",
                )
            )
            message = _user_message(
                f"{NAME}:tool-summary:{original.id}",
                tool_summary_text(original.message, summary),
                MessageKind.TOOL_SUMMARY,
            )
            added.append(ContextItem(message, estimate(message)))
        new_items.extend(added)
        changes.extend(
            ItemChange(a.id, ItemStatus.ADDED, 0, a.tokens, "[Tool output summary]") for a in added
        )
        before, after = total(items), total(new_items)
        return PolicyResult(
            action=Action.PRUNE,
            policy=NAME,
            fired=True,
            reason=(
                f"visible tool results {len(visible)} > cutoff {cutoff}: the oldest {excess} "
                f"archived and summarized ({_fmt(before)} → {_fmt(after)} tokens)"
            ),
            items=new_items,
            changes=changes,
            tokens_before=before,
            tokens_after=after,
            details={**figures, "archived": excess, "heuristic_summaries": fallbacks},
        )

    @staticmethod
    def _summarize_tool(
        message: Message, profile: GoAgentProfile, summarizer: Summarizer | None
    ) -> tuple[str, bool]:
        """(summary, whether the heuristic fallback was used)."""
        heuristic = heuristic_tool_summary(message, profile.tool_summary_heuristic_runes)
        if summarizer is None or profile.tool_summary_strategy != "llm":
            return heuristic, True
        raw = trim_with_tail(
            _go_text(message).strip() or EMPTY_OUTPUT, profile.tool_summary_input_chars
        )
        clipped = replace_text(message, raw)
        try:
            text = summarizer.summarize([clipped], max(1, profile.tool_summary_output_runes // 4))
        except InspectorError:  # the agent falls back to the heuristic text on an LLM error
            return heuristic, True
        text = text.strip()
        if not text:
            return heuristic, True
        return trim_runes(text, profile.tool_summary_output_runes), False

    # -- compaction -------------------------------------------------------------------------

    def _compact(
        self,
        items: Sequence[ContextItem],
        profile: GoAgentProfile,
        estimate: Estimate,
        summarizer: Summarizer,
        *,
        force: bool,
        reported: Mapping[str, int] | None,
        trigger: _Trigger | None = None,
    ) -> PolicyResult:
        """``trigger``: ``_trigger`` of ``items``, when the caller has it already."""
        if trigger is None:
            trigger = _trigger(items, profile, reported)
        n, tokens, fires = trigger.prompt, trigger.tokens, trigger.fires
        prompt, messages = items[:n], items[n:]
        figures = _trigger_figures(
            trigger.messages, tokens, trigger.origin, trigger.anchor, profile
        )
        if not force and not fires:
            return unchanged(Action.COMPACT, NAME, items, self._no_trigger(figures), **figures)
        if not messages:
            return unchanged(Action.COMPACT, NAME, items, "no messages to compact", **figures)

        keep_tokens = _limits(profile).keep_recent_tokens
        figures["keep_recent_tokens"] = keep_tokens
        if keep_tokens > 0:
            sizes = [m.tokens if m.message.visible else 0 for m in messages]
            start = split_by_token_budget(sizes, keep_tokens)
            if start == 0:
                return unchanged(
                    Action.COMPACT,
                    NAME,
                    items,
                    f"every message fits the keep-recent budget {_fmt(keep_tokens)}: "
                    "nothing older to summarize",
                    **figures,
                )
        else:
            keep_count = profile.keep_recent if profile.keep_recent > 0 else DEFAULT_KEEP_RECENT
            figures["keep_recent"] = keep_count
            if len(messages) <= keep_count:
                return unchanged(
                    Action.COMPACT,
                    NAME,
                    items,
                    f"{len(messages)} messages ≤ keep-recent {keep_count}: nothing to compact",
                    **figures,
                )
            start = len(messages) - keep_count
        old, recent = messages[:start], messages[start:]
        figures["old_messages"] = len(old)
        figures["recent_messages"] = len(recent)

        projected = self._project_for_summary(old, profile)
        if not projected:
            return self._failed(items, "no agent-visible messages to summarize", figures)
        try:
            summary = summarizer.summarize(projected, SUMMARY_BUDGET_TOKENS)
        except InspectorError as exc:  # Compact returns the error; the agent keeps its messages
            return self._failed(items, f"failed to generate summary: {exc}", figures)
        if not summary.strip():
            return self._failed(items, "failed to generate summary: empty summary", figures)

        summary_item_message = summary_message(
            f"{NAME}:summary:{old[-1].id}", SUMMARY_PREFIX + summary, Role.USER
        )
        summary_item = ContextItem(summary_item_message, estimate(summary_item_message))
        recent_items, recent_changes, digest = self._digest_recent(recent, profile, estimate)

        changes = [
            ItemChange(m.message.id, ItemStatus.SUMMARIZED, m.tokens, 0)
            if m.message.visible
            else ItemChange(m.message.id, ItemStatus.DROPPED, m.tokens, 0, "hidden, left out")
            for m in old
        ]
        changes.extend(recent_changes)
        changes.append(
            ItemChange(summary_item.id, ItemStatus.ADDED, 0, summary_item.tokens, "summary")
        )
        new_items = [*prompt, summary_item, *recent_items]
        if digest is not None:
            new_items.append(digest)
            changes.append(ItemChange(digest.id, ItemStatus.ADDED, 0, digest.tokens, "digest"))
        figures["archived_in_recent"] = len(
            [c for c in recent_changes if c.status is ItemStatus.ARCHIVED]
        )
        figures["messages_after"] = len(new_items) - len(prompt)
        before, after = total(items), total(new_items)
        if fires:
            why = self._trigger_text(figures)
        else:
            why = "compaction requested (the agent's recovery path and compact command)"
        return PolicyResult(
            action=Action.COMPACT,
            policy=NAME,
            fired=True,
            reason=(
                f"{why}: {len(old)} messages summarized, {len(recent)} kept "
                f"({_fmt(before)} → {_fmt(after)} tokens)"
            ),
            items=new_items,
            changes=changes,
            tokens_before=before,
            tokens_after=after,
            details=figures,
        )

    @staticmethod
    def _trigger_text(figures: Mapping[str, Any]) -> str:
        if figures.get("limit") is not None:
            return f"estimated {_fmt(figures['context_tokens'])} ≥ limit {_fmt(figures['limit'])}"
        return f"{figures['messages']} messages ≥ max {figures.get('max_messages')}"

    @staticmethod
    def _no_trigger(figures: Mapping[str, Any]) -> str:
        if not figures["auto_compact"]:
            return "auto-compaction is off"
        if figures.get("limit") is not None:
            return f"estimated {_fmt(figures['context_tokens'])} < limit {_fmt(figures['limit'])}"
        return f"{figures['messages']} messages < max {figures.get('max_messages')}"

    @staticmethod
    def _failed(items: Sequence[ContextItem], error: str, figures: dict[str, Any]) -> PolicyResult:
        return unchanged(
            Action.COMPACT, NAME, items, f"compaction failed: {error}", error=error, **figures
        )

    @staticmethod
    def _project_for_summary(old: Sequence[ContextItem], profile: GoAgentProfile) -> list[Message]:
        """``projectMessagesForSummary``: visible messages, tool results clipped."""
        projected: list[Message] = []
        for item in old:
            message = item.message
            if not message.visible:
                continue
            if _is_tool_result(message):
                text = trim_with_tail(
                    _go_text(message).strip() or EMPTY_OUTPUT, profile.summary_tool_result_runes
                )
                message = replace_text(message, text)
            projected.append(message)
        return projected

    @staticmethod
    def _digest_recent(
        recent: Sequence[ContextItem], profile: GoAgentProfile, estimate: Estimate
    ) -> tuple[list[ContextItem], list[ItemChange], ContextItem | None]:
        """``compactToolResultsInRecent``: archive the oldest visible tool results beyond the
        cutoff and append one digest of them."""
        changes: list[ItemChange] = []
        cutoff = profile.tool_call_cutoff
        items = list(recent)
        if cutoff <= 0 or len(recent) <= cutoff:  # too few messages to pass the cutoff
            return items, changes, None
        visible = _visible_tool_results(recent)
        excess = len(visible) - cutoff
        if excess <= 0:
            return items, changes, None
        lines: list[str] = []
        for idx in visible[:excess]:
            original = recent[idx]
            archived = _archived(original.message)
            tokens = estimate(archived)
            items[idx] = ContextItem(archived, tokens, original.index)
            changes.append(
                ItemChange(
                    original.id,
                    ItemStatus.ARCHIVED,
                    original.tokens,
                    tokens,
                    "hidden from the model, kept for the user",
                )
            )
            lines.append(digest_line(original.message))
        message = _user_message(
            f"{NAME}:digest:{recent[-1].id}",
            DIGEST_HEADER + "\n" + "\n".join(lines),
            MessageKind.TOOL_SUMMARY,
        )
        return items, changes, ContextItem(message, estimate(message))

    # -- the contract -----------------------------------------------------------------------

    def manage(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        summarizer: Summarizer,
        *,
        reported: Mapping[str, int] | None = None,
    ) -> list[PolicyResult]:
        """After a turn's tools, before the next request: tool summaries, then auto-compaction."""
        prof = _profile(profile)
        results: list[PolicyResult] = []
        current: Sequence[ContextItem] = items
        # replay asks before every request and keeps only what fires: when a step does
        # nothing, no result is written for it
        if _summaries_due(current, prof):
            summaries = self._tool_summaries(current, prof, estimate, summarizer, force=False)
            if summaries.fired:
                results.append(summaries)
                current = summaries.items
        trigger = _trigger(current, prof, reported)
        if trigger.fires:
            compaction = self._compact(
                current,
                prof,
                estimate,
                summarizer,
                force=False,
                reported=reported,
                trigger=trigger,
            )
            if compaction.fired:
                results.append(compaction)
        return results

    def prune(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        *,
        force: bool = False,
    ) -> PolicyResult:
        return self._tool_summaries(items, _profile(profile), estimate, None, force=force)

    def compact(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        summarizer: Summarizer,
        *,
        force: bool = False,
        reported: Mapping[str, int] | None = None,
    ) -> PolicyResult:
        return self._compact(
            items, _profile(profile), estimate, summarizer, force=force, reported=reported
        )


POLICY = GoAgentPolicy()
