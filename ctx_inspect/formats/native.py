"""The native event format: ctx-inspect's own JSON Lines (documented in ``docs/format.md``).

The first line is a header ``{"format": "ctx-inspect", "version": 1, "created", "producer", ...}``;
every following line is one event, as the pydantic model dumps it without defaults and without
its span (a span points into the file the event was first read from; a reader of this file sets
it to the event's own line, so bodies can be read back from here). ``write_events`` writes a
stream, ``export_events`` writes a file atomically; ``NativeParser`` reads one back.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import tempfile
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import orjson
from pydantic import TypeAdapter, ValidationError

from ctx_inspect import __version__
from ctx_inspect.core.model import (
    EVENT_TYPES,
    Event,
    Message,
    MessageAdded,
    Origin,
    SessionInfo,
    SourceSpan,
)
from ctx_inspect.core.profiles import profile_names
from ctx_inspect.formats.base import LineParser, shown
from ctx_inspect.formats.registry import FormatSpec, Head, register

FORMAT_TAG = "ctx-inspect"
FORMAT_VERSION = 1
EVENT_TAGS: frozenset[str] = frozenset(str(cls.model_fields["type"].default) for cls in EVENT_TYPES)
_BOM = b"\xef\xbb\xbf"


@functools.cache
def event_adapter() -> TypeAdapter[Event]:
    """The validator of one event (built on first use: no work at import time)."""
    return TypeAdapter(Event)


# ------------------------------------------------------------------------------------------
# Writing


def make_header(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The header line's object; ``extra`` adds fields (``source``, ``profile``, ...)."""
    header: dict[str, Any] = {
        "format": FORMAT_TAG,
        "version": FORMAT_VERSION,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "producer": f"ctx-inspect {__version__}",
    }
    for key, value in (extra or {}).items():
        if key not in ("format", "version"):
            header[key] = value
    return header


def event_record(event: Event) -> dict[str, Any]:
    """One event as the object written on its line: ``type`` first, defaults and span left out."""
    body = event.model_dump(mode="json", exclude_none=True, exclude_defaults=True, exclude={"span"})
    body.pop("type", None)
    return {"type": event.type, **body}


def dumps_line(record: dict[str, Any]) -> str:
    """Compact JSON text of one line (without the newline)."""
    try:
        return orjson.dumps(record).decode()
    except TypeError:  # e.g. a lone surrogate in text: escape it rather than fail the export
        return json.dumps(record, separators=(",", ":"), ensure_ascii=True)


def write_events(
    events: Iterable[Event],
    fh: IO[str],
    header_extra: dict[str, Any] | None = None,
    *,
    header: bool = True,
) -> int:
    """Write the header and one line per event to ``fh``; return the number of events written.

    ``header=False`` appends events to a stream that already has its header (a live file written
    step by step). ``fh`` should be opened with ``encoding="utf-8", newline="\\n"``; for an atomic
    file write, use ``export_events`` (or write to a temporary file and rename it).
    """
    if header:
        fh.write(dumps_line(make_header(header_extra)) + "\n")
    count = 0
    for event in events:
        fh.write(dumps_line(event_record(event)) + "\n")
        count += 1
    return count


def export_events(
    path: Path, events: Iterable[Event], header_extra: dict[str, Any] | None = None
) -> int:
    """Write ``events`` to ``path`` atomically (a temporary file beside it, then a rename)."""
    path = Path(path)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            count = write_events(events, fh, header_extra)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    return count


# ------------------------------------------------------------------------------------------
# Reading


def _field_path(loc: tuple[int | str, ...], tag: str) -> str:
    parts = list(loc)
    if parts and parts[0] == tag:  # the discriminated union puts the tag first
        parts = parts[1:]
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(event)"


def _without(value: dict[str, Any], locs: list[tuple[int | str, ...]], tag: str) -> Any:
    """A copy of ``value`` without the fields at ``locs`` (pydantic error locations); only
    the objects and arrays on the way to a field are copied (a deep copy of the whole value
    would recurse as deep as a hostile input nests)."""
    result: Any = dict(value)
    for loc in locs:
        path = list(loc[1:] if loc and loc[0] == tag else loc)
        node: Any = result
        for key in path[:-1]:
            try:
                inner = node[key]
            except (KeyError, IndexError, TypeError):
                node = None
                break
            if not isinstance(inner, dict | list):
                node = None
                break
            node[key] = node = inner.copy()
        if isinstance(node, dict) and path:
            node.pop(path[-1], None)
    return result


class NativeParser(LineParser):
    """Reads ctx-inspect event files; each event's span is set to its own line."""

    format_name = "native"

    def __init__(self, source: int = 0, path: str = "") -> None:
        super().__init__(source, path)
        self.header: dict[str, Any] | None = None
        self._records = 0
        self._newer = False  # the header announced a newer format version

    def parse_line(self, line: bytes, span: SourceSpan) -> Iterable[Event]:
        out: list[Event] = []
        if span.offset == 0 and line.startswith(_BOM):
            line = line[3:]
        value = self.load_json(line, span, out)
        if value is None:
            if not out:
                out.append(self.issue(span, "not an event object (null)", line))
            return out
        self._records += 1
        if isinstance(value, dict) and value.get("format") == FORMAT_TAG and "type" not in value:
            self._read_header(value, span, line, out)
            return out
        if self._records == 1:
            out.append(
                self.issue(
                    span, "no ctx-inspect header on the first line; events read anyway", line
                )
            )
        out.extend(self.read_event(value, span, line))
        return out

    def _read_header(
        self, header: dict[str, Any], span: SourceSpan, line: bytes, out: list[Event]
    ) -> None:
        if self.header is None and self._records == 1:
            self.header = header
            out.extend(_recorded_info(header, span))
        else:
            where = "another ctx-inspect header" if self.header else "a header after events"
            reason = f"{where} (exports joined?); what follows it is read on"
            out.append(self.issue(span, f"warning: {reason}", line))
        version = header.get("version")
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            out.append(self.issue(span, f"header has no valid version ({shown(version)})", line))
        elif version > FORMAT_VERSION and not self._newer:
            self._newer = True
            out.append(
                self.issue(
                    span,
                    f"warning: written by a newer ctx-inspect (format version {version}, "
                    f"this one reads {FORMAT_VERSION}); reading what it can",
                    line,
                )
            )

    def read_event(self, value: Any, span: SourceSpan, raw: bytes = b"") -> list[Event]:
        """One line's object as an event with this line's span, or a ParseIssue saying why not."""
        if not isinstance(value, dict):
            kind = "array" if isinstance(value, list) else type(value).__name__
            return [self.issue(span, f"not an event object ({kind})", raw)]
        tag = value.get("type")
        if not isinstance(tag, str):
            return [self.issue(span, "no event type", raw)]
        if tag not in EVENT_TAGS:
            return [self.issue(span, f"unknown event type {tag}", raw)]
        if "span" in value:
            value = {k: v for k, v in value.items() if k != "span"}
        try:
            event = event_adapter().validate_python(value)
        except ValidationError as exc:
            errors = exc.errors()
            if self._newer and all(e["type"] == "extra_forbidden" for e in errors):
                # A newer writer added fields this reader does not know: read the rest.
                lenient = _without(value, [e["loc"] for e in errors], tag)
                try:
                    event = event_adapter().validate_python(lenient)
                except ValidationError:
                    pass
                else:
                    return [_with_span(event, span)]
            first = errors[0]
            reason = f"invalid {tag} event: {_field_path(first['loc'], tag)}: {first['msg']}"
            if len(errors) > 1:
                reason += f" (and {len(errors) - 1} more)"
            return [self.issue(span, reason, raw)]
        return [_with_span(event, span)]

    def messages_at(self, data: bytes, span: SourceSpan) -> list[Message]:
        line = data.rstrip(b"\r\n")
        if line.startswith(_BOM):
            line = line[3:]
        out: list[Event] = []
        value = self.load_json(line, span, out)
        if value is None:
            return []
        # A message event as an export writes it (nearly every line read back): its message
        # is validated alone. Any other line is read whole, as the first read did.
        message = _plain_message(value)
        if message is not None:
            return [message]
        return [
            e.message for e in self.read_event(value, span, line) if isinstance(e, MessageAdded)
        ]


# The fields of a message event, each checked below: a line with any other (a newer writer's)
# is read whole.
_MESSAGE_KEYS = frozenset({"type", "message", "tokens", "tokens_origin", "timestamp", "span"})
_ORIGINS = frozenset(origin.value for origin in Origin)
_validate_message = Message.__pydantic_validator__.validate_python  # Message.model_validate


def _plain_message(value: Any) -> Message | None:
    """The message of a message event whose other fields hold plain values (what an export
    writes), validated on its own: the message ``read_event`` gives, without validating and
    making the event around it (whose span is dropped anyway). None for any other line, and
    for a value ``read_event`` would convert or refuse, left to it."""
    if (
        type(value) is not dict
        or value.get("type") != "message"
        or not value.keys() <= _MESSAGE_KEYS
    ):
        return None
    tokens = value.get("tokens")
    origin = value.get("tokens_origin")
    timestamp = value.get("timestamp")
    message = value.get("message")
    if (
        (tokens is not None and type(tokens) is not int)
        or (origin is not None and (type(origin) is not str or origin not in _ORIGINS))
        or (timestamp is not None and type(timestamp) is not str)
        or type(message) is not dict
    ):
        return None
    try:
        plain: Message = _validate_message(message)
    except ValidationError:
        return None
    return plain


def _with_span(event: Event, span: SourceSpan) -> Event:
    """The event just validated, given this line's span in place: it is new and not yet
    shared, and a copy per line would cost more than reading the line."""
    object.__setattr__(event, "span", span)
    return event


def sniff(head: Head) -> float:
    lines = head.lines
    if not lines:
        return 0.0
    try:
        first = orjson.loads(lines[0].lstrip("\ufeff"))
    except orjson.JSONDecodeError:
        return 0.0
    if not isinstance(first, dict):
        return 0.0
    if first.get("format") == FORMAT_TAG:
        return 1.0
    if first.get("type") in EVENT_TAGS:  # events without their header
        try:
            event_adapter().validate_python({k: v for k, v in first.items() if k != "span"})
        except ValidationError:
            return 0.0
        return 0.6
    return 0.0


def recorded_profile(head: Head) -> str | None:
    """The profile an export of ours names in its header (None for any other file)."""
    first = head.data.split(b"\n", 1)[0]
    if first.startswith(_BOM):
        first = first[3:]
    try:
        header = orjson.loads(first)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(header, dict) or header.get("format") != FORMAT_TAG:
        return None
    name = header.get("profile")
    return name if isinstance(name, str) and name in profile_names() else None


def _recorded_info(header: dict[str, Any], span: SourceSpan) -> list[Event]:
    """The profile and settings an export was made with, as the session's facts (the loader
    uses them for the settings the user does not set)."""
    name = header.get("profile")
    settings = header.get("settings")
    if not isinstance(name, str) or not isinstance(settings, dict):
        return []
    window = settings.get("context_window")
    return [
        SessionInfo(
            context_window=window if isinstance(window, int) and window > 0 else None,
            extra={"profile": name, "settings": settings},
            span=span,
        )
    ]


SPEC = register(
    FormatSpec(
        name="native",
        description="ctx-inspect's own event format (JSON Lines with a header line)",
        reads="*.jsonl files written by ctx-inspect export",
        parser=NativeParser,
        sniff=sniff,
        default_profile="generic",
        recorded_profile=recorded_profile,
    )
)
