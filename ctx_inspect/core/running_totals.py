"""Running totals of the tokens in context, message by message, at any step (a viewer's
"running" column), for sessions of millions of messages that keep growing while they are read.

Nothing is kept per message beyond a small array of the messages still in context. Messages are
grouped in blocks of ``BLOCK``: per block, the tokens of its messages that can be in context
(visible, main thread) and, by step, the tokens of those a compaction or a reset removed. A
message's running total is the sum over the blocks before its own (one pass over the blocks,
cached per step) plus a walk within its block (cached for a few blocks).

While the session only grows, an update looks at the new messages only, and at the messages
still in context when a compaction or a reset was appended (that is when messages leave). What
happened at a step that is over never changes: messages enter at the open step and leave at it.
Viewers ask through ``core.session_query``.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections import OrderedDict

from ctx_inspect.core.model import Compacted, ContextReset
from ctx_inspect.core.session import MAIN_THREAD, Flag, Session

BLOCK = 1024
WITHIN_CACHE = 16  # blocks whose running sums are kept
_VISIBLE = int(Flag.VISIBLE)


def best_tokens(session: Session, index: int) -> int:
    """A message's best token figure: reported, else exact, else estimated."""
    table = session.table
    reported = table.reported[index]
    if reported >= 0:
        return int(reported)
    exact = table.exact[index]
    return int(exact if exact >= 0 else table.estimate[index])


class RunningTotals:
    """Running totals over one session, brought up to date as it grows (see the module)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.main = -1  # the main thread's code in the table, once it has appeared
        self._events = -1  # the session's length when last brought up to date
        self._seen = 0  # messages looked at
        self._resets = 0  # compactions and resets seen
        self._base = array("q")  # per block: tokens of its messages that can be in context
        self._removed: list[dict[int, int] | None] = []  # per block: step -> tokens removed
        self._removed_total = array("q")  # per block: all tokens removed
        self._removed_last = array("q")  # per block: the last step that removed any
        self._block_changes = array("q")  # per block: changes so far
        self._changes = 0  # changes to any block
        self._live = array("i")  # messages that can be in context and were not removed
        self._prefix: tuple[tuple[int, int], array[int]] | None = None
        self._within: OrderedDict[tuple[int, int, int, int], array[int]] = OrderedDict()

    # -- questions -------------------------------------------------------------------------

    def in_context(self, index: int, step: int) -> bool:
        """Whether message ``index`` was in context at ``step`` (``Session.in_context``)."""
        self.update()
        t = self.session.table
        if t.step_added[index] > step or not t.flags[index] & _VISIBLE:
            return False
        if t.thread[index] != self.main:
            return False
        removed = t.step_removed[index]
        return not 0 <= removed <= step

    def total(self, index: int, step: int) -> int:
        """The tokens of the messages up to ``index`` (included) in context at ``step``."""
        self.update()
        block, offset = divmod(index, BLOCK)
        return self._block_prefix(step)[block] + self._block_sums(block, step)[offset]

    # -- keeping up with the session -------------------------------------------------------

    def update(self) -> None:
        """Take in what was appended to the session since the last call."""
        session = self.session
        if len(session) == self._events:
            return
        self._events = len(session)
        t = session.table
        if self.main < 0 and MAIN_THREAD in t.threads:
            self.main = t.threads.index(MAIN_THREAD)
        count = len(t)
        if count > self._seen:
            self._take_new(self._seen, count)
            self._seen = count
        resets = sum(1 for _ in session.events_of(Compacted, ContextReset))
        if resets != self._resets:
            self._resets = resets
            self._find_removed()

    def _take_new(self, start: int, stop: int) -> None:
        t = self.session.table
        flags, thread, removed = t.flags, t.thread, t.step_removed
        reported, exact, estimate = t.reported, t.exact, t.estimate
        base, live, main = self._base, self._live, self.main
        blocks = (stop - 1) // BLOCK + 1
        while len(base) < blocks:
            base.append(0)
            self._removed.append(None)
            self._removed_total.append(0)
            self._removed_last.append(-1)
            self._block_changes.append(0)
        for index in range(start, stop):
            if not flags[index] & _VISIBLE or thread[index] != main:
                continue
            tokens = reported[index]
            if tokens < 0:
                tokens = exact[index]
                if tokens < 0:
                    tokens = estimate[index]
            base[index // BLOCK] += tokens
            step = removed[index]
            if step >= 0:
                self._note_removed(index, step, tokens)
            else:
                live.append(index)
        for block in range(start // BLOCK, blocks):
            self._block_changes[block] += 1
        self._changes += 1

    def _find_removed(self) -> None:
        """A compaction or a reset was appended: which of the messages in context left."""
        removed = self.session.table.step_removed
        kept = array("i")
        for index in self._live:
            step = removed[index]
            if step >= 0:
                self._note_removed(index, step, best_tokens(self.session, index))
            else:
                kept.append(index)
        self._live = kept

    def _note_removed(self, index: int, step: int, tokens: int) -> None:
        block = index // BLOCK
        by_step = self._removed[block]
        if by_step is None:
            by_step = self._removed[block] = {}
        by_step[step] = by_step.get(step, 0) + tokens
        self._removed_total[block] += tokens
        self._removed_last[block] = max(self._removed_last[block], step)
        self._block_changes[block] += 1
        self._changes += 1

    # -- sums --------------------------------------------------------------------------------

    def _block_prefix(self, step: int) -> array[int]:
        """Per block: the tokens in context at ``step`` in the blocks before it."""
        key = (step, self._changes)
        if self._prefix is not None and self._prefix[0] == key:
            return self._prefix[1]
        added = bisect_right(self.session.table.step_added, step)  # messages added by then
        prefix = array("q", [0])
        running = 0
        base, by_step, total, last = (
            self._base,
            self._removed,
            self._removed_total,
            self._removed_last,
        )
        for block in range(min(len(base), added // BLOCK)):  # blocks wholly added by ``step``
            running += base[block]
            if last[block] >= 0:
                if last[block] <= step:
                    running -= total[block]
                else:
                    removals = by_step[block] or {}
                    running -= sum(t for s, t in removals.items() if s <= step)
            prefix.append(running)
        partial = len(prefix) - 1  # the block that was being filled at ``step``, if any
        if partial < len(base):
            running += self._block_sums(partial, step)[-1]
            prefix.append(running)
        # the blocks after it hold only messages added after ``step``
        prefix.extend(array("q", [running]) * (len(base) + 1 - len(prefix)))
        self._prefix = (key, prefix)
        return prefix

    def _block_sums(self, block: int, step: int) -> array[int]:
        """Running sums at ``step`` within ``block``, from its first message."""
        t = self.session.table
        first = block * BLOCK
        stop = min(len(t), first + BLOCK)
        key = (block, step, stop, self._block_changes[block])
        cached = self._within.get(key)
        if cached is not None:
            self._within.move_to_end(key)
            return cached
        added, flags, thread, removed = t.step_added, t.flags, t.thread, t.step_removed
        reported, exact, estimate = t.reported, t.exact, t.estimate
        main = self.main
        sums = array("q")
        running = 0
        for index in range(first, stop):
            if (
                added[index] <= step
                and flags[index] & _VISIBLE
                and thread[index] == main
                and not 0 <= removed[index] <= step
            ):
                tokens = reported[index]
                if tokens < 0:
                    tokens = exact[index]
                    if tokens < 0:
                        tokens = estimate[index]
                running += tokens
            sums.append(running)
        self._within[key] = sums
        if len(self._within) > WITHIN_CACHE:
            self._within.popitem(last=False)
        return sums
