"""Fifth's context manager: its profile, arithmetic, policy, explain knobs and readers.

- ``profile.py``: the settings (``FifthProfile``) with the program's defaults;
- ``estimate.py``: its token arithmetic (``FIFTH``);
- ``levels.py``: levels, ages and capacity as the policy reads them; ``policy.py``: its
  compression (manual, and ``ctx-auto-compress`` when asked for);
- the readers: ``reader_db.py`` (its SQLite ``context.db``), ``reader_stats.py`` (the output of
  its ``stats`` command);
- ``README.md``: the agent's page (its settings and how they are derived).
"""

from __future__ import annotations

from ctx_inspect.agents.fifth.estimate import FIFTH
from ctx_inspect.agents.fifth.policy import POLICY
from ctx_inspect.agents.fifth.profile import FifthProfile
from ctx_inspect.core.agents import Agent, Knob, const, times

AGENT = Agent(
    "fifth",
    profile=FifthProfile,
    policy=POLICY,
    estimator=FIFTH,
    knobs=(
        Knob("capacity_trigger", +1, const(100)),
        Knob("level3_budget", +1, times(8, "level3_budget")),
    ),
    formats=("ctx_inspect.agents.fifth.reader_db", "ctx_inspect.agents.fifth.reader_stats"),
)
