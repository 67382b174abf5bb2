"""The list of input formats and the detector that picks one by sniffing a file's head."""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from inspector.errors import InputError
from inspector.formats.base import Parser

HEAD_BYTES = 64 * 1024
BINARY_SAMPLE = 8 * 1024
MIN_CONFIDENCE = 0.5


@dataclass(frozen=True)
class Head:
    """The first bytes of an input, with the path for extension hints."""

    path: Path
    data: bytes

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", "replace")

    @property
    def lines(self) -> list[str]:
        """Complete lines of the head (a cut last line is left out unless it is the only one)."""
        text = self.text
        lines = text.split("\n")
        if len(lines) > 1 and len(self.data) >= HEAD_BYTES:
            lines = lines[:-1]
        return [ln.rstrip("\r") for ln in lines if ln.strip()]


@dataclass(frozen=True)
class FormatSpec:
    name: str
    description: str  # one line
    reads: str  # which files, where they live
    parser: type[Parser]
    sniff: Callable[[Head], float]  # confidence 0..1
    default_profile: str = "generic"


# Modules that register a format, in the order ties are broken.
FORMAT_MODULES: tuple[str, ...] = (
    "inspector.formats.native",
    "inspector.formats.openai_chat",
    "inspector.formats.anthropic_messages",
)

_FORMATS: dict[str, FormatSpec] = {}


def register(spec: FormatSpec) -> FormatSpec:
    _FORMATS[spec.name] = spec
    return spec


def all_formats() -> list[FormatSpec]:
    for module in FORMAT_MODULES:
        importlib.import_module(module)
    return list(_FORMATS.values())


def get_format(name: str) -> FormatSpec:
    formats = {f.name: f for f in all_formats()}
    if name in formats:
        return formats[name]
    close = difflib.get_close_matches(name, list(formats), n=3, cutoff=0.3)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(formats)}"
    raise InputError("unknown format", f"no format named {name!r}{hint}")


def read_head(path: Path, size: int = HEAD_BYTES) -> Head:
    try:
        with path.open("rb") as fh:
            data = fh.read(size)
    except FileNotFoundError:
        raise InputError("file not found", str(path)) from None
    except IsADirectoryError:
        raise InputError("cannot read a folder here", str(path)) from None
    except OSError as exc:
        raise InputError("cannot read file", f"{path}: {exc.strerror or exc}") from None
    return Head(path=path, data=data)


def looks_binary(data: bytes) -> bool:
    """NUL bytes, or mostly bytes that are neither text nor valid UTF-8."""
    sample = data[:BINARY_SAMPLE]
    if not sample:
        return False
    if b"\x00" in sample:
        return True
    text = sample.decode("utf-8", "replace")
    bad = sum(1 for ch in text if ch == "\ufffd" or (ord(ch) < 32 and ch not in "\t\n\r\x1b\f"))
    return bad > max(8, len(text) // 20)


def detect(path: Path, head: Head | None = None) -> FormatSpec:
    """The format of ``path``, by sniffing its head; a one-line InputError when none fits."""
    head = head or read_head(path)
    if looks_binary(head.data):
        raise InputError("binary file", f"{path} is not a text log or transcript")
    scores = sorted(
        ((spec.sniff(head), spec) for spec in all_formats()),
        key=lambda pair: pair[0],
        reverse=True,
    )
    if not head.data.strip():
        # An empty file is a valid empty session; name it after the best guess by extension.
        return _by_extension(path) or get_format("native")
    if scores and scores[0][0] >= MIN_CONFIDENCE:
        return scores[0][1]
    candidates = [spec.name for score, spec in scores if score > 0][:3]
    if not candidates:
        candidates = [spec.name for spec in all_formats() if _extension_hint(path, spec)][:3]
    hint = f" (closest: {', '.join(candidates)})" if candidates else ""
    raise InputError(
        "unknown format",
        f"{path} is no format ctx-inspect reads{hint}; see `ctx-inspect formats`, "
        "or force one with --format NAME",
    )


def _extension_hint(path: Path, spec: FormatSpec) -> bool:
    return path.suffix.lstrip(".") in spec.reads


def _by_extension(path: Path) -> FormatSpec | None:
    for spec in all_formats():
        if path.suffix and _extension_hint(path, spec):
            return spec
    return None
