"""ai-agent's guard followed through its log: the counters and the decisions the log shows.

The log (logfmt or console, ``reader_log`` and ``reader_console``) prints figures, not the
guard's own evaluations, so its counters are followed from what the log gives: ``current`` is
the request's ``expected``, then the answer's ``ctx_tokens``; ``new`` adds up each admitted
output's ``tokens_estimated`` (the guard's own reservation) and a refused output's stub;
enforcing commits ``pending`` and zeroes ``new``. At a decision (a forced final turn, a refused
or stored output) the guard's evaluation is rebuilt from them, adding up to the projection the
agent logged, so that it can be shown as the agent made it. What each record means is
``interpreter.py``, built on this.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field

from ctx_inspect.agents.aiagent.estimate import AIAGENT
from ctx_inspect.agents.aiagent.guard import TOOL_NO_OUTPUT
from ctx_inspect.agents.aiagent.profile import DEFAULT_CONTEXT_BUFFER_TOKENS
from ctx_inspect.agents.aiagent.values import (
    AGENT,
    MAIN,
    TOOL_PREFLIGHT,
    TURN_PREFLIGHT,
    int_value,
)
from ctx_inspect.core.model import (
    ContextMeasured,
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
)

LOG_TEXT_MAX = 300  # characters of a message kept in a LogLine
REQUEST_LABEL = "LLM request prepared"  # the agent's own figure for a request (expected)
_RE_REQUEST = re.compile(
    r"LLM request prepared(?: \(final turn\))? \[ctx (\d+), new (\d+), expected (\d+) \+ "
    r"output (\d+) = (\d+)% of (\d+)\]"
)
# the stored reasons that come from the token budget (a size-cap store does not)
_BUDGET_STORES = frozenset({"token_budget", "reserve_failed"})


@dataclass
class Record:
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


@functools.cache
def stub_tokens() -> int:
    """What the guard adds to ``new`` for a refused output's failure stub: its estimate of the
    stub as a tool message (with the default, approximate tokenizer)."""
    part = Part(type=PartType.TEXT, text=TOOL_NO_OUTPUT)
    stub = Message(id="stub", role=Role.TOOL, parts=(part,))
    return AIAGENT.message(stub, None)


@dataclass
class ThreadState:
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
class Held:
    """A record whose event waits for the next record of its thread, which may complete it:
    a ``Final turn detected`` (the ``Context budget exceeded`` after it gives the figures) or an
    output moved to storage (the preview of its handle gives the size that entered instead)."""

    rec: Record
    thread: str
    final: tuple[str, int, int] | None = None  # reason, turn, max turns
    stored: ToolOutputChanged | None = None
    handle: str | None = None


class LogGuard:
    """The guard of each agent of a run (the main one and its sub-agents), followed through the
    log's records; ``Interpreter`` reads the records with it."""

    def __init__(self) -> None:
        self.root: str | None = None
        self.threads: dict[str, ThreadState] = {}
        self.windows: dict[str, int] = {}  # "provider:model" -> context window
        self.outputs: dict[str, int] = {}  # -> the output reserve its requests printed
        self.buffers: dict[str, int] = {}  # -> the buffer its requests' percentages give
        self.limits: dict[str, int] = {}  # -> the limit the agent logged
        self.info: tuple[str | None, int | None] | None = None
        self.outcome_seen = False
        self.held: Held | None = None
        self.notice: tuple[str, int, int] | None = None  # the held final turn being completed

    def thread(self, rec: Record) -> str:
        path = rec.agent_path
        if not path or path == MAIN:
            return MAIN
        if self.root is None:
            self.root = path
        return MAIN if path == self.root else path

    def state(self, thread: str) -> ThreadState:
        return self.threads.setdefault(thread, ThreadState())

    def log(self, rec: Record) -> LogLine:
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
        provider, model = split_target(key)
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

    def request(self, rec: Record, thread: str, text: str) -> list[Event]:
        d = rec.details
        m = _RE_REQUEST.search(text)
        expected = int_value(d.get("expected_tokens"))
        window = int_value(d.get("context_window"))
        ctx = int_value(d.get("ctx_tokens"))
        pending = int_value(d.get("new_tokens"))
        schema = int_value(d.get("schema_tokens"))
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
                self.buffers[key] = buffer_for(
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

    def budget(self, rec: Record, thread: str, key: str, projected: int, limit: int) -> list[Event]:
        """``Context budget exceeded``: the guard forced the final turn. Its evaluation at that
        moment is rebuilt from the log (the counters add up to the projection it logged), then
        the counters are enforced as the guard does."""
        state = self.state(thread)
        self.limits[key] = limit
        trigger = rec.details.get("trigger") or (
            TOOL_PREFLIGHT if state.tools_running else TURN_PREFLIGHT
        )
        notice = self.notice
        provider, model = split_target(key)
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
        rec: Record,
        state: ThreadState,
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

    def limit_notice(self, rec: Record, thread: str, text: str) -> list[Event]:
        """``Context limit exceeded``: after enforcing, the context is still over the limit
        (the figure is the one after enforcement); ``during turn execution`` enforces again."""
        d = rec.details
        state = self.state(thread)
        if rec.provider and rec.provider != "agent" and rec.model:
            key = f"{rec.provider}:{rec.model}"
        else:
            key = state.target
        limit = int_value(d.get("limit_tokens"))
        if limit is not None and key:
            self.limits[key] = limit
        if "during turn execution" in text:
            state.enforce()
        notice = self.notice
        provider, model = split_target(key) if key else (None, None)
        return self.final_turn(
            rec,
            thread,
            reason=notice[0] if notice is not None else "context_limit_exceeded",
            projected=int_value(d.get("projected_tokens")),
            limit=limit,
            provider=provider,
            model=model,
            turn=notice[1] if notice is not None else None,
            max_turns=notice[2] if notice is not None else None,
        )

    def final_turn(
        self,
        rec: Record,
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

    def skip(self, rec: Record, projected: int, limit: int, key: str) -> GuardEvaluated:
        provider, model = split_target(key)
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

    def dropped(self, rec: Record, state: ThreadState, tool: str) -> list[Event]:
        """``output dropped after execution``: the guard refused the output. The first refusal
        of a turn follows the ``Context budget exceeded`` it caused (its figures and its
        evaluation); a later one is the counters since plus the output."""
        d = rec.details
        tokens = int_value(d.get("tokens_estimated"))
        out: list[Event] = []
        limit: int | None
        projected = int_value(d.get("projected_tokens"))
        if projected is not None:  # the record's own figures
            limit = int_value(d.get("limit_tokens"))
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

    def reservation(self, rec: Record, state: ThreadState, tokens: int) -> GuardEvaluated:
        """The guard's evaluation of an output it is asked to admit: the counters plus it."""
        return self.decision(
            rec, state, state.target, state.base + tokens, TOOL_PREFLIGHT, extra=tokens
        )

    def stored(self, rec: Record, thread: str, tool: str, reason: str, size: int) -> list[Event]:
        """``output stored for tool_output``: the output was kept out of the context, a handle
        in its place. For the token budget, the figure it would have made is the counters plus
        the output's own token count (the guard's estimate wraps it as a message, a few tokens
        more); the size that entered instead comes with the handle's preview, next."""
        d = rec.details
        state = self.state(thread)
        reason = d.get("reason") or reason
        tokens = int_value(d.get("tokens"))
        out: list[Event] = []
        projected = limit = None
        if reason in _BUDGET_STORES and tokens is not None:
            out.append(self.reservation(rec, state, tokens))
            projected = state.base + tokens
            limit = self.limit_of(state.target)
        event = self.tool_output(rec, ToolOutputAction.SPILLED, tool, tokens, limit, projected)
        if event.original_bytes is None:
            event = event.model_copy(update={"original_bytes": int_value(d.get("bytes")) or size})
        handle = d.get("handle")
        if handle:
            self.held = Held(rec, thread, stored=event, handle=handle)
            return out
        return [*out, event]

    def tool_output(
        self,
        rec: Record,
        action: ToolOutputAction,
        tool: str,
        tokens: int | None,
        limit: int | None,
        projected: int | None = None,
    ) -> ToolOutputChanged:
        d = rec.details
        if tokens is None:
            tokens = int_value(d.get("tokens_estimated"))
            if tokens is None:
                tokens = int_value(d.get("tokens"))
        if limit is None:
            limit = int_value(d.get("limit_tokens"))
        if projected is None:
            projected = int_value(d.get("projected_tokens"))
        return ToolOutputChanged(
            action=action,
            tool=tool,
            tokens=tokens,
            original_bytes=int_value(d.get("original_bytes")),
            final_bytes=int_value(d.get("final_bytes")),
            projected_tokens=projected,
            limit_tokens=limit,
            replacement=TOOL_NO_OUTPUT if action is ToolOutputAction.DROPPED else None,
            timestamp=rec.timestamp,
            span=rec.span,
        )


def buffer_for(window: int, expected: int, output: int, percent: int, known: int | None) -> int:
    """The buffer that makes ``LLM request prepared``'s percentage come out as printed
    (``round((expected + buffer + output) / window × 100)``): the one already found or the
    agent's default when either does, else the middle of the range that does."""

    def printed(buffer: int) -> int:
        return math.floor((expected + buffer + output) / window * 100 + 0.5)

    for candidate in (known, DEFAULT_CONTEXT_BUFFER_TOKENS):
        if candidate is not None and printed(candidate) == percent:
            return candidate
    return max(0, round(percent * window / 100) - expected - output)


def split_target(text: str) -> tuple[str | None, str | None]:
    provider, sep, model = text.partition(":")
    if not sep:
        return None, text or None
    return provider or None, model or None
