"""What the head of a file shows about chat messages (``Sample``): the sampler both chat-message
sniffers use (OpenAI Chat Completions, Anthropic Messages). It reads the first records of a
head, JSON Lines or one document, including a document cut in the middle."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import orjson

from ctx_inspect.formats.chat_common import MISSING, is_conversation, loads_or_missing
from ctx_inspect.formats.json_prefix import parse_prefix
from ctx_inspect.formats.registry import HEAD_BYTES, Head

SNIFF_MAX_RECORDS = 200
OPENAI_PART_TYPES = frozenset({"image_url", "input_audio", "file", "refusal"})
ANTHROPIC_BLOCK_TYPES = frozenset(
    {
        "tool_use",
        "tool_result",
        "thinking",
        "redacted_thinking",
        "server_tool_use",
        "web_search_tool_result",
        "document",
    }
)
OPENAI_ROLES = frozenset({"tool", "function", "developer"})


@dataclass(frozen=True)
class Sample:
    """What the head of a file shows about chat messages."""

    lines: bool = False  # JSON Lines records rather than one document
    messages: int = 0  # objects found where messages are expected
    with_role: int = 0  # ... of which carry a string ``role``
    roles: frozenset[str] = frozenset()
    conversation: bool = False  # a ``{"messages": [...]}`` object was seen
    openai: bool = False  # features only OpenAI Chat Completions has
    anthropic: bool = False  # features only Anthropic Messages has
    string_content: bool = False
    system_key: bool = False  # a top-level ``system`` beside ``messages``
    mini_swe_agent: bool = False


def sample_head(head: Head) -> Sample:
    return _sample(head.data, len(head.data) >= HEAD_BYTES)


@functools.lru_cache(maxsize=8)
def _sample(data: bytes, cut: bool) -> Sample:
    text = data.decode("utf-8", "replace").lstrip("\ufeff")
    body = text.lstrip()
    if not body or body[0] not in "[{":
        return Sample()
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        value = MISSING
    if value is not MISSING:
        if isinstance(value, dict) and not is_conversation(value):
            return _scan([value], lines=True)
        return _scan_document(value)
    lines = [ln.strip() for ln in text.split("\n") if ln.strip()]
    if cut and len(lines) > 1:
        lines = lines[:-1]
    first = loads_or_missing(lines[0].encode()) if lines else MISSING
    if isinstance(first, dict):
        records = []
        for ln in lines[:SNIFF_MAX_RECORDS]:
            record = loads_or_missing(ln.encode())
            if isinstance(record, dict):
                records.append(record)
        return _scan(records, lines=True)
    return _scan_document(parse_prefix(body))


def _scan_document(value: Any) -> Sample:
    if isinstance(value, list):
        return _scan(value[:SNIFF_MAX_RECORDS], lines=False)
    if isinstance(value, dict):
        return _scan([value], lines=False)
    return Sample()


def _scan(records: list[Any], lines: bool) -> Sample:
    messages: list[Any] = []
    state: dict[str, bool] = {}
    for record in records:
        if isinstance(record, list):
            messages.extend(record)
        elif isinstance(record, dict) and isinstance(record.get("messages"), list):
            state["conversation"] = True
            messages.extend(record["messages"])
            if record.get("system") not in (None, "", []):
                state["system_key"] = True
            fmt = record.get("trajectory_format")
            if isinstance(fmt, str) and fmt.startswith("mini-swe-agent"):
                state["mini_swe_agent"] = True
        elif isinstance(record, dict) and isinstance(record.get("choices"), list):
            state["openai"] = True
            choice = record["choices"][0] if record["choices"] else None
            if isinstance(choice, dict) and isinstance(choice.get("message"), dict):
                messages.append(choice["message"])
        else:
            messages.append(record)
    dicts = [m for m in messages[:SNIFF_MAX_RECORDS] if isinstance(m, dict)]
    roles = {m["role"] for m in dicts if isinstance(m.get("role"), str)}
    with_role = sum(1 for m in dicts if isinstance(m.get("role"), str))
    for m in dicts:
        _scan_message(m, state)
    return Sample(
        lines=lines,
        messages=len(dicts),
        with_role=with_role,
        roles=frozenset(roles),
        conversation=state.get("conversation", False),
        openai=state.get("openai", False) or bool(roles & OPENAI_ROLES),
        anthropic=state.get("anthropic", False),
        string_content=state.get("string_content", False),
        system_key=state.get("system_key", False),
        mini_swe_agent=state.get("mini_swe_agent", False),
    )


def _scan_message(message: dict[str, Any], state: dict[str, bool]) -> None:
    if any(k in message for k in ("tool_calls", "tool_call_id", "tool_call_ids", "function_call")):
        state["openai"] = True
    if message.get("type") == "message" and isinstance(message.get("content"), list):
        state["anthropic"] = True  # an Anthropic API response object
    content = message.get("content")
    if isinstance(content, str):
        state["string_content"] = True
    elif isinstance(content, list):
        for block in content[:50]:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind in ANTHROPIC_BLOCK_TYPES or (kind == "image" and "source" in block):
                state["anthropic"] = True
            elif kind in OPENAI_PART_TYPES:
                state["openai"] = True
