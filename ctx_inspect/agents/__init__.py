"""One package per agent: everything that is one agent's, declared as its ``AGENT`` and
registered once in ``ctx_inspect.core.agents.BUILTIN`` (see docs/adding-an-agent.md)."""
