"""Facts a context should not lose: file paths, commands, error lines and identifiers.

Used to measure what survived a prune or compaction: the facts found in removed content, and
which of them still appear somewhere in the new context.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum


class FactKind(StrEnum):
    PATH = "path"
    COMMAND = "command"
    ERROR = "error"
    IDENTIFIER = "identifier"


_PATH = re.compile(
    r"(?<![\w/.-])(?:~|\.{1,2})?(?:/[\w.@+-]+)+/?|(?<![\w/.-])[\w.@+-]+(?:/[\w.@+-]+)+"
    r"|(?<![\w/.-])[\w-]+\.(?:py|js|ts|tsx|jsx|go|rs|java|kt|c|h|cc|cpp|hpp|rb|php|cs|swift|md"
    r"|json|jsonl|yaml|yml|toml|ini|cfg|txt|sh|sql|html|css|lock)\b"
)
_COMMAND_LINE = re.compile(r"^\s*(?:\$|>|#)\s+(\S.{1,200})$", re.MULTILINE)
_COMMAND_ARG = re.compile(r'"(?:command|cmd)"\s*:\s*"((?:[^"\\]|\\.){2,300})"')
_ERROR_LINE = re.compile(
    r"^.*(?:\w*(?:error|exception)|\b(?:traceback|failed|failure|fatal|panic|denied|not found|"
    r"cannot|could not|undefined|segmentation fault))\b.*$",
    re.IGNORECASE | re.MULTILINE,
)
_IDENTIFIER = re.compile(
    r"\b(?:[a-z]+(?:_[a-z0-9]+)+|[a-z]+(?:[A-Z][a-z0-9]+)+|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+)\b"
)
_MAX_ERROR_CHARS = 160


@dataclass(frozen=True)
class Fact:
    kind: FactKind
    text: str


def extract(text: str) -> set[Fact]:
    """Every fact in ``text``."""
    facts: set[Fact] = set()
    for match in _PATH.finditer(text):
        value = match.group(0).rstrip(".,:;")
        if len(value) >= 3 and any(ch.isalpha() for ch in value) and "//" not in value:
            facts.add(Fact(FactKind.PATH, value))
    for pattern in (_COMMAND_LINE, _COMMAND_ARG):
        for match in pattern.finditer(text):
            facts.add(Fact(FactKind.COMMAND, match.group(1).strip()))
    for match in _ERROR_LINE.finditer(text):
        line = match.group(0).strip()
        if line:
            facts.add(Fact(FactKind.ERROR, line[:_MAX_ERROR_CHARS]))
    for match in _IDENTIFIER.finditer(text):
        facts.add(Fact(FactKind.IDENTIFIER, match.group(0)))
    return facts


@dataclass
class Survival:
    """Which facts of the removed content are still present in the new context."""

    found: dict[FactKind, int] = field(default_factory=dict)
    total: dict[FactKind, int] = field(default_factory=dict)
    lost: list[Fact] = field(default_factory=list)

    @property
    def score(self) -> float:
        """The share of facts that survived (1.0 when nothing was at risk)."""
        total = sum(self.total.values())
        return sum(self.found.values()) / total if total else 1.0

    def share(self, kind: FactKind) -> float | None:
        total = self.total.get(kind, 0)
        return self.found.get(kind, 0) / total if total else None

    def as_dict(self) -> dict[str, object]:
        return {
            "score": round(self.score, 4),
            "by_kind": {
                kind.value: {"found": self.found.get(kind, 0), "total": self.total.get(kind, 0)}
                for kind in FactKind
            },
            "lost": [{"kind": f.kind.value, "text": f.text} for f in self.lost[:50]],
        }


def survival(removed_texts: Iterable[str], new_context_texts: Iterable[str]) -> Survival:
    """What survived: facts of the removed content that appear in the new context.

    A fact counts as present when its text appears verbatim in the new context (for an error
    line, its first 60 characters do: summaries often shorten a line)."""
    at_risk: set[Fact] = set()
    for text in removed_texts:
        at_risk |= extract(text)
    haystack = "\n".join(new_context_texts)
    result = Survival()
    for fact in sorted(at_risk, key=lambda f: (f.kind.value, f.text)):
        result.total[fact.kind] = result.total.get(fact.kind, 0) + 1
        needle = fact.text[:60] if fact.kind is FactKind.ERROR else fact.text
        if needle in haystack:
            result.found[fact.kind] = result.found.get(fact.kind, 0) + 1
        else:
            result.lost.append(fact)
    return result
