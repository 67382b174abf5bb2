"""Facts a context should not lose: file paths, commands, error lines and identifiers.

Used to measure what survived a prune or compaction: the facts found in removed content, and
which of them still appear somewhere in the new context.
"""

from __future__ import annotations

import operator
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
_IDENTIFIER = re.compile(
    r"\b(?:[a-z]+(?:_[a-z0-9]+)+|[a-z]+(?:[A-Z][a-z0-9]+)+|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+)\b"
)
_MAX_ERROR_CHARS = 160

# An error line is a line holding one of these words, in any case: "error" and "exception" may
# end a longer word ("ValueError"), the others stand alone.
_ERROR_WORDS = (
    "error",
    "exception",
    "traceback",
    "failed",
    "failure",
    "fatal",
    "panic",
    "denied",
    "not found",
    "cannot",
    "could not",
    "undefined",
    "segmentation fault",
)
_ERROR_HIT = re.compile(
    r"(?:error|exception)\b|\b(?:traceback|failed|failure|fatal|panic|denied|not found|cannot"
    r"|could not|undefined|segmentation fault)\b",
    re.IGNORECASE,
)
# Under IGNORECASE these match a letter of the words above though ``str.lower`` does not turn
# them into it ("İ" even lowers to two characters): a text holding one is searched with
# ``_ERROR_HIT`` alone.
_UNLOWERED = ("\u0130", "\u0131", "\u017f")

# Why the searches below can skip most of a text. A regular expression tries every position of
# the text, slowly, unless it starts with a plain character (then it jumps from one occurrence
# of that character to the next) or a character class (it steps over the characters outside).
#
# Every match of ``_PATH`` is made of the characters of a *run* ``[\w./@+~-]+`` and holds a "/"
# or a "."; the characters around a run are ones ``_PATH``'s look-behind and ``\b`` treat as
# they treat the ends of a string. So the paths are what ``_PATH`` finds in each run holding "/"
# or "." taken alone. Such a run is its head (before its first "/", say) and the rest: the rest
# is a match of ``/[\w./@+~-]*+``, and the head is what ``/([\w.@+~-]*+)(?![\w./@+~-])`` takes
# in the reversed text (reversed). Each run holding "/" gives one of each, in order: they pair.
#
# Every match of ``_IDENTIFIER`` is a whole word (``\w+``) holding "_" or a capital A-Z: the
# identifiers are what ``_IDENTIFIER`` finds in each such word taken alone, found alike.
_RUNS = (  # (the character the stretch holds, its rest, its head reversed)
    ("/", re.compile(r"/[\w./@+~-]*+"), re.compile(r"/([\w.@+~-]*+)(?![\w./@+~-])")),
    (".", re.compile(r"\.[\w./@+~-]*+"), re.compile(r"\.([\w/@+~-]*+)(?![\w./@+~-])")),
)
_UNDERSCORE_WORDS = ("_", re.compile(r"_\w*+"), re.compile(r"_([^\W_]*+)(?!\w)"))
_CAPITAL_WORDS = (None, re.compile(r"[A-Z]\w*+"), re.compile(r"[A-Z]([^\WA-Z]*+)(?!\w)"))
_Stretch = tuple[str | None, re.Pattern[str], re.Pattern[str]]
_APART = "\0"  # in no stretch


@dataclass(frozen=True)
class Fact:
    kind: FactKind
    text: str


def extract(text: str) -> set[Fact]:
    """Every fact in ``text``."""
    return {Fact(kind, value) for kind, values in fact_texts(text).items() for value in values}


def fact_texts(text: str) -> dict[FactKind, set[str]]:
    """The text of every fact in ``text``, by kind (``extract`` without the ``Fact``s)."""
    reversed_text = text[::-1]
    lowered = text.lower()
    paths: set[str] = set()
    for run in _stretches(_RUNS, text, reversed_text):
        for match in _PATH.findall(run):
            value = match.rstrip(".,:;")
            if len(value) >= 3 and "//" not in value and any(ch.isalpha() for ch in value):
                paths.add(value)
    commands: set[str] = set()
    if "$" in text or ">" in text or "#" in text:
        commands.update(m.strip() for m in _COMMAND_LINE.findall(text))
    commands.update(m.strip() for m in _COMMAND_ARG.findall(text))
    errors = {line.strip()[:_MAX_ERROR_CHARS] for line in _error_lines(text, lowered)}
    errors.discard("")
    # No capital A-Z when lowering changes nothing.
    words = (_UNDERSCORE_WORDS,) if lowered == text else (_UNDERSCORE_WORDS, _CAPITAL_WORDS)
    identifiers: set[str] = set()
    for word in _stretches(words, text, reversed_text):
        identifiers.update(_IDENTIFIER.findall(word))
    return {
        FactKind.PATH: paths,
        FactKind.COMMAND: commands,
        FactKind.ERROR: errors,
        FactKind.IDENTIFIER: identifiers,
    }


def _stretches(kinds: Iterable[_Stretch], text: str, reversed_text: str) -> set[str]:
    """The distinct stretches of ``text`` of each kind, each its head joined to its rest."""
    out: set[str] = set()
    for char, rest, head_reversed in kinds:
        if char is not None and char not in text:
            continue
        heads = head_reversed.findall(reversed_text)
        if not heads:
            continue
        # Reversed all at once, the heads read as they do in ``text``, and in its order.
        heads = _APART.join(heads)[::-1].split(_APART)
        tails = rest.findall(text)
        if len(heads) != len(tails):
            raise AssertionError("a stretch without its head")  # never, by construction
        out.update(map(operator.add, heads, tails))
    return out


def _error_lines(text: str, lowered: str) -> list[str]:
    """The lines (split at "\\n") holding an ``_ERROR_HIT``, each once."""
    found: dict[int, int] = {}  # start -> end of the lines found
    size = len(text)
    if any(ch in text for ch in _UNLOWERED):
        at = 0
        while (hit := _ERROR_HIT.search(text, at)) is not None:
            start = text.rfind("\n", 0, hit.start()) + 1
            end = text.find("\n", hit.start())
            found[start] = end = size if end < 0 else end
            at = end + 1
        return [text[start:end] for start, end in found.items()]
    # ``lowered`` is as long as ``text``, and an ``_ERROR_HIT`` in ``text`` is one of the words
    # in ``lowered`` at the same place: look for those, then check each in ``text``.
    hit_at = _ERROR_HIT.match
    for word in _ERROR_WORDS:
        at = lowered.find(word)
        while at >= 0:
            if hit_at(text, at) is None:
                at = lowered.find(word, at + 1)
                continue
            start = text.rfind("\n", 0, at) + 1
            end = text.find("\n", at)
            found[start] = end = size if end < 0 else end
            at = lowered.find(word, end + 1)
    return [text[start:end] for start, end in found.items()]


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
