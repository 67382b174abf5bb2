"""guide: the generic recipe of seed 001 (the BaseAgent guide), declared once.

``profile.py`` its settings, ``estimate.py`` its token arithmetic, ``policy.py`` the recipe's
stages; ``README.md`` its settings and their sources. No real tool runs it and it has no reader.
"""

from __future__ import annotations

from ctx_inspect.agents.guide.estimate import RULE
from ctx_inspect.agents.guide.policy import POLICY
from ctx_inspect.agents.guide.profile import GuideProfile
from ctx_inspect.core.agents import Agent, Knob, const, times

AGENT = Agent(
    "guide",
    profile=GuideProfile,
    policy=POLICY,
    estimator=RULE,
    knobs=(
        Knob("compact_ratio", +1, const(0.99), step=0.01),
        Knob("context_window", +1, times(8)),
    ),
)
