"""BaseAgent's stdout, ``baseagent-events``: the thread / turn / item JSONL it copies from Codex.

Read by the generic ``ctx_inspect.formats.item_events`` reader (also the base of Codex's own
``codex-exec``), with BaseAgent's particulars: Python's ``json.dumps`` writes each line (``", "``
separators, ``type`` last); a ``command_execution`` item's command is ``name({python dict
repr})``, as BaseAgent's history holds it, which gives the tool name and its arguments; its
``aggregated_output`` is already middle-out truncated. BaseAgent prints nothing between two
responses and a response's text before its calls, so a tool call that follows a tool result
belongs to the response that is open (``response_spans_results``): a count of requests from this
stream alone is a lower bound (the stderr log's ``Iteration`` lines give the true count).
LiteLLM prints banners, some ANSI-coloured, into this stream: they are foreign log lines. The
stream cannot show context management, and ``thread.started`` says so (``CONTEXT_NOTE``).
"""

from __future__ import annotations

import re
from typing import ClassVar

from ctx_inspect.formats.item_events import ItemEventsParser
from ctx_inspect.formats.registry import Head

CONTEXT_NOTE = (
    "BaseAgent's stdout shows no context management (its prunes and compactions are logged on "
    "stderr only) and only the run's usage summed over every request: the figures are the "
    "messages this stream shows, not BaseAgent's context, and a text with the tool calls after "
    "it counts as one request (a lower bound: the stderr log's iterations give the true count). "
    "Merge it with the stderr log (--merge) for BaseAgent's own figures"
)


class BaseAgentEventsParser(ItemEventsParser):
    """BaseAgent's stdout: Codex-like JSONL events written by Python's ``json.dumps``."""

    format_name = "baseagent-events"
    agent: ClassVar[str | None] = "baseagent"
    context_note: ClassVar[str] = CONTEXT_NOTE
    response_spans_results: ClassVar[bool] = True


# ------------------------------------------------------------------------------------------
# Sniffing

_SNIFF_EVENT = re.compile(
    r'^\{"(?:[^"\\]|\\.)*": .*"type": "(?:thread\.started|turn\.started|turn\.completed|'
    r'turn\.failed|item\.started|item\.completed|item\.updated)"\}\s*$'
)
_SNIFF_TURN_STARTED = re.compile(r'^\{"type": "turn\.started"\}\s*$')
_SNIFF_SESSION = re.compile(r'"thread_id": "sess_\d+"')


def sniff_events(head: Head) -> float:
    lines = head.lines[:500]
    hits = 0
    session = False
    for index, line in enumerate(lines):
        if _SNIFF_EVENT.match(line) or _SNIFF_TURN_STARTED.match(line):
            hits += 1
            session = session or bool(_SNIFF_SESSION.search(line))
        elif line.lstrip().startswith("{") and not (
            index == len(lines) - 1 and not line.rstrip().endswith("}")  # a cut last line
        ):
            return 0.0  # JSON of another shape: not this stream
    if not hits:
        return 0.0
    return 0.95 if session else 0.85
