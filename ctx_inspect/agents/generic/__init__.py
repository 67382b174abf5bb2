"""generic: ctx-inspect's neutral baseline for plain chat arrays and agents we do not know,
declared once.

``profile.py`` its settings, ``policy.py`` its policy (ours, no agent's); it estimates with our
tokenizer (the generic ``exact`` rule) and reads with the generic readers of
``ctx_inspect/formats``. ``README.md`` gives its settings.
"""

from __future__ import annotations

from ctx_inspect.agents.generic.policy import POLICY
from ctx_inspect.agents.generic.profile import GenericProfile
from ctx_inspect.core.agents import Agent, Knob, const, times

AGENT = Agent(
    "generic",
    profile=GenericProfile,
    policy=POLICY,
    knobs=(
        Knob("compact_ratio", +1, const(1.0), step=0.01),
        Knob("context_window", +1, times(8)),
    ),
)
