"""netdata ai-agent (seed 002): its CONTEXT_DEBUG stdout (``aiagent-debug``).

(``reference/seed-systems.md`` section 2, facts of section 8.) With ``CONTEXT_DEBUG=true``
stdout holds ``context-guard/<topic> {...}`` blocks printed by Node's ``console.log``
(``util.inspect`` text, see ``ctx_inspect.formats.jsinspect``), on one line or over many lines
up to a line ``}``, ANSI-coloured on a terminal, between other stdout text (the final report).
Every block becomes a ``DebugTopic`` (name = topic, payload = the object)
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

The log on stderr is ``reader_log`` (logfmt) or ``reader_console``; merging the streams of one
run (``--merge``) is ``merge``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ctx_inspect.agents.aiagent.guard import DEFAULT_TARGET, TOOL_NO_OUTPUT
from ctx_inspect.agents.aiagent.merge import merge
from ctx_inspect.agents.aiagent.values import (
    AGENT,
    TOOL_PREFLIGHT,
    TURN_PREFLIGHT,
    int_value,
    str_value,
)
from ctx_inspect.core.model import (
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
)
from ctx_inspect.formats.base import LineParser, decode_text
from ctx_inspect.formats.jsinspect import InspectError, is_complete, parse_inspect, strip_ansi
from ctx_inspect.formats.registry import FormatSpec, Head, register

BLOCK_MAX_LINES = 5000  # a labelled block longer than this is not an inspected object

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
            if int_value(payload.get("estimated")) is not None:
                extra["tool_schema_tokens"] = int_value(payload.get("estimated"))
            if int_value(payload.get("toolCount")) is not None:
                extra["tool_count"] = int_value(payload.get("toolCount"))
            if extra and extra != self._schema:
                self._schema = extra
                out.append(SessionInfo(agent=AGENT, extra=extra, span=span))
        return out

    def _target(self, payload: dict[str, Any]) -> GuardTarget:
        limit = int_value(payload.get("limit")) or 0
        projected = None
        if self._guard is not None:
            projected = int_value(self._guard.payload.get("projectedTokens"))
        return GuardTarget(
            provider=str_value(payload.get("provider")) or "",
            model=str_value(payload.get("model")) or "",
            context_window=int_value(payload.get("contextWindow")) or 0,
            buffer_tokens=int_value(payload.get("bufferTokens")) or 0,
            max_output_tokens=int_value(payload.get("maxOutputTokens")) or 0,
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
        extra = int_value(held.payload.get("extraTokens")) or 0
        event = self._guard_event(held, None, TOOL_PREFLIGHT if extra > 0 else None)
        self._last_guard = event
        return [event]

    def _guard_event(
        self, held: _HeldGuard, status: GuardStatus | None, trigger: str | None
    ) -> GuardEvaluated:
        p = held.payload
        return GuardEvaluated(
            current=int_value(p.get("currentCtxTokens")) or 0,
            pending=int_value(p.get("pendingCtxTokens")) or 0,
            new=int_value(p.get("newCtxTokens")) or 0,
            schema_tokens=int_value(p.get("schemaCtxTokens")) or 0,
            extra=int_value(p.get("extraTokens")) or 0,
            projected=int_value(p.get("projectedTokens")),
            targets=tuple(held.targets),
            status=status,
            trigger=trigger,
            span=held.span,
        )

    def _request(self, payload: dict[str, Any], span: SourceSpan) -> list[Event]:
        out: list[Event] = []
        provider = str_value(payload.get("provider")) or ""
        model = str_value(payload.get("model"))
        out.extend(self._note_model(provider, model, span))
        expected = int_value(payload.get("expectedTokens"))
        if expected is None:
            ctx = int_value(payload.get("ctxTokens"))
            pending = int_value(payload.get("pendingCtxTokens"))
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
                projected_tokens=int_value(first.get("projected")),
                limit_tokens=int_value(first.get("limit")),
                provider=str_value(first.get("provider")),
                model=str_value(first.get("model")),
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
                    limit_tokens=int_value(first.get("limit")),
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
    if len(targets) == 1 and targets[0].provider == DEFAULT_TARGET:
        return GuardStatus.FINAL
    return GuardStatus.OK


_SNIFF_GUARD = re.compile(r"^(?:\x1b\[[0-9;]*m)*context-guard/[\w.-]+ (?:\x1b\[[0-9;]*m)*[{\[]")


def sniff_debug(head: Head) -> float:
    lines = head.lines
    if any(_SNIFF_GUARD.match(line) for line in lines[:2000]):
        return 0.95
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
