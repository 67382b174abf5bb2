"""OpenCode's token arithmetic: ``Token.estimate`` is ``Math.max(0, Math.round(length / 4))``.

A text's length is JavaScript's (UTF-16 code units) and ``Math.round`` rounds halves up. A
message is the sum over its parts: texts, thinking and tool results by their text, a tool call
by its arguments; images are not counted.
"""

from __future__ import annotations

from ctx_inspect.core.estimate import Rule, js_len
from ctx_inspect.core.model import Message, PartType


def opencode_text(text: str) -> int:
    """``Token.estimate`` of a text."""
    # Math.round(n / 4) for n >= 0 is floor(n / 4 + 1/2) = (n + 2) // 4: halves round up.
    return (js_len(text) + 2) // 4


def _payloads(message: Message) -> list[str]:
    texts: list[str] = []
    for part in message.parts:
        if part.type is PartType.TOOL_CALL:
            texts.append(part.arguments or "")
        elif part.type is not PartType.IMAGE:
            texts.append(part.text)
    return texts


ESTIMATOR = Rule(
    "opencode",
    lambda m, c: sum(opencode_text(t) for t in _payloads(m)),
    lambda t, c: opencode_text(t),
)
