"""The tune screen's settings form, as data: which settings of a profile can be edited
(``settings_of``), how a value is shown in its field and read back from it, and a profile's
explicit settings. No widget here."""

from __future__ import annotations

import json
import math
import types
from dataclasses import dataclass
from typing import Any, Union, get_args, get_origin

from ctx_inspect.core.profiles import Profile
from ctx_inspect.ui import plain

NOT_TUNABLE = ("name", "agent", "description")


@dataclass(frozen=True)
class Setting:
    """One editable setting: its name, its scalar type, and whether it may be left empty."""

    name: str
    kind: type
    optional: bool


def _scalar(annotation: Any) -> tuple[type | None, bool]:
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        inner = [a for a in get_args(annotation) if a is not type(None)]
        kind, _ = _scalar(inner[0]) if len(inner) == 1 else (None, False)
        return kind, True
    if origin is not None and hasattr(annotation, "__metadata__"):
        return _scalar(get_args(annotation)[0])
    if annotation in (bool, int, float, str):
        return annotation, False
    return None, False


def settings_of(profile: Profile) -> list[Setting]:
    """The int / float / str / bool settings of the profile's type, in declaration order."""
    cls = type(profile)
    out = []
    for name, info in cls.model_fields.items():
        if name in NOT_TUNABLE:
            continue
        if name == "warning_ratio" and cls.warning_field != "warning_ratio":
            continue
        kind, optional = _scalar(info.annotation)
        if kind is not None:
            out.append(Setting(name, kind, optional))
    return out


def show_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def field_text(value: Any) -> str:
    """A setting's value as its field shows it: a text setting may come from the input (an
    export names the settings it was made with), so its control characters are shown
    (:func:`parse_value` reads them back)."""
    return plain.visible(show_value(value), keep_layout=False)


def parse_value(setting: Setting, raw: str) -> Any:
    """The typed value of a field, or ValueError with what was expected."""
    text = raw.strip()
    if not text:
        if setting.optional:
            return None
        raise ValueError("a value is required")
    if setting.kind is bool:
        lowered = text.lower()
        if lowered in ("true", "yes", "on", "1"):
            return True
        if lowered in ("false", "no", "off", "0"):
            return False
        raise ValueError("expected true or false")
    if setting.kind is int:
        try:
            return int(text.replace("_", "").replace(",", ""))
        except ValueError:
            raise ValueError("expected an integer") from None
    if setting.kind is float:
        try:
            value = float(text.replace("_", ""))
        except ValueError:
            raise ValueError("expected a number") from None
        if not math.isfinite(value):
            raise ValueError("expected a finite number")
        return value
    return plain.restore(raw)


def explicit(profile: Profile) -> dict[str, Any]:
    """The settings given to the profile explicitly (by the user or the input's figures)."""
    return {k: getattr(profile, k) for k in profile.model_fields_set if k not in ("name", "agent")}


def as_sets(profile: Profile) -> tuple[str, ...]:
    """The profile's explicit settings as ``--set key=value`` strings (TOML values)."""
    out = []
    for key, value in sorted(explicit(profile).items()):
        if value is None:
            continue
        if isinstance(value, bool):
            out.append(f"{key}={'true' if value else 'false'}")
        elif isinstance(value, int | float):
            out.append(f"{key}={value!r}")
        elif isinstance(value, tuple | list):
            out.append(f"{key}={json.dumps(list(value))}")
        else:
            out.append(f"{key}={json.dumps(str(value))}")
    return tuple(out)


def same_settings(a: Profile, b: Profile) -> bool:
    return type(a) is type(b) and a.model_dump() == b.model_dump()
