"""Python's cyclic garbage collector, kept out of the way of work that makes no cycles.

Reading a session, replaying it and sweeping settings create hundreds of thousands to millions
of objects and (tests check) no reference cycles; left running, the collector rescans all that
is alive again and again, and the work slows down more than linearly. The callers say how long
what they made lives: a session kept open, a headless command's results until the process
ends, a replay's until the screen that asked for it goes. The core never decides it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused(*, collect: bool = False, freeze: bool = False) -> Iterator[None]:
    """The collector paused for the block (nesting keeps it paused until the outermost block
    ends), then restored. ``collect``: collect the few cycles the block made before the rest;
    ``freeze``: move everything alive out of the collector's way for good (``gc.freeze``): for
    objects that live as long as the process (a headless command, a sweep worker) or as the
    session they were read into; whatever else is alive is frozen too and, should it become
    cyclic garbage later, never collected."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collect:
            gc.collect()
        if freeze:
            gc.freeze()
        if was_enabled:
            gc.enable()
