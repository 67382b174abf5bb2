"""Sweep: replay one session under many combinations of settings and compare the outcomes.

This module holds the pure parts: expanding a grid of settings and turning one replay into one
row. Running the combinations across cores is ``inspector.sweeper``'s job.
"""

from __future__ import annotations

import itertools
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from inspector.core.diff import diff_action
from inspector.core.model import Message
from inspector.core.policies.base import Action, Summarizer
from inspector.core.profiles import Profile, make_profile
from inspector.core.replay import ReplayResult, replay
from inspector.core.session import Session
from inspector.errors import ConfigError

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
) -> SweepRow:
    """Replay ``session`` with ``settings`` applied over ``base``; one row of the sweep."""
    overrides = {**_explicit(base), **settings}
    try:
        profile = make_profile(base.name, overrides)
    except ConfigError as exc:
        return _failed(settings, exc.one_line())
    result = replay(session, profile, estimate=estimate_for(profile), summarizer=summarizer)
    return row_of(settings, result)


def _explicit(profile: Profile) -> dict[str, Any]:
    """The settings that differ from the profile's defaults (so a sweep keeps --set values)."""
    return dict(profile.model_dump(exclude_defaults=True, exclude={"name", "agent"}))


def row_of(settings: Mapping[str, Any], result: ReplayResult) -> SweepRow:
    kinds = [d.kind for d in result.decisions]
    peak_step, peak = result.peak()
    scores = [
        diff_action(record.before, record.result).survived.score
        for record in result.results
        if record.result.action in (Action.COMPACT, Action.PRUNE)
    ]
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


def _failed(settings: Mapping[str, Any], error: str) -> SweepRow:
    return SweepRow(dict(settings), 0, 0, 0, 0, 0, None, 0, 0.0, 0.0, error=error)
