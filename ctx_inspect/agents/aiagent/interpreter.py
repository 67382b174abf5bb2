"""What each record of ai-agent's log means (``aiagent-log`` and ``aiagent-console`` alike).

Both readers make ``Record``s and give them to one ``Interpreter``, which follows the guard's
counters from the figures the log gives (``log_guard.py``), so that the guard's evaluation at a
decision can be shown as the agent made it:

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
"""

from __future__ import annotations

import re

from ctx_inspect.agents.aiagent.log_guard import (
    REQUEST_LABEL,
    Held,
    LogGuard,
    Record,
    stub_tokens,
)
from ctx_inspect.agents.aiagent.values import AGENT, MAIN, TOOL_PREFLIGHT, int_value, number_or_text
from ctx_inspect.core.model import (
    Event,
    LogLine,
    RequestSent,
    SessionInfo,
    ToolOutputAction,
    Usage,
    UsageReported,
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

# events that name their thread (or are about the whole run): kept for a sub-agent's records
_THREADED = (RequestSent, UsageReported, SessionInfo, LogLine)


class Interpreter(LogGuard):
    """What a record's message means; the same for logfmt and console records."""

    def events(self, rec: Record) -> list[Event]:
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

    def _filtered(self, rec: Record, out: list[Event]) -> list[Event]:
        if self.thread(rec) == MAIN:
            return out
        # a sub-agent's context figures, guard and final turn would land on the main
        # timeline (those events carry no thread): keep them as the record's text
        kept: list[Event] = [e for e in out if isinstance(e, _THREADED)]
        if len(kept) < len(out) and not any(isinstance(e, LogLine) for e in kept):
            kept.append(self.log(rec))
        return kept

    def _release(self, held: Held) -> list[Event]:
        if held.final is not None:
            reason, turn, max_turns = held.final
            events = self.final_turn(
                held.rec, held.thread, reason=reason, turn=turn, max_turns=max_turns
            )
        else:
            events = [held.stored] if held.stored is not None else [self.log(held.rec)]
        return self._filtered(held.rec, events)

    def _complete(self, held: Held, rec: Record) -> list[Event] | None:
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
                "tokens_after": int_value(d.get("tokens_estimated")),
                "final_bytes": int_value(d.get("result_bytes")),
            }
        )
        return [*self._filtered(held.rec, [stored]), *self._filtered(rec, self._events(rec))]

    def _events(self, rec: Record) -> list[Event]:
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
            self.held = Held(rec, thread, final=(m.group(3), turn, int(m.group(2))))
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
            projected = int_value(d.get("projected_tokens"))
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
        if "LLM response received" in text and (usage := usage_of(d, text)) is not None:
            ctx = int_value(d.get("ctx_tokens"))
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
            admitted = int_value(d.get("tokens_estimated"))
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
            summary = {k: number_or_text(v) for k, v in d.items() if k != "event"}
            return [
                SessionInfo(extra={"llm_summary": summary}, timestamp=rec.timestamp, span=rec.span),
                self.log(rec),
            ]
        return [self.log(rec)]


def usage_of(details: dict[str, str], text: str) -> Usage | None:
    inp = int_value(details.get("input_tokens"))
    out = int_value(details.get("output_tokens"))
    if inp is not None or out is not None:
        return Usage(
            input=inp or 0,
            cache_read=int_value(details.get("cache_read_tokens")) or 0,
            cache_write=int_value(details.get("cache_write_tokens")) or 0,
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
