"""What ai-agent's three outputs share: the names they use and the values read from them.

A value comes from an inspected object (the debug stream's blocks) or from a logfmt record
(text): ``int_value`` takes an integer, an integral float or the text of an integer, and
nothing else (not a boolean).
"""

from __future__ import annotations

from typing import Any

from ctx_inspect.agents.aiagent.guard import Trigger

AGENT = "ai-agent"  # the agent's name in the session's information
MAIN = "main"  # the thread of the run's own agent (a sub-agent's records go to their own)
TURN_PREFLIGHT = Trigger.TURN_PREFLIGHT.value  # where the guard decides: before a request
TOOL_PREFLIGHT = Trigger.TOOL_PREFLIGHT.value  # or before a tool output enters


def int_value(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return None
    return None


def str_value(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def number_or_text(value: str) -> int | float | str:
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return float(value)
    except ValueError:
        return value
