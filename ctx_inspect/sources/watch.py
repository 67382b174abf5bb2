"""Watching a followed input for changes: watchfiles on its folder, and periodic polls.

``watch_input`` (async) and ``watch_input_sync`` yield whenever the input may have changed: the
folder of a file is watched with watchfiles, filtered on the file's name and its rotation
siblings (``run.log.1``, ``run.log-20250101``, ``db-wal``), with a short debounce; they also
yield every ``poll_interval`` seconds without any event (for file systems that send none).
``force_polling=True`` (or the environment variable ``CTX_INSPECT_FORCE_POLLING=1``) makes
watchfiles poll the folder instead of using native notifications; as its polling compares
modification times in whole seconds, the periodic yields then come every ``poll_delay_ms``.
watchfiles is imported only when watching starts. Nothing here reads the input itself.
"""

from __future__ import annotations

import asyncio
import os
import queue
import threading
import time
from collections.abc import AsyncGenerator, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

from ctx_inspect.errors import InputError
from ctx_inspect.sources.rotation import ROTATION_SEPARATORS

DEBOUNCE_MS: Final = 30
STEP_MS: Final = 10
POLL_INTERVAL: Final = 0.5
POLL_DELAY_MS: Final = 50  # watchfiles' own polling period when polling is forced
FORCE_POLLING_ENV: Final = "CTX_INSPECT_FORCE_POLLING"


def related_name(name: str, changed: str) -> bool:
    """Whether a change to ``changed`` (a file name) may concern the followed file ``name``."""
    if changed == name:
        return True
    return changed.startswith(name) and changed[len(name) : len(name) + 1] in ROTATION_SEPARATORS


def resolve_force_polling(force_polling: bool | None) -> bool | None:
    """The argument, else ``CTX_INSPECT_FORCE_POLLING`` (1/true/yes/on, 0/false/no/off), else
    None (watchfiles decides: its own environment variable, WSL)."""
    if force_polling is not None:
        return force_polling
    value = os.environ.get(FORCE_POLLING_ENV, "").strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    return None


@dataclass(frozen=True)
class _WatchPlan:
    root: Path  # what watchfiles watches
    name: str | None  # the followed file's name (None: a folder, every change counts)
    recursive: bool

    @classmethod
    def for_path(cls, path: Path) -> _WatchPlan:
        path = path.absolute()
        if path.is_dir():
            return cls(path, None, True)
        if not path.parent.is_dir():
            raise InputError(
                "folder not found", f"{path.parent} does not exist; cannot follow {path.name}"
            )
        return cls(path.parent, path.name, False)

    def relevant(self, changes: set[tuple[Any, str]]) -> bool:
        if self.name is None:
            return bool(changes)
        return any(related_name(self.name, os.path.basename(p)) for _, p in changes)


def _periodic(poll_interval: float, forced: bool | None, poll_delay_ms: int) -> float:
    """The period of the reads made without any event.

    watchfiles' polling compares modification times in whole seconds, so it misses most of
    the appends within a second; when polling is forced, ``poll()`` (a stat, an fstat and a
    64-byte read) runs every ``poll_delay_ms`` as well.
    """
    if forced:
        return min(poll_interval, poll_delay_ms / 1000)
    return poll_interval


class _Stop:
    """A stop flag for watchfiles: set here, or by the caller's event."""

    def __init__(self, outer: Any = None) -> None:
        self._outer = outer
        self._flag = threading.Event()

    def is_set(self) -> bool:
        return self._flag.is_set() or (self._outer is not None and bool(self._outer.is_set()))

    def set(self) -> None:
        self._flag.set()


_END: Final = object()


@dataclass
class _Failed:
    error: BaseException


class _Reports(Protocol):
    """The queue the watcher's thread or task reports to."""

    def empty(self) -> bool: ...

    def get_nowait(self) -> object: ...


def _taken(first: object, reports: _Reports) -> tuple[bool, bool]:
    """``first`` and every report waiting behind it, taken: whether any says the input may
    have changed, and whether the watcher has ended. A watcher that failed raises its error."""
    items = [first]
    while not reports.empty():
        items.append(reports.get_nowait())
    for item in items:
        if isinstance(item, _Failed):
            raise item.error
    return any(item is True for item in items), _END in items


class _Pacer:
    """When a watcher's reader yields: at once after a change that may concern the input, else
    once ``interval`` seconds have passed since it last yielded (``last``)."""

    def __init__(self, interval: float, last: float) -> None:
        self.interval = interval
        self.last = last

    def wait(self) -> float:
        """How long to wait for the next report before yielding anyway."""
        return max(0.0, self.last + self.interval - time.monotonic())

    def due(self, relevant: bool) -> bool:
        """Whether to yield now (and it counts as the last time)."""
        now = time.monotonic()
        if relevant or now - self.last >= self.interval:
            self.last = now
            return True
        return False


async def watch_input(
    path: str | os.PathLike[str],
    *,
    debounce_ms: int = DEBOUNCE_MS,
    step_ms: int = STEP_MS,
    poll_interval: float = POLL_INTERVAL,
    force_polling: bool | None = None,
    poll_delay_ms: int = POLL_DELAY_MS,
    stop_event: asyncio.Event | None = None,
) -> AsyncGenerator[bool, None]:
    """Yield whenever ``path`` (a file, its rotation siblings, or a folder's contents) may have
    changed: True after a file-system event, False after ``poll_interval`` seconds without one.

    The first value is yielded at once (False), after the watcher has started, so a caller that
    reads on each value misses nothing written before. Ends when ``stop_event`` is set or the
    generator is closed (use ``contextlib.aclosing``).
    """
    from watchfiles import awatch

    plan = _WatchPlan.for_path(Path(path))
    forced = resolve_force_polling(force_polling)
    poll_interval = _periodic(poll_interval, forced, poll_delay_ms)
    stop = _Stop(stop_event)
    ticks: asyncio.Queue[object] = asyncio.Queue()

    async def pump() -> None:
        try:
            async for changes in awatch(
                plan.root,
                watch_filter=None,
                debounce=debounce_ms,
                step=step_ms,
                rust_timeout=max(step_ms, int(poll_interval * 1000)),
                stop_event=stop,  # anything with is_set() and set()
                force_polling=forced,
                poll_delay_ms=poll_delay_ms,
                recursive=plan.recursive,
            ):
                ticks.put_nowait(plan.relevant(changes))
        except Exception as exc:
            ticks.put_nowait(_Failed(exc))
        finally:
            ticks.put_nowait(_END)

    task = asyncio.create_task(pump())
    await asyncio.sleep(0)  # let the watcher start before the first read
    try:
        yield False
        pacer = _Pacer(poll_interval, time.monotonic())
        while not stop.is_set():
            try:
                item = await asyncio.wait_for(ticks.get(), pacer.wait())
            except TimeoutError:
                item = False
            relevant, ended = _taken(item, ticks)
            if pacer.due(relevant):
                yield relevant
            if ended:
                return
    finally:
        stop.set()
        await asyncio.gather(task, return_exceptions=True)


def watch_input_sync(
    path: str | os.PathLike[str],
    stop: threading.Event,
    *,
    debounce_ms: int = DEBOUNCE_MS,
    step_ms: int = STEP_MS,
    poll_interval: float = POLL_INTERVAL,
    force_polling: bool | None = None,
    poll_delay_ms: int = POLL_DELAY_MS,
) -> Generator[bool, None, None]:
    """The synchronous ``watch_input``: watchfiles' ``watch`` runs in a helper thread."""
    from watchfiles import watch

    plan = _WatchPlan.for_path(Path(path))
    forced = resolve_force_polling(force_polling)
    poll_interval = _periodic(poll_interval, forced, poll_delay_ms)
    halt = _Stop(stop)
    ticks: queue.SimpleQueue[object] = queue.SimpleQueue()

    def pump() -> None:
        try:
            for changes in watch(
                plan.root,
                watch_filter=None,
                debounce=debounce_ms,
                step=step_ms,
                rust_timeout=max(step_ms, int(poll_interval * 1000)),
                stop_event=halt,
                force_polling=forced,
                poll_delay_ms=poll_delay_ms,
                recursive=plan.recursive,
                raise_interrupt=False,
            ):
                ticks.put(plan.relevant(changes))
        except Exception as exc:
            ticks.put(_Failed(exc))
        finally:
            ticks.put(_END)

    thread = threading.Thread(target=pump, name=f"watch {plan.root}", daemon=True)
    thread.start()
    try:
        yield False
        # The watcher may not have started when the first value was read: read again soon.
        pacer = _Pacer(poll_interval, time.monotonic() - poll_interval + min(poll_interval, 0.1))
        while not halt.is_set():
            try:
                item = ticks.get(timeout=pacer.wait())
            except queue.Empty:
                item = False
            relevant, ended = _taken(item, ticks)
            if pacer.due(relevant):
                yield relevant
            if ended:
                return
    finally:
        halt.set()
        thread.join()
