"""Building a profile from the command line: ``--profile``, ``--config FILE`` and ``--set k=v``.

A configuration file is TOML::

    profile = "aiagent"            # the profile to use when --profile is not given
    context_window = 200000        # top-level keys apply to the chosen profile

    [profiles.aiagent]             # applied only when that profile is chosen
    buffer_tokens = 4096

    [summarizer]                   # what writes compaction summaries (see build_summarizer)
    kind = "local"

Precedence, lowest first: the profile's defaults, the file's top-level keys, the file's
``[profiles.<name>]`` table, then each ``--set`` in order. Values are never coerced: an integer
setting takes a TOML integer, not ``"200000"`` nor ``2e5``. A ``--set`` value for a setting that
takes text is read as written (``--set version=2.1`` is the text "2.1", not the number).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path

from ctx_inspect.core.policies.base import Summarizer
from ctx_inspect.core.profiles import (
    Profile,
    check_keys,
    make_profile,
    profile_class,
    setting_name,
)
from ctx_inspect.core.summarize import summarizer_from_config
from ctx_inspect.errors import ConfigError

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RESERVED = ("profile", "profiles", "summarizer")


def parse_set(items: Sequence[str]) -> dict[str, object]:
    """``["key=value", ...]`` to a dict. A value is read as a TOML value when it is one
    (``200_000``, ``0.75``, ``true``, ``"text"``, ``["a", "b"]``), else kept as the raw string."""
    return {key: value for key, _raw, value in _split_sets(items)}


def _split_sets(items: Sequence[str]) -> list[tuple[str, str, object]]:
    out: list[tuple[str, str, object]] = []
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError("Invalid --set", f"{item!r}: expected key=value")
        if not _KEY.fullmatch(key):
            raise ConfigError("Invalid --set", f"{item!r}: {key!r} is not a setting name")
        raw = raw.strip()
        out.append((key, raw, _parse_value(raw)))
    return out


def _text_setting(cls: type[Profile], key: str) -> bool:
    """Whether ``key`` takes a string (so ``--set version=2.1`` means the text "2.1")."""
    field = cls.model_fields.get(cls.setting_aliases.get(key, key))
    if field is None:
        return False
    annotation = field.annotation
    return annotation is str or annotation == (str | None)


def _parse_value(raw: str) -> object:
    if "\n" in raw or "\r" in raw:
        return raw
    try:
        return tomllib.loads(f"value = {raw}")["value"]
    except tomllib.TOMLDecodeError:
        return raw


def load_config_file(path: Path) -> dict[str, object]:
    """Read and check the shape of a TOML configuration file."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError("Configuration file not found", str(path)) from None
    except OSError as exc:
        raise ConfigError(
            "Cannot read configuration file", f"{path}: {exc.strerror or exc}"
        ) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            "Invalid configuration file", f"{path}: not UTF-8 text (byte {exc.start})"
        ) from None
    try:
        doc: dict[str, object] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("Invalid configuration file", f"{path}: {exc}") from None
    _check_shape(doc, path)
    return doc


def _check_shape(doc: Mapping[str, object], path: Path) -> None:
    chosen = doc.get("profile")
    if chosen is not None:
        if not isinstance(chosen, str):
            raise ConfigError(
                "Invalid configuration file", f"{path}: 'profile' must be a string (a name)"
            )
        _known(chosen, f"{path}: profile")
    sections = doc.get("profiles")
    if sections is None:
        return
    if not isinstance(sections, dict):
        raise ConfigError(
            "Invalid configuration file", f"{path}: 'profiles' must be a table of [profiles.<name>]"
        )
    for name, table in sections.items():
        _known(name, f"{path}: [profiles.{name}]")
        if not isinstance(table, dict):
            raise ConfigError(
                "Invalid configuration file", f"{path}: profiles.{name} must be a table"
            )


def _known(name: str, where: str) -> None:
    try:
        profile_class(name)
    except ConfigError as exc:
        raise ConfigError(exc.title, f"{where}: {exc.message}") from None


def build_profile(
    name: str | None,
    config_path: Path | None = None,
    sets: Sequence[str] = (),
    default: str = "generic",
) -> Profile:
    """The profile to use: ``name`` (else the file's ``profile``, else ``default``) with the
    file's settings and then the ``--set`` values applied."""
    doc = load_config_file(config_path) if config_path is not None else {}
    file_choice = doc.get("profile")
    chosen = name or (file_choice if isinstance(file_choice, str) else None) or default
    cls = profile_class(chosen)  # an unknown name fails here, before any setting is read

    overrides: dict[str, object] = {}
    origins: dict[str, str] = {}

    def apply(layer: Mapping[str, object], where: str) -> None:
        check_keys(chosen, list(layer), where)
        for key, value in layer.items():
            key = setting_name(chosen, key)  # one entry per field, whichever name was used
            overrides[key] = value
            origins[key] = where

    if config_path is not None:
        apply({k: v for k, v in doc.items() if k not in _RESERVED}, str(config_path))
        sections = doc.get("profiles")
        section = sections.get(chosen) if isinstance(sections, dict) else None
        if isinstance(section, dict):
            apply(section, f"{config_path} [profiles.{chosen}]")
    from_cli: dict[str, object] = {}
    for key, raw, value in _split_sets(sets):
        from_cli[key] = raw if _text_setting(cls, key) and not isinstance(value, str) else value
    apply(from_cli, "--set")
    return make_profile(chosen, overrides, origins)


def build_summarizer(config_path: Path | None) -> Summarizer:
    """The summarizer of the configuration file's ``[summarizer]`` table (local by default)::

    [summarizer]
    kind = "openai"                 # or "local"
    base_url = "http://127.0.0.1:8080/v1"
    model = "qwen2.5-7b-instruct"
    api_key_env = "OPENAI_API_KEY"  # the NAME of the variable holding the key
    timeout = 60                    # the most one summary takes, all attempts included
    retries = 2                     # more attempts after a failed connection, 429 or 5xx
    """
    doc = load_config_file(config_path) if config_path is not None else {}
    table = doc.get("summarizer", {})
    if isinstance(table, str):
        table = {"kind": table}
    if not isinstance(table, dict):
        raise ConfigError(
            "Invalid configuration file", f"{config_path}: [summarizer] must be a table"
        )
    mapped = {
        ("summarizer" if key == "kind" else f"summarizer_{key}"): value
        for key, value in table.items()
    }
    return summarizer_from_config(mapped)


__all__ = ["build_profile", "build_summarizer", "load_config_file", "parse_set"]
