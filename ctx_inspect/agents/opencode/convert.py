"""One OpenCode session's stored messages as events, for the database and the storage folder.

- user messages: text parts (``ignored`` ones are not sent), file parts (text/plain and
  directories are not sent: their text is already in synthetic text parts), a ``compaction`` part
  (rendered to the model as "What did we do so far?"; the message is kind META), a ``subtask``
  part (rendered as "The following tool was executed by the user"); a message OpenCode wrote
  inside its loop (every text synthetic, as "Continue if you have next steps, ...", or the copy
  of the last user message after an overflow compaction) is kind ATTACHMENT;
- assistant messages are split into steps at ``step-start`` / ``step-finish`` parts; each step is
  one model request: ``RequestSent``, ``UsageReported`` from the step-finish ``tokens`` (the
  message's own ``tokens`` when no step has them), one assistant message with the step's reasoning,
  text and tool calls, the request's usage with OpenCode's own count of it as its context figure
  (``tokens.total``, else input + output + cache read + cache write: what it compares with its
  usable window; given after the answer it counts), then one TOOL_RESULT message per tool part
  (completed output, error text, or "[Tool execution was interrupted]" for pending/running
  parts);
- a request with no usage that an overflow compaction follows, or whose error is a context-length
  error, was refused by the provider: ``RequestRejected`` on its step;
- tool parts with ``state.time.compacted`` (pruned): one ``Pruned`` per prune (the parts marked
  between two messages), its tokens OpenCode's estimate of each output summed, placed after their
  results and before the first message created after;
- a compaction (the user message with a ``compaction`` part, and the assistant ``summary`` that
  answers it): ``Compacted`` before the request message (trigger auto, overflow or manual; the
  request message and the verbatim tail from ``tail_start_id`` stay in context), its before the
  last ordinary request's count and its after the prompt of the first ordinary request after it;
  a failed summary makes it a failed attempt. The summary's usage is that of the summarisation
  request, not of the conversation: it is kept apart (thread ``compaction``);
- an assistant message with an error is not sent to the model again (``visible=False``), unless
  it was aborted after producing output, as ``MessageV2.toModelMessages`` decides.

Input tokens in OpenCode's ``tokens`` never include the cache (``input_includes_cache=False``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctx_inspect.agents.opencode.estimate import opencode_text
from ctx_inspect.agents.opencode.policy import COMPACTION_REQUEST_TEXT
from ctx_inspect.agents.opencode.records import (
    OcMessage,
    count_label,
    epoch_ms,
    file_part,
    load_json_value,
    opencode_count,
    opencode_usage,
    rejection,
    text_of,
    tool_messages,
)
from ctx_inspect.core.model import (
    Compacted,
    Event,
    Message,
    MessageAdded,
    MessageKind,
    Part,
    PartType,
    Pruned,
    RequestRejected,
    RequestSent,
    Role,
    SessionInfo,
    Usage,
    UsageReported,
)
from ctx_inspect.formats.base import shown
from ctx_inspect.formats.chat_common import as_str, compact_json, iso_time
from ctx_inspect.formats.registry import SnapshotSession
from ctx_inspect.formats.sqlite import db_issue

SUBTASK_PROMPT = "The following tool was executed by the user"
ABORTED_ERROR = "MessageAbortedError"


@dataclass
class _Step:
    start_id: str | None = None
    parts: list[dict[str, Any]] = field(default_factory=list)
    finish: dict[str, Any] | None = None


@dataclass
class _CompactionPlan:
    """What the messages say about one compaction, read before its request is converted."""

    trigger: str  # auto, overflow or manual
    summary: OcMessage | None  # the compaction agent's answer, when one was written
    tokens_before: int | None  # OpenCode's count at the last ordinary request before it
    tokens_after: int | None  # the prompt of the first ordinary request after it


def _compaction_part(message: OcMessage) -> dict[str, Any] | None:
    if message.info.get("role") != "user":
        return None
    return next((p for p in message.parts if p.get("type") == "compaction"), None)


def _trigger(part: dict[str, Any]) -> str:
    if part.get("overflow") is True:
        return "overflow"
    return "manual" if part.get("auto") is False else "auto"


def _step_usages(message: OcMessage) -> list[Usage]:
    """The usage of each model request of an assistant message, in order."""
    steps = _split_steps(message.parts)
    usages = [opencode_usage(s.finish.get("tokens")) for s in steps if s.finish is not None]
    found = [u for u in usages if u is not None]
    if found:
        return found
    fallback = opencode_usage(message.info.get("tokens"))
    return [fallback] if fallback is not None else []


def _ordinary(message: OcMessage) -> bool:
    return message.info.get("role") == "assistant" and message.info.get("summary") is not True


def _synthetic_only(message: OcMessage) -> bool:
    """A user message whose every part is text the agent wrote (``synthetic``)."""
    texts = [p for p in message.parts if p.get("type") == "text" and not p.get("ignored")]
    return (
        bool(texts)
        and all(p.get("synthetic") is True for p in texts)
        and not any(p.get("type") in ("file", "compaction", "subtask") for p in message.parts)
    )


class _Converter:
    """Turns one session's messages, in order, into events."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.events: list[Event] = []
        self.emitted: list[tuple[str, str]] = []  # (source message id, emitted message id)
        self.plans: dict[str, _CompactionPlan] = {}  # compaction request id -> plan
        self.summaries: set[str] = set()  # summary message ids whose compaction is emitted
        self.injected: set[str] = set()  # user messages the agent wrote within its loop
        self.rejected: dict[str, RequestRejected] = {}  # assistant id -> refusal
        self.prunes: dict[int, list[tuple[str, int]]] = {}  # compacted time -> (result, tokens)

    def run(self, messages: Iterable[OcMessage]) -> list[Event]:
        ordered = list(messages)
        self._plan(ordered)
        for message in ordered:
            info = message.info
            created = epoch_ms(info.get("time"))
            if created is not None:
                self._flush_prunes(created)
            role = info.get("role")
            if role == "user":
                self._user(message)
            elif role == "assistant":
                self._assistant(message)
            else:
                self.events.append(
                    db_issue(
                        self.path,
                        f"message {shown(info.get('id'), quoted=False)}: "
                        f"unknown role {shown(role)}",
                        compact_json(info),
                    )
                )
        self._flush_prunes(None)
        return self.events

    # -- reading ahead -----------------------------------------------------------------------

    def _plan(self, messages: list[OcMessage]) -> None:
        """Compactions (with their summaries and the figures around them), the user messages
        OpenCode writes inside its loop, and the requests the provider refused."""
        last_count: int | None = None  # OpenCode's count at the latest ordinary request
        for index, message in enumerate(messages):
            info = message.info
            if _ordinary(message):
                usages = _step_usages(message)
                if usages:
                    last_count = opencode_count(usages[-1])
                continue
            part = _compaction_part(message)
            if part is not None:
                self._plan_compaction(messages, index, part, last_count)
            elif info.get("role") == "user" and _synthetic_only(message):
                self.injected.add(str(info.get("id")))

    def _plan_compaction(
        self, messages: list[OcMessage], index: int, part: dict[str, Any], before: int | None
    ) -> None:
        request = str(messages[index].info.get("id"))
        trigger = _trigger(part)
        summary: OcMessage | None = None
        after: int | None = None
        later = messages[index + 1 :]
        for position, message in enumerate(later):
            info = message.info
            if (
                summary is None
                and info.get("role") == "assistant"
                and info.get("summary") is True
                and info.get("parentID") in (None, request)
            ):
                summary = message
                if trigger == "overflow":
                    self._inject_after(later[position + 1 :])
                continue
            if _compaction_part(message) is not None:
                break  # another compaction before any ordinary request
            if summary is not None and _ordinary(message):
                usages = _step_usages(message)
                if usages:
                    after = usages[0].prompt_tokens
                    break
        if trigger == "overflow":
            refused = self._refused_before(messages, index)
            if refused is not None and refused.tokens is not None:
                before = refused.tokens
        if summary is None and not later:
            return  # the compaction is still running: nothing to say yet
        self.plans[request] = _CompactionPlan(trigger, summary, before, after)
        if summary is not None:
            self.summaries.add(str(summary.info.get("id")))

    def _inject_after(self, later: list[OcMessage]) -> None:
        """The copy of the last user message OpenCode writes after an overflow compaction."""
        for message in later:
            if message.info.get("role") == "user":
                self.injected.add(str(message.info.get("id")))
            return

    def _refused_before(self, messages: list[OcMessage], index: int) -> RequestRejected | None:
        """The request an overflow compaction answers: the latest assistant message before it
        that has no usage (the provider refused it)."""
        for message in reversed(messages[:index]):
            if message.info.get("role") != "assistant":
                continue
            if _step_usages(message) or message.info.get("summary") is True:
                return None
            msg_id = str(message.info.get("id"))
            refused = rejection(message.info.get("error")) or RequestRejected(
                reason=(
                    "the provider refused the request as too long (OpenCode compacted for "
                    "overflow; its error message is not recorded here)"
                )
            )
            self.rejected[msg_id] = refused
            return refused
        return None

    # -- messages --------------------------------------------------------------------------

    def _add(self, source: str, message: Message) -> None:
        self.events.append(MessageAdded(message=message, timestamp=message.timestamp))
        self.emitted.append((source, message.id))

    def _user(self, message: OcMessage) -> None:
        info = message.info
        msg_id = str(info.get("id"))
        parts: list[Part] = []
        kind = MessageKind.ATTACHMENT if msg_id in self.injected else MessageKind.MESSAGE
        for part in message.parts:
            ptype = part.get("type")
            if ptype == "text":
                if not part.get("ignored"):
                    parts.append(Part(type=PartType.TEXT, text=text_of(part.get("text"))))
            elif ptype == "file":
                sent = file_part(part)
                if sent is not None:
                    parts.append(sent)
            elif ptype == "compaction":
                kind = MessageKind.META
                plan = self.plans.get(msg_id)
                if plan is not None:
                    self.events.append(self._compaction(msg_id, part, plan))
                parts.append(Part(type=PartType.TEXT, text=COMPACTION_REQUEST_TEXT))
            elif ptype == "subtask":
                parts.append(Part(type=PartType.TEXT, text=SUBTASK_PROMPT))
        model = info.get("model")
        self._add(
            msg_id,
            Message(
                id=msg_id,
                role=Role.USER,
                kind=kind,
                parts=tuple(parts),
                timestamp=iso_time(epoch_ms(info.get("time"))),
                model=as_str(model.get("modelID")) if isinstance(model, dict) else None,
            ),
        )

    def _assistant(self, message: OcMessage) -> None:
        info = message.info
        msg_id = str(info.get("id"))
        model = as_str(info.get("modelID"))
        created = iso_time(epoch_ms(info.get("time")))
        error = info.get("error")
        error_name = error.get("name") if isinstance(error, dict) else None
        visible = not error or (
            error_name == ABORTED_ERROR
            and any(p.get("type") not in ("step-start", "reasoning") for p in message.parts)
        )
        summary = info.get("summary") is True
        if summary and msg_id not in self.summaries:
            # a summary whose request is not in the session (a copied or trimmed session)
            self.events.append(self._orphan_compaction(info, error))
        steps = _split_steps(message.parts)
        fallback_usage = None
        if not any(step.finish is not None for step in steps):
            fallback_usage = opencode_usage(info.get("tokens"))
        # a summary's usage is that of the summarisation request, not of the conversation
        thread = "compaction" if summary else "main"
        for index, step in enumerate(steps):
            self.events.append(
                RequestSent(model=model, request_id=step.start_id, timestamp=created)
            )
            usage = opencode_usage(step.finish.get("tokens")) if step.finish else None
            if usage is None and index == len(steps) - 1:
                usage = fallback_usage
            reported: UsageReported | None = None
            if usage is not None:
                reported = UsageReported(
                    usage=usage,
                    model=model,
                    request_id=step.start_id,
                    timestamp=created,
                    thread=thread,
                )
                if summary:
                    self.events.append(reported)
                    reported = None
                else:
                    # OpenCode's count covers the prompt and the answer: given after the answer
                    reported = reported.model_copy(
                        update={
                            "context_tokens": opencode_count(usage),
                            "context_label": count_label(usage),
                        }
                    )
            elif index == len(steps) - 1 and msg_id in self.rejected:
                refused = self.rejected[msg_id]
                self.events.append(
                    refused.model_copy(update={"model": model, "timestamp": created})
                )
            elif index == len(steps) - 1 and not summary:
                refused_here = rejection(error)
                if refused_here is not None:
                    self.events.append(
                        refused_here.model_copy(update={"model": model, "timestamp": created})
                    )
            step_id = msg_id if index == 0 else (step.start_id or f"{msg_id}.{index + 1}")
            self._step_messages(step, step_id, msg_id, model, created, visible, summary, reported)

    def _step_messages(
        self,
        step: _Step,
        step_id: str,
        msg_id: str,
        model: str | None,
        created: str | None,
        visible: bool,
        summary: bool,
        reported: UsageReported | None,
    ) -> None:
        parts: list[Part] = []
        results: list[tuple[dict[str, Any], Message]] = []
        for part in step.parts:
            ptype = part.get("type")
            if ptype == "text":
                parts.append(Part(type=PartType.TEXT, text=text_of(part.get("text"))))
            elif ptype == "reasoning":
                parts.append(Part(type=PartType.THINKING, text=text_of(part.get("text"))))
            elif ptype == "tool":
                call, result = tool_messages(part, visible, created)
                parts.append(call)
                if result is not None:
                    results.append((part, result))
        has_text = any(p.type is PartType.TEXT for p in parts)
        has_calls = any(p.type is PartType.TOOL_CALL for p in parts)
        if summary:
            kind = MessageKind.SUMMARY
        elif has_calls and not has_text:
            kind = MessageKind.TOOL_CALL
        else:
            kind = MessageKind.MESSAGE
        if parts or step_id == msg_id:
            self._add(
                msg_id,
                Message(
                    id=step_id,
                    role=Role.ASSISTANT,
                    kind=kind,
                    parts=tuple(parts),
                    visible=visible and bool(parts),
                    timestamp=created,
                    model=model,
                ),
            )
        if reported is not None:
            # OpenCode's count holds the prompt and the answer, not the tool results after it
            self.events.append(reported)
        for part, result in results:
            self._add(msg_id, result)
            state = part.get("state")
            compacted = epoch_ms(
                state.get("time") if isinstance(state, dict) else None, "compacted"
            )
            if compacted is not None:
                output = state.get("output") if isinstance(state, dict) else None
                tokens = opencode_text(output) if isinstance(output, str) else 0
                self.prunes.setdefault(compacted, []).append((result.id, tokens))

    # -- compaction and prunes -------------------------------------------------------------

    def _compaction(self, request: str, part: dict[str, Any], plan: _CompactionPlan) -> Compacted:
        """The compaction a request message starts, placed before it: the decision came first
        (the overflow seen at the request before, or the user's command)."""
        summary = plan.summary
        if summary is None:
            return Compacted(
                trigger=plan.trigger,
                tokens_before=plan.tokens_before,
                failed=True,
                error="no summary was written",
            )
        info = summary.info
        timestamp = iso_time(epoch_ms(info.get("time")))
        failure = _summary_failure(info)
        if failure is not None:
            return Compacted(
                trigger=plan.trigger,
                tokens_before=plan.tokens_before,
                failed=True,
                error=failure,
                timestamp=timestamp,
            )
        retained: list[str] = []
        tail = as_str(part.get("tail_start_id"))
        if tail is not None:
            inside = False
            for source, emitted in self.emitted:
                inside = inside or source == tail
                if inside:
                    retained.append(emitted)
        retained.append(request)
        usages = _step_usages(summary)
        return Compacted(
            trigger=plan.trigger,
            tokens_before=plan.tokens_before,
            tokens_after=plan.tokens_after,
            summary_tokens=usages[-1].output if usages else None,
            retained_ids=tuple(retained),
            timestamp=timestamp,
        )

    def _orphan_compaction(self, info: dict[str, Any], error: Any) -> Compacted:
        """A summary whose compaction request is not in the session."""
        timestamp = iso_time(epoch_ms(info.get("time")))
        failure = _summary_failure(info)
        if failure is not None:
            return Compacted(trigger="auto", failed=True, error=failure, timestamp=timestamp)
        return Compacted(trigger="auto", timestamp=timestamp)

    def _flush_prunes(self, before: int | None) -> None:
        """One ``Pruned`` per prune: the parts marked compacted since the previous message (one
        prune writes its parts a few milliseconds apart, at the end of a loop), with the sum of
        OpenCode's estimate of each output (the log's ``found pruned=``)."""
        due = sorted(t for t in self.prunes if before is None or t < before)
        if not due:
            return
        parts = [entry for t in due for entry in self.prunes.pop(t)]
        self.events.append(
            Pruned(
                message_ids=tuple(mid for mid, _ in parts),
                outputs_pruned=len(parts),
                tokens_recovered=sum(tokens for _, tokens in parts),
                reason="prune",
                timestamp=iso_time(due[0]),
            )
        )


def _summary_failure(info: dict[str, Any]) -> str | None:
    """Why a compaction's summary failed (an error, or it never finished); None if it did not."""
    error = info.get("error")
    finished = info.get("finish") or epoch_ms(info.get("time"), "completed") is not None
    if not error and finished:
        return None
    data = error.get("data") if isinstance(error, dict) else None
    reason = data.get("message") if isinstance(data, dict) else None
    if not isinstance(reason, str) or not reason:
        reason = _error_name(error) or "the summary did not finish"
    return reason


def _error_name(error: Any) -> str | None:
    if isinstance(error, dict):
        return as_str(error.get("name"))
    return as_str(error)


def _split_steps(parts: list[dict[str, Any]]) -> list[_Step]:
    """The model requests of one assistant message (at least one)."""
    steps: list[_Step] = []
    current = _Step()
    for part in parts:
        ptype = part.get("type")
        if ptype == "step-start":
            if current.parts or current.start_id is not None:
                steps.append(current)
            current = _Step(start_id=as_str(part.get("id")))
        elif ptype == "step-finish":
            current.finish = part
            steps.append(current)
            current = _Step()
        else:
            current.parts.append(part)
    if current.parts or current.start_id is not None or not steps:
        steps.append(current)
    return steps


def session_info(session: dict[str, Any], messages: list[OcMessage]) -> SessionInfo:
    model = None
    provider = None
    for message in messages:
        if message.info.get("role") == "assistant":
            model = as_str(message.info.get("modelID"))
            provider = as_str(message.info.get("providerID"))
            if model:
                break
    extra: dict[str, Any] = {}
    for key in ("title", "directory", "project_id"):
        if as_str(session.get(key)):
            extra[key] = session[key]
    if as_str(session.get("parent")):
        extra["parent"] = session["parent"]
    if provider:
        extra["provider"] = provider
    return SessionInfo(
        model=model,
        agent="opencode",
        version=as_str(session.get("version")),
        session_id=as_str(session.get("id")),
        extra=extra,
        timestamp=iso_time(session.get("time_created")),
    )


def convert_session(
    path: Path, session: dict[str, Any], messages: list[OcMessage], issues: list[Event]
) -> SnapshotSession:
    """One OpenCode session as events: its info, the issues met reading it, then its messages."""
    events: list[Event] = [session_info(session, messages), *issues]
    events.extend(_Converter(path).run(messages))
    label = as_str(session.get("title")) or str(session.get("id") or path.name)
    return SnapshotSession(label=label, events=events)


def session_fields(row: dict[str, Any], path: Path, issues: list[Event]) -> dict[str, Any]:
    """Normalise a session row (columns, or a ``data`` JSON) or a legacy session file."""
    data: dict[str, Any] = {}
    raw = row.get("data")
    if raw is not None:
        value = load_json_value(raw, f"session {row.get('id')}", path, issues)
        if isinstance(value, dict):
            data = value
    merged = {**data, **{k: v for k, v in row.items() if k != "data" and v is not None}}
    time = merged.get("time")
    return {
        "id": merged.get("id"),
        "title": merged.get("title"),
        "parent": merged.get("parent_id") or merged.get("parentID"),
        "version": merged.get("version"),
        "directory": merged.get("directory"),
        "project_id": merged.get("project_id") or merged.get("projectID"),
        "time_created": merged.get("time_created") or epoch_ms(time),
    }
