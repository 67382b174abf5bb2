"""netdata ai-agent's token arithmetic (``src/tokenizer-registry.ts``, ``src/context-guard.ts``).

A message costs the larger of two figures: the tokenizer's count of its serialised text
(``role:<role>``, the content, the tool calls' JSON, ``toolCallId:<id>``, one line each, empty
ones left out) plus 4 and 2 per tool call, and a quarter of the UTF-8 bytes of the message's JSON,
rounded up. Over a list the guard takes the larger of the summed counts and a quarter of the
summed bytes, which can be a few tokens below the sum of the per-message maxima. The
"approximate" tokenizer (the default) is ``max(1, ceil(length / 4))`` in UTF-16 units, 0 for an
empty text.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence

from ctx_inspect.core.agents import Counter
from ctx_inspect.core.estimate import (
    Rule,
    ceil_div,
    content_texts,
    js_len,
    parse_arguments,
    tool_calls,
    utf8_len,
)
from ctx_inspect.core.model import Message, Part, PartType, Role

MESSAGE_OVERHEAD = 4  # tokenizer-registry.ts MESSAGE_OVERHEAD_TOKENS
TOOL_CALL_OVERHEAD = 2  # tokenizer-registry.ts TOOL_CALL_OVERHEAD_TOKENS
SCHEMA_FACTOR = 2.09  # context-guard.ts estimateToolSchemaTokens


def _count(text: str, counter: Counter | None) -> int:
    if not text:
        return 0
    if counter is not None:
        return counter.count(text)
    return max(1, ceil_div(js_len(text), 4))  # the "approximate" tokenizer


def _tool_call_id(message: Message) -> str | None:
    for part in message.parts:
        if part.type is PartType.TOOL_RESULT and part.call_id:
            return part.call_id
    return None


def message_tool_calls(message: Message) -> list[dict[str, object]]:
    """The message's tool calls as ai-agent keeps them: ``{id, name, parameters}``."""
    calls: list[dict[str, object]] = []
    for part in tool_calls(message):
        call: dict[str, object] = {}
        if part.call_id is not None:
            call["id"] = part.call_id
        call["name"] = part.tool_name or ""
        parsed, value = parse_arguments(part.arguments)
        call["parameters"] = value if parsed or value is not None else {}
        calls.append(call)
    return calls


def message_parts(message: Message, counter: Counter | None) -> tuple[int, int]:
    """(tokenizer estimate, UTF-8 bytes of the message's JSON) for one message.

    We do not have ai-agent's ``ConversationMessage`` object, so its JSON is rebuilt as
    ``{"role","content","toolCalls"?,"toolCallId"?}`` with tool calls as ``{id,name,parameters}``.
    """
    content = "\n".join(content_texts(message))
    calls = message_tool_calls(message)
    call_id = _tool_call_id(message)
    calls_json = js_json(calls) if calls else ""

    lines = [f"role:{message.role.value}"]
    if content:
        lines.append(content)
    if calls:
        lines.append(calls_json)
    if call_id:
        lines.append(f"toolCallId:{call_id}")
    tokens = _count("\n".join(lines), counter) + MESSAGE_OVERHEAD + TOOL_CALL_OVERHEAD * len(calls)

    # the UTF-8 bytes of ``js_json({"role", "content", "toolCalls"?, "toolCallId"?})``,
    # counted without writing the JSON (the content is most of it)
    size = _JSON_OBJECT_BYTES + json_string_bytes(message.role.value)
    size += _JSON_CONTENT_KEY_BYTES + json_string_bytes(content)
    if calls:
        size += _JSON_CALLS_KEY_BYTES + utf8_len(calls_json)
    if call_id:
        size += _JSON_CALL_ID_KEY_BYTES + json_string_bytes(call_id)
    return tokens, size


def js_json(value: object) -> str:
    """``JSON.stringify``: compact, non-ASCII kept as is."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# ``js_json`` of ``{"role": r, "content": c, ...}``: the braces and '"role":', then ',"content":'
# and the other keys, each with its comma
_JSON_OBJECT_BYTES = len('{"role":}')
_JSON_CONTENT_KEY_BYTES = len(',"content":')
_JSON_CALLS_KEY_BYTES = len(',"toolCalls":')
_JSON_CALL_ID_KEY_BYTES = len(',"toolCallId":')
# the characters ``js_json`` escapes in a string: every one below U+0020, '"' and '\\'; those
# below take six bytes (``\\u00XX``) but for the five with a short escape (``\\n``...), which
# take two, as '"' and '\\' do
_JSON_ESCAPED = bytes(range(0x20)) + b'"\\'
_JSON_LONG_ESCAPED = bytes(c for c in range(0x20) if c not in b"\b\t\n\f\r")


def json_string_bytes(text: str) -> int:
    """``utf8_len(js_json(text))`` for a string: its UTF-8 bytes, the quotes, and a byte more
    per escaped character (five more for a ``\\u00XX`` escape). Escaped characters are ASCII,
    so they are counted in the UTF-8 bytes, where deleting them is fast."""
    data = text.encode("utf-8", "surrogatepass")
    size = len(data)
    escaped = size - len(data.translate(None, _JSON_ESCAPED))
    if escaped:
        escaped += 4 * (size - len(data.translate(None, _JSON_LONG_ESCAPED)))
    return size + 2 + escaped


def _message(message: Message, counter: Counter | None) -> int:
    tokens, size = message_parts(message, counter)
    return max(tokens, ceil_div(size, 4))


def _text(text: str, counter: Counter | None) -> int:
    # context-guard.ts countTokens: max(tokenizer, ceil(length / 4))
    return max(_count(text, counter), ceil_div(js_len(text), 4))


def _list(messages: Iterable[Message], counter: Counter | None) -> int:
    tokens = 0
    size = 0
    for message in messages:
        t, b = message_parts(message, counter)
        tokens += t
        size += b
    return max(tokens, ceil_div(size, 4))


AIAGENT = Rule("aiagent", _message, _text, True, _list)


def tool_schema_tokens(
    schema_json_texts: Sequence[str],
    counter: Counter | None = None,
    factor: float = SCHEMA_FACTOR,
) -> int:
    """ai-agent's tool-schema estimate: each tool's JSON as a system message, estimated like a
    conversation, then scaled by 2.09 and rounded up."""
    if not schema_json_texts:
        return 0
    messages = [
        Message(id=f"schema-{i}", role=Role.SYSTEM, parts=(Part(type=PartType.TEXT, text=text),))
        for i, text in enumerate(schema_json_texts)
    ]
    return math.ceil(_list(messages, counter) * factor)
