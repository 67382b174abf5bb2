"""The list of input formats and the detector that picks one by sniffing a file's head."""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import os
import re
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ctx_inspect.core import agents
from ctx_inspect.core.model import Event
from ctx_inspect.errors import InputError
from ctx_inspect.formats.base import Parser

HEAD_BYTES = 64 * 1024
BINARY_SAMPLE = 8 * 1024
MIN_CONFIDENCE = 0.5


SQLITE_MAGIC = b"SQLite format 3\x00"
# what text does not hold: replaced invalid UTF-8, control characters but tab, newline, carriage
# return, form feed and escape
_NOT_TEXT = re.compile("[\ufffd\x00-\x08\x0b\x0e-\x1a\x1c-\x1f]")


@dataclass(frozen=True)
class Head:
    """The first bytes of an input, with the path for extension hints.

    For a folder, ``data`` is empty and ``is_dir`` is true; sniffers of folder formats look at
    the folder's layout through ``path``.
    """

    path: Path
    data: bytes
    is_dir: bool = False

    @property
    def is_sqlite(self) -> bool:
        return self.data.startswith(SQLITE_MAGIC)

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", "replace")

    @property
    def lines(self) -> list[str]:
        """Complete lines of the head (a cut last line is left out unless it is the only one)."""
        text = self.text
        lines = text.split("\n")
        if len(lines) > 1 and len(self.data) >= HEAD_BYTES:
            lines = lines[:-1]
        return [ln.rstrip("\r") for ln in lines if ln.strip()]


@dataclass
class SnapshotSession:
    """One session read whole from an input that is not a byte stream (SQLite, a folder)."""

    label: str  # e.g. the session id or title inside the database
    events: list[Event]


@dataclass(frozen=True)
class FormatSpec:
    """One input format.

    Stream formats (logs, JSON Lines, JSON documents) give a ``parser`` that is fed bytes and can
    follow a growing file. Whole-input formats (SQLite databases, storage folders) give a
    ``snapshot`` function that reads the input at once, read-only, and returns one or more
    sessions; following such an input re-reads it on change. A format whose inputs can be a
    folder of several files of that format (a project folder) gives ``expand``, which lists
    the files to open, each as its own session. Formats of one agent whose streams repeat
    each other (a stdout, a log and a transcript of the same run) give ``stream_merge``;
    an agent whose files of one run are not all streams gives ``merge``.
    """

    name: str
    description: str  # one line
    reads: str  # which files, where they live
    parser: type[Parser] | None
    sniff: Callable[[Head], float]  # confidence 0..1
    default_profile: str = "generic"
    snapshot: Callable[[Path], list[SnapshotSession]] | None = None
    expand: Callable[[Path], list[Path]] | None = None
    folder: bool = False  # accepts a folder path (snapshot or expand)
    module: str = ""  # the registering module (filled in by ``register``)
    # the profile the file itself names (an export of ours), used when the user names none
    recorded_profile: Callable[[Head], str | None] | None = None
    # formats whose streams hold everything this one shows of a run (its messages, requests
    # and figures): merged with one of them, only this stream's log lines and facts are kept
    covered_by: tuple[str, ...] = ()
    # one session of several inputs of one run (``--merge``), for an agent whose files are not
    # all streams (a database beside its log): every input's path and format, in order
    merge: Callable[[Sequence[Path], Sequence[FormatSpec]], list[SnapshotSession]] | None = None
    # how streams of one run merge when these formats know better than their order by time:
    # given each stream's events and its format's name, the events of the one session (None:
    # not a combination they know); used when every stream merged names the same function
    stream_merge: (
        Callable[[Sequence[Sequence[Event]], Sequence[str]], list[Event] | None] | None
    ) = None

    def make_parser(self, source: int = 0, path: str = "") -> Parser:
        """A stream parser for this format (only for formats that have one)."""
        if self.parser is None:
            raise TypeError(f"format {self.name} is read whole, not as a stream")
        return self.parser(source, path)


# The generic readers' modules: the native format first, then the agents' readers (each agent
# lists its own, ``ctx_inspect.core.agents``), then these; ties in detection go to the earlier.
GENERIC_FIRST: tuple[str, ...] = ("ctx_inspect.formats.native",)
GENERIC_LAST: tuple[str, ...] = (
    "ctx_inspect.formats.swe_agent",
    "ctx_inspect.formats.openhands",
    "ctx_inspect.formats.aider",
    "ctx_inspect.formats.openai_chat",
    "ctx_inspect.formats.anthropic_messages",
)


def format_modules() -> tuple[str, ...]:
    """Every module that registers a format, in the order ties in detection are broken."""
    own = tuple(module for agent in agents.all_agents() for module in agent.formats)
    return GENERIC_FIRST + own + GENERIC_LAST


_FORMATS: dict[str, FormatSpec] = {}
_PROBLEMS: dict[str, str] = {}  # reader module -> why it failed to load


def register(spec: FormatSpec) -> FormatSpec:
    if not spec.module:
        origin = spec.parser or spec.snapshot or spec.sniff
        spec = dataclasses.replace(spec, module=getattr(origin, "__module__", ""))
    _FORMATS[spec.name] = spec
    return spec


def all_formats() -> list[FormatSpec]:
    """Every registered format, in the order of ``format_modules`` (ties in detection go to
    the earlier one), whatever order the modules happened to be imported in. A plug-in's
    reader that fails to import is left out and reported by ``problems``."""
    order: dict[str, int] = {}
    for rank, module in enumerate(format_modules()):
        if module in _PROBLEMS:
            continue
        try:
            importlib.import_module(module)
        except Exception as exc:
            if module.startswith("ctx_inspect."):
                raise  # our own readers: a bug, not a plug-in's failure
            _PROBLEMS[module] = f"{module} failed to load: {type(exc).__name__}: {exc}"
            continue
        order[module] = rank
    return sorted(_FORMATS.values(), key=lambda spec: order.get(spec.module, len(order)))


def problems() -> dict[str, str]:
    """The readers that failed to load, and the agents (``ctx_inspect.core.agents``)."""
    all_formats()
    return {**agents.problems(), **_PROBLEMS}


def get_format(name: str) -> FormatSpec:
    formats = {f.name: f for f in all_formats()}
    if name in formats:
        return formats[name]
    close = difflib.get_close_matches(name, list(formats), n=3, cutoff=0.3)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(formats)}"
    raise InputError("unknown format", f"no format named {name!r}{hint}")


def read_head(path: Path, size: int = HEAD_BYTES) -> Head:
    """The first ``size`` bytes of a file, or a folder's Head after checking that it can be
    listed. Only regular files are opened: a FIFO or a device would block or never end here
    (streams are spooled to a file first: ``loader.input_file``)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise InputError("file not found", str(path)) from None
    except OSError as exc:
        raise InputError("cannot read file", f"{path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        problem = folder_problem(path)
        if problem:
            raise InputError("cannot read folder", f"{path}: {problem}")
        return Head(path=path, data=b"", is_dir=True)
    if not stat.S_ISREG(mode):
        raise InputError("not a regular file", f"{path} is a pipe, device or socket")
    try:
        with path.open("rb") as fh:
            data = fh.read(size)
    except FileNotFoundError:
        raise InputError("file not found", str(path)) from None
    except IsADirectoryError:
        raise InputError("cannot read a folder here", str(path)) from None
    except OSError as exc:
        raise InputError("cannot read file", f"{path}: {exc.strerror or exc}") from None
    return Head(path=path, data=data)


def folder_problem(path: Path) -> str | None:
    """Why the folder cannot be listed (``Permission denied``), or None when it can. Folder
    readers list a subfolder that cannot be listed as one of their sessions, so that opening
    it reports why instead of its sessions going missing without a word."""
    try:
        with os.scandir(path) as entries:
            next(entries, None)
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def looks_binary(data: bytes) -> bool:
    """NUL bytes, or mostly bytes that are neither text nor valid UTF-8."""
    sample = data[:BINARY_SAMPLE]
    if not sample:
        return False
    if b"\x00" in sample:
        return True
    text = sample.decode("utf-8", "replace")
    bad = len(_NOT_TEXT.findall(text))
    return bad > max(8, len(text) // 20)


def detect(path: Path, head: Head | None = None) -> FormatSpec:
    """The format of ``path``, by sniffing its head; a one-line InputError when none fits."""
    head = head or read_head(path)
    if not head.is_sqlite and not head.is_dir and looks_binary(head.data):
        raise InputError("binary file", f"{path} is not a text log or transcript")
    candidates_all = [s for s in all_formats() if s.folder or not head.is_dir]
    scores = sorted(
        ((_sniff(spec, head), spec) for spec in candidates_all),
        key=lambda pair: pair[0],
        reverse=True,
    )
    if head.is_dir:
        if scores and scores[0][0] >= MIN_CONFIDENCE:
            return scores[0][1]
        raise InputError(
            "unknown folder layout",
            f"{path} holds no sessions ctx-inspect reads; see `ctx-inspect formats`",
        )
    if head.is_sqlite and not (scores and scores[0][0] >= MIN_CONFIDENCE):
        raise InputError("unknown database", f"{path} is an SQLite file of no known layout")
    if not head.data.strip():
        # An empty file is a valid empty session; name it after the best guess by extension.
        return _by_extension(path) or get_format("native")
    if scores and scores[0][0] >= MIN_CONFIDENCE:
        return scores[0][1]
    candidates = [spec.name for score, spec in scores if score > 0][:3]
    if not candidates:
        candidates = [spec.name for spec in all_formats() if _extension_hint(path, spec)][:3]
    hint = f" (closest: {', '.join(candidates)})" if candidates else ""
    raise InputError(
        "unknown format",
        f"{path} is no format ctx-inspect reads{hint}; see `ctx-inspect formats`, "
        "or force one with --format NAME",
    )


def _sniff(spec: FormatSpec, head: Head) -> float:
    """A sniffer's verdict; a sniffer that fails counts as 'not this format'."""
    try:
        return spec.sniff(head)
    except Exception:
        return 0.0


def _extension_hint(path: Path, spec: FormatSpec) -> bool:
    """Whether the format's ``reads`` names this file's extension (``.json`` is not ``.jsonl``)."""
    suffix = path.suffix.lower()
    if not suffix:
        return False
    return re.search(re.escape(suffix) + r"(?![\w])", spec.reads.lower()) is not None


def _by_extension(path: Path) -> FormatSpec | None:
    for spec in all_formats():
        if spec.parser is not None and _extension_hint(path, spec):
            return spec
    return None
