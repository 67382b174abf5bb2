"""The Go agent's token arithmetic (``pkg/compact/compact.go`` ``estimateMessageTokens``).

A message costs a quarter of its bytes, rounded up: Go's ``len`` counts UTF-8 bytes of the text
and thinking blocks, of each tool call's name and of its arguments as Go's ``json.Marshal``
writes them again; an image counts 4,800. A message the agent hides from the model costs 0.
"""

from __future__ import annotations

import json

from ctx_inspect.agents.goagent.profile import NAME
from ctx_inspect.core.estimate import CONTENT_PARTS, Rule, ceil_div, parse_arguments, utf8_len
from ctx_inspect.core.model import Message, PartType

IMAGE_CHARS = 4800  # compact.go: an image counts as 4800 chars (1200 tokens)

_TEXT_PARTS = CONTENT_PARTS | {PartType.THINKING}


def go_json(value: object) -> str:
    """Go ``json.Marshal`` of a decoded map: sorted keys, compact, HTML characters escaped."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    for raw, escaped in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(raw, escaped)
    return text


def message_tokens(message: Message) -> int:
    """The text and thinking blocks' bytes, each tool call's name and arguments (re-encoded
    as Go does), 4800 per image; a quarter of the sum, rounded up."""
    if not message.visible:
        return 0
    chars = 0
    for part in message.parts:  # one pass: the sum does not depend on the order
        kind = part.type
        if kind in _TEXT_PARTS:
            chars += utf8_len(part.text)
        elif kind is PartType.TOOL_CALL:
            chars += utf8_len(part.tool_name or "")
            parsed, value = parse_arguments(part.arguments)
            if parsed:
                chars += utf8_len(go_json(value))
            elif isinstance(value, str):
                chars += utf8_len(value)
        elif kind is PartType.IMAGE:
            chars += IMAGE_CHARS
    return ceil_div(chars, 4)


def text_tokens(text: str) -> int:
    """A bare text: a quarter of its UTF-8 bytes, rounded up."""
    return ceil_div(utf8_len(text), 4)


RULE = Rule(NAME, lambda m, c: message_tokens(m), lambda t, c: text_tokens(t))
