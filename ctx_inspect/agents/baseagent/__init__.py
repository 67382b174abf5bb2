"""baseagent: BaseAgent ("SuperAgent", BaseIntelligence/baseagent), declared once.

``profile.py`` its settings, ``estimate.py`` its token arithmetic, ``policy.py`` its context
management, ``reader_log.py`` / ``reader_events.py`` its stderr log and stdout, ``merge.py`` the
two as one session, ``readers.py`` their registration; ``README.md`` says what is read and how
replay agrees with real runs.
"""

from __future__ import annotations

from ctx_inspect.agents.baseagent.estimate import RULE
from ctx_inspect.agents.baseagent.policy import POLICY
from ctx_inspect.agents.baseagent.profile import BaseAgentProfile
from ctx_inspect.core.agents import Agent, Knob, const, times

AGENT = Agent(
    "baseagent",
    profile=BaseAgentProfile,
    policy=POLICY,
    estimator=RULE,
    knobs=(
        Knob("compact_ratio", +1, const(1.0), step=0.01),
        Knob("output_reserve", -1, const(0)),
        Knob("context_window", +1, times(8)),
    ),
    formats=("ctx_inspect.agents.baseagent.readers",),
)
