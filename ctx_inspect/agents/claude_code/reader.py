"""Claude Code session transcripts (``~/.claude/projects/<project>/<session>.jsonl``).

One JSON object per line (reference: transcripts.md section 1). What each line becomes:

- ``assistant``: one content block of a model response; the lines of one response share
  ``message.id`` and repeat its usage (the last line holds the final figures), and may be
  interleaved with tool-result lines. The first line of a response on a thread emits
  ``RequestSent`` (``request_id`` = ``message.id``) and ``UsageReported``; a later line of the
  same response whose usage differs emits a new ``UsageReported`` (the session keeps the latest).
  Every line becomes its own ``MessageAdded`` (thinking / text / tool-call parts), its id the
  line's ``uuid``. ``model: "<synthetic>"`` lines (local notices, API-error placeholders) make no
  request: their message is META and not visible to the model.
- ``user``: a prompt (string or blocks) or tool results (TOOL_RESULT, the tool's name resolved
  from its ``tool_use`` id). ``toolUseResult`` is what the CLI kept for itself, not context, and is
  not counted. ``isMeta`` text is injected context (ATTACHMENT, visible); ``isCompactSummary`` is
  the compaction summary (SUMMARY).
- ``attachment``: text injected into the context (``rendered`` in 2.1.3xx, else the attachment's
  own text fields) becomes an ATTACHMENT message; attachments without text (hook results, prompt
  snapshots, ...) become log lines.
- ``system``: ``compact_boundary`` → ``Compacted`` (trigger, ``preTokens``, ``postTokens`` when
  present, messages kept by ``preservedSegment`` / ``preservedMessages``); ``microcompact_boundary``
  → ``Pruned`` (the tool results of ``compactedToolIds``); every other subtype → a log line
  (``api_error`` at level "error").
- Session metadata (``summary`` titles, ``file-history-snapshot``, ``queue-operation``,
  ``progress``, ``permission-mode``, ``last-prompt``, ``custom-title``, ``ai-title``, ...) becomes
  a short log line tagged with its type; unknown types are kept as log lines too (Claude Code adds
  line types often, and an unknown one is never a parse issue).

The conversation is a tree (``uuid`` / ``parentUuid``): the reader follows the active chain
incrementally and emits ``ContextReset`` at a rewind or an edited prompt (``reader_envelope``).
Inline sidechains (v1.0 ``isSidechain: true`` lines) get their own thread,
``sidechain-<n>`` per sub-agent run (``agent-<agentId>`` when the line names its agent). A
sub-agent file (v2.0 ``agent-*.jsonl``, v2.1 ``<session>/subagents/agent-*.jsonl``) is its own
session: its lines form thread "main", and its ``SessionInfo`` names the parent session, the agent
and, when it can be found, the parent's ``Task``/``Agent`` tool call (``subagents``). The parent
records the link the other way (``SessionInfo.extra["subagents"]``: tool call id -> agent id or
thread).

This module is the format: detection, project folders, registration. The reader is built in
layers, one job each: ``records`` (what a line holds, as values), ``reader_envelope`` (where a
line belongs: session, thread, id, chain, response), ``reader_lines`` (every line read whole),
``reader_fast`` (``ClaudeCodeParser``: reading without bodies, ``stats --no-exact``, for the lines
that need no more than their own values). ``merge`` is ``--merge`` of one run's files.

A second format, ``claude-code-stream`` (``reader_stream``), reads the CLI's ``--output-format
stream-json`` stdout: the same assistant and user lines with snake_case envelopes
(``session_id``, ``parent_tool_use_id``), no tree, an ``init`` line and a final ``result``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from ctx_inspect.agents.claude_code.merge import merge_streams
from ctx_inspect.agents.claude_code.reader_fast import ClaudeCodeParser
from ctx_inspect.agents.claude_code.records import BOM, KNOWN_TYPES, MISSING, SESSION_FORMAT
from ctx_inspect.formats.registry import FormatSpec, Head, folder_problem, read_head, register

__all__ = ["SPEC", "ClaudeCodeParser", "expand", "parsed_head", "sniff"]

SNIFF_MAX_LINES = 50


def _head_objects(head: Head) -> list[Any]:
    objs: list[Any] = []
    for line in head.lines[:SNIFF_MAX_LINES]:
        try:
            objs.append(orjson.loads(line.lstrip("\ufeff")))
        except orjson.JSONDecodeError:
            objs.append(MISSING)
    return objs


def parsed_head(head: Head) -> list[Any]:
    """The JSON values of the head's lines that parse."""
    return [o for o in _head_objects(head) if o is not MISSING]


def _is_session_line(obj: Any) -> bool:
    if not isinstance(obj, dict):
        return False
    kind = obj.get("type")
    if not isinstance(kind, str):
        return False
    if "parentUuid" in obj and "uuid" in obj:
        return kind in KNOWN_TYPES or isinstance(obj.get("sessionId"), str)
    if kind in KNOWN_TYPES and isinstance(obj.get("sessionId"), str):
        return True
    if kind == "summary":
        return isinstance(obj.get("leafUuid"), str)
    if kind == "file-history-snapshot":
        return isinstance(obj.get("snapshot"), dict) and "messageId" in obj
    return False


def sniff(head: Head) -> float:
    if head.is_dir:
        return _sniff_folder(head.path)
    body = head.data.lstrip(BOM).lstrip()
    if not body.startswith(b"{"):
        return 0.0
    parsed = parsed_head(head)
    if not parsed:
        # One long first line cut by the head: look at its envelope.
        prefix = body[:4096]
        if b'"parentUuid":' in prefix and b'"sessionId":"' in prefix and b'"type":"' in prefix:
            return 0.9
        return 0.0
    hits = sum(1 for o in parsed if _is_session_line(o))
    if hits == 0:
        return 0.0
    return 0.95 if hits * 2 >= len(parsed) else 0.6


def _sessions_in(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.glob("*.jsonl") if p.is_file())
    except OSError:
        return []


def _sniff_files(files: list[Path], limit: int = 5) -> bool:
    for path in files[:limit]:
        try:
            if sniff(read_head(path)) >= 0.5:
                return True
        except Exception:
            continue
    return False


def _sniff_folder(folder: Path) -> float:
    if _sniff_files(_sessions_in(folder)):
        return 0.95
    try:
        subdirs = sorted(p for p in folder.iterdir() if p.is_dir())
    except OSError:
        return 0.0
    for sub in subdirs[:20]:
        if _sniff_files(_sessions_in(sub), limit=2):
            return 0.9
    return 0.0


def _by_mtime(paths: Iterable[Path]) -> list[Path]:
    def key(path: Path) -> tuple[float, str]:
        try:
            return path.stat().st_mtime, path.name
        except OSError:
            return 0.0, path.name

    return sorted(paths, key=key)


def _expand_project(folder: Path) -> list[Path]:
    files = _sessions_in(folder)
    parents = [p for p in files if not p.name.startswith("agent-")]
    agents = [p for p in files if p.name.startswith("agent-")]
    for parent in parents:
        sub = folder / parent.stem / "subagents"
        if sub.is_dir():
            agents.extend(p for p in sub.glob("agent-*.jsonl") if p.is_file())
    return [*_by_mtime(parents), *_by_mtime(agents)]


def expand(path: Path) -> list[Path]:
    """The session files of a project folder (parents first, then sub-agents, each by mtime),
    or of every project folder under a ``projects`` root."""
    if not path.is_dir():
        return [path]
    if _sessions_in(path):
        return _expand_project(path)
    out: list[Path] = []
    try:
        subdirs = sorted(p for p in path.iterdir() if p.is_dir())
    except OSError:
        return out
    for sub in subdirs:
        # a project folder that cannot be listed is named, so that reading it says why
        out.extend([sub] if folder_problem(sub) else _expand_project(sub))
    return out


SPEC = register(
    FormatSpec(
        name=SESSION_FORMAT,
        description="Claude Code session transcripts (JSONL), sub-agent files, project folders",
        reads=(
            "~/.claude/projects/<project>/<session>.jsonl, sub-agent agent-*.jsonl files, a "
            "project folder, or the projects folder itself"
        ),
        parser=ClaudeCodeParser,
        sniff=sniff,
        default_profile="claude-code",
        expand=expand,
        folder=True,
        stream_merge=merge_streams,
        module=__name__,  # the parser is ``reader_fast``'s: detection ranks this module
    )
)
