"""The dashboard and its tune screen show the figures ``stats`` and ``replay`` print, on real
runs (``realruns``) read as a user opens them: one stream file (read progressively), a
database, two streams merged. A what-if applied there goes on to the end of the session."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctx_inspect.app.config import build_profile
from ctx_inspect.core.model import Origin
from ctx_inspect.ui.app import InspectorApp, OpenRequest
from ctx_inspect.ui.screens.diff_screen import DiffScreen
from ctx_inspect.ui.screens.tune_screen import curve
from tests.ui.test_diff_screen import SIZE, preview, wait_for
from tests.ui.test_tune_screen import tuned
from tests.unit.test_same_figures import RUNS, cli_json, options, paths_of

OPENED = ["codex-autocompact", "opencode-db", "ai-agent-guard-preflight-merged"]


@pytest.mark.corpus
@pytest.mark.parametrize("name", OPENED)
async def test_the_dashboard_and_tune_show_the_figures_of_stats_and_replay(
    corpus: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    run = RUNS[name]
    files = paths_of(corpus, run)
    stats = cli_json(capsys, "stats", "--steps", *options(run), *map(str, files))
    played = cli_json(capsys, "replay", *options(run), *map(str, files))
    sets = list(run.sets)
    app = InspectorApp(
        OpenRequest(
            paths=tuple(files),
            profile_for=lambda spec: build_profile(None, None, sets, default=spec.default_profile),
            merge=run.merge,
        )
    )
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.state is not None and not app.loading)
        await pilot.pause()
        state = app.state
        assert state is not None
        # every step as stats shows it, and at open the last one
        shown = [(s.step, s.tokens, s.origin.value) for s in state.steps()]
        assert shown == [(s["step"], s["tokens"], s["source"]) for s in stats["context_per_step"]]
        assert state.gauge()["tokens"] == stats["final_context_tokens"]
        # the tune screen's curve under the session's settings is replay's
        screen = await tuned(pilot)
        assert screen.original is not None
        assert [(p.step, p.tokens) for p in curve(screen.original)] == [
            (p["step"], p["tokens"]) for p in played["curve"]
        ]
        assert screen.original.peak() == (played["peak_step"], played["peak_context_tokens"])


@pytest.mark.corpus
async def test_a_what_if_applied_in_the_dashboard_replays_the_rest_of_the_session(
    corpus: Path,
) -> None:
    run = RUNS["codex-autocompact"]
    sets = list(run.sets)
    app = InspectorApp(
        OpenRequest(
            paths=tuple(paths_of(corpus, run)),
            profile_for=lambda spec: build_profile(None, None, sets, default=spec.default_profile),
        )
    )
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.state is not None and not app.loading)
        state = app.state
        assert state is not None
        recorded = state.steps()
        state.move(3)
        screen = await preview(pilot, "C")
        after = screen.diff.tokens_after
        assert screen.diff.tokens_before == recorded[2].tokens  # the figure on screen there
        await pilot.press("a")
        await wait_for(pilot, lambda: not isinstance(app.screen, DiffScreen))
        await pilot.pause()
        assert state.what_if is not None and "at step 3" in state.what_if
        shown = state.steps()
        assert len(shown) == len(recorded)
        assert shown[2].tokens == after
        assert all(s.origin is Origin.ESTIMATED for s in shown[2:])
        assert shown[6].tokens < recorded[6].tokens
        # the screen opens at the live end: the branch's last figure, said to be an estimate
        gauge = state.gauge()
        assert gauge["tokens"] == shown[-1].tokens and "estimated" in gauge["origin"]
        await pilot.press("u")
        await pilot.pause()
        assert state.branches == [] and [s.tokens for s in state.steps()] == [
            s.tokens for s in recorded
        ]
