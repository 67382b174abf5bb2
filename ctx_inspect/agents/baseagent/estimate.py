"""BaseAgent's own token arithmetic: ``estimate_message_tokens`` of ``src/core/compaction.py``.

Each content part (text, tool result, attachment) counts ``floor(len / 4)`` in Python code
points, each part floored on its own; an image counts 1,000; each tool call counts ``floor(len /
4)`` of its name and of its arguments; a message adds 4 for its role. A bare text counts
``floor(len / 4)``.
"""

from __future__ import annotations

from ctx_inspect.core.estimate import Rule, content_texts, tool_calls
from ctx_inspect.core.model import Message

IMAGE_TOKENS = 1000  # an image_url part counts ~1000 tokens
MESSAGE_OVERHEAD = 4  # role overhead per message


def message_tokens(message: Message) -> int:
    tokens = sum(len(text) // 4 for text in content_texts(message))
    tokens += IMAGE_TOKENS * message.image_count
    for call in tool_calls(message):
        tokens += len(call.tool_name or "") // 4 + len(call.arguments or "") // 4
    return tokens + MESSAGE_OVERHEAD


RULE = Rule("baseagent", lambda m, c: message_tokens(m), lambda t, c: len(t) // 4)
