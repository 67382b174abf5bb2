"""Columns of a session's rows: numbers in arrays that start narrow and are widened when a
number does not fit (``widened``), and objects that are mostly one object throughout
(``ObjectColumn``)."""

from __future__ import annotations

from array import array
from itertools import repeat
from operator import is_
from typing import Any

_WIDER = {"b": "h", "B": "H", "h": "i", "H": "i", "i": "q"}


def widened(column: array[int]) -> array[int]:
    """The numbers of ``column`` in an array of the next wider type. Columns start narrow (a
    few bytes a row) and are widened when a number does not fit; past 64 bits, OverflowError."""
    wider = _WIDER.get(column.typecode)
    if wider is None:
        raise OverflowError("a number does not fit 64 bits")
    return array(wider, column)


_UNSET = object()


class ObjectColumn:
    """A column of objects that is often one object throughout (``None``, ``"main"``, a shared
    fields-set): kept as that object and a count until another one comes."""

    __slots__ = ("_count", "_items", "_only")

    def __init__(self) -> None:
        self._items: list[Any] | None = None
        self._only: Any = _UNSET
        self._count = 0

    def append(self, value: Any) -> None:
        items = self._items
        if items is not None:
            items.append(value)
        elif value is self._only:
            self._count += 1
        elif not self._count:
            self._only, self._count = value, 1
        else:
            self._items = [self._only] * self._count
            self._items.append(value)

    def extend(self, values: Any) -> None:
        """``append`` each of ``values`` (a sequence)."""
        if not values:
            return
        first = values[0]
        if all(map(is_, values, repeat(first))):
            self.extend_same(first, len(values))
            return
        if self._items is None:
            self._items = [self._only] * self._count
        self._items.extend(values)

    def extend_same(self, value: Any, count: int) -> None:
        """``append(value)``, ``count`` times."""
        if self._items is None and (value is self._only or not self._count):
            self._only = value
            self._count += count
        elif self._items is None:
            self._items = [self._only] * self._count + [value] * count
        else:
            self._items.extend([value] * count)

    def __getitem__(self, row: int) -> Any:
        items = self._items
        if items is not None:
            return items[row]
        if not 0 <= row < self._count:
            raise IndexError("row out of range")
        return self._only

    def __len__(self) -> int:
        return len(self._items) if self._items is not None else self._count
