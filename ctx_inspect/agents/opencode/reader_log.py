"""OpenCode's log files: ``~/.local/share/opencode/log/*.log``, or ``--print-logs`` stderr.

Both of OpenCode's layouts: the classic ``LEVEL  time +Nms service=... message`` records, and
1.18's logfmt records (``timestamp=... level=... run=... message=...``, no ``service=`` tag,
several processes in one file). Model requests (``stream``, the title request excepted) become
``RequestSent``; a prune is ``pruning``, ``found`` (``pruned=P total=T``) and, when P is above
the minimum, ``pruned count=N``: one ``Pruned`` per attempt, applied when P is above OpenCode's
minimum (20,000); a provider's refusal of a prompt as too long becomes ``RequestRejected``;
every other record is a ``LogLine``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import orjson

from ctx_inspect.agents.opencode.records import rejection
from ctx_inspect.core.model import (
    Event,
    LogLine,
    Pruned,
    RequestSent,
    SessionInfo,
    SourceSpan,
)
from ctx_inspect.formats.base import LineParser, decode_text
from ctx_inspect.formats.registry import FormatSpec, Head, register

PRUNE_SERVICE = "session.compaction"
OPENCODE_PRUNE_MINIMUM = 20_000  # PRUNE_MINIMUM: a prune above it is applied


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
