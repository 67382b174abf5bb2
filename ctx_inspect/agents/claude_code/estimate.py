"""Claude Code's own token estimate: ``roughTokenCountEstimation``, ``Math.round(length / 4)``
per content block, in UTF-16 units.

It decides what Claude Code 2.1 compares with its threshold (the latest usage plus this
estimate of what came since), so replay computes it, not our count. The session reader computes
the same figure from a line's values when it reads without bodies (``reader_fast``).
"""

from __future__ import annotations

from ctx_inspect.core.estimate import Rule, js_len
from ctx_inspect.core.model import Part, PartType

MEDIA_TOKENS = 2_000  # roughTokenCountEstimationForBlock: an image or a document


def js_round_quarter(text: str) -> int:
    """``Math.round(text.length / 4)``: UTF-16 units, halves rounded up."""
    size = len(text) if text.isascii() else js_len(text)
    return (size + 2) // 4


def claude_code_part(part: Part) -> int:
    """One content block as Claude Code estimates it: its text (a thinking block's thinking, a
    tool result's content), a tool call's name followed by its input as JSON, 2,000 for an
    image or a document, the JSON of any other block."""
    if part.type is PartType.TOOL_CALL:
        return js_round_quarter((part.tool_name or "") + (part.arguments or "{}"))
    if part.type is PartType.IMAGE or (part.type is PartType.ATTACHMENT and part.media_type):
        return MEDIA_TOKENS
    if part.type is PartType.THINKING and not part.text and part.data_bytes:
        return (part.data_bytes + 2) // 4  # redacted thinking: its data
    return js_round_quarter(part.text)


CLAUDE_CODE = Rule(
    "claude-code",
    lambda m, c: sum(claude_code_part(p) for p in m.parts),
    lambda t, c: js_round_quarter(t),
)
