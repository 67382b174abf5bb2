"""A Codex compaction as its rollout records it.

Codex's summarisation request (its output is marked ``metadata.compaction_output``) is a request
of its own; the records written while it is under way (its usage, the ``compacted`` record, the
context it rebuilt, Codex's estimate of that context) are held until it is complete and then
given in order: the request, the ``Compacted`` (so it answers the request: same step), the
messages it put in the context, the held records, its usage and the estimate after it. A
``compacted`` record's ``replacement_history`` is the context it rebuilt (the compaction summary
among it is SUMMARY); without one, its ``message`` alone is that summary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ctx_inspect.agents.codex.items import ResponseItems
from ctx_inspect.core.model import (
    Compacted,
    ContextMeasured,
    Event,
    Message,
    MessageAdded,
    MessageKind,
    RequestSent,
    Role,
    SourceSpan,
    Usage,
    UsageReported,
)
from ctx_inspect.formats.chat_common import text_part, unknown_part

ESTIMATE_LABEL = "codex: its estimate of the context"
# Records written while a compaction is under way (its request, usage, result, the context it
# rebuilt): held until the compaction is complete, then given in order (see _HeldCompaction).
HELD_RECORDS = frozenset({"token_usage_record", "compacted", "world_state", "turn_context"})
HELD_EVENTS = frozenset(
    {"token_count", "thread_settings_applied", "context_compacted", "warning", "background_event"}
)


@dataclass
class HeldCompaction:
    """A compaction under way: Codex's summarisation request (its output is marked
    ``compaction_output``), its usage, the ``compacted`` record and the estimate that follows.
    Given as: the request, the ``Compacted`` (so it answers the request: same step), the
    messages it put in the context, then the held records in their order."""

    trigger: str
    model: str | None
    span: SourceSpan
    timestamp: str | None
    events: list[Event] = field(default_factory=list)  # held, in order
    usage: dict[str, Any] | None = None
    usage_span: SourceSpan | None = None
    response_id: str | None = None
    replacement: list[MessageAdded] = field(default_factory=list)
    compacted: tuple[SourceSpan, str | None] | None = None
    after: tuple[int, SourceSpan, str | None] | None = None
    error: str | None = None

    def result(
        self, retained: tuple[str, ...], usage: Usage | None, window: int | None
    ) -> list[Event]:
        """The compaction, complete (or cut short: then a failed attempt), as its events:
        ``retained`` what it kept (the base instructions), ``usage`` its request's usage (None
        when none was recorded), ``window`` the window Codex reported."""
        request = RequestSent(
            model=self.model, compaction=True, timestamp=self.timestamp, span=self.span
        )
        failed = self.compacted is None
        span, ts = self.compacted if self.compacted is not None else (self.span, self.timestamp)
        compacted = Compacted(
            trigger=self.trigger,
            tokens_before=usage.prompt_tokens if usage is not None else None,
            tokens_after=None if failed or self.after is None else self.after[0],
            summary_tokens=usage.output if usage is not None and usage.output else None,
            retained_ids=retained,
            keep_system=False,
            added_ids=tuple(m.message.id for m in self.replacement),
            failed=failed,
            error=(self.error or "no compacted record followed the summary") if failed else None,
            timestamp=ts,
            span=span,
        )
        out: list[Event] = [request, compacted, *self.replacement, *self.events]
        if usage is not None:
            out.append(
                UsageReported(
                    usage=usage,
                    model=self.model,
                    request_id=self.response_id,
                    timestamp=self.timestamp,
                    span=self.usage_span,
                )
            )
        if not failed and self.after is not None:
            tokens, after_span, after_ts = self.after
            out.append(
                ContextMeasured(
                    tokens=tokens,
                    limit=window,
                    label=f"{ESTIMATE_LABEL} after compaction",
                    timestamp=after_ts,
                    span=after_span,
                )
            )
        return in_time_order(out)


def holds(kind: Any, payload: Any, obj: dict[str, Any]) -> bool:
    """Whether a record belongs to the compaction under way."""
    if not isinstance(payload, dict) or not isinstance(kind, str):
        return False
    if kind in HELD_RECORDS:
        return True
    if kind == "response_item":
        meta = obj.get("metadata")
        return isinstance(meta, dict) and meta.get("compaction_output") is True
    if kind != "event_msg":
        return False
    event = payload.get("type")
    if isinstance(event, str) and event in HELD_EVENTS:
        return True
    item = payload.get("item")
    return event in ("item_started", "item_completed") and (
        isinstance(item, dict) and item.get("type") == "ContextCompaction"
    )


def replacement(
    items: ResponseItems, p: dict[str, Any], span: SourceSpan, ts: str | None, model: str | None
) -> list[MessageAdded]:
    """The context a ``compacted`` record rebuilt: its replacement history (the summary
    among it), else its summary alone."""
    out: list[MessageAdded] = []
    summary = p.get("message")
    summary_text = summary if isinstance(summary, str) else ""
    history = p.get("replacement_history")
    if isinstance(history, list):
        for k, item in enumerate(history, start=1):
            if not isinstance(item, dict):
                part = unknown_part(item)
                msg_id = items.claim_id(None, span.line, k, "item")
                message = Message(
                    id=msg_id,
                    role=Role.USER,
                    kind=MessageKind.ATTACHMENT,
                    parts=(part,),
                    timestamp=ts,
                )
                out.append(MessageAdded(message=message, timestamp=ts, span=span))
                continue
            converted = items.convert(item, span.line, k, ts, model)
            message = converted[0]
            if message.kind is not MessageKind.SUMMARY and _is_summary(item, message, summary_text):
                message = message.model_copy(update={"kind": MessageKind.SUMMARY})
            out.append(MessageAdded(message=message, timestamp=ts, span=span))
        return out
    if summary_text:
        msg_id = items.claim_id(None, span.line, 1, "summary")
        message = Message(
            id=msg_id,
            role=Role.USER,
            kind=MessageKind.SUMMARY,
            parts=(text_part(summary_text),),
            timestamp=ts,
        )
        out.append(MessageAdded(message=message, timestamp=ts, span=span))
    return out


def in_time_order(events: list[Event]) -> list[Event]:
    """``events`` with no timestamp earlier than the one before (a compaction is given as its
    request and then its result, records written a moment apart: merged with another stream,
    ordering by time must keep them together)."""
    latest: str | None = None
    out: list[Event] = []
    for event in events:
        stamp = event.timestamp
        if stamp is not None and latest is not None and stamp < latest:
            event = event.model_copy(update={"timestamp": latest})
        elif stamp is not None:
            latest = stamp
        out.append(event)
    return out


def _is_summary(item: dict[str, Any], message: Message, summary: str) -> bool:
    if item.get("type") in ("compaction", "compaction_summary"):
        return True
    if message.role is not Role.USER or not summary:
        return False
    return message.text.strip() == summary.strip()
