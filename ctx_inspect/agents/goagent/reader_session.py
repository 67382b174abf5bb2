"""``goagent-session``: the Go agent's session tree, ``~/.ai/sessions/--<cwd>--/<id>.jsonl``
(HEAD: ``.../<uuid>/messages.jsonl``).

A header ``{"type": "session", "version": 1, "id", ...}``, then entries ``message`` /
``compaction`` / ``branch_summary`` / ``session_info`` whose ``id`` and ``parentId`` form a
tree. The agent's context is the path from the newest leaf (the last entry); read
incrementally, each entry whose parent is not the previous entry switches branch: a
``ContextReset`` (reason ``branch``) back to the newest message both branches share, then copies
(ids ``<entry>@<n>``) of the target branch's messages that were not in context. A ``compaction``
entry is a ``Compacted`` (``tokensBefore``; the entries from ``firstKeptEntryId`` on the path
are retained; its trigger is not recorded) and the summary message the agent replays; a
``branch_summary`` is a summary message too. The writer is asynchronous: a compaction entry
waits for the message entries written after it that the agent made before it (by their
``message.timestamp``), which it then leaves out, as the agent's list did. The agent's figure is
given when each turn ends, as for the stdout. The legacy layout (one AgentMessage per line, no
header) is read as a linear chain. A ``--<cwd>--`` folder (or ``~/.ai/sessions``) opens each
of its session files.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctx_inspect.agents.goagent.figures import (
    FIGURE_LABEL,
    UNRECORDED_ATTEMPTS,
    AgentFigures,
    tool_output_change,
)
from ctx_inspect.agents.goagent.merge import merge_run
from ctx_inspect.agents.goagent.messages import (
    BRANCH_SUMMARY_PREFIX,
    SESSION_SUMMARY_PREFIX,
    SESSION_SUMMARY_SUFFIX,
)
from ctx_inspect.agents.goagent.records import (
    SESSION_FORMAT,
    convert_message,
    go_usage,
    header_info,
    instant_ns,
    load_record,
    make_summary,
    sample_head,
)
from ctx_inspect.core.model import (
    TRIGGER_NOT_RECORDED,
    Compacted,
    ContextMeasured,
    ContextReset,
    Event,
    LogLine,
    Message,
    MessageAdded,
    RequestSent,
    Role,
    SessionInfo,
    SourceSpan,
    Usage,
    UsageReported,
)
from ctx_inspect.formats.base import LineParser
from ctx_inspect.formats.chat_common import as_int, as_str, iso_time, type_name
from ctx_inspect.formats.registry import HEAD_BYTES, FormatSpec, Head, folder_problem, register

BODY_BUDGET_CHARS = 64 * 1024 * 1024  # message bodies kept for re-adding on a branch switch
MAX_FOLDER_FILES = 2000  # files looked at in one sessions folder


@dataclass
class _Node:
    parent: str | None
    kind: str  # the entry type; "message" for legacy lines
    contributes: bool = False  # it puts a message in the agent's context list
    first_kept: str | None = None  # compaction entries


class GoSessionParser(LineParser):
    """The session tree JSONL, read incrementally along the agent's current branch."""

    format_name = SESSION_FORMAT

    def __init__(self, source: int = 0, path: str = "") -> None:
        super().__init__(source, path)
        self._nodes: dict[str, _Node] = {}
        self._leaf: str | None = None
        self._live: list[str] = []  # emitted message ids in context, in emission order
        self._entry_of: dict[str, str] = {}  # copy id -> entry id
        self._copies: dict[str, list[str]] = {}  # entry id -> ids of its copies
        self._spans: dict[str, SourceSpan] = {}
        self._bodies: dict[str, Message] = {}
        self._body_chars = 0
        self._entries_seen = False
        self._figures = AgentFigures()
        self._unmeasured = False  # messages came since the agent's figure was last given
        self._turn_time: str | None = None  # when the latest of them was made
        self._turn_span: SourceSpan | None = None  # and where it is
        # a compaction entry waits for the messages the agent produced before it (the
        # session writer is asynchronous: they may be written after it)
        self._held: tuple[_Node, str, dict[str, Any], SourceSpan, str | None] | None = None

    # -- lines -----------------------------------------------------------------------------

    def parse_line(self, line: bytes, span: SourceSpan) -> Iterable[Event]:
        out: list[Event] = []
        if span.offset == 0 and line.startswith(b"\xef\xbb\xbf"):
            line = line[3:]
        obj = self.load_json(line, span, out)
        if not isinstance(obj, dict):
            if obj is not None or not out:
                out.append(self.issue(span, f"not a session entry ({type_name(obj)})", line))
            return out
        etype = obj.get("type")
        if etype == "session":
            info = header_info(obj, None)
            extra = {**info.extra, "unrecorded": {"compaction": UNRECORDED_ATTEMPTS}}
            out.append(info.model_copy(update={"span": span, "extra": extra}))
            return out
        if self._held is not None and not self._produced_before_held(etype, obj):
            self._flush_held(out)
        if etype is None and "role" in obj:  # the legacy layout: one AgentMessage per line
            legacy_id = f"L{span.line}"
            self._entry(legacy_id, self._leaf, "message", obj, span, line, out, legacy=True)
            return out
        if not isinstance(etype, str) or not etype:
            out.append(self.issue(span, "no entry type", line))
            return out
        entry_id = as_str(obj.get("id"))
        if entry_id is None:
            out.append(self.issue(span, f"{etype} entry without an id", line))
            return out
        if entry_id in self._nodes:
            out.append(self.issue(span, f"duplicate entry id {entry_id}; skipped", line))
            return out
        parent = as_str(obj.get("parentId")) if "parentId" in obj else self._leaf
        if parent is None and etype == "branch_summary":
            from_id = as_str(obj.get("fromId"))
            parent = from_id if from_id != "root" else None
        self._entry(entry_id, parent, etype, obj, span, line, out)
        return out

    def _entry(
        self,
        entry_id: str,
        parent: str | None,
        etype: str,
        obj: dict[str, Any],
        span: SourceSpan,
        line: bytes,
        out: list[Event],
        *,
        legacy: bool = False,
    ) -> None:
        timestamp = as_str(obj.get("timestamp")) if not legacy else None
        produced = obj.get("message") if etype == "message" and not legacy else None
        if isinstance(produced, dict) and isinstance(produced.get("timestamp"), int):
            # when the agent made the message, not when the writer got to it
            timestamp = iso_time(produced["timestamp"]) or timestamp
        if parent is not None and parent not in self._nodes:
            out.append(
                self.issue(
                    span,
                    f"parent entry {parent} not found; read as following the previous entry",
                    line,
                )
            )
            parent = self._leaf
        if parent != self._leaf:
            self._switch(parent, span, timestamp, out)
        node = _Node(parent=parent, kind=etype)
        self._nodes[entry_id] = node
        self._leaf = entry_id
        if etype == "message":
            raw = obj if legacy else obj.get("message")
            message = convert_message(raw, entry_id, timestamp)
            if isinstance(message, str):
                out.append(self.issue(span, f"message entry {entry_id}: {message}", line))
                return
            usage = None
            if message.role is not Role.TOOL:
                self._measure(out)  # the previous turn ended here
            if message.role is Role.ASSISTANT and isinstance(raw, dict):
                out.append(RequestSent(model=message.model, timestamp=timestamp, span=span))
                usage = go_usage(raw)
                if usage is not None:
                    out.append(
                        UsageReported(
                            usage=usage, model=message.model, timestamp=timestamp, span=span
                        )
                    )
            self._contribute(node, entry_id, message, span, timestamp, out, usage)
            if message.role is Role.TOOL:
                change = tool_output_change(message, timestamp)
                if change is not None:
                    out.append(change.model_copy(update={"span": span}))
        elif etype == "compaction":
            node.first_kept = as_str(obj.get("firstKeptEntryId"))
            node.contributes = as_str(obj.get("summary")) is not None
            self._held = (node, entry_id, obj, span, timestamp)
        elif etype == "branch_summary":
            summary = as_str(obj.get("summary"))
            if summary:
                text = BRANCH_SUMMARY_PREFIX + summary + SESSION_SUMMARY_SUFFIX
                message = make_summary(entry_id, text, timestamp)
                self._contribute(node, entry_id, message, span, timestamp, out)
            else:
                out.append(LogLine(text="branch_summary (empty)", timestamp=timestamp, span=span))
        elif etype == "session_info":
            extra = {k: obj[k] for k in ("name", "title") if as_str(obj.get(k))}
            out.append(SessionInfo(extra=extra, timestamp=timestamp, span=span))
        else:
            out.append(LogLine(text=f"{etype} entry", timestamp=timestamp, span=span))

    def _contribute(
        self,
        node: _Node,
        entry_id: str,
        message: Message,
        span: SourceSpan,
        timestamp: str | None,
        out: list[Event],
        usage: Usage | None = None,
    ) -> None:
        node.contributes = True
        self._spans[entry_id] = span
        size = len(message.text)
        if self._body_chars + size <= BODY_BUDGET_CHARS:
            self._bodies[entry_id] = message
            self._body_chars += size
        out.append(MessageAdded(message=message, timestamp=timestamp, span=span))
        self._live.append(entry_id)
        if message.visible:
            self._figures.note(message, usage)
            # a turn (a response, the tool results) ends where the agent measures again
            self._unmeasured |= message.role in (Role.ASSISTANT, Role.TOOL)
            self._turn_time = timestamp or self._turn_time
            self._turn_span = span

    # -- timing ----------------------------------------------------------------------------

    def _measure(self, out: list[Event]) -> None:
        """The figure the agent compared with its limit when its last turn ended (at the time
        of the turn's last message)."""
        if not self._unmeasured:
            return
        self._unmeasured = False
        figure = self._figures.figure(self._live, self._entry_id)
        if figure is not None:
            out.append(
                ContextMeasured(
                    tokens=figure,
                    label=FIGURE_LABEL,
                    timestamp=self._turn_time,
                    span=self._turn_span,
                )
            )

    def _produced_before_held(self, etype: Any, obj: dict[str, Any]) -> bool:
        """Whether a message entry written after the held compaction was produced before it
        (its ``message.timestamp``, in milliseconds, is earlier than the entry's)."""
        held = self._held
        if held is None or etype != "message":
            return False
        raw = obj.get("message")
        produced = raw.get("timestamp") if isinstance(raw, dict) else None
        compacted = instant_ns(held[4])
        if not isinstance(produced, int) or isinstance(produced, bool) or compacted is None:
            return False
        return produced < compacted // 1_000_000

    def _flush_held(self, out: list[Event]) -> None:
        held = self._held
        if held is None:
            return
        self._held = None
        node, entry_id, obj, span, timestamp = held
        self._measure(out)
        self._compaction(node, entry_id, obj, span, timestamp, out)

    def end_of_input(self) -> Iterable[Event]:
        out: list[Event] = []
        self._flush_held(out)
        self._measure(out)
        return out

    # -- the tree --------------------------------------------------------------------------

    def _path(self, leaf: str | None) -> list[str]:
        path: list[str] = []
        seen: set[str] = set()
        current = leaf
        while current is not None and current in self._nodes and current not in seen:
            seen.add(current)
            path.append(current)
            current = self._nodes[current].parent
        path.reverse()
        return path

    def _context(self, path: list[str]) -> list[str]:
        """The entries whose messages the agent sends at the end of ``path``, in its order."""

        def sends(entry: str) -> bool:
            node = self._nodes[entry]
            return node.contributes and node.kind != "compaction"

        last = None
        for index in range(len(path) - 1, -1, -1):
            if self._nodes[path[index]].kind == "compaction":
                last = index
                break
        if last is None:
            return [e for e in path if sends(e)]
        compaction = path[last]
        node = self._nodes[compaction]
        out = [compaction] if node.contributes else []
        kept = False
        for entry in path[:last]:
            kept = kept or entry == node.first_kept
            if kept and sends(entry):
                out.append(entry)
        out.extend(e for e in path[last + 1 :] if sends(e))
        return out

    def _entry_id(self, message_id: str) -> str:
        return self._entry_of.get(message_id, message_id)

    def _switch(
        self, parent: str | None, span: SourceSpan, timestamp: str | None, out: list[Event]
    ) -> None:
        """The next entry continues from ``parent``, not from the previous entry."""
        target = self._context(self._path(parent))
        wanted = set(target)
        keep = 0
        while keep < len(self._live) and self._entry_id(self._live[keep]) in wanted:
            keep += 1
        if keep < len(self._live):
            anchor = self._live[keep - 1] if keep else None
            out.append(
                ContextReset(keep_through=anchor, reason="branch", timestamp=timestamp, span=span)
            )
            self._live = self._live[:keep]
        self._readd(target, timestamp, out)
        self._leaf = parent

    def _readd(self, target: list[str], timestamp: str | None, out: list[Event]) -> None:
        """Copies of the ``target`` entries' messages that are not in context now."""
        present = {self._entry_id(m) for m in self._live}
        for entry in target:
            if entry in present:
                continue
            body = self._bodies.get(entry)
            if body is None:
                text = f"entry {entry} is back in context but its body was not kept; not re-added"
                out.append(LogLine(text=text, timestamp=timestamp))
                continue
            copies = self._copies.setdefault(entry, [])
            copy_id = f"{entry}@{len(copies) + 1}"
            copies.append(copy_id)
            self._entry_of[copy_id] = entry
            message = body.model_copy(update={"id": copy_id})
            out.append(MessageAdded(message=message, timestamp=timestamp, span=self._spans[entry]))
            self._live.append(copy_id)

    def _compaction(
        self,
        node: _Node,
        entry_id: str,
        obj: dict[str, Any],
        span: SourceSpan,
        timestamp: str | None,
        out: list[Event],
    ) -> None:
        node.first_kept = as_str(obj.get("firstKeptEntryId"))
        summary = as_str(obj.get("summary"))
        node.contributes = summary is not None
        kept = [e for e in self._context(self._path(entry_id)) if e != entry_id]
        wanted = set(kept)
        retained = [m for m in self._live if self._entry_id(m) in wanted]
        before = len(self._live)
        self._live = retained
        out.append(
            Compacted(
                trigger=TRIGGER_NOT_RECORDED,
                tokens_before=as_int(obj.get("tokensBefore")) or None,
                messages_before=before,
                messages_after=len(kept) + (1 if summary else 0),
                retained_ids=tuple(retained),
                timestamp=timestamp,
                span=span,
            )
        )
        self._readd(kept, timestamp, out)
        if summary is not None:
            text = SESSION_SUMMARY_PREFIX + summary + SESSION_SUMMARY_SUFFIX
            message = make_summary(entry_id, text, timestamp)
            self._contribute(node, entry_id, message, span, timestamp, out)

    # -- bodies ----------------------------------------------------------------------------

    def messages_at(self, data: bytes, span: SourceSpan) -> list[Message]:
        line = data.rstrip(b"\r\n")
        if line.startswith(b"\xef\xbb\xbf"):
            line = line[3:]
        obj = load_record(line)
        if not isinstance(obj, dict):
            return []
        etype = obj.get("type")
        entry_id = as_str(obj.get("id"))
        timestamp = as_str(obj.get("timestamp"))
        message: Message | str | None = None
        if etype is None and "role" in obj:
            message = convert_message(obj, f"L{span.line}")
        elif entry_id is None:
            return []
        elif etype == "message":
            message = convert_message(obj.get("message"), entry_id, timestamp)
        elif etype in ("compaction", "branch_summary"):
            summary = as_str(obj.get("summary"))
            if summary:
                prefix = SESSION_SUMMARY_PREFIX if etype == "compaction" else BRANCH_SUMMARY_PREFIX
                message = make_summary(
                    entry_id, prefix + summary + SESSION_SUMMARY_SUFFIX, timestamp
                )
        if not isinstance(message, Message):
            return []
        copies = [message.model_copy(update={"id": c}) for c in self._copies.get(message.id, [])]
        return [message, *copies]


def _has_session_header(path: Path) -> bool | None:
    try:
        with path.open("rb") as fh:
            first = fh.readline(HEAD_BYTES)
    except OSError:
        return None  # cannot tell
    obj = load_record(first.lstrip(b"\xef\xbb\xbf").strip())
    return (
        isinstance(obj, dict)
        and obj.get("type") == "session"
        and isinstance(obj.get("version"), int)
        and "id" in obj
    )


def _sessions_in(folder: Path) -> list[Path]:
    """The session files of one ``--<cwd>--`` folder: ``<id>.jsonl`` and ``<uuid>/messages.jsonl``
    (HEAD), each starting with a session header; oldest first."""
    try:
        found = [*folder.glob("*.jsonl"), *folder.glob("*/messages.jsonl")]
    except OSError:
        return []
    checked = [(p, _has_session_header(p)) for p in sorted(found)[:MAX_FOLDER_FILES] if p.is_file()]
    files = [p for p, header in checked if header]
    if files:  # among sessions, a file that cannot be read is kept: reading it says why
        files.extend(p for p, header in checked if header is None)

    def key(path: Path) -> tuple[float, str]:
        try:
            return (path.stat().st_mtime, str(path))
        except OSError:
            return (0.0, str(path))

    return sorted(files, key=key)


_CWD_FOLDER = re.compile(r"--.*--")  # ~/.ai/sessions/--<cwd>--


def expand_sessions(path: Path) -> list[Path]:
    """The session files of a ``--<cwd>--`` folder, or of every such folder under
    ``~/.ai/sessions``."""
    if not path.is_dir():
        return [path]
    files = _sessions_in(path)
    if files:
        return files
    out: list[Path] = []
    try:
        subdirs = sorted(p for p in path.iterdir() if p.is_dir())
    except OSError:
        return out
    for sub in subdirs[:MAX_FOLDER_FILES]:
        # a session folder that cannot be listed is named, so that reading it says why
        out.extend([sub] if folder_problem(sub) else _sessions_in(sub))
    return out


def sniff_session(head: Head) -> float:
    if head.is_dir:
        found = expand_sessions(head.path) if head.path.is_dir() else []
        # a session file, or a folder named as the agent names them that cannot be listed
        # (any other unreadable folder says nothing of whose sessions it holds)
        own = any(p.is_file() or _CWD_FOLDER.fullmatch(p.name) for p in found)
        return 0.9 if own else 0.0
    sample = sample_head(head)
    if sample.events > sample.entries:
        return 0.0
    if sample.entries:
        return 0.95 if sample.header else 0.8
    if sample.header:
        return 0.7 if sample.records == 1 else 0.4
    if sample.legacy and sample.legacy * 2 >= sample.records:
        return 0.75
    return 0.0


SESSION_SPEC = register(
    FormatSpec(
        name=SESSION_FORMAT,
        description="Go agent 'ai' (tiancaiamao/ai): session tree JSONL",
        reads=(
            "~/.ai/sessions/--<cwd>--/<id>.jsonl or .../<uuid>/messages.jsonl, a --<cwd>-- "
            "folder, or ~/.ai/sessions itself"
        ),
        parser=GoSessionParser,
        sniff=sniff_session,
        default_profile="goagent",
        expand=expand_sessions,
        folder=True,
        stream_merge=merge_run,
    )
)
