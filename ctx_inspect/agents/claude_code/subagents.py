"""A Claude Code sub-agent file's links to its parent session, from the files around it: its
``.meta.json`` (the agent's type and description, the parent's tool call) and, when that does
not name the call, the parent session file, scanned for the tool result that names the agent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from ctx_inspect.agents.claude_code.records import text_or_none

PARENT_SCAN_CHUNK = 4 * 1024 * 1024


def meta_facts(path: str) -> dict[str, Any]:
    """``agentType`` / ``description`` (and the parent's tool call) from the .meta.json beside
    the sub-agent file ``path``."""
    if not path:
        return {}
    meta_path = Path(path).with_suffix(".meta.json")
    try:
        raw = orjson.loads(meta_path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    if not isinstance(raw, dict):
        return {}
    facts: dict[str, Any] = {}
    for key, name in (
        ("agentType", "agent_type"),
        ("description", "description"),
        ("toolUseId", "parent_tool_use_id"),
        ("worktreePath", "worktree_path"),
    ):
        value = text_or_none(raw.get(key))
        if value is not None:
            facts[name] = value
    return facts


def parent_call(path: str, session_id: str, agent_id: str) -> str | None:
    """The parent's tool call that ran the sub-agent ``agent_id`` whose file is ``path``: the
    tool result whose ``toolUseResult.agentId`` names it, found by a byte scan of the parent
    session file."""
    here = Path(path)
    candidates = [here.parent / f"{session_id}.jsonl"]
    if here.parent.name == "subagents":
        session_dir = here.parent.parent
        candidates.insert(0, session_dir.parent / f"{session_dir.name}.jsonl")
    needle = b'"agentId":"' + agent_id.encode() + b'"'
    for candidate in candidates:
        try:
            found = _scan_for_call(candidate, needle, agent_id)
        except OSError:
            continue
        if found is not None:
            return found
    return None


def _scan_for_call(path: Path, needle: bytes, agent_id: str) -> str | None:
    """The tool call id of the tool-result line that names ``agent_id`` in ``path``."""
    with path.open("rb") as fh:
        carry = b""
        while True:
            chunk = fh.read(PARENT_SCAN_CHUNK)
            if not chunk:
                return None
            data = carry + chunk
            pos = data.find(needle)
            while pos >= 0:
                start = data.rfind(b"\n", 0, pos) + 1
                end = data.find(b"\n", pos)
                if end < 0:
                    rest = fh.readline()
                    line = data[start:] + rest
                    data = data[:start] + line
                    end = len(data)
                else:
                    line = data[start:end]
                found = _call_of_result(line, agent_id)
                if found is not None:
                    return found
                pos = data.find(needle, end)
            cut = data.rfind(b"\n")
            carry = data[cut + 1 :] if cut >= 0 else data


def _call_of_result(line: bytes, agent_id: str) -> str | None:
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or obj.get("type") != "user":
        return None
    meta = obj.get("toolUseResult")
    if not isinstance(meta, dict) or meta.get("agentId") != agent_id:
        return None
    message = obj.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                call = block.get("tool_use_id")
                if isinstance(call, str) and call:
                    return call
    return None
