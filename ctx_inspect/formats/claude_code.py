"""Claude Code session transcripts (``~/.claude/projects/<project>/<session>.jsonl``).

One JSON object per line (reference: transcripts.md section 1). What each line becomes:

- ``assistant``: one content block of a model response; the lines of one response share
  ``message.id`` and repeat its usage (the last line holds the final figures), and may be
  interleaved with tool-result lines. The first line of a response on a thread emits
  ``RequestSent`` (``request_id`` = ``message.id``) and ``UsageReported``; a later line of the
  same response whose usage differs emits a new ``UsageReported`` (the session keeps the latest).
  Every line becomes its own ``MessageAdded`` (thinking / text / tool-call parts), its id the
  line's ``uuid``. ``model: "<synthetic>"`` lines (local notices, API-error placeholders) make no
  request: their message is META and not visible to the model.
- ``user``: a prompt (string or blocks) or tool results (TOOL_RESULT, the tool's name resolved
  from its ``tool_use`` id). ``toolUseResult`` is what the CLI kept for itself, not context, and is
  not counted. ``isMeta`` text is injected context (ATTACHMENT, visible); ``isCompactSummary`` is
  the compaction summary (SUMMARY).
- ``attachment``: text injected into the context (``rendered`` in 2.1.3xx, else the attachment's
  own text fields) becomes an ATTACHMENT message; attachments without text (hook results, prompt
  snapshots, ...) become log lines.
- ``system``: ``compact_boundary`` → ``Compacted`` (trigger, ``preTokens``, ``postTokens`` when
  present, messages kept by ``preservedSegment`` / ``preservedMessages``); ``microcompact_boundary``
  → ``Pruned`` (the tool results of ``compactedToolIds``); every other subtype → a log line
  (``api_error`` at level "error").
- Session metadata (``summary`` titles, ``file-history-snapshot``, ``queue-operation``,
  ``progress``, ``permission-mode``, ``last-prompt``, ``custom-title``, ``ai-title``, ...) becomes
  a short log line tagged with its type; unknown types are kept as log lines too (Claude Code adds
  line types often, and an unknown one is never a parse issue).

The conversation is a tree (``uuid`` / ``parentUuid``). The reader follows the active chain
incrementally: when a line's parent is an earlier point than the response in progress (a rewind
or an edited prompt), it emits ``ContextReset`` back to the message the branch continues from.
Tool results of parallel tool calls point at the tool-call line of the same response; that is no
branch. Inline sidechains (v1.0 ``isSidechain: true`` lines) get their own thread,
``sidechain-<n>`` per sub-agent run (``agent-<agentId>`` when the line names its agent). A
sub-agent file (v2.0 ``agent-*.jsonl``, v2.1 ``<session>/subagents/agent-*.jsonl``) is its own
session: its lines form thread "main", and its ``SessionInfo`` names the parent session, the agent
and, when it can be found, the parent's ``Task``/``Agent`` tool call. The parent records the link
the other way (``SessionInfo.extra["subagents"]``: tool call id → agent id or thread).

Without bodies (``stats --no-exact``, see ``base``), a line is read in two phases: ``_scan_line``
parses it and keeps what the session keeps of it (the message's text length, kind and tool, the
line's ids, usage and log text), alone, possibly in a worker process; ``apply_scanned`` then does
what spans lines (ids seen twice, the chain, responses, tool names) and gives the same events,
messages as ``MessageEntry``. Shapes it does not cover (the session's first lines, sidechains,
compactions, Task/Agent calls and results, bad lines) are read by the full reader.

A second format, ``claude-code-stream``, reads the CLI's ``--output-format stream-json`` stdout:
the same assistant and user lines with snake_case envelopes (``session_id``,
``parent_tool_use_id``), no tree, an ``init`` line and a final ``result``.
"""

from __future__ import annotations

import gc
import re
from array import array
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import orjson

from ctx_inspect.core.estimate import claude_code_part, estimate_text
from ctx_inspect.core.model import (
    Compacted,
    ContextReset,
    Event,
    LogLine,
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
    SourceSpan,
    Usage,
    UsageReported,
)
from ctx_inspect.core.packed import LogEntry, RequestEntry, UsageEntry
from ctx_inspect.core.session import MessageEntry
from ctx_inspect.formats.base import EventSink, Item, LineParser, trusted
from ctx_inspect.formats.chat_common import compact_json, kind_for, type_name
from ctx_inspect.formats.registry import FormatSpec, Head, folder_problem, read_head, register

AGENT = "claude-code"
ESTIMATE_RULE = "claude-code"  # the estimate the scanners compute (``entry_estimates``)
SYNTHETIC_MODEL = "<synthetic>"
WINDOW_1M = 1_000_000
LOG_TEXT_CHARS = 200
BOM = b"\xef\xbb\xbf"
SNIFF_MAX_LINES = 50
PARENT_SCAN_CHUNK = 4 * 1024 * 1024
MAX_CHAIN_WALK = 1_000_000
SHARED_STRINGS = 4096  # recurring strings kept once (see ``_shared``)

CONVERSATION_TYPES = frozenset({"user", "assistant", "system", "attachment", "progress"})
METADATA_TYPES = frozenset(
    {
        "summary",
        "file-history-snapshot",
        "queue-operation",
        "permission-mode",
        "last-prompt",
        "custom-title",
        "ai-title",
        "agent-name",
        "pr-link",
        "mode",
        "worktree-state",
        "saved_hook_context",
        "frame-link",
        "bridge-session",
        "relocated",
        "tools-used",
        "atis-latch",
        "api-request",
        "api-request-blob",
        "api-request-shape",
        "cost-state",
    }
)
KNOWN_TYPES = CONVERSATION_TYPES | METADATA_TYPES
FACT_KEYS = (("version", "version"), ("cwd", "cwd"), ("gitBranch", "git_branch"))
FACT_LINES = 1000  # lines searched for session facts the first lines lack
STREAM_TYPES = frozenset({"system", "assistant", "user", "result", "stream_event"})
CALL_TYPES = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})
TASK_TOOLS = frozenset({"Task", "Agent"})
# Attachments that carry no text for the model (hook bookkeeping, snapshots of the prompt).
SILENT_ATTACHMENTS = frozenset(
    {
        "hook_success",
        "hook_non_blocking_error",
        "hook_cancelled",
        "hook_error_during_execution",
        "hook_permission_decision",
        "prompt_snapshot",
        "session_context",
    }
)
ATTACHMENT_TEXT_KEYS = ("content", "text", "addedLines", "prompt", "snippet", "banner")

_RESULT_KEY = b',"toolUseResult":'
_USER_TYPE = b'"type":"user"'
ENVELOPE_BYTES = 1024  # a user line says its type before its message
_AFTER_RESULT = (b',"sourceToolAssistantUUID":', b',"sandboxed":')
# Keys read from a user line: none of them may sit in the bytes left out.
_USED_KEY = re.compile(
    rb',"(?:uuid|parentUuid|timestamp|type|message|isSidechain|agentId|isMeta|isCompactSummary'
    rb'|sessionId|version|cwd|gitBranch|slug)":'
)
RESULT_TAIL_WINDOW = 4096  # the keys after toolUseResult are looked for in the line's tail
_AGENT_FILE = re.compile(r"^agent-([0-9A-Za-z_-]+)\.jsonl$")
# The provider's refusal of a prompt that does not fit, and its figures when it gives them
# ("prompt is too long: 203052 tokens > 200000 maximum").
_TOO_LONG = re.compile(r"prompt is too long", re.IGNORECASE)
_TOO_LONG_FIGURES = re.compile(r"(?<![\d,])(\d[\d,]{0,19})\s*tokens?\s*>\s*(\d[\d,]{0,19})")
ERROR_SUBTYPES = frozenset({"api_error", "api_retry", "error"})
REFUSAL_TEXT_CHARS = 500
_MISSING = object()


# ------------------------------------------------------------------------------------------
# Small helpers


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: Any) -> int:
    return value if type(value) is int else 0


def _positive(value: Any) -> int | None:
    return value if type(value) is int and value > 0 else None


def _short(text: str, limit: int = LOG_TEXT_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _usage_key(raw: Any) -> tuple[int, int, int, int] | None:
    """(input, cache write, cache read, output) of a Messages API usage object."""
    if not isinstance(raw, dict):
        return None
    get = raw.get
    if get("input_tokens") is None and get("output_tokens") is None:
        return None
    return (
        _int(get("input_tokens")),
        _int(get("cache_creation_input_tokens")),
        _int(get("cache_read_input_tokens")),
        _int(get("output_tokens")),
    )


# ------------------------------------------------------------------------------------------
# Events built without validation: every field given, in field order, from values made here
# (the reader's hot path; see ``base.trusted``).


def _part(
    ptype: PartType,
    text: str = "",
    *,
    tool_name: str | None = None,
    call_id: str | None = None,
    arguments: str | None = None,
    is_error: bool = False,
) -> Part:
    return trusted(
        Part,
        {
            "type": ptype,
            "text": text,
            "tool_name": tool_name,
            "call_id": call_id,
            "arguments": arguments,
            "is_error": is_error,
            "media_type": None,
            "data_bytes": 0,
        },
    )


def _usage(key: tuple[int, int, int, int]) -> Usage:
    return trusted(
        Usage,
        {
            "input": key[0],
            "cache_read": key[2],
            "cache_write": key[1],
            "output": key[3],
            "reasoning": 0,
            "total": None,
            "input_includes_cache": False,
        },
    )


def _usage_event(
    key: tuple[int, int, int, int],
    model: str | None,
    request_id: str | None,
    thread: str,
    ts: str | None,
    span: SourceSpan,
) -> UsageReported:
    return trusted(
        UsageReported,
        {
            "timestamp": ts,
            "span": span,
            "type": "usage",
            "usage": _usage(key),
            "model": model,
            "request_id": request_id,
            "thread": thread,
            "context_tokens": None,
            "context_label": "",
        },
    )


def _request_event(
    model: str | None, request_id: str | None, thread: str, ts: str | None, span: SourceSpan
) -> RequestSent:
    return trusted(
        RequestSent,
        {
            "timestamp": ts,
            "span": span,
            "type": "request",
            "model": model,
            "request_id": request_id,
            "thread": thread,
            "final_turn": False,
            "compaction": False,
        },
    )


def _log(
    text: str, tag: str, ts: str | None, span: SourceSpan, level: str | None = None
) -> LogLine:
    return trusted(
        LogLine,
        {"timestamp": ts, "span": span, "type": "log", "text": text, "level": level, "tag": tag},
    )


def _plain(value: Any) -> str:
    """The text of an attachment field: strings, lists of strings or text blocks, JSON else."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        pieces = []
        for item in value:
            if isinstance(item, str):
                pieces.append(item)
            elif isinstance(item, dict) and isinstance(item.get("text"), str):
                pieces.append(item["text"])
            elif isinstance(item, dict) and isinstance(item.get("content"), str):
                pieces.append(item["content"])
            elif item is not None:
                pieces.append(compact_json(item))
        return "\n".join(pieces)
    if isinstance(value, dict):
        for key in ("content", "text"):
            if isinstance(value.get(key), str):
                return str(value[key])
        return compact_json(value)
    return ""


def _image_part(block: dict[str, Any]) -> Part:
    source = block.get("source")
    media_type = None
    size = 0
    if isinstance(source, dict):
        media_type = _str(source.get("media_type"))
        data = source.get("data") or source.get("url") or source.get("file_id")
        size = len(data) if isinstance(data, str) else 0
    return Part(type=PartType.IMAGE, media_type=media_type, data_bytes=size)


def _document_part(block: dict[str, Any]) -> Part:
    source = block.get("source")
    media_type = None
    size = 0
    text = _str(block.get("title")) or ""
    if isinstance(source, dict):
        media_type = _str(source.get("media_type"))
        data = source.get("data")
        if isinstance(data, str):
            if source.get("type") == "text":
                text = f"{text}\n{data}" if text else data
            else:
                size = len(data)
    return Part(type=PartType.ATTACHMENT, text=text, media_type=media_type, data_bytes=size)


def _unknown_block(block: Any) -> Part:
    return Part(type=PartType.ATTACHMENT, text=compact_json(block))


# ------------------------------------------------------------------------------------------
# Reading without bodies, phase one: a line to a record of plain values (see ``base``). What
# the record keeps of a message is what the session keeps: ``len(Message.text)``, its kind and
# tool; the cross-line parts (ids, the chain, responses, tool names) are done by
# ``ClaudeCodeParser.apply_scanned``. Shapes this does not cover come back as None and are read
# by the full reader.

_LOG, _SYSTEM, _ASSISTANT, _USER, _ATTACHMENT = range(5)
_KINDS = tuple(MessageKind)
_KIND_MESSAGE = _KINDS.index(MessageKind.MESSAGE)
_KIND_TOOL_CALL = _KINDS.index(MessageKind.TOOL_CALL)
_KIND_TOOL_RESULT = _KINDS.index(MessageKind.TOOL_RESULT)
_KIND_SUMMARY = _KINDS.index(MessageKind.SUMMARY)
_KIND_ATTACHMENT = _KINDS.index(MessageKind.ATTACHMENT)


_entry = tuple.__new__  # MessageEntry(*values) without its Python-level __new__


class _Declined(Exception):
    """A line the scanner leaves to the full reader."""


def _scan_line(line: memoryview) -> tuple[Any, ...] | None:
    """Phase one of reading a Claude Code line without bodies (``LineParser.scan_line``)."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    kind = obj.get("type")
    if not isinstance(kind, str):
        return None
    try:
        if kind == "assistant":
            return _scan_assistant(obj)
        if kind == "user":
            return _scan_user(obj)
        if kind == "system":
            return _scan_system(obj)
        if kind == "attachment":
            return _scan_attachment(obj)
        if kind == "api-request":
            return None  # its max_tokens is a session fact: the full reader
        return (_LOG, _metadata_text(kind, obj, False), kind, _str(obj.get("timestamp")))
    except _Declined:
        return None


def _envelope(obj: dict[str, Any]) -> tuple[bool, str | None, str | None, str | None]:
    """(sidechain, uuid, parent, timestamp) of a conversation line; ``parent`` is "" when it is
    neither a string nor null."""
    get = obj.get
    if get("subtype") == "compact_boundary":
        raise _Declined
    uuid = get("uuid")
    parent = get("parentUuid")
    ts = get("timestamp")
    return (
        get("isSidechain") is True,
        uuid if uuid and isinstance(uuid, str) else None,
        parent if parent is None or isinstance(parent, str) else "",
        ts if ts and isinstance(ts, str) else None,
    )


def _json_chars(value: Any) -> int:
    """``len(compact_json(value))``."""
    try:
        data = orjson.dumps(value)
    except TypeError:
        return len(compact_json(value))
    return len(data) if data.isascii() else len(data.decode())


# Claude Code's own estimate of a message (``estimate_text`` / ``estimate_part`` of its rule),
# computed by the scanners from the same values as the parts the full reader makes.


def _q(text: str) -> int:
    """Claude Code's estimate of one text: ``Math.round(length / 4)`` in UTF-16 units."""
    return estimate_text(ESTIMATE_RULE, text)


def _q_json(value: Any) -> int:
    """``_q(compact_json(value))``."""
    return _q(compact_json(value))


# ``len(Message.text)``: the text is its parts' non-empty pieces joined by newlines, so the
# scanners sum the pieces' sizes and count them: the length is ``size + pieces - 1``.


def _scan_assistant(obj: dict[str, Any]) -> tuple[Any, ...] | None:
    message = obj.get("message")
    if not isinstance(message, dict):
        return None
    sidechain, uuid, parent, ts = _envelope(obj)
    get = message.get
    model = get("model")
    if model == SYNTHETIC_MODEL:
        raise _Declined  # a local notice or an API error: the full reader
    key = get("id")
    if not key or not isinstance(key, str):
        key = _str(obj.get("requestId"))
    usage: tuple[int, int, int, int] | None = None
    raw_usage = get("usage")
    if isinstance(raw_usage, dict):  # ``_usage_key``, inlined
        u = raw_usage.get
        fresh, write, read, out = (
            u("input_tokens"),
            u("cache_creation_input_tokens"),
            u("cache_read_input_tokens"),
            u("output_tokens"),
        )
        if fresh is not None or out is not None:
            usage = (
                fresh if type(fresh) is int else 0,
                write if type(write) is int else 0,
                read if type(read) is int else 0,
                out if type(out) is int else 0,
            )
    content = get("content")
    size = pieces = rough = 0
    has_text = has_call = False
    tool: str | None = None
    calls: list[tuple[str, str]] = []
    if isinstance(content, str):
        if content:
            size, pieces = len(content), 1
            has_text = not content.isspace()
            rough = _q(content)
    elif isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                if isinstance(block, str):
                    n = len(block)
                    has_text = has_text or (n > 0 and not block.isspace())
                    rough += _q(block)
                else:
                    n = _json_chars(block)
                    rough += _q_json(block)
                if n:
                    size += n
                    pieces += 1
                continue
            btype = _str(block.get("type"))  # a list would not even hash
            if btype == "text" or btype == "thinking":
                body = block.get(btype)
                if body and isinstance(body, str):
                    size += len(body)
                    pieces += 1
                    has_text = has_text or (btype == "text" and not body.isspace())
                    rough += _q(body)
            elif btype in CALL_TYPES:
                has_call = True
                name = block.get("name")
                named = name if name and isinstance(name, str) else ""
                if named:
                    if name in TASK_TOOLS:
                        raise _Declined  # its prompt links a sidechain: the full reader
                    size += len(named)
                    pieces += 1
                    if tool is None:
                        tool = named
                    call_id = block.get("id")
                    if call_id and isinstance(call_id, str):
                        calls.append((call_id, named))
                raw = block.get("input")
                if raw is not None:
                    arguments = compact_json(raw)
                    size += len(arguments)
                    pieces += 1
                    rough += _q(named + (arguments or "{}"))
                else:
                    rough += _q(named + "{}")
            elif btype == "redacted_thinking":
                data = block.get("data")
                rough += (len(data) + 2) // 4 if isinstance(data, str) and data else 0
            else:
                size += _json_chars(block)
                pieces += 1
                rough += _q_json(block)
    return (
        _ASSISTANT,
        sidechain,
        uuid,
        parent,
        ts,
        model if model and isinstance(model, str) else None,
        key,
        usage,
        size + pieces - 1 if pieces else 0,
        _KIND_TOOL_CALL if has_call and not has_text else _KIND_MESSAGE,
        tool,
        calls,
        rough,
    )


def _scan_user(obj: dict[str, Any]) -> tuple[Any, ...] | None:
    message = obj.get("message")
    if not isinstance(message, dict):
        return None
    sidechain, uuid, parent, ts = _envelope(obj)
    content = message.get("content")
    size = pieces = rough = 0
    results: list[str] = []
    if isinstance(content, str):
        if content:
            size, pieces = len(content), 1
            rough = _q(content)
    elif isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                if isinstance(block, str):
                    n = len(block)
                    rough += _q(block)
                else:
                    n = _json_chars(block)
                    rough += _q_json(block)
                if n:
                    size += n
                    pieces += 1
                continue
            btype = block.get("type")
            if btype == "tool_result":
                call_id = block.get("tool_use_id")
                if call_id and isinstance(call_id, str):
                    results.append(call_id)
                result = block.get("content")
                if isinstance(result, str):
                    if result:
                        size += len(result)
                        pieces += 1
                        rough += _q(result)
                elif result is not None:
                    n, k = _result_pieces(result)
                    size += n
                    pieces += k
                    rough += _result_rough(result)
            elif btype == "text":
                text = block.get("text")
                if text and isinstance(text, str):
                    size += len(text)
                    pieces += 1
                    rough += _q(text)
            elif btype == "image":
                rough += claude_code_part(_image_part(block))
            else:
                if btype == "document":
                    part = _document_part(block)
                    n = len(part.text)
                    rough += claude_code_part(part)
                else:
                    n = _json_chars(block)
                    rough += _q_json(block)
                if n:
                    size += n
                    pieces += 1
    get = obj.get
    if results:
        meta = get("toolUseResult")
        if isinstance(meta, dict) and _str(meta.get("agentId")) is not None:
            raise _Declined  # names the sub-agent it ran: the full reader
    if get("isCompactSummary") is True:
        kind = _KIND_SUMMARY
    elif results:
        kind = _KIND_TOOL_RESULT
    elif get("isMeta") is True:
        kind = _KIND_ATTACHMENT
    else:
        kind = _KIND_MESSAGE
    return (
        _USER,
        sidechain,
        uuid,
        parent,
        ts,
        size + pieces - 1 if pieces else 0,
        kind,
        results,
        rough,
    )


def _result_rough(content: Any) -> int:
    """Claude Code's estimate of the parts ``ClaudeCodeParser._result_parts`` makes of a tool
    result's content that is neither a string nor null."""
    text, extra = _result_content(content)
    return _q(text) + sum(map(claude_code_part, extra))


def _result_content(content: Any) -> tuple[str, list[Part]]:
    """A tool result's content as the text of its TOOL_RESULT part (its texts joined by
    newlines) and the parts that follow it (images, documents, other blocks)."""
    if isinstance(content, str):
        return content, []
    if content is None:
        return "", []
    if not isinstance(content, list):
        return compact_json(content), []
    texts: list[str] = []
    extra: list[Part] = []
    for item in content:
        if isinstance(item, dict):
            itype = item.get("type")
            if itype == "text":
                texts.append(_str(item.get("text")) or "")
            elif itype == "image":
                extra.append(_image_part(item))
            elif itype == "document":
                extra.append(_document_part(item))
            else:
                extra.append(_unknown_block(item))
        elif isinstance(item, str):
            texts.append(item)
        elif item is not None:
            extra.append(_unknown_block(item))
    return "\n".join(texts), extra


def _result_pieces(content: Any) -> tuple[int, int]:
    """(size, pieces) of the parts ``ClaudeCodeParser._result_parts`` makes of a tool result's
    content that is neither a string nor null."""
    if not isinstance(content, list):
        return _json_chars(content), 1
    size = texts = 0
    extra: list[int] = []
    for item in content:
        if isinstance(item, dict):
            itype = item.get("type")
            if itype == "text":
                size += len(_str(item.get("text")) or "")
                texts += 1
            elif itype == "document":
                extra.append(len(_document_part(item).text))
            elif itype != "image":
                extra.append(_json_chars(item))
        elif isinstance(item, str):
            size += len(item)
            texts += 1
        elif item is not None:
            extra.append(_json_chars(item))
    joined = size + texts - 1 if texts else 0  # the result part: its texts joined by newlines
    size, pieces = (joined, 1) if joined else (0, 0)
    for n in extra:
        if n:
            size += n
            pieces += 1
    return size, pieces


def _scan_system(obj: dict[str, Any]) -> tuple[Any, ...] | None:
    subtype = _str(obj.get("subtype"))
    if subtype == "microcompact_boundary" or subtype in ERROR_SUBTYPES:
        return None
    sidechain, uuid, parent, ts = _envelope(obj)
    level = _str(obj.get("level"))
    if subtype in ("api_error", "error"):
        level = "error"
    content = obj.get("content")
    label = subtype or "system"
    text = f"{label}: {_short(content)}" if isinstance(content, str) and content else label
    return (_SYSTEM, sidechain, uuid, parent, ts, text, level)


def _scan_attachment(obj: dict[str, Any]) -> tuple[Any, ...] | None:
    att = obj.get("attachment")
    atype = _str(att.get("type")) if isinstance(att, dict) else None
    sidechain, uuid, parent, ts = _envelope(obj)
    text = _attachment_text(obj, att if isinstance(att, dict) else {}, atype)
    return (
        _ATTACHMENT,
        sidechain,
        uuid,
        parent,
        ts,
        len(text) if text is not None else None,
        atype,
        sum(map(_q, _attachment_pieces(obj, text))) if text is not None else 0,
    )


# ------------------------------------------------------------------------------------------
# The parser


class ClaudeCodeParser(LineParser):
    """Reads one Claude Code session file (or one sub-agent file) as it grows."""

    format_name = "claude-code"
    stream_json: ClassVar[bool] = False  # the CLI's stream-json stdout (snake_case envelopes)

    def __init__(self, source: int = 0, path: str = "") -> None:
        super().__init__(source, path)
        name = Path(path).name if path else ""
        match = _AGENT_FILE.match(name)
        self._agent_file_id: str | None = match.group(1) if match else None
        self._subagent_file: bool | None = True if match else None  # None: not decided yet
        self._info_sent = False
        self._facts_missing: dict[str, str] = dict(FACT_KEYS)  # envelope key -> our name
        self._facts_budget = FACT_LINES  # lines still searched for missing facts
        self._model: str | None = None
        self._parent_link_sent = False
        self._session_id: str | None = None
        self._agent_id: str | None = None
        # The main chain: every main-thread line with a uuid is a node.
        self._node: dict[str, int] = {}
        self._node_parent = array("l")  # parent node, -1 when none or unknown
        self._node_message: list[str | None] = []  # the node's own message id
        self._last_node = -1
        self._segment: set[int] = set()  # nodes since the latest response began
        # Responses (API calls), per thread: the open one and its usage.
        self._open: dict[str, tuple[str | None, tuple[int, int, int, int] | None]] = {}
        self._responses: set[str] = set()
        # Tools, sidechains, sub-agents.
        self._tool_names: dict[str, str] = {}
        self._results: dict[str, str] = {}  # tool call id -> tool-result message id (main)
        self._threads: dict[str, str] = {}  # sidechain line uuid -> thread
        self._sidechains = 0
        self._task_prompts: dict[str, str] = {}  # Task/Agent prompt -> tool call id
        self._subagents: dict[str, str] = {}  # tool call id -> agent id or thread
        self._pending_link = False  # a sub-agent link to announce
        self._skipped: tuple[bytes, int, int] | None = None  # the toolUseResult not parsed
        self._dup_lines: set[int] = set()  # lines whose uuid was seen before (id gets #line)
        self._reread = False
        self._strings: dict[str, str] = {}
        self._refused = False  # the provider refused the latest main request (not yet answered)
        self._max_output: int | None = None  # the max_tokens the agent's requests ask for

    # -- entry points -----------------------------------------------------------------------

    def feed(self, data: bytes) -> list[Event]:
        # Reading a chunk makes many short-lived containers (each line's parsed JSON) while
        # the session keeps many long-lived ones, so the cyclic collector, run every few
        # hundred allocations, mostly rescans what the session keeps (about a quarter of the
        # time to load a 256 MB transcript). Nothing here makes reference cycles worth
        # collecting mid-chunk; the collector runs again as soon as the chunk is read.
        if not gc.isenabled():
            return super().feed(data)
        gc.disable()
        try:
            return super().feed(data)
        finally:
            gc.enable()

    def parse_line(self, line: bytes, span: SourceSpan) -> Iterable[Event]:
        try:
            return self._parse(line, span)
        finally:
            self._skipped = None  # do not keep the line's bytes past it

    def _parse(self, line: bytes, span: SourceSpan) -> list[Event]:
        out: list[Event] = []
        if span.offset == 0 and line.startswith(BOM):
            line = line[3:]
        obj = None
        if not self.stream_json and line.find(_USER_TYPE, 0, ENVELOPE_BYTES) >= 0:
            pos = line.find(_RESULT_KEY)
            if pos > 0:
                obj = self._load_without_result(line, pos)
        if obj is None:
            obj = self.load_json(line, span, out)
        if not isinstance(obj, dict):
            if obj is not None or not out:
                out.append(self.issue(span, f"not a JSON object ({type_name(obj)})", line))
            return out
        kind = obj.get("type")
        if not isinstance(kind, str):
            out.append(self.issue(span, "record without a type", line))
            return out
        if self._facts_budget and not self._reread:
            if not self._info_sent:
                self._session_info(obj, span, out)
            elif self._facts_missing:
                self._late_facts(obj, span, out)
        if kind == "assistant":
            self._assistant(obj, span, out)
        elif kind == "user":
            self._user(obj, span, out)
        elif kind == "system":
            self._system(obj, span, out)
        elif kind == "attachment":
            self._attachment(obj, span, out)
        elif not self._reread:
            self._metadata(kind, obj, span, out)
        return out

    def _load_without_result(self, line: bytes, pos: int) -> dict[str, Any] | None:
        """The line's object without its ``toolUseResult``, or None to parse it whole.

        ``toolUseResult`` is the CLI's own copy of a tool's result, not context, and often as
        big as the result itself: only the bytes around it are parsed. Its value runs to the
        next top-level key (2.1: ``sourceToolAssistantUUID``, sometimes ``sandboxed``) or to the
        closing brace (1.0, 2.0). The cut is right when what is left parses as one object (a cut
        at any other depth leaves the braces unbalanced) and the bytes left out hold none of the
        keys this reader uses (else the value was not the last one before the cut, and the line
        is parsed whole). The value itself is only read back when a Task/Agent result needs its
        ``agentId``.
        """
        start = pos + len(_RESULT_KEY)
        end = len(line)
        window = max(start, end - RESULT_TAIL_WINDOW)
        cut = -1
        for key in _AFTER_RESULT:
            found = line.find(key, window)
            if found >= 0 and (cut < 0 or found < cut):
                cut = found
        if cut >= 0:
            head = line[:pos] + line[cut:]
        elif line.endswith(b"}"):
            head = line[:pos] + b"}"
            cut = end - 1
        else:
            return None
        try:
            obj = orjson.loads(head)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(obj, dict) or _RESULT_KEY in head:
            return None
        if _USED_KEY.search(line, start, cut) is not None:
            return None
        self._skipped = (line, start, cut)
        return obj

    def _skipped_result(self) -> Any:
        """The ``toolUseResult`` that ``_load_without_result`` left out, parsed now."""
        if self._skipped is None:
            return None
        line, start, end = self._skipped
        try:
            return orjson.loads(line[start:end])
        except orjson.JSONDecodeError:
            return None

    def end_of_input(self) -> Iterable[Event]:
        if self._reread:
            return ()
        if self._subagent_file and not self._parent_link_sent and self._agent_id:
            link = self._find_parent_call()
            if link is not None:
                self._parent_link_sent = True
                return [SessionInfo(extra={"parent_tool_use_id": link})]
        return ()

    def messages_at(self, data: bytes, span: SourceSpan) -> list[Message]:
        """Re-read the message of one line, with the id and thread the first read gave it."""
        fresh = type(self)(self.source, self.path)
        fresh._reread = True
        fresh._subagent_file = self._subagent_file
        fresh._agent_id = self._agent_id
        fresh._tool_names = self._tool_names
        fresh._threads = self._threads
        fresh._dup_lines = self._dup_lines
        fresh._line_no = max(span.line - 1, 0)
        fresh._offset = span.offset
        events = [*fresh.feed(data + b"\n"), *fresh.finish()]
        return [e.message for e in events if isinstance(e, MessageAdded)]

    # -- session facts ----------------------------------------------------------------------

    def _session_info(self, obj: dict[str, Any], span: SourceSpan, out: list[Event]) -> None:
        session_id = _str(obj.get("session_id" if self.stream_json else "sessionId"))
        if session_id is None:
            return
        self._info_sent = True
        self._session_id = session_id
        ts = _str(obj.get("timestamp"))
        if self.stream_json:
            self._facts_missing.clear()
            self._stream_info(obj, session_id, span, out)
            return
        extra = self._take_facts(obj)
        slug = _str(obj.get("slug"))
        if slug is not None:
            extra["slug"] = slug
        version = extra.pop("version", None)
        agent_id = _str(obj.get("agentId"))
        if self._subagent_file is None:
            self._subagent_file = bool(
                obj.get("isSidechain") is True and agent_id and obj.get("parentUuid") is None
            )
        session_label = session_id
        if self._subagent_file:
            self._agent_id = agent_id or self._agent_file_id
            extra["parent_session"] = session_id
            if self._agent_id:
                extra["agent_id"] = self._agent_id
                session_label = f"{session_id}/agent-{self._agent_id}"
            extra.update(self._meta_facts())
            if "parent_tool_use_id" not in extra and self._agent_id:
                link = self._find_parent_call()
                if link is not None:
                    extra["parent_tool_use_id"] = link
            self._parent_link_sent = "parent_tool_use_id" in extra
        out.append(
            SessionInfo(
                agent=AGENT,
                version=version,
                session_id=session_label,
                extra=extra,
                timestamp=ts,
                span=span,
            )
        )

    def _take_facts(self, obj: dict[str, Any]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for key, name in list(self._facts_missing.items()):
            value = _str(obj.get(key))
            if value is not None:
                found[name] = value
                del self._facts_missing[key]
        return found

    def _late_facts(self, obj: dict[str, Any], span: SourceSpan, out: list[Event]) -> None:
        """Version, cwd or branch that the first line with a session id did not carry."""
        self._facts_budget -= 1
        found = self._take_facts(obj)
        if found:
            version = found.pop("version", None)
            out.append(SessionInfo(version=version, extra=found, span=span))

    def _stream_info(
        self, obj: dict[str, Any], session_id: str | None, span: SourceSpan, out: list[Event]
    ) -> None:
        extra: dict[str, Any] = {}
        if _str(obj.get("cwd")):
            extra["cwd"] = obj["cwd"]
        tools = obj.get("tools")
        if isinstance(tools, list):
            extra["tool_count"] = len(tools)
        model = _str(obj.get("model")) if obj.get("subtype") == "init" else None
        if model is not None:
            self._model = model
        out.append(
            SessionInfo(
                agent=AGENT,
                model=model,
                context_window=WINDOW_1M if model and "[1m]" in model.lower() else None,
                version=_str(obj.get("claude_code_version")),
                session_id=session_id,
                extra=extra,
                span=span,
            )
        )

    def _meta_facts(self) -> dict[str, Any]:
        """``agentType`` / ``description`` (and the parent's tool call) from the .meta.json."""
        if not self.path:
            return {}
        meta_path = Path(self.path).with_suffix(".meta.json")
        try:
            raw = orjson.loads(meta_path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return {}
        if not isinstance(raw, dict):
            return {}
        facts: dict[str, Any] = {}
        for key, name in (
            ("agentType", "agent_type"),
            ("description", "description"),
            ("toolUseId", "parent_tool_use_id"),
            ("worktreePath", "worktree_path"),
        ):
            value = _str(raw.get(key))
            if value is not None:
                facts[name] = value
        return facts

    def _find_parent_call(self) -> str | None:
        """The parent's tool call that ran this sub-agent: the tool result whose
        ``toolUseResult.agentId`` names it, found by a byte scan of the parent session file."""
        if not self.path or not self._agent_id or not self._session_id:
            return None
        here = Path(self.path)
        candidates = [here.parent / f"{self._session_id}.jsonl"]
        if here.parent.name == "subagents":
            session_dir = here.parent.parent
            candidates.insert(0, session_dir.parent / f"{session_dir.name}.jsonl")
        needle = b'"agentId":"' + self._agent_id.encode() + b'"'
        for candidate in candidates:
            try:
                found = _scan_for_call(candidate, needle, self._agent_id)
            except OSError:
                continue
            if found is not None:
                return found
        return None

    def _model_info(self, model: str, span: SourceSpan, out: EventSink) -> None:
        self._model = model
        out.append(
            SessionInfo(
                model=model,
                context_window=WINDOW_1M if "[1m]" in model.lower() else None,
                span=span,
            )
        )

    # -- threads and the chain --------------------------------------------------------------

    def _thread(self, obj: dict[str, Any]) -> str:
        if self.stream_json:
            parent_call = obj.get("parent_tool_use_id")
            if not parent_call:
                return "main"
            agent = _str(obj.get("agent_id")) or str(parent_call)
            return self._shared(f"agent-{agent}")
        if obj.get("isSidechain") is not True or self._subagent_file:
            return "main"
        uuid = obj.get("uuid")
        if isinstance(uuid, str) and uuid in self._threads:
            return self._threads[uuid]
        agent_id = _str(obj.get("agentId"))
        parent = obj.get("parentUuid")
        if agent_id is not None:
            thread = self._shared(f"agent-{agent_id}")
        elif isinstance(parent, str) and parent in self._threads:
            thread = self._threads[parent]
        else:
            self._sidechains += 1
            thread = f"sidechain-{self._sidechains}"
            self._link_sidechain(obj, thread)
        if isinstance(uuid, str) and not self._reread:
            self._threads[uuid] = thread
        return thread

    def _link_sidechain(self, obj: dict[str, Any], thread: str) -> None:
        """A v1.0 inline sub-agent run starts with the prompt of the Task call that ran it."""
        message = obj.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            call = self._task_prompts.pop(content, None)
            if call is not None:
                self._subagents[call] = thread
                self._pending_link = True

    def _shared(self, text: str) -> str:
        """One string object for a text that recurs (model and tool names, log texts of
        metadata lines, thread names), so many events can hold it without a copy each."""
        shared = self._strings.get(text)
        if shared is None:
            if len(self._strings) >= SHARED_STRINGS:
                return text
            shared = self._strings[text] = text
        return shared

    def _message_id(self, obj: dict[str, Any], span: SourceSpan) -> str:
        uuid = obj.get("uuid")
        return self._id_of(uuid if isinstance(uuid, str) and uuid else None, span.line)

    def _id_of(self, uuid: str | None, line: int) -> str:
        """The message id of a line: its uuid, made unique by the line number when seen before."""
        if uuid is None:
            return f"line{line}"
        if self._reread:
            return f"{uuid}#{line}" if line in self._dup_lines else uuid
        if uuid in self._node or uuid in self._threads:
            self._dup_lines.add(line)
            return f"{uuid}#{line}"
        return uuid

    def _enter_main(self, obj: dict[str, Any], span: SourceSpan, out: list[Event]) -> int:
        """Place a main-thread line on the chain; emits ContextReset when it starts a branch.
        Returns its node (or -1 when the line has no uuid)."""
        uuid = obj.get("uuid")
        if self.stream_json or not isinstance(uuid, str) or not uuid:
            return -1
        parent = obj.get("parentUuid")
        return self._enter_node(
            uuid,
            parent if parent is None or isinstance(parent, str) else "",
            obj.get("type") == "user",
            obj.get("subtype") == "compact_boundary",
            span,
            out,
        )

    def _enter_node(
        self,
        uuid: str,
        parent: str | None,
        user: bool,
        boundary: bool,
        span: SourceSpan,
        out: EventSink,
    ) -> int:
        """``_enter_main`` from the line's values (``parent`` is "" when it is not a string)."""
        parent_node = self._node.get(parent, -1) if parent is not None else -1
        if self._last_node >= 0 and not boundary:
            if parent is None and user:
                out.append(ContextReset(keep_through=None, reason="new-root", span=span))
                self._segment = set()
            elif parent_node >= 0 and parent_node not in self._segment:
                keep = self._anchor(parent_node)
                out.append(ContextReset(keep_through=keep, reason="rewind", span=span))
                self._segment = set()
        node = len(self._node_message)
        self._node[uuid] = node
        self._node_parent.append(parent_node)
        self._node_message.append(None)
        self._last_node = node
        self._segment.add(node)
        return node

    def _anchor(self, node: int) -> str | None:
        """The latest message at or above ``node`` on its chain."""
        parents = self._node_parent
        messages = self._node_message
        for _ in range(MAX_CHAIN_WALK):
            if node < 0:
                return None
            mid = messages[node]
            if mid is not None:
                return mid
            node = parents[node]
        return None

    def _emit_message(
        self,
        out: list[Event],
        span: SourceSpan,
        mid: str,
        role: Role,
        kind: MessageKind,
        parts: list[Part],
        *,
        thread: str,
        node: int,
        timestamp: str | None,
        model: str | None = None,
        visible: bool = True,
    ) -> None:
        if node >= 0:
            self._node_message[node] = mid
        message = trusted(
            Message,
            {
                "id": mid,
                "role": role,
                "kind": kind,
                "parts": tuple(parts),
                "visible": visible,
                "parent_id": None,
                "timestamp": timestamp,
                "model": model,
                "name": None,
                "thread": thread,
            },
        )
        out.append(
            trusted(
                MessageAdded,
                {
                    "timestamp": timestamp,
                    "span": span,
                    "type": "message",
                    "message": message,
                    "tokens": None,
                    "tokens_origin": None,
                },
            )
        )

    def _flush_links(self, span: SourceSpan, out: EventSink) -> None:
        if self._pending_link and not self._reread:
            self._pending_link = False
            out.append(SessionInfo(extra={"subagents": dict(self._subagents)}, span=span))

    # -- assistant --------------------------------------------------------------------------

    def _assistant(self, obj: dict[str, Any], span: SourceSpan, out: list[Event]) -> None:
        message = obj.get("message")
        if not isinstance(message, dict):
            out.append(self.issue(span, "assistant line without a message object"))
            return
        mid = self._message_id(obj, span)
        thread = self._thread(obj)
        main = thread == "main"
        node = self._enter_main(obj, span, out) if main and not self._reread else -1
        ts = _str(obj.get("timestamp"))
        model = message.get("model")
        model = self._shared(model) if isinstance(model, str) and model else None
        synthetic = model == SYNTHETIC_MODEL
        if not synthetic and not self._reread:
            if main and model is not None and model != self._model:
                self._model_info(model, span, out)
            self._response(obj, message, model, thread, span, ts, out)
        elif synthetic and not self._reread:
            self._note_refusal(obj, thread, ts, span, out)
        parts = self._assistant_parts(message.get("content"), main)
        kind = MessageKind.META if synthetic else kind_for(Role.ASSISTANT, parts)
        self._emit_message(
            out,
            span,
            mid,
            Role.ASSISTANT,
            kind,
            parts,
            thread=thread,
            node=node,
            timestamp=ts,
            model=model,
            visible=not synthetic,
        )

    def _response(
        self,
        obj: dict[str, Any],
        message: dict[str, Any],
        model: str | None,
        thread: str,
        span: SourceSpan,
        ts: str | None,
        out: list[Event],
    ) -> None:
        key = _str(message.get("id")) or _str(
            obj.get("request_id" if self.stream_json else "requestId")
        )
        self._response_of(key, _usage_key(message.get("usage")), model, thread, span, ts, out)

    def _response_of(
        self,
        key: str | None,
        usage: tuple[int, int, int, int] | None,
        model: str | None,
        thread: str,
        span: SourceSpan,
        ts: str | None,
        out: EventSink,
    ) -> None:
        """A response's line: the request when it is the response's first, else its usage when
        that changed."""
        request, report = self._response_step(key, usage, thread)
        if request:
            out.append(_request_event(model, key, thread, ts, span))
        if report:
            assert usage is not None
            out.append(_usage_event(usage, model, key, thread, ts, span))

    def _response_step(
        self, key: str | None, usage: tuple[int, int, int, int] | None, thread: str
    ) -> tuple[bool, bool]:
        """Whether a response's line is a request, and whether it reports a usage (see
        ``_response_of``)."""
        current = self._open.get(thread)
        if key is not None and current is not None and current[0] == key:
            if usage is not None and usage != current[1]:
                self._open[thread] = (key, usage)
                return False, True
            return False, False
        if key is not None:
            if key in self._responses:
                return False, False  # a late line of an earlier response: no new request
            self._responses.add(key)
        self._open[thread] = (key, usage)
        if thread == "main":
            self._segment = {self._last_node} if self._last_node >= 0 else set()
            self._refused = False
        return True, usage is not None

    def _assistant_parts(self, content: Any, main: bool) -> list[Part]:
        if isinstance(content, str):
            return [_part(PartType.TEXT, content)] if content else []
        if not isinstance(content, list):
            return []
        parts: list[Part] = []
        for block in content:
            if not isinstance(block, dict):
                parts.append(
                    _part(PartType.TEXT, block) if isinstance(block, str) else _unknown_block(block)
                )
                continue
            btype = _str(block.get("type"))  # a list would not even hash
            if btype == "text":
                parts.append(_part(PartType.TEXT, _str(block.get("text")) or ""))
            elif btype == "thinking":
                parts.append(_part(PartType.THINKING, _str(block.get("thinking")) or ""))
            elif btype == "redacted_thinking":
                data = block.get("data")
                size = len(data) if isinstance(data, str) else 0
                parts.append(Part(type=PartType.THINKING, data_bytes=size))
            elif btype in CALL_TYPES:
                parts.append(self._call_part(block, main))
            else:
                parts.append(_unknown_block(block))
        return parts

    def _call_part(self, block: dict[str, Any], main: bool) -> Part:
        call_id = _str(block.get("id"))
        name = block.get("name")
        name = self._shared(name) if isinstance(name, str) and name else None
        raw = block.get("input")
        arguments = compact_json(raw) if raw is not None else ""
        if call_id is not None and name is not None and not self._reread:
            self._tool_names[call_id] = name
            if main and name in TASK_TOOLS and isinstance(raw, dict):
                prompt = raw.get("prompt")
                if isinstance(prompt, str):
                    self._task_prompts[prompt] = call_id
        return _part(PartType.TOOL_CALL, tool_name=name, call_id=call_id, arguments=arguments)

    # -- user -------------------------------------------------------------------------------

    def _user(self, obj: dict[str, Any], span: SourceSpan, out: list[Event]) -> None:
        message = obj.get("message")
        if not isinstance(message, dict):
            out.append(self.issue(span, "user line without a message object"))
            return
        mid = self._message_id(obj, span)
        thread = self._thread(obj)
        self._flush_links(span, out)
        main = thread == "main"
        node = self._enter_main(obj, span, out) if main and not self._reread else -1
        parts, results = self._user_parts(message.get("content"))
        if obj.get("isCompactSummary") is True:
            kind = MessageKind.SUMMARY
        elif results:
            kind = MessageKind.TOOL_RESULT
        elif obj.get("isMeta") is True:
            kind = MessageKind.ATTACHMENT
        else:
            kind = MessageKind.MESSAGE
        if results and not self._reread:
            if main:
                for call_id in results:
                    self._results[call_id] = mid
            self._note_subagent_result(obj, results, span, out)
        ts = _str(obj.get("timestamp"))
        self._emit_message(
            out, span, mid, Role.USER, kind, parts, thread=thread, node=node, timestamp=ts
        )

    def _user_parts(self, content: Any) -> tuple[list[Part], list[str]]:
        if isinstance(content, str):
            return ([_part(PartType.TEXT, content)] if content else []), []
        if not isinstance(content, list):
            return [], []
        parts: list[Part] = []
        results: list[str] = []
        for block in content:
            if not isinstance(block, dict):
                parts.append(
                    _part(PartType.TEXT, block) if isinstance(block, str) else _unknown_block(block)
                )
                continue
            btype = block.get("type")
            if btype == "text":
                parts.append(_part(PartType.TEXT, _str(block.get("text")) or ""))
            elif btype == "tool_result":
                call_id = _str(block.get("tool_use_id"))
                if call_id is not None:
                    results.append(call_id)
                self._result_parts(block, call_id, parts)
            elif btype == "image":
                parts.append(_image_part(block))
            elif btype == "document":
                parts.append(_document_part(block))
            else:
                parts.append(_unknown_block(block))
        return parts, results

    def _result_parts(self, block: dict[str, Any], call_id: str | None, parts: list[Part]) -> None:
        name = self._tool_names.get(call_id) if call_id is not None else None
        is_error = block.get("is_error") is True
        text, extra = _result_content(block.get("content"))
        parts.append(
            _part(PartType.TOOL_RESULT, text, tool_name=name, call_id=call_id, is_error=is_error)
        )
        parts.extend(extra)

    def _note_subagent_result(
        self, obj: dict[str, Any], results: list[str], span: SourceSpan, out: list[Event]
    ) -> None:
        """A Task/Agent result names the sub-agent it ran (``toolUseResult.agentId``)."""
        meta = obj.get("tool_use_result" if self.stream_json else "toolUseResult")
        if meta is None and self._skipped is not None:
            names = self._tool_names
            if any(names.get(call, "Task") in TASK_TOOLS for call in results):
                meta = self._skipped_result()
        if not isinstance(meta, dict):
            return
        agent_id = _str(meta.get("agentId"))
        if agent_id is None or len(results) != 1:
            return
        call = results[0]
        if self._subagents.get(call) == agent_id:
            return
        self._subagents[call] = agent_id
        out.append(SessionInfo(extra={"subagents": dict(self._subagents)}, span=span))

    # -- attachments ------------------------------------------------------------------------

    def _attachment(self, obj: dict[str, Any], span: SourceSpan, out: list[Event]) -> None:
        att = obj.get("attachment")
        atype = _str(att.get("type")) if isinstance(att, dict) else None
        mid = self._message_id(obj, span)
        thread = self._thread(obj)
        main = thread == "main"
        node = self._enter_main(obj, span, out) if main and not self._reread else -1
        text = _attachment_text(obj, att if isinstance(att, dict) else {}, atype)
        ts = _str(obj.get("timestamp"))
        if text is None:
            if not self._reread:
                out.append(_log(self._shared(f"attachment {atype or '?'}"), "attachment", ts, span))
            return
        parts = [_part(PartType.TEXT, piece) for piece in _attachment_pieces(obj, text)]
        self._emit_message(
            out,
            span,
            mid,
            Role.USER,
            MessageKind.ATTACHMENT,
            parts,
            thread=thread,
            node=node,
            timestamp=ts,
        )

    # -- system -----------------------------------------------------------------------------

    def _system(self, obj: dict[str, Any], span: SourceSpan, out: list[Event]) -> None:
        if self._reread:
            return
        subtype = _str(obj.get("subtype"))
        thread = self._thread(obj)
        main = thread == "main"
        ts = _str(obj.get("timestamp"))
        if self.stream_json and subtype == "init":
            if not any(isinstance(e, SessionInfo) for e in out):  # not the first line: a resume
                self._stream_info(obj, _str(obj.get("session_id")), span, out)
            return
        if subtype == "compact_boundary":
            self._compaction(obj, thread, span, ts, out)
            return
        if main:
            self._enter_main(obj, span, out)
        if subtype == "microcompact_boundary":
            self._microcompaction(obj, thread, span, ts, out)
            return
        if self.stream_json and subtype == "task_started":
            call = _str(obj.get("tool_use_id"))
            task = _str(obj.get("task_id"))
            if call is not None and task is not None:
                self._subagents[call] = task
                out.append(SessionInfo(extra={"subagents": dict(self._subagents)}, span=span))
                return
        level = _str(obj.get("level"))
        if subtype in ERROR_SUBTYPES:
            level = "error"
            self._note_refusal(obj, thread, ts, span, out)
        content = obj.get("content")
        label = subtype or "system"
        text = f"{label}: {_short(content)}" if isinstance(content, str) and content else label
        out.append(_log(text, "system", ts, span, level))

    def _note_refusal(
        self, obj: dict[str, Any], thread: str, ts: str | None, span: SourceSpan, out: list[Event]
    ) -> None:
        """A line that reports the provider refusing the latest request as too long: the
        request (no line of its own records it) and its refusal, once per request."""
        found = _refusal(obj)
        if found is None:
            return
        main = thread == "main"
        if main and self._refused:
            return  # another report of the same refusal
        reason, tokens, limit = found
        out.append(_request_event(self._model, None, thread, ts, span))
        out.append(
            RequestRejected(
                reason=reason,
                code="prompt_too_long",
                tokens=tokens,
                limit=limit,
                model=self._model,
                thread=thread,
                timestamp=ts,
                span=span,
            )
        )
        if main:
            self._refused = True

    def _compaction(
        self, obj: dict[str, Any], thread: str, span: SourceSpan, ts: str | None, out: list[Event]
    ) -> None:
        meta = obj.get("compact_metadata" if self.stream_json else "compactMetadata")
        if not isinstance(meta, dict):
            meta = obj.get("compactMetadata") or obj.get("compact_metadata") or {}
            if not isinstance(meta, dict):
                meta = {}
        trigger = _str(meta.get("trigger")) or _str(obj.get("trigger")) or "auto"
        if thread == "main" and self._refused:
            if trigger == "auto":
                trigger = "reactive"  # after the provider refused the request as too long
            self._refused = False
        before = _positive(meta.get("preTokens", meta.get("pre_tokens")))
        after = _positive(meta.get("postTokens", meta.get("post_tokens")))
        retained: list[str] = []
        kept_nodes: list[int] = []
        if thread == "main":
            kept_nodes = self._preserved_nodes(meta)
            retained = [m for m in (self._node_message[n] for n in kept_nodes) if m is not None]
        out.append(
            Compacted(
                trigger=trigger,
                tokens_before=before,
                tokens_after=after,
                retained_ids=tuple(dict.fromkeys(retained)),
                keep_system=True,
                thread=thread,
                timestamp=ts,
                span=span,
            )
        )
        if thread == "main":
            node = self._enter_main(obj, span, out)
            self._segment = {*kept_nodes, node} if node >= 0 else set(kept_nodes)

    def _preserved_nodes(self, meta: dict[str, Any]) -> list[int]:
        """The nodes a partial compaction kept verbatim, oldest first."""
        nodes: list[int] = []
        segment = meta.get("preservedSegment")
        if isinstance(segment, dict):
            head = self._node.get(_str(segment.get("headUuid")) or "", -1)
            node = self._node.get(_str(segment.get("tailUuid")) or "", -1)
            walked: list[int] = []
            for _ in range(MAX_CHAIN_WALK):
                if node < 0:
                    break
                walked.append(node)
                if node == head:
                    break
                node = self._node_parent[node]
            if head >= 0 and walked and walked[-1] == head:
                nodes.extend(reversed(walked))
        preserved = meta.get("preservedMessages")
        if isinstance(preserved, dict):
            for key in ("uuids", "allUuids"):
                uuids = preserved.get(key)
                if isinstance(uuids, list):
                    for uuid in uuids:
                        node = self._node.get(uuid, -1) if isinstance(uuid, str) else -1
                        if node >= 0:
                            nodes.append(node)
        return list(dict.fromkeys(nodes))

    def _microcompaction(
        self, obj: dict[str, Any], thread: str, span: SourceSpan, ts: str | None, out: list[Event]
    ) -> None:
        meta = obj.get("microcompactMetadata")
        if not isinstance(meta, dict):
            meta = {}
        ids = meta.get("compactedToolIds")
        cleared: list[str] = []
        if isinstance(ids, list):
            for call in ids:
                mid = self._results.get(call) if isinstance(call, str) else None
                if mid is not None:
                    cleared.append(mid)
        saved = meta.get("tokensSaved")
        out.append(
            Pruned(
                tokens_before=_positive(meta.get("preTokens")),
                tokens_recovered=saved if type(saved) is int and saved >= 0 else None,
                outputs_pruned=len(ids) if isinstance(ids, list) else None,
                message_ids=tuple(dict.fromkeys(cleared)),
                reason="microcompact",
                timestamp=ts,
                span=span,
            )
        )

    # -- everything else --------------------------------------------------------------------

    def _metadata(self, kind: str, obj: dict[str, Any], span: SourceSpan, out: list[Event]) -> None:
        ts = obj.get("timestamp")
        ts = ts if isinstance(ts, str) and ts else None
        text = _metadata_text(kind, obj, self.stream_json)
        out.append(_log(self._shared(text), self._shared(kind), ts, span))
        if kind == "api-request":
            self._request_facts(obj, span, out)
        elif kind == "result" and self.stream_json:
            self._result_facts(obj, span, out)

    def _request_facts(self, obj: dict[str, Any], span: SourceSpan, out: list[Event]) -> None:
        """The max_tokens of the agent's own requests (2.1.3xx ``api-request`` lines record
        what was sent): its output reserve comes from it. A compaction's request is not one."""
        source = _str(obj.get("querySource")) or ""
        params = obj.get("params")
        if "compact" in source or not isinstance(params, dict):
            return
        max_tokens = _positive(params.get("max_tokens"))
        if max_tokens is not None and max_tokens != self._max_output:
            self._max_output = max_tokens
            out.append(SessionInfo(extra={"max_output_tokens": max_tokens}, span=span))

    def _result_facts(self, obj: dict[str, Any], span: SourceSpan, out: list[Event]) -> None:
        """The stream's last line: the model's window and max output as the CLI resolved them
        (``modelUsage``), and a run that ended on a refused prompt."""
        usage = obj.get("modelUsage")
        model_usage = usage.get(self._model) if isinstance(usage, dict) and self._model else None
        if isinstance(model_usage, dict):
            window = _positive(model_usage.get("contextWindow"))
            max_output = _positive(model_usage.get("maxOutputTokens"))
            extra: dict[str, Any] = {}
            if max_output is not None:
                extra["max_output_tokens"] = max_output
            if window is not None:
                extra["context_window_source"] = "the result's modelUsage.contextWindow"
            if window is not None or extra:
                out.append(SessionInfo(context_window=window, extra=extra, span=span))
        if obj.get("is_error") is True:
            self._note_refusal(obj, "main", None, span, out)

    # -- reading without bodies (two phases; see ``base``) -----------------------------------

    two_phase = True
    scan_line = staticmethod(_scan_line)
    entry_estimate_rule = ESTIMATE_RULE

    def apply_scanned(self, record: Any, span: SourceSpan, out: list[Item]) -> bool:
        """A record of ``_scan_line`` to events and a ``MessageEntry``: what ``parse_line``
        makes of the line, its message without a body. Declines (False) while the session's facts
        are still looked for, and for a sidechain line of a session file."""
        if self._facts_budget and (not self._info_sent or self._facts_missing):
            return False
        tag = record[0]
        if tag == _LOG:
            text, kind = self._shared(record[1]), self._shared(record[2])
            out.append(_log_entry(text, kind, record[3], span))
            return True
        if record[1] and not self._subagent_file:
            return False  # a sidechain: its thread is decided by the full reader
        uuid: str | None = record[2]
        parent: str | None = record[3]
        ts: str | None = record[4]
        if tag == _SYSTEM:
            if uuid is not None:
                self._enter_node(uuid, parent, False, False, span, out)
            out.append(_log_entry(record[5], "system", ts, span, record[6]))
            return True
        mid = self._id_of(uuid, span.line)
        if tag == _USER and self._pending_link:
            self._flush_links(span, out)
        node = self._enter_node(uuid, parent, tag == _USER, False, span, out) if uuid else -1
        if tag == _ASSISTANT:
            _, _, _, _, _, model, key, usage, chars, kind, tool, calls, rough = record
            if model is not None:
                model = self._shared(model)
            synthetic = model == SYNTHETIC_MODEL
            if not synthetic:
                if model is not None and model != self._model:
                    self._model_info(model, span, out)
                self._response_entries(key, usage, model, span, ts, out)
            names = self._tool_names
            shared = self._shared
            for call_id, name in calls:
                names[call_id] = shared(name)
            role = Role.ASSISTANT
            message_kind = MessageKind.META if synthetic else _KINDS[kind]
            visible = not synthetic
            if tool is not None:
                tool = shared(tool)
        elif tag == _USER:
            _, _, _, _, _, chars, kind, results, rough = record
            tool = None
            if results:
                names = self._tool_names
                for call_id in results:
                    tool = names.get(call_id)
                    if tool:
                        break
                else:
                    tool = None
                given = self._results
                for call_id in results:
                    given[call_id] = mid
            role = Role.USER
            message_kind = _KINDS[kind]
            visible = True
        else:  # _ATTACHMENT
            chars = record[5]
            rough = record[7]
            if chars is None:
                text = self._shared(f"attachment {record[6] or '?'}")
                out.append(_log_entry(text, "attachment", ts, span))
                return True
            role = Role.USER
            message_kind = MessageKind.ATTACHMENT
            tool = None
            visible = True
        if node >= 0:
            self._node_message[node] = mid
        out.append(
            _entry(
                MessageEntry,
                (
                    mid,
                    role,
                    message_kind,
                    visible,
                    "main",
                    tool,
                    chars,
                    None,
                    span.source,
                    span.offset,
                    span.length,
                    span.line,
                    rough if self.entry_estimates else None,
                ),
            )
        )
        return True

    def _response_entries(
        self,
        key: str | None,
        usage: tuple[int, int, int, int] | None,
        model: str | None,
        span: SourceSpan,
        ts: str | None,
        out: list[Item],
    ) -> None:
        """``_response_of`` in the main thread, its events as entries (``core.packed``)."""
        request, report = self._response_step(key, usage, "main")
        where = (span.source, span.offset, span.length, span.line)
        if request:
            out.append(_entry(RequestEntry, (ts, *where, model, key, "main", False, False)))
        if report:
            assert usage is not None
            counts = (usage[0], usage[2], usage[1], usage[3], 0, None, False)
            out.append(_entry(UsageEntry, (ts, *where, *counts, model, key, "main", None, "")))


def _log_entry(
    text: str, tag: str, ts: str | None, span: SourceSpan, level: str | None = None
) -> LogEntry:
    """``_log`` as an entry (``core.packed``)."""
    where = (span.source, span.offset, span.length, span.line)
    entry: LogEntry = _entry(LogEntry, (ts, *where, text, level, tag))
    return entry


def _refusal(obj: dict[str, Any]) -> tuple[str, int | None, int | None] | None:
    """(message, tokens, limit) when a line reports the provider refusing a prompt as too long
    (an API-error notice, an error or retry line, a run's failed result), else None."""
    texts: list[str] = []
    message = obj.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        texts.extend(b["text"] for b in content if isinstance(b, dict) and _str(b.get("text")))
    for key in ("error", "apiError", "cause", "content", "result", "message"):
        value = obj.get(key)
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, dict) and key != "message":
            texts.append(compact_json(value))
    text = " ".join(texts)
    if not _TOO_LONG.search(text):
        return None
    figures = _TOO_LONG_FIGURES.search(text)
    tokens = limit = None
    if figures is not None:
        tokens = int(figures.group(1).replace(",", ""))
        limit = int(figures.group(2).replace(",", ""))
    match = _TOO_LONG.search(text)
    assert match is not None
    start = match.start()
    if figures is not None and figures.start() >= start:
        end = text.find("maximum", figures.end())
        end = end + len("maximum") if 0 <= end - figures.end() < 20 else figures.end()
    else:
        end = match.end()
    reason = _short(text[start:end], REFUSAL_TEXT_CHARS)
    return reason, tokens, limit


def _metadata_text(kind: str, obj: dict[str, Any], stream_json: bool) -> str:
    """The log text of a metadata line (session titles, snapshots, progress, ...)."""
    if kind == "summary":
        title = obj.get("summary")
        return f"title: {_short(title)}" if isinstance(title, str) else "summary"
    if kind == "queue-operation":
        op = obj.get("operation")
        return f"queue-operation {op}" if isinstance(op, str) else kind
    if kind == "progress":
        data = obj.get("data")
        dtype = data.get("type") if isinstance(data, dict) else None
        return f"progress {dtype}" if isinstance(dtype, str) else kind
    if kind == "result" and stream_json:
        subtype = obj.get("subtype")
        text = f"result {subtype}" if isinstance(subtype, str) else kind
        turns = obj.get("num_turns")
        return f"{text}, {turns} turns" if type(turns) is int else text
    if kind in KNOWN_TYPES or (stream_json and kind in STREAM_TYPES):
        return kind
    return f"{kind} (unknown line type)"


def _attachment_pieces(obj: dict[str, Any], text: str) -> list[str]:
    """The texts of an attachment's parts: one per item of its ``rendered`` list (one message
    each, which Claude Code estimates on its own) when there are several and none is empty,
    else its whole text."""
    rendered = obj.get("rendered")
    if isinstance(rendered, list) and len(rendered) > 1:
        pieces = [_plain(item) for item in rendered]
        if all(pieces) and "\n".join(pieces) == text:
            return pieces
    return [text]


def _attachment_text(obj: dict[str, Any], att: dict[str, Any], atype: str | None) -> str | None:
    """The text an attachment line put into the context, or None when it put none."""
    rendered = obj.get("rendered", _MISSING)
    if rendered is not _MISSING:
        text = _plain(rendered) if rendered is not None else ""
        return text or None
    if atype in SILENT_ATTACHMENTS:
        return None
    for key in ATTACHMENT_TEXT_KEYS:
        value = att.get(key)
        if value:
            text = _plain(value)
            if text:
                return text
    return None


def _scan_for_call(path: Path, needle: bytes, agent_id: str) -> str | None:
    """The tool call id of the tool-result line that names ``agent_id`` in ``path``."""
    with path.open("rb") as fh:
        carry = b""
        while True:
            chunk = fh.read(PARENT_SCAN_CHUNK)
            if not chunk:
                return None
            data = carry + chunk
            pos = data.find(needle)
            while pos >= 0:
                start = data.rfind(b"\n", 0, pos) + 1
                end = data.find(b"\n", pos)
                if end < 0:
                    rest = fh.readline()
                    line = data[start:] + rest
                    data = data[:start] + line
                    end = len(data)
                else:
                    line = data[start:end]
                found = _call_of_result(line, agent_id)
                if found is not None:
                    return found
                pos = data.find(needle, end)
            cut = data.rfind(b"\n")
            carry = data[cut + 1 :] if cut >= 0 else data


def _call_of_result(line: bytes, agent_id: str) -> str | None:
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or obj.get("type") != "user":
        return None
    meta = obj.get("toolUseResult")
    if not isinstance(meta, dict) or meta.get("agentId") != agent_id:
        return None
    message = obj.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                call = block.get("tool_use_id")
                if isinstance(call, str) and call:
                    return call
    return None


# ------------------------------------------------------------------------------------------
# --merge: one run's files as one session


def merge_streams(streams: Sequence[Sequence[Event]], formats: Sequence[str]) -> list[Event]:
    """One session of one run's Claude Code files (``FormatSpec.stream_merge``; ``formats``:
    each stream's format name): its session transcript, its sub-agent
    files, and its stream-json stdout (one per invocation). They repeat each other record for
    record (the same uuids, the same response ids), so each record is taken once, from the
    session transcript first (its usage is the final one; the stdout's assistant lines carry a
    streaming partial output count), and what only the stdout shows is added (the CLI's status
    lines, a refusal, the run's result and window). A sub-agent file's lines become the
    sub-agent's thread, as the stdout names it (``agent-<id>``), when the run's main session
    or stdout is merged too. Events are ordered by their timestamps, each file in its own
    order (a line without a timestamp takes the one before it)."""
    ranked = sorted(
        range(len(streams)), key=lambda index: (formats[index] != SPEC.name, index)
    )  # session transcripts first, each group in the order given
    agents = [
        _agent_of(events) if name == SPEC.name else None
        for name, events in zip(formats, streams, strict=True)
    ]
    rethread = any(agent is None for agent in agents)
    seen = _Seen()
    keyed: list[tuple[str, int, int, Event]] = []
    for rank, index in enumerate(ranked):
        events = streams[index]
        agent = agents[index]
        thread = f"agent-{agent}" if agent is not None and rethread else None
        taken = list(_taken(events, thread, seen))
        # the lines before a file's first timestamp (an invocation's init, status and
        # compaction lines) take that timestamp
        last = next((e.timestamp for e in taken if e.timestamp), "")
        for seq, event in enumerate(taken):
            last = max(last, event.timestamp or "")
            keyed.append((last, rank, seq, event))
    keyed.sort(key=lambda item: (item[0], item[1], item[2]))
    return _relabel_reactive([item[3] for item in keyed])


class _Seen:
    """What the files merged so far recorded: messages, responses and their usage, refusals and
    compactions, per thread."""

    def __init__(self) -> None:
        self.messages: set[tuple[str, str]] = set()
        self.requests: set[tuple[str, str]] = set()
        self.usage: set[tuple[str, str]] = set()
        self.refusals: set[tuple[str, str | None, int | None, str]] = set()
        self.compactions: dict[tuple[str, str, int | None, int | None], int] = {}


def _agent_of(events: Sequence[Event]) -> str | None:
    """The agent id a sub-agent file names, else None."""
    for event in events:
        if isinstance(event, SessionInfo) and isinstance(event.extra.get("agent_id"), str):
            return str(event.extra["agent_id"])
    return None


def _taken(events: Sequence[Event], thread: str | None, seen: _Seen) -> Iterator[Event]:
    """The events of one file that no file before it recorded, moved to ``thread`` when given
    (a sub-agent file's own session facts are left out then)."""
    mine = _Seen()
    skip_request = False
    for position, event in enumerate(events):
        if thread is not None:
            if isinstance(event, SessionInfo):
                continue
            event = _rethreaded(event, thread)
        if isinstance(event, MessageAdded):
            key = (event.message.thread, event.message.id)
            if key in seen.messages:
                continue
            mine.messages.add(key)
        elif isinstance(event, RequestSent):
            if event.request_id is None:
                following = events[position + 1] if position + 1 < len(events) else None
                refusal = _refusal_key(following) if following is not None else None
                skip_request = refusal is not None and refusal in seen.refusals
                if skip_request:
                    continue
            else:
                key = (event.thread, event.request_id)
                if key in seen.requests:
                    continue
                mine.requests.add(key)
        elif isinstance(event, UsageReported) and event.request_id is not None:
            key = (event.thread, event.request_id)
            if key in seen.usage:
                continue
            mine.usage.add(key)
        elif isinstance(event, RequestRejected):
            refusal = _refusal_key(event)
            assert refusal is not None
            if skip_request:
                skip_request = False
                continue
            mine.refusals.add(refusal)
        elif isinstance(event, Compacted):
            figures = (event.thread, event.trigger, event.tokens_before, event.tokens_after)
            if seen.compactions.get(figures, 0) > 0:
                seen.compactions[figures] -= 1  # the same compaction, recorded again
                continue
            mine.compactions[figures] = mine.compactions.get(figures, 0) + 1
        yield event
    seen.messages |= mine.messages
    seen.requests |= mine.requests
    seen.usage |= mine.usage
    seen.refusals |= mine.refusals
    for figures, count in mine.compactions.items():
        seen.compactions[figures] = seen.compactions.get(figures, 0) + count


def _refusal_key(event: Event) -> tuple[str, str | None, int | None, str] | None:
    if not isinstance(event, RequestRejected):
        return None
    return (event.thread, event.timestamp, event.tokens, event.reason)


def _rethreaded(event: Event, thread: str) -> Event:
    if isinstance(event, MessageAdded):
        message = event.message.model_copy(update={"thread": thread})
        return event.model_copy(update={"message": message})
    if getattr(event, "thread", None) == "main":
        return event.model_copy(update={"thread": thread})
    return event


def _relabel_reactive(events: list[Event]) -> list[Event]:
    """An automatic compaction that follows a refusal (seen in one file, the compaction in
    another) is a reactive one."""
    refused: set[str] = set()
    out: list[Event] = []
    for event in events:
        if isinstance(event, RequestRejected):
            refused.add(event.thread)
        elif isinstance(event, RequestSent) and event.request_id is not None:
            refused.discard(event.thread)
        elif isinstance(event, Compacted) and event.thread in refused:
            refused.discard(event.thread)
            if event.trigger == "auto":
                event = event.model_copy(update={"trigger": "reactive"})
        out.append(event)
    return out


# ------------------------------------------------------------------------------------------
# Detection and project folders


def _head_objects(head: Head) -> list[Any]:
    objs: list[Any] = []
    for line in head.lines[:SNIFF_MAX_LINES]:
        try:
            objs.append(orjson.loads(line.lstrip("\ufeff")))
        except orjson.JSONDecodeError:
            objs.append(_MISSING)
    return objs


def parsed_head(head: Head) -> list[Any]:
    """The JSON values of the head's lines that parse."""
    return [o for o in _head_objects(head) if o is not _MISSING]


def _is_session_line(obj: Any) -> bool:
    if not isinstance(obj, dict):
        return False
    kind = obj.get("type")
    if not isinstance(kind, str):
        return False
    if "parentUuid" in obj and "uuid" in obj:
        return kind in KNOWN_TYPES or isinstance(obj.get("sessionId"), str)
    if kind in KNOWN_TYPES and isinstance(obj.get("sessionId"), str):
        return True
    if kind == "summary":
        return isinstance(obj.get("leafUuid"), str)
    if kind == "file-history-snapshot":
        return isinstance(obj.get("snapshot"), dict) and "messageId" in obj
    return False


def sniff(head: Head) -> float:
    if head.is_dir:
        return _sniff_folder(head.path)
    body = head.data.lstrip(BOM).lstrip()
    if not body.startswith(b"{"):
        return 0.0
    parsed = parsed_head(head)
    if not parsed:
        # One long first line cut by the head: look at its envelope.
        prefix = body[:4096]
        if b'"parentUuid":' in prefix and b'"sessionId":"' in prefix and b'"type":"' in prefix:
            return 0.9
        return 0.0
    hits = sum(1 for o in parsed if _is_session_line(o))
    if hits == 0:
        return 0.0
    return 0.95 if hits * 2 >= len(parsed) else 0.6


def _sessions_in(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.glob("*.jsonl") if p.is_file())
    except OSError:
        return []


def _sniff_files(files: list[Path], limit: int = 5) -> bool:
    for path in files[:limit]:
        try:
            if sniff(read_head(path)) >= 0.5:
                return True
        except Exception:
            continue
    return False


def _sniff_folder(folder: Path) -> float:
    if _sniff_files(_sessions_in(folder)):
        return 0.95
    try:
        subdirs = sorted(p for p in folder.iterdir() if p.is_dir())
    except OSError:
        return 0.0
    for sub in subdirs[:20]:
        if _sniff_files(_sessions_in(sub), limit=2):
            return 0.9
    return 0.0


def _by_mtime(paths: Iterable[Path]) -> list[Path]:
    def key(path: Path) -> tuple[float, str]:
        try:
            return path.stat().st_mtime, path.name
        except OSError:
            return 0.0, path.name

    return sorted(paths, key=key)


def _expand_project(folder: Path) -> list[Path]:
    files = _sessions_in(folder)
    parents = [p for p in files if not p.name.startswith("agent-")]
    agents = [p for p in files if p.name.startswith("agent-")]
    for parent in parents:
        sub = folder / parent.stem / "subagents"
        if sub.is_dir():
            agents.extend(p for p in sub.glob("agent-*.jsonl") if p.is_file())
    return [*_by_mtime(parents), *_by_mtime(agents)]


def expand(path: Path) -> list[Path]:
    """The session files of a project folder (parents first, then sub-agents, each by mtime),
    or of every project folder under a ``projects`` root."""
    if not path.is_dir():
        return [path]
    if _sessions_in(path):
        return _expand_project(path)
    out: list[Path] = []
    try:
        subdirs = sorted(p for p in path.iterdir() if p.is_dir())
    except OSError:
        return out
    for sub in subdirs:
        # a project folder that cannot be listed is named, so that reading it says why
        out.extend([sub] if folder_problem(sub) else _expand_project(sub))
    return out


SPEC = register(
    FormatSpec(
        name="claude-code",
        description="Claude Code session transcripts (JSONL), sub-agent files, project folders",
        reads=(
            "~/.claude/projects/<project>/<session>.jsonl, sub-agent agent-*.jsonl files, a "
            "project folder, or the projects folder itself"
        ),
        parser=ClaudeCodeParser,
        sniff=sniff,
        default_profile="claude-code",
        expand=expand,
        folder=True,
        stream_merge=merge_streams,
    )
)
