"""Running a sweep across processes, from the command line and from a program with threads."""

from __future__ import annotations

import threading
from pathlib import Path

from ctx_inspect.app.sweeper import SweepInput, _start_context, run_sweep
from ctx_inspect.core.summarize import LocalSummarizer
from ctx_inspect.core.sweep import grid

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


def test_a_sweep_from_a_thread_works_when_stderr_has_no_descriptor(tmp_path: Path) -> None:
    """As under the dashboard, where Textual captures ``sys.stderr``: the workers still start
    (multiprocessing's helper process is given the real standard error)."""
    import subprocess
    import sys

    script = tmp_path / "sweep_in_thread.py"
    script.write_text(
        "import io, sys, threading\n"
        "from pathlib import Path\n"
        "from ctx_inspect.core.summarize import LocalSummarizer\n"
        "from ctx_inspect.core.sweep import grid\n"
        "from ctx_inspect.app.sweeper import SweepInput, run_sweep\n"
        f"spec = SweepInput(paths=(Path({str(LOG)!r}),), format_name=None,"
        " profile_name=None, config=None, sets=())\n"
        "out = {}\n"
        "def go():\n"
        "    out['rows'] = run_sweep(spec, grid([('compact_ratio', [0.7, 0.9])]),"
        " LocalSummarizer(), workers=2)\n"
        "class Capture(io.StringIO):\n"
        "    def fileno(self):\n"
        "        return -1\n"
        "if __name__ == '__main__':\n"
        "    sys.stderr = Capture()\n"
        "    t = threading.Thread(target=go)\n"
        "    t.start()\n"
        "    t.join()\n"
        "    sys.stderr = sys.__stderr__\n"
        "    print(len(out.get('rows', [])))\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2"
