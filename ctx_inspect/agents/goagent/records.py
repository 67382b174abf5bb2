"""What the Go agent's three files share: its messages (``AgentMessage``), its session header,
its times, and what the head of a JSON Lines file of it holds (for detection).

Messages (all three formats): role ``user`` / ``assistant`` / ``toolResult`` (TOOL, kind
TOOL_RESULT), blocks ``text`` / ``image`` / ``toolCall`` / ``thinking``, ``metadata``
(``agentVisible: false`` means not sent to the model; ``kind`` ``tool_result_archived`` is
ARCHIVED and hidden, ``tool_summary`` is TOOL_SUMMARY), assistant ``usage`` (``input`` without
the cache, ``output``, ``cacheRead``, ``cacheWrite``, ``totalTokens``; none is reported for
``stopReason`` aborted / error, nor when every figure is 0).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from ctx_inspect.core.model import (
    Message,
    MessageKind,
    Part,
    PartType,
    Role,
    SessionInfo,
    Usage,
)
from ctx_inspect.formats.base import shown
from ctx_inspect.formats.chat_common import (
    as_int,
    as_str,
    compact_json,
    iso_time,
    type_name,
    unknown_part,
)
from ctx_inspect.formats.registry import HEAD_BYTES, Head

# the formats of the agent's stdout, log file and session tree
EVENTS_FORMAT = "goagent-events"
LOG_FORMAT = "goagent-log"
SESSION_FORMAT = "goagent-session"

ROLES: dict[str, Role] = {"user": Role.USER, "assistant": Role.ASSISTANT, "toolResult": Role.TOOL}
NO_USAGE_STOPS = frozenset({"aborted", "error"})
EVENT_TYPES = frozenset(
    {
        "agent_start",
        "agent_end",
        "turn_start",
        "turn_end",
        "message_start",
        "message_end",
        "message_update",
        "tool_execution_start",
        "tool_execution_end",
        "text_delta",
        "tool_call_delta",
        "thinking_delta",
        "compaction_start",
        "compaction_end",
        "loop_guard_triggered",
        "tool_call_recovery",
        "error",
        "llm_retry",
    }
)
ENTRY_TYPES = frozenset({"message", "compaction", "branch_summary", "session_info"})


def nano_time(value: Any) -> str | None:
    """A UnixNano timestamp as ISO 8601 in UTC (microseconds)."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    seconds, nanos = divmod(value, 1_000_000_000)
    try:
        moment = datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.replace(microsecond=nanos // 1000).isoformat()


def go_usage(raw: dict[str, Any]) -> Usage | None:
    """An assistant message's usage; None when aborted / failed or when every figure is 0."""
    stop = raw.get("stopReason")
    if isinstance(stop, str) and stop in NO_USAGE_STOPS:  # a list would not even hash
        return None
    usage = raw.get("usage")
    if not isinstance(usage, dict):
        return None
    total = as_int(usage.get("totalTokens"))
    result = Usage(
        input=as_int(usage.get("input")),
        output=as_int(usage.get("output")),
        cache_read=as_int(usage.get("cacheRead")),
        cache_write=as_int(usage.get("cacheWrite")),
        total=total or None,
    )
    if not (result.input or result.output or result.cache_read or result.cache_write or total):
        return None
    return result


def _block(block: Any, role: Role, raw: dict[str, Any]) -> Part:
    if not isinstance(block, dict):
        return unknown_part(block)
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        if role is Role.TOOL:
            return Part(
                type=PartType.TOOL_RESULT,
                text=block["text"],
                tool_name=as_str(raw.get("toolName")),
                call_id=as_str(raw.get("toolCallId")),
                is_error=raw.get("isError") is True,
            )
        return Part(type=PartType.TEXT, text=block["text"])
    if kind == "thinking" and isinstance(block.get("thinking"), str):
        return Part(type=PartType.THINKING, text=block["thinking"])
    if kind == "toolCall":
        args = block.get("arguments")
        return Part(
            type=PartType.TOOL_CALL,
            tool_name=as_str(block.get("name")),
            call_id=as_str(block.get("id")),
            arguments=compact_json(args) if args is not None else "",
        )
    if kind == "image":
        data = block.get("data")
        return Part(
            type=PartType.IMAGE,
            media_type=as_str(block.get("mimeType")),
            data_bytes=len(data) if isinstance(data, str) else 0,
        )
    return unknown_part(block)


def convert_message(raw: Any, message_id: str, timestamp: str | None = None) -> Message | str:
    """An AgentMessage as a Message, or the reason it cannot be read."""
    if not isinstance(raw, dict):
        return f"message is {type_name(raw)}, not an object"
    role_name = raw.get("role")
    role = ROLES.get(role_name) if isinstance(role_name, str) else None
    if role is None:
        return f"unknown role {shown(role_name)}"
    content = raw.get("content")
    if content is not None and not isinstance(content, list):
        return f"content is {type_name(content)}, not a list of blocks"
    parts = [_block(block, role, raw) for block in content or ()]
    if role is Role.TOOL and not any(p.type is PartType.TOOL_RESULT for p in parts):
        parts.insert(0, _block({"type": "text", "text": ""}, role, raw))
    metadata = raw.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    visible = metadata.get("agentVisible") is not False
    meta_kind = metadata.get("kind")
    if meta_kind == "tool_result_archived":
        kind, visible = MessageKind.ARCHIVED, False
    elif meta_kind == "tool_summary":
        kind = MessageKind.TOOL_SUMMARY
    elif role is Role.TOOL:
        kind = MessageKind.TOOL_RESULT
    elif (
        role is Role.ASSISTANT
        and parts
        and all(p.type in (PartType.TOOL_CALL, PartType.THINKING) for p in parts)
    ):
        kind = (
            MessageKind.TOOL_CALL
            if any(p.type is PartType.TOOL_CALL for p in parts)
            else MessageKind.MESSAGE
        )
    else:
        kind = MessageKind.MESSAGE
    return Message(
        id=message_id,
        role=role,
        kind=kind,
        parts=tuple(parts),
        visible=visible,
        timestamp=iso_time(raw.get("timestamp")) or timestamp,
        model=as_str(raw.get("model")),
    )


def make_summary(
    message_id: str, text: str, timestamp: str | None, kind: MessageKind = MessageKind.SUMMARY
) -> Message:
    """The summary message the agent puts in its list (a compaction's, a branch's)."""
    return Message(
        id=message_id,
        role=Role.USER,
        kind=kind,
        parts=(Part(type=PartType.TEXT, text=text),),
        timestamp=timestamp,
    )


def header_info(obj: dict[str, Any], timestamp: str | None) -> SessionInfo:
    """What the session header line says of the session (its id, version, working folder)."""
    extra: dict[str, Any] = {}
    for key, name in (
        ("cwd", "cwd"),
        ("parentSession", "parent_session"),
        ("version", "session_version"),
        ("gitCommit", "git_commit"),
        ("lastCompactionId", "last_compaction_id"),
    ):
        if obj.get(key) not in (None, ""):
            extra[name] = obj[key]
    return SessionInfo(
        agent="goagent",
        session_id=as_str(obj.get("id")),
        version=as_str(obj.get("gitVersion")),
        extra=extra,
        timestamp=as_str(obj.get("timestamp")) or timestamp,
    )


def is_header(obj: dict[str, Any]) -> bool:
    """Whether a record is the session header (``{"type": "session", ...}``)."""
    return obj.get("type") == "session"


def load_record(line: bytes) -> Any:
    """A JSON line's value (read again as text with broken UTF-8 replaced), None if none."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        try:
            return orjson.loads(line.decode("utf-8", "replace"))
        except orjson.JSONDecodeError:
            return None


_INSTANT = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?"
    r"\s*(Z|[+-]\d{2}:?\d{2})?$"
)


def instant_ns(text: str | None) -> int | None:
    """An ISO 8601 / RFC 3339 time as nanoseconds since the epoch, to the nanosecond (the
    session writes nanoseconds); a time without a zone is read as UTC."""
    if not text:
        return None
    match = _INSTANT.match(text.strip())
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(match[i]) for i in range(1, 7))
    try:
        moment = datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    except ValueError:
        return None
    nanos = int((match[7] or "0")[:9].ljust(9, "0"))
    zone = match[8]
    offset = 0
    if zone and zone != "Z":
        digits = zone[1:].replace(":", "")
        offset = (int(digits[:2]) * 60 + int(digits[2:])) * 60 * (1 if zone[0] == "+" else -1)
    return (int(moment.timestamp()) - offset) * 1_000_000_000 + nanos


@dataclass
class HeadSample:
    header: bool = False
    events: int = 0
    entries: int = 0
    legacy: int = 0
    records: int = 0


def sample_head(head: Head) -> HeadSample:
    """What the complete lines of a head hold; when a long line is cut off after the header,
    the raw text past it tells events (``"eventAt":``) from entries (``"parentId":``)."""
    sample = HeadSample()
    for line in head.lines[:100]:
        obj = load_record(line.lstrip("\ufeff").encode())
        if not isinstance(obj, dict):
            continue
        sample.records += 1
        etype = obj.get("type")
        if etype == "session" and isinstance(obj.get("version"), int) and "id" in obj:
            sample.header = True
        elif etype in EVENT_TYPES and "eventAt" in obj:
            sample.events += 1
        elif etype in ENTRY_TYPES and "id" in obj and "parentId" in obj:
            sample.entries += 1
        elif (
            etype is None
            and isinstance(obj.get("role"), str)
            and obj["role"] in ROLES
            and isinstance(obj.get("content"), list)
            and isinstance(obj.get("timestamp"), int)
            and (obj.get("role") == "toolResult" or isinstance(obj.get("metadata"), dict))
        ):
            sample.legacy += 1
    if sample.header and sample.records == 1 and len(head.data) >= HEAD_BYTES:
        rest = head.text.split("\n", 1)[-1][:4096]
        if '"eventAt":' in rest:
            sample.events += 1
        elif '"parentId":' in rest:
            sample.entries += 1
    return sample
