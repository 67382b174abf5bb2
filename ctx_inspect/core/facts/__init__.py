"""Facts a context should not lose: file paths, commands, error lines and identifiers.

One set of detectors, one module per kind: ``paths`` (the tokens that look like paths),
``commands`` (``$`` prompt lines, and what a shell tool call ran), ``errors`` (the lines that
say something failed, on one line, without banner rules), ``identifiers`` (snake_case,
camelCase and PascalCase names); ``calls`` reads a tool call's arguments for paths and its
command. Both users read facts through them:

- what survived a prune or compaction (``survival``: the diff, and each row of a sweep): the
  facts found in the removed messages, and which of them still appear in the new context;
- the local summarizer (``core.summarize``), which keeps the paths, commands and errors of the
  messages it summarizes: a summary within its budget carries the facts ``survival`` counts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from ctx_inspect.core.facts.calls import call_facts
from ctx_inspect.core.facts.commands import command_lines
from ctx_inspect.core.facts.errors import error_lines
from ctx_inspect.core.facts.identifiers import identifiers_in
from ctx_inspect.core.facts.lines import first_line, one_line
from ctx_inspect.core.facts.paths import paths_in
from ctx_inspect.core.model import Message, PartType

__all__ = [
    "Fact",
    "FactKind",
    "Survival",
    "extract",
    "fact_texts",
    "message_fact_texts",
    "survival",
    "survival_of",
]


class FactKind(StrEnum):
    PATH = "path"
    COMMAND = "command"
    ERROR = "error"
    IDENTIFIER = "identifier"


_MAX_ERROR_CHARS = 160  # an error line is kept to this many characters
ERROR_NEEDLE = 60  # an error line is present when its first this many characters are


@dataclass(frozen=True)
class Fact:
    kind: FactKind
    text: str


def extract(text: str) -> set[Fact]:
    """Every fact in ``text``."""
    return _facts(fact_texts(text))


def fact_texts(text: str) -> dict[FactKind, set[str]]:
    """The text of every fact in ``text``, by kind (``extract`` without the ``Fact``s)."""
    commands = {one_line(command) for command in command_lines(text)}
    commands.discard("")
    return {
        FactKind.PATH: set(paths_in(text)),
        FactKind.COMMAND: commands,
        FactKind.ERROR: {line[:_MAX_ERROR_CHARS] for line in error_lines(text)},
        FactKind.IDENTIFIER: identifiers_in(text),
    }


def message_fact_texts(message: Message, text: str | None = None) -> dict[FactKind, set[str]]:
    """The facts of a message: those of its text (``text``, when the caller has it), and the
    paths and command of each of its tool calls, read from their decoded arguments."""
    found = fact_texts(message.text if text is None else text)
    for part in message.parts:
        if part.type is PartType.TOOL_CALL:
            call = call_facts(part.tool_name, part.arguments)
            if call.paths:
                found[FactKind.PATH].update(filter(None, call.paths))
            if call.command:
                found[FactKind.COMMAND].add(one_line(first_line(call.command, counted=False)))
    return found


def _facts(by_kind: dict[FactKind, set[str]]) -> set[Fact]:
    return {Fact(kind, value) for kind, values in by_kind.items() for value in values}


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
    """What survived: the facts of the removed texts that appear in the new context."""
    at_risk: set[Fact] = set()
    for text in removed_texts:
        at_risk |= extract(text)
    return survival_of(at_risk, new_context_texts)


def survival_of(at_risk: Iterable[Fact], new_context_texts: Iterable[str]) -> Survival:
    """Which of the facts ``at_risk`` appear in the new context.

    A fact counts as present when its text appears verbatim in the new context (for an error
    line, its first ``ERROR_NEEDLE`` characters do: summaries often shorten a line)."""
    haystack = "\n".join(new_context_texts)
    result = Survival()
    for fact in sorted(set(at_risk), key=lambda f: (f.kind.value, f.text)):
        result.total[fact.kind] = result.total.get(fact.kind, 0) + 1
        needle = fact.text[:ERROR_NEEDLE] if fact.kind is FactKind.ERROR else fact.text
        if needle in haystack:
            result.found[fact.kind] = result.found.get(fact.kind, 0) + 1
        else:
            result.lost.append(fact)
    return result
