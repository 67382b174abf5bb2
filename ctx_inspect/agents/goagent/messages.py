"""Messages as the Go agent reads and writes them: their text with Go's semantics (a rune is a
Python code point), which of them are tool results, and the texts it writes into its list (the
summaries a compaction leaves, the tool digest, the per-turn tool summaries).

Our ``Message`` has no ``userVisible`` flag: summaries and digests the agent marks
``userVisible=false`` are added as ordinary visible messages of kind ``tool_summary``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ctx_inspect.core.model import Message, MessageKind, Part, PartType, Role
from ctx_inspect.core.policies.base import (
    ContextItem,
    ContextList,
    Estimate,
    ItemChange,
    ItemStatus,
)

# compact.go's rebuilt context: the in-memory compactor's summary message
SUMMARY_PREFIX = "[Previous conversation summary]\n\n"
# session/entries.go: the summary message a compaction entry stands for
SESSION_SUMMARY_PREFIX = (
    "The conversation history before this point was compacted into the following summary:"
    "\n\n<summary>\n"
)
SESSION_SUMMARY_SUFFIX = "\n</summary>"
# session/entries.go: the summary message a branch_summary entry stands for
BRANCH_SUMMARY_PREFIX = (
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
)
DIGEST_HEADER = "[Compaction tool digest]"
TOOL_SUMMARY_HEADER = "[Tool output summary]"
DIGEST_LINE_RUNES = 200  # compactionToolDigestLine: trimRunes(text, 200)
TRUNCATED_MIDDLE = "\n... (truncated) ...\n"  # trimTextWithTail
EMPTY_OUTPUT = "(empty output)"

OUTPUT_PARTS = (PartType.TEXT, PartType.TOOL_RESULT)
_TOOL = Role.TOOL
_TOOL_RESULT = MessageKind.TOOL_RESULT


def fmt(n: int) -> str:
    """A count as the reasons print it (thousands separated)."""
    return f"{n:,}"


def trim_runes(text: str, limit: int) -> str:
    """``trimRunes``: the first ``limit`` runes."""
    if limit <= 0 or len(text) <= limit:
        return text
    return text[:limit]


def trim_with_tail(text: str, limit: int) -> str:
    """``trimTextWithTail``: two thirds from the head, the rest from the tail."""
    if limit <= 0 or len(text) <= limit:
        return text
    head = max(1, limit * 2 // 3)
    tail = max(1, limit - limit * 2 // 3)
    return text[:head] + TRUNCATED_MIDDLE + text[len(text) - tail :]


def go_text(message: Message) -> str:
    """``extractText``: the text blocks concatenated, no separator."""
    parts = message.parts
    if len(parts) == 1:  # most tool results: one block, nothing to join
        part = parts[0]
        if part.type in OUTPUT_PARTS and part.text:
            return part.text
    joined = "".join(p.text for p in parts if p.type in OUTPUT_PARTS and p.text)
    return joined or message.text


def output_of(message: Message) -> str:
    """``extractTextFromBlocks``: the text blocks of a tool result, concatenated."""
    parts = message.parts
    if len(parts) == 1:  # most tool results: one block, nothing to join
        part = parts[0]
        return part.text if part.type in OUTPUT_PARTS else ""
    return "".join(p.text for p in parts if p.type in OUTPUT_PARTS)


def _go_quote(text: str) -> str:
    """Go's ``%q`` for ordinary tool names."""
    out = ['"']
    for ch in text:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def is_tool_result(message: Message) -> bool:
    return message.role is _TOOL or message.kind is _TOOL_RESULT


def _is_error(message: Message) -> bool:
    return any(p.is_error for p in message.parts)


def _call_id(message: Message) -> str:
    for part in message.parts:
        if part.call_id:
            return part.call_id
    return ""


def _status(message: Message) -> str:
    return "error" if _is_error(message) else "ok"


# ------------------------------------------------------------------------------------------
# Messages the agent writes


def digest_line(message: Message) -> str:
    """``compactionToolDigestLine``: ``- <tool> (<ok|error>): <text>``."""
    name = (message.tool_name or "").strip() or "unknown"
    text = go_text(message).strip() or EMPTY_OUTPUT
    text = trim_runes(text.replace("\n", " "), DIGEST_LINE_RUNES)
    return f"- {name} ({_status(message)}): {text}"


def heuristic_tool_summary(message: Message, runes: int) -> str:
    """``fallbackToolSummary``: the tool's name, status and a head-and-tail excerpt."""
    text = trim_with_tail(go_text(message).strip() or EMPTY_OUTPUT, runes)
    name = _go_quote((message.tool_name or "").strip())
    return f"Tool {name} finished with status {_status(message)}. Output excerpt:\n{text}"


def tool_summary_text(message: Message, summary: str) -> str:
    return (
        f"{TOOL_SUMMARY_HEADER}\nTool: {(message.tool_name or '').strip()}\n"
        f"Call ID: {_call_id(message).strip()}\nStatus: {_status(message)}\n{summary.strip()}"
    )


def user_message(message_id: str, text: str, kind: MessageKind) -> Message:
    """A user message of one text block (a digest, a tool summary)."""
    return Message(
        id=message_id, role=Role.USER, kind=kind, parts=(Part(type=PartType.TEXT, text=text),)
    )


def archive(item: ContextItem, estimate: Estimate) -> tuple[ContextItem, ItemChange]:
    """A tool result hidden from the model and kept for the user, and the change it is."""
    message = item.message.model_copy(update={"visible": False, "kind": MessageKind.ARCHIVED})
    tokens = estimate(message)
    change = ItemChange(
        item.id,
        ItemStatus.ARCHIVED,
        item.tokens,
        tokens,
        "hidden from the model, kept for the user",
    )
    return ContextItem(message, tokens, item.index), change


_TOOLS_FROM = "goagent:visible-tool-results-from"  # a ContextList mark: none before it


def visible_tool_results(items: Sequence[ContextItem]) -> list[int]:
    """The positions of the visible tool results. On a context list the part before the first
    of them is marked (archived ones stay in the list): it is not searched again."""
    start = 0
    if isinstance(items, ContextList):
        mark = items.marked(_TOOLS_FROM)
        start = mark[0] if mark is not None else 0
    found = [
        i
        for i in range(start, len(items))
        if items[i].message.visible and is_tool_result(items[i].message)
    ]
    if isinstance(items, ContextList):
        items.mark(_TOOLS_FROM, found[0] if found else len(items))
    return found
