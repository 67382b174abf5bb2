"""Codex CLI's `codex exec --json` stdout: thread / turn / item events, one per line.

The thread / turn / item stream (``ctx_inspect.formats.item_events``, which BaseAgent's stdout
copies), written by Codex itself with compact JSON and more item types. Items are the context:
``reasoning`` (thinking, which opens a model response), ``agent_message``,
``command_execution``, ``mcp_tool_call``, ``file_change`` and ``web_search`` (tool calls and
their results); ``todo_list`` and unknown items are kept as log lines. Usage appears only on
``turn.completed`` and is summed over every request of the turn, so it is kept as session
information, never as a context size: for per-request figures read the rollout file instead
(the ``codex`` format). The stream cannot show context management either (Codex writes no item
for a compaction), so what it gives is the messages it shows, and the session says so
(``SessionInfo.extra["context_note"]``). A turn that fails because the model's context window
was exceeded (Codex's own message for ``context_window_exceeded``) is a refused request
(``RequestRejected``). Merged with the rollout of the same run (``--merge``), this stream adds
nothing the rollout does not hold: only its log lines and session facts are kept.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import orjson

from ctx_inspect.core.model import (
    Event,
    Message,
    MessageAdded,
    Part,
    PartType,
    RequestRejected,
    RequestSent,
    Role,
    SourceSpan,
)
from ctx_inspect.formats.base import compact_json, shown
from ctx_inspect.formats.item_events import ItemEventsParser, tool_result
from ctx_inspect.formats.registry import FormatSpec, Head, register

_TOOL_ITEMS = ("mcp_tool_call", "file_change", "web_search")
CONTEXT_NOTE = (
    "codex exec --json shows no compaction and only each turn's usage summed over its "
    "requests: the figures are the messages this stream shows, not Codex's context (the "
    "rollout file under $CODEX_HOME/sessions has it)"
)
# Codex's message for ``context_window_exceeded`` (the stream carries no error code)
_CONTEXT_EXCEEDED = "out of room in the model's context window"


class CodexExecParser(ItemEventsParser):
    format_name = "codex-exec"
    agent: ClassVar[str | None] = "codex"
    context_note: ClassVar[str] = CONTEXT_NOTE
    response_spans_results: ClassVar[bool] = False  # a reasoning item opens each response

    def __init__(self, source: int = 0, path: str = "") -> None:
        super().__init__(source, path)
        self._seen: set[str] = set()  # tool items whose call was already emitted
        self._refused = False  # this turn's context-window refusal was given

    def _event(self, kind: str, value: dict[str, Any], span: SourceSpan, raw: bytes) -> list[Event]:
        out = super()._event(kind, value, span, raw)
        if kind == "turn.started":
            self._refused = False
        elif kind in ("error", "turn.failed") and not self._refused:
            error = value.get("error")
            message = error.get("message") if isinstance(error, dict) else value.get("message")
            if isinstance(message, str) and _CONTEXT_EXCEEDED in message:
                self._refused = True
                self._after_text = False
                refusal = RequestRejected(reason=message, code="context_window_exceeded", span=span)
                out = [RequestSent(span=span), refusal, *out]
        return out

    def _item(self, kind: str, item: dict[str, Any], span: SourceSpan, raw: bytes) -> list[Event]:
        item_type = item.get("type")
        item_id = item.get("id") if isinstance(item.get("id"), str) else f"line-{span.line}"
        if item_type == "reasoning" and kind == "item.completed":
            text = item.get("text")
            out: list[Event] = [] if self._after_text else [RequestSent(span=span)]
            self._after_text = True  # the calls that follow belong to the same response
            message = Message(
                id=str(item_id),
                role=Role.ASSISTANT,
                parts=(Part(type=PartType.THINKING, text=text if isinstance(text, str) else ""),),
            )
            return [*out, MessageAdded(message=message, span=span)]
        if item_type in _TOOL_ITEMS:
            return self._tool_item(kind, str(item_type), str(item_id), item, span)
        return super()._item(kind, item, span, raw)

    def _tool_item(
        self, kind: str, item_type: str, item_id: str, item: dict[str, Any], span: SourceSpan
    ) -> list[Event]:
        found = item.get("tool") or item.get("server") or item_type
        name = found if isinstance(found, str) else shown(found, quoted=False)
        arguments = {
            k: v for k, v in item.items() if k not in ("id", "type", "status", "result", "error")
        }
        if kind == "item.started" or (kind == "item.completed" and item_id not in self._seen):
            self._seen.add(item_id)
            call: list[Event] = self._call(item_id, f"{name}({_arguments(arguments)})", span)
            if kind == "item.started":
                return call
        else:
            call = []
        result = item.get("result", item.get("error", item.get("changes")))
        text = result if isinstance(result, str) else compact_json(result)
        self._after_text = False
        return [*call, tool_result(item_id, text, str(name), item.get("status") == "failed", span)]


def _arguments(arguments: dict[str, Any]) -> str:
    """A tool item's fields as Python's ``json.dumps`` writes them; compact JSON when they
    nest too deeply for it."""
    try:
        return json.dumps(arguments)
    except RecursionError:
        return compact_json(arguments)


def sniff(head: Head) -> float:
    lines = head.lines[:200]
    if not lines:
        return 0.0
    try:
        first = orjson.loads(lines[0])
    except orjson.JSONDecodeError:
        return 0.0
    if not isinstance(first, dict) or first.get("type") != "thread.started":
        return 0.0
    if not lines[0].startswith('{"type":"thread.started"'):
        return 0.0  # BaseAgent writes the same event with `type` last and spaced separators
    return 0.9


SPEC = register(
    FormatSpec(
        name="codex-exec",
        description="Codex CLI `codex exec --json` stdout (thread / turn / item events)",
        reads="the saved stdout of `codex exec --json` (*.jsonl)",
        parser=CodexExecParser,
        sniff=sniff,
        default_profile="codex",
        covered_by=("codex",),
    )
)
