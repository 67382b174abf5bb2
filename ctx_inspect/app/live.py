"""Following one input live: bytes from ``sources.follow``, events from its format, a session.

``LiveSource`` is the glue for one followed input. Its ``apply(chunks)`` feeds new bytes to the
format's parser and appends the events to the session in one batch. When the file was
truncated, rotated or re-created it first flushes the parser, appends a ``Marker`` that says
so (one for each file read after several rotations between two reads), starts the parser
afresh and gives the new file its own source index (``Session.sources`` gets one more entry
with the same path), so byte spans of the old file are never read from the new one:
``read_back`` reads them through the follower (a rotated file stays readable for a while
through its descriptor) or returns nothing when those bytes are gone. A file rotated in between
that could not be read (compressed, deleted before it was opened) gets a Marker that says its
lines may be lost, with how many bytes were not read when that is known.

Whole-input formats (``FormatSpec.snapshot``: SQLite databases, storage folders) and formats
read as one JSON document (a ``DocumentParser``) cannot be read by appends: they are re-read
whole on change, and the new content goes into a *new* ``Session`` (same estimator, counter and
sources), because their events can change anywhere. ``LiveSource.session`` then names the new
session and ``LiveSource.reloads`` counts the replacements; ``follow_session`` says so in each
update (``LiveUpdate.replaced``) and ``follow_stats`` passes the current session to its
callback. Such a LiveSource owns its session: do not share it with other inputs.

A stream (standard input, a pipe, a FIFO) is followed through its spool (``sources.stream``):
the private file it is copied to as it arrives is read like a growing file, and following ends
with the stream (``follow_stats`` returns, ``follow_session`` ends), its last line flushed.

Inputs are only read, never written.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ctx_inspect.app.loader import (
    LoadedSession,
    ProfileFactory,
    calibrate,
    counter_for,
    follow_format,
    profile_spec,
)
from ctx_inspect.core.model import Event, Marker, Message, SourceSpan
from ctx_inspect.core.profiles import Profile
from ctx_inspect.core.session import Session
from ctx_inspect.core.tokens import TokenCounter
from ctx_inspect.errors import InputError
from ctx_inspect.formats.base import DocumentParser, Parser
from ctx_inspect.formats.registry import FormatSpec, SnapshotSession
from ctx_inspect.sources.follow import (
    BATCH_BYTES,
    Change,
    Chunk,
    FileFollower,
    follow,
    follow_sync,
    input_signature,
)
from ctx_inspect.sources.reader import iter_chunks, read_span
from ctx_inspect.sources.stream import Spool
from ctx_inspect.sources.watch import DEBOUNCE_MS, POLL_INTERVAL, watch_input, watch_input_sync

# Files beside a whole input that change when it does (SQLite's write-ahead log and journal).
WHOLE_INPUT_SIBLINGS: tuple[str, ...] = ("-wal", "-journal")


def reads_whole(spec: FormatSpec) -> bool:
    """Whether following this format re-reads the input whole instead of reading appends."""
    if spec.snapshot is not None:
        return True
    return spec.parser is not None and issubclass(spec.parser, DocumentParser)


@dataclass
class LiveUpdate:
    """What one change did to a followed input."""

    session: Session  # the current session (a new object when ``replaced``)
    events: list[Event]  # the events just appended (after a re-read: the new content)
    replaced: bool = False  # a whole input was re-read into a new session


class LiveSource:
    """One followed input feeding ``session`` (as source ``source``).

    Chunks are expected from offset 0 of each file (a FileFollower started at 0), so the
    parser's byte spans are the file's. ``follower`` (optional) is the FileFollower the chunks
    come from; ``read_back`` uses it to read bodies of earlier files. ``label`` picks which
    session of a whole input that holds several (``SnapshotSession.label``); without it, the
    last one listed (formats list them oldest first).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        spec: FormatSpec,
        session: Session,
        source: int = 0,
        *,
        follower: FileFollower | None = None,
        label: str | None = None,
    ) -> None:
        self.path = Path(path)
        self.name = self.path.name or str(self.path)
        self.spec = spec
        self.session = session
        self.source = source
        self.follower = follower
        self.label = label
        self.whole = reads_whole(spec)
        self.parser: Parser | None = None if self.whole else spec.make_parser(source, str(path))
        self.generation = follower.generation if follower is not None else 0
        self.reloads = 0
        self._generations: dict[int, int] = {source: self.generation}  # source -> file
        self._fed = False  # bytes of the current file went into the parser
        self._ended = False  # the parser was flushed (file deleted) and not reset since
        self._deleted = False
        self._signature: tuple[object, ...] | None = None
        self._last_problem: str | None = None
        self.owns_follower = False

    @property
    def sources(self) -> list[int]:
        """The session's source indices this input has used (one per file read)."""
        return list(self._generations)

    # -- streams ---------------------------------------------------------------------------

    def apply(self, chunks: Sequence[Chunk]) -> list[Event]:
        """Turn chunks into events, append them to the session in one batch, return them.

        For a whole input, any chunk means "changed": the input is re-read (see ``reload``).
        """
        if not chunks:
            return []
        if self.whole:
            return self.reload()
        parser = self.parser
        assert parser is not None
        out: list[Event] = []
        for chunk in chunks:
            if chunk.change is Change.DATA:
                if chunk.data:
                    out.extend(parser.feed(chunk.data))
                    self._fed = True
                continue
            if not self._ended:
                out.extend(parser.finish())
                self._ended = True
            out.append(Marker(text=self._marker_text(chunk)))
            if chunk.change is Change.DELETED:
                self._deleted = True
            elif chunk.change is not Change.SKIPPED:
                self._next_file()
        if out:
            self.session.append(out)
        return out

    def finish(self) -> list[Event]:
        """Flush what the parser holds (a last line without its newline) into the session."""
        if self.parser is None or self._ended:
            return []
        out = self.parser.finish()
        self._ended = True
        if out:
            self.session.append(out)
        return out

    def _marker_text(self, chunk: Chunk) -> str:
        name = self.name
        change = chunk.change
        if change is Change.TRUNCATED:
            return f"{name} was truncated; reading it again from the start"
        if change is Change.ROTATED:
            if chunk.name and chunk.name != name:
                return (
                    f"{name} was rotated more than once since it was last read; "
                    f"reading {chunk.name}, written in between, first"
                )
            return f"{name} was rotated; now reading the new file"
        if change is Change.SKIPPED:
            if chunk.unread is not None:
                return f"{chunk.name} {chunk.reason}; {chunk.unread:,} bytes not read: lines lost"
            return f"{chunk.name} {chunk.reason}; lines in it may be lost"
        if change is Change.DELETED:
            return f"{name} was deleted; waiting for it to come back"
        if self._deleted:
            return f"{name} was created again; reading it from the start"
        return f"{name} appeared; reading it from the start"

    def _next_file(self) -> None:
        parser = self.parser
        assert parser is not None
        self.generation += 1
        if self._fed:
            self.source = self.session.add_source(str(self.path), self.spec.name)
            parser.source = self.source
        self._generations[self.source] = self.generation
        parser.reset()
        self._fed = False
        self._ended = False
        self._deleted = False

    def read_back(self, span: SourceSpan) -> list[Message]:
        """The messages recorded at ``span`` (a body reader for the session).

        Empty when the bytes are gone (the file was truncated or deleted since, or rotated
        longer ago than the follower keeps rotated files open).
        """
        generation = self._generations.get(span.source)
        if generation is None or self.parser is None:
            return []
        data: bytes | None = None
        if self.follower is not None:
            data = self.follower.read_at(span.offset, span.length, generation)
        elif generation == self.generation and not self._deleted:
            with contextlib.suppress(OSError):
                data = read_span(self.path, span.offset, span.length)
        if data is None or len(data) != span.length:
            return []
        return list(self.parser.messages_at(data, span))

    # -- whole inputs ----------------------------------------------------------------------

    def refresh(self) -> bool:
        """Re-read a whole input if it changed since it was last read; True if it was."""
        signature = input_signature(self.path, WHOLE_INPUT_SIBLINGS)
        if signature == self._signature:
            return False
        self.reload(signature)
        return True

    def reload(self, signature: tuple[object, ...] | None = None) -> list[Event]:
        """Read the whole input again into a new session (``self.session``); return its events.

        When it cannot be read (deleted, locked, half-written), the current session is kept and
        gets a Marker saying why (once per distinct reason); nothing is returned.
        """
        self._signature = signature or input_signature(self.path, WHOLE_INPUT_SIBLINGS)
        try:
            events = self._read_whole()
        except Exception as exc:  # shown to the user as a marker, never lost
            problem = self._problem_text(exc)
            if problem != self._last_problem:
                self._last_problem = problem
                self.session.append([Marker(text=problem)])
            return []
        self._last_problem = None
        self.session = self.session.sibling()
        self.session.append(events)
        self.reloads += 1
        return events

    def _read_whole(self) -> list[Event]:
        if self.spec.snapshot is not None:
            return _pick(self.spec.snapshot(self.path), self.label, self.path).events
        parser = self.spec.make_parser(self.source, str(self.path))
        events: list[Event] = []
        for data in iter_chunks(self.path):
            events.extend(parser.feed(data))
        events.extend(parser.finish())
        return events

    def _problem_text(self, exc: Exception) -> str:
        if isinstance(exc, FileNotFoundError) or not self.path.exists():
            return f"{self.name} was deleted; waiting for it to come back"
        if isinstance(exc, InputError):
            reason = exc.one_line()
        elif isinstance(exc, OSError):
            reason = exc.strerror or str(exc)
        else:
            reason = f"{type(exc).__name__}: {exc}"
        return f"{self.name} could not be read again ({reason}); showing what was read before"

    # -- closing ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close the follower if this LiveSource opened it."""
        if self.owns_follower and self.follower is not None:
            self.follower.close()


def _pick(snapshots: list[SnapshotSession], label: str | None, path: Path) -> SnapshotSession:
    if label is not None:
        for snap in snapshots:
            if snap.label == label:
                return snap
        raise InputError("session not found", f"{path} holds no session labelled {label!r}")
    if not snapshots:
        return SnapshotSession(label="", events=[])
    return snapshots[-1]


def open_live(
    path: str | os.PathLike[str],
    spec: FormatSpec,
    profile: Profile,
    *,
    label: str | None = None,
    count_exact: bool = True,
    counter: TokenCounter | None = None,
    name: str | None = None,
) -> LiveSource:
    """A LiveSource with a new session for ``path``, read with ``profile``'s estimator.

    A stream input gets its own FileFollower (reading starts at offset 0 on the first poll);
    a whole input is read at once. ``name``: how the input is named (default: ``path``; a
    spooled stream's file is named as the user named the stream).
    """
    path = Path(path)
    shown = name or str(path)
    counter = counter or counter_for(profile)
    active = counter

    def estimate(message: Message) -> int:
        return profile.estimate(message, active)

    session = Session(
        estimator=estimate,
        counter=counter,
        count_exact=count_exact and counter.info.exact,
        pack_events=True,  # a followed run grows for as long as it runs
    )
    session.add_source(shown, spec.name)
    if reads_whole(spec):
        live = LiveSource(path, spec, session, 0, label=label)
        live.name = name or live.name
        live.reload()
        return live
    follower = FileFollower(path)
    live = LiveSource(path, spec, session, 0, follower=follower, label=label)
    if name:
        live.name = name
        assert live.parser is not None
        live.parser.path = name
    live.owns_follower = True
    session.body_reader = live.read_back
    return live


async def follow_session(
    path: str | os.PathLike[str],
    spec: FormatSpec,
    profile: Profile,
    *,
    label: str | None = None,
    count_exact: bool = True,
    counter: TokenCounter | None = None,
    stop_event: asyncio.Event | None = None,
    debounce_ms: int = DEBOUNCE_MS,
    poll_interval: float = POLL_INTERVAL,
    force_polling: bool | None = None,
    spool: Spool | None = None,
) -> AsyncGenerator[LiveUpdate, None]:
    """Follow one input; yield a LiveUpdate at once (the session as read so far), then after
    every change that produced events. Ends when ``stop_event`` is set or the generator is
    closed (``contextlib.aclosing``), or with the stream when ``spool`` holds one (``path``
    names it; its bytes are read from the spool's file)."""
    if spool is not None:
        async for update in _follow_spool(
            spool, path, spec, profile, label, count_exact, counter, stop_event
        ):
            yield update
        return
    live = open_live(path, spec, profile, label=label, count_exact=count_exact, counter=counter)
    try:
        yield LiveUpdate(live.session, list(live.session.events()), replaced=live.whole)
        if live.whole:
            ticks = watch_input(
                path,
                debounce_ms=debounce_ms,
                poll_interval=poll_interval,
                force_polling=force_polling,
                stop_event=stop_event,
            )
            async with contextlib.aclosing(ticks):
                async for _ in ticks:
                    if live.refresh():
                        events = list(live.session.events())
                        yield LiveUpdate(live.session, events, replaced=True)
            return
        assert live.follower is not None
        chunks_in = follow(
            path,
            debounce_ms=debounce_ms,
            poll_interval=poll_interval,
            force_polling=force_polling,
            stop_event=stop_event,
            follower=live.follower,
        )
        async with contextlib.aclosing(chunks_in):
            async for chunks in chunks_in:
                events = live.apply(chunks)
                if events:
                    yield LiveUpdate(live.session, events)
    finally:
        live.close()


def follow_stats(
    path: str | os.PathLike[str],
    spec: FormatSpec,
    profile: Profile,
    on_update: Callable[[Session], None],
    stop: threading.Event,
    *,
    label: str | None = None,
    count_exact: bool = True,
    counter: TokenCounter | None = None,
    debounce_ms: int = DEBOUNCE_MS,
    poll_interval: float = POLL_INTERVAL,
    force_polling: bool | None = None,
    spool: Spool | None = None,
) -> Session:
    """Follow one input headless (``stats --follow``) until ``stop`` is set, or until the
    stream ends when ``spool`` holds one (``path`` names it).

    ``on_update(session)`` runs in the calling thread once the input has been read, then after
    each change that produced events (not while catching up on a large file); its argument is
    the current session (a new object after a whole input was re-read). Returns the last
    session.
    """
    if spool is not None:
        return _follow_spool_sync(
            spool, path, spec, profile, on_update, stop, label, count_exact, counter
        )
    live = open_live(path, spec, profile, label=label, count_exact=count_exact, counter=counter)
    try:
        if live.whole:
            on_update(live.session)
            for _ in watch_input_sync(
                path,
                stop,
                debounce_ms=debounce_ms,
                poll_interval=poll_interval,
                force_polling=force_polling,
            ):
                if live.refresh():
                    on_update(live.session)
            return live.session
        follower = live.follower
        assert follower is not None
        while True:  # the file as it is now, in bounded batches, then one update
            live.apply(follower.poll(max_bytes=BATCH_BYTES))
            if not follower.behind:
                break
        on_update(live.session)
        pending = False
        for chunks in follow_sync(
            path,
            stop,
            debounce_ms=debounce_ms,
            poll_interval=poll_interval,
            force_polling=force_polling,
            follower=follower,
        ):
            pending = bool(live.apply(chunks)) or pending
            if pending and not follower.behind:
                pending = False
                on_update(live.session)
        return live.session
    finally:
        live.close()


# -- streams -----------------------------------------------------------------------------------


def _open_spooled(
    spool: Spool,
    path: str | os.PathLike[str],
    spec: FormatSpec,
    profile: Profile,
    label: str | None,
    count_exact: bool,
    counter: TokenCounter | None,
) -> LiveSource:
    name = os.fspath(path) if os.fspath(path) != "-" else spool.name
    if reads_whole(spec):
        spool.read_all()  # a whole document or database is read once it is all there
    return open_live(
        spool.path,
        spec,
        profile,
        label=label,
        count_exact=count_exact,
        counter=counter,
        name=name,
    )


def _drain(live: LiveSource) -> bool:
    """Apply what the spool's file holds beyond what was read; True if it made events."""
    follower = live.follower
    assert follower is not None
    made = False
    while True:
        made = bool(live.apply(follower.poll(max_bytes=BATCH_BYTES))) or made
        if not follower.behind:
            return made


def _follow_spool_sync(
    spool: Spool,
    path: str | os.PathLike[str],
    spec: FormatSpec,
    profile: Profile,
    on_update: Callable[[Session], None],
    stop: threading.Event,
    label: str | None,
    count_exact: bool,
    counter: TokenCounter | None,
) -> Session:
    live = _open_spooled(spool, path, spec, profile, label, count_exact, counter)
    try:
        if live.whole:
            spool.check()
            on_update(live.session)
            return live.session
        follower = live.follower
        assert follower is not None
        first = True
        while not stop.is_set():
            ended = spool.done  # before reading: what it holds then is all there is
            made = _drain(live)
            if ended:
                spool.check()
                live.finish()
                on_update(live.session)
                break
            if made or first:
                first = False
                on_update(live.session)
            spool.wait(follower.offset + 1, stop=stop)
        return live.session
    finally:
        _let_go(live)


async def _follow_spool(
    spool: Spool,
    path: str | os.PathLike[str],
    spec: FormatSpec,
    profile: Profile,
    label: str | None,
    count_exact: bool,
    counter: TokenCounter | None,
    stop_event: asyncio.Event | None,
) -> AsyncGenerator[LiveUpdate, None]:
    def stopped() -> bool:
        return stop_event is not None and stop_event.is_set()

    if reads_whole(spec):
        while not spool.done and not stopped():
            await asyncio.to_thread(spool.wait, spool.size + 1, timeout=POLL_INTERVAL)
    live = await asyncio.to_thread(
        _open_spooled, spool, path, spec, profile, label, count_exact, counter
    )
    try:
        yield LiveUpdate(live.session, list(live.session.events()), replaced=live.whole)
        if live.whole:
            spool.check()
            return
        follower = live.follower
        assert follower is not None
        while not stopped():
            ended = spool.done
            events: list[Event] = []
            while True:  # read in a thread, parse here (the screen reads the session here)
                chunks = await asyncio.to_thread(follower.poll, max_bytes=BATCH_BYTES)
                events.extend(live.apply(chunks))
                if not follower.behind:
                    break
            if ended:
                events.extend(live.finish())
            if events:
                yield LiveUpdate(live.session, events)
            if ended:
                spool.check()
                return
            await asyncio.to_thread(spool.wait, follower.offset + 1, timeout=POLL_INTERVAL)
    finally:
        _let_go(live)


def _let_go(live: LiveSource) -> None:
    """Close the follower of a spooled stream; bodies are then read from the spool's file,
    which stays until the process ends (the session outlives the following)."""
    live.close()
    live.follower = None


# -- the dashboard's input -----------------------------------------------------------------------


async def follow_input(
    path: Path,
    profile_for: ProfileFactory,
    *,
    format_name: str | None = None,
    stop: threading.Event | None = None,
) -> AsyncGenerator[tuple[LoadedSession, LiveUpdate], None]:
    """Follow the input ``path`` with what goes around it (``--follow`` in the dashboard): its
    format (named, or detected on its first bytes: ``follow_format``), the profile
    ``profile_for`` picks for it, then with every update (``follow_session``) one
    ``LoadedSession`` whose session is the current one and whose profile is calibrated to what
    the input shows (its window, once it says). ``stop`` ends a wait for a stream's first bytes.
    """
    spec, spool = await asyncio.to_thread(follow_format, path, format_name, stop)
    source = spool.path if spool is not None else path
    profile = profile_for(await asyncio.to_thread(profile_spec, source, spec))
    counter = counter_for(profile)
    loaded: LoadedSession | None = None
    updates = follow_session(path, spec, profile, counter=counter, spool=spool)
    async with contextlib.aclosing(updates):
        async for update in updates:
            if loaded is None:
                loaded = LoadedSession(
                    update.session, path, spec, profile, counter, None, paths=[path]
                )
            loaded.session = update.session
            if update.session.info.get("context_window"):
                loaded.profile = calibrate(profile, update.session)
            yield loaded, update
