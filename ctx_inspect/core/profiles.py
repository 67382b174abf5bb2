"""Agent profiles: each agent we understand, as data, with its real defaults and its own arithmetic.

A profile answers the questions every other module asks about a window: how the agent composes
its usable size (``limit_parts``), the token count at which it acts (``threshold``, strict or
not), where the warning zone starts, which zone a count falls in, and the percentage the agent
itself would print. Where each default comes from is in ``docs/profiles.md``.

Profiles are pydantic models: strict (no silent coercion), closed (unknown keys are errors) and
frozen. ``make_profile`` builds one from overrides and turns validation failures into one-line
``ConfigError`` messages.
"""

from __future__ import annotations

import difflib
import math
import types
from abc import abstractmethod
from collections.abc import Mapping
from fractions import Fraction
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    ClassVar,
    Literal,
    Union,
    get_args,
    get_origin,
)

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
)

from ctx_inspect.core import agents
from ctx_inspect.core.estimate import GENERIC_RULES, Counter, estimate_message, uses_counter
from ctx_inspect.core.model import Message
from ctx_inspect.core.window import LimitParts, Zone
from ctx_inspect.errors import ConfigError

if TYPE_CHECKING:
    from ctx_inspect.core.session import Session

Tokens = Annotated[int, Field(ge=0)]
Ratio = Annotated[float, Field(gt=0, le=1)]


def ceil_ratio(ratio: float, tokens: int) -> int:
    """ceil(ratio × tokens) in exact decimal arithmetic (0.8 × 142800 is 114240, not 114241)."""
    return math.ceil(Fraction(repr(ratio)) * tokens)


class Profile(BaseModel):
    """The interface every profile implements. Not instantiated itself."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, allow_inf_nan=False)

    name: str
    agent: str
    description: str
    context_window: Tokens
    estimator: str
    encoding: str | None = None  # tokenizer encoding for exact counts; None = by model
    warning_ratio: Ratio = 0.8  # warning zone from warning_ratio × threshold (see warning_field)

    threshold_strict: ClassVar[bool] = False  # True: acts when tokens > threshold; else >=
    # Other names a setting is known by (the agent's own configuration names): alias -> field.
    setting_aliases: ClassVar[Mapping[str, str]] = types.MappingProxyType({})
    warning_field: ClassVar[str] = "warning_ratio"  # the setting that places the warning level
    # settings no file of the agent records (the model's limits, options given on the command
    # line): until the user sets them, their defaults are assumptions, and ``stats`` and
    # ``replay`` list them (``context_window`` is judged on its own: some files record it)
    unrecorded_settings: ClassVar[tuple[str, ...]] = ()
    _zone_bounds: tuple[bool, int, bool, int] | None = PrivateAttr(default=None)

    @field_validator("estimator")
    @classmethod
    def _known_estimator(cls, value: str) -> str:
        known = GENERIC_RULES + agents.declared()
        if value not in known:
            raise ValueError(f"unknown estimator {value!r}; known: {', '.join(known)}")
        return value

    # -- the figures ---------------------------------------------------------------------

    @abstractmethod
    def limit_parts(self) -> LimitParts:
        """The window as the agent composes it: window − buffer − max output."""

    @abstractmethod
    def threshold(self) -> int:
        """The token count at which the agent acts (compaction, guard, overflow)."""

    def has_threshold(self) -> bool:
        """False when the agent, as configured, never acts on tokens (e.g. a zero limit)."""
        return True

    def strict_threshold(self) -> bool:
        """Whether the agent acts only above the threshold (else from it on)."""
        return self.threshold_strict

    def measure_basis(self) -> str:
        """The figure the agent compares with its threshold before a request, as replay
        rebuilds it: "request" = the request's own reported size (the prompt it is about to
        send); "anchor" = the latest figure reported before it plus the agent's estimate of
        what came since; "usage" = the latest response's prompt plus output; "usage+estimate"
        = that plus the agent's estimate of what came after the response's first record;
        "guard" = the projection the agent's own guard logged at its turn preflight
        (``GuardEvaluated`` with trigger turn_preflight), for a log of figures without
        messages."""
        return "request"

    def provider_limit(self) -> int | None:
        """The largest request the provider accepts, when replay is to judge whether a replayed
        request is refused by its size (a request over it is refused, and the policy's
        ``after_request`` hears of it); None: only the refusals the recording shows."""
        return None

    def over_threshold(self, tokens: int) -> bool:
        if not self.has_threshold():
            return False
        limit = self.threshold()
        return tokens > limit if self.strict_threshold() else tokens >= limit

    def first_overflow(self) -> int | None:
        """The smallest token count at which the agent acts, or None if it never does."""
        if not self.has_threshold():
            return None
        return self.threshold() + 1 if self.strict_threshold() else self.threshold()

    def warning_threshold(self) -> int:
        """The first token count in the warning zone."""
        return ceil_ratio(self.warning_ratio, self.threshold())

    def prune_threshold(self) -> int | None:
        """The count above which the agent prunes, or None when its prune does not depend on
        the context's size (it runs at fixed moments)."""
        return self.threshold()

    def threshold_formula(self) -> str:
        """How ``threshold()`` is made from the settings, in words, when it is not the window
        less its buffer and output reserve (``limit_parts``); empty otherwise."""
        return ""

    def zone(self, tokens: int) -> Zone:
        bounds = self._zone_bounds
        if bounds is None:  # computed once: the profile is frozen
            bounds = self._zone_bounds = (
                self.has_threshold(),
                self.threshold(),
                self.strict_threshold(),
                self.warning_threshold(),
            )
        active, limit, strict, warning = bounds
        if not active:
            return Zone.SAFE
        if tokens > limit if strict else tokens >= limit:
            return Zone.OVERFLOW
        if tokens >= warning:
            return Zone.WARNING
        return Zone.SAFE

    def percent_base(self) -> int:
        """The figure the agent prints its percentages against."""
        return self.limit_parts().effective

    def percent_of_limit(self, tokens: int) -> float:
        """``tokens`` as a percentage (0-100+, unrounded) the way the agent itself prints it."""
        base = self.percent_base()
        return 100.0 * tokens / base if base > 0 else 0.0

    # -- estimation ----------------------------------------------------------------------

    def uses_counter(self) -> bool:
        """Whether the agent's estimate uses a real tokenizer (else pass no counter)."""
        return uses_counter(self.estimator)

    def counter_encoding(self) -> str | None:
        """The encoding the estimator's counter should use; None = choose by model."""
        return self.encoding

    def estimate(self, message: Message, counter: Counter | None = None) -> int:
        """The agent's own estimate of ``message``; ``counter`` is ignored when it has none."""
        return estimate_message(self.estimator, message, counter if self.uses_counter() else None)

    # -- description ---------------------------------------------------------------------

    def derived(self) -> dict[str, object]:
        """Figures a profile computes from its fields, beyond the common ones."""
        return {}

    def settings(self) -> dict[str, object]:
        """Every field and every derived figure, for ``ctx-inspect profiles``."""
        data: dict[str, object] = dict(self.model_dump())
        if self.warning_field != "warning_ratio":
            data.pop("warning_ratio", None)
        parts = self.limit_parts()
        has = self.has_threshold()
        data.update(
            {
                "limit_window": parts.window,
                "limit_buffer": parts.buffer,
                "limit_max_output": parts.max_output,
                "effective_limit": parts.effective,
                "threshold": self.threshold() if has else None,
                "threshold_strict": self.strict_threshold(),
                "first_overflow": self.first_overflow(),
                "warning_threshold": self.warning_threshold() if has else None,
                "warning_setting": self.warning_field,
                "percent_of": self.percent_base(),
            }
        )
        data.update(self.derived())
        return data

    def settings_shown(self, session: Session) -> dict[str, object]:
        """Settings the agent's own records in ``session`` show (a stage the agent runs only
        when its setting is on), which calibration fills in where the user set nothing."""
        return {}


# ------------------------------------------------------------------------------------------
# Registry and construction


def profile_names() -> tuple[str, ...]:
    """The names of every profile: one per agent that has one (``ctx_inspect.core.agents``)."""
    return tuple(a.name for a in agents.all_agents() if a.profile is not None)


def profile_from(data: Mapping[str, Any]) -> Profile:
    """The profile ``data`` describes (a ``model_dump`` of one), by its ``agent`` field."""
    name = data.get("agent")
    if not isinstance(name, str):
        raise ConfigError("Invalid profile", "a profile needs its agent's name (agent = ...)")
    cls = profile_class(name)
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        raise _config_error(name, cls, exc, data, {}) from None


def _suggest(word: str, candidates: list[str]) -> str:
    close = difflib.get_close_matches(word, candidates, n=3, cutoff=0.6)
    return f" (did you mean {' or '.join(close)}?)" if close else ""


def profile_class(name: str) -> type[Profile]:
    found = agents.find(name)
    if found is None or found.profile is None:
        problem = agents.problems().get(name)
        if problem is not None:
            raise ConfigError("Profile failed to load", problem)
        known = list(profile_names())
        raise ConfigError(
            "Unknown profile", f"{name!r}{_suggest(name, known)}; known: {', '.join(known)}"
        )
    return found.profile


def default_profile(name: str) -> Profile:
    return profile_class(name).model_validate({})


def setting_name(name: str, key: str) -> str:
    """The profile's field for ``key``: ``key`` itself, or the field it is another name of."""
    return profile_class(name).setting_aliases.get(key, key)


def check_keys(name: str, keys: list[str], where: str = "") -> None:
    """Raise ConfigError for a key the profile does not have (``where`` says where it was)."""
    cls = profile_class(name)
    source = f" ({where})" if where else ""
    for key in keys:
        key = cls.setting_aliases.get(key, key)
        if key == "agent":
            raise ConfigError(
                "Invalid profile setting",
                f"'agent'{source} cannot be set; choose the profile instead",
            )
        if key not in cls.model_fields:
            fields = [f for f in cls.model_fields if f != "agent"] + list(cls.setting_aliases)
            raise ConfigError(
                "Invalid profile setting",
                f"{name} has no setting {key!r}{source}{_suggest(key, fields)}",
            )
        if key == "warning_ratio" and cls.warning_field != "warning_ratio":
            raise ConfigError(
                "Invalid profile setting",
                f"{name} does not use warning_ratio{source}; "
                f"its warning level is set by {cls.warning_field}",
            )


def make_profile(
    name: str, overrides: Mapping[str, object], origins: Mapping[str, str] | None = None
) -> Profile:
    """The profile ``name`` with ``overrides`` applied and validated.

    ``origins`` may say where each key came from (for the error message).
    """
    cls = profile_class(name)
    origins = origins or {}
    for key in overrides:
        check_keys(name, [key], origins.get(key, ""))
    aliases = cls.setting_aliases
    if any(key in aliases for key in overrides):  # the agent's own names for our fields
        overrides = {aliases.get(k, k): v for k, v in overrides.items()}
        origins = {aliases.get(k, k): v for k, v in origins.items()}
    data: dict[str, object] = {}
    for key, value in overrides.items():
        if isinstance(value, list) and get_origin(cls.model_fields[key].annotation) is tuple:
            value = tuple(value)
        data[key] = value
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        raise _config_error(name, cls, exc, overrides, origins) from None


def _config_error(
    name: str,
    cls: type[Profile],
    exc: ValidationError,
    data: Mapping[str, object],
    origins: Mapping[str, str],
) -> ConfigError:
    error = exc.errors(include_url=False)[0]
    loc = error.get("loc", ())
    key = str(loc[0]) if loc else ""
    message = str(error.get("msg", "invalid value"))
    message = message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if not key or key not in cls.model_fields:
        return ConfigError("Invalid profile setting", f"{name}: {message}")
    source = f" ({origins[key]})" if key in origins else ""
    value = data.get(key, error.get("input"))
    kind = error.get("type", "")
    if kind.endswith("_type") or kind in {"literal_error", "int_from_float", "enum"}:
        expected = _expected(cls.model_fields[key].annotation)
        return ConfigError(
            "Invalid profile setting",
            f"{name}.{key}{source}: expected {expected}, got {_kind(value)} {value!r}",
        )
    return ConfigError(
        "Invalid profile setting", f"{name}.{key}{source}: {message} (got {value!r})"
    )


def _expected(annotation: Any) -> str:
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Annotated:
        return _expected(args[0])
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin is tuple:
        inner = _expected(args[0]) if args else "a value"
        return f"a list of {inner.removeprefix('an ').removeprefix('a ')}s"
    if origin in (Union, types.UnionType):
        options = [_expected(a) for a in args if a is not type(None)]
        return " or ".join(options)
    names = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}
    if isinstance(annotation, type) and annotation in names:
        return names[annotation]
    return str(annotation)


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "list"
    if isinstance(value, dict):
        return "table"
    return type(value).__name__
