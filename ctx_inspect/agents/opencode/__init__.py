"""opencode: its profile, arithmetic, policy, explain knobs and readers, declared once.

- ``profile``: ``OpenCodeProfile``, OpenCode 1.18's settings with its defaults;
- ``estimate``: ``Token.estimate`` (``Math.round(length / 4)``);
- ``policy``: compaction after a request, the overflow compaction, the opt-in prune;
- readers: ``reader_db`` (``opencode.db``), ``reader_storage`` (the legacy ``storage/``
  folder), both through ``convert`` and ``records``; ``reader_log`` (its log files),
  ``reader_run`` (``opencode run --format json``), ``reader_data`` (the data folder, and
  ``--merge`` of one run's files).

The page on OpenCode (settings, figures, fidelity) is this folder's ``README.md``.
"""

from __future__ import annotations

from ctx_inspect.agents.opencode.estimate import ESTIMATOR
from ctx_inspect.agents.opencode.policy import POLICY
from ctx_inspect.agents.opencode.profile import OpenCodeProfile
from ctx_inspect.core.agents import Agent, Knob, const, times

AGENT = Agent(
    "opencode",
    profile=OpenCodeProfile,
    policy=POLICY,
    estimator=ESTIMATOR,
    knobs=(
        Knob("output_limit", -1, const(1024)),
        Knob("context_window", +1, times(8)),
    ),
    formats=(
        "ctx_inspect.agents.opencode.reader_log",
        "ctx_inspect.agents.opencode.reader_db",
        "ctx_inspect.agents.opencode.reader_storage",
        "ctx_inspect.agents.opencode.reader_run",
        "ctx_inspect.agents.opencode.reader_data",
    ),
)
