"""Codex CLI's own token arithmetic (codex-rs ``core/src/context_manager/history.rs``
``estimate_item_token_count``): an item's bytes as Codex serializes it, over 4, rounded up.

The base instructions count as their text; encrypted reasoning counts ``3/4`` of its length less
650 bytes; an inline image counts 7,373 bytes whatever its size. A bare text counts its UTF-8
bytes over 4, rounded up.
"""

from __future__ import annotations

import json

from ctx_inspect.core.estimate import Rule, ceil_div, utf8_len
from ctx_inspect.core.model import Message, PartType, Role

REASONING_DISCOUNT = 650  # estimate_reasoning_length: 3/4 of the encrypted bytes - 650
IMAGE_BYTES = 7_373  # RESIZED_IMAGE_BYTES_ESTIMATE: an inline image, whatever its size
# each item Codex keeps carries its turn id: ,"internal_chat_message_metadata_passthrough":{...}
_ITEM_METADATA_BYTES = len(',"internal_chat_message_metadata_passthrough":{"turn_id":""}') + 36


def json_bytes(value: object) -> int:
    """UTF-8 bytes of ``value`` as serde_json writes it (compact, non-ASCII as is)."""
    return utf8_len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def item_bytes(message: Message) -> int:
    """The bytes Codex counts for the response item ``message`` was read from: the item as
    Codex serializes it, rebuilt from the message (ids and the per-item metadata at their usual
    size), with an inline image at a fixed size and encrypted reasoning discounted."""
    if message.role is Role.SYSTEM:  # the base instructions: counted as text
        return utf8_len(message.text)
    images = sum(1 for p in message.parts if p.type is PartType.IMAGE)
    item: dict[str, object]
    first = message.parts[0] if message.parts else None
    if first is not None and first.type is PartType.THINKING:
        if first.data_bytes:
            return max(0, first.data_bytes * 3 // 4 - REASONING_DISCOUNT)
        item = {
            "type": "reasoning",
            "id": message.id,
            "summary": [{"type": "summary_text", "text": first.text}] if first.text else [],
            "content": None,
        }
    elif first is not None and first.type is PartType.TOOL_CALL:
        item = {
            "type": "function_call",
            "status": "completed",
            "id": message.id,
            "name": first.tool_name or "",
            "arguments": first.arguments or "",
            "call_id": first.call_id or "",
        }
    elif first is not None and first.type is PartType.TOOL_RESULT:
        item = {
            "type": "function_call_output",
            "id": message.id,
            "call_id": first.call_id or "",
            "output": "\n".join(p.text for p in message.parts if p.text),
        }
    else:
        output = message.role is Role.ASSISTANT
        kind = "output_text" if output else "input_text"
        content: list[dict[str, object]] = [
            {"type": kind, "text": p.text, **({"annotations": []} if output else {})}
            for p in message.parts
            if p.type is not PartType.IMAGE
        ]
        item = {"type": "message", "id": message.id, "role": message.role.value}
        if output:
            item = {"type": "message", "status": "completed", "id": message.id, "role": "assistant"}
        item["content"] = content
    return json_bytes(item) + _ITEM_METADATA_BYTES + images * IMAGE_BYTES


RULE = Rule(
    "codex",
    lambda m, c: ceil_div(item_bytes(m), 4),
    lambda t, c: ceil_div(utf8_len(t), 4),
)
