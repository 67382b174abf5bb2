"""Anthropic Messages API: message arrays, request bodies, JSONL messages and API responses.

Containers (see ``ChatParser``): a bare JSON array of messages; a request body ``{"model",
"system", "messages", "tools"}`` (the top-level ``system`` becomes a SYSTEM message first, the
``tools`` a ``SessionInfo`` with their count and size); JSON Lines with one message per line, API
response objects (``{"id": "msg_...", "type": "message", "role": "assistant", ...}``) among them;
JSON Lines with one request body per line (threads ``conv1``, ``conv2``, ...).

Content is a string or blocks: text, image, document, tool_use, server_tool_use, tool_result and
the server tools' ``*_tool_result`` blocks, thinking, redacted_thinking. ``cache_control`` is
ignored; unknown blocks are kept as their JSON text. Usage counts ``input_tokens`` without the
cache, plus ``cache_creation_input_tokens`` and ``cache_read_input_tokens``.
"""

from __future__ import annotations

from typing import Any

from ctx_inspect.core.model import Part, PartType, Role, Usage
from ctx_inspect.formats.chat_common import (
    ChatParser,
    Converted,
    as_int,
    as_str,
    compact_json,
    data_url,
    iso_time,
    text_part,
    type_name,
    unknown_part,
)
from ctx_inspect.formats.chat_sniff import sample_head
from ctx_inspect.formats.registry import FormatSpec, Head, register

ROLES: dict[str, Role] = {
    "user": Role.USER,
    "assistant": Role.ASSISTANT,
    "system": Role.SYSTEM,  # only made by us, from a request body's top-level ``system``
}
CALL_TYPES = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})


def anthropic_usage(raw: Any) -> Usage | None:
    """Messages API usage: ``input_tokens`` excludes the cache reads and writes."""
    if not isinstance(raw, dict):
        return None
    keys = ("input_tokens", "output_tokens", "cache_read_input_tokens")
    if all(raw.get(k) is None for k in keys):
        return None
    return Usage(
        input=as_int(raw.get("input_tokens")),
        cache_write=as_int(raw.get("cache_creation_input_tokens")),
        cache_read=as_int(raw.get("cache_read_input_tokens")),
        output=as_int(raw.get("output_tokens")),
    )


def _source_payload(source: Any) -> tuple[str | None, int]:
    """Media type and payload size of an image or document ``source``."""
    if not isinstance(source, dict):
        return None, 0
    media_type = as_str(source.get("media_type"))
    data = source.get("data")
    if isinstance(data, str):
        return media_type, len(data)
    url = source.get("url")
    if isinstance(url, str):
        url_media, size = data_url(url)
        return media_type or url_media, size
    file_id = source.get("file_id")
    if isinstance(file_id, str):
        return media_type, len(file_id)
    return media_type, 0


class AnthropicMessagesParser(ChatParser):
    format_name = "anthropic-messages"

    def is_record(self, obj: dict[str, Any]) -> bool:
        return "role" in obj or obj.get("type") == "message"

    def conversation_items(self, wrapper: dict[str, Any]) -> list[tuple[str, Any]]:
        items = super().conversation_items(wrapper)
        system = wrapper.get("system")
        if system is not None and system != "" and system != []:
            items.insert(0, ("system", {"role": "system", "content": system}))
        return items

    # -- one message ----------------------------------------------------------------------

    def convert(self, raw: Any) -> Converted | str:
        if not isinstance(raw, dict):
            return f"not a message object ({type_name(raw)})"
        role_name = raw.get("role")
        if role_name is None:
            return "no role"
        if not isinstance(role_name, str):
            return f"role is {type_name(role_name)}, not text"
        role = ROLES.get(role_name)
        if role is None:
            return f"unknown role {role_name!r}"
        content = raw.get("content")
        parts: list[Part] = []
        if isinstance(content, str):
            if content:
                parts.append(text_part(content))
        elif isinstance(content, list):
            for block in content:
                parts.extend(self._block_parts(block))
        elif content is not None:
            return f"content is {type_name(content)}, not text or a list of blocks"
        msg_id = as_str(raw.get("id"))
        return Converted(
            role=role,
            parts=parts,
            id=msg_id,
            timestamp=iso_time(raw.get("timestamp")),
            model=as_str(raw.get("model")),
            usage=anthropic_usage(raw.get("usage")) if role is Role.ASSISTANT else None,
            request_id=msg_id if role is Role.ASSISTANT else None,
        )

    def _block_parts(self, block: Any) -> list[Part]:
        if isinstance(block, str):
            return [text_part(block)]
        if not isinstance(block, dict):
            return [unknown_part(block)]
        kind = as_str(block.get("type"))
        if kind == "text" and isinstance(block.get("text"), str):
            return [text_part(block["text"])]
        if kind == "thinking" and isinstance(block.get("thinking"), str):
            return [Part(type=PartType.THINKING, text=block["thinking"])]
        if kind == "redacted_thinking":
            data = block.get("data")
            size = len(data) if isinstance(data, str) else 0
            return [Part(type=PartType.THINKING, data_bytes=size)]
        if kind == "image" and isinstance(block.get("source"), dict):
            media_type, size = _source_payload(block["source"])
            return [Part(type=PartType.IMAGE, media_type=media_type, data_bytes=size)]
        if kind == "document" and isinstance(block.get("source"), dict):
            return [self._document_part(block["source"])]
        if kind in CALL_TYPES:
            call_id = as_str(block.get("id"))
            name = as_str(block.get("name"))
            self.remember_call(call_id, name)
            data = block.get("input")
            return [
                Part(
                    type=PartType.TOOL_CALL,
                    tool_name=name,
                    call_id=call_id,
                    arguments=compact_json(data) if data is not None else "",
                )
            ]
        if isinstance(kind, str) and kind.endswith("tool_result"):
            return self._result_parts(block)
        return [unknown_part(block)]

    def _document_part(self, source: dict[str, Any]) -> Part:
        media_type, size = _source_payload(source)
        kind = source.get("type")
        if kind == "text" and isinstance(source.get("data"), str):
            return Part(type=PartType.ATTACHMENT, text=source["data"], media_type=media_type)
        if kind == "content" and isinstance(source.get("content"), list | str):
            inner = source["content"]
            texts = (
                [inner]
                if isinstance(inner, str)
                else [
                    b["text"]
                    for b in inner
                    if isinstance(b, dict) and isinstance(b.get("text"), str)
                ]
            )
            return Part(type=PartType.ATTACHMENT, text="\n".join(texts), media_type=media_type)
        return Part(type=PartType.ATTACHMENT, media_type=media_type, data_bytes=size)

    def _result_parts(self, block: dict[str, Any]) -> list[Part]:
        call_id = as_str(block.get("tool_use_id"))
        tool_name = self.tool_name_of(call_id)
        is_error = block.get("is_error") is True

        def result(text: str) -> Part:
            return Part(
                type=PartType.TOOL_RESULT,
                text=text,
                tool_name=tool_name,
                call_id=call_id,
                is_error=is_error,
            )

        content = block.get("content")
        if content is None or isinstance(content, str):
            return [result(content or "")]
        if not isinstance(content, list):
            return [result(compact_json(content))]
        parts: list[Part] = []
        for item in content:
            if isinstance(item, str):
                parts.append(result(item))
            elif (
                isinstance(item, dict)
                and item.get("type") == "text"
                and isinstance(item.get("text"), str)
            ):
                parts.append(result(item["text"]))
            elif isinstance(item, dict) and item.get("type") == "image":
                media_type, size = _source_payload(item.get("source"))
                parts.append(
                    Part(
                        type=PartType.IMAGE, media_type=media_type, data_bytes=size, call_id=call_id
                    )
                )
            else:
                parts.append(result(compact_json(item)))
        if not any(p.type is PartType.TOOL_RESULT for p in parts):
            parts.insert(0, result(""))
        return parts


def sniff(head: Head) -> float:
    sample = sample_head(head)
    if sample.with_role == 0:
        if sample.conversation and sample.messages == 0:
            return 0.85 if sample.system_key else 0.55
        return 0.0
    if sample.with_role * 2 < sample.messages:
        return 0.1
    if sample.mini_swe_agent:
        return 0.1
    if sample.anthropic:
        return 0.6 if sample.openai else 0.85
    if sample.openai:
        return 0.1
    if sample.system_key and "system" not in sample.roles:
        return 0.85
    if "system" in sample.roles:
        return 0.4
    return 0.55


SPEC = register(
    FormatSpec(
        name="anthropic-messages",
        description="Anthropic Messages API (message arrays, request bodies, JSONL, API responses)",
        reads=(
            "*.json message arrays and request bodies, *.jsonl with one message, API response "
            "or request body per line"
        ),
        parser=AnthropicMessagesParser,
        sniff=sniff,
        default_profile="generic",
    )
)
