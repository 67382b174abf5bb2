"""A third-party agent, "example": its profile, arithmetic, policy, knob and reader.

Installed, this package and its ``.dist-info`` folder sit side by side on the path, and the
entry point ``example = ctx_inspect_example:AGENT`` in the ``ctx_inspect.agents`` group makes
ctx-inspect find it (tests/unit/test_plugins.py)."""

from __future__ import annotations

from typing import ClassVar, Literal

from ctx_inspect.agents.generic.policy import GenericPolicy
from ctx_inspect.agents.generic.profile import GenericProfile
from ctx_inspect.core.agents import Agent, Knob, times
from ctx_inspect.core.estimate import Rule
from ctx_inspect.core.profiles import Tokens


def _thirds(text: str) -> int:
    return -(-len(text) // 3)


class ExampleProfile(GenericProfile):
    """The example agent compacts above 80% of a 2,000-token window, estimating a third of a
    token per character."""

    name: str = "example"
    agent: Literal["example"] = "example"  # type: ignore[assignment]
    description: str = "The example plug-in agent: compacts above 80% of 2k, chars/3"
    context_window: Tokens = 2_000
    estimator: str = "example"
    compact_ratio: float = 0.80

    unrecorded_settings: ClassVar[tuple[str, ...]] = ("context_window",)


class ExamplePolicy(GenericPolicy):
    name = "example"


AGENT = Agent(
    "example",
    summary="the example plug-in agent",
    profile=ExampleProfile,
    policy=ExamplePolicy(),
    estimator=Rule("example", lambda m, c: _thirds(m.text), lambda t, c: _thirds(t)),
    knobs=(Knob("context_window", +1, times(8)),),
    formats=("ctx_inspect_example.reader",),
)
