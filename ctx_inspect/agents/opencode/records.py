"""What OpenCode stores, read from its JSON: shared by the database, the storage folder and the
``opencode run`` stdout readers.

A message is its info JSON and its parts (``OcMessage``). A request's ``tokens {total?, input,
output, reasoning, cache {read, write}}`` is a ``Usage`` (``opencode_usage``; input never
includes the cache), and OpenCode's own count of it is ``tokens.total``, else input + output +
cache read + cache write (``opencode_count``: what it compares with its usable window). A tool
part is a call in the assistant's message and a result message (``tool_messages``, as
``MessageV2.toModelMessages`` sends them). A provider's refusal of a prompt as too long, from
the error OpenCode recorded, is a ``RequestRejected`` (``rejection``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ctx_inspect.core.model import (
    Event,
    Message,
    MessageKind,
    Part,
    PartType,
    RequestRejected,
    Role,
    Usage,
)
from ctx_inspect.formats.chat_common import as_int, as_str, compact_json, data_url, iso_time
from ctx_inspect.formats.sqlite import db_issue

INTERRUPTED = "[Tool execution was interrupted]"  # a pending or running tool part, as sent
REQUIRED_TABLES = ("session", "message", "part")  # the database's tables, the folder's folders


def load_json_value(raw: Any, where: str, path: Path, issues: list[Event]) -> Any:
    """A JSON value from a column or a file; None (and an issue naming ``where``) when broken."""
    if raw is None:
        issues.append(db_issue(path, f"{where}: no data"))
        return None
    data = raw if isinstance(raw, bytes) else str(raw).encode("utf-8", "surrogatepass")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        try:
            value = orjson.loads(data.decode("utf-8", "replace"))
        except orjson.JSONDecodeError:
            issues.append(db_issue(path, f"{where}: data is not valid JSON ({exc.msg})", data))
            return None
        issues.append(db_issue(path, f"{where}: invalid UTF-8 replaced with U+FFFD", data))
        return value


@dataclass
class OcMessage:
    """One stored message: its info JSON (with ``id``) and its parts, in order."""

    info: dict[str, Any]
    parts: list[dict[str, Any]] = field(default_factory=list)


def opencode_usage(tokens: Any) -> Usage | None:
    """``tokens {total?, input, output, reasoning, cache {read, write}}``; None when all zero."""
    if not isinstance(tokens, dict):
        return None
    cache = tokens.get("cache")
    cache = cache if isinstance(cache, dict) else {}
    total = tokens.get("total")
    usage = Usage(
        input=as_int(tokens.get("input")),
        output=as_int(tokens.get("output")),
        reasoning=as_int(tokens.get("reasoning")),
        cache_read=as_int(cache.get("read")),
        cache_write=as_int(cache.get("write")),
        total=as_int(total) if total is not None and as_int(total) else None,
    )
    figures = (usage.input, usage.output, usage.reasoning, usage.cache_read, usage.cache_write)
    if not any(figures) and not usage.total:
        return None
    return usage


def epoch_ms(value: Any, key: str = "created") -> int | None:
    """A ``time`` object's ``key`` (epoch milliseconds, as OpenCode stores its times)."""
    if isinstance(value, dict):
        raw = value.get(key)
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            return int(raw)
    return None


def file_part(part: dict[str, Any]) -> Part | None:
    """A file part as the model gets it; None for text files and folders (their text is in the
    synthetic text part beside them)."""
    mime = as_str(part.get("mime")) or ""
    if mime in ("text/plain", "application/x-directory"):
        return None  # sent as the synthetic text part beside it
    url = part.get("url")
    media, size = data_url(url) if isinstance(url, str) else (None, 0)
    kind = PartType.IMAGE if mime.startswith("image/") else PartType.ATTACHMENT
    name = as_str(part.get("filename")) or ""
    return Part(type=kind, text=name, media_type=mime or media, data_bytes=size)


def opencode_count(usage: Usage) -> int:
    """What ``SessionCompaction.isOverflow`` compares with the usable window: ``tokens.total``,
    else input + output + cache read + cache write."""
    if usage.total:
        return usage.total
    return usage.input + usage.output + usage.cache_read + usage.cache_write


def count_label(usage: Usage) -> str:
    """How ``opencode_count`` was made, as a step names its figure."""
    return "tokens.total" if usage.total else "input+output+cache (OpenCode's count)"


_REJECTED = re.compile(
    r"context[_ ]length[_ ]exceeded|maximum context length|context window|prompt is too long"
    r"|too many tokens|exceeds the context|ContextOverflow",
    re.IGNORECASE,
)
_REJECTED_LIMIT = re.compile(r"maximum context length is (\d+)", re.IGNORECASE)
_REJECTED_TOKENS = re.compile(
    r"resulted in (\d+) tokens|prompt is too long: (\d+) tokens|(\d+) tokens > \d+", re.IGNORECASE
)


def rejection(error: Any, *, code: str | None = None) -> RequestRejected | None:
    """The provider's refusal of a prompt as too long, from an error OpenCode recorded (its
    name, message and response body); None when the error is of another kind."""
    if not isinstance(error, dict):
        return None
    data = error.get("data")
    data = data if isinstance(data, dict) else {}
    name = as_str(error.get("name")) or ""
    texts = [t for t in (data.get("message"), data.get("responseBody")) if isinstance(t, str)]
    text = " ".join(texts)
    if name != "ContextOverflowError" and not _REJECTED.search(text):
        return None
    found = _REJECTED_TOKENS.search(text)
    tokens = next((int(g) for g in found.groups() if g), None) if found else None
    limit = _REJECTED_LIMIT.search(text)
    if "context_length_exceeded" in text:
        code = "context_length_exceeded"
    reason = texts[0] if texts else name
    return RequestRejected(
        reason=reason[:500],
        code=code,
        tokens=tokens,
        limit=int(limit.group(1)) if limit else None,
    )


def tool_messages(part: dict[str, Any], visible: bool, created: str | None) -> tuple[Part, Message]:
    """A tool part: its call (a part of the assistant's message) and its result (a message),
    as ``MessageV2.toModelMessages`` sends them."""
    name = as_str(part.get("tool"))
    call_id = as_str(part.get("callID"))
    state = part.get("state")
    state = state if isinstance(state, dict) else {}
    args = state.get("input")
    arguments = compact_json(args) if args is not None else ""
    call = Part(type=PartType.TOOL_CALL, tool_name=name, call_id=call_id, arguments=arguments)
    status = state.get("status")
    is_error = False
    extra: list[Part] = []
    if status == "completed":
        output = state.get("output")
        text = output if isinstance(output, str) else compact_json(output)
        attachments = state.get("attachments")
        if epoch_ms(state.get("time"), "compacted") is None and isinstance(attachments, list):
            for attachment in attachments:
                if isinstance(attachment, dict):
                    sent = file_part(attachment)
                    if sent is not None:
                        extra.append(sent)
    elif status == "error":
        metadata = state.get("metadata")
        interrupted = isinstance(metadata, dict) and metadata.get("interrupted") is True
        output = metadata.get("output") if isinstance(metadata, dict) else None
        if interrupted and isinstance(output, str):
            text = output
        else:
            text, is_error = text_of(state.get("error")), True
    else:  # pending, running: sent as an interrupted call
        text, is_error = INTERRUPTED, True
    part_id = as_str(part.get("id")) or f"{call_id}-result"
    result = Message(
        id=part_id,
        role=Role.TOOL,
        kind=MessageKind.TOOL_RESULT,
        parts=(
            Part(
                type=PartType.TOOL_RESULT,
                text=text,
                tool_name=name,
                call_id=call_id,
                is_error=is_error,
            ),
            *extra,
        ),
        visible=visible,
        timestamp=iso_time(epoch_ms(state.get("time"), "end")) or created,
    )
    return call, result


def text_of(value: Any) -> str:
    """A part's text, "" when it is not a string."""
    return value if isinstance(value, str) else ""
