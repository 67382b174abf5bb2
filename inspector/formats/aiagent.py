"""netdata ai-agent (seed 002): its CONTEXT_DEBUG stdout, its logfmt stderr, its rich console log.

Three formats, one module (``reference/seed-systems.md`` section 2, facts of section 8):

``aiagent-debug`` reads stdout with ``CONTEXT_DEBUG=true``: ``context-guard/<topic> {...}``
blocks printed by Node's ``console.log`` (``util.inspect`` text, see ``jsinspect``), on one line
or over many lines up to a line ``}``, ANSI-coloured on a terminal, between other stdout text
(the final report). Every block becomes a ``DebugTopic`` (name = topic, payload = the object)
spanning the block's lines; blocks with another label (``final-report-accounting {...}``) too.
On top of that:

- ``evaluate`` and the ``evaluate-target`` blocks after it (one per target) make one
  ``GuardEvaluated``, emitted when the group ends (at the next block that is not a target, at
  other text, or at the end). A ``provider-eval`` right after the group closes it with a status
  computed as ``evaluateForProvider`` does once it has printed: no blocked entry -> ok; every
  target blocked -> final; this provider/model blocked -> skip; the only target is the
  synthetic ``default`` -> final; else ok; its trigger is ``turn_preflight``. An ``evaluate``
  with ``extraTokens > 0`` is the tool-output reservation (trigger ``tool_preflight``, status
  left None: the guard does not classify it). Targets carry ``projected`` and
  ``blocked = limit > 0 and projected > limit``.
- ``build-metrics`` (printed just before each LLM request) -> ``ContextMeasured`` labelled
  ``build-metrics`` with ``expectedTokens`` (= ``ctxTokens + pendingCtxTokens``, what the request
  carries by the guard's own count, schema excluded), the target's window as ``limit``, then
  ``RequestSent(model)``; the first request after an ``enforce`` is marked ``final_turn``.
- ``enforce`` -> ``FinalTurnForced(reason="context")`` with the first blocked entry's projected,
  limit, provider and model (one per request: a second ``enforce`` before the next request is
  only a ``DebugTopic``).
- ``schema-estimate`` -> also ``SessionInfo(extra={"tool_schema_tokens", "tool_count"})`` when
  they change; the model of a ``build-metrics`` (when it changes) -> ``SessionInfo(model,
  context_window)`` with the window its target printed.
- ``tool-eval``, ``log-entry``, ``init-counters``, ``loop-init`` and any other topic: the
  ``DebugTopic`` only (a blocked tool's drop is logged on stderr; ``log-entry`` repeats the
  stderr warning).
- Other stdout text -> ``LogLine``. A ``context-guard/`` block that does not read as an
  inspected object is a ``ParseIssue``; an unreadable block with another label is kept as the
  text lines it was.

``aiagent-log`` reads stderr: logfmt records (``ts=... level=... priority=... type=... message=``)
wrapped in ANSI colour even off a terminal, which can start in the middle of a line (the final
report is echoed without a trailing newline, so the record is found by the colour code followed
by ``ts=`` anywhere in the line), the plain ``[VRB] → [0.0] type remote: message`` probe lines
at the start and the ``[VRB] ← [0.0] agent EXIT-...`` line at the end. ``aiagent-console``
reads the rich console format ``{SEV} {turn}.{subturn} {→|←} {LLM|MCP|RST|AGN|INT} {agent}:
{context} {message}`` (``--telemetry-log-format console``), whose figures are in the text only.
Both share one message interpreter (``_Interpreter``):

- ``LLM request prepared [ctx C, new N, expected E + output O = P% of W]`` ->
  ``ContextMeasured(E, limit=W, label="LLM request prepared")`` then ``RequestSent(model,
  final_turn)`` (`` (final turn)`` suffix or ``final_turn=true``). E is the request's size by the
  guard's count, the same figure ``build-metrics`` gives (C alone leaves out the new messages;
  P counts the buffer and the output reserve, so it is not kept as a percentage of W).
- ``LLM response received`` -> ``UsageReported`` (input, cache read, cache write, output; the
  input excludes the cache: ``ctx_tokens = in + cR + cW + out``).
- ``Context budget exceeded (...) Forcing final turn.`` -> ``FinalTurnForced(reason="context")``;
  ``Final turn detected (turn=T/M, reason=R)`` -> ``FinalTurnForced(reason=R, turn, max_turns)``;
  ``Context limit exceeded; forcing final turn.`` (or ``... during turn execution; proceeding
  with final turn.``) -> ``FinalTurnForced(reason="context_limit_exceeded")``. One forced final
  turn per turn: once one is emitted, another for the same turn, or any before the next request
  (the forced final turn is the next request), is only a ``LogLine``.
- ``Projected context size P tokens exceeds limit L for p:m; continuing turn ...`` ->
  ``GuardEvaluated(status=skip, projected=P, targets=(p, m, limit L, blocked))``; the target's
  window is the last one an ``LLM request prepared`` gave for that model (0 when unknown).
- ``Tool 'X' output dropped: context window budget exceeded (N tokens, limit L).`` and
  ``Tool 'X' output dropped after execution: token budget exceeded.`` -> ``ToolOutputChanged
  (dropped)`` with the record's byte and token details and the replacement text
  ``(tool failed: context window budget exceeded)``; ``Tool 'X' output stored for tool_output
  (token_budget, N bytes).`` -> ``ToolOutputChanged(spilled)``.
- ``session initialized (txnId: X)`` -> ``SessionInfo(agent="ai-agent", session_id=X)``; an
  ``EXIT-...`` record -> ``SessionInfo(extra={"outcome": ...})`` (the process's final
  ``[VRB] ← ... agent EXIT-...`` line goes to ``extra["exit"]``, and to ``outcome`` when no record
  named one) plus a ``LogLine``; the ``llm_summary`` record -> ``SessionInfo(extra=
  {"llm_summary": {...}})`` plus a ``LogLine``.
- Everything else -> ``LogLine(level=<record level>, tag=<remote>)``; bulky messages (the
  settings JSON) are cut short. Records of a sub-agent (an ``agent_path`` other than the first
  one seen) go to a thread named after that path: its requests and usage are kept there; its
  context figures, guard results, forced final turns and dropped outputs become ``LogLine``s,
  as those events name no thread and would otherwise count on the parent's timeline.

A record that starts like logfmt (``ts=``) but cannot be read, or a console line with a severity
prefix but no valid header, is a ``ParseIssue``; other text on stderr is a ``LogLine``.

Merging the streams of one run (``--merge``): the debug blocks on stdout carry no timestamps,
the stderr records do, and both mark every LLM request (the figures of the ``LLM request
prepared`` line come from ``buildMetrics``, which prints ``build-metrics``; the real run has
three of each). So the n-th ``RequestSent`` of the debug stream is the n-th of the stderr
stream (as long as no sub-agent adds requests of its own to stdout): the merged session
keeps the stderr one (it has the time, the turn and the final-turn flag) and drops the debug
one, and the debug events before the n-th debug request go just before the n-th stderr request.
Both give the same ``ContextMeasured`` figure for a request. The forced final turn appears in
both streams (``enforce`` on stdout, the ``Context budget exceeded`` warning on stderr): a merge
should keep one per step. The debug stream cannot tell a sub-agent's blocks from the parent's.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from inspector.core.model import (
    ContextMeasured,
    DebugTopic,
    Event,
    FinalTurnForced,
    GuardEvaluated,
    GuardStatus,
    GuardTarget,
    LogLine,
    RequestSent,
    SessionInfo,
    SourceSpan,
    ToolOutputAction,
    ToolOutputChanged,
    Usage,
    UsageReported,
)
from inspector.formats.base import LineParser, decode_text
from inspector.formats.jsinspect import InspectError, is_complete, parse_inspect, strip_ansi
from inspector.formats.registry import FormatSpec, Head, register

AGENT = "ai-agent"
TOOL_NO_OUTPUT = "(tool failed: context window budget exceeded)"
MAIN = "main"
LOG_TEXT_MAX = 300  # characters of a message kept in a LogLine
BLOCK_MAX_LINES = 5000  # a labelled block longer than this is not an inspected object

# ------------------------------------------------------------------------------------------
# aiagent-debug: the CONTEXT_DEBUG stdout

_GUARD_LABEL = re.compile(r"^context-guard/([\w.-]+) (.*)$", re.S)
_OTHER_LABEL = re.compile(r"^([a-z][a-z0-9]*(?:[-_/][a-z0-9]+)+) (\{.*)$", re.S)


@dataclass
class _Block:
    name: str
    guard: bool  # a context-guard/ topic (an unreadable one is an issue)
    lines: list[tuple[str, SourceSpan]] = field(default_factory=list)
    text: list[str] = field(default_factory=list)  # the payload text, ANSI removed

    @property
    def span(self) -> SourceSpan:
        first = self.lines[0][1]
        last = self.lines[-1][1]
        return SourceSpan(
            source=first.source,
            offset=first.offset,
            length=last.offset + last.length - first.offset,
            line=first.line,
        )


@dataclass
class _HeldGuard:
    payload: dict[str, Any]
    span: SourceSpan
    targets: list[GuardTarget] = field(default_factory=list)


class AiAgentDebugParser(LineParser):
    """The ``context-guard/<topic>`` blocks of ai-agent's stdout (CONTEXT_DEBUG=true)."""

    format_name = "aiagent-debug"

    def __init__(self, source: int = 0, path: str = "") -> None:
        super().__init__(source, path)
        self._block: _Block | None = None
        self._guard: _HeldGuard | None = None
        self._final_pending = False  # an enforce since the last request
        self._windows: dict[tuple[str, str], int] = {}
        self._info: tuple[str, int] | None = None
        self._schema: dict[str, Any] = {}

    def parse_line(self, line: bytes, span: SourceSpan) -> Iterable[Event]:
        out: list[Event] = []
        text = decode_text(line, self, span, out)
        clean = strip_ansi(text).rstrip()
        block = self._block
        if block is not None:
            if _GUARD_LABEL.match(clean):
                # a new topic before the old block closed: the old one was cut short
                self._block = None
                out.extend(self._unreadable(block, "not closed before the next topic"))
            else:
                block.lines.append((text, span))
                block.text.append(clean)
                if clean == "}" or clean == "]":
                    self._block = None
                    out.extend(self._close(block))
                elif len(block.lines) > BLOCK_MAX_LINES:
                    self._block = None
                    out.extend(self._unreadable(block, "block too long"))
                return out
        match = _GUARD_LABEL.match(clean)
        guard = match is not None
        if match is None:
            match = _OTHER_LABEL.match(clean)
        if match is None:
            out.extend(self._flush_guard())
            out.append(LogLine(text=clean, span=span))
            return out
        rest = match.group(2)
        block = _Block(name=match.group(1), guard=guard, lines=[(text, span)], text=[rest])
        if is_complete(rest) or (guard and not rest.lstrip().startswith(("{", "["))):
            out.extend(self._close(block))
        else:
            self._block = block
        return out

    def end_of_input(self) -> Iterable[Event]:
        out: list[Event] = []
        block = self._block
        self._block = None
        if block is not None:
            out.extend(self._unreadable(block, "input ended inside the block"))
        out.extend(self._flush_guard())
        return out

    # -- blocks ---------------------------------------------------------------------------

    def _close(self, block: _Block) -> list[Event]:
        try:
            value = parse_inspect("\n".join(block.text))
        except InspectError as exc:
            return self._unreadable(block, str(exc))
        span = block.span
        if not block.guard:
            if not isinstance(value, dict) or not value or "__items__" in value:
                return self._unreadable(block, "not an object")
            return [*self._flush_guard(), DebugTopic(name=block.name, payload=value, span=span)]
        payload = value if isinstance(value, dict) else {"value": value}
        return self._topic(block.name, payload, span)

    def _unreadable(self, block: _Block, why: str) -> list[Event]:
        if block.guard:
            reason = f"unreadable context-guard/{block.name} block ({why})"
            raw = "\n".join(t for t, _ in block.lines)
            return [*self._flush_guard(), self.issue(block.span, reason, raw)]
        out = self._flush_guard()
        out.extend(LogLine(text=strip_ansi(t).rstrip(), span=s) for t, s in block.lines)
        return out

    def _topic(self, name: str, payload: dict[str, Any], span: SourceSpan) -> list[Event]:
        out: list[Event] = []
        debug = DebugTopic(name=f"context-guard/{name}", payload=payload, span=span)
        if name == "evaluate-target" and self._guard is not None:
            out.append(debug)
            target = self._target(payload)
            self._guard.targets.append(target)
            self._windows[(target.provider, target.model)] = target.context_window
            return out
        if name == "provider-eval" and self._guard is not None:
            held = self._guard
            self._guard = None
            status = _provider_status(payload, held.targets)
            out.append(debug)
            out.append(self._guard_event(held, status, "turn_preflight"))
            return out
        out.extend(self._flush_guard())
        out.append(debug)
        if name == "evaluate":
            self._guard = _HeldGuard(payload=payload, span=span)
        elif name == "evaluate-target":
            target = self._target(payload)
            self._windows[(target.provider, target.model)] = target.context_window
        elif name == "build-metrics":
            out.extend(self._request(payload, span))
        elif name == "enforce":
            out.extend(self._enforce(payload, span))
        elif name == "schema-estimate":
            extra: dict[str, Any] = {}
            if _int(payload.get("estimated")) is not None:
                extra["tool_schema_tokens"] = _int(payload.get("estimated"))
            if _int(payload.get("toolCount")) is not None:
                extra["tool_count"] = _int(payload.get("toolCount"))
            if extra and extra != self._schema:
                self._schema = extra
                out.append(SessionInfo(agent=AGENT, extra=extra, span=span))
        return out

    def _target(self, payload: dict[str, Any]) -> GuardTarget:
        limit = _int(payload.get("limit")) or 0
        projected = None
        if self._guard is not None:
            projected = _int(self._guard.payload.get("projectedTokens"))
        return GuardTarget(
            provider=_str(payload.get("provider")) or "",
            model=_str(payload.get("model")) or "",
            context_window=_int(payload.get("contextWindow")) or 0,
            buffer_tokens=_int(payload.get("bufferTokens")) or 0,
            max_output_tokens=_int(payload.get("maxOutputTokens")) or 0,
            limit=limit,
            projected=projected,
            blocked=projected is not None and limit > 0 and projected > limit,
        )

    def _note_model(self, provider: str, model: str | None, span: SourceSpan) -> list[Event]:
        window = self._windows.get((provider, model or ""))
        key = (model or "", window or 0)
        if self._info == key:
            return []
        self._info = key
        return [
            SessionInfo(
                agent=AGENT,
                model=model,
                context_window=window,
                extra={"provider": provider} if provider else {},
                span=span,
            )
        ]

    def _flush_guard(self) -> list[Event]:
        held = self._guard
        if held is None:
            return []
        self._guard = None
        extra = _int(held.payload.get("extraTokens")) or 0
        return [self._guard_event(held, None, "tool_preflight" if extra > 0 else None)]

    def _guard_event(
        self, held: _HeldGuard, status: GuardStatus | None, trigger: str | None
    ) -> GuardEvaluated:
        p = held.payload
        return GuardEvaluated(
            current=_int(p.get("currentCtxTokens")) or 0,
            pending=_int(p.get("pendingCtxTokens")) or 0,
            new=_int(p.get("newCtxTokens")) or 0,
            schema_tokens=_int(p.get("schemaCtxTokens")) or 0,
            extra=_int(p.get("extraTokens")) or 0,
            projected=_int(p.get("projectedTokens")),
            targets=tuple(held.targets),
            status=status,
            trigger=trigger,
            span=held.span,
        )

    def _request(self, payload: dict[str, Any], span: SourceSpan) -> list[Event]:
        out: list[Event] = []
        provider = _str(payload.get("provider")) or ""
        model = _str(payload.get("model"))
        out.extend(self._note_model(provider, model, span))
        expected = _int(payload.get("expectedTokens"))
        if expected is None:
            ctx = _int(payload.get("ctxTokens"))
            pending = _int(payload.get("pendingCtxTokens"))
            if ctx is not None and pending is not None:
                expected = ctx + pending
        if expected is not None:
            window = self._windows.get((provider, model or ""))
            out.append(
                ContextMeasured(tokens=expected, limit=window, label="build-metrics", span=span)
            )
        out.append(RequestSent(model=model, final_turn=self._final_pending, span=span))
        self._final_pending = False
        return out

    def _enforce(self, payload: dict[str, Any], span: SourceSpan) -> list[Event]:
        if self._final_pending:
            return []
        self._final_pending = True
        blocked = payload.get("blocked")
        first = blocked[0] if isinstance(blocked, list) and blocked else {}
        first = first if isinstance(first, dict) else {}
        return [
            FinalTurnForced(
                reason="context",
                projected_tokens=_int(first.get("projected")),
                limit_tokens=_int(first.get("limit")),
                provider=_str(first.get("provider")),
                model=_str(first.get("model")),
                span=span,
            )
        ]


def _provider_status(payload: dict[str, Any], targets: list[GuardTarget]) -> GuardStatus | None:
    """``evaluateForProvider``'s answer, from what it printed (None when it cannot be told)."""
    blocked = payload.get("blocked")
    if not isinstance(blocked, list):
        return None
    if not blocked:
        return GuardStatus.OK
    if not targets:
        return None
    keys = {f"{b.get('provider')}:{b.get('model')}" for b in blocked if isinstance(b, dict)}
    if len(keys) >= len(targets):
        return GuardStatus.FINAL
    if f"{payload.get('provider')}:{payload.get('model')}" in keys:
        return GuardStatus.SKIP
    if len(targets) == 1 and targets[0].provider == "default":
        return GuardStatus.FINAL
    return GuardStatus.OK


# ------------------------------------------------------------------------------------------
# The log records (logfmt and console) and their shared interpretation


@dataclass
class _Record:
    """One log record, whatever its layout."""

    message: str
    span: SourceSpan
    text: str = ""  # what the message patterns are searched in (console: context + message)
    level: str | None = None  # lower case: vrb wrn err fin thk trc
    timestamp: str | None = None
    turn: int | None = None
    remote: str | None = None
    provider: str | None = None
    model: str | None = None
    agent_path: str | None = None
    details: dict[str, str] = field(default_factory=dict)


_RE_REQUEST = re.compile(
    r"LLM request prepared \[ctx (\d+), new (\d+), expected (\d+) \+ output (\d+) = "
    r"(\d+)% of (\d+)\]"
)
_RE_USAGE = re.compile(r"tokens: in (\d+), out (\d+)(?:, cR (\d+))?(?:, cW (\d+))?")
_RE_BUDGET = re.compile(
    r"Context budget exceeded \((.+?) - projected (\d+) tokens vs limit (\d+)\)\. "
    r"Forcing final turn\."
)
_RE_FINAL = re.compile(r"Final turn detected \(turn=(\d+)/(\d+), reason=([\w-]+)\)")
_RE_PROJECTED = re.compile(
    r"Projected context size (\d+) tokens exceeds limit (\d+) for (.+?); "
    r"continuing turn but guard will enforce finalization\."
)
_RE_LIMIT = re.compile(
    r"Context limit exceeded(?: during turn execution)?; "
    r"(?:forcing final turn|proceeding with final turn)\."
)
_RE_DROPPED = re.compile(
    r"Tool '(.+?)' output dropped: context window budget exceeded \((\d+) tokens, limit (\d+)\)\."
)
_RE_DROPPED_AFTER = re.compile(r"Tool '(.+?)' output dropped after execution: token budget")
_RE_STORED = re.compile(r"Tool '(.+?)' output stored for tool_output \(([\w-]+), (\d+) bytes\)")
_RE_EXIT = re.compile(r"\b(EXIT-[A-Z][A-Z0-9-]*)")
_RE_SESSION = re.compile(r"session initialized \(txnId: ([\w-]+)\)")


# events that name their thread (or are about the whole run): kept for a sub-agent's records
_THREADED = (RequestSent, UsageReported, SessionInfo, LogLine)


@dataclass
class _ThreadState:
    forced_turns: set[int] = field(default_factory=set)
    forced_pending: bool = False  # a forced final turn since the last request


class _Interpreter:
    """What a record's message means; the same for logfmt and console records."""

    def __init__(self) -> None:
        self.root: str | None = None
        self.threads: dict[str, _ThreadState] = {}
        self.windows: dict[str, int] = {}  # "provider:model" -> context window
        self.info: tuple[str | None, int | None] | None = None
        self.outcome_seen = False

    def thread(self, rec: _Record) -> str:
        path = rec.agent_path
        if not path or path == MAIN:
            return MAIN
        if self.root is None:
            self.root = path
        return MAIN if path == self.root else path

    def state(self, thread: str) -> _ThreadState:
        return self.threads.setdefault(thread, _ThreadState())

    def events(self, rec: _Record) -> list[Event]:
        out = self._events(rec)
        if self.thread(rec) == MAIN:
            return out
        # a sub-agent's context figures, guard and final turn would land on the main
        # timeline (those events carry no thread): keep them as the record's text
        kept: list[Event] = [e for e in out if isinstance(e, _THREADED)]
        if len(kept) < len(out) and not any(isinstance(e, LogLine) for e in kept):
            kept.append(self.log(rec))
        return kept

    def _events(self, rec: _Record) -> list[Event]:
        text = rec.text or rec.message
        thread = self.thread(rec)
        d = rec.details
        if m := _RE_BUDGET.search(text):
            provider, model = _split_target(m.group(1))
            return self.final_turn(
                rec,
                thread,
                reason="context",
                projected=int(m.group(2)),
                limit=int(m.group(3)),
                provider=provider,
                model=model,
            )
        if m := _RE_FINAL.search(text):
            return self.final_turn(
                rec,
                thread,
                reason=m.group(3),
                turn=int(m.group(1)),
                max_turns=int(m.group(2)),
            )
        if _RE_LIMIT.search(text):
            return self.final_turn(
                rec,
                thread,
                reason="context_limit_exceeded",
                projected=_int(d.get("projected_tokens")),
                limit=_int(d.get("limit_tokens")),
                provider=d.get("provider") or rec.provider,
                model=d.get("model") or rec.model,
            )
        if m := _RE_PROJECTED.search(text):
            return [self.skip(rec, int(m.group(1)), int(m.group(2)), m.group(3))]
        if m := _RE_DROPPED.search(text):
            return [
                self.tool_output(
                    rec, ToolOutputAction.DROPPED, m.group(1), int(m.group(2)), int(m.group(3))
                )
            ]
        if m := _RE_DROPPED_AFTER.search(text):
            return [self.tool_output(rec, ToolOutputAction.DROPPED, m.group(1), None, None)]
        if m := _RE_STORED.search(text):
            event = self.tool_output(rec, ToolOutputAction.SPILLED, m.group(1), None, None)
            if event.original_bytes is None:
                event = event.model_copy(update={"original_bytes": int(m.group(3))})
            return [event]
        if "LLM request prepared" in text:
            return self.request(rec, thread, text)
        if "LLM response received" in text and (usage := _usage(d, text)) is not None:
            return [
                UsageReported(
                    usage=usage,
                    model=rec.model,
                    thread=thread,
                    timestamp=rec.timestamp,
                    span=rec.span,
                )
            ]
        if m := _RE_SESSION.search(text):
            extra = {"agent_id": d["agent"]} if d.get("agent") else {}
            return [
                SessionInfo(
                    agent=AGENT,
                    session_id=m.group(1),
                    extra=extra,
                    timestamp=rec.timestamp,
                    span=rec.span,
                )
            ]
        remote = rec.remote or ""
        exit_code = remote[6:] if remote.startswith("agent:EXIT-") else None
        if exit_code is None and (m := _RE_EXIT.search(text)):
            exit_code = m.group(1)
        if exit_code is not None:
            self.outcome_seen = True
            return [
                SessionInfo(extra={"outcome": exit_code}, timestamp=rec.timestamp, span=rec.span),
                self.log(rec),
            ]
        if d.get("event") == "llm_summary":
            summary = {k: _number_or_text(v) for k, v in d.items() if k != "event"}
            return [
                SessionInfo(extra={"llm_summary": summary}, timestamp=rec.timestamp, span=rec.span),
                self.log(rec),
            ]
        return [self.log(rec)]

    def log(self, rec: _Record) -> LogLine:
        text = rec.message
        if len(text) > LOG_TEXT_MAX:
            text = f"{text[:LOG_TEXT_MAX]}… ({len(rec.message)} characters)"
        return LogLine(
            text=text, level=rec.level, tag=rec.remote, timestamp=rec.timestamp, span=rec.span
        )

    def request(self, rec: _Record, thread: str, text: str) -> list[Event]:
        d = rec.details
        m = _RE_REQUEST.search(text)
        expected = _int(d.get("expected_tokens"))
        window = _int(d.get("context_window"))
        if m is not None:
            expected = expected if expected is not None else int(m.group(3))
            window = window if window is not None else int(m.group(6))
        final = d.get("final_turn") == "true" or "(final turn)" in text
        out: list[Event] = []
        if window:
            self.windows[f"{rec.provider}:{rec.model}"] = window
            if thread == MAIN and self.info != (rec.model, window):
                self.info = (rec.model, window)
                extra = {"provider": rec.provider} if rec.provider else {}
                out.append(
                    SessionInfo(
                        agent=AGENT,
                        model=rec.model,
                        context_window=window,
                        extra=extra,
                        timestamp=rec.timestamp,
                        span=rec.span,
                    )
                )
        if expected is not None:
            out.append(
                ContextMeasured(
                    tokens=expected,
                    limit=window or None,
                    label="LLM request prepared",
                    timestamp=rec.timestamp,
                    span=rec.span,
                )
            )
        out.append(
            RequestSent(
                model=rec.model,
                thread=thread,
                final_turn=final,
                timestamp=rec.timestamp,
                span=rec.span,
            )
        )
        self.state(thread).forced_pending = False
        return out

    def final_turn(
        self,
        rec: _Record,
        thread: str,
        *,
        reason: str,
        projected: int | None = None,
        limit: int | None = None,
        provider: str | None = None,
        model: str | None = None,
        turn: int | None = None,
        max_turns: int | None = None,
    ) -> list[Event]:
        state = self.state(thread)
        turn = turn if turn is not None else rec.turn
        if state.forced_pending or (turn is not None and turn in state.forced_turns):
            return [self.log(rec)]
        state.forced_pending = True
        if turn is not None:
            state.forced_turns.add(turn)
        return [
            FinalTurnForced(
                reason=reason,
                projected_tokens=projected,
                limit_tokens=limit,
                provider=provider,
                model=model,
                turn=turn,
                max_turns=max_turns,
                timestamp=rec.timestamp,
                span=rec.span,
            )
        ]

    def skip(self, rec: _Record, projected: int, limit: int, target: str) -> GuardEvaluated:
        provider, model = _split_target(target)
        return GuardEvaluated(
            projected=projected,
            targets=(
                GuardTarget(
                    provider=provider or "",
                    model=model or "",
                    context_window=self.windows.get(target, 0),
                    limit=limit,
                    projected=projected,
                    blocked=limit > 0 and projected > limit,
                ),
            ),
            status=GuardStatus.SKIP,
            trigger="turn_preflight",
            timestamp=rec.timestamp,
            span=rec.span,
        )

    def tool_output(
        self,
        rec: _Record,
        action: ToolOutputAction,
        tool: str,
        tokens: int | None,
        limit: int | None,
    ) -> ToolOutputChanged:
        d = rec.details
        if tokens is None:
            tokens = _int(d.get("tokens_estimated"))
            if tokens is None:
                tokens = _int(d.get("tokens"))
        if limit is None:
            limit = _int(d.get("limit_tokens"))
        return ToolOutputChanged(
            action=action,
            tool=tool,
            tokens=tokens,
            original_bytes=_int(d.get("original_bytes")),
            final_bytes=_int(d.get("final_bytes")),
            projected_tokens=_int(d.get("projected_tokens")),
            limit_tokens=limit,
            replacement=TOOL_NO_OUTPUT if action is ToolOutputAction.DROPPED else None,
            timestamp=rec.timestamp,
            span=rec.span,
        )


def _usage(details: dict[str, str], text: str) -> Usage | None:
    inp = _int(details.get("input_tokens"))
    out = _int(details.get("output_tokens"))
    if inp is not None or out is not None:
        return Usage(
            input=inp or 0,
            cache_read=_int(details.get("cache_read_tokens")) or 0,
            cache_write=_int(details.get("cache_write_tokens")) or 0,
            output=out or 0,
        )
    m = _RE_USAGE.search(text)
    if m is None:
        return None
    return Usage(
        input=int(m.group(1)),
        output=int(m.group(2)),
        cache_read=int(m.group(3) or 0),
        cache_write=int(m.group(4) or 0),
    )


def _split_target(text: str) -> tuple[str | None, str | None]:
    provider, sep, model = text.partition(":")
    if not sep:
        return None, text or None
    return provider or None, model or None


# ------------------------------------------------------------------------------------------
# aiagent-log: logfmt on stderr

_RECORD_START = re.compile(rb"(?:\x1b\[[0-9;]*m)+ts=|^ts=")
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
        self._meaning = _Interpreter()

    def parse_line(self, line: bytes, span: SourceSpan) -> Iterable[Event]:
        out: list[Event] = []
        starts = [m.start() for m in _RECORD_START.finditer(line)]
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
        rec = _Record(
            message=pairs.get("message", ""),
            span=span,
            level=pairs["level"].lower(),
            timestamp=pairs.get("ts") or None,
            turn=_int(pairs.get("turn")),
            remote=pairs.get("remote"),
            provider=pairs.get("provider"),
            model=pairs.get("model"),
            agent_path=pairs.get("agent_path") or pairs.get("agent"),
            details={k: v for k, v in pairs.items() if k not in _RECORD_KEYS or k == "agent"},
        )
        return self._meaning.events(rec)

    def _plain(self, text: str, span: SourceSpan) -> list[Event]:
        clean = strip_ansi(text).rstrip()
        if not clean.strip():
            return [LogLine(text=clean, span=span)]
        m = _PROBE.match(clean)
        if m is None:
            return [LogLine(text=clean, span=span)]
        sev, _arrow, turn, _sub, _kind, remote, message = m.groups()
        rec = _Record(
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
            return [SessionInfo(extra=extra, span=span), self._meaning.log(rec)]
        return [self._meaning.log(rec)]


def _sub_span(span: SourceSpan, start: int, length: int) -> SourceSpan:
    return SourceSpan(source=span.source, offset=span.offset + start, length=length, line=span.line)


# ------------------------------------------------------------------------------------------
# aiagent-console: the rich console format

_SEVERITIES = ("VRB", "WRN", "ERR", "FIN", "THK", "TRC")
_CONSOLE = re.compile(
    r"^(VRB|WRN|ERR|FIN|THK|TRC) (\d+(?:\.\d+)*\S*) ([→←]) (LLM|MCP|RST|AGN|INT) (\S+?):(?: (.*))?$"
)
_SEV_PREFIX = re.compile(r"^(?:VRB|WRN|ERR|FIN|THK|TRC) ")
_TURN = re.compile(r"^(\d+)")


class AiAgentConsoleParser(LineParser):
    """ai-agent's rich console log (``--telemetry-log-format console``)."""

    format_name = "aiagent-console"

    def __init__(self, source: int = 0, path: str = "") -> None:
        super().__init__(source, path)
        self._meaning = _Interpreter()

    def parse_line(self, line: bytes, span: SourceSpan) -> Iterable[Event]:
        out: list[Event] = []
        clean = strip_ansi(decode_text(line, self, span, out)).rstrip()
        m = _CONSOLE.match(clean)
        if m is None:
            if _SEV_PREFIX.match(clean):
                out.append(self.issue(span, "console record without a valid header", line))
            else:  # stack lines of an error, other text
                out.append(LogLine(text=clean, span=span))
            return out
        sev, turn_path, arrow, kind, agent, rest = m.groups()
        rest = rest or ""
        provider = model = None
        message = rest
        if kind == "LLM" and arrow == "→":
            head, _, tail = rest.partition(" ")
            if "/" in head:
                message = tail
                if not head.startswith("agent/"):  # agent/<event>: an internal record
                    provider, _, model = head.partition("/")
        turn = _TURN.match(turn_path)
        rec = _Record(
            message=message,
            span=span,
            text=rest,
            level=sev.lower(),
            turn=int(turn.group(1)) if turn else None,
            remote=f"{provider}:{model}" if provider else None,
            provider=provider,
            model=model,
            agent_path=agent,
        )
        out.extend(self._meaning.events(rec))
        return out


# ------------------------------------------------------------------------------------------
# Helpers and sniffers


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return None
    return None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _number_or_text(value: str) -> int | float | str:
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return float(value)
    except ValueError:
        return value


_SNIFF_GUARD = re.compile(r"^(?:\x1b\[[0-9;]*m)*context-guard/[\w.-]+ (?:\x1b\[[0-9;]*m)*[{\[]")
_SNIFF_LOGFMT = re.compile(
    r"(?:^|\x1b\[[0-9;]*m)ts=\S+ level=(?:vrb|wrn|err|fin|thk|trc) priority=\d "
)


def sniff_debug(head: Head) -> float:
    lines = head.lines
    if any(_SNIFF_GUARD.match(line) for line in lines[:2000]):
        return 0.95
    return 0.0


def sniff_log(head: Head) -> float:
    lines = head.lines
    if any(_SNIFF_LOGFMT.search(line) for line in lines[:2000]):
        return 0.95
    probes = sum(1 for line in lines[:50] if _PROBE.match(strip_ansi(line)))
    if probes and probes >= min(len(lines), 50) // 2:
        return 0.8
    return 0.0


def sniff_console(head: Head) -> float:
    lines = [strip_ansi(line) for line in head.lines[:200]]
    if not lines:
        return 0.0
    hits = sum(1 for line in lines if _CONSOLE.match(line))
    if hits and hits * 2 >= len(lines):
        return 0.9
    return 0.0


DEBUG_SPEC = register(
    FormatSpec(
        name="aiagent-debug",
        description="netdata ai-agent CONTEXT_DEBUG stdout: context-guard/<topic> blocks",
        reads="stdout of ai-agent run with CONTEXT_DEBUG=true (*.log)",
        parser=AiAgentDebugParser,
        sniff=sniff_debug,
        default_profile="aiagent",
    )
)
LOG_SPEC = register(
    FormatSpec(
        name="aiagent-log",
        description="netdata ai-agent stderr: logfmt records (context, usage, forced final turns)",
        reads="stderr of ai-agent (logfmt, *.log)",
        parser=AiAgentLogParser,
        sniff=sniff_log,
        default_profile="aiagent",
    )
)
CONSOLE_SPEC = register(
    FormatSpec(
        name="aiagent-console",
        description="netdata ai-agent rich console log (--telemetry-log-format console)",
        reads="stderr of ai-agent with the console log format (*.log)",
        parser=AiAgentConsoleParser,
        sniff=sniff_console,
        default_profile="aiagent",
    )
)
