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
- ``compact``: the session's compaction the json and RPC modes run (``Session.Compact``, the
  ``compactor`` setting ``session``: the part after the previous compaction, cut at a user
  message) or the library's ``Compactor.Compact`` (``in_memory``). Without ``force`` only when
  ``ShouldCompact`` holds; with ``force`` as the agent's recovery path (a context-length
  error) and its ``compact`` command do, whatever the estimate. Decided at a turn's end
  (``manage``), a compaction that fails is still a decision (``failed``), and one decided
  during a prompt takes effect from the next prompt (``takes_effect``).
- ``admit`` on an output that already carries the agent's truncation notice keeps the agent's
  cut (or cuts further, or sizes it larger from the notice): it is never cut twice.
- ``truncate``: the tool-output limits applied to every tool result in context.

The estimate (``EstimateContextTokens``) is the provider-reported usage of the last visible
assistant message plus the agent's heuristic for the messages after it. A response's item
carries that figure (``ContextItem.reported``; replay gives the replayed request's figure plus
its output), else ``reported`` (message id → the provider's total, or input + output + cache
read + cache write) gives it; without either the estimate is the heuristic over every visible
message, the agent's own fallback. At a turn's end a new prompt is not counted: the agent adds
it after its decision.

The agent keeps its system prompt outside its message list: leading system and developer
items are neither counted, nor split, nor summarized here; they stay first.

Our ``Message`` has no ``userVisible`` flag: summaries and digests the agent marks
``userVisible=false`` are added as ordinary visible messages of kind ``tool_summary``.
"""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, NamedTuple, overload

from ctx_inspect.core.estimate import utf8_len
from ctx_inspect.core.model import (
    TRIGGER_NOT_RECORDED,
    Message,
    MessageKind,
    Part,
    PartType,
    RequestRejected,
    Role,
)
from ctx_inspect.core.policies.base import (
    Action,
    ContextItem,
    ContextList,
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
from ctx_inspect.core.profiles import GoAgentProfile, Profile
from ctx_inspect.errors import ConfigError, InspectorError

if TYPE_CHECKING:
    from ctx_inspect.core.replay import Decision, Situation

NAME = "goagent"
SUMMARY_PREFIX = "[Previous conversation summary]\n\n"
# session/entries.go: the summary message a compaction entry stands for
SESSION_SUMMARY_PREFIX = (
    "The conversation history before this point was compacted into the following summary:"
    "\n\n<summary>\n"
)
SESSION_SUMMARY_SUFFIX = "\n</summary>"
DIGEST_HEADER = "[Compaction tool digest]"
TOOL_SUMMARY_HEADER = "[Tool output summary]"
DIGEST_LINE_RUNES = 200  # compactionToolDigestLine: trimRunes(text, 200)
TRUNCATED_MIDDLE = "\n... (truncated) ...\n"  # trimTextWithTail
EMPTY_OUTPUT = "(empty output)"
SUMMARY_BUDGET_TOKENS = 800  # the compaction prompt asks to "Keep under 800 tokens"
UNRECORDED_SUMMARIES = (
    "the agent summarizes tool results in its running loop's list only: its stdout, session "
    "and log never show it"
)
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


# The notices the agent writes into a tool output it cut or spilled (tool_output.go)
TRUNCATION_NOTICE = re.compile(
    r"(?:\n\n)?\[tool output truncated: showing (\d+)/(\d+) lines, "
    r"([\d.]+)(B|KB|MB)/([\d.]+)(B|KB|MB) bytes, (\d+)/(\d+) chars\]\s*\Z"
)
LINES_MARKER = re.compile(r"^\.\.\. \[truncated (\d+) lines\] \.\.\.$", re.MULTILINE)
SPILL_NOTICE = re.compile(
    r"\A\[tool output too large: (\d+) chars\]\nSaved to: ([^\n]*)\nSHA256: [0-9a-f]+\s*\Z"
)
_UNITS = {"B": 1, "KB": 1024, "MB": 1024 * 1024}


def notice_bytes(value: str, unit: str, chars: int) -> int:
    """A ``formatBytes`` figure back in bytes: exact in B; in KB or MB, the character count
    when it prints the same (an ASCII output has a byte per character), else the figure."""
    try:
        number = float(value)
    except ValueError:
        return chars
    scale = _UNITS[unit]
    if scale == 1:
        return int(number)
    if f"{chars / scale:.1f}" == value:
        return chars
    return round(number * scale)


@dataclass(frozen=True)
class RecordedCut:
    """A tool output as the agent stored it after its limits cut or spilled it: what it kept
    and the sizes its notice gives."""

    kept: str  # the kept text, without the notice
    spilled: bool
    spill_path: str | None
    total_lines: int
    total_bytes: int
    total_chars: int
    kept_lines: int
    kept_bytes: int
    kept_chars: int

    @property
    def total_tokens(self) -> int:
        """The agent's estimate of the whole output (bytes / 4)."""
        return -(-self.total_bytes // 4)


def recorded_cut(text: str) -> RecordedCut | None:
    """The agent's cut of a tool output, from the notice it appended (None without one)."""
    if "[tool output " not in text:
        return None
    spill = SPILL_NOTICE.match(text)
    if spill is not None:
        chars = int(spill[1])
        return RecordedCut("", True, spill[2], 0, chars, chars, 0, 0, 0)
    notice = TRUNCATION_NOTICE.search(text)
    if notice is None:
        return None
    kept_chars, total_chars = int(notice[7]), int(notice[8])
    return RecordedCut(
        kept=text[: notice.start()],
        spilled=False,
        spill_path=None,
        total_lines=int(notice[2]),
        total_bytes=notice_bytes(notice[5], notice[6], total_chars),
        total_chars=total_chars,
        kept_lines=int(notice[1]),
        kept_bytes=notice_bytes(notice[3], notice[4], kept_chars),
        kept_chars=kept_chars,
    )


def _truncation_notice(
    lines: tuple[int, int], size: tuple[int, int], chars: tuple[int, int]
) -> str:
    return (
        f"\n\n[tool output truncated: showing {lines[0]}/{lines[1]} lines, "
        f"{_format_bytes(size[0])}/{_format_bytes(size[1])} bytes, {chars[0]}/{chars[1]} chars]"
    )


def _limits_of(profile: GoAgentProfile) -> tuple[int, int, int]:
    return (
        profile.tool_output_max_lines,
        profile.tool_output_max_bytes,
        profile.tool_output_max_chars,
    )


def _kept_bytes(cut: RecordedCut, profile: GoAgentProfile) -> int:
    """About how many bytes of the whole output these limits keep (the tightest limit, each
    taken as a share of the output)."""
    max_lines, max_bytes, max_chars = _limits_of(profile)
    keep = cut.total_bytes
    if max_bytes > 0:
        keep = min(keep, max_bytes)
    if 0 < max_lines < cut.total_lines:
        keep = min(keep, cut.total_bytes * max_lines // max(1, cut.total_lines))
    if 0 < max_chars < cut.total_chars:
        keep = min(keep, cut.total_bytes * max_chars // max(1, cut.total_chars))
    return keep


def _sized(cut: RecordedCut, size: int) -> str:
    """The kept text grown to ``size`` bytes with filler: the rest is not in the recording."""
    base = cut.kept or f"(tool output of {cut.total_chars} chars; the recording holds none of it)"
    missing = max(0, size - utf8_len(base) - 1)
    return base + "\n" + "x" * missing if missing else base


def _notice_tail(text: str) -> str:
    """The truncation notice at the end of ``text`` (empty without one)."""
    notice = TRUNCATION_NOTICE.search(text)
    return text[notice.start() :] if notice else ""


def _spills(cut: RecordedCut, profile: GoAgentProfile) -> bool:
    threshold = profile.tool_output_large_threshold
    return threshold > 0 and cut.total_chars > threshold


def _cuts(cut: RecordedCut, profile: GoAgentProfile) -> bool:
    """Whether these limits cut (or spill) the whole output."""
    whole = (cut.total_lines, cut.total_bytes, cut.total_chars)
    limits = _limits_of(profile)
    return _spills(cut, profile) or any(
        0 < limit < size for limit, size in zip(limits, whole, strict=True)
    )


def _recut(cut: RecordedCut, profile: GoAgentProfile, text: str) -> tuple[str, str]:
    """The output as these limits would store it, from what the recording holds, and why."""
    if _spills(cut, profile):
        if cut.spilled:
            return text, f"the agent spilled this output of {_fmt(cut.total_chars)} chars"
        notice = (
            f"[tool output too large: {cut.total_chars} chars]\nSaved to: {SPILL_PATH}\n"
            "SHA256: (the whole output is not in the recording)"
        )
        return notice, "these limits spill the output the agent cut (simulated)"
    size = cut.total_bytes
    if not _cuts(cut, profile):
        reason = "the agent cut it; these limits keep it whole (its text past the cut is unknown)"
        return _sized(cut, size), reason
    # a head-and-tail cut by lines keeps one line more than the limit: its marker
    marker = 1 if LINES_MARKER.search(cut.kept) else 0
    kept = (cut.kept_lines - marker, cut.kept_bytes, cut.kept_chars)
    limits = _limits_of(profile)
    if not cut.spilled and not all(
        limit <= 0 or limit > size for limit, size in zip(limits, kept, strict=True)
    ):
        # a limit binds within what the agent kept: the same cut, or a further one
        if all(limit <= 0 or size <= limit for limit, size in zip(limits, kept, strict=True)):
            return text, f"the agent cut this output of {_fmt(cut.total_bytes)} bytes"
        limited = limit_tool_output(cut.kept, profile)
        if limited is None:
            return text, f"the agent cut this output of {_fmt(cut.total_bytes)} bytes"
        shown = limited.text[: len(limited.text) - len(_notice_tail(limited.text))]
        notice = _truncation_notice(
            (limited.output_lines, cut.total_lines),
            (limited.output_bytes, cut.total_bytes),
            (limited.output_chars, cut.total_chars),
        )
        return shown + notice, "the agent cut this output; these limits cut it further"
    size = _kept_bytes(cut, profile)
    grown = _sized(cut, size)
    notice = _truncation_notice(
        (_count_lines(grown), cut.total_lines),
        (utf8_len(grown), cut.total_bytes),
        (len(grown), cut.total_chars),
    )
    reason = (
        f"the agent kept {_fmt(cut.kept_bytes)} of {_fmt(cut.total_bytes)} bytes; these limits "
        f"keep about {_fmt(size)} (what the recording lacks is sized, not shown)"
    )
    return grown + notice, reason


def _output_of(message: Message) -> str:
    """``extractTextFromBlocks``: the text blocks of a tool result, concatenated."""
    parts = message.parts
    if len(parts) == 1:  # most tool results: one block, nothing to join
        part = parts[0]
        return part.text if part.type in _OUTPUT_PARTS else ""
    return "".join(p.text for p in parts if p.type in _OUTPUT_PARTS)


# ------------------------------------------------------------------------------------------
# Estimate and trigger (pkg/compact/compact.go)


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
    incoming: int = 0  # trailing user messages of a prompt that started after the decision


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


_NO_ANCHOR = "goagent:no-usage-before"  # a ContextList mark: no response figure before it


def _incoming(items: Sequence[ContextItem], start: int = 0) -> int:
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


def _trigger(
    items: Sequence[ContextItem],
    profile: GoAgentProfile,
    reported: Mapping[str, int] | None,
    *,
    turn_end: bool = False,
) -> _Trigger:
    """``ShouldCompact`` on ``items``. ``turn_end``: as the agent evaluates it when a turn
    ends, before the request ``items`` stand for: a new prompt at their end is left out."""
    prompt = _prompt_length(items)
    incoming = _incoming(items, prompt) if turn_end else 0
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
    return _Trigger(
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
    figures = _trigger_figures(len(messages), tokens, origin, anchor, profile)
    return _fires(len(messages), tokens, profile), figures


_SUMMARY_KEPT = re.compile(rf"^{NAME}:summary:(\d+):")


class _Window(Sequence[ContextItem]):
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


class _Part(NamedTuple):
    """The session's part of the agent's list after its latest compaction."""

    first: int  # where it starts in the items
    users: list[int]  # where its user messages are (a compaction can cut only there)


def _part_of(items: Sequence[ContextItem], start: int, end: int) -> _Part:
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
    return _Part(first, [u for u in users if u >= first])


def _first_kept(
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


def _recoveries_in_prompt(items: Sequence[ContextItem]) -> int:
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


_TOOLS_FROM = "goagent:visible-tool-results-from"  # a ContextList mark: none before it


def _visible_tool_results(items: Sequence[ContextItem]) -> list[int]:
    """The positions of the visible tool results. On a context list the part before the first
    of them is marked (archived ones stay in the list): it is not searched again."""
    start = 0
    if isinstance(items, ContextList):
        mark = items.marked(_TOOLS_FROM)
        start = mark[0] if mark is not None else 0
    found = [
        i
        for i in range(start, len(items))
        if items[i].message.visible and _is_tool_result(items[i].message)
    ]
    if isinstance(items, ContextList):
        items.mark(_TOOLS_FROM, found[0] if found else len(items))
    return found


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
    # replay: it decides at every turn's end, the last one included; whether its session
    # compactor fails depends on what its asynchronous writer had written, which the recording
    # shows and a replay cannot see
    decides_after_each_turn = True
    adopts_recorded_compaction = True

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
        text = _output_of(item.message)
        cut = recorded_cut(text)
        if cut is not None:
            return self._admit_recorded(item, cut, prof, estimate)
        limited = limit_tool_output(text, prof)
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
    def _admit_recorded(
        item: ContextItem, cut: RecordedCut, profile: GoAgentProfile, estimate: Estimate
    ) -> PolicyResult:
        """An output the agent already cut (or spilled), as these limits would have it: the
        same cut when they cut it the same way; cut further from what the agent kept; or, when
        they keep more, the kept part grown to that size with filler (the recording holds no
        more of it). An output these limits leave whole is restored at its size, and the
        result does not fire (``restored``)."""
        text, reason = _recut(cut, profile, _output_of(item.message))
        details = {
            "recorded_cut": True,
            "total_bytes": cut.total_bytes,
            "kept_bytes": cut.kept_bytes,
            "spilled": cut.spilled,
        }
        message = replace_text(item.message, text)
        if not _cuts(cut, profile):
            tokens = estimate(message)
            return PolicyResult(
                action=Action.TRUNCATE,
                policy=NAME,
                fired=False,
                reason=reason,
                items=[ContextItem(message, tokens, item.index)],
                changes=[ItemChange(item.id, ItemStatus.KEPT, item.tokens, tokens, reason)],
                tokens_before=cut.total_tokens,
                tokens_after=tokens,
                details={**details, "restored": True},
            )
        result = admitted(
            Action.TRUNCATE,
            NAME,
            item,
            message,
            estimate,
            reason=reason,
            details=details,
            note="spilled (recorded)" if cut.spilled else "cut (recorded)",
        )
        result.tokens_before = cut.total_tokens
        return result

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
        replacements: dict[int, ContextItem] = {}
        changes: list[ItemChange] = []
        added: list[ContextItem] = []
        fallbacks = 0
        for idx in visible[:excess]:  # oldest first, one per iteration as the agent does
            original = items[idx]
            summary, fell_back = self._summarize_tool(original.message, profile, summarizer)
            fallbacks += fell_back
            archived = _archived(original.message)
            archived_tokens = estimate(archived)
            replacements[idx] = ContextItem(archived, archived_tokens, original.index)
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
        # on a context list, the marks before the first archived output stay valid
        new_items: list[ContextItem]
        if isinstance(items, ContextList):
            new_items = items.replaced(replacements)
        else:
            new_items = [replacements.get(i, item) for i, item in enumerate(items)]
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
            details={
                **figures,
                "archived": excess,
                "heuristic_summaries": fallbacks,
                "undetermined": UNRECORDED_SUMMARIES,
                "loop_only": True,  # the running loop's list: gone when the prompt ends
                "replaced_at": sorted(replacements),  # positions in the items given
            },
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
        recovery: bool = False,
    ) -> PolicyResult:
        """``trigger``: ``_trigger`` of ``items``, when the caller has it already;
        ``recovery``: the loop's recovery after a refused request (its summary says so).

        At a turn's end (``manage``: the trigger was evaluated with ``turn_end``), a
        compaction the trigger decided on that then fails (nothing to cut, no summary) is
        still a decision: it fires, changing nothing, with ``failed`` in its details; and one
        decided without a new prompt after it takes effect from the next prompt
        (``takes_effect``): the running loop keeps its own list."""
        turn_end = trigger is not None and not force
        if trigger is None:
            trigger = _trigger(items, profile, reported)
        n, tokens, fires = trigger.prompt, trigger.tokens, trigger.fires
        end = len(items) - trigger.incoming
        prompt, messages, arriving = items[:n], items[n:end], items[end:]
        figures = _trigger_figures(
            trigger.messages, tokens, trigger.origin, trigger.anchor, profile
        )
        figures["compactor"] = profile.compactor
        if not force and not fires:
            return unchanged(Action.COMPACT, NAME, items, self._no_trigger(figures), **figures)
        decided = fires and turn_end
        if not messages:
            return self._failed(items, "nothing to compact", figures, decided)
        if profile.compactor == "session":
            split = self._session_split(items, n, end, profile, figures)
        else:
            split = self._memory_split(messages, profile, figures)
        if isinstance(split, str):
            return self._failed(items, split, figures, decided)
        left_out, old, recent = split
        previous = [m.message for m in left_out if m.message.kind is MessageKind.SUMMARY]
        projected = self._project_for_summary(old, profile)
        if not projected and not previous:
            return self._failed(items, "no agent-visible messages to summarize", figures, decided)
        try:
            summary = summarizer.summarize([*previous, *projected], SUMMARY_BUDGET_TOKENS)
        except InspectorError as exc:  # Compact returns the error; the agent keeps its messages
            return self._failed(items, f"failed to generate summary: {exc}", figures, decided)
        if not summary.strip():
            return self._failed(
                items, "failed to generate summary: empty summary", figures, decided
            )

        if profile.compactor == "session":
            how = "recovery:" if recovery else ""
            summary_id = f"{NAME}:summary:{len(recent)}:{how}{old[-1].id}"
            text = SESSION_SUMMARY_PREFIX + summary + SESSION_SUMMARY_SUFFIX
            recent_items, digest = list(recent), None
            recent_changes: list[ItemChange] = []
        else:
            summary_id, text = f"{NAME}:summary:{old[-1].id}", SUMMARY_PREFIX + summary
            recent_items, recent_changes, digest = self._digest_recent(recent, profile, estimate)
        summary_item_message = summary_message(summary_id, text, Role.USER)
        summary_item = ContextItem(summary_item_message, estimate(summary_item_message))

        changes = [
            ItemChange(m.message.id, ItemStatus.SUMMARIZED, m.tokens, 0)
            if m.message.kind is MessageKind.SUMMARY
            else ItemChange(
                m.message.id, ItemStatus.DROPPED, m.tokens, 0, "kept by the previous compaction"
            )
            for m in left_out
        ]
        changes += [
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
        new_items.extend(arriving)
        figures["archived_in_recent"] = len(
            [c for c in recent_changes if c.status is ItemStatus.ARCHIVED]
        )
        figures["messages_after"] = len(new_items) - len(prompt) - len(arriving)
        before, after = total(items), total(new_items)
        if fires and not force:
            why = self._trigger_text(figures)
        else:
            why = "compaction requested (the agent's recovery path and compact command)"
        if decided:
            # the figure the agent compared, and what the compaction took off it
            before, after = tokens, tokens - (before - after)
            figures["figure"] = tokens
            if not arriving:
                figures["takes_effect"] = "next_prompt"
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
    def _memory_split(
        messages: Sequence[ContextItem], profile: GoAgentProfile, figures: dict[str, Any]
    ) -> tuple[Sequence[ContextItem], Sequence[ContextItem], Sequence[ContextItem]] | str:
        """``Compactor.Compact``: (left out, summarized, kept), or why nothing is."""
        keep_tokens = _limits(profile).keep_recent_tokens
        figures["keep_recent_tokens"] = keep_tokens
        if keep_tokens > 0:
            sizes = [m.tokens if m.message.visible else 0 for m in messages]
            start = split_by_token_budget(sizes, keep_tokens)
            if start == 0:
                return (
                    f"every message fits the keep-recent budget {_fmt(keep_tokens)}: "
                    "nothing older to summarize"
                )
        else:
            keep_count = profile.keep_recent if profile.keep_recent > 0 else DEFAULT_KEEP_RECENT
            figures["keep_recent"] = keep_count
            if len(messages) <= keep_count:
                return f"{len(messages)} messages ≤ keep-recent {keep_count}: nothing to compact"
            start = len(messages) - keep_count
        figures["old_messages"] = start
        figures["recent_messages"] = len(messages) - start
        return (), messages[:start], messages[start:]

    @staticmethod
    def _session_split(
        items: Sequence[ContextItem],
        start: int,
        end: int,
        profile: GoAgentProfile,
        figures: dict[str, Any],
    ) -> tuple[Sequence[ContextItem], Sequence[ContextItem], Sequence[ContextItem]] | str:
        """``Session.Compact`` on the agent's list ``items[start:end]``: the part after the
        latest compaction, cut where the keep-recent budget is reached, moved back to a user
        message (never the part's first): (left out, summarized, kept), or the agent's
        error."""
        layout = _part_of(items, start, end)
        if layout.first >= end:
            return "already compacted"
        part = _Window(items, layout.first, end)
        keep_tokens = _limits(profile).keep_recent_tokens
        figures["keep_recent_tokens"] = keep_tokens
        users = [u - layout.first for u in layout.users]
        cut = _first_kept(part, users, keep_tokens, profile)
        if cut <= 0:
            return "nothing to compact"
        first = layout.first - start
        figures["old_messages"] = cut
        figures["recent_messages"] = len(part) - cut
        figures["left_out"] = first
        messages = items[start:end]
        return messages[:first], messages[first : first + cut], messages[first + cut :]

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
    def _failed(
        items: Sequence[ContextItem], error: str, figures: dict[str, Any], decided: bool
    ) -> PolicyResult:
        """The compactor's error. A decided compaction still fires (the decision was made),
        changing nothing; a requested one does not."""
        if not decided:
            return unchanged(
                Action.COMPACT, NAME, items, f"compaction failed: {error}", error=error, **figures
            )
        tokens = figures["context_tokens"]
        why = GoAgentPolicy._trigger_text(figures)
        return PolicyResult(
            action=Action.COMPACT,
            policy=NAME,
            fired=True,
            reason=f"{why}: compaction failed: {error}",
            items=list(items),
            changes=[],
            tokens_before=tokens,
            tokens_after=tokens,
            details={**figures, "failed": True, "error": error, "figure": tokens},
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
        # the loop summarizes tool results after they come in: never before a prompt's first
        # request
        if _summaries_due(current, prof) and not _incoming(current):
            summaries = self._tool_summaries(current, prof, estimate, summarizer, force=False)
            if summaries.fired:
                results.append(summaries)
                current = summaries.items
        trigger = _trigger(current, prof, reported, turn_end=True)
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

    def after_request(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        summarizer: Summarizer,
        *,
        figure: int,
        refused: RequestRejected | None = None,
    ) -> list[PolicyResult]:
        """The recovery after the provider refused a request as too long (``loop.go``): the
        compactor on the loop's list, once per prompt (``max_compaction_recoveries``); a
        recovery that fails is still a decision."""
        prof = _profile(profile)
        if refused is None or prof.max_compaction_recoveries <= 0:
            return []
        if _recoveries_in_prompt(items) >= prof.max_compaction_recoveries:
            return []
        size = refused.tokens if refused.tokens is not None else figure
        said = f" ({refused.reason})" if refused.reason else ""
        why = f"recovery: the provider refused the request ({_fmt(size)} tokens) as too long{said}"
        result = self._compact(
            items, prof, estimate, summarizer, force=True, reported=None, recovery=True
        )
        details = {**result.details, "recovery": True, "decided_on": size}
        if not result.fired:
            details.update(failed=True, error=result.details.get("error"))
            result = replace(result, fired=True, items=list(items))
        return [replace(result, reason=f"{why}; {result.reason}", details=details)]

    def undetermined(self, recorded: Decision, profile: Profile, seen: Situation) -> str | None:
        """Why a recorded decision cannot be replayed from this recording, if it cannot: a
        session file does not say what caused a compaction (a refusal by the provider it does
        not record, say)."""
        if recorded.kind == "compaction" and recorded.detail.startswith(TRIGGER_NOT_RECORDED):
            return (
                "the recording does not say what caused this compaction (for one, a provider's "
                "refusal it does not record): replay follows it and does not judge it"
            )
        return None

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
