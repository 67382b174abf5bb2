"""Typed errors. The CLI prints ``title: message`` on one line and exits 2."""

from __future__ import annotations


class InspectorError(Exception):
    """An error the user can act on: it has a short title and a one-line message."""

    exit_code = 2

    def __init__(self, title: str, message: str) -> None:
        super().__init__(f"{title}: {message}")
        self.title = title
        self.message = message

    def __reduce__(self) -> tuple[type[InspectorError], tuple[str, str]]:
        # as built (title and message), so that it crosses from a worker process intact
        return type(self), (self.title, self.message)

    def one_line(self) -> str:
        text = f"{self.title}: {self.message}"
        return " ".join(text.split())


class InputError(InspectorError):
    """The input cannot be read: missing, binary, or no known format."""


class ConfigError(InspectorError):
    """A profile, a configuration file or a --set value is invalid."""
