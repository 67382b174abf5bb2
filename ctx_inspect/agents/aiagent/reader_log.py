"""netdata ai-agent (seed 002): its log on stderr, logfmt (``aiagent-log``).

``aiagent-log`` reads logfmt records (``ts=... level=... priority=... type=... message=``)
wrapped in ANSI colour even off a terminal, which can start in the middle of a line (the final
report is echoed without a trailing newline, so the record is found by the colour code followed
by ``ts=`` anywhere in the line), the plain ``[VRB] → [0.0] type remote: message`` probe lines
at the start and the ``[VRB] ← [0.0] agent EXIT-...`` line at the end. What each record means
is ``interpreter.py`` (shared with the console format, ``reader_console``).

A record that starts like logfmt (``ts=``) but cannot be read is a ``ParseIssue``; other text
on stderr is a ``LogLine``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from typing import Any

from ctx_inspect.agents.aiagent.interpreter import Interpreter
from ctx_inspect.agents.aiagent.log_guard import Record
from ctx_inspect.agents.aiagent.merge import merge
from ctx_inspect.agents.aiagent.values import int_value
from ctx_inspect.core.model import Event, LogLine, SessionInfo, SourceSpan
from ctx_inspect.formats.base import LineParser, decode_text
from ctx_inspect.formats.jsinspect import strip_ansi
from ctx_inspect.formats.registry import FormatSpec, Head, register

# a record starts the line with ``ts=`` or follows colour codes; those are found with
# ``bytes.find``, as a regular expression that starts with a repetition tries every byte
_COLOURED_START = re.compile(rb"(?:\x1b\[[0-9;]*m)+ts=")


def _record_starts(line: bytes) -> list[int]:
    """Where each logfmt record of ``line`` starts (its colour codes included)."""
    starts = [0] if line.startswith(b"ts=") else []
    pos = line.find(b"\x1b[", 3 if starts else 0)
    while pos >= 0:
        found = _COLOURED_START.match(line, pos)
        if found is not None:
            starts.append(pos)
            pos = line.find(b"\x1b[", found.end())
        else:
            pos = line.find(b"\x1b[", pos + 1)
    return starts


_KEY = re.compile(r"([A-Za-z_][\w.-]*)=")
_PROBE = re.compile(r"^\[(VRB|WRN|ERR|FIN|THK|TRC)\] ([→←]) \[(\d+)\.(\d+)\] (\S+) (\S+?): (.*)$")


def parse_logfmt(text: str) -> dict[str, str]:
    """The key/value pairs of one logfmt record; ``ValueError`` says why it cannot be read.

    ai-agent quotes a value that holds whitespace, ``=`` or ``"`` and escapes only ``"``, so a
    quoted value ends at a ``"`` that is not escaped and is followed by the end or by
    `` key=``.
    """
    pairs: dict[str, str] = {}
    pos = 0
    n = len(text)
    while True:
        while pos < n and text[pos] == " ":
            pos += 1
        if pos >= n:
            return pairs
        m = _KEY.match(text, pos)
        if m is None:
            raise ValueError(f"expected key=value at column {pos + 1}")
        key = m.group(1)
        pos = m.end()
        if pos < n and text[pos] == '"':
            end = pos + 1
            while True:
                end = text.find('"', end)
                if end < 0:
                    raise ValueError(f"unterminated quoted value of {key}")
                after = end + 1
                if text[end - 1] != "\\" and (
                    after == n or (text[after] == " " and _key_or_end(text, after))
                ):
                    break
                end += 1
            value = text[pos + 1 : end].replace('\\"', '"')
            pos = end + 1
        else:
            end = text.find(" ", pos)
            end = n if end < 0 else end
            value = text[pos:end]
            pos = end
        pairs.setdefault(key, value)


def _key_or_end(text: str, pos: int) -> bool:
    n = len(text)
    while pos < n and text[pos] == " ":
        pos += 1
    return pos == n or _KEY.match(text, pos) is not None


_RECORD_KEYS = frozenset(
    {
        "ts",
        "level",
        "priority",
        "type",
        "direction",
        "turn",
        "subturn",
        "message_id",
        "remote",
        "tool_kind",
        "tool_namespace",
        "tool",
        "headend",
        "agent",
        "agent_path",
        "call_path",
        "turn_path",
        "txn_id",
        "parent_txn_id",
        "origin_txn_id",
        "provider",
        "model",
        "message",
    }
)


class AiAgentLogParser(LineParser):
    """ai-agent's stderr: logfmt records (ANSI-coloured), probe lines and other text."""

    format_name = "aiagent-log"

    def __init__(self, source: int = 0, path: str = "") -> None:
        super().__init__(source, path)
        self._meaning = Interpreter()

    def parse_line(self, line: bytes, span: SourceSpan) -> Iterable[Event]:
        out: list[Event] = []
        starts = _record_starts(line)
        if not starts:
            text = decode_text(line, self, span, out)
            out.extend(self._plain(text, span))
            return out
        bounds = [*starts, len(line)]
        if starts[0] > 0:
            piece = line[: starts[0]]
            sub = _sub_span(span, 0, len(piece))
            text = decode_text(piece, self, sub, out)
            out.extend(self._plain(text, sub))
        for begin, end in itertools.pairwise(bounds):
            piece = line[begin:end]
            sub = _sub_span(span, begin, end - begin)
            text = strip_ansi(decode_text(piece, self, sub, out)).rstrip()
            out.extend(self._record(text, sub, piece))
        return out

    def _record(self, text: str, span: SourceSpan, raw: bytes) -> list[Event]:
        try:
            pairs = parse_logfmt(text)
        except ValueError as exc:
            return [self.issue(span, f"unreadable logfmt record ({exc})", raw)]
        if "level" not in pairs:
            return [self.issue(span, "logfmt record without a level", raw)]
        rec = Record(
            message=pairs.get("message", ""),
            span=span,
            level=pairs["level"].lower(),
            timestamp=pairs.get("ts") or None,
            turn=int_value(pairs.get("turn")),
            remote=pairs.get("remote"),
            provider=pairs.get("provider"),
            model=pairs.get("model"),
            agent_path=pairs.get("agent_path") or pairs.get("agent"),
            details={k: v for k, v in pairs.items() if k not in _RECORD_KEYS or k == "agent"},
        )
        return self._meaning.events(rec)

    def end_of_input(self) -> Iterable[Event]:
        return self._meaning.flush()

    def _plain(self, text: str, span: SourceSpan) -> list[Event]:
        out = self._meaning.flush()
        clean = strip_ansi(text).rstrip()
        if not clean.strip():
            return [*out, LogLine(text=clean, span=span)]
        m = _PROBE.match(clean)
        if m is None:
            return [*out, LogLine(text=clean, span=span)]
        sev, _arrow, turn, _sub, _kind, remote, message = m.groups()
        rec = Record(
            message=message,
            span=span,
            level=sev.lower(),
            turn=int(turn),
            remote=remote,
        )
        if remote.startswith("EXIT-"):
            extra: dict[str, Any] = {"exit": remote}
            if not self._meaning.outcome_seen:
                extra["outcome"] = remote
            return [*out, SessionInfo(extra=extra, span=span), self._meaning.log(rec)]
        return [*out, self._meaning.log(rec)]


def _sub_span(span: SourceSpan, start: int, length: int) -> SourceSpan:
    return SourceSpan(source=span.source, offset=span.offset + start, length=length, line=span.line)


_SNIFF_LOGFMT = re.compile(
    r"(?:^|\x1b\[[0-9;]*m)ts=\S+ level=(?:vrb|wrn|err|fin|thk|trc) priority=\d "
)


def sniff_log(head: Head) -> float:
    lines = head.lines
    if any(_SNIFF_LOGFMT.search(line) for line in lines[:2000]):
        return 0.95
    probes = sum(1 for line in lines[:50] if _PROBE.match(strip_ansi(line)))
    if probes and probes >= min(len(lines), 50) // 2:
        return 0.8
    return 0.0


LOG_SPEC = register(
    FormatSpec(
        name="aiagent-log",
        description="netdata ai-agent stderr: logfmt records (context, usage, forced final turns)",
        reads="stderr of ai-agent (logfmt, *.log)",
        parser=AiAgentLogParser,
        sniff=sniff_log,
        default_profile="aiagent",
        stream_merge=merge,
    )
)
