"""Sweep grids: axes, ranges, combinations."""

from __future__ import annotations

import pytest

from inspector.core.sweep import grid, parse_axis
from inspector.errors import ConfigError


def test_lists_and_inclusive_ranges() -> None:
    assert parse_axis("buffer_tokens=0,4096,8192") == ("buffer_tokens", [0, 4096, 8192])
    assert parse_axis("context_window=100_000:200_000:50_000") == (
        "context_window",
        [100_000, 150_000, 200_000],
    )
    assert parse_axis("auto_compact_ratio=0.7:0.9:0.1") == ("auto_compact_ratio", [0.7, 0.8, 0.9])
    assert parse_axis("version=2.0,2.1")[1] == [2.0, 2.1]
    assert parse_axis('version="2.0","2.1"')[1] == ["2.0", "2.1"]
    assert parse_axis("n=1:3") == ("n", [1, 2, 3])


@pytest.mark.parametrize(
    "bad", ["", "x", "=1,2", "x=", "x=1:2:0", "x=5:1:1", "x=a:b", "x=0:1000000:1"]
)
def test_bad_axes_are_clear_errors(bad: str) -> None:
    with pytest.raises(ConfigError):
        parse_axis(bad)


def test_grid_is_the_cartesian_product_in_order() -> None:
    combos = grid([("a", [1, 2]), ("b", ["x", "y", "z"])])
    assert len(combos) == 6
    assert combos[0] == {"a": 1, "b": "x"} and combos[-1] == {"a": 2, "b": "z"}
    assert grid([]) == [{}]
