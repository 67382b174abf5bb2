"""Each agent's context management as pure functions (see ``base.Policy``).

Every policy module exposes ``POLICY``; ``policy_for`` picks the one of a profile's agent.
"""

from __future__ import annotations

import importlib

from inspector.core.policies.base import Policy
from inspector.errors import ConfigError

POLICY_MODULES: dict[str, str] = {
    "baseagent": "inspector.core.policies.baseagent",
    "guide": "inspector.core.policies.guide",
    "opencode": "inspector.core.policies.opencode",
    "aiagent": "inspector.core.policies.aiagent",
    "goagent": "inspector.core.policies.goagent",
    "fifth": "inspector.core.policies.fifth",
    "claude-code": "inspector.core.policies.claude_code",
    "codex": "inspector.core.policies.codex",
    "generic": "inspector.core.policies.generic",
}


def policy_for(agent: str) -> Policy:
    """The policy of an agent (a profile's ``agent`` field)."""
    module = POLICY_MODULES.get(agent)
    if module is None:
        raise ConfigError(
            "unknown policy", f"no policy for agent {agent!r}; known: {', '.join(POLICY_MODULES)}"
        )
    policy: Policy = importlib.import_module(module).POLICY
    return policy
