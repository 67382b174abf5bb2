"""Codex's response items (the Responses API items of a rollout) as messages.

``message`` (user / developer / system input, assistant output; user messages that are injected
context such as ``<environment_context>`` or ``# AGENTS.md instructions`` are ATTACHMENT, one
Codex marks as a compaction summary is SUMMARY), ``reasoning`` (THINKING), ``function_call`` /
``custom_tool_call`` / ``local_shell_call`` / ``web_search_call`` / ``tool_search_call`` /
``image_generation_call`` (TOOL_CALL), their ``*_output`` items (TOOL_RESULT),
``ghost_snapshot`` (META, not sent), ``compaction`` (server-side compaction: an opaque SUMMARY),
``agent_message`` (inter-agent input). Unknown item types are kept as messages (``*_call`` as
calls, ``*_output`` as results, else input). Message ids are the items' own ids; items without
one get ``L<line>`` (``L<line>.<k>`` inside a compaction's replacement history), and an id met
again on a later line gets ``@L<line>`` added.
"""

from __future__ import annotations

import re
from typing import Any

from ctx_inspect.core.model import Message, MessageKind, Part, PartType, Role
from ctx_inspect.formats.chat_common import (
    as_str,
    compact_json,
    data_url,
    text_part,
    unknown_part,
)

ROLES: dict[str, Role] = {
    "user": Role.USER,
    "assistant": Role.ASSISTANT,
    "developer": Role.DEVELOPER,
    "system": Role.SYSTEM,
}
TEXT_TYPES = frozenset(
    {"input_text", "output_text", "text", "summary_text", "reasoning_text", "refusal"}
)
CALL_NAMES = {
    "local_shell_call": "local_shell",
    "web_search_call": "web_search",
    "tool_search_call": "tool_search",
    "image_generation_call": "image_generation",
}
KNOWN_ITEM_TYPES = frozenset(
    {
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "ghost_snapshot",
        "compaction",
        "compaction_summary",
        "agent_message",
        *CALL_NAMES,
        "local_shell_call_output",
        "tool_search_output",
    }
)
INJECTED = re.compile(r"\s*(<[A-Za-z_][\w -]*>|# AGENTS\.md instructions)")
SUMMARY_KIND = "compaction.summary"


class ResponseItems:
    """The items of one rollout as messages: session-unique ids, and the tool name of each call
    for its output. A re-read of a line shares them, so it gives the same ids and names."""

    def __init__(self) -> None:
        self.tool_names: dict[str, str] = {}  # call id -> tool name
        self.id_owner: dict[str, tuple[int, int]] = {}  # item id -> (line, index) that has it

    def convert(
        self, p: dict[str, Any], line: int, index: int, ts: str | None, model: str | None
    ) -> tuple[Message, bool]:
        """One response item as a message, and whether it is model output."""
        kind = p.get("type")
        kind = kind if isinstance(kind, str) else "message"
        msg_id = self.claim_id(as_str(p.get("id")), line, index, "")
        role = Role.ASSISTANT
        msg_kind = MessageKind.MESSAGE
        parts: list[Part]
        visible = True
        output = False
        name: str | None = None
        if kind == "message":
            role_name = p.get("role")
            role = ROLES.get(role_name, Role.USER) if isinstance(role_name, str) else Role.USER
            parts = _content_parts(p.get("content"))
            output = role is Role.ASSISTANT
            if role is Role.USER and _injected(parts):
                msg_kind = MessageKind.ATTACHMENT
            if role is Role.USER and _has_kind(p, SUMMARY_KIND):
                msg_kind = MessageKind.SUMMARY
        elif kind == "reasoning":
            parts = _reasoning_parts(p)
            output = True
        elif (
            kind in ("function_call", "custom_tool_call")
            or kind in CALL_NAMES
            or (kind.endswith("_call") and kind not in KNOWN_ITEM_TYPES)
        ):
            parts = [self._call_part(kind, p)]
            msg_kind = MessageKind.TOOL_CALL
            output = True
        elif kind.endswith("_output"):
            role = Role.TOOL
            msg_kind = MessageKind.TOOL_RESULT
            parts = self._result_parts(p)
        elif kind == "ghost_snapshot":
            role = Role.USER
            msg_kind = MessageKind.META
            visible = False
            parts = [Part(type=PartType.ATTACHMENT, text=compact_json(p.get("ghost_commit")))]
        elif kind in ("compaction", "compaction_summary"):
            role = Role.ASSISTANT
            msg_kind = MessageKind.SUMMARY
            parts = [_opaque(p)]
        elif kind == "agent_message":
            role = Role.USER
            parts = _content_parts(p.get("content"))
            name = as_str(p.get("author"))
        else:  # an item type this reader does not know: kept whole, as input
            role_name = p.get("role")
            role = ROLES.get(role_name, Role.USER) if isinstance(role_name, str) else Role.USER
            msg_kind = MessageKind.ATTACHMENT
            parts = [unknown_part(p)]
        message = Message(
            id=msg_id,
            role=role,
            kind=msg_kind,
            parts=tuple(parts),
            visible=visible,
            timestamp=ts,
            model=model if output else None,
            name=name,
        )
        return message, output

    def _call_part(self, kind: str, p: dict[str, Any]) -> Part:
        call_id = as_str(p.get("call_id")) or as_str(p.get("id"))
        name = as_str(p.get("name")) or CALL_NAMES.get(kind) or kind.removesuffix("_call")
        if call_id:
            self.tool_names.setdefault(call_id, name)
        if kind == "function_call":
            args = p.get("arguments")
        elif kind == "custom_tool_call":
            args = p.get("input")
        elif kind in ("web_search_call", "local_shell_call"):
            args = p.get("action")
        elif kind == "image_generation_call":
            args = p.get("revised_prompt")
        else:
            args = p.get("arguments", p.get("action", p.get("input")))
        arguments = (
            args if isinstance(args, str) else compact_json(args) if args is not None else ""
        )
        data_bytes = 0
        result = p.get("result")
        if kind == "image_generation_call" and isinstance(result, str):
            data_bytes = len(result)
        return Part(
            type=PartType.TOOL_CALL,
            tool_name=name,
            call_id=call_id,
            arguments=arguments,
            data_bytes=data_bytes,
        )

    def _result_parts(self, p: dict[str, Any]) -> list[Part]:
        call_id = as_str(p.get("call_id"))
        tool_name = self.tool_names.get(call_id) if call_id else None
        output = p.get("output")
        is_error = False
        if "output" not in p and "tools" in p:  # tool_search_output
            output = compact_json(p.get("tools"))
        if isinstance(output, dict):
            is_error = output.get("success") is False
            output = output.get("content", output.get("body", compact_json(output)))
        texts: list[str] = []
        extras: list[Part] = []
        if isinstance(output, str):
            texts.append(output)
        elif isinstance(output, list):
            for part in _content_parts(output):
                if part.type is PartType.TEXT:
                    texts.append(part.text)
                else:
                    extras.append(part)
        elif output is not None:
            texts.append(compact_json(output))
        result = Part(
            type=PartType.TOOL_RESULT,
            text="\n".join(texts),
            tool_name=tool_name,
            call_id=call_id,
            is_error=is_error,
        )
        return [result, *extras]

    def claim_id(self, own: str | None, line: int, index: int, label: str) -> str:
        """A session-unique id: the item's own when it is first met here, else line-based."""
        if own is None:
            base = f"L{line}" if index == 0 else f"L{line}.{index}"
            return f"{base}.{label}" if label else base
        where = (line, index)
        owner = self.id_owner.setdefault(own, where)
        if owner == where:
            return own
        return f"{own}@L{line}" if index == 0 else f"{own}@L{line}.{index}"


def _content_parts(content: Any) -> list[Part]:
    if isinstance(content, str):
        return [text_part(content)] if content else []
    if not isinstance(content, list):
        return [] if content is None else [unknown_part(content)]
    parts: list[Part] = []
    for item in content:
        if item is None:
            continue
        if isinstance(item, str):
            parts.append(text_part(item))
            continue
        if not isinstance(item, dict):
            parts.append(unknown_part(item))
            continue
        kind = as_str(item.get("type"))
        text = item.get("text", item.get("refusal"))
        if kind in TEXT_TYPES and isinstance(text, str):
            parts.append(text_part(text))
        elif kind in ("input_image", "image_url", "output_image"):
            url = item.get("image_url")
            if isinstance(url, dict):
                url = url.get("url")
            media, size = data_url(url) if isinstance(url, str) else (None, 0)
            parts.append(Part(type=PartType.IMAGE, media_type=media, data_bytes=size))
        elif kind == "encrypted_content":
            parts.append(_opaque(item))
        else:
            parts.append(unknown_part(item))
    return parts


def _reasoning_parts(p: dict[str, Any]) -> list[Part]:
    texts: list[str] = []
    for key in ("summary", "content"):
        value = p.get(key)
        if isinstance(value, list):
            texts.extend(
                item["text"]
                for item in value
                if isinstance(item, dict) and isinstance(item.get("text"), str)
            )
        elif isinstance(value, str) and value:
            texts.append(value)
    encrypted = p.get("encrypted_content")
    size = len(encrypted) if isinstance(encrypted, str) else 0
    return [Part(type=PartType.THINKING, text="\n".join(texts), data_bytes=size)]


def _opaque(p: dict[str, Any]) -> Part:
    """Encrypted content: only its size is known."""
    encrypted = p.get("encrypted_content")
    size = len(encrypted) if isinstance(encrypted, str) else 0
    return Part(type=PartType.ATTACHMENT, data_bytes=size)


def _injected(parts: list[Part]) -> bool:
    first = next((p.text for p in parts if p.type is PartType.TEXT), None)
    return first is not None and INJECTED.match(first) is not None


def _has_kind(p: dict[str, Any], wanted: str) -> bool:
    meta = p.get("internal_chat_message_metadata_passthrough")
    kinds = meta.get("content_item_kinds") if isinstance(meta, dict) else None
    return isinstance(kinds, list) and wanted in kinds
