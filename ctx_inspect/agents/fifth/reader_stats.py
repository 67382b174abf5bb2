"""Fifth's context manager (quivent/fifth ``examples/context-manager``, seed 004): ``stats``.

``fifth-stats`` reads what ``main.fs stats`` prints (Forth's ``.`` prints a number and a space,
hence the double spaces)::

    Context Manager Statistics
    ===========================

    Token Usage:
      Total:     12847  / 16000  (80 %)
      Level 1:   1850  / 2000  (permanent)
      Level 2:   3200  / 4000  (session)
      Level 3:   6500  / 8000  (working)

    Storage:
      Messages:   156
      Summaries:  23
      Compressions: 0

Each block becomes a ``ContextMeasured`` (the Total, its budget and the printed integer
percentage) and a ``DebugTopic`` named ``levels`` with every figure; both span the whole block.
Any other text (``build`` output, ``Done.``, the REPL's prompt) is a ``LogLine``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ctx_inspect.core.model import ContextMeasured, DebugTopic, Event, LogLine, SourceSpan
from ctx_inspect.formats.base import LineParser, decode_text
from ctx_inspect.formats.registry import FormatSpec, Head, register

HEADER = "Context Manager Statistics"
_TOTAL = re.compile(r"^Total:\s+(-?\d+)\s+/\s+(-?\d+)\s+\(\s*(-?\d+)\s*%\s*\)$")
_LEVEL = re.compile(r"^Level\s+(\d+):\s+(-?\d+)\s+/\s+(-?\d+)\s+\(\s*([\w -]*?)\s*\)$")
_COUNT = re.compile(r"^(Messages|Summaries|Compressions):\s+(-?\d+)$")
_FIXED = re.compile(r"^(=+|Token Usage:|Storage:)$")
_FIGURE_LINE = re.compile(r"^(Total|Level\b.*|Messages|Summaries|Compressions):")


@dataclass
class _Block:
    start: SourceSpan
    last: SourceSpan
    total: int | None = None
    budget: int | None = None
    percent: int | None = None
    levels: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)


class FifthStatsParser(LineParser):
    """The ``stats`` command's output, block by block; other text as ``LogLine``."""

    format_name = "fifth-stats"

    def __init__(self, source: int = 0, path: str = "") -> None:
        super().__init__(source, path)
        self._block: _Block | None = None

    def parse_line(self, line: bytes, span: SourceSpan) -> Iterable[Event]:
        out: list[Event] = []
        text = decode_text(line, self, span, out).strip()
        if text == HEADER:
            self._close(out, complete=False)
            self._block = _Block(start=span, last=span)
            return out
        block = self._block
        if block is None:
            out.append(LogLine(text=text[:200], span=span))
            return out
        if _FIXED.match(text):
            block.last = span
            return out
        total = _TOTAL.match(text)
        level = _LEVEL.match(text)
        count = _COUNT.match(text)
        if total is not None:
            block.total, block.budget, block.percent = (int(g) for g in total.groups())
        elif level is not None:
            block.levels.append(
                {
                    "level": int(level[1]),
                    "tokens": int(level[2]),
                    "budget": int(level[3]),
                    "name": level[4],
                }
            )
        elif count is not None:
            block.counts[count[1].lower()] = int(count[2])
        elif _FIGURE_LINE.match(text):
            block.last = span
            out.append(self.issue(span, "unreadable figures in a stats block", line))
            return out
        else:  # the block ended early; this line is ordinary output
            self._close(out, complete=False)
            out.append(LogLine(text=text[:200], span=span))
            return out
        block.last = span
        if count is not None and count[1] == "Compressions":
            self._close(out, complete=True)
        return out

    def _close(self, out: list[Event], *, complete: bool) -> None:
        block = self._block
        if block is None:
            return
        self._block = None
        span = SourceSpan(
            source=block.start.source,
            offset=block.start.offset,
            length=block.last.offset + block.last.length - block.start.offset,
            line=block.start.line,
        )
        if block.total is None:
            out.append(self.issue(span, "stats block without a Total line"))
        else:
            out.append(
                ContextMeasured(
                    tokens=block.total,
                    limit=block.budget,
                    percent=float(block.percent) if block.percent is not None else None,
                    label="Total",
                    span=span,
                )
            )
        payload: dict[str, Any] = {
            "total": block.total,
            "budget": block.budget,
            "percent": block.percent,
            "levels": block.levels,
            **block.counts,
        }
        out.append(DebugTopic(name="levels", payload=payload, span=span))
        if not complete:
            reason = "stats block cut short (no 'Compressions:' line)"
            out.append(self.issue(block.last, reason))

    def end_of_input(self) -> Iterable[Event]:
        out: list[Event] = []
        self._close(out, complete=False)
        return out


def sniff_stats(head: Head) -> float:
    lines = [line.strip() for line in head.lines[:400]]
    if HEADER not in lines:
        return 0.0
    if any(_TOTAL.match(line) for line in lines):
        return 0.95
    return 0.7


STATS_SPEC = register(
    FormatSpec(
        name="fifth-stats",
        description="Fifth context manager: the output of its stats command",
        reads="saved output of `fifth examples/context-manager/main.fs stats` (one or more runs)",
        parser=FifthStatsParser,
        sniff=sniff_stats,
        default_profile="fifth",
    )
)
