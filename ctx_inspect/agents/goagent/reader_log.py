"""``goagent-log``: the Go agent's log file, ``~/.ai/ai-<pid>.log``.

``[LEVEL] 2006-01-02T15:04:05.999 file.go:N "<prefix><message>" key=value ...`` (values
``%q``-quoted when they hold spaces, quotes or backslashes; no time zone). The compaction
messages of one attempt (``[Agent] Auto-compacting``, ``[Compact] Compressing messages``,
``[Compact] Generated summary``, ``[Compact] Compressed to messages``, ``[Agent] Auto-compact
successful`` / ``failed``, ``Compaction recovery failed``) make one ``Compacted`` at the line
that ends it; an attempt that does not start with ``Auto-compacting`` came from the recovery
path (``context_limit_recovery``; a manual compact through RPC looks the same in the log). With
``--debug``, ``[Loop] Sending messages to LLM`` is a request and the loop's own
``compaction_start`` / ``compaction_end`` events (``[Agent] Got event``) a recovery, which stands
for a refused request; ``Error streaming response`` with a context-length error is a refusal
with the provider's figures. Every other line, and each line inside an attempt, is a
``LogLine``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ctx_inspect.agents.goagent.figures import provider_refusal
from ctx_inspect.agents.goagent.merge import merge_run
from ctx_inspect.agents.goagent.records import LOG_FORMAT
from ctx_inspect.core.model import (
    Compacted,
    Event,
    LogLine,
    RequestRejected,
    RequestSent,
    SourceSpan,
)
from ctx_inspect.formats.base import LineParser, decode_text
from ctx_inspect.formats.registry import FormatSpec, Head, register

# a ``%q`` body: runs of plain characters between escapes (``(?:[^"\\]|\\.)*`` matches the
# same texts, but steps through a group per character: 40 times slower on a long value)
_QUOTED_BODY = r'[^"\\]*(?:\\.[^"\\]*)*'
LOG_LINE = re.compile(
    r"^\[(?P<level>[A-Z]+(?:[+-]\d+)?)\] "
    r"(?P<ts>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,3})?)"
    r'(?: (?P<src>[^\s"]+:\d+))? '
    rf'"(?P<msg>{_QUOTED_BODY})"(?P<attrs>.*)$'
)
# a key starts after a blank (a lookbehind: ``\s+`` in the pattern would scan a run of blanks
# again from each of them, time growing with the square of the run's length)
_ATTR = re.compile(rf'(?<=\s)(?P<key>[^\s="]+)=(?P<value>"{_QUOTED_BODY}"|\S*)')
_GO_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{3}|.)")
_SIMPLE_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    '"': '"',
    "'": "'",
}
_COMPONENT = re.compile(r"^\[(?P<tag>[A-Za-z][\w-]*)\] ")


def go_unquote(body: str) -> str:
    """The text of a Go ``%q`` literal's body (without its quotes)."""

    def replace(match: re.Match[str]) -> str:
        code = match.group(1)
        if code[0] in "uU":
            value = int(code[1:], 16)
            return chr(value) if value <= 0x10FFFF else "\ufffd"
        if code[0] == "x" or (len(code) == 3 and code.isdigit()):
            value = int(code[1:], 16) if code[0] == "x" else int(code, 8)
            return chr(value) if value < 0x80 else "\ufffd"  # a lone byte of broken UTF-8
        return _SIMPLE_ESCAPES.get(code, code)

    return _GO_ESCAPE.sub(replace, body)


def log_attrs(text: str) -> dict[str, str]:
    attrs: dict[str, str] = {}
    for match in _ATTR.finditer(text):
        value = match["value"]
        if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
            value = go_unquote(value[1:-1])
        attrs[match["key"]] = value
    return attrs


@dataclass
class _Attempt:
    auto: bool
    before: int | None = None
    after: int | None = None
    compressed: bool = False
    timestamp: str | None = None
    recovery: bool = False  # opened by the debug log's compaction_start event of the loop


def _count(attrs: dict[str, str], key: str) -> int | None:
    try:
        return int(attrs[key])
    except (KeyError, ValueError):
        return None


class GoLogParser(LineParser):
    """The Go agent's log file: one ``Compacted`` per compaction attempt, the rest ``LogLine``."""

    format_name = LOG_FORMAT

    def __init__(self, source: int = 0, path: str = "") -> None:
        super().__init__(source, path)
        self._attempt: _Attempt | None = None
        # a refusal known from a recovery that started, told when the provider's own
        # message comes (a failed recovery) or when the loop goes on
        self._refusal: RequestRejected | None = None

    def parse_line(self, line: bytes, span: SourceSpan) -> Iterable[Event]:
        out: list[Event] = []
        text = decode_text(line, self, span, out)
        match = LOG_LINE.match(text)
        if match is None:
            out.append(self.issue(span, "not a log line of the Go agent", line))
            return out
        level = match["level"]
        timestamp = match["ts"]
        message = go_unquote(match["msg"])
        attrs = log_attrs(match["attrs"])
        if self._compaction(message, attrs, timestamp, span, out):
            return out
        body = message[5:] if message.startswith("[ai] ") else message
        component = _COMPONENT.match(body)
        summary = f"{body}{match['attrs']}".strip()
        out.append(
            LogLine(
                text=summary[:200],
                level=level,
                tag=component["tag"] if component else None,
                timestamp=timestamp,
                span=span,
            )
        )
        return out

    def _requests(
        self, message: str, attrs: dict[str, str], at: tuple[str, SourceSpan], out: list[Event]
    ) -> None:
        timestamp, span = at
        if message.endswith("[Loop] Sending messages to LLM"):
            self._tell_refusal(out)
            out.append(RequestSent(timestamp=timestamp, span=span))
        elif message.endswith("Error streaming response"):
            refusal = provider_refusal(attrs.get("error") or "", timestamp)
            if refusal is not None:
                self._refusal = None
                out.append(refusal.model_copy(update={"span": span}))
        elif message.endswith("[Agent] Got event"):
            kind = attrs.get("type")
            if kind == "compaction_start":
                # only the loop's own compaction (the recovery) passes through its events
                self._flush(out, ended=True)
                self._tell_refusal(out)
                self._attempt = _Attempt(auto=False, timestamp=timestamp, recovery=True)
                self._refusal = RequestRejected(
                    reason="the provider refused the request as too long "
                    "(the agent started its context-limit recovery)",
                    timestamp=timestamp,
                    span=span,
                )
            elif kind == "compaction_end" and self._attempt and self._attempt.recovery:
                attempt, self._attempt = self._attempt, None
                self._tell_refusal(out)
                attempt.compressed = True
                out.append(self._outcome(attempt, span, timestamp))

    def _tell_refusal(self, out: list[Event]) -> None:
        if self._refusal is not None:
            out.append(self._refusal)
            self._refusal = None

    def _compaction(
        self,
        message: str,
        attrs: dict[str, str],
        timestamp: str,
        span: SourceSpan,
        out: list[Event],
    ) -> bool:
        """Handle a compaction message, a model request (the debug log names each one) or
        the provider's refusal; False when the line is no outcome (a LogLine follows)."""
        self._requests(message, attrs, (timestamp, span), out)
        attempt = self._attempt
        if message.endswith("[Agent] Auto-compacting"):
            self._flush(out, ended=True)
            self._attempt = _Attempt(auto=True, before=_count(attrs, "beforeCount"))
            self._attempt.timestamp = timestamp
        elif message.endswith("[Compact] Compressing messages"):
            if attempt is None:
                attempt = self._attempt = _Attempt(auto=False, timestamp=timestamp)
            if attempt.before is None:
                attempt.before = _count(attrs, "count")
        elif message.endswith("[Compact] Generated summary"):
            if attempt is None:
                self._attempt = _Attempt(auto=False, timestamp=timestamp)
        elif message.endswith("[Compact] Compressed to messages"):
            if attempt is None:
                attempt = self._attempt = _Attempt(auto=False, timestamp=timestamp)
            attempt.after = _count(attrs, "count")
            attempt.compressed = True
            if not attempt.auto:
                self._attempt = None
                out.append(self._outcome(attempt, span, timestamp))
                return True
        elif message.endswith("[Agent] Auto-compact successful"):
            attempt = attempt or _Attempt(auto=True)
            self._attempt = None
            attempt.before = _count(attrs, "before") or attempt.before
            after = _count(attrs, "after")
            attempt.after = after if after is not None else attempt.after
            attempt.compressed = True
            out.append(self._outcome(attempt, span, timestamp))
            return True
        elif message.endswith("[Agent] Auto-compact failed"):
            attempt = attempt or _Attempt(auto=True)
            self._attempt = None
            out.append(self._outcome(attempt, span, timestamp, attrs.get("error") or "failed"))
            return True
        elif message.endswith("Compaction recovery failed"):
            attempt = attempt or _Attempt(auto=False)
            attempt.auto = False
            self._attempt = None
            out.append(self._outcome(attempt, span, timestamp, attrs.get("error") or "failed"))
            return True
        return False

    def _outcome(
        self,
        attempt: _Attempt,
        span: SourceSpan | None,
        timestamp: str | None,
        error: str | None = None,
    ) -> Compacted:
        return Compacted(
            trigger="auto" if attempt.auto else "context_limit_recovery",
            messages_before=attempt.before,
            messages_after=None if error else attempt.after,
            failed=error is not None,
            error=error,
            timestamp=timestamp or attempt.timestamp,
            span=span,
        )

    def _flush(self, out: list[Event], *, ended: bool) -> None:
        """An open attempt with no outcome line: done if it compressed, else (when another
        attempt started) failed without saying why; at the end of the input it may still run."""
        attempt = self._attempt
        if attempt is None:
            return
        self._attempt = None
        if attempt.compressed:
            out.append(self._outcome(attempt, None, attempt.timestamp))
        elif ended:
            out.append(self._outcome(attempt, None, attempt.timestamp, "no outcome in the log"))

    def end_of_input(self) -> Iterable[Event]:
        out: list[Event] = []
        self._tell_refusal(out)
        self._flush(out, ended=False)
        return out


def sniff_log(head: Head) -> float:
    lines = head.lines[:200]
    if not lines:
        return 0.0
    matched = sum(1 for line in lines if LOG_LINE.match(line))
    if matched == 0:
        return 0.0
    return 0.9 if matched * 2 >= len(lines) else 0.3


LOG_SPEC = register(
    FormatSpec(
        name=LOG_FORMAT,
        description="Go agent 'ai' (tiancaiamao/ai): its log file",
        reads="~/.ai/ai-<pid>.log",
        parser=GoLogParser,
        sniff=sniff_log,
        default_profile="goagent",
        stream_merge=merge_run,
    )
)
