"""OpenCode: its log files, its SQLite database (v1.2+) and its older JSON storage folder.

``opencode-log`` reads ``~/.local/share/opencode/log/*.log`` in both of OpenCode's layouts: the
classic ``LEVEL  time +Nms service=... message`` records, and 1.18's logfmt records
(``timestamp=... level=... run=... message=...``, no ``service=`` tag, several processes in one
file). Model requests (``stream``, the title request excepted) become ``RequestSent``; a prune is
``pruning``, ``found`` (``pruned=P total=T``) and, when P is above the minimum, ``pruned
count=N``: one ``Pruned`` per attempt, applied when P is above OpenCode's minimum (20,000); a
provider's refusal of a prompt as too long becomes ``RequestRejected``; every other record is a
``LogLine``.

``opencode-db`` reads ``opencode.db`` whole and read-only (``open_sqlite_readonly``): tables
``session``, ``message`` and ``part`` (``data`` holds each message's and part's JSON). The legacy
``opencode-storage`` folder (``storage/session/<project>/<id>.json``,
``storage/message/<session>/<id>.json``, ``storage/part/<message>/<id>.json``) holds the same JSON
in files. Both give one ``SnapshotSession`` per OpenCode session and share ``convert_session``:

- user messages: text parts (``ignored`` ones are not sent), file parts (text/plain and
  directories are not sent: their text is already in synthetic text parts), a ``compaction`` part
  (rendered to the model as "What did we do so far?"; the message is kind META), a ``subtask``
  part (rendered as "The following tool was executed by the user"); a message OpenCode wrote
  inside its loop (every text synthetic, as "Continue if you have next steps, ...", or the copy
  of the last user message after an overflow compaction) is kind ATTACHMENT;
- assistant messages are split into steps at ``step-start`` / ``step-finish`` parts; each step is
  one model request: ``RequestSent``, ``UsageReported`` from the step-finish ``tokens`` (the
  message's own ``tokens`` when no step has them), one assistant message with the step's reasoning,
  text and tool calls, the request's usage with OpenCode's own count of it as its context figure
  (``tokens.total``, else input + output + cache read + cache write: what it compares with its
  usable window; given after the answer it counts), then one TOOL_RESULT message per tool part
  (completed output, error text, or "[Tool execution was interrupted]" for pending/running
  parts);
- a request with no usage that an overflow compaction follows, or whose error is a context-length
  error, was refused by the provider: ``RequestRejected`` on its step;
- tool parts with ``state.time.compacted`` (pruned): one ``Pruned`` per prune (the parts marked
  between two messages), its tokens OpenCode's estimate of each output summed, placed after their
  results and before the first message created after;
- a compaction (the user message with a ``compaction`` part, and the assistant ``summary`` that
  answers it): ``Compacted`` before the request message (trigger auto, overflow or manual; the
  request message and the verbatim tail from ``tail_start_id`` stay in context), its before the
  last ordinary request's count and its after the prompt of the first ordinary request after it;
  a failed summary makes it a failed attempt. The summary's usage is that of the summarisation
  request, not of the conversation: it is kept apart (thread ``compaction``);
- an assistant message with an error is not sent to the model again (``visible=False``), unless
  it was aborted after producing output, as ``MessageV2.toModelMessages`` decides.

Input tokens in OpenCode's ``tokens`` never include the cache (``input_includes_cache=False``).
"""

from __future__ import annotations

import hashlib
import re
import shutil
import sqlite3
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson

from ctx_inspect.core.estimate import estimate_text
from ctx_inspect.core.model import (
    Compacted,
    Event,
    LogLine,
    Message,
    MessageAdded,
    MessageKind,
    ParseIssue,
    Part,
    PartType,
    Pruned,
    RequestRejected,
    RequestSent,
    Role,
    SessionInfo,
    SourceSpan,
    Usage,
    UsageReported,
)
from ctx_inspect.formats.base import LineParser, decode_text, excerpt, shown
from ctx_inspect.formats.chat_common import (
    as_int,
    as_str,
    compact_json,
    data_url,
    iso_time,
    type_name,
)
from ctx_inspect.formats.registry import FormatSpec, Head, SnapshotSession, register

PRUNE_SERVICE = "session.compaction"
OPENCODE_PRUNE_MINIMUM = 20_000  # PRUNE_MINIMUM: a prune above it is applied
COMPACTION_PROMPT = "What did we do so far?"  # what a compaction part becomes for the model
SUBTASK_PROMPT = "The following tool was executed by the user"
INTERRUPTED = "[Tool execution was interrupted]"
ABORTED_ERROR = "MessageAbortedError"
REQUIRED_TABLES = ("session", "message", "part")

# ------------------------------------------------------------------------------------------
# Read-only SQLite (shared with the Fifth reader)

_SQLITE_MAGIC = b"SQLite format 3\x00"


def sqlite_is_wal(path: Path) -> bool:
    """Whether the database's header says WAL mode (read and write versions both 2)."""
    try:
        with path.open("rb") as fh:
            header = fh.read(20)
    except OSError:
        return False
    return header.startswith(_SQLITE_MAGIC) and header[18] == 2 and header[19] == 2


# Python's sqlite3 decodes SQLite's error messages as UTF-8: a message quoting the bytes of a
# damaged schema raises UnicodeDecodeError in place of the error SQLite reported
SQLITE_ERRORS = (sqlite3.Error, UnicodeDecodeError)

COPY_ATTEMPTS = 5  # tries at a consistent private copy of a database a writer is changing
_COPY_BYTES = 1 << 20


class _CopyConnection(sqlite3.Connection):
    """A connection to a private copy of a database; closing it removes the copy."""

    copy_folder: Path | None = None

    def close(self) -> None:
        super().close()
        if self.copy_folder is not None:
            shutil.rmtree(self.copy_folder, ignore_errors=True)
            self.copy_folder = None


def _connect(uri: str, folder: Path | None = None) -> sqlite3.Connection:
    con = sqlite3.connect(uri, uri=True, factory=_CopyConnection)
    con.copy_folder = folder
    con.text_factory = bytes  # invalid UTF-8 must not fail a whole query; decoded per value
    return con


def _uri(path: Path, query: str) -> str:
    return "file:" + quote(str(path)) + query


def _checked(con: sqlite3.Connection) -> sqlite3.Connection:
    """``con`` once a first query worked (closed, and the error raised, when it did not)."""
    try:
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error:
        con.close()
        raise
    except UnicodeDecodeError:
        con.close()
        raise sqlite3.DatabaseError("database disk image is malformed (a damaged schema)") from None
    return con


def open_sqlite_readonly(
    path: Path, *, sniffing: bool = False
) -> tuple[sqlite3.Connection, str | None]:
    """Open an SQLite database without ever writing to it or beside it (not a byte, not an
    mtime of the database, its ``-wal``, ``-shm`` or ``-journal``).

    Returns the connection and a note when what is read may not be the newest state. SQLite
    opens a WAL database's ``-wal`` (and ``-shm``) read-write, creating them when missing, and
    a reader writes into the ``-shm``, even with ``mode=ro``; so:

    - a WAL database without a ``-wal`` file is read from its main file alone
      (``mode=ro&immutable=1``: nothing else is opened, and only for reading);
    - a WAL database with a ``-wal`` file (an agent has it open, or did not close it) is copied
      with its ``-wal`` into a private folder and the copy is read (closing the connection
      removes the copy). The copy is taken again while the main file changed during the copy
      (a writer's checkpoint), so the copy is one consistent state;
    - a database in rollback mode is opened ``mode=ro`` (SQLite's shared lock, no write); when
      that cannot read it (a hot ``-journal`` left by a crash: rolling it back is a write), a
      private copy with its journal is read instead, which SQLite rolls back in the copy.

    ``sniffing``: only the tables are wanted; a WAL database is first read from its main file
    alone, and copied only when that shows no table. Raises ``sqlite3.Error`` when it is no
    database at all.
    """
    resolved = path.resolve()
    if sqlite_is_wal(resolved):
        if not Path(f"{resolved}-wal").exists():
            return _checked(_connect(_uri(resolved, "?mode=ro&immutable=1"))), None
        if sniffing:
            con = _checked(_connect(_uri(resolved, "?mode=ro&immutable=1")))
            if sqlite_tables(con):
                return con, None
            con.close()
        return _open_copy(resolved, "-wal")
    try:
        return _checked(_connect(_uri(resolved, "?mode=ro"))), None
    except sqlite3.DatabaseError as exc:
        if "not a database" in str(exc) or "malformed" in str(exc):
            raise
        con, note = _open_copy(resolved, "-journal")
        return con, note or f"read from a private copy ({exc})"


def _open_copy(path: Path, sibling: str) -> tuple[sqlite3.Connection, str | None]:
    folder = Path(tempfile.mkdtemp(prefix="ctx-inspect-db-"))
    try:
        note = _copy_database(path, folder / path.name, sibling)
        return _checked(_connect(_uri(folder / path.name, ""), folder)), note
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


def _copy_database(path: Path, target: Path, sibling: str) -> str | None:
    """Copy the database and its ``sibling`` (``-wal`` or ``-journal``) to ``target``, again
    while the main file changed from before to after the sibling was copied; a note when it
    kept changing."""
    for _ in range(COPY_ATTEMPTS):
        before = _copy_file(path, target)
        _copy_file(Path(f"{path}{sibling}"), Path(f"{target}{sibling}"))
        if _digest(path) == before:
            return None
    return (
        f"the database kept changing while it was copied ({COPY_ATTEMPTS} tries): "
        "what was read may mix two of its states"
    )


def _copy_file(source: Path, target: Path) -> bytes | None:
    """Copy ``source`` (read-only) to ``target``; the digest of what was copied (None when
    there is no source: then there is no target either)."""
    digest = hashlib.blake2b()
    try:
        with source.open("rb") as src, target.open("wb") as dst:
            while chunk := src.read(_COPY_BYTES):
                digest.update(chunk)
                dst.write(chunk)
    except FileNotFoundError:
        target.unlink(missing_ok=True)
        return None
    return digest.digest()


def _digest(path: Path) -> bytes | None:
    digest = hashlib.blake2b()
    try:
        with path.open("rb") as fh:
            while chunk := fh.read(_COPY_BYTES):
                digest.update(chunk)
    except FileNotFoundError:
        return None
    return digest.digest()


def sqlite_tables(con: sqlite3.Connection) -> set[str]:
    rows = con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return {_text(row[0]) for row in rows}


def sqlite_columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [_text(row[1]) for row in con.execute(f'PRAGMA table_info("{table}")').fetchall()]


def sqlite_tables_of(path: Path) -> set[str]:
    """The tables of a database (empty when it cannot be read); for sniffers."""
    try:
        con, _ = open_sqlite_readonly(path, sniffing=True)
    except (sqlite3.Error, OSError):
        return set()
    try:
        return sqlite_tables(con)
    except SQLITE_ERRORS:
        return set()
    finally:
        con.close()


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def db_issue(path: Path, reason: str, raw: Any = b"") -> ParseIssue:
    """A problem in a database or folder, named by table and row in its reason."""
    data = raw if isinstance(raw, bytes | str) else str(raw)
    return ParseIssue(file=str(path), reason=reason, excerpt=excerpt(data))


def load_json_value(raw: Any, where: str, path: Path, issues: list[Event]) -> Any:
    """A JSON value from a column or a file; None (and an issue naming ``where``) when broken."""
    if raw is None:
        issues.append(db_issue(path, f"{where}: no data"))
        return None
    data = raw if isinstance(raw, bytes) else str(raw).encode("utf-8", "surrogatepass")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        try:
            value = orjson.loads(data.decode("utf-8", "replace"))
        except orjson.JSONDecodeError:
            issues.append(db_issue(path, f"{where}: data is not valid JSON ({exc.msg})", data))
            return None
        issues.append(db_issue(path, f"{where}: invalid UTF-8 replaced with U+FFFD", data))
        return value


# ------------------------------------------------------------------------------------------
# Conversion of one session (shared by the database and the storage folder)


@dataclass
class OcMessage:
    """One stored message: its info JSON (with ``id``) and its parts, in order."""

    info: dict[str, Any]
    parts: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class _Step:
    start_id: str | None = None
    parts: list[dict[str, Any]] = field(default_factory=list)
    finish: dict[str, Any] | None = None


def opencode_usage(tokens: Any) -> Usage | None:
    """``tokens {total?, input, output, reasoning, cache {read, write}}``; None when all zero."""
    if not isinstance(tokens, dict):
        return None
    cache = tokens.get("cache")
    cache = cache if isinstance(cache, dict) else {}
    total = tokens.get("total")
    usage = Usage(
        input=as_int(tokens.get("input")),
        output=as_int(tokens.get("output")),
        reasoning=as_int(tokens.get("reasoning")),
        cache_read=as_int(cache.get("read")),
        cache_write=as_int(cache.get("write")),
        total=as_int(total) if total is not None and as_int(total) else None,
    )
    figures = (usage.input, usage.output, usage.reasoning, usage.cache_read, usage.cache_write)
    if not any(figures) and not usage.total:
        return None
    return usage


def _time(value: Any, key: str = "created") -> int | None:
    if isinstance(value, dict):
        raw = value.get(key)
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            return int(raw)
    return None


def _file_part(part: dict[str, Any]) -> Part | None:
    mime = as_str(part.get("mime")) or ""
    if mime in ("text/plain", "application/x-directory"):
        return None  # sent as the synthetic text part beside it
    url = part.get("url")
    media, size = data_url(url) if isinstance(url, str) else (None, 0)
    kind = PartType.IMAGE if mime.startswith("image/") else PartType.ATTACHMENT
    name = as_str(part.get("filename")) or ""
    return Part(type=kind, text=name, media_type=mime or media, data_bytes=size)


@dataclass
class _CompactionPlan:
    """What the messages say about one compaction, read before its request is converted."""

    trigger: str  # auto, overflow or manual
    summary: OcMessage | None  # the compaction agent's answer, when one was written
    tokens_before: int | None  # OpenCode's count at the last ordinary request before it
    tokens_after: int | None  # the prompt of the first ordinary request after it


def opencode_count(usage: Usage) -> int:
    """What ``SessionCompaction.isOverflow`` compares with the usable window: ``tokens.total``,
    else input + output + cache read + cache write."""
    if usage.total:
        return usage.total
    return usage.input + usage.output + usage.cache_read + usage.cache_write


def count_label(usage: Usage) -> str:
    return "tokens.total" if usage.total else "input+output+cache (OpenCode's count)"


_REJECTED = re.compile(
    r"context[_ ]length[_ ]exceeded|maximum context length|context window|prompt is too long"
    r"|too many tokens|exceeds the context|ContextOverflow",
    re.IGNORECASE,
)
_REJECTED_LIMIT = re.compile(r"maximum context length is (\d+)", re.IGNORECASE)
_REJECTED_TOKENS = re.compile(
    r"resulted in (\d+) tokens|prompt is too long: (\d+) tokens|(\d+) tokens > \d+", re.IGNORECASE
)


def rejection(error: Any, *, code: str | None = None) -> RequestRejected | None:
    """The provider's refusal of a prompt as too long, from an error OpenCode recorded (its
    name, message and response body); None when the error is of another kind."""
    if not isinstance(error, dict):
        return None
    data = error.get("data")
    data = data if isinstance(data, dict) else {}
    name = as_str(error.get("name")) or ""
    texts = [t for t in (data.get("message"), data.get("responseBody")) if isinstance(t, str)]
    text = " ".join(texts)
    if name != "ContextOverflowError" and not _REJECTED.search(text):
        return None
    found = _REJECTED_TOKENS.search(text)
    tokens = next((int(g) for g in found.groups() if g), None) if found else None
    limit = _REJECTED_LIMIT.search(text)
    if "context_length_exceeded" in text:
        code = "context_length_exceeded"
    reason = texts[0] if texts else name
    return RequestRejected(
        reason=reason[:500],
        code=code,
        tokens=tokens,
        limit=int(limit.group(1)) if limit else None,
    )


def _compaction_part(message: OcMessage) -> dict[str, Any] | None:
    if message.info.get("role") != "user":
        return None
    return next((p for p in message.parts if p.get("type") == "compaction"), None)


def _trigger(part: dict[str, Any]) -> str:
    if part.get("overflow") is True:
        return "overflow"
    return "manual" if part.get("auto") is False else "auto"


def _step_usages(message: OcMessage) -> list[Usage]:
    """The usage of each model request of an assistant message, in order."""
    steps = _split_steps(message.parts)
    usages = [opencode_usage(s.finish.get("tokens")) for s in steps if s.finish is not None]
    found = [u for u in usages if u is not None]
    if found:
        return found
    fallback = opencode_usage(message.info.get("tokens"))
    return [fallback] if fallback is not None else []


def _ordinary(message: OcMessage) -> bool:
    return message.info.get("role") == "assistant" and message.info.get("summary") is not True


def _synthetic_only(message: OcMessage) -> bool:
    """A user message whose every part is text the agent wrote (``synthetic``)."""
    texts = [p for p in message.parts if p.get("type") == "text" and not p.get("ignored")]
    return (
        bool(texts)
        and all(p.get("synthetic") is True for p in texts)
        and not any(p.get("type") in ("file", "compaction", "subtask") for p in message.parts)
    )


class _Converter:
    """Turns one session's messages, in order, into events."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.events: list[Event] = []
        self.emitted: list[tuple[str, str]] = []  # (source message id, emitted message id)
        self.plans: dict[str, _CompactionPlan] = {}  # compaction request id -> plan
        self.summaries: set[str] = set()  # summary message ids whose compaction is emitted
        self.injected: set[str] = set()  # user messages the agent wrote within its loop
        self.rejected: dict[str, RequestRejected] = {}  # assistant id -> refusal
        self.prunes: dict[int, list[tuple[str, int]]] = {}  # compacted time -> (result, tokens)

    def run(self, messages: Iterable[OcMessage]) -> list[Event]:
        ordered = list(messages)
        self._plan(ordered)
        for message in ordered:
            info = message.info
            created = _time(info.get("time"))
            if created is not None:
                self._flush_prunes(created)
            role = info.get("role")
            if role == "user":
                self._user(message)
            elif role == "assistant":
                self._assistant(message)
            else:
                self.events.append(
                    db_issue(
                        self.path,
                        f"message {shown(info.get('id'), quoted=False)}: "
                        f"unknown role {shown(role)}",
                        compact_json(info),
                    )
                )
        self._flush_prunes(None)
        return self.events

    # -- reading ahead -----------------------------------------------------------------------

    def _plan(self, messages: list[OcMessage]) -> None:
        """Compactions (with their summaries and the figures around them), the user messages
        OpenCode writes inside its loop, and the requests the provider refused."""
        last_count: int | None = None  # OpenCode's count at the latest ordinary request
        for index, message in enumerate(messages):
            info = message.info
            if _ordinary(message):
                usages = _step_usages(message)
                if usages:
                    last_count = opencode_count(usages[-1])
                continue
            part = _compaction_part(message)
            if part is not None:
                self._plan_compaction(messages, index, part, last_count)
            elif info.get("role") == "user" and _synthetic_only(message):
                self.injected.add(str(info.get("id")))

    def _plan_compaction(
        self, messages: list[OcMessage], index: int, part: dict[str, Any], before: int | None
    ) -> None:
        request = str(messages[index].info.get("id"))
        trigger = _trigger(part)
        summary: OcMessage | None = None
        after: int | None = None
        later = messages[index + 1 :]
        for position, message in enumerate(later):
            info = message.info
            if (
                summary is None
                and info.get("role") == "assistant"
                and info.get("summary") is True
                and info.get("parentID") in (None, request)
            ):
                summary = message
                if trigger == "overflow":
                    self._inject_after(later[position + 1 :])
                continue
            if _compaction_part(message) is not None:
                break  # another compaction before any ordinary request
            if summary is not None and _ordinary(message):
                usages = _step_usages(message)
                if usages:
                    after = usages[0].prompt_tokens
                    break
        if trigger == "overflow":
            refused = self._refused_before(messages, index)
            if refused is not None and refused.tokens is not None:
                before = refused.tokens
        if summary is None and not later:
            return  # the compaction is still running: nothing to say yet
        self.plans[request] = _CompactionPlan(trigger, summary, before, after)
        if summary is not None:
            self.summaries.add(str(summary.info.get("id")))

    def _inject_after(self, later: list[OcMessage]) -> None:
        """The copy of the last user message OpenCode writes after an overflow compaction."""
        for message in later:
            if message.info.get("role") == "user":
                self.injected.add(str(message.info.get("id")))
            return

    def _refused_before(self, messages: list[OcMessage], index: int) -> RequestRejected | None:
        """The request an overflow compaction answers: the latest assistant message before it
        that has no usage (the provider refused it)."""
        for message in reversed(messages[:index]):
            if message.info.get("role") != "assistant":
                continue
            if _step_usages(message) or message.info.get("summary") is True:
                return None
            msg_id = str(message.info.get("id"))
            refused = rejection(message.info.get("error")) or RequestRejected(
                reason=(
                    "the provider refused the request as too long (OpenCode compacted for "
                    "overflow; its error message is not recorded here)"
                )
            )
            self.rejected[msg_id] = refused
            return refused
        return None

    # -- messages --------------------------------------------------------------------------

    def _add(self, source: str, message: Message) -> None:
        self.events.append(MessageAdded(message=message, timestamp=message.timestamp))
        self.emitted.append((source, message.id))

    def _user(self, message: OcMessage) -> None:
        info = message.info
        msg_id = str(info.get("id"))
        parts: list[Part] = []
        kind = MessageKind.ATTACHMENT if msg_id in self.injected else MessageKind.MESSAGE
        for part in message.parts:
            ptype = part.get("type")
            if ptype == "text":
                if not part.get("ignored"):
                    parts.append(Part(type=PartType.TEXT, text=_str(part.get("text"))))
            elif ptype == "file":
                file_part = _file_part(part)
                if file_part is not None:
                    parts.append(file_part)
            elif ptype == "compaction":
                kind = MessageKind.META
                plan = self.plans.get(msg_id)
                if plan is not None:
                    self.events.append(self._compaction(msg_id, part, plan))
                parts.append(Part(type=PartType.TEXT, text=COMPACTION_PROMPT))
            elif ptype == "subtask":
                parts.append(Part(type=PartType.TEXT, text=SUBTASK_PROMPT))
        model = info.get("model")
        self._add(
            msg_id,
            Message(
                id=msg_id,
                role=Role.USER,
                kind=kind,
                parts=tuple(parts),
                timestamp=iso_time(_time(info.get("time"))),
                model=as_str(model.get("modelID")) if isinstance(model, dict) else None,
            ),
        )

    def _assistant(self, message: OcMessage) -> None:
        info = message.info
        msg_id = str(info.get("id"))
        model = as_str(info.get("modelID"))
        created = iso_time(_time(info.get("time")))
        error = info.get("error")
        error_name = error.get("name") if isinstance(error, dict) else None
        visible = not error or (
            error_name == ABORTED_ERROR
            and any(p.get("type") not in ("step-start", "reasoning") for p in message.parts)
        )
        summary = info.get("summary") is True
        if summary and msg_id not in self.summaries:
            # a summary whose request is not in the session (a copied or trimmed session)
            self.events.append(self._orphan_compaction(info, error))
        steps = _split_steps(message.parts)
        fallback_usage = None
        if not any(step.finish is not None for step in steps):
            fallback_usage = opencode_usage(info.get("tokens"))
        # a summary's usage is that of the summarisation request, not of the conversation
        thread = "compaction" if summary else "main"
        for index, step in enumerate(steps):
            self.events.append(
                RequestSent(model=model, request_id=step.start_id, timestamp=created)
            )
            usage = opencode_usage(step.finish.get("tokens")) if step.finish else None
            if usage is None and index == len(steps) - 1:
                usage = fallback_usage
            reported: UsageReported | None = None
            if usage is not None:
                reported = UsageReported(
                    usage=usage,
                    model=model,
                    request_id=step.start_id,
                    timestamp=created,
                    thread=thread,
                )
                if summary:
                    self.events.append(reported)
                    reported = None
                else:
                    # OpenCode's count covers the prompt and the answer: given after the answer
                    reported = reported.model_copy(
                        update={
                            "context_tokens": opencode_count(usage),
                            "context_label": count_label(usage),
                        }
                    )
            elif index == len(steps) - 1 and msg_id in self.rejected:
                refused = self.rejected[msg_id]
                self.events.append(
                    refused.model_copy(update={"model": model, "timestamp": created})
                )
            elif index == len(steps) - 1 and not summary:
                refused_here = rejection(error)
                if refused_here is not None:
                    self.events.append(
                        refused_here.model_copy(update={"model": model, "timestamp": created})
                    )
            step_id = msg_id if index == 0 else (step.start_id or f"{msg_id}.{index + 1}")
            self._step_messages(step, step_id, msg_id, model, created, visible, summary, reported)

    def _step_messages(
        self,
        step: _Step,
        step_id: str,
        msg_id: str,
        model: str | None,
        created: str | None,
        visible: bool,
        summary: bool,
        reported: UsageReported | None,
    ) -> None:
        parts: list[Part] = []
        results: list[tuple[dict[str, Any], Message]] = []
        for part in step.parts:
            ptype = part.get("type")
            if ptype == "text":
                parts.append(Part(type=PartType.TEXT, text=_str(part.get("text"))))
            elif ptype == "reasoning":
                parts.append(Part(type=PartType.THINKING, text=_str(part.get("text"))))
            elif ptype == "tool":
                call, result = tool_messages(part, visible, created)
                parts.append(call)
                if result is not None:
                    results.append((part, result))
        has_text = any(p.type is PartType.TEXT for p in parts)
        has_calls = any(p.type is PartType.TOOL_CALL for p in parts)
        if summary:
            kind = MessageKind.SUMMARY
        elif has_calls and not has_text:
            kind = MessageKind.TOOL_CALL
        else:
            kind = MessageKind.MESSAGE
        if parts or step_id == msg_id:
            self._add(
                msg_id,
                Message(
                    id=step_id,
                    role=Role.ASSISTANT,
                    kind=kind,
                    parts=tuple(parts),
                    visible=visible and bool(parts),
                    timestamp=created,
                    model=model,
                ),
            )
        if reported is not None:
            # OpenCode's count holds the prompt and the answer, not the tool results after it
            self.events.append(reported)
        for part, result in results:
            self._add(msg_id, result)
            state = part.get("state")
            compacted = _time(state.get("time") if isinstance(state, dict) else None, "compacted")
            if compacted is not None:
                output = state.get("output") if isinstance(state, dict) else None
                tokens = estimate_text("opencode", output) if isinstance(output, str) else 0
                self.prunes.setdefault(compacted, []).append((result.id, tokens))

    # -- compaction and prunes -------------------------------------------------------------

    def _compaction(self, request: str, part: dict[str, Any], plan: _CompactionPlan) -> Compacted:
        """The compaction a request message starts, placed before it: the decision came first
        (the overflow seen at the request before, or the user's command)."""
        summary = plan.summary
        if summary is None:
            return Compacted(
                trigger=plan.trigger,
                tokens_before=plan.tokens_before,
                failed=True,
                error="no summary was written",
            )
        info = summary.info
        timestamp = iso_time(_time(info.get("time")))
        failure = _summary_failure(info)
        if failure is not None:
            return Compacted(
                trigger=plan.trigger,
                tokens_before=plan.tokens_before,
                failed=True,
                error=failure,
                timestamp=timestamp,
            )
        retained: list[str] = []
        tail = as_str(part.get("tail_start_id"))
        if tail is not None:
            inside = False
            for source, emitted in self.emitted:
                inside = inside or source == tail
                if inside:
                    retained.append(emitted)
        retained.append(request)
        usages = _step_usages(summary)
        return Compacted(
            trigger=plan.trigger,
            tokens_before=plan.tokens_before,
            tokens_after=plan.tokens_after,
            summary_tokens=usages[-1].output if usages else None,
            retained_ids=tuple(retained),
            timestamp=timestamp,
        )

    def _orphan_compaction(self, info: dict[str, Any], error: Any) -> Compacted:
        """A summary whose compaction request is not in the session."""
        timestamp = iso_time(_time(info.get("time")))
        failure = _summary_failure(info)
        if failure is not None:
            return Compacted(trigger="auto", failed=True, error=failure, timestamp=timestamp)
        return Compacted(trigger="auto", timestamp=timestamp)

    def _flush_prunes(self, before: int | None) -> None:
        """One ``Pruned`` per prune: the parts marked compacted since the previous message (one
        prune writes its parts a few milliseconds apart, at the end of a loop), with the sum of
        OpenCode's estimate of each output (the log's ``found pruned=``)."""
        due = sorted(t for t in self.prunes if before is None or t < before)
        if not due:
            return
        parts = [entry for t in due for entry in self.prunes.pop(t)]
        self.events.append(
            Pruned(
                message_ids=tuple(mid for mid, _ in parts),
                outputs_pruned=len(parts),
                tokens_recovered=sum(tokens for _, tokens in parts),
                reason="prune",
                timestamp=iso_time(due[0]),
            )
        )


def tool_messages(part: dict[str, Any], visible: bool, created: str | None) -> tuple[Part, Message]:
    """A tool part: its call (a part of the assistant's message) and its result (a message),
    as ``MessageV2.toModelMessages`` sends them."""
    name = as_str(part.get("tool"))
    call_id = as_str(part.get("callID"))
    state = part.get("state")
    state = state if isinstance(state, dict) else {}
    args = state.get("input")
    arguments = compact_json(args) if args is not None else ""
    call = Part(type=PartType.TOOL_CALL, tool_name=name, call_id=call_id, arguments=arguments)
    status = state.get("status")
    is_error = False
    extra: list[Part] = []
    if status == "completed":
        output = state.get("output")
        text = output if isinstance(output, str) else compact_json(output)
        attachments = state.get("attachments")
        if _time(state.get("time"), "compacted") is None and isinstance(attachments, list):
            for attachment in attachments:
                if isinstance(attachment, dict):
                    file_part = _file_part(attachment)
                    if file_part is not None:
                        extra.append(file_part)
    elif status == "error":
        metadata = state.get("metadata")
        interrupted = isinstance(metadata, dict) and metadata.get("interrupted") is True
        output = metadata.get("output") if isinstance(metadata, dict) else None
        if interrupted and isinstance(output, str):
            text = output
        else:
            text, is_error = _str(state.get("error")), True
    else:  # pending, running: sent as an interrupted call
        text, is_error = INTERRUPTED, True
    part_id = as_str(part.get("id")) or f"{call_id}-result"
    result = Message(
        id=part_id,
        role=Role.TOOL,
        kind=MessageKind.TOOL_RESULT,
        parts=(
            Part(
                type=PartType.TOOL_RESULT,
                text=text,
                tool_name=name,
                call_id=call_id,
                is_error=is_error,
            ),
            *extra,
        ),
        visible=visible,
        timestamp=iso_time(_time(state.get("time"), "end")) or created,
    )
    return call, result


def _summary_failure(info: dict[str, Any]) -> str | None:
    """Why a compaction's summary failed (an error, or it never finished); None if it did not."""
    error = info.get("error")
    finished = info.get("finish") or _time(info.get("time"), "completed") is not None
    if not error and finished:
        return None
    data = error.get("data") if isinstance(error, dict) else None
    reason = data.get("message") if isinstance(data, dict) else None
    if not isinstance(reason, str) or not reason:
        reason = _error_name(error) or "the summary did not finish"
    return reason


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _error_name(error: Any) -> str | None:
    if isinstance(error, dict):
        return as_str(error.get("name"))
    return as_str(error)


def _split_steps(parts: list[dict[str, Any]]) -> list[_Step]:
    """The model requests of one assistant message (at least one)."""
    steps: list[_Step] = []
    current = _Step()
    for part in parts:
        ptype = part.get("type")
        if ptype == "step-start":
            if current.parts or current.start_id is not None:
                steps.append(current)
            current = _Step(start_id=as_str(part.get("id")))
        elif ptype == "step-finish":
            current.finish = part
            steps.append(current)
            current = _Step()
        else:
            current.parts.append(part)
    if current.parts or current.start_id is not None or not steps:
        steps.append(current)
    return steps


def session_info(session: dict[str, Any], messages: list[OcMessage]) -> SessionInfo:
    model = None
    provider = None
    for message in messages:
        if message.info.get("role") == "assistant":
            model = as_str(message.info.get("modelID"))
            provider = as_str(message.info.get("providerID"))
            if model:
                break
    extra: dict[str, Any] = {}
    for key in ("title", "directory", "project_id"):
        if as_str(session.get(key)):
            extra[key] = session[key]
    if as_str(session.get("parent")):
        extra["parent"] = session["parent"]
    if provider:
        extra["provider"] = provider
    return SessionInfo(
        model=model,
        agent="opencode",
        version=as_str(session.get("version")),
        session_id=as_str(session.get("id")),
        extra=extra,
        timestamp=iso_time(session.get("time_created")),
    )


def convert_session(
    path: Path, session: dict[str, Any], messages: list[OcMessage], issues: list[Event]
) -> SnapshotSession:
    """One OpenCode session as events: its info, the issues met reading it, then its messages."""
    events: list[Event] = [session_info(session, messages), *issues]
    events.extend(_Converter(path).run(messages))
    label = as_str(session.get("title")) or str(session.get("id") or path.name)
    return SnapshotSession(label=label, events=events)


def _session_fields(row: dict[str, Any], path: Path, issues: list[Event]) -> dict[str, Any]:
    """Normalise a session row (columns, or a ``data`` JSON) or a legacy session file."""
    data: dict[str, Any] = {}
    raw = row.get("data")
    if raw is not None:
        value = load_json_value(raw, f"session {row.get('id')}", path, issues)
        if isinstance(value, dict):
            data = value
    merged = {**data, **{k: v for k, v in row.items() if k != "data" and v is not None}}
    time = merged.get("time")
    return {
        "id": merged.get("id"),
        "title": merged.get("title"),
        "parent": merged.get("parent_id") or merged.get("parentID"),
        "version": merged.get("version"),
        "directory": merged.get("directory"),
        "project_id": merged.get("project_id") or merged.get("projectID"),
        "time_created": merged.get("time_created") or _time(time),
    }


# ------------------------------------------------------------------------------------------
# opencode.db


def read_database(path: Path) -> list[SnapshotSession]:
    """Every session in an ``opencode.db``, read-only; problems become parse issues."""
    path = Path(path)
    try:
        con, note = open_sqlite_readonly(path)
    except (sqlite3.Error, OSError) as exc:
        return [SnapshotSession(path.name, [db_issue(path, f"cannot open the database: {exc}")])]
    try:
        sessions = _read_database(con, path)
    except SQLITE_ERRORS as exc:
        sessions = [
            SnapshotSession(path.name, [db_issue(path, f"cannot read the database: {exc}")])
        ]
    finally:
        con.close()
    if note and sessions:
        sessions[0].events.insert(0, db_issue(path, f"warning: {note}"))
    return sessions


def _rows(
    con: sqlite3.Connection, sql: str, args: tuple[Any, ...] = ()
) -> Iterator[dict[str, Any]]:
    cursor = con.execute(sql, args)
    names = [d[0] for d in cursor.description]
    for row in cursor:
        yield {
            name: (_text(value) if isinstance(value, bytes) and name != "data" else value)
            for name, value in zip(names, row, strict=True)
        }


def _read_database(con: sqlite3.Connection, path: Path) -> list[SnapshotSession]:
    tables = sqlite_tables(con)
    missing = [t for t in REQUIRED_TABLES if t not in tables]
    if missing:
        names = ", ".join(missing)
        reason = (
            f"no {names} table{'s' if len(missing) > 1 else ''}: not an OpenCode database "
            "(opencode.db has session, message and part)"
        )
        return [SnapshotSession(path.name, [db_issue(path, reason)])]
    problems: list[Event] = []
    for table, needed in (
        ("message", ("id", "session_id", "data")),
        ("part", ("id", "message_id", "data")),
    ):
        absent = [c for c in needed if c not in sqlite_columns(con, table)]
        if absent:
            problems.append(db_issue(path, f"table {table} has no column {', '.join(absent)}"))
    if problems:
        return [SnapshotSession(path.name, problems)]
    session_cols = sqlite_columns(con, "session")
    order = "time_created, id" if "time_created" in session_cols else "rowid"
    issues: list[Event] = []
    sessions: dict[str, dict[str, Any]] = {}
    for row in _rows(con, f"SELECT * FROM session ORDER BY {order}"):
        fields = _session_fields(row, path, issues)
        if fields["id"] is not None:
            sessions[str(fields["id"])] = fields
    message_cols = sqlite_columns(con, "message")
    msg_order = "time_created, id" if "time_created" in message_cols else "id"
    orphans = {_text(sid) for (sid,) in con.execute("SELECT DISTINCT session_id FROM message")}
    for key in sorted(orphans - set(sessions)):
        sessions[key] = {"id": key, "title": f"{key} (no session row)"}
    out: list[SnapshotSession] = []
    for index, (sid, fields) in enumerate(sessions.items()):
        session_issues = issues if index == 0 else []
        messages = _db_messages(con, path, sid, msg_order, session_issues)
        out.append(convert_session(path, fields, messages, session_issues))
    if not out:
        out.append(SnapshotSession(path.name, issues))
    return out


def _db_messages(
    con: sqlite3.Connection, path: Path, session_id: str, order: str, issues: list[Event]
) -> list[OcMessage]:
    messages: dict[str, OcMessage] = {}
    sql = f"SELECT id, data FROM message WHERE session_id = ? ORDER BY {order}"
    for row in _rows(con, sql, (session_id,)):
        msg_id = str(row["id"])
        info = load_json_value(row["data"], f"message {msg_id}", path, issues)
        if info is None:
            continue
        if not isinstance(info, dict):
            issues.append(db_issue(path, f"message {msg_id}: data is {type_name(info)}"))
            continue
        messages[msg_id] = OcMessage(info={**info, "id": msg_id})
    sql = (
        "SELECT p.id, p.message_id, p.data FROM part p JOIN message m ON m.id = p.message_id "
        "WHERE m.session_id = ? ORDER BY p.message_id, p.id"
    )
    for row in _rows(con, sql, (session_id,)):
        owner = messages.get(str(row["message_id"]))
        if owner is None:
            continue  # the message itself was unreadable (already an issue)
        part_id = str(row["id"])
        part = load_json_value(
            row["data"], f"part {part_id} of message {row['message_id']}", path, issues
        )
        if isinstance(part, dict):
            owner.parts.append({**part, "id": part_id})
        elif part is not None:
            issues.append(db_issue(path, f"part {part_id}: data is {type_name(part)}"))
    return list(messages.values())


def sniff_database(head: Head) -> float:
    if not head.is_sqlite:
        return 0.0
    tables = sqlite_tables_of(head.path)
    if all(t in tables for t in REQUIRED_TABLES):
        return 0.95
    return 0.0


# ------------------------------------------------------------------------------------------
# The legacy storage folder


def storage_root(path: Path) -> Path | None:
    """The folder with ``session/``, ``message/`` and ``part/``: ``path`` or its ``storage/``."""
    for candidate in (path, path / "storage"):
        if all((candidate / name).is_dir() for name in REQUIRED_TABLES):
            return candidate
    return None


def _load_file(file: Path, issues: list[Event]) -> dict[str, Any] | None:
    try:
        raw = file.read_bytes()
    except OSError as exc:
        issues.append(db_issue(file, f"cannot read {file.name}: {exc.strerror or exc}"))
        return None
    value = load_json_value(raw, file.name, file, issues)
    if value is None:
        return None
    if not isinstance(value, dict):
        issues.append(db_issue(file, f"{file.name}: a JSON {type_name(value)}, not an object"))
        return None
    return value


def read_storage(path: Path) -> list[SnapshotSession]:
    """Every session of a legacy ``storage/`` folder (read only, file by file)."""
    path = Path(path)
    root = storage_root(path)
    if root is None:
        reason = "no session/, message/ and part/ folders: not OpenCode's storage folder"
        return [SnapshotSession(path.name, [db_issue(path, reason)])]
    issues: list[Event] = []
    sessions: dict[str, dict[str, Any]] = {}
    for file in sorted((root / "session").glob("*/*.json")):
        value = _load_file(file, issues)
        if value is None:
            continue
        fields = _session_fields({**value, "data": None}, file, issues)
        sessions[str(fields["id"] or file.stem)] = {**fields, "id": fields["id"] or file.stem}
    for folder in sorted((root / "message").iterdir()):
        if folder.is_dir() and folder.name not in sessions:
            sessions[folder.name] = {"id": folder.name, "title": f"{folder.name} (no session file)"}
    ordered = sorted(sessions.values(), key=lambda s: (as_int(s.get("time_created")), str(s["id"])))
    out: list[SnapshotSession] = []
    for index, fields in enumerate(ordered):
        session_issues = issues if index == 0 else []
        messages = _storage_messages(root, str(fields["id"]), session_issues)
        out.append(convert_session(root, fields, messages, session_issues))
    if not out:
        out.append(SnapshotSession(root.name, issues))
    return out


def _storage_messages(root: Path, session_id: str, issues: list[Event]) -> list[OcMessage]:
    messages: list[OcMessage] = []
    for file in sorted((root / "message" / session_id).glob("*.json")):
        info = _load_file(file, issues)
        if info is None:
            continue
        message = OcMessage(info={**info, "id": str(info.get("id") or file.stem)})
        for part_file in sorted((root / "part" / message.info["id"]).glob("*.json")):
            part = _load_file(part_file, issues)
            if part is not None:
                message.parts.append({**part, "id": str(part.get("id") or part_file.stem)})
        message.parts.sort(key=lambda p: str(p["id"]))
        messages.append(message)
    messages.sort(key=lambda m: (_time(m.info.get("time")) or 0, str(m.info["id"])))
    return messages


def sniff_storage(head: Head) -> float:
    if not head.is_dir:
        return 0.0
    root = storage_root(head.path)
    if root is None:
        return 0.0
    has_json = any(True for _ in (root / "message").glob("*/*.json"))
    return 0.95 if has_json or any(True for _ in (root / "session").glob("*/*.json")) else 0.6


# ------------------------------------------------------------------------------------------
# Log files

_LEVELS = ("DEBUG", "INFO", "WARN", "ERROR")
LOG_LINE = re.compile(
    r"^(?P<level>DEBUG|INFO|WARN|ERROR)\s+(?P<ts>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})"
    r"(?:\.\d+)?Z?\s+\+(?P<ms>\d+)ms(?:\s+(?P<rest>.*))?$"
)
_TAG = re.compile(r"^(?P<key>[A-Za-z_][\w.\-]*)=(?P<value>\S*)$")
# a key starts a word (tried from inside a long word, it would take time growing with the
# square of the word's length)
_LOGFMT = re.compile(r'(?<![\w.\-])(?P<key>[A-Za-z_][\w.\-]*)=(?P<value>"(?:[^"\\]|\\.)*"|\S*)')
# A line of another layout with a level and a time in its first LOOSE_HEAD characters is a log
# record too (looking further would take time growing with the square of a long line's length)
LOOSE_HEAD = 256
_LOOSE = re.compile(
    r"\b(?:TRACE|DEBUG|INFO|WARN(?:ING)?|ERROR|FATAL)\b.*?\d{1,2}:\d{2}:\d{2}"
    r"|\d{1,2}:\d{2}:\d{2}.*?\b(?:TRACE|DEBUG|INFO|WARN(?:ING)?|ERROR|FATAL)\b",
    re.IGNORECASE,
)


def split_tags(rest: str) -> tuple[dict[str, str], str]:
    """Leading ``key=value`` tokens (classic log.ts does not quote values) and the message."""
    tags: dict[str, str] = {}
    tokens = rest.split(" ")
    index = 0
    while index < len(tokens):
        match = _TAG.match(tokens[index])
        if match is None:
            break
        tags[match["key"]] = match["value"]
        index += 1
    return tags, " ".join(tokens[index:]).strip()


def _logfmt(text: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for match in _LOGFMT.finditer(text):
        value = match["value"]
        if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
            try:
                value = orjson.loads(value)
            except orjson.JSONDecodeError:
                value = value[1:-1]
        fields[match["key"]] = str(value)
    return fields


@dataclass
class _Found:
    pruned: int | None
    total: int | None
    span: SourceSpan
    timestamp: str | None


def _int_or_none(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def log_time(value: str | None) -> str | None:
    """A record's time as the other OpenCode readers write times (ISO 8601, ``+00:00``)."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).isoformat()
    except ValueError:
        return value


class OpenCodeLogParser(LineParser):
    """OpenCode's log file: model requests as ``RequestSent``, prune attempts as ``Pruned``, a
    provider's refusal of a prompt as too long as ``RequestRejected``, every other record as
    ``LogLine``.

    Two layouts: the classic ``LEVEL  time +Nms service=... message`` and 1.18's logfmt
    (``timestamp=... level=... run=... message=...``, no ``service=`` tag, several processes
    appending to one file, told apart by ``run=``). A prune is ``pruning``, then ``found`` with
    ``pruned=P total=T``, then, only when P is above OpenCode's minimum (20,000) and the parts
    were marked, ``pruned count=N``. The 1.18 writer is batched and a process that exits loses
    its last lines: a ``found`` above the minimum is a prune that was applied even when its
    ``pruned`` record is missing (its count is then unknown).
    """

    format_name = "opencode-log"

    def __init__(self, source: int = 0, path: str = "") -> None:
        super().__init__(source, path)
        self._found: dict[str, _Found] = {}  # per process: a prune found, its count to come
        self._model = ""
        self._processing: dict[str, str] = {}  # per process: the message being answered
        self._after_record = False  # the previous line was a log record (for continuations)

    def parse_line(self, line: bytes, span: SourceSpan) -> Iterable[Event]:
        out: list[Event] = []
        text = decode_text(line, self, span, out)
        match = LOG_LINE.match(text)
        if match is not None:
            tags, message = split_tags(match["rest"] or "")
            timestamp = match["ts"] + "+00:00"
            self._record(match["level"], tags, message, timestamp, span, out)
            self._after_record = True
            return out
        if self._after_record and text[:1] in (" ", "\t"):  # a stack trace or wrapped value
            out.append(LogLine(text=text.strip()[:200], tag="continuation", span=span))
            return out
        fields = _logfmt(text) if "level=" in text else {}
        if fields.get("level") and ("message" in fields or "msg" in fields):
            level = fields.pop("level").upper()
            message = fields.pop("message", "") or fields.pop("msg", "")
            timestamp = log_time(fields.pop("timestamp", "") or fields.pop("ts", ""))
            self._record(level, fields, message, timestamp, span, out)
            self._after_record = True
            return out
        if _LOOSE.search(text, 0, LOOSE_HEAD):
            out.append(LogLine(text=text[:200], span=span))
            self._after_record = True
            return out
        self._after_record = False
        out.append(self.issue(span, "not an OpenCode log record", line))
        return out

    def _record(
        self,
        level: str,
        tags: dict[str, str],
        message: str,
        timestamp: str | None,
        span: SourceSpan,
        out: list[Event],
    ) -> None:
        service = tags.get("service")
        run = tags.get("run") or tags.get("fiber") or ""
        if service in (None, PRUNE_SERVICE) and self._prune_record(
            message, tags, run, timestamp, span, out
        ):
            return
        if message == "stream" and tags.get("small") != "true" and "modelID" in tags:
            self._flush_found(run, out)
            model = tags.get("modelID")
            if not self._model:
                self._model = model or ""
                out.append(SessionInfo(model=model, agent="opencode", timestamp=timestamp))
            # the message it answers into (named by the ``process`` record before it)
            request = self._processing.pop(run, None)
            out.append(RequestSent(model=model, request_id=request, timestamp=timestamp, span=span))
        elif message == "process" and "messageID" in tags:
            self._processing[run] = tags["messageID"]
        elif (
            message == "created" and (tags.get("id") or "").startswith("ses") and "version" in tags
        ):
            out.append(
                SessionInfo(
                    agent="opencode",
                    version=tags.get("version"),
                    session_id=tags.get("id"),
                    timestamp=timestamp,
                )
            )
        others = " ".join(f"{k}={v}" for k, v in tags.items() if k != "service")
        text = f"{others} {message}".strip() if others else message
        out.append(
            LogLine(text=text[:200], level=level, tag=service, timestamp=timestamp, span=span)
        )
        if level in ("ERROR", "WARN"):
            said = tags.get("error") or text
            refused = rejection({"name": tags.get("name") or message, "data": {"message": said}})
            if refused is not None:
                out.append(refused.model_copy(update={"timestamp": timestamp, "span": span}))

    def _prune_record(
        self,
        message: str,
        tags: dict[str, str],
        run: str,
        timestamp: str | None,
        span: SourceSpan,
        out: list[Event],
    ) -> bool:
        """A record of the prune: handled (True), or another record (False)."""
        if message == "pruning":
            self._flush_found(run, out)
            return False  # kept as a log line too
        if message == "found" and "pruned" in tags:
            self._flush_found(run, out)
            found = _Found(
                pruned=_int_or_none(tags.get("pruned")),
                total=_int_or_none(tags.get("total")),
                span=span,
                timestamp=timestamp,
            )
            others = " ".join(f"{k}={v}" for k, v in tags.items() if k != "service")
            out.append(
                LogLine(
                    text=f"{others} found"[:200],
                    tag=tags.get("service"),
                    level="INFO",
                    timestamp=timestamp,
                    span=span,
                )
            )
            if found.pruned is not None and found.pruned > OPENCODE_PRUNE_MINIMUM:
                self._found[run] = found  # applied: its count comes in the next record
            else:
                out.append(self._pruned(found, applied=False, count=0))
            return True
        if message == "pruned" and "count" in tags:
            held = self._found.pop(run, None)
            found = held or _Found(None, None, span, timestamp)
            event = self._pruned(found, applied=True, count=_int_or_none(tags.get("count")))
            out.append(event.model_copy(update={"span": span, "timestamp": timestamp}))
            return True
        return False

    @staticmethod
    def _pruned(found: _Found, *, applied: bool, count: int | None) -> Pruned:
        return Pruned(
            tokens_recovered=found.pruned,
            scanned_tokens=found.total,
            outputs_pruned=count,
            applied=applied,
            reason="prune",
            timestamp=found.timestamp,
            span=found.span,
        )

    def _flush_found(self, run: str, out: list[Event]) -> None:
        found = self._found.pop(run, None)
        if found is not None:  # applied; its ``pruned`` record is lost
            out.append(self._pruned(found, applied=True, count=None))

    def end_of_input(self) -> Iterable[Event]:
        out: list[Event] = []
        for run in list(self._found):
            self._flush_found(run, out)
        return out


# 1.18's Effect logger: ``timestamp=... level=... run=<process> message=...``
LOGFMT_RECORD = re.compile(r"^timestamp=\S+ level=[A-Za-z]+ (?:\S+ )*?run=\S+ message=")


def sniff_log(head: Head) -> float:
    lines = head.lines[:200]
    if not lines:
        return 0.0
    records = 0
    with_service = 0
    for line in lines:
        match = LOG_LINE.match(line)
        if match is not None:
            records += 1
            if "service=" in (match["rest"] or ""):
                with_service += 1
        elif LOGFMT_RECORD.match(line):
            records += 1
            with_service += 1  # 1.18 dropped the tag; its records are this shape throughout
    if with_service == 0:
        return 0.0
    if records * 2 < len(lines):
        return 0.3
    return 0.9


# ------------------------------------------------------------------------------------------

LOG_SPEC = register(
    FormatSpec(
        name="opencode-log",
        description="OpenCode log files (prune attempts of session.compaction)",
        reads="~/.local/share/opencode/log/*.log, or --print-logs stderr",
        parser=OpenCodeLogParser,
        sniff=sniff_log,
        default_profile="opencode",
    )
)

DB_SPEC = register(
    FormatSpec(
        name="opencode-db",
        description="OpenCode's SQLite database (v1.2+), every session, read-only",
        reads="~/.local/share/opencode/opencode.db (or $OPENCODE_DB)",
        parser=None,
        sniff=sniff_database,
        default_profile="opencode",
        snapshot=read_database,
    )
)

STORAGE_SPEC = register(
    FormatSpec(
        name="opencode-storage",
        description="OpenCode's JSON storage folder (before v1.2), every session",
        reads="~/.local/share/opencode/storage/ (session/, message/, part/ folders of *.json)",
        parser=None,
        sniff=sniff_storage,
        default_profile="opencode",
        snapshot=read_storage,
        folder=True,
    )
)
