"""The session vocabulary: messages, their parts, provider usage, and every event the product uses.

Readers (``ctx_inspect.formats``) produce these events; the session (``ctx_inspect.core.session``)
orders them into steps and derives the state at every step; the engine and the views read them.
All models are pydantic v2 and serialise to the native event format (``docs/format.md``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Origin(StrEnum):
    """Where a token figure came from."""

    REPORTED = "reported"  # the provider's usage, or the agent's own log line
    EXACT = "exact"  # counted here with a real tokenizer
    ESTIMATED = "estimated"  # a heuristic (the agent's own rule, or chars/4)
    # the latest reported figure plus an estimate of what entered or left the context since
    ANCHORED = "anchored"


class Role(StrEnum):
    SYSTEM = "system"
    DEVELOPER = "developer"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class MessageKind(StrEnum):
    """What a message is for, beyond its role."""

    MESSAGE = "message"  # ordinary conversation text
    TOOL_CALL = "tool_call"  # an assistant message whose content is tool calls only
    TOOL_RESULT = "tool_result"
    SUMMARY = "summary"  # a compaction summary
    TOOL_SUMMARY = "tool_summary"  # a digest of tool outputs written by the agent
    ARCHIVED = "archived"  # kept for the user, hidden from the model
    ATTACHMENT = "attachment"  # injected context (system reminders, file contents, ...)
    META = "meta"  # local bookkeeping that is not sent to the model


class PartType(StrEnum):
    TEXT = "text"
    THINKING = "thinking"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    IMAGE = "image"
    ATTACHMENT = "attachment"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Part(_Model):
    """One piece of a message's content."""

    type: PartType
    text: str = ""
    tool_name: str | None = None
    call_id: str | None = None
    arguments: str | None = None  # tool-call arguments, as the JSON text the model saw
    is_error: bool = False
    media_type: str | None = None  # images
    data_bytes: int = 0  # size of an image or binary payload that is not kept as text


class Usage(_Model):
    """What the provider reported for one model request. All figures in tokens."""

    input: int = 0  # uncached prompt tokens (Anthropic style) or the whole prompt (OpenAI style)
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    reasoning: int = 0
    total: int | None = None  # the provider's own total, when it gives one
    input_includes_cache: bool = False  # OpenAI / Codex: ``input`` already counts cached tokens

    @property
    def prompt_tokens(self) -> int:
        """The size of the prompt that was sent: the context at this request."""
        if self.input_includes_cache:
            return self.input + self.cache_write
        return self.input + self.cache_read + self.cache_write

    @property
    def context_after(self) -> int:
        """Prompt plus output: the context the next request starts from."""
        return self.prompt_tokens + self.output


class SourceSpan(_Model):
    """Where a record lives in its input, so its body can be read back lazily."""

    source: int = 0  # index into Session.sources
    offset: int = 0  # byte offset of the record's first byte
    length: int = 0  # bytes
    line: int = 0  # 1-based line number, 0 when unknown


class Message(_Model):
    """A message in (or once in) the model's context."""

    id: str
    role: Role
    kind: MessageKind = MessageKind.MESSAGE
    parts: tuple[Part, ...] = ()
    visible: bool = True  # sent to the model
    parent_id: str | None = None
    timestamp: str | None = None
    model: str | None = None
    name: str | None = None  # author name, when the format has one
    thread: str = "main"  # sub-agents get their own timeline

    @property
    def text(self) -> str:
        """All textual content, joined: what a chars/4 rule measures."""
        pieces: list[str] = []
        for part in self.parts:
            if part.text:
                pieces.append(part.text)
            if part.type is PartType.TOOL_CALL:
                if part.tool_name:
                    pieces.append(part.tool_name)
                if part.arguments:
                    pieces.append(part.arguments)
        return "\n".join(pieces)

    @property
    def image_count(self) -> int:
        return sum(1 for p in self.parts if p.type is PartType.IMAGE)

    @property
    def tool_name(self) -> str | None:
        for part in self.parts:
            if part.tool_name:
                return part.tool_name
        return None


# --------------------------------------------------------------------------------------------
# Events. Every event has a ``type`` tag (the discriminator), an optional timestamp and an
# optional source span. ``step`` is filled in by the session, never by a reader.


class _Event(_Model):
    timestamp: str | None = None
    span: SourceSpan | None = None


class MessageAdded(_Event):
    type: Literal["message"] = "message"
    message: Message
    tokens: int | None = None  # the format's own figure for this message, when it has one
    tokens_origin: Origin | None = None


class RequestSent(_Event):
    """A model request: the boundary between steps. Events before it are its step's build-up."""

    type: Literal["request"] = "request"
    model: str | None = None
    request_id: str | None = None
    thread: str = "main"
    final_turn: bool = False
    # the agent's own summarisation call: the compaction that answers it belongs to its step
    compaction: bool = False


class UsageReported(_Event):
    """The provider's usage for the latest request.

    ``context_tokens``: the agent's own figure for its context once this request was answered,
    when the agent defines one from the usage (Codex: ``last_token_usage.total_tokens``); the
    step shows it instead of the prompt size, labelled ``context_label``."""

    type: Literal["usage"] = "usage"
    usage: Usage
    model: str | None = None
    request_id: str | None = None
    thread: str = "main"
    context_tokens: int | None = None
    context_label: str = ""


class RequestRejected(_Event):
    """The provider refused the latest request because its prompt did not fit ("prompt is too
    long", ``context_length_exceeded``): it was sent and nothing was answered. ``tokens`` and
    ``limit`` are the provider's own figures when its message gives them."""

    type: Literal["rejected"] = "rejected"
    reason: str = ""  # the provider's message
    code: str | None = None
    tokens: int | None = None
    limit: int | None = None
    model: str | None = None
    thread: str = "main"


class ContextMeasured(_Event):
    """The agent's own figure for its context, as printed in its log."""

    type: Literal["context"] = "context"
    tokens: int
    limit: int | None = None
    percent: float | None = None
    origin: Origin = Origin.REPORTED
    label: str = ""  # which counter or log line this came from
    thread: str = "main"


class GuardTarget(_Model):
    provider: str = ""
    model: str = ""
    context_window: int
    buffer_tokens: int = 0
    max_output_tokens: int = 0
    limit: int
    projected: int | None = None
    blocked: bool = False


class GuardStatus(StrEnum):
    OK = "ok"
    SKIP = "skip"
    FINAL = "final"


class GuardEvaluated(_Event):
    """The context guard's projection: current + pending + new + extra against each target."""

    type: Literal["guard"] = "guard"
    current: int = 0
    pending: int = 0
    new: int = 0
    schema_tokens: int = 0
    extra: int = 0
    projected: int | None = None
    targets: tuple[GuardTarget, ...] = ()
    status: GuardStatus | None = None
    trigger: str | None = None  # turn_preflight / tool_preflight / ...
    thread: str = "main"

    @property
    def projection(self) -> int:
        if self.projected is not None:
            return self.projected
        return self.current + self.pending + self.new + self.extra


class Pruned(_Event):
    type: Literal["prune"] = "prune"
    tokens_before: int | None = None
    tokens_after: int | None = None
    tokens_recovered: int | None = None
    scanned_tokens: int | None = None
    outputs_pruned: int | None = None
    message_ids: tuple[str, ...] = ()
    applied: bool = True  # False when the scan found too little and nothing was pruned
    persistent: bool = True  # False when the prune applies to one request only (BaseAgent)
    reason: str = ""


TRIGGER_NOT_RECORDED = "not recorded"  # a compaction whose input does not say what caused it


class Compacted(_Event):
    """Compaction: every message in context is removed except ``retained_ids`` (and system
    messages when ``keep_system``); the summary arrives as a later ``MessageAdded``. The
    ``trigger`` is ``TRIGGER_NOT_RECORDED`` when the input does not say what caused it."""

    type: Literal["compaction"] = "compaction"
    trigger: str = "auto"
    tokens_before: int | None = None
    tokens_after: int | None = None
    messages_before: int | None = None
    messages_after: int | None = None
    summary: str | None = None
    summary_tokens: int | None = None
    retained_ids: tuple[str, ...] = ()
    keep_system: bool = True
    failed: bool = False
    error: str | None = None
    thread: str = "main"
    # the messages the compaction put in the context (its summary, context it re-injected),
    # when the reader knows them: they arrive as later MessageAdded events
    added_ids: tuple[str, ...] = ()


class ContextReset(_Event):
    """The conversation went on from an earlier point: a rewind or edit in the transcript, a
    switch to another branch of its tree, ``/clear``, or a new chat in the same file. Every
    message in context added after ``keep_through`` leaves the context (all of them when it is
    None); ``keep_system`` keeps system messages. Not a compaction: nothing was summarised."""

    type: Literal["reset"] = "reset"
    keep_through: str | None = None
    keep_system: bool = True
    reason: str = "rewind"
    thread: str = "main"


class ToolOutputAction(StrEnum):
    DROPPED = "dropped"
    TRUNCATED = "truncated"
    SPILLED = "spilled"


class ToolOutputChanged(_Event):
    type: Literal["tool_output"] = "tool_output"
    action: ToolOutputAction
    tool: str | None = None
    message_id: str | None = None
    tokens: int | None = None  # the output's size before the change
    tokens_after: int | None = None
    original_bytes: int | None = None
    final_bytes: int | None = None
    projected_tokens: int | None = None
    limit_tokens: int | None = None
    replacement: str | None = None
    thread: str = "main"


class FinalTurnForced(_Event):
    type: Literal["final_turn"] = "final_turn"
    reason: str
    projected_tokens: int | None = None
    limit_tokens: int | None = None
    provider: str | None = None
    model: str | None = None
    turn: int | None = None
    max_turns: int | None = None
    thread: str = "main"


class DebugTopic(_Event):
    type: Literal["debug"] = "debug"
    name: str
    payload: dict[str, Any] = Field(default_factory=dict)


class LogLine(_Event):
    type: Literal["log"] = "log"
    text: str
    level: str | None = None
    tag: str | None = None


class ParseIssue(_Event):
    type: Literal["issue"] = "issue"
    file: str = ""
    line: int = 0
    offset: int = 0
    reason: str
    excerpt: str = ""


class SessionInfo(_Event):
    """Facts about the run: model, window, agent version, working directory, ..."""

    type: Literal["info"] = "info"
    model: str | None = None
    context_window: int | None = None
    agent: str | None = None
    version: str | None = None
    session_id: str | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


class Marker(_Event):
    """Something that happened to the input itself: truncated, rotated, re-created."""

    type: Literal["marker"] = "marker"
    text: str


Event = Annotated[
    MessageAdded
    | RequestSent
    | UsageReported
    | RequestRejected
    | ContextMeasured
    | GuardEvaluated
    | Pruned
    | Compacted
    | ContextReset
    | ToolOutputChanged
    | FinalTurnForced
    | DebugTopic
    | LogLine
    | ParseIssue
    | SessionInfo
    | Marker,
    Field(discriminator="type"),
]

EVENT_TYPES: tuple[type[_Event], ...] = (
    MessageAdded,
    RequestSent,
    UsageReported,
    RequestRejected,
    ContextMeasured,
    GuardEvaluated,
    Pruned,
    Compacted,
    ContextReset,
    ToolOutputChanged,
    FinalTurnForced,
    DebugTopic,
    LogLine,
    ParseIssue,
    SessionInfo,
    Marker,
)
