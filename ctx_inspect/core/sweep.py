"""Sweep: replay one session under many combinations of settings and compare the outcomes.

This module holds the pure parts: expanding a grid of settings and turning one replay into one
row. Running the combinations across cores is ``ctx_inspect.app.sweeper``'s job.
"""

from __future__ import annotations

import itertools
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any
from weakref import WeakKeyDictionary

import ahocorasick

from ctx_inspect.core.diff import REMOVING as _REMOVING
from ctx_inspect.core.facts import ERROR_NEEDLE, FactKind, message_fact_texts
from ctx_inspect.core.model import Message, PartType
from ctx_inspect.core.policies.base import Action, ContextItem, PolicyResult, Summarizer
from ctx_inspect.core.profiles import Profile, make_profile
from ctx_inspect.core.replay import ReplayResult, replay
from ctx_inspect.core.session import Session
from ctx_inspect.errors import ConfigError

ROW_KEYS = (
    "compactions",
    "prunes",
    "final_turns",
    "dropped",
    "peak_tokens",
    "tokens_saved",
    "survived",
    "agreement",
)


@dataclass(frozen=True)
class SweepRow:
    settings: dict[str, Any]
    compactions: int
    prunes: int
    final_turns: int
    dropped: int
    peak_tokens: int
    peak_step: int | None
    tokens_saved: int
    survived: float  # mean share of facts kept over the actions that removed content
    agreement: float
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "settings": self.settings,
            "compactions": self.compactions,
            "prunes": self.prunes,
            "final_turns": self.final_turns,
            "dropped": self.dropped,
            "peak_tokens": self.peak_tokens,
            "peak_step": self.peak_step,
            "tokens_saved": self.tokens_saved,
            "survived": round(self.survived, 4),
            "agreement": round(self.agreement, 4),
            "error": self.error,
        }


def parse_axis(spec: str) -> tuple[str, list[Any]]:
    """``key=a,b,c`` (a list) or ``key=start:stop:step`` (an inclusive range) into values."""
    key, sep, raw = spec.partition("=")
    key = key.strip()
    if not sep or not key or not raw.strip():
        raise ConfigError("bad sweep axis", f"{spec!r}: expected KEY=a,b,c or KEY=start:stop:step")
    raw = raw.strip()
    if ":" in raw and "," not in raw:
        parts = [_value(p) for p in raw.split(":")]
        if len(parts) not in (2, 3) or not all(isinstance(p, int | float) for p in parts):
            raise ConfigError("bad sweep range", f"{spec!r}: a range is start:stop[:step] numbers")
        start, stop = parts[0], parts[1]
        step = parts[2] if len(parts) == 3 else 1
        if step == 0 or (stop - start) * step < 0:
            raise ConfigError("bad sweep range", f"{spec!r}: the step does not reach the stop")
        values: list[Any] = []
        count = round((stop - start) / step) + 1
        if count > 10_000:
            raise ConfigError("sweep too large", f"{spec!r} has {count} values")
        for i in range(count):
            value = start + i * step
            values.append(round(value, 10) if isinstance(value, float) else value)
        return key, values
    return key, [_value(p) for p in raw.split(",") if p.strip()]


def _value(text: str) -> Any:
    text = text.strip()
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def grid(axes: Sequence[tuple[str, list[Any]]]) -> list[dict[str, Any]]:
    """Every combination of the axes' values."""
    if not axes:
        return [{}]
    keys = [k for k, _ in axes]
    return [
        dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(v for _, v in axes))
    ]


def run_one(
    session: Session,
    base: Profile,
    settings: Mapping[str, Any],
    *,
    estimate_for: Callable[[Profile], Callable[[Message], int]],
    summarizer: Summarizer,
    reuse_estimates: bool = False,
) -> SweepRow:
    """Replay ``session`` with ``settings`` applied over ``base``; one row of the sweep.

    ``reuse_estimates``: the session was loaded with ``base``'s estimator, so its estimates
    serve every combination that estimates alike (``estimates_alike``)."""
    overrides = {**_explicit(base), **settings}
    try:
        profile = make_profile(base.name, overrides)
    except ConfigError as exc:
        return _failed(settings, exc.one_line())
    result = replay(
        session,
        profile,
        estimate=estimate_for(profile),
        summarizer=summarizer,
        reuse_estimates=reuse_estimates and estimates_alike(base, profile),
    )
    return row_of(settings, result, facts_cache(session))


def estimates_alike(a: Profile, b: Profile) -> bool:
    """Whether two profiles estimate every message alike: the same rule, with the same
    tokenizer encoding when the rule uses one (``Profile.estimate`` reads nothing else)."""
    if a.estimator != b.estimator or a.uses_counter() != b.uses_counter():
        return False
    return not a.uses_counter() or a.counter_encoding() == b.counter_encoding()


def _explicit(profile: Profile) -> dict[str, Any]:
    """The settings that differ from the profile's defaults (so a sweep keeps --set values)."""
    return dict(profile.model_dump(exclude_defaults=True, exclude={"name", "agent"}))


def row_of(
    settings: Mapping[str, Any], result: ReplayResult, facts: FactsCache | None = None
) -> SweepRow:
    """One row: the replay's decisions, figures, and the mean share of facts that survived
    the prunes and compactions (``diff_action(...).survived.score``, computed faster)."""
    kinds = [d.kind for d in result.decisions]
    peak_step, peak = result.peak()
    scores = _SurvivalScorer(facts).scores(
        (record.before, record.result)
        for record in result.results
        if record.result.action in (Action.COMPACT, Action.PRUNE)
    )
    return SweepRow(
        settings=dict(settings),
        compactions=kinds.count("compaction"),
        prunes=kinds.count("prune"),
        final_turns=kinds.count("final_turn"),
        dropped=kinds.count("dropped"),
        peak_tokens=peak,
        peak_step=peak_step,
        tokens_saved=result.tokens_saved,
        survived=sum(scores) / len(scores) if scores else 1.0,
        agreement=result.agreement,
    )


_ITEM_ID = attrgetter("message.id")

# A fact, as the scorer keeps it: a letter for its kind, then its text. Two facts are one when
# their kind and text are (their needles may be alike).
_KIND_LETTER = {
    FactKind.PATH: "p",
    FactKind.COMMAND: "c",
    FactKind.ERROR: "e",
    FactKind.IDENTIFIER: "i",
}
_ERROR_LETTER = _KIND_LETTER[FactKind.ERROR]


class FactsCache:
    """The facts of removed messages, by the (length, hash) of their text and the hashes of
    their tool calls' arguments: the combinations of a sweep over one session remove the same
    tool outputs again and again. Bounded; it keeps no text. ``run_one`` keeps one per session
    (for as long as the session lives)."""

    SIZE = 16_384

    def __init__(self) -> None:
        self._facts: dict[tuple[object, ...], frozenset[str]] = {}

    def facts_of(self, message: Message, text: str) -> frozenset[str]:
        """The facts of ``message`` whose text is ``text`` (``facts.message_fact_texts``),
        each a letter for its kind then its text (``_needle`` gives what to look for)."""
        key = (
            len(text),
            hash(text),
            *[
                (part.tool_name, hash(part.arguments))
                for part in message.parts
                if part.type is PartType.TOOL_CALL
            ],
        )
        facts = self._facts.get(key)
        if facts is None:
            if len(self._facts) >= self.SIZE:
                self._facts.clear()
            found: list[str] = []
            for kind, values in message_fact_texts(message, text).items():
                found += map(_KIND_LETTER[kind].__add__, values)
            facts = self._facts[key] = frozenset(found)
        return facts


def _needle(fact: str) -> str:
    """What ``facts.survival_of`` looks for in the new context, for a fact of ``facts_of``."""
    return fact[1 : ERROR_NEEDLE + 1] if fact[0] == _ERROR_LETTER else fact[1:]


_CACHES: WeakKeyDictionary[Session, FactsCache] = WeakKeyDictionary()


def facts_cache(session: Session) -> FactsCache:
    """The facts cache of the sweep over ``session``."""
    cache = _CACHES.get(session)
    if cache is None:
        cache = _CACHES[session] = FactsCache()
    return cache


class _SurvivalScorer:
    """``diff_action(before, result).survived.score`` for the records of one replay, without
    the diff's rows: the facts of the removed messages (``facts.message_fact_texts``, cached)
    looked up in the texts of the visible messages after.

    The records are scored in batches of ``BATCH``: one Aho-Corasick automaton holds the
    needles of a batch, and each distinct visible text of the batch is scanned once for all of
    them. A needle that holds no line break is in a context's joined texts exactly when it is in
    one of them; one that holds a line break could span two messages: it is looked for in the
    joined texts, as ``facts.survival_of`` does."""

    # Small batches, small automata: they are built and scan faster, which more than pays for
    # scanning again the texts that stay visible from batch to batch (on the engine bench's
    # 240k-token replay, 8 records a batch score in 0.9 s, 48 in 1.5 s).
    BATCH = 8

    def __init__(self, facts: FactsCache | None = None) -> None:
        self._facts = facts or FactsCache()
        self._texts: dict[int, str] = {}  # id(message) -> its text
        self._kept: list[Message] = []
        self._before: tuple[Sequence[ContextItem], dict[str, ContextItem]] | None = None

    def score(self, before: Sequence[ContextItem], result: PolicyResult) -> float:
        """The share of the facts ``result`` removed from ``before`` still in its visible
        messages."""
        return self.scores([(before, result)])[0]

    def scores(self, records: Iterable[tuple[Sequence[ContextItem], PolicyResult]]) -> list[float]:
        """``score`` of each record, in order."""
        out: list[float] = []
        batch: list[tuple[Sequence[ContextItem], PolicyResult]] = []
        for record in records:
            batch.append(record)
            if len(batch) >= self.BATCH:
                out += self._scores(batch)
                batch = []
        if batch:
            out += self._scores(batch)
        return out

    def _scores(self, batch: Sequence[tuple[Sequence[ContextItem], PolicyResult]]) -> list[float]:
        # Per record with facts at risk: how many; how many found already; the other needles
        # (one per fact, to look for with the automaton); its distinct visible texts after.
        cases: list[tuple[int, int, list[str], set[str]] | None] = []
        wanted: set[str] = set()
        for before, result in batch:
            needles = list(map(_needle, self._at_risk(before, result)))
            if not needles:
                cases.append(None)
                continue
            after = self._after(result)
            total, found = len(needles), 0
            if not all(needles) or any("\n" in needle for needle in needles):
                joined = "\n".join(after)
                found = sum(needle in joined for needle in needles if not _plain(needle))
                needles = [needle for needle in needles if _plain(needle)]
            wanted.update(needles)
            cases.append((total, found, needles, set(after)))
        in_text = _needles_in(wanted, set().union(*(case[3] for case in cases if case)))
        scores: list[float] = []
        for case in cases:
            if case is None:
                scores.append(1.0)
                continue
            total, found, needles, shown = case
            present = set().union(*(in_text[text] for text in shown))
            found += sum(needle in present for needle in needles)
            scores.append(found / total)
        return scores

    def _at_risk(self, before: Sequence[ContextItem], result: PolicyResult) -> set[str]:
        """The facts of the messages ``result`` took out of ``before``."""
        if self._before is None or self._before[0] is not before:
            self._before = (before, dict(zip(map(_ITEM_ID, before), before, strict=True)))
        by_id = self._before[1]
        facts: set[str] = set()
        for change in result.changes:
            old = by_id.get(change.id)
            if change.status in _REMOVING and old is not None:
                facts |= self._facts.facts_of(old.message, self._text(old.message))
        return facts

    def _after(self, result: PolicyResult) -> list[str]:
        """The texts of the visible messages of ``result``, in order."""
        texts = self._texts
        after: list[str] = []
        for item in result.items:
            message = item.message
            if message.visible:
                text = texts.get(id(message))
                after.append(self._text(message) if text is None else text)
        return after

    def _text(self, message: Message) -> str:
        """``message.text``, taken once: messages recur from record to record."""
        text = self._texts.get(id(message))
        if text is None:
            self._kept.append(message)  # so that its id stays its own
            text = self._texts[id(message)] = message.text
        return text


def _plain(needle: str) -> bool:
    """Whether ``needle`` is in the joined texts of a context exactly when it is in one of
    them: it holds no line break (which could join two texts) and is not empty (the empty
    needle is in the joined texts even of no text)."""
    return bool(needle) and "\n" not in needle


def _needles_in(needles: Iterable[str], texts: Iterable[str]) -> dict[str, set[str]]:
    """For each of ``texts``, which of ``needles`` it holds: one Aho-Corasick scan of it."""
    automaton = ahocorasick.Automaton()
    for needle in needles:
        automaton.add_word(needle, needle)
    if not len(automaton):
        return {text: set() for text in texts}
    automaton.make_automaton()
    return {text: {needle for _, needle in automaton.iter(text)} for text in texts}


def _failed(settings: Mapping[str, Any], error: str) -> SweepRow:
    return SweepRow(dict(settings), 0, 0, 0, 0, 0, None, 0, 0.0, 0.0, error=error)
