"""The engine's headless commands: replay, diff, explain, sweep. Never imports Textual.

Each command reads its inputs like ``stats`` (formats detected, profiles from --profile /
--config / --set) and returns plain data that the CLI prints as tables or JSON.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ctx_inspect.app.loader import FailedInput, LoadedSession, estimator_for, iter_inputs
from ctx_inspect.core.diff import diff_action
from ctx_inspect.core.model import Message
from ctx_inspect.core.policies import policy_for
from ctx_inspect.core.policies.base import Action, ContextItem, PolicyResult, Summarizer
from ctx_inspect.core.profiles import Profile
from ctx_inspect.core.replay import ReplayResult, replay, with_overhead
from ctx_inspect.core.session import Session
from ctx_inspect.core.stats import RunFacts, summarize_replay
from ctx_inspect.errors import InputError

OnFailure = Callable[[FailedInput], None]


def open_for_engine(
    args: argparse.Namespace, on_failure: OnFailure | None = None
) -> Iterator[LoadedSession]:
    """The sessions of the command's inputs, one at a time. A session that cannot be read is
    handed to ``on_failure`` and the others are still read; without it, its error is raised."""
    from ctx_inspect.app.config import build_profile
    from ctx_inspect.formats.registry import FormatSpec

    def profile_for(spec: FormatSpec) -> Profile:
        return build_profile(args.profile, args.config, args.sets, default=spec.default_profile)

    # counted as ``stats`` counts them: a step shows the figure stats and the dashboard show
    for item in iter_inputs(
        args.files,
        profile_for,
        format_name=args.format_name,
        count_exact=not getattr(args, "no_exact", False),
        merge=getattr(args, "merge", False),
    ):
        if isinstance(item, LoadedSession):
            yield item
        elif on_failure is None:
            raise item.error
        else:
            on_failure(item)


def summarizer(args: argparse.Namespace) -> Summarizer:
    from ctx_inspect.app.config import build_summarizer

    return build_summarizer(args.config)


def _facts(loaded: LoadedSession) -> RunFacts:
    return RunFacts(path=loaded.name, format=loaded.format.name, tokenizer=loaded.tokenizer_label)


# -- replay ------------------------------------------------------------------------------------


def run_replay(
    args: argparse.Namespace, on_failure: OnFailure | None = None
) -> list[dict[str, Any]]:
    out = []
    summ = summarizer(args)
    for loaded in open_for_engine(args, on_failure):
        result = replay_read(loaded.session, loaded.profile, loaded.profile, summ)
        out.append(summarize_replay(loaded.session, result, _facts(loaded)))
    return out


def replay_read(
    session: Session,
    read_with: Profile,
    profile: Profile,
    summ: Summarizer,
) -> ReplayResult:
    """The replay of a session read as the engine commands read it (``open_for_engine``, with
    ``read_with``'s estimator) under ``profile``: what ``replay`` prints and the tune screen
    shows. The session's estimates serve when ``profile`` estimates alike."""
    from ctx_inspect.core.sweep import estimates_alike

    return replay(
        session,
        profile,
        estimate=estimator_for(profile),
        summarizer=summ,
        reuse_estimates=estimates_alike(read_with, profile),
    )


# -- diff ---------------------------------------------------------------------------------------


def context_items(
    session: Session, profile: Profile, step: int | None, estimate: Callable[[Message], int]
) -> list[ContextItem]:
    """The messages in context at ``step`` (default: now), with what the transcript does not
    show as one overhead item first: the part of the step's figure (the one the dashboard
    shows: reported, or anchored on the latest report) above the agent's estimate of its
    messages. A manual action therefore starts from the figure on screen."""
    indices = session.in_context(step)
    items = [ContextItem(session.body(i), estimate(session.body(i)), i) for i in indices]
    state = session.state_of(step if step is not None else session.step_count())
    figure = state.tokens if state is not None else 0
    unshown = max(0, figure - sum(item.tokens for item in items))
    return with_overhead(items, unshown, bool(items))


def check_simulable(session: Session, step: int | None) -> None:
    """A manual action needs the messages' content: a log that records figures but no
    messages at ``step`` cannot be simulated (the result would be made up)."""
    if session.in_context(step):
        return
    where = f"step {step}" if step is not None else "the live end"
    raise InputError(
        "cannot simulate",
        f"the file records no message content in context at {where} (only figures): "
        "a prune, compaction or truncation needs the messages themselves; "
        "open the agent's transcript or merge it with --merge",
    )


def act(
    items: list[ContextItem],
    profile: Profile,
    action: Action,
    estimate: Callable[[Message], int],
    summ: Summarizer,
) -> PolicyResult:
    """A manual action with the profile's agent policy (``force``: act now)."""
    policy = policy_for(profile.agent)
    if action is Action.PRUNE:
        return policy.prune(items, profile, estimate, force=True)
    if action is Action.COMPACT:
        return policy.compact(items, profile, estimate, summ, force=True)
    if action is Action.TRUNCATE:
        return policy.truncate(items, profile, estimate, force=True)
    raise InputError("unknown action", f"{action}: use prune, compact or truncate")


def run_diff(args: argparse.Namespace, on_failure: OnFailure | None = None) -> list[dict[str, Any]]:
    out = []
    summ = summarizer(args)
    action = Action(args.action)
    for loaded in open_for_engine(args, on_failure):
        estimate = estimator_for(loaded.profile)
        step = args.step
        if step is not None and not 1 <= step <= len(loaded.session.all_steps()):
            raise InputError(
                "no such step", f"{loaded.name} has steps 1 to {len(loaded.session.all_steps())}"
            )
        check_simulable(loaded.session, step)
        items = context_items(loaded.session, loaded.profile, step, estimate)
        result = act(items, loaded.profile, action, estimate, summ)
        diff = diff_action(items, result)
        data = diff.as_dict()
        data.update(
            file=loaded.name,
            format=loaded.format.name,
            profile=loaded.profile.name,
            step=step or len(loaded.session.all_steps()),
            figures=(
                "before: the step's figure as the dashboard shows it (messages by the "
                "profile's estimate, plus what the file's figure holds beyond them); after: "
                "estimated by the profile's rule"
            ),
        )
        out.append(data)
    return out


# -- explain ------------------------------------------------------------------------------------


def run_explain(
    args: argparse.Namespace, on_failure: OnFailure | None = None
) -> list[dict[str, Any]]:
    from ctx_inspect.core.explain import Explainer

    out: list[dict[str, Any]] = []
    summ = summarizer(args)
    for loaded in open_for_engine(args, on_failure):
        explainer = Explainer(
            loaded.session,
            loaded.profile,
            estimate_for=estimator_for,
            summarizer=summ,
            search=not args.no_search,
        )
        for item in explainer.explain():
            data = item.as_dict()
            data["file"] = loaded.name
            out.append(data)
    return out


# -- sweep --------------------------------------------------------------------------------------


def run_sweep(args: argparse.Namespace) -> dict[str, Any]:
    from ctx_inspect.app.sweeper import SweepInput
    from ctx_inspect.app.sweeper import run_sweep as sweep
    from ctx_inspect.core.sweep import grid, parse_axis

    axes = [parse_axis(spec) for spec in args.vary]
    combinations = grid(axes)
    if len(args.files) != 1 and not args.merge:
        raise InputError("one session at a time", "sweep takes one file (or --merge streams)")
    spec = SweepInput(
        paths=tuple(Path(p) for p in args.files),
        format_name=args.format_name,
        profile_name=args.profile,
        config=args.config,
        sets=tuple(args.sets),
        merge=args.merge,
        count_exact=not args.no_exact,
    )
    rows = sweep(spec, combinations, summarizer(args), workers=args.workers)
    data = [row.as_dict() for row in rows]
    if args.sort:
        key = args.sort.lstrip("-")
        data.sort(key=lambda r: (r.get(key) is None, r.get(key)), reverse=args.sort.startswith("-"))
    return {"file": str(args.files[0]), "axes": [k for k, _ in axes], "rows": data}
