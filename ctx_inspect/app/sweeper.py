"""Running a sweep across cores: each worker process reads the session once, then replays it
under its share of the combinations. Results come back in the order of the combinations."""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctx_inspect.app.loader import estimator_for
from ctx_inspect.core.collector import collector_paused
from ctx_inspect.core.policies.base import Summarizer
from ctx_inspect.core.profiles import Profile
from ctx_inspect.core.session import Session
from ctx_inspect.core.sweep import SweepRow, run_one
from ctx_inspect.sources.stream import spooled


@dataclass(frozen=True)
class SweepInput:
    """What a worker needs to read the session by itself (sessions do not cross processes)."""

    paths: tuple[Path, ...]
    format_name: str | None
    profile_name: str | None
    config: Path | None
    sets: tuple[str, ...]
    merge: bool = False
    index: int = 0  # which session of the input (a folder or database holds several)
    count_exact: bool = True  # counted as ``stats`` counts (``--no-exact``: not)


_WORKER: dict[str, Any] = {}


def load_for_sweep(spec: SweepInput) -> tuple[Session, Profile]:
    from ctx_inspect.app.config import build_profile
    from ctx_inspect.app.loader import open_inputs
    from ctx_inspect.formats.registry import FormatSpec

    def profile_for(fmt: FormatSpec) -> Profile:
        return build_profile(spec.profile_name, spec.config, spec.sets, default=fmt.default_profile)

    opened = open_inputs(
        list(spec.paths),
        profile_for,
        format_name=spec.format_name,
        count_exact=spec.count_exact,
        merge=spec.merge,
    )
    loaded = opened[spec.index]
    return loaded.session, loaded.profile


def _init(spec: SweepInput, summarizer: Summarizer) -> None:
    session, profile = load_for_sweep(spec)
    _WORKER.update(session=session, profile=profile, summarizer=summarizer)


def _run(settings: dict[str, Any]) -> SweepRow:
    with collector_paused(freeze=True):  # a worker's objects live as long as it does
        return run_one(
            _WORKER["session"],
            _WORKER["profile"],
            settings,
            estimate_for=estimator_for,
            summarizer=_WORKER["summarizer"],
            reuse_estimates=True,  # the session was read with this profile's estimator
        )


def _start_context() -> multiprocessing.context.BaseContext:
    """How to start the workers: forking is quickest, but forking a process that runs other
    threads (the dashboard: its loading and sweep threads) can copy a lock another thread held
    and hang the worker; then the workers start from a clean server process instead."""
    if (
        threading.active_count() > 1
        and "forkserver" in multiprocessing.get_all_start_methods()
        and _tracker_running()
    ):
        return multiprocessing.get_context("forkserver")
    return multiprocessing.get_context()


def _has_descriptor(stream: Any) -> bool:
    try:
        os.fstat(stream.fileno())
        return True
    except (AttributeError, OSError, ValueError):
        return False


def _tracker_running() -> bool:
    """Start multiprocessing's resource tracker if it is not running (the fork server's
    workers need it). It hands ``sys.stderr``'s descriptor to its process; under the dashboard
    ``sys.stderr`` is Textual's capture, whose descriptor is not one, so the real standard error
    stands in while it starts. False when there is none to lend."""
    from multiprocessing import resource_tracker

    given = sys.stderr
    if _has_descriptor(given):
        resource_tracker.ensure_running()
        return True
    real = sys.__stderr__
    if real is None or not _has_descriptor(real):
        return False
    sys.stderr = real
    try:
        resource_tracker.ensure_running()
    finally:
        sys.stderr = given
    return True


def run_sweep(
    spec: SweepInput,
    combinations: Sequence[dict[str, Any]],
    summarizer: Summarizer,
    *,
    workers: int | None = None,
    on_row: Callable[[int, SweepRow], None] | None = None,
) -> list[SweepRow]:
    """Every combination's row, in order; ``workers=1`` runs in this process."""
    workers = workers or len(os.sched_getaffinity(0))
    # a stream (standard input, a pipe) was spooled to a file here: the workers read that file
    spec = dataclasses.replace(spec, paths=tuple(spooled(p) for p in spec.paths))
    if workers <= 1 or len(combinations) <= 1:
        session, profile = load_for_sweep(spec)
        rows = []
        for i, settings in enumerate(combinations):
            row = run_one(
                session,
                profile,
                settings,
                estimate_for=estimator_for,
                summarizer=summarizer,
                reuse_estimates=True,  # the session was read with this profile's estimator
            )
            rows.append(row)
            if on_row:
                on_row(i, row)
        return rows
    out: list[SweepRow] = []
    chunk = max(1, len(combinations) // (workers * 4))
    with ProcessPoolExecutor(
        max_workers=workers,
        mp_context=_start_context(),
        initializer=_init,
        initargs=(spec, summarizer),
    ) as pool:
        for i, row in enumerate(pool.map(_run, combinations, chunksize=chunk)):
            out.append(row)
            if on_row:
                on_row(i, row)
    return out
