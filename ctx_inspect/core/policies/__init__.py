"""Each agent's context management as pure functions (see ``base.Policy``).

Every agent declares its policy (``ctx_inspect.core.agents``); ``policy_for`` finds the one of a
profile's agent.
"""

from __future__ import annotations

from ctx_inspect.core import agents
from ctx_inspect.core.policies.base import Policy
from ctx_inspect.errors import ConfigError


def policy_for(agent: str) -> Policy:
    """The policy of an agent (a profile's ``agent`` field)."""
    found = agents.find(agent)
    if found is None or found.policy is None:
        known = [a.name for a in agents.all_agents() if a.policy is not None]
        raise ConfigError(
            "unknown policy", f"no policy for agent {agent!r}; known: {', '.join(known)}"
        )
    return found.policy
