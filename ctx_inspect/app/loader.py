"""From paths on disk to sessions: detect formats, read inputs, feed sessions.

This is where sources, formats and the session meet. Inputs are opened read-only. One path can
give several sessions (a project folder, a database of many sessions, sub-agent threads);
``--merge`` makes one session of several streams of the same run.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path

from ctx_inspect.core.collector import collector_paused as paused
from ctx_inspect.core.model import (
    Event,
    GuardEvaluated,
    LogLine,
    Message,
    MessageAdded,
    ParseIssue,
    Part,
    PartType,
    RequestSent,
    Role,
    SessionInfo,
    SourceSpan,
)
from ctx_inspect.core.profiles import Profile, make_profile
from ctx_inspect.core.session import MAIN_THREAD, Session
from ctx_inspect.core.tokens import ENCODINGS, TokenCounter, encoding_for_model, get_counter
from ctx_inspect.errors import ConfigError, InputError
from ctx_inspect.formats.base import Item, Parser, read_file
from ctx_inspect.formats.registry import (
    BINARY_SAMPLE,
    HEAD_BYTES,
    FormatSpec,
    Head,
    SnapshotSession,
    detect,
    get_format,
    looks_binary,
    read_head,
)
from ctx_inspect.sources import stream
from ctx_inspect.sources.reader import iter_chunks, read_span

# Rules whose estimate of a message is ceil(len(text) / 4) plus a fixed overhead, when no
# tokenizer is given (checked against the profile itself, see ``chars_estimate``).
_CHARS_RULES = frozenset({"chars4", "exact"})
_PROBE_TEXTS = ("", "a", "abcd", "abcde", "héllo wörld 😀", "x" * 4097)

ProfileFactory = Callable[[FormatSpec], Profile]


@dataclass
class LoadedSession:
    session: Session
    path: Path
    format: FormatSpec
    profile: Profile
    counter: TokenCounter
    parser: Parser | None
    label: str = ""  # which session of the input, when it holds several
    paths: list[Path] = field(default_factory=list)

    @property
    def tokenizer_label(self) -> str:
        if not self.session.tokenized:
            return "not used (--no-exact)"  # no need to load a tokenizer to say so
        return self.counter.info.label

    @property
    def name(self) -> str:
        shown = stream.display_name(self.path)
        return f"{shown}#{self.label}" if self.label else shown


@dataclass(frozen=True)
class Progress:
    """How a session that is shown while it is read (the dashboard's) is handed over: ``opened``
    gets it before a byte is read, then ``grow`` gets each batch of what was read for
    ``batch_seconds``, with the batch's exact counts (counted in the reading thread; None when
    the counter is not exact), to append to the session in the thread that shows it. Once read,
    the session is given like any other (``iter_inputs``)."""

    opened: Callable[[LoadedSession], None]
    grow: Callable[[LoadedSession, list[Item], list[int] | None], None]
    batch_seconds: float = 0.1


def collector_paused(*, collect: bool = False) -> AbstractContextManager[None]:
    """The collector paused while a session is read, then what was read moved out of its way
    for good: it lives as long as the session (``core.collector``). ``collect``: collect the
    few cycles reading made first (worth it for a session kept open)."""
    return paused(collect=collect, freeze=True)


def estimator_for(profile: Profile) -> Callable[[Message], int]:
    """``profile``'s own estimate of a message, with the tokenizer its rule asks for."""
    counter = counter_for(profile)
    return lambda message: profile.estimate(message, counter)


def input_file(path: Path) -> Path:
    """Where the bytes of the input ``path`` are read: the path itself, or for a stream (``-``,
    a pipe, a FIFO, ``<(command)``) the private file it is spooled to (``sources.stream``: read
    to its end once per process, refused with an InputError when it stays silent, ends empty,
    or starts with binary data)."""
    if not stream.is_stream(path):
        return path
    spool = stream.open_spool(path)
    spool.wait_first_byte()
    spool.wait(BINARY_SAMPLE)
    with spool.path.open("rb") as fh:
        head = Head(path, fh.read(BINARY_SAMPLE))
    if not head.is_sqlite and looks_binary(head.data):
        raise spool.refuse(
            InputError("binary file", f"{spool.name} is not a text log or transcript")
        )
    return spool.read_all()


def resolve_format(
    path: Path, format_name: str | None, *, source: Path | None = None
) -> FormatSpec:
    """The format to read ``path`` with: forced by name, or detected from its head (read from
    ``source`` when given: the file a stream is being spooled to)."""
    head = read_head(source or input_file(path))
    if format_name:
        spec = get_format(format_name)
        if head.is_dir and not spec.folder:
            raise InputError(
                "cannot read a folder here", f"{path} is a folder; {spec.name} reads files"
            )
        if not head.is_dir and not head.is_sqlite and looks_binary(head.data):
            raise InputError("binary file", f"{path} is not a text log or transcript")
        return spec
    return detect(path, head)


def follow_format(
    path: Path, format_name: str | None, stop: threading.Event | None = None
) -> tuple[FormatSpec, stream.Spool | None]:
    """The format of an input about to be followed, and for a stream the spool it is read
    through (its format detected on its first lines; following reads the rest as it comes).
    A file that does not exist yet is waited for when its format is named."""
    if not stream.is_stream(path):
        if format_name and not path.exists():
            return get_format(format_name), None
        return resolve_format(path, format_name), None
    spool = stream.open_spool(path)
    try:
        spool.wait_head(HEAD_BYTES, stop)
        return resolve_format(path, format_name, source=spool.path), spool
    except InputError as exc:
        raise spool.refuse(exc) from None


def counter_for(profile: Profile, model: str | None = None) -> TokenCounter:
    """The exact counter for a profile: its configured encoding (or model), else by model."""
    wanted = profile.counter_encoding()
    if wanted in ENCODINGS:
        return get_counter(wanted)
    return get_counter(encoding_for_model(wanted or model))


def new_session(
    profile: Profile,
    counter: TokenCounter,
    *,
    count_exact: bool,
    body_reader: Callable[[SourceSpan], Sequence[Message]] | None = None,
    tokenize: bool = True,
) -> Session:
    """A session estimating with the profile's rule; with ``tokenize`` off, a rule that counts
    with a tokenizer falls back to characters / 4 (``stats --no-exact``: nothing is loaded).
    Its frequent events are packed (``core.packed``), whether it is kept open or read once."""
    estimator_counter = counter if tokenize else None
    session = Session(
        estimator=lambda message: profile.estimate(message, estimator_counter),
        counter=counter,
        count_exact=count_exact and counter.info.exact,
        body_reader=body_reader,
        estimate_chars=chars_estimate(profile, estimator_counter),
        pack_events=True,
    )
    session.tokenized = tokenize or session.count_exact
    return session


def chars_estimate(profile: Profile, counter: TokenCounter | None) -> Callable[[int], int] | None:
    """The profile's estimate of a message as a function of ``len(message.text)`` alone, when
    it is one (chars / 4, or a tokenizer rule with no tokenizer, plus the per-message overhead);
    else None. Lets a session estimate messages whose bodies it was not given."""
    if profile.estimator not in _CHARS_RULES:
        return None
    if counter is not None and profile.uses_counter():
        return None
    overhead = profile.estimate(Message(id="probe", role=Role.USER), counter)

    def estimate(chars: int) -> int:
        return -(-chars // 4) + overhead

    for probe in _probes():
        if profile.estimate(probe, counter) != estimate(len(probe.text)):
            return None
    return estimate


def _probes() -> Iterator[Message]:
    for text in _PROBE_TEXTS:
        yield Message(id="probe", role=Role.USER, parts=(Part(type=PartType.TEXT, text=text),))
    yield Message(
        id="probe",
        role=Role.ASSISTANT,
        parts=(
            Part(type=PartType.THINKING, text="why"),
            Part(type=PartType.TOOL_CALL, tool_name="Bash", call_id="c", arguments='{"a":1}'),
            Part(type=PartType.IMAGE, media_type="image/png", data_bytes=4000),
        ),
    )
    yield Message(
        id="probe",
        role=Role.USER,
        parts=(
            Part(type=PartType.TOOL_RESULT, text="out\nput", call_id="c"),
            Part(type=PartType.TEXT, text="more"),
        ),
    )


def load_session(
    path: Path,
    profile: Profile,
    *,
    format_spec: FormatSpec,
    count_exact: bool = True,
    counter: TokenCounter | None = None,
    tokenize: bool = True,
    parallel: bool | None = None,
    name: str | None = None,
    input_path: Path | None = None,
    progress: Progress | None = None,
) -> LoadedSession:
    """Read a whole saved stream input into a new session. ``parallel``: read on two cores
    when no bodies are needed (``formats.base.read_file``; None: by the file's size).
    ``name``: how the input is named in the session and its parse issues (default: ``path``;
    a spooled stream is read from its private file but named as the user named it), and
    ``input_path`` the input as the user gave it. With ``progress``, the session is handed over
    before it is read and grows batch by batch (``Progress``): no tokenizer is loaded before it
    is shown, the exact counts come with the batches."""
    counter = counter or counter_for(profile)
    shown = name or str(path)
    parser = format_spec.make_parser(0, shown)

    def read_back(span: SourceSpan) -> list[Message]:
        return parser.messages_at(read_span(path, span.offset, span.length), span)

    if progress is not None:
        count_exact = tokenize = False  # counted as it is read, in ``_read_shown``
    session = new_session(
        profile, counter, count_exact=count_exact, body_reader=read_back, tokenize=tokenize
    )
    session.add_source(shown, format_spec.name)
    given = input_path or path
    loaded = LoadedSession(session, given, format_spec, profile, counter, parser, paths=[given])
    try:
        if progress is not None:
            with collector_paused(collect=True):  # kept open: collect what reading made
                _read_shown(loaded, path, progress)
            session.tokenized = True
            return loaded
        # Counting exactly needs the texts; else the session keeps columns and estimates from
        # the text's length, or takes the reader's own figure of the profile's rule: no message
        # needs its body.
        parser.entry_estimates = (
            parser.entry_estimate_rule == profile.estimator and not profile.uses_counter()
        )
        bodies = session.count_exact or (
            session.estimate_chars is None and not parser.entry_estimates
        )
        with collector_paused():
            for events in read_file(parser, path, bodies=bodies, parallel=parallel):
                if events:
                    session.append(events)
            session.append(parser.finish())
    except OSError as exc:
        raise InputError("cannot read file", f"{shown}: {exc.strerror or exc}") from None
    return loaded


def _read_shown(loaded: LoadedSession, path: Path, progress: Progress) -> None:
    """Hand ``loaded`` over, then what is read of ``path`` batch by batch (``Progress``)."""
    parser, counter = loaded.parser, loaded.counter
    assert parser is not None
    exact = counter.info.exact
    progress.opened(loaded)
    pending: list[Item] = []
    last = time.monotonic()
    for batch in itertools.chain(read_file(parser, path, parallel=False), [None]):
        pending.extend(parser.finish() if batch is None else batch)
        if batch is not None and time.monotonic() - last < progress.batch_seconds:
            continue
        counts = None
        if exact:
            texts = [e.message.text for e in pending if isinstance(e, MessageAdded)]
            counts = counter.count_batch(texts)
        progress.grow(loaded, pending, counts)
        pending = []
        last = time.monotonic()


def profile_spec(path: Path, spec: FormatSpec) -> FormatSpec:
    """``spec`` with the profile the file itself names (an export of ours) as its default
    profile, so it reopens with the profile it was made with when the user names none."""
    if spec.recorded_profile is None or not path.is_file():
        return spec
    try:
        name = spec.recorded_profile(read_head(path))
    except InputError:
        return spec
    return spec if name is None else replace(spec, default_profile=name)


def calibrate(profile: Profile, session: Session) -> Profile:
    """The profile with the agent's own figures from the input (its window; for a guard, its
    buffer and output reserve; for an export of ours, the settings it was made with) filling
    the settings the user did not set."""
    found: dict[str, object] = {}
    window = session.info.get("context_window")
    if isinstance(window, int) and window > 0:
        found["context_window"] = window
    max_output = session.info.get("max_output_tokens")
    if isinstance(max_output, int) and max_output > 0:
        found["max_output_tokens"] = max_output
    version = session.info.get("version")
    if isinstance(version, str) and version and _valid_setting(profile, "version", version):
        found["version"] = version  # an agent whose rules follow its version (Claude Code)
    found.update(profile.settings_shown(session))  # what the agent's records show is on
    # the guard's latest target with its window (a log may learn its limit along the way)
    for _, event in session.events_of(GuardEvaluated):
        if isinstance(event, GuardEvaluated) and event.targets:
            target = event.targets[0]
            if target.context_window > 0:
                found.update(
                    context_window=target.context_window,
                    buffer_tokens=target.buffer_tokens,
                    max_output_tokens=target.max_output_tokens,
                )
    recorded = session.info.get("settings")
    if session.info.get("profile") == profile.name and isinstance(recorded, dict):
        try:  # what the export was made with wins over the source's own figures
            return _filled(profile, {**found, **recorded})
        except ConfigError:  # a value the profile refuses (an edited export): not used
            pass
    return _filled(profile, found)


def _filled(profile: Profile, found: dict[str, object]) -> Profile:
    """``profile`` with ``found`` for the settings the user did not set."""
    fields = type(profile).model_fields
    unset = {
        k: v
        for k, v in found.items()
        if k in fields
        and k not in ("name", "agent")
        and k not in profile.model_fields_set
        and getattr(profile, k) != v
    }
    if not unset:
        return profile
    explicit = {
        k: getattr(profile, k) for k in profile.model_fields_set if k not in ("name", "agent")
    }
    return make_profile(profile.name, {**unset, **explicit})


def _valid_setting(profile: Profile, key: str, value: object) -> bool:
    """Whether the profile has setting ``key`` and takes ``value`` for it."""
    if key not in type(profile).model_fields:
        return False
    try:
        make_profile(profile.name, {key: value})
    except ConfigError:
        return False
    return True


@dataclass
class FailedInput:
    """An input, or one session of a folder, that could not be read (the others were)."""

    path: Path
    error: InputError

    @property
    def name(self) -> str:
        return stream.display_name(self.path)


def open_inputs(
    paths: Sequence[Path],
    profile_for: ProfileFactory,
    *,
    format_name: str | None = None,
    count_exact: bool = True,
    merge: bool = False,
    tokenize: bool = True,
) -> list[LoadedSession]:
    """Every session the paths hold, each read with the profile chosen for its format; the
    first that cannot be read raises its InputError (``iter_inputs`` reads the others)."""
    out: list[LoadedSession] = []
    for item in iter_inputs(
        paths,
        profile_for,
        format_name=format_name,
        count_exact=count_exact,
        merge=merge,
        tokenize=tokenize,
    ):
        if isinstance(item, FailedInput):
            raise item.error
        out.append(item)
    return out


def iter_inputs(
    paths: Sequence[Path],
    profile_for: ProfileFactory,
    *,
    format_name: str | None = None,
    count_exact: bool = True,
    merge: bool = False,
    tokenize: bool = True,
    progress: Progress | None = None,
) -> Iterator[LoadedSession | FailedInput]:
    """Every session the paths hold, one at a time as each is read (a caller that prints and
    drops each one holds one session at a time, however many a folder has).

    Each session is its own result: an input or a session of a folder that cannot be read
    comes as a ``FailedInput`` (its one-line error) and the others are still read. A folder
    reached twice through symbolic links gives its sessions once. ``--merge`` reads its streams
    as one session, and raises when one cannot be read. With ``progress``, a stream file's
    session is handed over before it is read and grows as it is read (``Progress``); it is then
    given here once read, and listed even when its main timeline stayed empty."""
    if merge and len(paths) > 1:
        merged = merge_streams(
            paths, profile_for, format_name=format_name, count_exact=count_exact, tokenize=tokenize
        )
        merged.profile = calibrate(merged.profile, merged.session)
        yield merged
        return
    for path in paths:
        for item in _iter_one(path, profile_for, format_name, count_exact, tokenize, progress):
            if isinstance(item, LoadedSession):
                item.profile = calibrate(item.profile, item.session)
            yield item


def _iter_one(
    path: Path,
    profile_for: ProfileFactory,
    format_name: str | None,
    count_exact: bool,
    tokenize: bool = True,
    progress: Progress | None = None,
) -> Iterator[LoadedSession | FailedInput]:
    try:
        spec = resolve_format(path, format_name)
        source = input_file(path)
        files = _folder_sessions(spec, source)
    except InputError as exc:
        yield FailedInput(path, exc)
        return
    if files is not None:
        for file in files:
            yield from _iter_one(file, profile_for, None, count_exact, tokenize, progress)
        return
    try:
        profile = profile_for(profile_spec(source, spec))
        yield from _read_one(path, source, spec, profile, count_exact, tokenize, progress)
    except InputError as exc:
        yield FailedInput(path, exc)


def _folder_sessions(spec: FormatSpec, folder: Path) -> list[Path] | None:
    """The session files of a project folder, each once (None: not a folder to expand)."""
    if spec.expand is None or not folder.is_dir():
        return None
    try:
        files = unique_files(spec.expand(folder))
    except OSError as exc:
        raise InputError("cannot read folder", f"{folder}: {exc.strerror or exc}") from None
    if not files:
        raise InputError("no sessions", f"{folder} holds no {spec.name} sessions")
    return files


def unique_files(paths: Iterable[Path]) -> list[Path]:
    """``paths`` without the ones that name a file already listed (through a symbolic link to
    it or to its folder); paths that cannot be looked at are kept (reading them says why)."""
    seen: set[tuple[int, int]] = set()
    out: list[Path] = []
    for path in paths:
        try:
            st = path.stat()
        except OSError:
            out.append(path)
            continue
        key = (st.st_dev, st.st_ino)
        if key in seen:
            continue
        seen.add(key)
        out.append(path)
    return out


def _read_one(
    path: Path,
    source: Path,
    spec: FormatSpec,
    profile: Profile,
    count_exact: bool,
    tokenize: bool,
    progress: Progress | None = None,
) -> Iterator[LoadedSession]:
    """The sessions of one input file (``source``: where its bytes are; ``path`` names it),
    one at a time (a file of a conversation per line holds as many as lines)."""
    if spec.snapshot is not None and (spec.parser is None or source.is_dir()):
        out = _open_snapshot(source, spec, profile, count_exact, tokenize)
    else:
        loaded = load_session(
            source,
            profile,
            format_spec=spec,
            count_exact=count_exact,
            tokenize=tokenize,
            name=stream.display_name(path),
            input_path=path,
            progress=progress,
        )
        out = _with_threads(loaded, shown=progress is not None)
    for loaded in out:
        if source != path:
            loaded.path = path
            loaded.paths = [path]
        yield loaded


def _with_threads(loaded: LoadedSession, *, shown: bool = False) -> Iterator[LoadedSession]:
    """The session and one per sub-thread, each made when reached; a main timeline left empty
    (every conversation in its own thread, as in an evaluation output) is not listed, unless
    it was ``shown`` while it was read."""
    subs = iter_threads(loaded)
    first = next(subs, None)
    if first is None or shown or _has_main_content(loaded.session):
        yield loaded
    if first is not None:
        yield first
        yield from subs


def _has_main_content(session: Session) -> bool:
    if session.steps:
        return True
    threads = session.table.threads
    return any(threads[code] == MAIN_THREAD for code in session.table.thread)


def _open_snapshot(
    path: Path, spec: FormatSpec, profile: Profile, count_exact: bool, tokenize: bool = True
) -> Iterator[LoadedSession]:
    assert spec.snapshot is not None
    counter = counter_for(profile)
    try:
        snapshots = spec.snapshot(path)
    except OSError as exc:
        raise InputError("cannot read input", f"{path}: {exc.strerror or exc}") from None
    for snap in snapshots:
        session = new_session(profile, counter, count_exact=count_exact, tokenize=tokenize)
        session.add_source(str(path), spec.name)
        session.append(snap.events)
        loaded = LoadedSession(
            session, path, spec, profile, counter, None, label=snap.label, paths=[path]
        )
        yield from _with_threads(loaded)


def split_threads(loaded: LoadedSession) -> list[LoadedSession]:
    """A session per sub-agent or sidechain thread, each as its own timeline."""
    return list(iter_threads(loaded))


def iter_threads(loaded: LoadedSession) -> Iterator[LoadedSession]:
    """``split_threads``, each session made when the iteration reaches it."""
    for thread, sub in loaded.session.thread_sessions():
        sub.info["parent"] = loaded.name
        sub.info["thread"] = thread
        yield LoadedSession(
            sub,
            loaded.path,
            loaded.format,
            loaded.profile,
            loaded.counter,
            loaded.parser,
            label=thread,
            paths=loaded.paths,
        )


def merge_streams(
    paths: Sequence[Path],
    profile_for: ProfileFactory,
    *,
    format_name: str | None = None,
    count_exact: bool = True,
    tokenize: bool = True,
) -> LoadedSession:
    """One session of several streams of the same run (an agent's stdout and stderr).

    Inputs of one agent whose formats share a ``merge`` make the session it makes; streams of
    one agent whose formats share a ``stream_merge`` are merged by it. Otherwise, events
    are ordered by timestamp where they have one. A stream without timestamps is
    anchored on the requests of a stream that has them: its n-th request is the other stream's
    n-th request (so a request is counted once), and its events between two requests take the
    time of the request they follow. Otherwise a stream keeps its own order, after the others.
    """
    specs = [resolve_format(p, format_name) for p in paths]
    merger = specs[0].merge
    if merger is not None and all(s.merge is merger for s in specs):
        return _merged_snapshot(
            paths, specs, merger(paths, specs), profile_for, count_exact, tokenize
        )
    for path, spec in zip(paths, specs, strict=True):
        if spec.parser is None:
            raise InputError("cannot merge", f"{path} ({spec.name}) is not a stream")
    primary = next((s for s in specs if s.default_profile != "generic"), specs[0])
    profile = profile_for(primary)
    counter = counter_for(profile)
    parsers = [
        spec.make_parser(i, str(p)) for i, (p, spec) in enumerate(zip(paths, specs, strict=True))
    ]
    streams: list[list[Event]] = []
    for path, parser in zip(paths, parsers, strict=True):
        events: list[Event] = []
        for chunk in iter_chunks(path):
            events.extend(parser.feed(chunk))
        events.extend(parser.finish())
        streams.append(events)

    def read_back(span: SourceSpan) -> list[Message]:
        path = paths[span.source]
        return parsers[span.source].messages_at(read_span(path, span.offset, span.length), span)

    session = new_session(
        profile, counter, count_exact=count_exact, body_reader=read_back, tokenize=tokenize
    )
    for path, spec in zip(paths, specs, strict=True):
        session.add_source(str(path), spec.name)
    merged: list[Event] | None = None
    own = specs[0].stream_merge
    if own is not None and all(spec.stream_merge is own for spec in specs):
        merged = own(streams, [spec.name for spec in specs])  # the streams' own way to merge
    if merged is None:
        names = {spec.name for spec in specs}
        covered = {i for i, spec in enumerate(specs) if names.intersection(spec.covered_by)}
        merged = merge_events(streams)
        if covered:
            merged = [e for e in merged if not _covered(e, covered)]
    session.append(merged)
    return LoadedSession(
        session, paths[0], primary, profile, counter, parsers[0], label="merged", paths=list(paths)
    )


_NOTES: tuple[type[Event], ...] = (LogLine, ParseIssue)


def _covered(event: Event, covered: set[int]) -> bool:
    """Whether ``event`` comes from a stream another merged stream covers and is not one of
    its notes (a log line, a parse issue, a fact of the run): it is already there."""
    if event.span is None or event.span.source not in covered:
        return False
    if isinstance(event, SessionInfo):  # facts of the run, but not what the stream lacks
        return "context_note" in event.extra
    return not isinstance(event, _NOTES)


def _merged_snapshot(
    paths: Sequence[Path],
    specs: Sequence[FormatSpec],
    snapshots: list[SnapshotSession],
    profile_for: ProfileFactory,
    count_exact: bool,
    tokenize: bool,
) -> LoadedSession:
    """The session an agent's own merge made of one run's files (its first, when the files
    hold several)."""
    if not snapshots:
        raise InputError("no sessions", f"{', '.join(map(str, paths))} hold no session")
    profile = profile_for(specs[0])
    counter = counter_for(profile)
    session = new_session(profile, counter, count_exact=count_exact, tokenize=tokenize)
    for path, spec in zip(paths, specs, strict=True):
        session.add_source(str(path), spec.name)
    session.append(snapshots[0].events)
    label = f"merged: {snapshots[0].label}"
    return LoadedSession(
        session, paths[0], specs[0], profile, counter, None, label=label, paths=list(paths)
    )


def merge_events(streams: list[list[Event]]) -> list[Event]:
    """Order the events of several streams of one run (see ``merge_streams``)."""
    timed = [any(e.timestamp for e in s) for s in streams]
    keyed: list[tuple[str, int, int, Event]] = []
    anchors = _request_times(streams, timed)
    for index, events in enumerate(streams):
        if timed[index]:
            last = ""
            for seq, event in enumerate(events):
                last = event.timestamp or last
                keyed.append((last, index, seq, event))
        elif anchors:
            # each event goes just before the timed stream's request it builds up to
            requests = 0
            for seq, event in enumerate(events):
                if isinstance(event, RequestSent) and requests < len(anchors):
                    requests += 1
                    continue  # the timed stream already records this request
                stamp = anchors[requests] if requests < len(anchors) else "\uffff"
                keyed.append((stamp, index - len(streams), seq, event))
        else:
            for seq, event in enumerate(events):
                keyed.append(("\uffff", index, seq, event))
    keyed.sort(key=lambda item: (item[0], item[1], item[2]))
    return [item[3] for item in keyed]


def _request_times(streams: list[list[Event]], timed: list[bool]) -> list[str]:
    """The times of the requests of the first timed stream that has any."""
    for index, events in enumerate(streams):
        if not timed[index]:
            continue
        times = []
        last = ""
        for event in events:
            last = event.timestamp or last
            if isinstance(event, RequestSent):
                times.append(last)
        if times:
            return times
    return []
