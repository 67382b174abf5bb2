"""Themes are data: TOML files in ``themes/`` (packaged into the wheel as ``ctx_inspect/themes``),
validated on load and registered with Textual. Zone and marker colours are theme variables."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator
from textual.color import Color, ColorParseError
from textual.theme import Theme

from ctx_inspect.errors import ConfigError

REQUIRED_VARIABLES = (
    "zone-safe",
    "zone-warning",
    "zone-overflow",
    "marker-compaction",
    "marker-prune",
    "marker-drop",
    "marker-final",
    "marker-reset",
    "counter-current",
    "counter-pending",
    "counter-new",
    "counter-extra",
)
DEFAULT_THEME = "ctx-dark"


def _color(value: str) -> str:
    try:
        Color.parse(value)
    except ColorParseError:
        raise ValueError(f"{value!r} is not a colour") from None
    return value


class ThemeFile(BaseModel):
    """One theme file, strictly checked."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str
    dark: bool
    primary: str
    secondary: str
    accent: str
    foreground: str
    background: str
    surface: str
    panel: str
    success: str
    warning: str
    error: str
    variables: dict[str, str]

    @field_validator(
        "primary",
        "secondary",
        "accent",
        "foreground",
        "background",
        "surface",
        "panel",
        "success",
        "warning",
        "error",
    )
    @classmethod
    def _is_colour(cls, value: str) -> str:
        return _color(value)

    @field_validator("variables")
    @classmethod
    def _zone_variables(cls, value: dict[str, str]) -> dict[str, str]:
        missing = [name for name in REQUIRED_VARIABLES if name not in value]
        if missing:
            raise ValueError(f"missing variables: {', '.join(missing)}")
        for name, colour in value.items():
            try:
                _color(colour)
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from None
        return value

    def to_theme(self) -> Theme:
        return Theme(
            name=self.name,
            dark=self.dark,
            primary=self.primary,
            secondary=self.secondary,
            accent=self.accent,
            foreground=self.foreground,
            background=self.background,
            surface=self.surface,
            panel=self.panel,
            success=self.success,
            warning=self.warning,
            error=self.error,
            variables=dict(self.variables),
        )


def theme_dirs() -> list[Path]:
    """Where theme files live: inside the installed package, or the source tree's themes/."""
    out: list[Path] = []
    packaged = resources.files("ctx_inspect") / "themes"
    if packaged.is_dir():
        out.append(Path(str(packaged)))
    source = Path(__file__).resolve().parents[2] / "themes"
    if source.is_dir() and source not in out:
        out.append(source)
    return out


def load_theme(path: Path) -> Theme:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError("cannot read theme", f"{path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("invalid theme", f"{path}: {exc}") from None
    try:
        return ThemeFile.model_validate(data).to_theme()
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in error["loc"]) or "file"
        raise ConfigError("invalid theme", f"{path}: {where}: {error['msg']}") from None


def load_themes() -> dict[str, Theme]:
    """Every theme shipped with ctx-inspect, by name (the first found of each name wins)."""
    themes: dict[str, Theme] = {}
    for folder in theme_dirs():
        for path in sorted(folder.glob("*.toml")):
            theme = load_theme(path)
            themes.setdefault(theme.name, theme)
    return themes


def resolve_theme_name(name: str | None, available: dict[str, Theme]) -> str:
    """A theme by its name or short name (``dark`` for ``ctx-dark``)."""
    if name is None:
        return DEFAULT_THEME
    for candidate in (name, f"ctx-{name}"):
        if candidate in available:
            return candidate
    raise ConfigError(
        "unknown theme",
        f"{name!r}; available: {', '.join(n.removeprefix('ctx-') for n in available)}",
    )
