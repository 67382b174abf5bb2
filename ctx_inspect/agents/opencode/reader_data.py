"""OpenCode's data folder (``$XDG_DATA_HOME/opencode``: ``opencode.db`` and ``log/``), and one
session of one run's files (``--merge``: the database, the log, ``opencode run`` stdouts).

The database is the record: every message, every request's tokens, compactions, pruned parts.
The log adds what the database does not keep: each prune's ``found pruned=P total=T`` (OpenCode's
own figures) and the attempts that pruned nothing, a provider's refusal of a prompt, and the
process's other records. A run's stdout repeats what the database has (steps, tokens, outputs)
and adds nothing to it. So, merged:

- with a database, its session (the one the other files name, else the first) is the base;
  the log's prunes are matched to the database's by time (the log's figures are kept on them),
  its other records are put in by time; the stdouts are left out (no request counted twice);
- without one, the stdouts are the base: a request of the log is the stdout's request that
  started within a few seconds after it, and the log's requests no stdout shows (a run's last
  answer is often missing from its stdout) are kept as requests of their own;
- the log alone is read as it is.

Only the log records within the base session's time are taken (one log serves every session
of every process).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import cast

from ctx_inspect.agents.opencode.policy import PARTS_NOT_SHOWN
from ctx_inspect.agents.opencode.reader_db import DB_SPEC, read_database
from ctx_inspect.agents.opencode.reader_log import LOG_SPEC, OpenCodeLogParser, sniff_log
from ctx_inspect.agents.opencode.reader_run import RUN_SPEC, OpenCodeRunParser
from ctx_inspect.agents.opencode.reader_storage import STORAGE_SPEC, read_storage
from ctx_inspect.core.model import (
    Event,
    LogLine,
    MessageAdded,
    Pruned,
    RequestRejected,
    RequestSent,
    Role,
    SessionInfo,
)
from ctx_inspect.formats.base import read_file
from ctx_inspect.formats.registry import FormatSpec, Head, SnapshotSession, read_head, register
from ctx_inspect.formats.sqlite import db_issue

DB_NAME = "opencode.db"
PRUNE_WINDOW_MS = 5_000  # a logged prune and the parts it marked
REQUEST_WINDOW_MS = 5_000  # a logged request and the stdout's step_start
REFUSAL_WINDOW_MS = 10_000
SESSION_MARGIN_MS = 60_000  # log records this long after a session's last event are its own
SESSION_LEAD_MS = 2_000  # and this long before its first (its creation, its first request)
_SESSION_TAG = re.compile(r"\bsession\.id=(\S+)")


def _ms(timestamp: str | None) -> float | None:
    if not timestamp:
        return None
    try:
        return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp() * 1000
    except ValueError:
        return None


def _stream(
    parser_type: type[OpenCodeLogParser] | type[OpenCodeRunParser], path: Path
) -> list[Event]:
    parser = parser_type(0, str(path))
    events: list[Event] = []
    for batch in read_file(parser, path, parallel=False):
        events.extend(cast(list[Event], batch))  # bodies read: events only
    events.extend(parser.finish())
    return events


def _in_time_order(logs: list[list[Event]]) -> list[Event]:
    """The records of several log files as one, by time (each file keeps its order)."""
    return sorted((e for log in logs for e in log), key=lambda e: _ms(e.timestamp) or -1.0)


# ------------------------------------------------------------------------------------------
# Putting the log into a base session


def _keys(events: Sequence[Event]) -> list[float]:
    """A time for every event, never going back (an event without a time takes the one
    before it)."""
    keys: list[float] = []
    latest = float("-inf")
    for event in events:
        at = _ms(event.timestamp)
        if at is not None and at > latest:
            latest = at
        keys.append(latest)
    return keys


def _nearest(
    candidates: list[tuple[int, float]], at: float, before: float, after: float
) -> int | None:
    """The first candidate (index, time) within [at - before, at + after]; it is taken."""
    for k, (index, time) in enumerate(candidates):
        if at - before <= time <= at + after:
            del candidates[k]
            return index
    return None


def _requests_shown(base: Sequence[Event], keys: list[float], log: Sequence[Event]) -> set[int]:
    """The log's requests the base shows too: for each request of the base, the latest of the
    log's not taken yet that was logged at most a few seconds before it (a stdout's
    ``step_start`` is written once the answer starts)."""
    logged = [
        (order, at, e.request_id)
        for order, e in enumerate(log)
        if isinstance(e, RequestSent) and (at := _ms(e.timestamp)) is not None
    ]
    by_message = {message: order for order, _, message in logged if message}
    taken: set[int] = set()
    for index, event in enumerate(base):
        if not isinstance(event, RequestSent):
            continue
        answer = _answer_id(base, index)
        if answer in by_message:  # the log names the message the request answered into
            taken.add(by_message[answer])
            continue
        at = keys[index]
        fits = [
            o for o, t, _ in logged if at - REQUEST_WINDOW_MS <= t <= at + 500 and o not in taken
        ]
        if fits:
            taken.add(fits[-1])
    return taken


def _answer_id(base: Sequence[Event], index: int) -> str | None:
    """The id of the answer to the request at ``index`` (the message it was written into)."""
    for at in range(index + 1, len(base)):
        event = base[at]
        if isinstance(event, RequestSent):
            return None
        if isinstance(event, MessageAdded) and event.message.role is Role.ASSISTANT:
            return event.message.id
    return None


def _first_named(log: Sequence[Event], ids: set[str]) -> float:
    """When the log first names the session (its creation, its first request)."""
    for event in log:
        named = (
            event.session_id in ids
            if isinstance(event, SessionInfo)
            else isinstance(event, LogLine)
            and (found := _SESSION_TAG.search(event.text)) is not None
            and found.group(1) in ids
        )
        at = _ms(event.timestamp)
        if named and at is not None:
            return at
    return float("inf")


def _of_another_session(text: str, ids: set[str]) -> bool:
    """A log record that names a session other than the base's."""
    found = _SESSION_TAG.search(text)
    return bool(found and ids and found.group(1) not in ids)


def fold_log(base: list[Event], log: list[Event], *, keep_requests: bool) -> list[Event]:
    """The base session's events with the log's put in (see the module docstring)."""
    keys = _keys(base)
    timed = [k for k in keys if k != float("-inf")]
    if not timed:
        return base
    ids = _session_ids(base)
    first = min(timed[0], _first_named(log, ids)) - SESSION_LEAD_MS
    last = timed[-1] + SESSION_MARGIN_MS
    events = list(base)
    prunes = [(i, keys[i]) for i, e in enumerate(base) if isinstance(e, Pruned) and e.applied]
    refusals = [(i, keys[i]) for i, e in enumerate(base) if isinstance(e, RequestRejected)]
    shown = _requests_shown(base, keys, log) if keep_requests else set()
    added: list[tuple[float, int, Event]] = []
    for order, event in enumerate(log):
        at = _ms(event.timestamp)
        if at is None or not first <= at <= last or isinstance(event, SessionInfo):
            continue
        if isinstance(event, LogLine) and _of_another_session(event.text, ids):
            continue
        if isinstance(event, Pruned) and event.applied:
            found = _nearest(prunes, at, PRUNE_WINDOW_MS, PRUNE_WINDOW_MS)
            if found is not None:
                mine = events[found]
                assert isinstance(mine, Pruned)
                events[found] = mine.model_copy(
                    update={
                        "tokens_recovered": event.tokens_recovered
                        if event.tokens_recovered is not None
                        else mine.tokens_recovered,
                        "scanned_tokens": event.scanned_tokens,
                        "outputs_pruned": mine.outputs_pruned or event.outputs_pruned,
                    }
                )
                continue
        elif isinstance(event, RequestRejected):
            found = _nearest(refusals, at, REFUSAL_WINDOW_MS, REFUSAL_WINDOW_MS)
            if found is not None:
                mine = events[found]
                assert isinstance(mine, RequestRejected)
                events[found] = mine.model_copy(
                    update={
                        "tokens": mine.tokens if mine.tokens is not None else event.tokens,
                        "limit": mine.limit if mine.limit is not None else event.limit,
                    }
                )
                continue
        elif isinstance(event, RequestSent) and (not keep_requests or order in shown):
            continue
        if isinstance(event, Pruned) and event.applied:
            event = event.model_copy(update={"reason": PARTS_NOT_SHOWN})
        added.append((at, order, event))
    if not added:
        return events
    out: list[Event] = []
    k = 0
    for at, _, event in sorted(added, key=lambda item: (item[0], item[1])):
        while k < len(events) and keys[k] <= at:
            out.append(events[k])
            k += 1
        out.append(event)
    out.extend(events[k:])
    return out


# ------------------------------------------------------------------------------------------
# One run's files as one session


def _session_ids(events: Sequence[Event]) -> set[str]:
    return {e.session_id for e in events if isinstance(e, SessionInfo) and e.session_id}


def _pick(sessions: list[SnapshotSession], wanted: set[str]) -> list[SnapshotSession]:
    chosen = [s for s in sessions if _session_ids(s.events) & wanted]
    return chosen or sessions[:1]


def merge_run(paths: Sequence[Path], specs: Sequence[FormatSpec]) -> list[SnapshotSession]:
    """One session of one OpenCode run's files (see the module docstring)."""
    bases: list[SnapshotSession] = []
    logs: list[list[Event]] = []
    runs: list[list[Event]] = []
    for path, spec in zip(paths, specs, strict=True):
        if spec.name == DATA_SPEC.name:
            bases.extend(read_data_base(path))
            logs.extend(_stream(OpenCodeLogParser, log) for log in data_logs(path))
        elif spec.name == DB_SPEC.name:
            bases.extend(read_database(path))
        elif spec.name == STORAGE_SPEC.name:
            bases.extend(read_storage(path))
        elif spec.name == LOG_SPEC.name:
            logs.append(_stream(OpenCodeLogParser, path))
        elif spec.name == RUN_SPEC.name:
            runs.append(_stream(OpenCodeRunParser, path))
        else:
            issue = db_issue(path, f"{path.name} ({spec.name}) is not a file of an OpenCode run")
            return [SnapshotSession(path.name, [issue])]
    merged_log = _in_time_order(logs)
    if bases:
        wanted = set().union(*(_session_ids(run) for run in runs))
        chosen = _pick(bases, wanted)
        return [
            SnapshotSession(s.label, fold_log(s.events, merged_log, keep_requests=False))
            for s in chosen
        ]
    if runs:
        ordered = sorted(runs, key=lambda run: min(_keys(run), default=float("inf")))
        base = [e for run in ordered for e in run]
        label = next(iter(_session_ids(base)), "merged")
        return [SnapshotSession(label, fold_log(base, merged_log, keep_requests=True))]
    return [SnapshotSession("log", merged_log)]


# ------------------------------------------------------------------------------------------
# The data folder


def data_root(path: Path) -> Path | None:
    """The folder holding ``opencode.db`` (``path``, or its ``opencode/``)."""
    for candidate in (path, path / "opencode"):
        if (candidate / DB_NAME).is_file():
            return candidate
    return None


def data_logs(path: Path) -> list[Path]:
    root = data_root(path) or path
    folder = root / "log"
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.log") if p.is_file() and _is_log(p))


def _is_log(path: Path) -> bool:
    try:
        return sniff_log(read_head(path)) >= 0.5
    except Exception:
        return False


def read_data_base(path: Path) -> list[SnapshotSession]:
    root = data_root(path)
    if root is None:
        reason = f"no {DB_NAME}: not OpenCode's data folder"
        return [SnapshotSession(path.name, [db_issue(path, reason)])]
    return read_database(root / DB_NAME)


def read_data(path: Path) -> list[SnapshotSession]:
    """Every session of the data folder's database, each with the log's records of its time."""
    sessions = read_data_base(path)
    logs = [_stream(OpenCodeLogParser, log) for log in data_logs(path)]
    if not logs:
        return sessions
    merged_log = _in_time_order(logs)
    return [
        SnapshotSession(s.label, fold_log(s.events, merged_log, keep_requests=False))
        for s in sessions
    ]


def sniff_data(head: Head) -> float:
    if not head.is_dir or data_root(head.path) is None:
        return 0.0
    return 0.97  # above the storage folder's: the database is the newer record


DATA_SPEC = register(
    FormatSpec(
        name="opencode-data",
        description="OpenCode's data folder: opencode.db with the log/ beside it, every session",
        reads="~/.local/share/opencode/ ($XDG_DATA_HOME/opencode: opencode.db and log/*.log)",
        parser=None,
        sniff=sniff_data,
        default_profile="opencode",
        snapshot=read_data,
        folder=True,
        merge=merge_run,
    )
)

# the database, the log, the storage folder and a run's stdout merge the same way
for _spec in (DB_SPEC, LOG_SPEC, STORAGE_SPEC, RUN_SPEC):
    register(dataclasses.replace(_spec, merge=merge_run))
