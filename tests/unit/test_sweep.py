"""Sweep grids: axes, ranges, combinations; a row's figures."""

from __future__ import annotations

import json
import random

import pytest

from ctx_inspect.core.diff import diff_action
from ctx_inspect.core.model import (
    Event,
    Message,
    MessageAdded,
    MessageKind,
    Part,
    PartType,
    RequestSent,
    Role,
)
from ctx_inspect.core.policies.base import (
    Action,
    ContextItem,
    ItemChange,
    ItemStatus,
    PolicyResult,
    replace_text,
)
from ctx_inspect.core.profiles import make_profile
from ctx_inspect.core.replay import replay
from ctx_inspect.core.session import Session
from ctx_inspect.core.summarize import LocalSummarizer
from ctx_inspect.core.sweep import (
    FactsCache,
    _needles_in,
    _SurvivalScorer,
    estimates_alike,
    grid,
    parse_axis,
    row_of,
)
from ctx_inspect.errors import ConfigError


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
    # Claude Code's own estimate uses no tokenizer: the encoding changes nothing
    assert estimates_alike(base, make_profile("claude-code", {"encoding": "cl100k_base"}))
    exact = make_profile("claude-code", {"estimator": "exact"})
    assert not estimates_alike(
        exact, make_profile("claude-code", {"estimator": "exact", "encoding": "cl100k_base"})
    )


# -- the batched scorer against the diff, over a real replay -----------------------------------

_WORDS = ["parser", "reader", "config", "window", "buffer", "record", "token", "limit"]


def _coding_session(outputs: int, seed: int) -> Session:
    """A system prompt, a few user turns, and ``outputs`` tool calls with their outputs: lines
    of paths, commands, error lines and identifiers drawn from small pools (so that outputs
    repeat one another's facts, and some survive a prune) mixed with lines of their own."""
    rng = random.Random(seed)
    system = "You are a careful coding agent; run_tests before you say done.\n" * 20
    events: list[Event] = [_added("sys", Role.SYSTEM, MessageKind.MESSAGE, system)]
    for n in range(outputs):
        if n % 6 == 0:  # users paste logs: what only a compaction takes out
            pasted = "\n".join(f"{rng.choice(_WORDS)}Error: log line {i}" for i in range(400))
            ask = f"Please fix src/{rng.choice(_WORDS)}.py: read_{rng.choice(_WORDS)} fails.\n"
            events.append(_added(f"u{n}", Role.USER, MessageKind.MESSAGE, ask + pasted))
        events.append(RequestSent(request_id=f"r{n}"))
        command = f"pytest -q tests/test_{rng.choice(_WORDS)}.py"
        if n % 7 == 3:
            command = f"make {rng.choice(_WORDS)}\nmake check"  # a command over two lines
        events.append(
            MessageAdded(
                message=Message(
                    id=f"a{n}",
                    role=Role.ASSISTANT,
                    kind=MessageKind.TOOL_CALL,
                    parts=(
                        Part(
                            type=PartType.TOOL_CALL,
                            tool_name="bash",
                            call_id=f"c{n}",
                            arguments=json.dumps({"command": command}),
                        ),
                    ),
                )
            )
        )
        lines = [f"$ {command.splitlines()[0]}", f'{{"cmd": "{command}"}}']
        for i in range(rng.choice([20, 60, 150, 400])):
            word, other = rng.choice(_WORDS), rng.choice(_WORDS)
            lines.append(
                rng.choice(
                    [
                        f"src/{word}.py:{i % 40}: {word} {other} ok",
                        f"src/{word}.py:{i % 40}: {word.title()}Error: bad {other}_value",
                        f"E   AssertionError: expected {i % 13} {word}s, got {i % 7}",
                        f"FAILED tests/test_{word}.py::test_{other} - {other} not found",
                        f"{word} {other} {rng.randrange(10**6)} calls parse{other.title()}()",
                        f"Traceback (most recent call last): in {word}_{other}_{n}",
                    ]
                )
            )
        events.append(
            _added(f"t{n}", Role.TOOL, MessageKind.TOOL_RESULT, "\n".join(lines), f"c{n}")
        )
    session = Session(estimator=lambda m: len(m.text) // 4)
    session.append(events)
    return session


def _added(mid: str, role: Role, kind: MessageKind, text: str, call_id: str | None = None) -> Event:
    ptype = PartType.TOOL_RESULT if kind is MessageKind.TOOL_RESULT else PartType.TEXT
    return MessageAdded(
        message=Message(
            id=mid,
            role=role,
            kind=kind,
            parts=(
                Part(type=ptype, text=text, tool_name="bash" if call_id else None, call_id=call_id),
            ),
        )
    )


@pytest.mark.parametrize("batch", [1, 3, _SurvivalScorer.BATCH, 1000])
def test_batched_scores_are_the_diffs_over_a_replay(
    batch: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = _coding_session(outputs=90, seed=5)
    profile = make_profile("generic", {"context_window": 12_000})
    result = replay(
        session, profile, estimate=lambda m: len(m.text) // 4, summarizer=LocalSummarizer()
    )
    records = [
        (record.before, record.result)
        for record in result.results
        if record.result.action in (Action.COMPACT, Action.PRUNE)
    ]
    actions = [r.action for _, r in records]
    assert actions.count(Action.PRUNE) >= 10 and actions.count(Action.COMPACT) >= 2
    expected = [diff_action(before, r).survived.score for before, r in records]
    assert len({round(score, 3) for score in expected}) >= 10  # scores of all sorts
    assert any(0 < score < 1 for score in expected) and min(expected) < 0.5
    monkeypatch.setattr(_SurvivalScorer, "BATCH", batch)
    assert _SurvivalScorer(FactsCache()).scores(records) == expected
    row = row_of({}, result, FactsCache())
    assert row.survived == sum(expected) / len(expected)
    assert (row.prunes, row.compactions) == (
        actions.count(Action.PRUNE),
        actions.count(Action.COMPACT),
    )


# -- needles: overlapping, nested, in several texts, over two texts -------------------------


def test_every_needle_is_found_in_every_text_that_holds_it() -> None:
    needles = ["abc", "bc", "c", "abcd", "cab", "zz", "é🙂", "🙂x", "src/a.py", "a.py"]
    texts = ["abcab", "xbcx", "abcd", "é🙂x", "lib/src/a.py", "nothing", ""]
    found = _needles_in(needles, texts)
    assert found == {
        "abcab": {"abc", "bc", "c", "cab"},
        "xbcx": {"bc", "c"},
        "abcd": {"abc", "bc", "c", "abcd"},
        "é🙂x": {"é🙂", "🙂x"},
        "lib/src/a.py": {"src/a.py", "a.py", "c"},
        "nothing": set(),
        "": set(),
    }
    assert _needles_in([], ["abc"]) == {"abc": set()}


def _removal(before: list[ContextItem], removed: str, kept: list[ContextItem]) -> PolicyResult:
    changes = [ItemChange(removed, ItemStatus.PRUNED, 10, 2)]
    return PolicyResult(Action.PRUNE, "x", True, "r", kept, changes, 50, 40)


def test_needles_that_nest_overlap_repeat_or_span_two_texts_score_as_the_diff_does() -> None:
    """Every fact is on one line (the detectors make it so), so no needle spans two texts; the
    scorer still finds each where the diff does, nested, overlapping or in several texts."""
    long_error = "src/reader.py:3: ValueError: " + "x" * 80  # its needle is the first 60
    removed = (
        f"{long_error}\n"
        "see src/reader.py and lib/src/reader.py; read_records and read_records_all\n"
        "$ make build\n$ make  check\n"
        "FAILED test_one - KeyError\n"
        "error: one\nerror: one two"
    )
    keep = [
        _output("k0", long_error[:60] + " (cut)"),
        _output("k1", "lib/src/reader.py read_records_all"),
        _output("k2", "ran make build"),
        _output("k3", "make check passed; error: one two"),
        _output("k4", "error: one two"),
        _output("k5", long_error[:59]),  # one character short of its needle
    ]
    target = _output("gone", removed)
    before = [target, *keep]
    cases = [
        keep,  # everything but FAILED...: nested needles, needles in several texts
        [keep[2], keep[3]],
        [keep[3], keep[2]],
        [keep[0]],
        [keep[5]],
        [],  # nothing is left
    ]
    results = [_removal(before, "gone", items) for items in cases]
    expected = [diff_action(before, r).survived.score for r in results]
    assert expected[1] == expected[2] and expected[3] != expected[4]
    assert 0 == expected[-1] < expected[0] < 1
    for batch in (1, 2, 10):
        scorer = _SurvivalScorer(FactsCache())
        scorer.BATCH = batch
        assert scorer.scores([(before, r) for r in results]) == expected
        assert [scorer.score(before, r) for r in results] == expected
