"""Running a sweep across processes, from the command line and from a program with threads."""

from __future__ import annotations

import threading
from pathlib import Path

from inspector.core.summarize import LocalSummarizer
from inspector.core.sweep import grid
from inspector.sweeper import SweepInput, _start_context, run_sweep

LOG = Path(__file__).resolve().parents[1] / "data" / "baseagent" / "typical.log"


def _spec() -> SweepInput:
    return SweepInput(paths=(LOG,), format_name=None, profile_name=None, config=None, sets=())


def test_a_sweep_started_from_a_thread_uses_clean_workers_and_gives_the_same_rows() -> None:
    combinations = grid([("compact_ratio", [0.7, 0.8, 0.85, 0.95])])
    alone = run_sweep(_spec(), combinations, LocalSummarizer(), workers=1)
    found: dict[str, object] = {}

    def in_a_thread() -> None:
        found["method"] = _start_context().get_start_method()
        found["rows"] = run_sweep(_spec(), combinations, LocalSummarizer(), workers=2)

    worker = threading.Thread(target=in_a_thread)
    worker.start()
    worker.join(timeout=120)
    assert not worker.is_alive()
    assert found["method"] == "forkserver"
    assert found["rows"] == alone
    assert [row.settings["compact_ratio"] for row in alone] == [0.7, 0.8, 0.85, 0.95]
