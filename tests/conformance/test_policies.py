"""What every agent's policy passes: one suite, parametrized over the agents of
``core.agents.all_agents()`` that have a policy, so that a new agent (a plug-in's too) is held
to it without a line of its own here.

Each policy is run on a generated coding session (a few dozen messages: tool calls, outputs of
1 to 12 KB with paths and errors, one of 120 KB) under its profile with a small window, large
enough for the session to cross its threshold:

- pure: ``admit``, ``manage``, ``prune``, ``compact`` and ``truncate`` leave their inputs (the
  items, their messages, the profile) as they were, and give the same result twice;
- no reference cycle: what they return is freed without the cycle collector;
- forced actions act, or say why not (and change nothing);
- results are well formed: the changes list the original items not kept as they were, in their
  order, then the added ones; ``tokens_after`` is the total of the items returned;
- idempotence, where the agent is idempotent (``IDEMPOTENT`` says which, and why);
- a context kept as replay keeps it (``ContextList``) gives the results a plain list gives;
- replay: the same session replayed twice gives the same decisions and figures.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from _pytest.mark.structures import ParameterSet

from ctx_inspect.core import agents
from ctx_inspect.core.model import (
    Event,
    Message,
    MessageAdded,
    MessageKind,
    Part,
    PartType,
    RequestSent,
    Role,
)
from ctx_inspect.core.policies import policy_for
from ctx_inspect.core.policies.base import (
    Action,
    ContextItem,
    ContextList,
    ItemStatus,
    Policy,
    PolicyResult,
    total,
)
from ctx_inspect.core.profiles import Profile, make_profile
from ctx_inspect.core.replay import replay
from ctx_inspect.core.session import Session
from ctx_inspect.core.summarize import LocalSummarizer
from tests.conformance import case

# The settings every profile is given here: a window the session's ~90k tokens cross.
WINDOW: dict[str, object] = {"context_window": 64_000}
# Agents that act on it only with other settings, and why.
SETTINGS: dict[str, tuple[dict[str, object], str]] = {
    "fifth": (
        {"context_window": 2_000, "auto_compress": True},
        "Fifth counts no tool output toward its budget (level 4) and compresses only when "
        "ctx-auto-compress is called, which nothing does unless asked",
    ),
}

# (agent, forced action) -> why acting again on its own result changes nothing.
IDEMPOTENT: dict[tuple[str, str], str] = {
    ("baseagent", "prune"): "pruned outputs carry its marker, and the scan stops at the first",
    ("opencode", "prune"): "pruned outputs are marked compacted, and the scan stops at them",
    ("guide", "prune"): "stage 1 keeps the last five tool outputs: none older is left",
    ("goagent", "prune"): "tool results past the cutoff are archived: the cutoff then holds",
    ("fifth", "prune"): "level-4 output is dropped until levels 1-3 leave room: it then fits",
    ("claude-code", "prune"): "micro-compaction clears results older than the last five",
    ("generic", "prune"): "old outputs are cleared down to the warning level: below it, none",
    ("baseagent", "truncate"): "an output cut to the limit is within it",
    ("guide", "truncate"): "an output cut to the limit is within it",
    ("aiagent", "truncate"): "an output cut to toolResponseMaxBytes is within it",
    ("goagent", "truncate"): "an output cut to the tool-output limits is within them",
}

# Known failures of policies being moved into their agents' packages now: (agent, case) -> why.
KNOWN: dict[tuple[str, str], str] = {
    ("goagent", "idempotent-truncate"): (
        "a forced truncate cuts an output the limits cut already again (its notice counted as "
        "text): it fires, with no token saved, and the notice loses the output's real size"
    ),
}


def with_policy(name: str) -> list[ParameterSet]:
    """Every agent with a policy, for the case ``name``."""
    return [
        case(agent.name, known=KNOWN.get((agent.name, name)))
        for agent in agents.all_agents()
        if agent.policy is not None and agent.profile is not None
    ]


def idempotent_actions() -> list[ParameterSet]:
    """(agent, forced action) for the actions ``IDEMPOTENT`` declares."""
    return [
        case(agent.name, action, known=KNOWN.get((agent.name, f"idempotent-{action}")))
        for agent in agents.all_agents()
        if agent.policy is not None and agent.profile is not None
        for action in ("prune", "compact", "truncate")
        if (agent.name, action) in IDEMPOTENT
    ]


# -- the session ------------------------------------------------------------------------------

TURNS = 36
BIG_TURN = TURNS // 2


def output_text(turn: int) -> str:
    """A tool output of 1 to 12 KB (one of 120 KB): paths, errors, lines of a test run."""
    line = f"src/mod{turn % 7}.py:{turn}: AssertionError: expected 3, got {turn}\n"
    size = 120_000 if turn == BIG_TURN else 1_000 + (turn * 2_711) % 11_000
    return (line * (size // len(line) + 1))[:size]


def said(mid: str, role: Role, text: str) -> Message:
    return Message(id=mid, role=role, parts=(Part(type=PartType.TEXT, text=text),))


def conversation() -> list[Message]:
    """A user request, then a tool call and its output per turn, now and then a user remark."""
    messages = [
        said("sys", Role.SYSTEM, "You are a careful coding agent. " * 16),
        said("u0", Role.USER, "Fix the failing test in src/app.py"),
    ]
    for turn in range(TURNS):
        call = f"c{turn}"
        plan = (
            f"The tests still fail in src/mod{turn % 7}.py; I will read the traceback, look "
            f"at the assertion on line {turn} and run the suite again to see what changed. "
        ) * 2
        run = Part(
            type=PartType.TOOL_CALL,
            tool_name="Bash",
            call_id=call,
            arguments='{"command": "pytest tests/test_app.py"}',
        )
        output = Part(
            type=PartType.TOOL_RESULT, text=output_text(turn), tool_name="Bash", call_id=call
        )
        messages += [
            Message(
                id=f"a{turn}",
                role=Role.ASSISTANT,
                kind=MessageKind.TOOL_CALL,
                parts=(Part(type=PartType.TEXT, text=plan), run),
            ),
            Message(id=f"t{turn}", role=Role.TOOL, kind=MessageKind.TOOL_RESULT, parts=(output,)),
        ]
        if turn % 9 == 8:
            messages.append(said(f"u{turn}", Role.USER, f"Still failing at step {turn}?"))
    return messages


def session_events() -> list[Event]:
    """The conversation as a recording: a request before each answer, and one at the end."""
    events: list[Event] = []
    for message in conversation():
        if message.role is Role.ASSISTANT:
            events.append(RequestSent())
        events.append(MessageAdded(message=message))
    events.append(RequestSent())
    return events


def profile_of(name: str) -> Profile:
    settings = SETTINGS[name][0] if name in SETTINGS else WINDOW
    return make_profile(name, settings)


def estimator(profile: Profile) -> Callable[[Message], int]:
    def estimate(message: Message) -> int:
        return profile.estimate(message)

    return estimate


def items_of(profile: Profile) -> list[ContextItem]:
    estimate = estimator(profile)
    return [ContextItem(m, estimate(m), index) for index, m in enumerate(conversation())]


def policy_of(name: str) -> Policy:
    return policy_for(name)


def forced(policy: Policy, action: str, items: Sequence[ContextItem], profile: Profile) -> Any:
    estimate = estimator(profile)
    if action == "compact":
        return policy.compact(items, profile, estimate, LocalSummarizer(), force=True)
    method = policy.prune if action == "prune" else policy.truncate
    return method(items, profile, estimate, force=True)


def every_call(
    policy: Policy, items: Sequence[ContextItem], profile: Profile
) -> Iterator[tuple[str, Sequence[ContextItem], Any]]:
    """Each entry point called on ``items``: (what, the items it acted on, what it gave)."""
    estimate = estimator(profile)
    big = next(i for i in items if i.id == f"t{BIG_TURN}")
    before_big = items[: items.index(big)]
    yield "admit", before_big, policy.admit(big, before_big, profile, estimate)
    yield "manage", items, policy.manage(items, profile, estimate, LocalSummarizer())
    for action in ("prune", "compact", "truncate"):
        yield action, items, forced(policy, action, items, profile)


def state(items: Sequence[ContextItem]) -> list[tuple[int, dict[str, Any], int, int | None]]:
    return [(id(i), i.message.model_dump(), i.tokens, i.index) for i in items]


def described(result: Any) -> Any:
    """What a call gave, as plain values (results compared across calls)."""
    if result is None:
        return None
    if isinstance(result, list):
        return [described(r) for r in result]
    assert isinstance(result, PolicyResult)
    return (
        result.action,
        result.fired,
        result.reason,
        [(i.id, i.tokens, i.index, i.message) for i in result.items],
        result.changes,
        result.tokens_before,
        result.tokens_after,
    )


# -- the cases ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", with_policy("session"))
def test_the_session_crosses_the_profiles_threshold(name: str) -> None:
    profile = profile_of(name)
    assert profile.has_threshold()
    assert 0 < profile.threshold() < total(items_of(profile))


@pytest.mark.parametrize("name", with_policy("pure"))
def test_a_policy_leaves_its_inputs_as_they_were_and_answers_alike(name: str) -> None:
    profile, policy = profile_of(name), policy_of(name)
    items = items_of(profile)
    dumped = profile.model_dump()
    before = state(items)
    first = [(what, described(result)) for what, _, result in every_call(policy, items, profile)]
    assert state(items) == before
    assert profile.model_dump() == dumped
    again = [(what, described(result)) for what, _, result in every_call(policy, items, profile)]
    assert again == first


@pytest.mark.parametrize("name", with_policy("cycles"))
def test_what_a_policy_returns_makes_no_reference_cycle(name: str) -> None:
    profile, policy = profile_of(name), policy_of(name)
    items = items_of(profile)
    list(every_call(policy, items, profile))  # caches and first-use work are not the policy's
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        results = list(every_call(policy, items, profile))
        assert results
        del results
        assert gc.collect() == 0
    finally:
        if was_enabled:
            gc.enable()


@pytest.mark.parametrize("name", with_policy("force"))
def test_forced_actions_act_or_say_why_not(name: str) -> None:
    profile, policy = profile_of(name), policy_of(name)
    items = items_of(profile)
    acted = []
    for action in ("prune", "compact", "truncate"):
        result = forced(policy, action, items, profile)
        assert isinstance(result, PolicyResult)
        assert result.reason.strip(), f"{action}: no reason"
        if result.fired:
            acted.append(action)
            assert result.changes, f"{action} fired and changed nothing"
        else:
            assert result.changes == [], f"{action} did not fire and lists changes"
            assert [(i.id, i.tokens) for i in result.items] == [(i.id, i.tokens) for i in items]
    assert acted, "no forced action acts on a session far over the threshold"


def check_result(result: PolicyResult, before: Sequence[ContextItem], policy: Policy) -> None:
    """The result's changes and figures agree with the items before and after."""
    assert isinstance(result.action, Action) and result.policy == policy.name
    assert result.reason.strip()
    # the figures may be on the agent's own basis (the figure it compared with its limit), but
    # what they say was taken off is what the items lost
    saved = total(before) - total(result.items)
    assert result.tokens_before - result.tokens_after == saved, "the figures miss the items"
    if not result.fired:
        assert result.changes == [] and result.tokens_before == result.tokens_after
        return
    position = {item.id: k for k, item in enumerate(before)}
    original = [c for c in result.changes if c.id in position]
    added = [c for c in result.changes if c.id not in position]
    assert result.changes == original + added, "the added items are not listed last"
    order = [position[c.id] for c in original]
    assert order == sorted(set(order)), "the changes are not in the items' order"
    assert all(c.status is ItemStatus.ADDED for c in added)
    assert all(c.status is not ItemStatus.ADDED for c in original)
    for change in original:
        assert change.tokens_before == before[position[change.id]].tokens, change
    after = {item.id: item for item in result.items}
    assert set(after) <= set(position) | {c.id for c in added}, "an item came from nowhere"
    changed = {c.id: c for c in original}
    for item_id, item in after.items():
        if item_id in position and item_id not in changed:
            assert item == before[position[item_id]], f"{item_id} changed without a word"
    for change in original:
        if change.id in after:
            assert after[change.id].tokens == change.tokens_after, change


@pytest.mark.parametrize("name", with_policy("well_formed"))
def test_results_list_their_changes_in_order_and_add_up(name: str) -> None:
    profile, policy = profile_of(name), policy_of(name)
    items = items_of(profile)
    for what, acted_on, result in every_call(policy, items, profile):
        if what == "admit":
            if result is not None:  # about the admitted output alone
                assert len(result.items) == 1 and len(result.changes) == 1
                assert result.tokens_after == result.items[0].tokens
            continue
        if what == "manage":
            current: Sequence[ContextItem] = acted_on
            for step in result:
                check_result(step, current, policy)
                current = step.items if step.fired else current
            continue
        check_result(result, acted_on, policy)


@pytest.mark.parametrize(("name", "action"), idempotent_actions())
def test_acting_again_on_its_own_result_changes_nothing(name: str, action: str) -> None:
    profile, policy = profile_of(name), policy_of(name)
    first = forced(policy, action, items_of(profile), profile)
    assert first.fired, f"{action} does not act on the session: nothing to repeat"
    again = forced(policy, action, first.items, profile)
    assert not again.fired, IDEMPOTENT[name, action]
    assert again.changes == [] and again.tokens_after == first.tokens_after


@pytest.mark.parametrize("name", with_policy("context_list"))
def test_a_kept_context_gives_the_results_a_plain_list_gives(name: str) -> None:
    """Replay's context (a ``ContextList`` keeping its totals, the overhead as its head, marks
    left by what the policy did before) and a plain copy of it get the same results."""
    profile, policy = profile_of(name), policy_of(name)
    estimate = estimator(profile)
    overhead = ContextItem(Message(id="overhead", role=Role.SYSTEM), 500)
    context = ContextList()
    for item in items_of(profile):
        context.append(item)
        if item.message.role is not Role.ASSISTANT:
            continue
        context.push_head(overhead)
        plain = policy.manage(list(context), profile, estimate, LocalSummarizer())
        kept = policy.manage(context, profile, estimate, LocalSummarizer())
        assert described(kept) == described(plain), item.id
        fired = [r for r in kept if r.fired]
        if fired and isinstance(fired[-1].items, ContextList) and fired[-1].items.has_head:
            context = fired[-1].items.copy()  # as replay adopts an edit in place
            context.pop_head()
        elif fired:
            context = ContextList(i for i in fired[-1].items if i is not overhead)
        else:
            context.pop_head()


def replayed(name: str) -> Any:
    profile = profile_of(name)
    session = Session(estimator=lambda m: len(m.text) // 4)
    session.append(session_events())
    result = replay(session, profile, estimate=estimator(profile), summarizer=LocalSummarizer())
    return result


@pytest.mark.parametrize("name", with_policy("replay"))
def test_a_session_replayed_twice_gives_the_same_decisions_and_figures(name: str) -> None:
    first, second = replayed(name), replayed(name)
    assert first.decisions, "the policy never acts on the session"
    assert second.decisions == first.decisions
    assert second.steps == first.steps
    assert (second.agreement, second.disagreements) == (first.agreement, first.disagreements)
    assert [(i.id, i.tokens) for i in second.items] == [(i.id, i.tokens) for i in first.items]
    assert second.tokens_saved == first.tokens_saved and second.peak() == first.peak()
