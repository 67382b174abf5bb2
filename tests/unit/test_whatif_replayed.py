"""A what-if on a real run (``realruns``): the action applied at an early step, then the rest
of the session replayed under the policy that acted, every figure from the applied step on an
estimate; exported, the branch reads back the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctx_inspect.app.config import build_profile, build_summarizer
from ctx_inspect.app.loader import open_inputs
from ctx_inspect.cli import main
from ctx_inspect.core.model import Origin
from ctx_inspect.core.policies.base import Action
from ctx_inspect.ui.state import SessionState
from tests.unit.test_same_figures import RUNS, paths_of

APPLIED = 3  # an early step, before either run's first compaction


def opened(corpus: Path, name: str) -> SessionState:
    run = RUNS[name]
    sets = list(run.sets)
    (loaded,) = open_inputs(
        paths_of(corpus, run),
        lambda spec: build_profile(None, None, sets, default=spec.default_profile),
    )
    return SessionState(loaded)


@pytest.mark.corpus
@pytest.mark.parametrize("name", ["codex-autocompact", "claude-code-autocompact"])
def test_a_compaction_at_an_early_step_replays_the_rest_of_the_session(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    state = opened(corpus, name)
    recorded = state.steps()
    first_compaction = next(s.step for s in recorded if s.compactions)
    assert first_compaction > APPLIED + 2
    items, result, _ = state.preview(Action.COMPACT, state.profile, build_summarizer(None), APPLIED)
    # the action starts from the figure the dashboard shows at the step
    assert result.tokens_before == recorded[APPLIED - 1].tokens
    assert sum(i.tokens for i in items) == result.tokens_before
    branch = state.apply(result, APPLIED)
    assert state.session is branch.session
    shown = state.steps()
    # the rest of the session is there, one step per recorded step
    assert [s.step for s in shown] == [s.step for s in recorded]
    # before the applied step: the recording, as it was
    before = [(s.tokens, s.origin) for s in shown[: APPLIED - 1]]
    assert before == [(s.tokens, s.origin) for s in recorded[: APPLIED - 1]]
    # at it: the action's own figure after; from it on: estimates, said to be
    applied = shown[APPLIED - 1]
    assert applied.tokens == result.tokens_after and applied.compactions == 1
    assert all(s.origin is Origin.ESTIMATED for s in shown[APPLIED - 1 :])
    assert all("what-if" in s.describe() for s in shown[APPLIED - 1 : -1])
    # lower than the recording until the recording compacted
    steps = range(APPLIED - 1, first_compaction - 1)  # (indices: the steps before it)
    pairs = [(shown[i].tokens, recorded[i].tokens) for i in steps]
    assert all(mine < theirs for mine, theirs in pairs)
    # the replayed agent goes on deciding: it compacts again later, under its own rule
    assert any(s.compactions for s in shown[APPLIED:])
    assert state.gauge()["tokens"] == shown[-1].tokens
    # exported, it reads back with the same figures, still estimates
    out = tmp_path / "branch.jsonl"
    state.export(out)
    assert main(["stats", "--json", "--steps", str(out)]) == 0
    again = json.loads(capsys.readouterr().out)
    assert [p["tokens"] for p in again["context_per_step"]] == [s.tokens for s in shown]
    assert again["final_context_source"] == "estimated"
    peak = again["peak_step"]
    assert again["peak_context_source"] == ("reported" if peak < APPLIED else "estimated")


@pytest.mark.corpus
def test_a_what_if_at_the_live_end_shows_the_actions_figure_there(corpus: Path) -> None:
    """Where the dashboard opens: the action comes after everything the recording holds."""
    state = opened(corpus, "codex-autocompact")
    recorded = state.steps()
    end = len(recorded)
    _, result, _ = state.preview(Action.COMPACT, state.profile, build_summarizer(None), end)
    assert result.tokens_before == recorded[-1].tokens
    state.apply(result, end)
    shown = state.steps()
    assert [s.tokens for s in shown[:-1]] == [s.tokens for s in recorded[:-1]]
    assert (shown[-1].tokens, shown[-1].origin) == (result.tokens_after, Origin.ESTIMATED)
