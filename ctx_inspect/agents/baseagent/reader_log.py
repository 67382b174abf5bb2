"""BaseAgent ("SuperAgent", BaseIntelligence/baseagent): its stderr log, ``baseagent-log``.

Checked on real runs of bcb9023 (``README.md`` of this package). The reader of its stdout is
``reader_events.py``; ``merge.py`` makes one session of the two streams of a run.

``baseagent-log`` reads stderr, lines ``[HH:MM:SS] [tag] message`` (tags ``superagent``,
``loop``, ``compaction``):

- ``Context: N tokens (P% of U)`` -> ``ContextMeasured(N, limit=U, percent=P, label="Context")``,
  exactly as printed: BaseAgent's own figure (chars / 4 of its messages, the system prompt
  included) and the step's figure. P can pass 100: a prune is applied to a copy for one request
  only, so the logged estimate keeps growing until an AI compaction.
- The prune attempt (``Prune scan: T total tokens, P prunable``, then ``Prune skipped: only P
  tokens recoverable (min: M)`` or ``Pruning N tool outputs, recovering ~P tokens``, then
  ``Pruning sufficient: A -> B tokens`` or ``Pruning insufficient (B tokens), running AI
  compaction...``) -> one ``Pruned`` when its outcome line arrives (or at the next line that is
  not part of it): ``scanned_tokens=T``, ``tokens_recovered=P``, ``outputs_pruned=N``,
  ``applied`` (False when skipped), ``tokens_before`` (A, or the iteration's ``Context`` figure),
  ``tokens_after=B``, ``persistent=False`` (the pruned copy serves one request: the step keeps
  the ``Context`` figure, the prune says what was sent), ``reason`` (``sufficient``,
  ``insufficient``, or the skip's ``only P tokens recoverable (min: M)``). BaseAgent keeps no
  pruned list, so every later iteration over the threshold prunes again: one event each.
- The compaction (``Starting AI compaction...``, ``Compaction complete: S token summary`` or
  ``Compaction failed: ...``, ``Compaction result: A -> B tokens``, then ``[loop] Context
  compacted: N -> M messages`` when it worked) -> the summarisation call, a request of its own
  (``RequestSent(compaction=True, request_id="compaction-<i>")``, at the ``Starting`` line's
  time, before the iteration's own request), then ``Compacted(trigger="auto", tokens_before=A,
  tokens_after=B, summary_tokens=S, messages_before=N, messages_after=M, keep_system=True,
  retained_ids=())``: BaseAgent keeps exactly the system prompt and one user message holding the
  summary. So the call's step shows the context it summarised and the iteration's request shows
  B. A failed one is emitted at its result line (``failed=True``, ``error``, with the lines of a
  message that spans several); nothing was removed, and B is then the size of the (possibly
  pruned) copy that is sent. A call that raised (any error but ``empty response``) got no
  answer and is no request (BaseAgent's client counts none): the failed attempt then belongs to
  the iteration's own request. Lines of another program that come while a compaction is logged
  follow its events. The log never shows the summary text, so no summary message is emitted.
- ``[loop] Iteration i/max`` starts an iteration; its model request is sent after the context
  management of the iteration (``[compaction]`` lines, ``Context compacted``) and after
  ``Prompt caching: ...`` (logged by the last step before ``llm.chat``). So ``RequestSent`` is
  emitted right after the ``Prompt caching`` line, or, when caching is off, just before the first
  later line that is not part of the build-up (``Executing tool``, ``No tool calls in response``,
  an ``LLM error`` retry line, the next ``Iteration``, the end of input). Retries of the same
  request are not separate requests.
- ``[superagent]`` banner lines: ``Model:`` -> ``SessionInfo(model)``; ``SuperAgent Starting
  (SDK v ...)`` -> ``SessionInfo(agent="baseagent", version=v)``; ``Provider:``, ``Reasoning
  effort:``, ``Total tokens:``, ``Total cost:``, ``Requests:`` (the client's count: iterations
  and answered summarisation calls), ``Elapsed:`` -> ``SessionInfo.extra``. Every other line
  (``Tokens: in input, cached cached, out output`` is the loop's total and leaves out
  compaction calls) -> ``LogLine(tag, level)``; lines of another shape (Python tracebacks,
  LiteLLM notices) -> ``LogLine(level="foreign")``. A line of the right shape with an impossible
  time, or a known message whose figures cannot be read, is a ``ParseIssue``.

Times are local clock times without a date. They become ISO timestamps on a nominal date,
``0001-01-01T14:30:16``, moving to the next day each time the clock goes backwards (midnight).
(A daylight-saving change that sets the clock back also counts as a new day.)
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from ctx_inspect.agents.baseagent.profile import OUTPUT_TOKEN_MAX
from ctx_inspect.core.model import (
    Compacted,
    ContextMeasured,
    Event,
    LogLine,
    Pruned,
    RequestSent,
    SessionInfo,
    SourceSpan,
)
from ctx_inspect.formats.base import LineParser, decode_text
from ctx_inspect.formats.jsinspect import strip_ansi
from ctx_inspect.formats.registry import Head

AGENT = "baseagent"
NOMINAL_DATE = date(1, 1, 1)

_LINE = re.compile(r"^\[(\d\d):(\d\d):(\d\d)\] \[(\w+)\] ?(.*)$", re.S)
_KNOWN_TAGS = frozenset({"superagent", "loop", "compaction"})

# [compaction] messages (src/core/compaction.py)
_CONTEXT = re.compile(r"^Context: (\d+) tokens \((\d+(?:\.\d+)?)% of (\d+)\)$")
_SCAN = re.compile(r"^Prune scan: (\d+) total tokens, (\d+) prunable$")
_SKIPPED = re.compile(r"^Prune skipped: only (\d+) tokens recoverable \(min: (\d+)\)$")
_PRUNING = re.compile(r"^Pruning (\d+) tool outputs, recovering ~(\d+) tokens$")
_SUFFICIENT = re.compile(r"^Pruning sufficient: (\d+) -> (\d+) tokens$")
_INSUFFICIENT = re.compile(r"^Pruning insufficient \((\d+) tokens\), running AI compaction\.\.\.$")
_COMPLETE = re.compile(r"^Compaction complete: (\d+) token summary$")
_FAILED = re.compile(r"^Compaction failed: (.*)$", re.S)
_RESULT = re.compile(r"^Compaction result: (\d+) -> (\d+) tokens$")
_STARTING = "Starting AI compaction..."
_EMPTY_ANSWER = "empty response"  # the summarizer answered with no text
_OVERFLOW = "Context overflow detected"
# prefixes of the messages above whose figures must read (else the line is a ParseIssue)
_FIGURED = (
    ("Context: ", _CONTEXT),
    ("Prune scan:", _SCAN),
    ("Prune skipped:", _SKIPPED),
    ("Pruning sufficient:", _SUFFICIENT),
    ("Pruning insufficient", _INSUFFICIENT),
    ("Compaction complete:", _COMPLETE),
    ("Compaction result:", _RESULT),
)

# [loop] messages (src/core/loop.py)
ITERATION = re.compile(r"^Iteration (\d+)/(\d+)$")
_COMPACTED = re.compile(r"^Context compacted: (\d+) -> (\d+) messages$")
_CACHING = "Prompt caching:"
_LOOP_ERRORS = ("LLM error", "Unexpected error", "Cost limit exceeded")

# [superagent] banner (agent.py)
_STARTING_BANNER = re.compile(r"SuperAgent Starting \((.*)\)")
_SDK = re.compile(r"SDK ([\w.]+)")
_BANNER_EXTRA: tuple[tuple[str, str, str], ...] = (
    ("Provider: ", "provider", "text"),
    ("Reasoning effort: ", "reasoning_effort", "text"),
    ("Total tokens: ", "client_total_tokens", "int"),
    ("Total cost: $", "total_cost_usd", "float"),
    ("Requests: ", "requests", "int"),
    ("Elapsed: ", "elapsed_s", "seconds"),
)


class NominalClock:
    """Dateless ``HH:MM:SS`` times as ISO timestamps on a nominal date, a day per wrap."""

    def __init__(self) -> None:
        self.day = 0
        self.last: int | None = None

    def stamp(self, hours: int, minutes: int, seconds: int) -> str:
        now = hours * 3600 + minutes * 60 + seconds
        if self.last is not None and now < self.last:
            self.day += 1
        self.last = now
        day = NOMINAL_DATE + timedelta(days=self.day)
        return f"{day.isoformat()}T{hours:02d}:{minutes:02d}:{seconds:02d}"


@dataclass
class _PruneHeld:
    scanned: int
    prunable: int
    spans: list[SourceSpan]
    timestamp: str
    context: int | None  # the iteration's Context figure, the size before the prune
    outputs: int | None = None
    skipped: str | None = None  # the skip's reason


@dataclass
class _CompactionHeld:
    spans: list[SourceSpan]
    timestamp: str
    summary_tokens: int | None = None
    failed: bool = False
    error: str | None = None
    before: int | None = None
    after: int | None = None
    result_seen: bool = False
    # notes (other programs' lines, parse issues) that came while it ran: they follow it, so
    # the compaction stays the answer to its summarisation call
    notes: list[Event] = field(default_factory=list)
    call: RequestSent | None = None  # the summarisation call


@dataclass
class _Iteration:
    number: int
    span: SourceSpan
    timestamp: str
    last_timestamp: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _join(spans: list[SourceSpan]) -> SourceSpan:
    first, last = spans[0], spans[-1]
    return SourceSpan(
        source=first.source,
        offset=first.offset,
        length=last.offset + last.length - first.offset,
        line=first.line,
    )


class BaseAgentLogParser(LineParser):
    """BaseAgent's stderr: ``[HH:MM:SS] [tag] message`` lines."""

    format_name = "baseagent-log"

    def __init__(self, source: int = 0, path: str = "") -> None:
        super().__init__(source, path)
        self._clock = NominalClock()
        self._iteration: _Iteration | None = None  # an iteration whose request is not sent yet
        self._context: int | None = None
        self._prune: _PruneHeld | None = None
        self._compaction: _CompactionHeld | None = None
        self._usable: int | None = None  # the usable window the Context lines measure against

    # -- lines ----------------------------------------------------------------------------

    def parse_line(self, line: bytes, span: SourceSpan) -> Iterable[Event]:
        out: list[Event] = []
        text = decode_text(line, self, span, out)
        m = _LINE.match(text)
        if m is None:
            return self._held_notes(out, self._foreign(text, span))
        hours, minutes, seconds = int(m.group(1)), int(m.group(2)), int(m.group(3))
        if hours > 23 or minutes > 59 or seconds > 59:
            out.append(self.issue(span, f"impossible time {m.group(1)}:{m.group(2)}:{m.group(3)}"))
            return out
        ts = self._clock.stamp(hours, minutes, seconds)
        tag, message = m.group(4), m.group(5).rstrip()
        for prefix, pattern in _FIGURED:
            if tag == "compaction" and message.startswith(prefix) and not pattern.match(message):
                out.append(self.issue(span, f"unreadable [compaction] line ({prefix.strip()})"))
                return self._held_notes(out, [])
        if tag == "compaction":
            out.extend(self._compaction_line(message, span, ts))
        elif tag == "loop":
            out.extend(self._loop_line(message, span, ts))
        else:
            out.extend(self._settle())
            out.extend(self._other_line(tag, message, span, ts))
        return out

    def end_of_input(self) -> Iterable[Event]:
        return self._settle()

    def _foreign(self, text: str, span: SourceSpan) -> list[Event]:
        """A line of another shape; while a failed compaction's error is being logged, the
        next line of that error (an exception's message can hold line breaks)."""
        held = self._compaction
        if held is not None and held.failed and not held.result_seen:
            held.error = f"{held.error}\n{strip_ansi(text).rstrip()}"
            held.spans.append(span)
            return []
        return [LogLine(text=strip_ansi(text).rstrip(), level="foreign", span=span)]

    def _held_notes(self, out: list[Event], more: list[Event]) -> list[Event]:
        """``out`` and ``more``: at once, or after the compaction being logged, if one is."""
        out.extend(more)
        if self._compaction is None:
            return out
        self._compaction.notes.extend(out)
        return []

    def _compaction_line(self, message: str, span: SourceSpan, ts: str) -> list[Event]:
        out: list[Event] = []
        if self._iteration is not None:
            self._iteration.last_timestamp = ts
        if m := _CONTEXT.match(message):
            out.extend(self._flush_held())
            tokens = int(m.group(1))
            self._context = tokens
            usable = int(m.group(3))
            if usable != self._usable:
                self._usable = usable
                out.append(_window_info(usable, ts, span))
            out.append(
                ContextMeasured(
                    tokens=tokens,
                    limit=int(m.group(3)),
                    percent=float(m.group(2)),
                    label="Context",
                    timestamp=ts,
                    span=span,
                )
            )
        elif m := _SCAN.match(message):
            out.extend(self._flush_held())
            self._prune = _PruneHeld(
                scanned=int(m.group(1)),
                prunable=int(m.group(2)),
                spans=[span],
                timestamp=ts,
                context=self._context,
            )
        elif (m := _SKIPPED.match(message)) and self._prune is not None:
            self._prune.spans.append(span)
            self._prune.prunable = int(m.group(1))
            self._prune.skipped = f"only {m.group(1)} tokens recoverable (min: {m.group(2)})"
        elif (m := _PRUNING.match(message)) and self._prune is not None:
            self._prune.spans.append(span)
            self._prune.outputs = int(m.group(1))
            self._prune.prunable = int(m.group(2))
        elif (m := _SUFFICIENT.match(message)) and self._prune is not None:
            out.append(self._pruned(span, int(m.group(2)), before=int(m.group(1)), enough=True))
        elif (m := _INSUFFICIENT.match(message)) and self._prune is not None:
            out.append(self._pruned(span, int(m.group(1)), before=None, enough=False))
        elif message == _STARTING:
            out.extend(self._flush_held())
            # the summarisation call: a model request of its own, made before the iteration's
            # own request; the compaction that follows answers it
            number = self._iteration.number if self._iteration is not None else None
            call = RequestSent(
                request_id="compaction" if number is None else f"compaction-{number}",
                compaction=True,
                timestamp=ts,
                span=span,
            )
            self._compaction = _CompactionHeld(spans=[span], timestamp=ts, call=call)
        elif (m := _COMPLETE.match(message)) and self._compaction is not None:
            self._compaction.spans.append(span)
            self._compaction.summary_tokens = int(m.group(1))
        elif (m := _FAILED.match(message)) and self._compaction is not None:
            self._compaction.spans.append(span)
            self._compaction.failed = True
            self._compaction.error = m.group(1)
        elif (m := _RESULT.match(message)) and self._compaction is not None:
            held = self._compaction
            held.spans.append(span)
            held.before, held.after = int(m.group(1)), int(m.group(2))
            held.result_seen = True
            if held.failed:
                out.extend(self._compacted())
        else:
            # the overflow notice, a piece out of its flow, or a message this reader does not know
            if not message.startswith(_OVERFLOW):
                out.extend(self._flush_held())
            level = "warn" if message.startswith((_OVERFLOW, "Compaction failed")) else "info"
            out.append(
                LogLine(text=message, level=level, tag="compaction", timestamp=ts, span=span)
            )
        return out

    def _loop_line(self, message: str, span: SourceSpan, ts: str) -> list[Event]:
        out: list[Event] = []
        if m := _COMPACTED.match(message):
            held = self._compaction
            out.extend(self._flush_prune())
            if held is None:
                held = _CompactionHeld(spans=[], timestamp=ts)
            self._compaction = None
            held.spans.append(span)
            held.result_seen = True  # the loop took a shorter list: it compacted
            out.extend(self._compacted(held, int(m.group(1)), int(m.group(2))))
            if self._iteration is not None:
                self._iteration.last_timestamp = ts
            return out
        if m := ITERATION.match(message):
            out.extend(self._settle())
            self._context = None
            out.append(LogLine(text=message, level="info", tag="loop", timestamp=ts, span=span))
            self._iteration = _Iteration(
                number=int(m.group(1)), span=span, timestamp=ts, last_timestamp=ts
            )
            return out
        if message.startswith(_CACHING):
            out.extend(self._flush_held())
            out.append(LogLine(text=message, level="info", tag="loop", timestamp=ts, span=span))
            if self._iteration is not None:
                self._iteration.last_timestamp = ts
            out.extend(self._send())
            return out
        out.extend(self._settle())
        if message.startswith(_LOOP_ERRORS):
            level = "error"
        elif message.startswith("Retrying in"):
            level = "warn"
        else:
            level = "info"
        out.append(LogLine(text=message, level=level, tag="loop", timestamp=ts, span=span))
        return out

    def _other_line(self, tag: str, message: str, span: SourceSpan, ts: str) -> list[Event]:
        if tag == "superagent":
            info = _banner_info(message)
            if info is not None:
                return [info.model_copy(update={"timestamp": ts, "span": span})]
        lowered = message.lower()
        level = "error" if "error" in lowered or "failed" in lowered else "info"
        return [LogLine(text=message, level=level, tag=tag, timestamp=ts, span=span)]

    # -- held pieces ----------------------------------------------------------------------

    def _settle(self) -> list[Event]:
        """The build-up of the current iteration is over: flush what is held, send its request."""
        out = self._flush_held()
        out.extend(self._send())
        return out

    def _send(self) -> list[Event]:
        iteration = self._iteration
        if iteration is None:
            return []
        self._iteration = None
        return [
            RequestSent(
                request_id=f"iteration-{iteration.number}",
                timestamp=iteration.last_timestamp or iteration.timestamp,
                span=iteration.span,
            )
        ]

    def _flush_held(self) -> list[Event]:
        out = self._flush_prune()
        if self._compaction is not None:
            out.extend(self._compacted())
        return out

    def _flush_prune(self) -> list[Event]:
        if self._prune is None:
            return []
        return [self._pruned(None, None, before=None, enough=None)]

    def _pruned(
        self, span: SourceSpan | None, after: int | None, *, before: int | None, enough: bool | None
    ) -> Pruned:
        held = self._prune
        assert held is not None
        self._prune = None
        if span is not None:
            held.spans.append(span)
        applied = held.skipped is None and held.outputs is not None
        if held.skipped is not None:
            reason = held.skipped
        elif enough is None:
            reason = "outcome not logged"
        else:
            reason = "sufficient" if enough else "insufficient"
        return Pruned(
            tokens_before=before if before is not None else held.context,
            tokens_after=after,
            tokens_recovered=held.prunable,
            scanned_tokens=held.scanned,
            outputs_pruned=held.outputs,
            applied=applied,
            persistent=False,
            reason=reason,
            timestamp=held.timestamp,
            span=_join(held.spans),
        )

    def _compacted(
        self,
        held: _CompactionHeld | None = None,
        messages_before: int | None = None,
        messages_after: int | None = None,
    ) -> list[Event]:
        """Its summarisation call, the compaction, then the notes that came while it ran.

        A call that raised (``Compaction failed: <exception>``: a provider error, a timeout, the
        cost limit) got no answer and is no request (BaseAgent's client counts none): the
        failed attempt is then part of the iteration's own request. An empty answer (``empty
        response``) was a request. One that logged neither a summary nor a result (the log
        ends, or goes on elsewhere) removed nothing that the log shows: an attempt whose
        outcome is not known, kept as a failed one."""
        if held is None:
            held = self._compaction
            self._compaction = None
        assert held is not None
        failed, error = held.failed, held.error
        if not failed and held.summary_tokens is None and not held.result_seen:
            failed, error = True, "no outcome logged"
        answered = not held.failed or held.error == _EMPTY_ANSWER
        call: list[Event] = [held.call] if held.call is not None and answered else []
        event = Compacted(
            trigger="auto",
            tokens_before=held.before,
            tokens_after=held.after,
            messages_before=messages_before,
            messages_after=messages_after,
            summary_tokens=held.summary_tokens,
            retained_ids=(),
            keep_system=True,
            failed=failed,
            error=error,
            timestamp=held.timestamp,
            span=_join(held.spans),
        )
        return [*call, event, *held.notes]


def _window_info(usable: int, ts: str, span: SourceSpan) -> SessionInfo:
    """BaseAgent's window, from the usable window its Context lines print: usable plus its
    output reserve (``OUTPUT_TOKEN_MAX``, a constant of the program; the log gives the two
    together only)."""
    window = usable + OUTPUT_TOKEN_MAX
    source = (
        f"the log's usable {usable:,} (Context: ... of {usable}) + BaseAgent's output reserve "
        f"{OUTPUT_TOKEN_MAX:,}"
    )
    return SessionInfo(
        context_window=window, extra={"context_window_source": source}, timestamp=ts, span=span
    )


def _banner_info(message: str) -> SessionInfo | None:
    if m := _STARTING_BANNER.search(message):
        sdk = _SDK.search(m.group(1))
        return SessionInfo(
            agent=AGENT, version=sdk.group(1) if sdk else None, extra={"banner": m.group(1)}
        )
    if message.startswith("Model: "):
        model = message[len("Model: ") :].strip()
        return SessionInfo(agent=AGENT, model=model or None)
    for prefix, key, kind in _BANNER_EXTRA:
        if not message.startswith(prefix):
            continue
        raw = message[len(prefix) :].strip()
        value: Any = raw
        try:
            if kind == "int":
                value = int(raw)
            elif kind == "float":
                value = float(raw)
            elif kind == "seconds":
                value = float(raw.removesuffix("s"))
        except ValueError:
            return None
        return SessionInfo(extra={key: value})
    return None


# ------------------------------------------------------------------------------------------
# Sniffing

_SNIFF_LOG = re.compile(r"^\[\d\d:\d\d:\d\d\] \[(\w+)\] ")


def sniff_log(head: Head) -> float:
    lines = head.lines[:500]
    if not lines:
        return 0.0
    tags = [m.group(1) for line in lines if (m := _SNIFF_LOG.match(line))]
    known = sum(1 for tag in tags if tag in _KNOWN_TAGS)
    if known and len(tags) * 2 >= len(lines):
        return 0.95
    return 0.0
