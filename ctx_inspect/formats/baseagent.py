"""BaseAgent ("SuperAgent", BaseIntelligence/baseagent): its stderr log and its stdout JSONL.

Two formats, checked on real runs of bcb9023 (``docs/fidelity.md``):

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

``baseagent-events`` reads stdout: one JSON object per line (Python ``json.dumps``: ``", "``
separators, ``type`` last). ``thread.started`` -> ``SessionInfo(session_id)``, with a note that
this stream cannot show context management (``extra["context_note"]``); an ``agent_message``
item -> an assistant text message; a ``command_execution`` item -> on ``item.started`` an
assistant tool call (the command ``name({python dict repr})`` gives the tool name and its
arguments, as BaseAgent's history holds them), on ``item.completed`` the tool result
(``aggregated_output``, already middle-out truncated; ``failed`` / a non-zero ``exit_code`` marks
an error) with id ``<item id>:result``. Each model response prints its text first (if any),
then its tool calls, and nothing between two responses: a response without text cannot be told
from more calls of the response before it. So ``RequestSent`` goes before every
``agent_message`` and before a tool call that opens the stream, and a count of requests from
this stream alone is a lower bound (the stderr log's ``Iteration`` lines give the true count).
``turn.completed`` usage is the total over every model call of the turn, not a request's size
-> ``SessionInfo(extra={"turn_usage": ...})``; ``turn.failed`` -> ``LogLine(level="error")``;
``turn.started`` and unknown event types -> ``LogLine``. Lines that are not JSON objects
(LiteLLM prints banners, some ANSI-coloured, into this stream) -> ``LogLine(level="foreign")``;
a line that starts like a JSON object but is not one is a ``ParseIssue``.

Merging the two streams of one run (``--merge``, ``merge_run``): the log's requests are the
run's, the stdout's messages are placed in the iterations they answer, by the log's ``Executing
tool: <name>`` lines, and the self-verification prompt the log announces is put in as a user
message (a stand-in: its text is in neither stream).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any, ClassVar

from ctx_inspect.core.model import (
    Compacted,
    ContextMeasured,
    Event,
    LogLine,
    Message,
    MessageAdded,
    MessageKind,
    Part,
    PartType,
    Pruned,
    RequestSent,
    Role,
    SessionInfo,
    SourceSpan,
)
from ctx_inspect.formats.base import LineParser, decode_text, shown
from ctx_inspect.formats.jsinspect import strip_ansi
from ctx_inspect.formats.registry import FormatSpec, Head, register

AGENT = "baseagent"
OUTPUT_RESERVE = 32_000  # compaction.py OUTPUT_TOKEN_MAX: usable = window - this
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
_ITERATION = re.compile(r"^Iteration (\d+)/(\d+)$")
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
        if m := _ITERATION.match(message):
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
    window = usable + OUTPUT_RESERVE
    source = (
        f"the log's usable {usable:,} (Context: ... of {usable}) + BaseAgent's output reserve "
        f"{OUTPUT_RESERVE:,}"
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
# baseagent-events: the stdout JSONL

_COMMAND = re.compile(r"^([\w.:\-]+)\((.*)\)$", re.S)


CONTEXT_NOTE = (
    "BaseAgent's stdout shows no context management (its prunes and compactions are logged on "
    "stderr only) and only the run's usage summed over every request: the figures are the "
    "messages this stream shows, not BaseAgent's context, and a text with the tool calls after "
    "it counts as one request (a lower bound: the stderr log's iterations give the true count). "
    "Merge it with the stderr log (--merge) for BaseAgent's own figures"
)


class BaseAgentEventsParser(LineParser):
    """BaseAgent's stdout: Codex-like JSONL events written by Python's ``json.dumps``."""

    format_name = "baseagent-events"
    # a tool call that follows a tool result belongs to the response that is open (BaseAgent
    # prints nothing between two responses, and a response's text comes before its calls)
    response_spans_results: ClassVar[bool] = True

    def __init__(self, source: int = 0, path: str = "") -> None:
        super().__init__(source, path)
        self._after_text = False  # the last item was an agent_message (a response's text)

    def parse_line(self, line: bytes, span: SourceSpan) -> Iterable[Event]:
        out: list[Event] = []
        if not line.lstrip().startswith(b"{"):
            text = strip_ansi(decode_text(line, self, span, out)).rstrip()
            out.append(LogLine(text=text, level="foreign", span=span))
            return out
        value = self.load_json(line, span, out)
        if value is None:
            if not out:
                out.append(self.issue(span, "not an event object (null)", line))
            return out
        if not isinstance(value, dict):
            out.append(self.issue(span, "not an event object", line))
            return out
        kind = value.get("type")
        if not isinstance(kind, str):
            out.append(self.issue(span, "no event type", line))
            return out
        out.extend(self._event(kind, value, span, line))
        return out

    def _event(self, kind: str, value: dict[str, Any], span: SourceSpan, raw: bytes) -> list[Event]:
        if kind == "thread.started":
            thread_id = value.get("thread_id")
            return [
                SessionInfo(
                    agent=AGENT,
                    session_id=thread_id if isinstance(thread_id, str) else None,
                    extra={"context_note": CONTEXT_NOTE},
                    span=span,
                )
            ]
        if kind in ("item.started", "item.completed"):
            item = value.get("item")
            if not isinstance(item, dict):
                return [self.issue(span, f"{kind} without an item object", raw)]
            return self._item(kind, item, span, raw)
        if kind == "turn.completed":
            usage = value.get("usage")
            extra = {"turn_usage": usage} if isinstance(usage, dict) else {}
            return [SessionInfo(extra=extra, span=span)]
        if kind in ("turn.failed", "error"):
            error = value.get("error")
            message = error.get("message") if isinstance(error, dict) else value.get("message")
            text = f"{kind}: {message}" if isinstance(message, str) else kind
            return [LogLine(text=text, level="error", tag=kind, span=span)]
        return [LogLine(text=kind, tag=kind, span=span)]  # turn.started, item.updated, unknown

    def _item(self, kind: str, item: dict[str, Any], span: SourceSpan, raw: bytes) -> list[Event]:
        item_type = item.get("type")
        item_id = item.get("id")
        if not isinstance(item_id, str) or not item_id:
            item_id = f"line-{span.line}"
        if item_type == "agent_message" and kind == "item.completed":
            text = item.get("text")
            self._after_text = True
            message = Message(
                id=item_id,
                role=Role.ASSISTANT,
                parts=(Part(type=PartType.TEXT, text=text if isinstance(text, str) else ""),),
            )
            return [RequestSent(span=span), MessageAdded(message=message, span=span)]
        if item_type == "command_execution":
            command = item.get("command")
            command = command if isinstance(command, str) else ""
            if kind == "item.started":
                return self._call(item_id, command, span)
            return [self._result(item_id, command, item, span)]
        self._after_text = False
        return [LogLine(text=f"{kind} {shown(item_type, quoted=False)}", tag=kind, span=span)]

    def _call(self, item_id: str, command: str, span: SourceSpan) -> list[Event]:
        m = _COMMAND.match(command)
        name, arguments = (m.group(1), m.group(2)) if m else (command, None)
        message = Message(
            id=item_id,
            role=Role.ASSISTANT,
            kind=MessageKind.TOOL_CALL,
            parts=(
                Part(
                    type=PartType.TOOL_CALL,
                    tool_name=name or None,
                    call_id=item_id,
                    arguments=arguments,
                ),
            ),
        )
        out: list[Event] = [] if self._after_text else [RequestSent(span=span)]
        self._after_text = self.response_spans_results
        out.append(MessageAdded(message=message, span=span))
        return out

    def _result(
        self, item_id: str, command: str, item: dict[str, Any], span: SourceSpan
    ) -> MessageAdded:
        self._after_text = self._after_text and self.response_spans_results
        output = item.get("aggregated_output")
        exit_code = item.get("exit_code")
        failed = item.get("status") == "failed" or (
            isinstance(exit_code, int) and not isinstance(exit_code, bool) and exit_code != 0
        )
        message = Message(
            id=f"{item_id}:result",
            role=Role.TOOL,
            kind=MessageKind.TOOL_RESULT,
            parts=(
                Part(
                    type=PartType.TOOL_RESULT,
                    text=output if isinstance(output, str) else "",
                    tool_name=command or None,
                    call_id=item_id,
                    is_error=failed,
                ),
            ),
        )
        return MessageAdded(message=message, span=span)


# ------------------------------------------------------------------------------------------
# --merge: the stderr log and the stdout events of one run, as one session

_EXECUTING = re.compile(r"^Executing tool: (.*)$", re.S)
_VERIFICATION = "Requesting self-verification before completion"
VERIFICATION_TEXT = (
    "(BaseAgent's self-verification prompt: it asks the model to check its work before "
    "finishing; its text is in neither stream)"
)


def merge_run(streams: Sequence[Sequence[Event]], names: Sequence[str]) -> list[Event] | None:
    """One session of a run's stderr log and stdout (``--merge``, in either order), see
    ``merged_events``; None for streams that are not one log and one stdout."""
    if sorted(names) != sorted((LOG_SPEC.name, EVENTS_SPEC.name)):
        return None
    return merged_events([(n, list(events)) for n, events in zip(names, streams, strict=True)])


def merged_events(streams: list[tuple[str, list[Event]]]) -> list[Event]:
    """One session of a run's stderr log and stdout events.

    The log's requests are the run's (one per iteration, and one per summarisation call); the
    stdout's messages are placed in the iterations they answer: after an iteration's request,
    its response's text, then one tool call and its result for each ``Executing tool`` line
    (which names the tool, in order). The log's ``Requesting self-verification`` adds the user
    message BaseAgent sends then (its text is in neither stream: a stand-in of that role, so
    that the turns the prune protects are where they were). The stdout's own requests, and its
    note that it cannot show context management, are left out. Where the two disagree (a tool
    that is not the one the log names, items left over), a warning says from where.
    """
    log = [e for name, events in streams if name == LOG_SPEC.name for e in events]
    stdout = [e for name, events in streams if name != LOG_SPEC.name for e in events]
    if not any(isinstance(e, RequestSent) and not e.compaction for e in log):
        return [*log, *stdout]  # no iteration to place the messages in: each keeps its own
    cursor = _Stdout(stdout)
    out: list[Event] = []
    answering = False  # after an iteration's request, until the next iteration
    for event in log:
        if isinstance(event, RequestSent):
            answering = not event.compaction
            if answering:
                out.extend(cursor.notes())
                out.append(event)
                out.extend(cursor.text())
                continue
        elif answering and isinstance(event, LogLine) and event.tag == "loop":
            if m := _EXECUTING.match(event.text):
                out.append(event)
                out.extend(cursor.call(m.group(1), event))
                continue
            if event.text == _VERIFICATION:
                out.append(event)
                out.append(_verification(cursor.prompts, event))
                cursor.prompts += 1
                continue
            if _ITERATION.match(event.text):
                answering = False
        out.append(event)
    out.extend(cursor.rest())
    return out


def _verification(number: int, after: LogLine) -> MessageAdded:
    message = Message(
        id=f"self-verification-{number + 1}",
        role=Role.USER,
        kind=MessageKind.ATTACHMENT,
        parts=(Part(type=PartType.TEXT, text=VERIFICATION_TEXT),),
        timestamp=after.timestamp,
    )
    return MessageAdded(message=message, timestamp=after.timestamp)


class _Stdout:
    """The stdout's events, taken in order as the log's iterations place them."""

    def __init__(self, events: list[Event]) -> None:
        self.events: list[Event] = []
        for event in events:
            if isinstance(event, RequestSent):
                continue  # the log counts the requests
            if isinstance(event, SessionInfo) and "context_note" in event.extra:
                extra = {k: v for k, v in event.extra.items() if k != "context_note"}
                event = event.model_copy(update={"extra": extra})
            self.events.append(event)
        self.pos = 0
        self.prompts = 0  # self-verification prompts added
        self.warned = False

    def _next(self) -> Message | None:
        for event in self.events[self.pos :]:
            if isinstance(event, MessageAdded):
                return event.message
        return None

    def notes(self) -> list[Event]:
        """The events up to the next message."""
        start = self.pos
        while self.pos < len(self.events) and not isinstance(self.events[self.pos], MessageAdded):
            self.pos += 1
        return self.events[start : self.pos]

    def _take(self) -> list[Event]:
        out = self.notes()
        if self.pos < len(self.events):
            out.append(self.events[self.pos])
            self.pos += 1
        return out

    def text(self) -> list[Event]:
        """A response's text, which comes before its tool calls, when it has one."""
        message = self._next()
        if message is None or message.role is not Role.ASSISTANT:
            return []
        if message.kind is not MessageKind.MESSAGE:
            return []
        return self._take()

    def call(self, tool: str, line: LogLine) -> list[Event]:
        """The call the log's ``Executing tool`` line names, and its result."""
        message = self._next()
        if message is None or message.kind is not MessageKind.TOOL_CALL:
            return self._warn(line, f"no tool call of {tool!r} in the stdout here")
        out = self._take()
        if message.tool_name != tool:
            out.extend(
                self._warn(line, f"the stdout's call is {message.tool_name!r}, not {tool!r}")
            )
        result = self._next()
        if result is not None and result.kind is MessageKind.TOOL_RESULT:
            out.extend(self._take())
        return out

    def rest(self) -> list[Event]:
        """What no iteration took: at the end, said once when it holds messages."""
        rest = self.events[self.pos :]
        self.pos = len(self.events)
        left = sum(1 for e in rest if isinstance(e, MessageAdded))
        if left and not self.warned:
            rest.append(
                LogLine(
                    text=f"--merge: {left} stdout messages after the log's last iteration",
                    level="warn",
                    tag="merge",
                )
            )
        return rest

    def _warn(self, line: LogLine, what: str) -> list[Event]:
        if self.warned:
            return []
        self.warned = True
        text = f"--merge: the stdout and the stderr log disagree from here ({what})"
        return [LogLine(text=text, level="warn", tag="merge", timestamp=line.timestamp)]


# ------------------------------------------------------------------------------------------
# Sniffers and registration

_SNIFF_LOG = re.compile(r"^\[\d\d:\d\d:\d\d\] \[(\w+)\] ")
_SNIFF_EVENT = re.compile(
    r'^\{"(?:[^"\\]|\\.)*": .*"type": "(?:thread\.started|turn\.started|turn\.completed|'
    r'turn\.failed|item\.started|item\.completed|item\.updated)"\}\s*$'
)
_SNIFF_TURN_STARTED = re.compile(r'^\{"type": "turn\.started"\}\s*$')
_SNIFF_SESSION = re.compile(r'"thread_id": "sess_\d+"')


def sniff_log(head: Head) -> float:
    lines = head.lines[:500]
    if not lines:
        return 0.0
    tags = [m.group(1) for line in lines if (m := _SNIFF_LOG.match(line))]
    known = sum(1 for tag in tags if tag in _KNOWN_TAGS)
    if known and len(tags) * 2 >= len(lines):
        return 0.95
    return 0.0


def sniff_events(head: Head) -> float:
    lines = head.lines[:500]
    hits = 0
    session = False
    for index, line in enumerate(lines):
        if _SNIFF_EVENT.match(line) or _SNIFF_TURN_STARTED.match(line):
            hits += 1
            session = session or bool(_SNIFF_SESSION.search(line))
        elif line.lstrip().startswith("{") and not (
            index == len(lines) - 1 and not line.rstrip().endswith("}")  # a cut last line
        ):
            return 0.0  # JSON of another shape: not this stream
    if not hits:
        return 0.0
    return 0.95 if session else 0.85


LOG_SPEC = register(
    FormatSpec(
        name="baseagent-log",
        description="BaseAgent (SuperAgent) stderr log: [HH:MM:SS] [loop|compaction] lines",
        reads="stderr of BaseAgent's agent.py (*.log)",
        parser=BaseAgentLogParser,
        sniff=sniff_log,
        default_profile="baseagent",
        stream_merge=merge_run,
    )
)
EVENTS_SPEC = register(
    FormatSpec(
        name="baseagent-events",
        description="BaseAgent (SuperAgent) stdout JSONL events (thread/turn/item)",
        reads="stdout of BaseAgent's agent.py (*.jsonl)",
        parser=BaseAgentEventsParser,
        sniff=sniff_events,
        default_profile="baseagent",
        stream_merge=merge_run,
    )
)
