"""What the lines of a Claude Code transcript hold, as plain values: the line types, a content
block as a ``Part``, the texts of attachments and metadata lines, a refusal and its figures, and
the events the readers make of them without validation.

Shared by the full reader (``reader_lines``) and its fast path (``reader_fast``); nothing here
keeps state.
"""

from __future__ import annotations

import re
from typing import Any

from ctx_inspect.core.model import (
    LogLine,
    Part,
    PartType,
    RequestSent,
    SourceSpan,
    Usage,
    UsageReported,
)
from ctx_inspect.formats.base import trusted
from ctx_inspect.formats.chat_common import compact_json

SESSION_FORMAT = "claude-code"  # the session transcripts' format (``reader``)
AGENT = "claude-code"
ESTIMATE_RULE = "claude-code"  # the estimate the scanners compute (``entry_estimates``)
SYNTHETIC_MODEL = "<synthetic>"
LOG_TEXT_CHARS = 200
BOM = b"\xef\xbb\xbf"

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
# The provider's refusal of a prompt that does not fit, and its figures when it gives them
# ("prompt is too long: 203052 tokens > 200000 maximum").
_TOO_LONG = re.compile(r"prompt is too long", re.IGNORECASE)
_TOO_LONG_FIGURES = re.compile(r"(?<![\d,])(\d[\d,]{0,19})\s*tokens?\s*>\s*(\d[\d,]{0,19})")
ERROR_SUBTYPES = frozenset({"api_error", "api_retry", "error"})
REFUSAL_TEXT_CHARS = 500
MISSING = object()


# ------------------------------------------------------------------------------------------
# Small helpers


def text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def int_or_zero(value: Any) -> int:
    return value if type(value) is int else 0


def positive_int(value: Any) -> int | None:
    return value if type(value) is int and value > 0 else None


def shortened(text: str, limit: int = LOG_TEXT_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def usage_key(raw: Any) -> tuple[int, int, int, int] | None:
    """(input, cache write, cache read, output) of a Messages API usage object."""
    if not isinstance(raw, dict):
        return None
    get = raw.get
    if get("input_tokens") is None and get("output_tokens") is None:
        return None
    return (
        int_or_zero(get("input_tokens")),
        int_or_zero(get("cache_creation_input_tokens")),
        int_or_zero(get("cache_read_input_tokens")),
        int_or_zero(get("output_tokens")),
    )


# ------------------------------------------------------------------------------------------
# Events built without validation: every field given, in field order, from values made here
# (the readers' hot path; see ``formats.base.trusted``).


def make_part(
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


def make_usage(key: tuple[int, int, int, int]) -> Usage:
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


def usage_event(
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
            "usage": make_usage(key),
            "model": model,
            "request_id": request_id,
            "thread": thread,
            "context_tokens": None,
            "context_label": "",
        },
    )


def request_event(
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


def log_event(
    text: str, tag: str, ts: str | None, span: SourceSpan, level: str | None = None
) -> LogLine:
    return trusted(
        LogLine,
        {"timestamp": ts, "span": span, "type": "log", "text": text, "level": level, "tag": tag},
    )


def plain_text(value: Any) -> str:
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


def image_part(block: dict[str, Any]) -> Part:
    source = block.get("source")
    media_type = None
    size = 0
    if isinstance(source, dict):
        media_type = text_or_none(source.get("media_type"))
        data = source.get("data") or source.get("url") or source.get("file_id")
        size = len(data) if isinstance(data, str) else 0
    return Part(type=PartType.IMAGE, media_type=media_type, data_bytes=size)


def document_part(block: dict[str, Any]) -> Part:
    source = block.get("source")
    media_type = None
    size = 0
    text = text_or_none(block.get("title")) or ""
    if isinstance(source, dict):
        media_type = text_or_none(source.get("media_type"))
        data = source.get("data")
        if isinstance(data, str):
            if source.get("type") == "text":
                text = f"{text}\n{data}" if text else data
            else:
                size = len(data)
    return Part(type=PartType.ATTACHMENT, text=text, media_type=media_type, data_bytes=size)


def unknown_block(block: Any) -> Part:
    return Part(type=PartType.ATTACHMENT, text=compact_json(block))


def loose_part(block: Any) -> Part:
    """An item of a content list that is not a block object: a string as its text, anything
    else as its JSON."""
    return make_part(PartType.TEXT, block) if isinstance(block, str) else unknown_block(block)


def result_content(content: Any) -> tuple[str, list[Part]]:
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
                texts.append(text_or_none(item.get("text")) or "")
            elif itype == "image":
                extra.append(image_part(item))
            elif itype == "document":
                extra.append(document_part(item))
            else:
                extra.append(unknown_block(item))
        elif isinstance(item, str):
            texts.append(item)
        elif item is not None:
            extra.append(unknown_block(item))
    return "\n".join(texts), extra


def refusal_of(obj: dict[str, Any]) -> tuple[str, int | None, int | None] | None:
    """(message, tokens, limit) when a line reports the provider refusing a prompt as too long
    (an API-error notice, an error or retry line, a run's failed result), else None."""
    texts: list[str] = []
    message = obj.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        texts.extend(
            b["text"] for b in content if isinstance(b, dict) and text_or_none(b.get("text"))
        )
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
    reason = shortened(text[start:end], REFUSAL_TEXT_CHARS)
    return reason, tokens, limit


def metadata_text(kind: str, obj: dict[str, Any], stream_json: bool) -> str:
    """The log text of a metadata line (session titles, snapshots, progress, ...)."""
    if kind == "summary":
        title = obj.get("summary")
        return f"title: {shortened(title)}" if isinstance(title, str) else "summary"
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


def attachment_pieces(obj: dict[str, Any], text: str) -> list[str]:
    """The texts of an attachment's parts: one per item of its ``rendered`` list (one message
    each, which Claude Code estimates on its own) when there are several and none is empty,
    else its whole text."""
    rendered = obj.get("rendered")
    if isinstance(rendered, list) and len(rendered) > 1:
        pieces = [plain_text(item) for item in rendered]
        if all(pieces) and "\n".join(pieces) == text:
            return pieces
    return [text]


def attachment_text(obj: dict[str, Any], att: dict[str, Any], atype: str | None) -> str | None:
    """The text an attachment line put into the context, or None when it put none."""
    rendered = obj.get("rendered", MISSING)
    if rendered is not MISSING:
        text = plain_text(rendered) if rendered is not None else ""
        return text or None
    if atype in SILENT_ATTACHMENTS:
        return None
    for key in ATTACHMENT_TEXT_KEYS:
        value = att.get(key)
        if value:
            text = plain_text(value)
            if text:
                return text
    return None
