"""The agents ctx-inspect understands, found by name.

An agent is declared once, as an ``Agent`` named ``AGENT`` in its own package, and registered by
one line: in ``BUILTIN`` below for the agents that come with ctx-inspect, or in a third party's
``pyproject.toml`` under the ``ctx_inspect.agents`` entry-point group::

    [project.entry-points."ctx_inspect.agents"]
    my-agent = "my_package.agent:AGENT"

The declaration gathers everything that is one agent's: its profile (settings with the agent's
real defaults), its own token arithmetic, its policy (how it prunes, compacts and forces final
turns), the settings explain may suggest moving, and the modules holding its readers. The core
finds them here by the agent's name; it never imports an agent's package by name (the agents
import the core). Packages are imported when first asked for, one at a time where a name is
known, and a package that fails to load is reported (``problems``), never a traceback.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Protocol

from ctx_inspect.errors import ConfigError

if TYPE_CHECKING:
    from ctx_inspect.core.model import Message
    from ctx_inspect.core.policies.base import Policy
    from ctx_inspect.core.profiles import Profile

ENTRY_POINT_GROUP = "ctx_inspect.agents"

# The agents that come with ctx-inspect: name -> the module whose ``AGENT`` declares it. Their
# order is the order of ``ctx-inspect profiles`` and the order in which their readers break
# ties in format detection.
BUILTIN: Mapping[str, str] = {
    "baseagent": "ctx_inspect.agents.baseagent",
    "opencode": "ctx_inspect.agents.opencode",
    "guide": "ctx_inspect.agents.guide",
    "aiagent": "ctx_inspect.agents.aiagent",
    "goagent": "ctx_inspect.agents.goagent",
    "fifth": "ctx_inspect.agents.fifth",
    "claude-code": "ctx_inspect.agents.claude_code",
    "codex": "ctx_inspect.agents.codex",
    "generic": "ctx_inspect.agents.generic",
}


class Counter(Protocol):
    """Anything that counts a text's tokens with a real tokenizer."""

    def count(self, text: str) -> int: ...


class Estimator(Protocol):
    """An agent's own token arithmetic: what it believes a message or a text costs."""

    @property
    def uses_counter(self) -> bool:
        """Whether a real tokenizer changes the result (else no counter is passed)."""

    def message(self, message: Message, counter: Counter | None) -> int:
        """The tokens the agent attributes to ``message``."""

    def text(self, text: str, counter: Counter | None) -> int:
        """The tokens the agent attributes to a bare text (no per-message overhead)."""

    def messages(self, messages: Iterable[Message], counter: Counter | None) -> int:
        """The tokens the agent attributes to a list of messages."""


@dataclass(frozen=True)
class Knob:
    """A setting that can avoid an event when moved in ``direction`` (+1 up, -1 down), no
    further than ``bound`` (explain searches the smallest move between the two)."""

    setting: str
    direction: int
    bound: Callable[[Profile], float]
    derived: str | None = None  # the settings() key holding the value when the field is None
    step: float = 1


def times(factor: float, key: str = "context_window") -> Callable[[Profile], float]:
    """A knob's bound: ``factor`` times a setting of the profile."""
    return lambda p: max(float(getattr(p, key) or 0) * factor, 1.0)


def const(value: float) -> Callable[[Profile], float]:
    """A knob's bound: a fixed value."""
    return lambda p: value


@dataclass(frozen=True)
class Agent:
    """One agent as ctx-inspect knows it. Only ``name`` is required: an agent may bring readers
    alone (``formats``), or a profile with its policy and arithmetic."""

    name: str  # the profile's name and its ``agent`` field
    summary: str = ""  # one line: what the agent is
    profile: type[Profile] | None = None
    policy: Policy | None = None
    estimator: Estimator | None = None  # named like the agent, for profiles' ``estimator``
    knobs: tuple[Knob, ...] = ()
    formats: tuple[str, ...] = ()  # modules that register the agent's readers when imported


class _Registry:
    """The agents loaded so far, and the problems met loading them."""

    def __init__(self) -> None:
        self.agents: dict[str, Agent] = {}
        self.problems: dict[str, str] = {}
        self.everything = False  # all built-in and plug-in agents were asked for
        self._plugins: dict[str, Any] | None = None

    def plugins(self) -> dict[str, Any]:
        """The plug-ins' entry points by name, listed once (listing reads every installed
        distribution's metadata: milliseconds, and profiles are validated by the thousand)."""
        if self._plugins is not None:
            return self._plugins
        found: dict[str, Any] = {}
        points: Iterable[Any]
        try:
            points = entry_points(group=ENTRY_POINT_GROUP)
        except Exception as exc:  # broken metadata of some installed distribution
            self.problems["entry points"] = f"cannot list {ENTRY_POINT_GROUP}: {exc}"
            points = ()
        for point in points:
            if point.name not in BUILTIN:
                found.setdefault(point.name, point)
        self._plugins = found
        return found

    def load(self, name: str, where: str, load: Callable[[], object]) -> Agent | None:
        if name in self.agents:
            return self.agents[name]
        if name in self.problems:
            return None
        try:
            value = load()
        except Exception as exc:  # a plug-in's import error, whatever it is
            self.problems[name] = f"{where} failed to load: {type(exc).__name__}: {exc}"
            return None
        declared = getattr(value, "AGENT", value)
        if not isinstance(declared, Agent):
            self.problems[name] = f"{where} is not an Agent (found {type(declared).__name__})"
            return None
        if declared.name != name:
            self.problems[name] = f"{where} declares the agent {declared.name!r}, not {name!r}"
            return None
        self.agents[name] = declared
        return declared


_REGISTRY = _Registry()


def _builtin(name: str) -> Agent | None:
    module = BUILTIN[name]
    return _REGISTRY.load(name, module, lambda: importlib.import_module(module))


def find(name: str) -> Agent | None:
    """The agent named ``name``, or None when no agent (built in or plugged in) has it."""
    if name in _REGISTRY.agents:
        return _REGISTRY.agents[name]
    if name in BUILTIN:
        return _builtin(name)
    point = _REGISTRY.plugins().get(name)
    if point is None:
        return None
    return _REGISTRY.load(name, f"plug-in {point.value}", point.load)


def agent(name: str) -> Agent:
    """The agent named ``name``; ConfigError when there is none or it failed to load."""
    found = find(name)
    if found is not None:
        return found
    problem = _REGISTRY.problems.get(name)
    if problem is not None:
        raise ConfigError("Agent failed to load", problem)
    raise ConfigError("Unknown agent", f"{name!r}; known: {', '.join(names())}")


def all_agents() -> list[Agent]:
    """Every agent that loads: the built-in ones in ``BUILTIN``'s order, then the plug-ins by
    name. Those that fail are left out and listed by ``problems``."""
    if not _REGISTRY.everything:
        for name in BUILTIN:
            _builtin(name)
        for name, point in sorted(_REGISTRY.plugins().items()):
            _REGISTRY.load(name, f"plug-in {point.value}", point.load)
        _REGISTRY.everything = True
    order = {name: rank for rank, name in enumerate(BUILTIN)}
    return sorted(_REGISTRY.agents.values(), key=lambda a: (order.get(a.name, len(order)), a.name))


def declared() -> tuple[str, ...]:
    """The names of every agent declared, built in or plugged in, without importing any."""
    return tuple(BUILTIN) + tuple(sorted(_REGISTRY.plugins()))


def names() -> list[str]:
    """The names of every agent that loads."""
    return [a.name for a in all_agents()]


def problems() -> dict[str, str]:
    """The agents that failed to load: name -> what went wrong (after ``all_agents``)."""
    all_agents()
    return dict(_REGISTRY.problems)


def reset() -> None:
    """Forget what was loaded (for tests that install or remove a plug-in)."""
    global _REGISTRY
    _REGISTRY = _Registry()
