"""Every input format fuzzed: mutated real inputs never crash a reader, hang, lose bytes
without a word or make a command fail with a traceback.

Seeds are each format's inputs (``tests/formats.py``): our fixtures (``tests/data``) and, when
it is here, the real samples of the shared corpus (read in place, a window of each). Mutations
(``tests/hostile/fuzz.py``): bits flipped, a cut at a random point, invalid UTF-8, NUL bytes, a
line of megabytes, JSON nested 100,000 levels deep (and just under the limits of the JSON reader
and of Python's recursion), JSON values of the wrong type in the fields a record has, null
everywhere, records repeated or reordered, other line ends; rows and files of databases and
folders changed, removed or damaged.

What each reader promises (``ctx_inspect/formats/base.py``), here on mutated inputs (the fixed
cases every format passes are ``tests/conformance/test_formats.py``):

- it never raises on bad data, and its own failures (a reader bug, caught so that the rest of
  the file is read) do not happen either: bad data becomes a ``ParseIssue`` saying what is wrong;
- fed the bytes in pieces cut anywhere, it gives the events it gives for them whole, and so does
  ``feed_entries`` (the reading without bodies, for ``stats --no-exact``);
- every byte is accounted for: each non-blank line is in an event's span, or it changes what is
  read (a line of a JSON document, a part of a message held until its request ends); a line
  that no event points at and that changes nothing was dropped without a word.

And the whole path a user takes, ``ctx-inspect stats --json`` and ``replay --json`` (format
detected or forced, any profile), exits 0 or 2, never with a traceback.

How long. The examples are the same on every run (derived from each test: a failure is
reproduced by running the test again; CI is stable). ``CTX_FUZZ_EXAMPLES=N`` runs N examples
per test instead of the few below (``CTX_FUZZ_EXAMPLES=2000`` for a long search), and
``CTX_FUZZ_RANDOM=1`` draws new examples on each run. A reader that hangs is found by the
watchdog: after ``CTX_FUZZ_HANG`` seconds (300) on one example the run stops, printing where
every thread was.

What the fuzzing found is kept as exact cases in ``test_fuzz_findings.py``.
"""

from __future__ import annotations

import contextlib
import faulthandler
import io
import json
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from ctx_inspect.cli import main
from ctx_inspect.core.model import ParseIssue
from ctx_inspect.core.profiles import profile_names
from ctx_inspect.errors import InputError
from ctx_inspect.formats.registry import FormatSpec, all_formats, get_format
from tests.formats import (
    Seed,
    comparable,
    dropped_lines,
    read,
    seeds,
    snapshot_seeds,
    stream_formats,
)
from tests.hostile.fuzz import MUTATIONS, mutate, mutate_input, window

T = TypeVar("T")

EXAMPLES = int(os.environ.get("CTX_FUZZ_EXAMPLES") or 0)
RANDOM = bool(os.environ.get("CTX_FUZZ_RANDOM"))
HANG_SECONDS = float(os.environ.get("CTX_FUZZ_HANG") or 300)
# examples per test when CTX_FUZZ_EXAMPLES is not set: about a minute for the whole module
READING_EXAMPLES = 100
CORPUS_READING_EXAMPLES = 40
COMMAND_EXAMPLES = 15
SNAPSHOT_EXAMPLES = 25

# a reader's own failure, caught by the safety net (``LineParser``, ``ChatParser``)
CRASHES = ("unreadable record (", "unreadable message (")


STREAMS = [spec.name for spec in stream_formats()]
SNAPSHOTS = sorted(snapshot_seeds())


def fuzzing(examples: int) -> settings:
    return settings(
        max_examples=EXAMPLES or examples,
        # a generous bound: an example is read in well under a second; the watchdog stops a hang
        deadline=timedelta(seconds=60),
        derandomize=not RANDOM,
        database=None,
        print_blob=True,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
            HealthCheck.function_scoped_fixture,
        ],
    )


class Draws:
    """The mutations' decisions, drawn by hypothesis (so that a failure shrinks)."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data

    def integer(self, low: int, high: int) -> int:
        return self.data.draw(st.integers(low, high))

    def choice(self, options: Sequence[T]) -> T:
        return options[self.integer(0, len(options) - 1)]  # an index: short to print


_REPORT_FD: list[int] = []  # where the watchdog writes: standard error as it was before pytest


@pytest.fixture(scope="module", autouse=True)
def _hang_report(pytestconfig: pytest.Config) -> Iterator[None]:
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        _REPORT_FD.append(os.dup(2))
    yield
    os.close(_REPORT_FD.pop())


@contextlib.contextmanager
def watchdog() -> Iterator[None]:
    """Stop the run, printing every thread's stack, when one example hangs (a regular
    expression stuck in C code cannot be interrupted any other way)."""
    faulthandler.dump_traceback_later(HANG_SECONDS, exit=True, file=_REPORT_FD[-1])
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


@contextlib.contextmanager
def room_to_compare() -> Iterator[None]:
    """Recursion enough to compare events holding values nested 1,000 deep (the readers are
    never run with it: their recursion is what a user's run has)."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 20_000))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def same(a: Any, b: Any) -> bool:
    with room_to_compare():
        return bool(a == b) or repr(a) == repr(b)  # NaN is not equal to itself


def mutated(pool: list[Seed], c: Draws) -> tuple[Seed, list[str], bytes]:
    seed = c.choice(pool)
    names = [c.choice(list(MUTATIONS)) for _ in range(c.integer(1, 3))]
    return seed, names, mutate(window(seed, c), c, names)


def check_reading(spec: FormatSpec, data: bytes, cuts: Sequence[int]) -> None:
    """Everything a reader promises about one input (see the module's docstring)."""
    whole = read(spec, data)
    crashes = [
        e.reason for e in whole if isinstance(e, ParseIssue) and e.reason.startswith(CRASHES)
    ]
    assert not crashes, f"the reader failed on a record: {crashes[:3]}"
    pieces = read(spec, data, cuts)
    assert same(pieces, whole), f"fed in pieces cut at {list(cuts)}, other events"
    entries = read(spec, data, cuts, entries=True)
    assert same(comparable(entries), comparable(whole)), "feed_entries gives other events"
    dropped = dropped_lines(spec, data, whole)
    assert not dropped, f"lines {dropped} are dropped without a word"


def cuts_of(data: bytes, c: Draws) -> list[int]:
    return sorted(c.integer(0, len(data)) for _ in range(c.integer(1, 6)))


# -- every format is fuzzed ---------------------------------------------------------------------


def test_every_registered_format_is_fuzzed() -> None:
    names = {spec.name for spec in all_formats()}
    stream = {spec.name for spec in all_formats() if spec.parser is not None}
    assert set(STREAMS) == stream
    whole = {spec.name for spec in all_formats() if spec.parser is None}
    assert whole <= set(SNAPSHOTS), "a format read whole has no inputs to fuzz"
    assert set(SNAPSHOTS) <= names
    for name in STREAMS:
        assert [s for s in seeds()[name] if not s.corpus], f"{name}: no fixture to start from"


# -- reading ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", STREAMS)
@fuzzing(READING_EXAMPLES)
@given(data=st.data())
def test_reading_mutated_fixtures(name: str, data: st.DataObject) -> None:
    spec = get_format(name)
    c = Draws(data)
    seed, names, raw = mutated([s for s in seeds()[name] if not s.corpus], c)
    note(f"{seed.label} through {names}: {len(raw)} bytes")
    with watchdog():
        check_reading(spec, raw, cuts_of(raw, c))


@pytest.mark.corpus
@pytest.mark.parametrize("name", STREAMS)
@fuzzing(CORPUS_READING_EXAMPLES)
@given(data=st.data())
def test_reading_mutated_real_files(name: str, corpus: Path, data: st.DataObject) -> None:
    pool = [s for s in seeds()[name] if s.corpus]
    if not pool:
        pytest.skip(f"the corpus holds no real {name} input")
    spec = get_format(name)
    c = Draws(data)
    seed, names, raw = mutated(pool, c)
    note(f"{seed.label} through {names}: {len(raw)} bytes")
    with watchdog():
        check_reading(spec, raw, cuts_of(raw, c))


# -- the commands -------------------------------------------------------------------------------


def run_main(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return code, out.getvalue(), err.getvalue()


def check_commands(path: Path, options: list[str]) -> None:
    """``stats --json`` and ``replay --json`` exit 0 or 2, print JSON lines, and say what is
    wrong on one line each (a traceback would have raised out of ``main``)."""
    for command in (["stats", "--json"], ["replay", "--json"]):
        code, out, err = run_main([*command, *options, str(path)])
        assert code in (0, 2), (command, code, err[-2000:])
        lines = err.splitlines()
        assert all(line.startswith("ctx-inspect: ") for line in lines), err[-2000:]
        assert code == 0 or lines, f"{command[0]} exits 2 without saying why"
        for line in out.splitlines():
            json.loads(line)


def command_options(name: str, c: Draws) -> list[str]:
    options = ["--format", name] if c.integer(0, 1) else []
    profile = c.choice([None, *profile_names()])
    return options + (["--profile", profile] if profile else [])


@pytest.mark.parametrize("source", ["fixtures", "corpus"])
@pytest.mark.parametrize("name", STREAMS)
@fuzzing(COMMAND_EXAMPLES)
@given(data=st.data())
def test_the_commands_on_mutated_inputs(
    name: str, source: str, request: pytest.FixtureRequest, data: st.DataObject
) -> None:
    if source == "corpus":
        request.getfixturevalue("corpus")
    pool = [s for s in seeds()[name] if s.corpus == (source == "corpus")]
    if not pool:
        pytest.skip(f"the corpus holds no real {name} input")
    c = Draws(data)
    seed, names, raw = mutated(pool, c)
    options = command_options(name, c)
    note(f"{seed.label} through {names}: {len(raw)} bytes; options {options}")
    with tempfile.TemporaryDirectory() as folder, watchdog():
        path = Path(folder) / seed.path.name
        path.write_bytes(raw)
        check_commands(path, options)


# -- inputs read whole: databases and folders ---------------------------------------------------


@pytest.mark.parametrize("name", SNAPSHOTS)
@fuzzing(SNAPSHOT_EXAMPLES)
@given(data=st.data())
def test_inputs_read_whole_mutated(name: str, data: st.DataObject) -> None:
    """A database or a folder with rows, files and pages changed: read into sessions and
    issues (or refused with one line), never a traceback."""
    spec = get_format(name)
    c = Draws(data)
    seed = c.choice(snapshot_seeds()[name])
    with tempfile.TemporaryDirectory() as folder, watchdog():
        path = seed.make(Path(folder))
        done = [mutate_input(path, c) for _ in range(c.integer(1, 3))]
        note(f"{seed.label}: {done}")
        assert spec.snapshot is not None
        with contextlib.suppress(InputError):
            spec.snapshot(path)
        check_commands(path, command_options(name, c))
