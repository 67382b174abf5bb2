"""Seed 001's ``estimate_tokens``: ``len // 4 + 1`` of each non-empty content part (text, tool
result, attachment); tool calls, thinking and images are not counted."""

from __future__ import annotations

from ctx_inspect.core.estimate import Rule, content_texts


def text_tokens(text: str) -> int:
    return len(text) // 4 + 1 if text else 0


RULE = Rule(
    "guide",
    lambda m, c: sum(text_tokens(t) for t in content_texts(m)),
    lambda t, c: text_tokens(t),
)
