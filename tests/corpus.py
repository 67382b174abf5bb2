"""Which files of the shared corpus belong to which agent, for the "not claimed" tests."""

from __future__ import annotations

from pathlib import Path


def real_runs(corpus: Path, agent: str) -> Path:
    """The folder of one agent's real runs (``realruns/<agent>``), which may be absent."""
    return corpus / "realruns" / agent


def foreign_paths(corpus: Path, agent: str) -> list[Path]:
    """Every file and folder of the corpus (the corpus itself first) except the agent's own real
    runs and the data cards: what that agent's readers must never claim."""
    own = real_runs(corpus, agent)
    return [corpus] + [
        p
        for p in sorted(corpus.rglob("*"))
        if not p.name.endswith(".md") and p != own and not p.is_relative_to(own)
    ]


def foreign_files(corpus: Path, agent: str, own_fixtures: Path) -> list[Path]:
    """The files of :func:`foreign_paths` plus every fixture of ours outside ``own_fixtures``."""
    fixtures = own_fixtures.parent
    return [p for p in foreign_paths(corpus, agent) if p.is_file()] + [
        p for p in sorted(fixtures.rglob("*")) if p.is_file() and own_fixtures not in p.parents
    ]
