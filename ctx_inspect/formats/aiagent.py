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
  only a ``DebugTopic``). At the tool preflight (``trigger: 'tool_preflight'``) after a tool
  evaluation, the reservation it refused is also ``ToolOutputChanged(dropped)`` (tokens = the
  evaluation's ``extraTokens``): in this version the tools drop a refused output for the
  failure stub. A later refusal (no ``enforce``) looks like a storage preview here: only the
  log names it.
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
Both share one message interpreter (``_Interpreter``), which also follows the guard's counters
from what the log gives (``current`` = the request's ``expected``, then the answer's
``ctx_tokens``; ``new`` += each admitted output's ``tokens_estimated`` (the guard's own
reservation) and a refused output's stub; enforcing commits ``pending`` and zeroes ``new``), so
that the guard's evaluation at a decision can be shown as the agent made it:

- ``LLM request prepared [ctx C, new N, expected E + output O = P% of W]`` ->
  ``GuardEvaluated(current=C, pending=N, projected=E)`` with the target as the log gives it (the
  window W, the output reserve O, the limit the agent logged for that model, else the buffer that
  makes P come out: the default 8,192 when it does), then ``ContextMeasured(E, limit=W,
  label="LLM request prepared")`` then ``RequestSent(model, final_turn)`` (`` (final turn)`` or
  ``final_turn=true``). E is the request's size by the guard's count, the same figure
  ``build-metrics`` gives, and the figure the step shows (the provider's usage stays beside it).
  After the guard forced the final turn the evaluation has no status: it decides nothing.
- ``LLM response received`` -> ``UsageReported`` (input, cache read, cache write, output; the
  input excludes the cache: ``ctx_tokens = in + cR + cW + out``), its ``context_tokens`` the
  request's E: the step keeps the agent's own figure.
- ``Context budget exceeded (p:m - projected P tokens vs limit L). Forcing final turn.`` ->
  ``GuardEvaluated`` at the decision (the counters followed so far, adding up to P; at the tool
  preflight the refused output is ``extra``; status final at the turn preflight) then
  ``FinalTurnForced(reason="context", P, L)``; the counters are then enforced. ``Final turn
  detected (turn=T/M, reason=R)`` waits for the next record of its agent: a budget (or limit)
  notice completes it (turn and maximum from one, figures from the other, in either order);
  anything else releases it as ``FinalTurnForced(reason=R, turn, max_turns)``. ``Context limit
  exceeded; forcing final turn.`` (or ``... during turn execution; proceeding with final turn.``,
  which enforces again) carries the figure after enforcement: it completes a held final turn, or
  alone is ``FinalTurnForced(reason="context_limit_exceeded")``. One forced final turn per turn:
  once one is emitted, another for the same turn, or any before the next request (the forced
  final turn is the next request), is only a ``LogLine``.
- ``Projected context size P tokens exceeds limit L for p:m; continuing turn ...`` ->
  ``GuardEvaluated(status=skip, projected=P, targets=(p, m, limit L, blocked))``; the target's
  window is the last one an ``LLM request prepared`` gave for that model (0 when unknown).
- ``Tool 'X' output dropped: context window budget exceeded (N tokens, limit L).`` (the
  executor's, with its projection) and ``Tool 'X' output dropped after execution: token budget
  exceeded.`` (the tools', ``tokens_estimated`` = the reservation) -> ``ToolOutputChanged
  (dropped)`` with the replacement ``(tool failed: context window budget exceeded)``; the
  projection is the record's, else that of the ``Context budget exceeded`` the refusal caused
  just before, else the counters plus the output (a ``GuardEvaluated`` of that reservation
  before it). ``Tool 'X' output stored for tool_output (R, N bytes)`` -> ``ToolOutputChanged
  (spilled)`` (tokens and bytes of the record), its size after from the preview of the handle
  that follows; for the token budget (R ``token_budget`` or ``reserve_failed``) with the figure
  it would have made (the counters plus its token count; the guard's own estimate wraps the
  output as a message, a few tokens more) and that evaluation before it; for its size
  (``size_cap``) no figure.
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

Merging the streams of one run (``--merge``) is ``aiagent_merge``: one request per call, the
debug stream's evaluations, one forced final turn at its ``enforce`` with the log's figures,
each refused or stored output at the evaluation that decided it.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ctx_inspect.core.estimate import estimate_message
from ctx_inspect.core.guard import DEFAULT_CONTEXT_BUFFER_TOKENS
from ctx_inspect.core.model import (
    ContextMeasured,
    DebugTopic,
    Event,
    FinalTurnForced,
    GuardEvaluated,
    GuardStatus,
    GuardTarget,
    LogLine,
    Message,
    Part,
    PartType,
    RequestSent,
    Role,
    SessionInfo,
    SourceSpan,
    ToolOutputAction,
    ToolOutputChanged,
    Usage,
    UsageReported,
)
from ctx_inspect.formats.aiagent_merge import merge
from ctx_inspect.formats.base import LineParser, decode_text
from ctx_inspect.formats.jsinspect import InspectError, is_complete, parse_inspect, strip_ansi
from ctx_inspect.formats.registry import FormatSpec, Head, register

AGENT = "ai-agent"
TURN_PREFLIGHT = "turn_preflight"  # the guard's triggers
TOOL_PREFLIGHT = "tool_preflight"
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
        self._last_guard: GuardEvaluated | None = None  # the latest evaluation, once closed
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
            self._last_guard = self._guard_event(held, status, TURN_PREFLIGHT)
            out.append(self._last_guard)
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
        event = self._guard_event(held, None, TOOL_PREFLIGHT if extra > 0 else None)
        self._last_guard = event
        return [event]

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
        out: list[Event] = [
            FinalTurnForced(
                reason="context",
                projected_tokens=_int(first.get("projected")),
                limit_tokens=_int(first.get("limit")),
                provider=_str(first.get("provider")),
                model=_str(first.get("model")),
                span=span,
            )
        ]
        refused = self._last_guard
        if payload.get("trigger") == TOOL_PREFLIGHT and refused is not None and refused.extra > 0:
            # the reservation it refused: the tools drop that output for the failure stub
            out.append(
                ToolOutputChanged(
                    action=ToolOutputAction.DROPPED,
                    tokens=refused.extra,
                    projected_tokens=refused.projection,
                    limit_tokens=_int(first.get("limit")),
                    replacement=TOOL_NO_OUTPUT,
                    span=span,
                )
            )
        return out


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
    r"LLM request prepared(?: \(final turn\))? \[ctx (\d+), new (\d+), expected (\d+) \+ "
    r"output (\d+) = (\d+)% of (\d+)\]"
)
_RE_USAGE = re.compile(r"tokens: in (\d+), out (\d+)(?:, cR (\d+))?(?:, cW (\d+))?")
_RE_BUDGET = re.compile(
    r"Context budget exceeded \((.+?) - projected (\d+) tokens vs limit (\d+)\)\. "
    r"Forcing final turn\."
)
_RE_FINAL = re.compile(r"Final turn detected \(turn=(\d+)/(\d+)[^)]*, reason=([\w-]+)\)")
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
_RE_COMPLETED = re.compile(r"Tool '(.+?)' completed \((\d+) bytes, (\d+) tokens\)")
_RE_EXIT = re.compile(r"\b(EXIT-[A-Z][A-Z0-9-]*)")
_RE_SESSION = re.compile(r"session initialized \(txnId: ([\w-]+)\)")

# the stored reasons that come from the token budget (a size-cap store does not)
_BUDGET_STORES = frozenset({"token_budget", "reserve_failed"})
REQUEST_LABEL = "LLM request prepared"  # the agent's own figure for a request (expected)

# events that name their thread (or are about the whole run): kept for a sub-agent's records
_THREADED = (RequestSent, UsageReported, SessionInfo, LogLine)


@functools.cache
def stub_tokens() -> int:
    """What the guard adds to ``new`` for a refused output's failure stub: its estimate of the
    stub as a tool message (with the default, approximate tokenizer)."""
    part = Part(type=PartType.TEXT, text=TOOL_NO_OUTPUT)
    stub = Message(id="stub", role=Role.TOOL, parts=(part,))
    return estimate_message("aiagent", stub)


@dataclass
class _ThreadState:
    """One agent's forced final turns, and its guard's counters as its log shows them.

    ``current`` is what the latest request carried (``expected``), then what the provider
    reported once it answered (``ctx_tokens``); ``new`` adds up the tool outputs admitted
    since (their ``tokens_estimated``, the guard's own reservation); forcing the final turn
    commits ``pending`` and zeroes ``new``, as the guard does.
    """

    forced_turns: set[int] = field(default_factory=set)
    forced_pending: bool = False  # a forced final turn since the last request
    current: int = 0
    pending: int = 0
    new: int = 0
    schema: int = 0  # the tool schemas' estimate the latest request printed
    target: str = ""  # "provider:model" of the latest request
    sent: int | None = None  # the latest request's size by the agent's count (``expected``)
    tools_running: bool = False  # after a request, before its answer: the turn's tools run
    refused: tuple[int, int] | None = None  # a tool preflight just refused: (projected, limit)
    evaluated: int | None = None  # the executor just logged its refusal at this projection

    @property
    def base(self) -> int:
        return self.current + self.pending + self.new

    def enforce(self) -> None:
        self.current += max(0, self.pending)
        self.pending = 0
        self.new = 0

    def forced(self, turn: int | None) -> bool:
        return self.forced_pending or (turn is not None and turn in self.forced_turns)


@dataclass
class _Held:
    """A record whose event waits for the next record of its thread, which may complete it:
    a ``Final turn detected`` (the ``Context budget exceeded`` after it gives the figures) or an
    output moved to storage (the preview of its handle gives the size that entered instead)."""

    rec: _Record
    thread: str
    final: tuple[str, int, int] | None = None  # reason, turn, max turns
    stored: ToolOutputChanged | None = None
    handle: str | None = None


class _Interpreter:
    """What a record's message means; the same for logfmt and console records."""

    def __init__(self) -> None:
        self.root: str | None = None
        self.threads: dict[str, _ThreadState] = {}
        self.windows: dict[str, int] = {}  # "provider:model" -> context window
        self.outputs: dict[str, int] = {}  # -> the output reserve its requests printed
        self.buffers: dict[str, int] = {}  # -> the buffer its requests' percentages give
        self.limits: dict[str, int] = {}  # -> the limit the agent logged
        self.info: tuple[str | None, int | None] | None = None
        self.outcome_seen = False
        self.held: _Held | None = None
        self.notice: tuple[str, int, int] | None = None  # the held final turn being completed

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
        out: list[Event] = []
        held, self.held = self.held, None
        if held is not None:
            done = self._complete(held, rec)
            if done is not None:
                return done
            out.extend(self._release(held))
        out.extend(self._filtered(rec, self._events(rec)))
        return out

    def flush(self) -> list[Event]:
        """The held record's events, before text that is no record (or at the end)."""
        held, self.held = self.held, None
        return [] if held is None else self._release(held)

    def _filtered(self, rec: _Record, out: list[Event]) -> list[Event]:
        if self.thread(rec) == MAIN:
            return out
        # a sub-agent's context figures, guard and final turn would land on the main
        # timeline (those events carry no thread): keep them as the record's text
        kept: list[Event] = [e for e in out if isinstance(e, _THREADED)]
        if len(kept) < len(out) and not any(isinstance(e, LogLine) for e in kept):
            kept.append(self.log(rec))
        return kept

    def _release(self, held: _Held) -> list[Event]:
        if held.final is not None:
            reason, turn, max_turns = held.final
            events = self.final_turn(
                held.rec, held.thread, reason=reason, turn=turn, max_turns=max_turns
            )
        else:
            events = [held.stored] if held.stored is not None else [self.log(held.rec)]
        return self._filtered(held.rec, events)

    def _complete(self, held: _Held, rec: _Record) -> list[Event] | None:
        """The events of ``held`` and ``rec`` when ``rec`` completes it, else None."""
        if self.thread(rec) != held.thread:
            return None
        text = rec.text or rec.message
        if held.final is not None:
            if not (_RE_BUDGET.search(text) or _RE_LIMIT.search(text)):
                return None
            self.notice = held.final
            try:
                events = self._events(rec)
            finally:
                self.notice = None
            # each record filtered on its own: in a sub-agent's thread the held record's log
            # line must not stand for this record, whose final turn is then left out
            return [*self._filtered(held.rec, [self.log(held.rec)]), *self._filtered(rec, events)]
        d = rec.details
        if (
            held.stored is None
            or d.get("event") != "tool_response_preview"
            or d.get("tool_output_handle") != held.handle
        ):
            return None
        stored = held.stored.model_copy(
            update={
                "tokens_after": _int(d.get("tokens_estimated")),
                "final_bytes": _int(d.get("result_bytes")),
            }
        )
        return [*self._filtered(held.rec, [stored]), *self._filtered(rec, self._events(rec))]

    def _events(self, rec: _Record) -> list[Event]:
        text = rec.text or rec.message
        thread = self.thread(rec)
        state = self.state(thread)
        d = rec.details
        if m := _RE_BUDGET.search(text):
            return self.budget(rec, thread, m.group(1), int(m.group(2)), int(m.group(3)))
        if m := _RE_FINAL.search(text):
            turn = int(m.group(1))
            if state.forced(turn):
                return [self.log(rec)]
            self.held = _Held(rec, thread, final=(m.group(3), turn, int(m.group(2))))
            return []
        if _RE_LIMIT.search(text):
            return self.limit_notice(rec, thread, text)
        if m := _RE_PROJECTED.search(text):
            self.limits[m.group(3)] = int(m.group(2))
            return [self.skip(rec, int(m.group(1)), int(m.group(2)), m.group(3))]
        if m := _RE_DROPPED.search(text):
            tokens, limit = int(m.group(2)), int(m.group(3))
            if state.target:
                self.limits[state.target] = limit
            projected = _int(d.get("projected_tokens"))
            out: list[Event] = []
            if projected is not None:  # the executor's own evaluation, which forces next
                out.append(
                    self.decision(rec, state, state.target, projected, TOOL_PREFLIGHT, tokens)
                )
                state.evaluated = projected
                state.tools_running = True
            out.append(
                self.tool_output(
                    rec, ToolOutputAction.DROPPED, m.group(1), tokens, limit, projected
                )
            )
            state.new += stub_tokens()
            return out
        if m := _RE_DROPPED_AFTER.search(text):
            return self.dropped(rec, state, m.group(1))
        if m := _RE_STORED.search(text):
            return self.stored(rec, thread, m.group(1), m.group(2), int(m.group(3)))
        if "LLM request prepared" in text:
            return self.request(rec, thread, text)
        if "LLM response received" in text and (usage := _usage(d, text)) is not None:
            ctx = _int(d.get("ctx_tokens"))
            state.current = ctx if ctx is not None else usage.context_after
            state.pending = 0
            state.tools_running = False
            state.refused = None
            # the request's step keeps the agent's own figure for it, the usage beside it
            return [
                UsageReported(
                    usage=usage,
                    model=rec.model,
                    thread=thread,
                    context_tokens=state.sent,
                    context_label=REQUEST_LABEL if state.sent is not None else "",
                    timestamp=rec.timestamp,
                    span=rec.span,
                )
            ]
        if d.get("event") == "tool_response_preview":
            admitted = _int(d.get("tokens_estimated"))
            if admitted is not None and d.get("dropped") != "true":
                state.new += admitted  # the output entered: the guard reserved this much
            return [self.log(rec)]
        if m := _RE_COMPLETED.search(text):
            state.new += int(m.group(3))  # the executor counted an output the tools did not
            return [self.log(rec)]
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
        if exit_code is None and "EXIT-" in text and (m := _RE_EXIT.search(text)):
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

    # -- the guard's arithmetic, from the figures the log gives -------------------------------

    def target(self, key: str, projected: int) -> GuardTarget | None:
        """``key``'s target as its requests and limit records show it (None before a request
        printed its window and output reserve). The limit is the one the agent logged, else
        window − buffer − output with the buffer its percentages give."""
        window = self.windows.get(key)
        output = self.outputs.get(key)
        if not window or output is None:
            return None
        limit = self.limits.get(key)
        if limit is not None:
            buffer = max(0, window - output - limit)
        else:
            buffer = self.buffers.get(key, DEFAULT_CONTEXT_BUFFER_TOKENS)
            limit = max(0, window - buffer - output)
        provider, model = _split_target(key)
        return GuardTarget(
            provider=provider or "",
            model=model or "",
            context_window=window,
            buffer_tokens=buffer,
            max_output_tokens=output,
            limit=limit,
            projected=projected,
            blocked=limit > 0 and projected > limit,
        )

    def limit_of(self, key: str) -> int | None:
        target = self.target(key, 0)
        return target.limit if target is not None else self.limits.get(key)

    def request(self, rec: _Record, thread: str, text: str) -> list[Event]:
        d = rec.details
        m = _RE_REQUEST.search(text)
        expected = _int(d.get("expected_tokens"))
        window = _int(d.get("context_window"))
        ctx = _int(d.get("ctx_tokens"))
        pending = _int(d.get("new_tokens"))
        schema = _int(d.get("schema_tokens"))
        output = percent = None
        if m is not None:
            ctx = ctx if ctx is not None else int(m.group(1))
            pending = pending if pending is not None else int(m.group(2))
            expected = expected if expected is not None else int(m.group(3))
            output, percent = int(m.group(4)), int(m.group(5))
            window = window if window is not None else int(m.group(6))
        final = d.get("final_turn") == "true" or "(final turn)" in text
        key = f"{rec.provider}:{rec.model}"
        state = self.state(thread)
        out: list[Event] = []
        if window:
            self.windows[key] = window
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
        if output is not None:
            self.outputs[key] = output
            if window and expected is not None and percent is not None:
                self.buffers[key] = _buffer(
                    window, expected, output, percent, self.buffers.get(key)
                )
        if schema is not None:
            state.schema = schema
        if expected is not None:
            target = self.target(key, expected)
            if target is not None:
                current = ctx if ctx is not None and pending is not None else expected
                out.append(
                    GuardEvaluated(
                        current=current,
                        pending=expected - current,
                        schema_tokens=state.schema,
                        projected=expected,
                        targets=(target,),
                        # after the guard forced this final turn it decides nothing more
                        status=None if state.forced_pending else GuardStatus.OK,
                        trigger=TURN_PREFLIGHT,
                        timestamp=rec.timestamp,
                        span=rec.span,
                    )
                )
            out.append(
                ContextMeasured(
                    tokens=expected,
                    limit=window or None,
                    label=REQUEST_LABEL,
                    timestamp=rec.timestamp,
                    span=rec.span,
                )
            )
            state.current, state.pending, state.new = expected, 0, 0
        state.sent = expected
        out.append(
            RequestSent(
                model=rec.model,
                thread=thread,
                final_turn=final,
                timestamp=rec.timestamp,
                span=rec.span,
            )
        )
        state.forced_pending = False
        state.target = key
        state.tools_running = True
        state.refused = None
        return out

    def budget(
        self, rec: _Record, thread: str, key: str, projected: int, limit: int
    ) -> list[Event]:
        """``Context budget exceeded``: the guard forced the final turn. Its evaluation at that
        moment is rebuilt from the log (the counters add up to the projection it logged), then
        the counters are enforced as the guard does."""
        state = self.state(thread)
        self.limits[key] = limit
        trigger = rec.details.get("trigger") or (
            TOOL_PREFLIGHT if state.tools_running else TURN_PREFLIGHT
        )
        notice = self.notice
        provider, model = _split_target(key)
        forced = self.final_turn(
            rec,
            thread,
            reason="context",
            projected=projected,
            limit=limit,
            provider=provider,
            model=model,
            turn=notice[1] if notice is not None else None,
            max_turns=notice[2] if notice is not None else None,
        )
        # the executor logs its refusal (and its evaluation) before it forces the final turn
        logged = state.evaluated == projected
        state.evaluated = None
        decision = [] if logged else [self.decision(rec, state, key, projected, trigger)]
        state.enforce()
        if trigger == TOOL_PREFLIGHT and not logged:
            state.refused = (projected, limit)
        if forced and isinstance(forced[0], FinalTurnForced):
            return [*decision, *forced]
        return forced

    def decision(
        self,
        rec: _Record,
        state: _ThreadState,
        key: str,
        projected: int,
        trigger: str,
        extra: int | None = None,
    ) -> GuardEvaluated:
        """The guard's evaluation at a decision: ``current`` the latest figure, ``new`` the
        outputs admitted since, ``extra`` (at a tool preflight) the output asked for (given, or
        what the projection holds beyond the counters); the counters add up to the logged
        projection: what the log leaves unsized goes to ``new``, what it over-counts comes off
        ``new``, then ``pending``, then ``current``."""
        counters = [state.current, state.pending, state.new]
        if extra is None:
            extra = max(0, projected - sum(counters)) if trigger == TOOL_PREFLIGHT else 0
        rest = projected - sum(counters) - extra
        if rest >= 0:
            counters[2] += rest
        for index in (2, 1, 0):
            taken = min(counters[index], max(0, -rest))
            counters[index] -= taken
            rest += taken
        current, pending, new = counters
        target = self.target(key, projected)
        return GuardEvaluated(
            current=current,
            pending=pending,
            new=new,
            schema_tokens=state.schema,
            extra=extra,
            projected=projected,
            targets=(target,) if target is not None else (),
            status=GuardStatus.FINAL if trigger == TURN_PREFLIGHT else None,
            trigger=trigger,
            timestamp=rec.timestamp,
            span=rec.span,
        )

    def limit_notice(self, rec: _Record, thread: str, text: str) -> list[Event]:
        """``Context limit exceeded``: after enforcing, the context is still over the limit
        (the figure is the one after enforcement); ``during turn execution`` enforces again."""
        d = rec.details
        state = self.state(thread)
        if rec.provider and rec.provider != "agent" and rec.model:
            key = f"{rec.provider}:{rec.model}"
        else:
            key = state.target
        limit = _int(d.get("limit_tokens"))
        if limit is not None and key:
            self.limits[key] = limit
        if "during turn execution" in text:
            state.enforce()
        notice = self.notice
        provider, model = _split_target(key) if key else (None, None)
        return self.final_turn(
            rec,
            thread,
            reason=notice[0] if notice is not None else "context_limit_exceeded",
            projected=_int(d.get("projected_tokens")),
            limit=limit,
            provider=provider,
            model=model,
            turn=notice[1] if notice is not None else None,
            max_turns=notice[2] if notice is not None else None,
        )

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
        if state.forced(turn):
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

    def skip(self, rec: _Record, projected: int, limit: int, key: str) -> GuardEvaluated:
        provider, model = _split_target(key)
        target = self.target(key, projected) or GuardTarget(
            provider=provider or "",
            model=model or "",
            context_window=self.windows.get(key, 0),
            limit=limit,
            projected=projected,
            blocked=limit > 0 and projected > limit,
        )
        return GuardEvaluated(
            current=self.state(self.thread(rec)).current,
            projected=projected,
            targets=(target,),
            status=GuardStatus.SKIP,
            trigger=TURN_PREFLIGHT,
            timestamp=rec.timestamp,
            span=rec.span,
        )

    def dropped(self, rec: _Record, state: _ThreadState, tool: str) -> list[Event]:
        """``output dropped after execution``: the guard refused the output. The first refusal
        of a turn follows the ``Context budget exceeded`` it caused (its figures and its
        evaluation); a later one is the counters since plus the output."""
        d = rec.details
        tokens = _int(d.get("tokens_estimated"))
        out: list[Event] = []
        limit: int | None
        projected = _int(d.get("projected_tokens"))
        if projected is not None:  # the record's own figures
            limit = _int(d.get("limit_tokens"))
        elif state.refused is not None:
            projected, limit = state.refused
            state.refused = None
        else:
            projected = state.base + tokens if tokens is not None else None
            limit = self.limit_of(state.target)
            if tokens is not None:
                out.append(self.reservation(rec, state, tokens))
        state.new += stub_tokens()
        out.append(self.tool_output(rec, ToolOutputAction.DROPPED, tool, tokens, limit, projected))
        return out

    def reservation(self, rec: _Record, state: _ThreadState, tokens: int) -> GuardEvaluated:
        """The guard's evaluation of an output it is asked to admit: the counters plus it."""
        return self.decision(
            rec, state, state.target, state.base + tokens, TOOL_PREFLIGHT, extra=tokens
        )

    def stored(self, rec: _Record, thread: str, tool: str, reason: str, size: int) -> list[Event]:
        """``output stored for tool_output``: the output was kept out of the context, a handle
        in its place. For the token budget, the figure it would have made is the counters plus
        the output's own token count (the guard's estimate wraps it as a message, a few tokens
        more); the size that entered instead comes with the handle's preview, next."""
        d = rec.details
        state = self.state(thread)
        reason = d.get("reason") or reason
        tokens = _int(d.get("tokens"))
        out: list[Event] = []
        projected = limit = None
        if reason in _BUDGET_STORES and tokens is not None:
            out.append(self.reservation(rec, state, tokens))
            projected = state.base + tokens
            limit = self.limit_of(state.target)
        event = self.tool_output(rec, ToolOutputAction.SPILLED, tool, tokens, limit, projected)
        if event.original_bytes is None:
            event = event.model_copy(update={"original_bytes": _int(d.get("bytes")) or size})
        handle = d.get("handle")
        if handle:
            self.held = _Held(rec, thread, stored=event, handle=handle)
            return out
        return [*out, event]

    def tool_output(
        self,
        rec: _Record,
        action: ToolOutputAction,
        tool: str,
        tokens: int | None,
        limit: int | None,
        projected: int | None = None,
    ) -> ToolOutputChanged:
        d = rec.details
        if tokens is None:
            tokens = _int(d.get("tokens_estimated"))
            if tokens is None:
                tokens = _int(d.get("tokens"))
        if limit is None:
            limit = _int(d.get("limit_tokens"))
        if projected is None:
            projected = _int(d.get("projected_tokens"))
        return ToolOutputChanged(
            action=action,
            tool=tool,
            tokens=tokens,
            original_bytes=_int(d.get("original_bytes")),
            final_bytes=_int(d.get("final_bytes")),
            projected_tokens=projected,
            limit_tokens=limit,
            replacement=TOOL_NO_OUTPUT if action is ToolOutputAction.DROPPED else None,
            timestamp=rec.timestamp,
            span=rec.span,
        )


def _buffer(window: int, expected: int, output: int, percent: int, known: int | None) -> int:
    """The buffer that makes ``LLM request prepared``'s percentage come out as printed
    (``round((expected + buffer + output) / window × 100)``): the one already found or the
    agent's default when either does, else the middle of the range that does."""

    def printed(buffer: int) -> int:
        return math.floor((expected + buffer + output) / window * 100 + 0.5)

    for candidate in (known, DEFAULT_CONTEXT_BUFFER_TOKENS):
        if candidate is not None and printed(candidate) == percent:
            return candidate
    return max(0, round(percent * window / 100) - expected - output)


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
        self._meaning = _Interpreter()

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
            return [*out, SessionInfo(extra=extra, span=span), self._meaning.log(rec)]
        return [*out, self._meaning.log(rec)]


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

    def end_of_input(self) -> Iterable[Event]:
        return self._meaning.flush()

    def parse_line(self, line: bytes, span: SourceSpan) -> Iterable[Event]:
        out: list[Event] = []
        clean = strip_ansi(decode_text(line, self, span, out)).rstrip()
        m = _CONSOLE.match(clean)
        if m is None:
            out.extend(self._meaning.flush())
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
        stream_merge=merge,
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
        stream_merge=merge,
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
        stream_merge=merge,
    )
)
