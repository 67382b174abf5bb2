"""One session of the two streams of one ai-agent run: the CONTEXT_DEBUG blocks on stdout
(``aiagent-debug``, no timestamps) and the log on stderr (``aiagent-log`` or
``aiagent-console``).

Both mark every LLM request (``build-metrics`` on stdout, ``LLM request prepared`` on
stderr, printed by the same call), so the n-th request of one is the n-th of the other, and
what each stream printed between two requests belongs to the same build-up. Per build-up:

- one request and one context figure: the log's (it has the time, the turn and the
  final-turn flag; the debug stream's ``build-metrics`` figure is the same number);
- the guard's evaluations: the debug stream's, as the agent printed them (the log's are
  rebuilt from its figures, so they are left out);
- one forced final turn: where the debug stream's ``enforce`` is (after the evaluation that
  forced it, before those after enforcement), with the log record's figures, turn and time;
- an output the guard refused or moved to storage: the log's record (it names the tool and
  its size; the debug stream only infers a refused output from an ``enforce``), right after
  the debug stream's blocked evaluation that decided it (and after the final turn that
  evaluation forced), with that evaluation's projection, the agent's own figure;
- everything else of both streams, the log's first.
"""

from __future__ import annotations

from collections.abc import Sequence

from ctx_inspect.core.model import (
    ContextMeasured,
    DebugTopic,
    Event,
    FinalTurnForced,
    GuardEvaluated,
    RequestSent,
    ToolOutputChanged,
)

DEBUG = "aiagent-debug"
LOGS = frozenset({"aiagent-log", "aiagent-console"})
MAIN = "main"


def merge(streams: Sequence[Sequence[Event]], formats: Sequence[str]) -> list[Event] | None:
    """The merged events of one debug stream and one log of the same run (else None)."""
    if len(streams) != 2 or DEBUG not in formats:
        return None
    debug_index = list(formats).index(DEBUG)
    log_index = 1 - debug_index
    if formats[log_index] not in LOGS:
        return None
    debug = _build_ups(streams[debug_index])
    log = _build_ups(streams[log_index])
    out: list[Event] = []
    for index in range(max(len(debug), len(log))):
        out.extend(
            _build_up(
                log[index] if index < len(log) else [],
                debug[index] if index < len(debug) else [],
            )
        )
    return out


def _build_ups(events: Sequence[Event]) -> list[list[Event]]:
    """The events up to and including each request of the main agent, then the rest."""
    parts: list[list[Event]] = [[]]
    for event in events:
        parts[-1].append(event)
        if isinstance(event, RequestSent) and event.thread == MAIN:
            parts.append([])
    return parts


def _tail(part: list[Event]) -> tuple[list[Event], list[Event]]:
    """A build-up and the events of its request's own record (all that share its span)."""
    if not part or not isinstance(part[-1], RequestSent) or part[-1].span is None:
        return part, []
    span = part[-1].span
    start = len(part) - 1
    while start > 0 and part[start - 1].span == span:
        start -= 1
    return part[:start], part[start:]


def _build_up(log: list[Event], debug: list[Event]) -> list[Event]:
    log_body, log_tail = _tail(log)
    debug_body, debug_tail = _tail(debug)
    if log_tail:  # the same request: the log's stands for both
        debug_body += [e for e in debug_tail if not isinstance(e, ContextMeasured | RequestSent)]
    else:
        debug_body = list(debug)
    log_body = [e for e in log_body if not isinstance(e, GuardEvaluated)]
    log_tail = [e for e in log_tail if not isinstance(e, GuardEvaluated)]
    if not debug:
        return [*log_body, *log_tail]
    if log:  # the log names the outputs dropped (the debug stream infers them from enforce)
        debug_body = [e for e in debug_body if not isinstance(e, ToolOutputChanged)]

    # one forced final turn, at the debug stream's enforce
    final = next((e for e in log_body if isinstance(e, FinalTurnForced) and e.thread == MAIN), None)
    enforce = next((i for i, e in enumerate(debug_body) if isinstance(e, FinalTurnForced)), None)
    if final is not None and enforce is not None:
        printed = debug_body[enforce]
        assert isinstance(printed, FinalTurnForced)
        debug_body[enforce] = final.model_copy(
            update={
                "projected_tokens": _first(final.projected_tokens, printed.projected_tokens),
                "limit_tokens": _first(final.limit_tokens, printed.limit_tokens),
                "provider": final.provider or printed.provider,
                "model": final.model or printed.model,
            }
        )
        log_body = [e for e in log_body if e is not final]

    # each refused or stored output at the evaluation that decided it
    changes = [
        e
        for e in log_body
        if isinstance(e, ToolOutputChanged) and e.thread == MAIN and e.projected_tokens is not None
    ]
    blocked = [
        i
        for i, e in enumerate(debug_body)
        if isinstance(e, GuardEvaluated) and e.extra > 0 and any(t.blocked for t in e.targets)
    ]
    placed: dict[int, list[Event]] = {}
    moved: set[int] = set()
    for change, at in zip(changes, blocked, strict=False):
        evaluation = debug_body[at]
        assert isinstance(evaluation, GuardEvaluated)
        limit = next(t.limit for t in evaluation.targets if t.blocked)
        after = _final_after(debug_body, at)
        placed.setdefault(after, []).append(
            change.model_copy(
                update={"projected_tokens": evaluation.projection, "limit_tokens": limit}
            )
        )
        moved.add(id(change))
    log_body = [e for e in log_body if id(e) not in moved]
    merged_debug: list[Event] = []
    for index, event in enumerate(debug_body):
        merged_debug.append(event)
        merged_debug.extend(placed.get(index, ()))
    return [*log_body, *merged_debug, *log_tail]


def _final_after(events: list[Event], index: int) -> int:
    """The final turn the evaluation at ``index`` forced (its ``enforce`` block comes next),
    else the evaluation itself."""
    after = index + 1
    while after < len(events) and isinstance(events[after], DebugTopic):
        after += 1
    return after if after < len(events) and isinstance(events[after], FinalTurnForced) else index


def _first(*values: int | None) -> int | None:
    return next((v for v in values if v is not None), None)
