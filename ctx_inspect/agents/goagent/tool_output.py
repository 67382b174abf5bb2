"""The Go agent's tool-output limits (``pkg/agent/tool_output.go`` ``truncateToolContent``),
and the notices it writes into an output it cut or spilled, read back.

An output of more than ``tool_output_large_threshold`` runes is spilled to a file and replaced by
a notice; the spill is **simulated**: the notice names a path that is never written. Otherwise
the output is cut by lines (head and tail with ``... [truncated N lines] ...`` in ``head_tail``
mode), then runes, then bytes, and the ``[tool output truncated: showing ...]`` notice is
appended. An output that already carries the notice is never cut twice: ``recut`` keeps the
agent's cut, cuts further, or sizes it larger from the notice's totals.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from ctx_inspect.agents.goagent.messages import fmt, trim_runes
from ctx_inspect.agents.goagent.profile import GoAgentProfile
from ctx_inspect.core.estimate import utf8_len

SPILL_PATH = "$TMPDIR/ai_tool_outputs/tool_output_<unix-ns>.txt (simulated: not written)"


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


def cuts(cut: RecordedCut, profile: GoAgentProfile) -> bool:
    """Whether these limits cut (or spill) the whole output."""
    whole = (cut.total_lines, cut.total_bytes, cut.total_chars)
    limits = _limits_of(profile)
    return _spills(cut, profile) or any(
        0 < limit < size for limit, size in zip(limits, whole, strict=True)
    )


def recut(cut: RecordedCut, profile: GoAgentProfile, text: str) -> tuple[str, str]:
    """The output as these limits would store it, from what the recording holds, and why."""
    if _spills(cut, profile):
        if cut.spilled:
            return text, f"the agent spilled this output of {fmt(cut.total_chars)} chars"
        notice = (
            f"[tool output too large: {cut.total_chars} chars]\nSaved to: {SPILL_PATH}\n"
            "SHA256: (the whole output is not in the recording)"
        )
        return notice, "these limits spill the output the agent cut (simulated)"
    size = cut.total_bytes
    if not cuts(cut, profile):
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
            return text, f"the agent cut this output of {fmt(cut.total_bytes)} bytes"
        limited = limit_tool_output(cut.kept, profile)
        if limited is None:
            return text, f"the agent cut this output of {fmt(cut.total_bytes)} bytes"
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
        f"the agent kept {fmt(cut.kept_bytes)} of {fmt(cut.total_bytes)} bytes; these limits "
        f"keep about {fmt(size)} (what the recording lacks is sized, not shown)"
    )
    return grown + notice, reason
