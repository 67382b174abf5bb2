"""Sweep grids: axes, ranges, combinations; a row's figures."""

from __future__ import annotations

import pytest

from inspector.core.diff import diff_action
from inspector.core.model import Message, MessageKind, Part, PartType, Role
from inspector.core.policies.base import (
    Action,
    ContextItem,
    ItemChange,
    ItemStatus,
    PolicyResult,
    replace_text,
)
from inspector.core.profiles import make_profile
from inspector.core.sweep import (
    FactsCache,
    _SurvivalScorer,
    estimates_alike,
    grid,
    parse_axis,
)
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


def _output(mid: str, body: str) -> ContextItem:
    message = Message(
        id=mid,
        role=Role.TOOL,
        kind=MessageKind.TOOL_RESULT,
        parts=(Part(type=PartType.TOOL_RESULT, text=body),),
    )
    return ContextItem(message, len(body) // 4)


def test_a_rows_survival_score_is_the_diffs() -> None:
    """``row_of`` scores what survived without building the diff's rows: the same figure."""
    bodies = [
        "$ pytest -q\nsrc/reader.py:3: AssertionError: bad read_records\nFAILED test_one",
        '{"command": "make\\nbuild"} then src/a/b.py and parse_line_buffer',
        "see src/reader.py; parse_line_buffer is fine",
        "[Old tool result content cleared]",
        "[Old tool result content cleared]",
    ]
    before = [_output(f"t{n}", body) for n, body in enumerate(bodies)]
    after = [
        ContextItem(replace_text(before[0].message, "cleared"), 2),
        before[1],
        before[2],
        before[3],
        before[4],
    ]
    scorer = _SurvivalScorer(FactsCache())
    for changes, items in (
        ([ItemChange("t0", ItemStatus.PRUNED, 10, 2)], after),
        ([ItemChange("t1", ItemStatus.SUMMARIZED, 10, 0)], [before[0], *before[2:]]),
        ([], before),
    ):
        result = PolicyResult(Action.PRUNE, "x", True, "r", items, changes, 50, 40)
        assert scorer.score(before, result) == diff_action(before, result).survived.score


def test_estimates_alike_compares_the_rule_and_its_tokenizer() -> None:
    base = make_profile("claude-code", {})
    assert estimates_alike(base, make_profile("claude-code", {"context_window": 100_000}))
    assert not estimates_alike(base, make_profile("claude-code", {"estimator": "chars4"}))
    assert not estimates_alike(base, make_profile("claude-code", {"encoding": "cl100k_base"}))
