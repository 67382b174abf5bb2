"""The points of the context curve, one per step, and the markers they carry (C compaction,
P prune, D dropped, F final turn, R reset, X rejected): kept as columns (``TimelinePoints``), a
few bytes per step, not as an object per step. No widget here: the session's state keeps them,
the timeline and the compared curves draw them."""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar, overload

from ctx_inspect.core.window import Zone

MARKERS: dict[str, tuple[str, tuple[str, ...]]] = {  # name: letter, theme colours
    "compaction": ("C", ("marker-compaction", "primary")),
    "prune": ("P", ("marker-prune", "secondary")),
    "dropped": ("D", ("marker-drop", "warning")),
    "final_turn": ("F", ("marker-final", "error")),
    "reset": ("R", ("marker-reset", "accent")),
    "rejected": ("X", ("marker-final", "error")),
}
# who wins a narrow column
PRIORITY = (
    "final_turn",
    "rejected",
    "reset",
    "compaction",
    "prune",
    "dropped",
)  # who wins a narrow column


@dataclass(frozen=True)
class TimelinePoint:
    step: int
    tokens: int
    peak: int
    zone: Zone
    markers: frozenset[str]


ZONES = list(Zone)
_ZONE_CODE = {zone: code for code, zone in enumerate(ZONES)}
NO_MARKERS: frozenset[str] = frozenset()


class TimelinePoints(Sequence[TimelinePoint]):
    """Points in step order, kept as columns: a few bytes per step, and a dict for the few
    steps with markers. A point is made when it is asked for.

    Points change only at the end: ``truncate`` drops a tail, ``add`` appends. ``revision`` counts
    the changes; a reader that copied the first ``n`` points at some revision asks
    ``changed_since(revision, n)`` where to read again from.
    """

    HISTORY: ClassVar[int] = 64  # truncations remembered for ``changed_since``

    def __init__(self, points: Iterable[TimelinePoint] = ()) -> None:
        self.steps = array("q")
        self.tokens = array("q")
        self.peaks = array("q")
        self.zones = bytearray()
        self.markers: dict[int, frozenset[str]] = {}  # position -> markers, when it has some
        self.revision = 0
        self._cuts: list[tuple[int, int]] = []  # (revision, the size truncated to)
        self._forgotten = 0  # the last revision whose truncation is no longer remembered
        self.extend(points)

    def __len__(self) -> int:
        return len(self.steps)

    @overload
    def __getitem__(self, index: int) -> TimelinePoint: ...

    @overload
    def __getitem__(self, index: slice) -> list[TimelinePoint]: ...

    def __getitem__(self, index: int | slice) -> TimelinePoint | list[TimelinePoint]:
        if isinstance(index, slice):
            return [self._point(i) for i in range(*index.indices(len(self.steps)))]
        if index < 0:
            index += len(self.steps)
        if not 0 <= index < len(self.steps):
            raise IndexError(index)
        return self._point(index)

    def __iter__(self) -> Iterator[TimelinePoint]:
        return map(self._point, range(len(self.steps)))

    def _point(self, i: int) -> TimelinePoint:
        return TimelinePoint(
            self.steps[i],
            self.tokens[i],
            self.peaks[i],
            ZONES[self.zones[i]],
            self.markers.get(i, NO_MARKERS),
        )

    def position(self, step: int | None) -> int | None:
        """The position of the point of ``step``, or None when there is none."""
        if step is None:
            return None
        i = bisect_left(self.steps, step)
        return i if i < len(self.steps) and self.steps[i] == step else None

    def add(self, step: int, tokens: int, peak: int, zone: Zone, markers: Iterable[str]) -> None:
        """Append a point (steps increase)."""
        self.revision += 1
        if markers:
            self.markers[len(self.steps)] = frozenset(markers)
        self.steps.append(step)
        self.tokens.append(tokens)
        self.peaks.append(peak)
        self.zones.append(_ZONE_CODE[zone])

    def append(self, point: TimelinePoint) -> None:
        self.add(point.step, point.tokens, point.peak, point.zone, point.markers)

    def extend(self, points: Iterable[TimelinePoint]) -> None:
        for point in points:
            self.append(point)

    def truncate(self, size: int) -> None:
        """Drop the points from position ``size`` on."""
        size = max(0, size)
        if size >= len(self.steps):
            return
        markers, end = self.markers, len(self.steps)
        if len(markers) < end - size:
            dropped = [p for p in markers if p >= size]
        else:  # a short tail: look its points up rather than walk every marked one
            dropped = [p for p in range(size, end) if p in markers]
        for position in dropped:
            del markers[position]
        del self.steps[size:], self.tokens[size:], self.peaks[size:], self.zones[size:]
        self.revision += 1
        self._cuts.append((self.revision, size))
        if len(self._cuts) > self.HISTORY:
            self._forgotten = self._cuts.pop(0)[0]

    def copy_from(self, source: TimelinePoints, start: int = 0) -> None:
        """Make the points from position ``start`` on those of ``source`` (column copies)."""
        self.truncate(start)
        start = len(self.steps)
        self.revision += 1
        self.steps.extend(source.steps[start:])
        self.tokens.extend(source.tokens[start:])
        self.peaks.extend(source.peaks[start:])
        self.zones.extend(source.zones[start:])
        if start == 0:
            self.markers.update(source.markers)
        elif len(source.markers) < len(source.steps) - start:
            self.markers.update((p, m) for p, m in source.markers.items() if p >= start)
        else:
            get = source.markers.get
            for position in range(start, len(source.steps)):
                if (markers := get(position)) is not None:
                    self.markers[position] = markers

    def changed_since(self, revision: int, seen: int) -> int:
        """For a reader that copied the first ``seen`` points at ``revision``: the first position
        that may differ from its copy (0 when that revision is too old to tell)."""
        if revision > self.revision or revision < self._forgotten:
            return 0
        first = min(seen, len(self.steps))
        for cut_revision, size in reversed(self._cuts):
            if cut_revision <= revision:
                break
            first = min(first, size)
        return first


def marker_letters(markers: frozenset[str]) -> str:
    return "".join(MARKERS[name][0] for name in PRIORITY if name in markers)
