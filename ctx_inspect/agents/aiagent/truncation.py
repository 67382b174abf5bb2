"""ai-agent's size cap on a tool output (``src/truncation.ts``).

The tools orchestrator cuts an output over ``toolResponseMaxBytes`` before the guard reserves
its tokens (when tool-output storage is off; with storage on the output becomes a stored
handle). The cut keeps the first and last halves around the marker
``[···TRUNCATED N bytes···]``; a payload under 512 bytes, or a limit too small for the marker,
keeps a plain prefix.
"""

from __future__ import annotations

from ctx_inspect.core.estimate import utf8_len

MARKER_OVERHEAD = 50  # truncation.ts MARKER_OVERHEAD: worst-case marker bytes
MIN_PAYLOAD_BYTES = 512  # truncation.ts: smaller payloads are cut, not split
_DOT = "\u00b7"


def _marker(omitted: int) -> str:
    return f"[{_DOT * 3}TRUNCATED {omitted} bytes{_DOT * 3}]"


def _prefix_bytes(data: bytes, limit: int) -> str:
    return data[:limit].decode("utf-8", "ignore")


def truncate_to_bytes(text: str, limit: int) -> str:
    """The size cap: ``text`` cut to at most ``limit`` UTF-8 bytes.

    Payloads of 512 bytes and more keep their first and last halves around a marker naming
    the omitted bytes; smaller ones (or a limit too small for the marker) keep a plain prefix,
    the orchestrator's fallback. An empty result becomes one space, as the agent sends it.
    """
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    result: str | None = None
    budget = limit - MARKER_OVERHEAD
    if len(data) >= MIN_PAYLOAD_BYTES and budget > 0:
        first_budget = budget // 2
        last_budget = budget - first_budget
        first_end = first_budget
        while first_end > 0 and (data[first_end] & 0xC0) == 0x80:
            first_end -= 1
        last_start = len(data) - last_budget
        while last_start < len(data) and (data[last_start] & 0xC0) == 0x80:
            last_start += 1
        omitted = last_start - first_end
        candidate = (
            data[:first_end].decode("utf-8", "ignore")
            + _marker(omitted)
            + data[last_start:].decode("utf-8", "ignore")
        )
        if utf8_len(candidate) <= limit:
            result = candidate
    if result is None:
        result = _prefix_bytes(data, limit)
    return result or " "
