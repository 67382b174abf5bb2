"""The dashboard and its tune screen show the figures ``stats`` and ``replay`` print, on real
runs (``realruns``) read as a user opens them: one stream file (read progressively), a
database, two streams merged."""

from __future__ import annotations

from pathlib import Path

import pytest

from inspector.config import build_profile
from inspector.ui.app import InspectorApp, OpenRequest
from inspector.ui.screens.tune_screen import curve
from tests.ui.test_diff_screen import SIZE, wait_for
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
