"""Fifth's token arithmetic (``examples/context-manager/main.fs`` estimate-tokens, count-tokens).

A text costs a quarter of its UTF-8 bytes, at least 1 (``estimate-tokens``); above 1,000 bytes,
with a real tokenizer, ``count-tokens`` asks tiktoken instead, through
``echo '<text>' | python3 ...``, so the count is that of the text plus the newline echo appends.
A message costs its text alone: Fifth adds nothing per message.
"""

from __future__ import annotations

from ctx_inspect.core.agents import Counter
from ctx_inspect.core.estimate import Rule, utf8_len

EXACT_MIN_BYTES = 1000  # main.fs count-tokens: tiktoken only above 1000 chars


def _text(text: str, counter: Counter | None) -> int:
    size = utf8_len(text)
    if counter is not None and size > EXACT_MIN_BYTES:
        # `echo '<text>' | python3 ... tiktoken`: echo appends a newline.
        return counter.count(text + "\n")
    return max(1, size // 4)


FIFTH = Rule("fifth", lambda m, c: _text(m.text, c), _text, uses_counter=True)
