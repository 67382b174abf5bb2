"""Replay: re-run a recorded session step by step under a profile and its policy.

The replayed context starts as the recording's and diverges where the replayed policy decides
differently. At each request the figure the replayed agent measures is the agent's own estimate
of the replayed messages, plus what the recording's reported figure held beyond its messages
(system prompt, tool schemas), as one ``overhead`` item at the head of the context. A log that
holds only figures (no messages) is anchored on the recording instead: the replayed figure is
the recorded one, plus what the recording removed that the replay did not, minus what the
replay removed that the recording did not (``offset``); there the overhead item stands for the
whole conversation the log does not show. Either way, a replay under the recording's own
settings reproduces the recorded figures.

Where the agent decides is the policy's: ``admit`` as each tool output enters, ``manage``
before each request, and the optional hooks ``after_request`` (once a request is answered or
refused), ``finish`` (when the agent's loop ends) and ``undetermined`` (a recorded decision the
recording cannot determine: listed with its reason, not counted). See ``AfterRequest``,
``LoopEnd`` and ``Undetermined``. A request is refused when the recording shows its refusal and
the replayed request would still be refused, or when the profile gives the provider's limit
(``Profile.provider_limit``) and the replayed request is over it.

An agent that measures its context on its latest usage (``Profile.measure_basis`` "usage" or
"usage+estimate") is replayed on that figure: the replayed size of the latest answered request
plus its output (plus, for "usage+estimate", the agent's estimate of what the replay added
after the answer's first record). Such an agent decides before its request, so a recorded
compaction is a check of its own, where the recording shows it (before what it put in): the
agent hears how the latest request went, then decides on its figure; if it does not compact,
it sent the request the compaction answered, which no file shows (refused when over the
provider's limit). Where the replayed agent compacts there too, or the user asked for it, the
recorded result is taken, as the best knowledge of what compacting did.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import Any, Protocol

from ctx_inspect.core.collector import collector_paused
from ctx_inspect.core.model import (
    TRIGGER_NOT_RECORDED,
    Compacted,
    ContextReset,
    Event,
    FinalTurnForced,
    GuardEvaluated,
    GuardStatus,
    Message,
    MessageKind,
    Origin,
    Part,
    PartType,
    Pruned,
    RequestRejected,
    RequestSent,
    Role,
    ToolOutputAction,
    ToolOutputChanged,
    Usage,
)
from ctx_inspect.core.policies import policy_for
from ctx_inspect.core.policies.base import (
    Action,
    ContextItem,
    ContextList,
    ItemStatus,
    Policy,
    PolicyResult,
    Summarizer,
)
from ctx_inspect.core.profiles import Profile
from ctx_inspect.core.session import (
    COMPACTION_LABEL,
    MAIN_THREAD,
    MessageRow,
    Session,
    StepState,
)
from ctx_inspect.core.window import Zone

OVERHEAD_ID = "__overhead__"
MANUAL = "manual"  # a compaction the user asked for
REACTIVE = "reactive"  # a compaction after the provider refused a request
REPLAY_TRIGGERS = (MANUAL, REACTIVE)  # the triggers a replayed compaction is labelled with
FAILED_HERE = (
    "it failed in the recording (its summary failed, or its compactor found nothing to cut): "
    "the context stays as it was"
)
_ITEM_ID = attrgetter("message.id")

_KIND_OF_ACTION = {
    Action.COMPACT: "compaction",
    Action.PRUNE: "prune",
    Action.FINAL_TURN: "final_turn",
    Action.DROP: "dropped",
    Action.TRUNCATE: "truncated",
}
_REDUCING = {"compaction", "prune"}


@dataclass(frozen=True)
class Decision:
    step: int
    kind: str  # compaction | prune | final_turn | dropped | truncated
    tokens_before: int | None = None
    tokens_after: int | None = None
    detail: str = ""
    persistent: bool = True
    # the figure the replayed agent compared with its limit, when its policy says (it can
    # differ from tokens_before: the context acted on, or the recorded one where replay took it)
    figure: int | None = None
    # what made the agent act: a recorded compaction's own trigger; for the replay's,
    # ``MANUAL`` (the user's command, made again), ``REACTIVE`` (the provider refused a
    # request), else "" (the agent's own rule)
    trigger: str = ""
    failed: bool = False  # the agent decided to act and its action failed (nothing changed)
    # why a recording cannot show whether the agent did this (a replayed decision not compared)
    undetermined: str = ""

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "step": self.step,
            "kind": self.kind,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "detail": self.detail,
            "failed": self.failed,
        }
        if self.failed:
            data["failed"] = True
        return data


@dataclass
class ReplayStep:
    """One replayed request. ``tokens`` is on the basis and at the moment of the session's own
    figure for the step (``StepState.tokens``, what ``stats`` and the dashboard show: Codex's
    total once the request was answered, the request an agent sent after forcing its final
    turn), moved by what the replay changed; ``recorded`` is that session figure. ``request``
    is the figure the replayed agent measures at the request (what its decisions see), and
    ``request_recorded`` the recording's on that basis."""

    step: int
    tokens: int  # the replayed figure, as the session's figure of the step
    estimated: int  # the agent's own estimate of the replayed messages
    exact: int | None  # exact count of the replayed messages, when known
    recorded: int  # the session's own figure of the step (``StepState.tokens``)
    origin: Origin  # where the recorded figure came from
    zone: Zone
    messages: int
    peak: int  # the highest figure of the step (before management)
    recorded_peak: int = 0  # the recording's highest figure of the step
    decisions: list[Decision] = field(default_factory=list)
    recorded_decisions: list[Decision] = field(default_factory=list)
    # the replayed figure at the request as the agent measures it (after what its management
    # removed): what the policy hears once the request is answered
    request: int = 0
    # the recording's figure on that basis (on an "anchor" basis: the recording's figure as
    # the agent measured it before the request, its own estimate of what came since the latest
    # report added; on a "guard" basis: the projection the guard logged at the preflight)
    request_recorded: int = 0
    # the build-up after the last request, a step of the session's own (``Session.
    # open_step_shown``): no request was sent there
    live_end: bool = False
    # False for a figure that is no size that was sent or reported (a live end anchored on the
    # latest report): it is not a peak, as in ``stats``
    sent: bool = True
    # the replayed context at the request (without the overhead item), kept for a what-if
    items: tuple[ContextItem, ...] | None = None

    @property
    def source(self) -> Origin:
        """Where the replayed figure comes from: the recording's own where the replay left
        the step's figure as recorded, else estimated (the recorded figure moved by the
        agent's estimate of what the replay changed)."""
        return self.origin if self.tokens == self.recorded else Origin.ESTIMATED


WHAT_IF = "what-if"  # the detail of the decision a what-if's manual action is


@dataclass(frozen=True)
class WhatIfStart:
    """A manual action applied at ``step`` (in its build-up, before its request)."""

    step: int
    result: PolicyResult

    def decision(self) -> Decision:
        result = self.result
        return Decision(
            self.step,
            _KIND_OF_ACTION.get(result.action, result.action.value),
            result.tokens_before,
            result.tokens_after,
            f"{WHAT_IF}: {result.reason}",
            trigger=MANUAL,
        )


@dataclass(frozen=True)
class ActionRecord:
    """One fired policy result with the step it fired at and the context it acted on."""

    step: int
    before: list[ContextItem]
    result: PolicyResult


@dataclass
class ReplayResult:
    profile: Profile
    steps: list[ReplayStep]
    decisions: list[Decision]
    recorded: list[Decision]
    agreement: float
    disagreements: list[dict[str, Any]]
    results: list[ActionRecord]  # every fired policy result
    items: list[ContextItem]  # the replayed context at the end
    # recorded decisions the recording cannot determine, with why: not counted either way
    undetermined: list[tuple[Decision, str]] = field(default_factory=list)

    @property
    def left_out(self) -> list[dict[str, Any]]:
        """The replayed decisions a recording cannot show, with why (not compared)."""
        return [
            {**d.as_dict(), "reason": d.undetermined, "recorded": False}
            for d in self.decisions
            if d.undetermined
        ]

    @property
    def tokens_saved(self) -> int:
        """What the replayed prunes, compactions, truncations and drops removed."""
        return sum(
            d.tokens_before - d.tokens_after
            for d in self.decisions
            if d.kind in ("compaction", "prune", "truncated", "dropped")
            and d.tokens_before is not None
            and d.tokens_after is not None
        )

    def peak(self) -> tuple[int | None, int]:
        best = max((s for s in self.steps if s.sent), key=lambda s: s.peak, default=None)
        return (best.step, best.peak) if best else (None, 0)

    @property
    def requests(self) -> int:
        """How many requests were replayed (the live end is a step, not a request)."""
        return sum(not s.live_end for s in self.steps)


Estimate = Callable[[Message], int]


@dataclass(frozen=True)
class Situation:
    """What the replay knew at a step's first check (where an agent that decides before its
    request decided): what a policy's ``undetermined`` judges a recorded decision from."""

    has_messages: bool  # the recording holds the messages (else only figures)
    figure: int | None = None  # the replayed agent's own figure there
    # the provider's refusal of the latest request, as the replayed agent knew it there
    refused: RequestRejected | None = None


class AfterRequest(Protocol):
    """A policy's optional ``after_request``: what the agent does once a request is answered
    (``figure``: the replayed figure of that request, as the agent measures it) or refused
    as too long (``refused``: the provider's refusal, as replay judges it). Replay calls it
    once per request, at the next check (before ``manage``, which then sees its result)."""

    def __call__(
        self,
        items: Sequence[ContextItem],
        profile: Profile,
        estimate: Estimate,
        summarizer: Summarizer,
        *,
        figure: int,
        refused: RequestRejected | None = None,
    ) -> list[PolicyResult]: ...


class LoopEnd(Protocol):
    """A policy's optional ``finish``: what the agent does when its loop ends (before the
    user's next message, before the user's compaction, at the end of the recording)."""

    def __call__(
        self, items: Sequence[ContextItem], profile: Profile, estimate: Estimate
    ) -> list[PolicyResult]: ...


class Undetermined(Protocol):
    """A policy's optional ``undetermined``: why a recorded decision cannot be determined from
    the recording under these settings (listed with the reason, not counted in the
    agreement), or None. Replay asks once per recorded decision, after the replay."""

    def __call__(self, recorded: Decision, profile: Profile, seen: Situation) -> str | None: ...


class _Context:
    """The replayed context: its messages in order, in a ``ContextList`` (totals kept as it
    changes), and their exact count, brought up to date when asked for (``exact``)."""

    def __init__(self, count_exact: Callable[[ContextItem], int] | None) -> None:
        self.items = ContextList()
        self._count_exact = count_exact
        self._exact_total = 0
        self._uncounted: list[ContextItem] = []  # appended since the last ``exact``
        self._recount = False  # the items were replaced since the last ``exact``
        self._overhead = False  # the overhead item was put in for the request being replayed
        self.generation = 0  # how many times the items were replaced

    @property
    def total(self) -> int:
        return self.items.tokens_total

    def append(self, item: ContextItem) -> None:
        self.items.append(item)
        if self._count_exact is not None:
            self._uncounted.append(item)

    def replace(self, items: Sequence[ContextItem], *, same_list: bool = False) -> None:
        """The context becomes ``items`` (a policy's result), without the overhead item.
        ``same_list``: a change to the running loop's list alone (undone when the prompt ends),
        which leaves a compaction waiting for the next prompt in force."""
        if isinstance(items, ContextList) and items.has_head:
            # a policy's in-place edit of the context it was given: the head is the overhead
            # item, the only one there is (the context holds none otherwise), and the marks
            # stay valid
            context = items.copy()
            context.pop_head()
        elif isinstance(items, ContextList) and not self._overhead:
            context = items.copy()  # no overhead item this request: none to take out
        else:
            ids = list(map(_ITEM_ID, items))
            if OVERHEAD_ID in ids:
                context = ContextList(i for i in items if i.id != OVERHEAD_ID)
            else:
                context = ContextList(items)
        self.items = context
        self._uncounted.clear()
        self._recount = True
        if not same_list:
            self.generation += 1

    def exact(self) -> int | None:
        """The exact count of the messages in context, None without an exact counter."""
        count = self._count_exact
        if count is None:
            return None
        if self._recount:
            self._exact_total = sum(count(i) for i in self.items if i.message.visible)
            self._recount = False
        else:
            self._exact_total += sum(count(i) for i in self._uncounted if i.message.visible)
        self._uncounted.clear()
        return self._exact_total

    def swap(self, position: int, item: ContextItem) -> None:
        """The item at ``position`` becomes ``item``."""
        self.items[position] = item
        self._uncounted.clear()
        self._recount = True

    def reset_after(self, keep_through: str | None, keep_system: bool) -> None:
        cut = 0
        if keep_through is not None:
            cut = next((p + 1 for p, i in enumerate(self.items) if i.id == keep_through), -1)
            if cut < 0:
                return  # the point to go back to is not in the replayed context: nothing to undo
        tail = [i for i in self.items[cut:] if keep_system and i.message.role is Role.SYSTEM]
        self.replace([*self.items[:cut], *tail])

    def keep_only(self, retained: Sequence[str], keep_system: bool) -> None:
        """What a recorded compaction left of the context: the items it retained (and system
        messages when it keeps them)."""
        kept = set(retained)
        self.replace(
            [
                i
                for i in self.items
                if i.id in kept or (keep_system and i.message.role is Role.SYSTEM)
            ]
        )

    @contextmanager
    def with_overhead(self, overhead: int, has_messages: bool) -> Iterator[ContextList]:
        """The context with the overhead item first, as its head (when there is one), for one
        request (a ``replace`` meanwhile leaves the new context without it). The overhead can
        be negative: an agent's estimate of its messages above the figure reported for them."""
        if overhead == 0:
            yield self.items
            return
        items = self.items
        items.push_head(overhead_item(overhead, has_messages))
        self._overhead = True
        try:
            yield items
        finally:
            self._overhead = False
            if items.has_head:
                items.pop_head()


def replay(
    session: Session,
    profile: Profile,
    *,
    estimate: Estimate,
    summarizer: Summarizer,
    policy: Policy | None = None,
    exact: Callable[[Message], int] | None = None,
    reuse_estimates: bool = False,
    what_if: WhatIfStart | None = None,
) -> ReplayResult:
    """Replay ``session`` under ``profile``. Linear in the session's events (the cyclic
    garbage collector is paused meanwhile: a replay allocates hundreds of thousands of objects
    and makes no cycles; how long they live is the caller's to say, ``core.collector``).

    ``what_if``: a manual action applied at a step (a what-if): from that step's request on,
    the context is the action's result and the policy decides the rest of the session; each
    step then keeps its replayed context (``ReplayStep.items``) to make the what-if's session
    from (``core.whatif``).

    ``reuse_estimates``: take each message's estimate from the session (``record(i).estimate``)
    instead of calling ``estimate``: only for a session loaded with this profile's estimator
    (the same rule and counter), as the engine commands know theirs is. An output the recording
    dropped is restored at its recorded size and estimated again either way.
    """
    with collector_paused():
        return _replay(
            session, profile, estimate, summarizer, policy, exact, reuse_estimates, what_if
        )


def _replay(
    session: Session,
    profile: Profile,
    estimate: Estimate,
    summarizer: Summarizer,
    policy: Policy | None,
    exact: Callable[[Message], int] | None,
    reuse_estimates: bool,
    what_if: WhatIfStart | None = None,
) -> ReplayResult:
    policy = policy or policy_for(profile.agent)
    recorded_steps = session.steps
    recorded = recorded_decisions(session)
    recorded_by_step: dict[int, list[Decision]] = {}
    for d in recorded:
        recorded_by_step.setdefault(d.step, []).append(d)
    has_messages = session.message_count > 0
    basis = profile.measure_basis()
    # a log of figures alone, whose agent logs its guard: the figure it compared, per step
    preflights = _preflights(session) if basis == "guard" and not has_messages else {}
    exact_of: dict[str, int] = {}
    # the policy's optional hooks (see ``AfterRequest``, ``LoopEnd``, ``Undetermined``)
    after_request: AfterRequest | None = getattr(policy, "after_request", None)
    loop_end: LoopEnd | None = getattr(policy, "finish", None)
    judge: Undetermined | None = getattr(policy, "undetermined", None)
    provider_limit = profile.provider_limit()
    refusals: dict[int, RequestRejected] = {}  # the recording's, by the refused request's step
    unheard: ReplayStep | None = None  # the latest request, whose outcome the policy has not heard
    # what the replay knew at each step's first check (for ``judge``)
    situations: dict[int, Situation] = {}
    loop_ran = False  # a request was sent since the agent's loop last ended
    failed_at = 0  # the step in whose build-up the recording's compaction failed
    last_overhead = 0
    own = _OwnList()  # a compaction waiting for the next prompt, the loop's own changes
    response: int | None = None  # the replayed figure the next response answers
    # a policy whose compactor's outcome the recording knows better (it depends on what the
    # replay cannot see): where the agent compacted too, the recording's result is taken
    adopts = bool(getattr(policy, "adopts_recorded_compaction", False)) and has_messages
    unrecorded = session.info.get("unrecorded")

    def count_exact(item: ContextItem) -> int:
        assert exact is not None
        value = exact_of.get(item.id)
        if value is None:
            value = exact_of[item.id] = exact(item.message)
        return value

    context = _Context(count_exact if exact is not None else None)
    steps: list[ReplayStep] = []
    shown_later = _ShownLater(profile)
    decisions: list[Decision] = []
    results: list[ActionRecord] = []
    offset = 0
    step = 0
    skip_summary = False
    dropped_sizes: dict[str, int] = {}
    pending: list[Decision] = []  # decisions taken in the build-up of the next request
    adopt_recorded = False  # the replay compacts where the recording did: take its result
    skip_ids: set[str] = set()  # what a recorded compaction the replay did not make put in
    # an agent measuring on its latest usage (see the module's docstring)
    usage = _UsageMeasure(basis) if has_messages and basis in _USAGE_BASES else None
    skip_products = False  # a recorded compaction the replay did not make: what it put in
    checked: int | None = None  # the figure of a compaction decided in this build-up
    # the latest request was the agent's own summarisation call: its management decided for
    # the request that follows it, which is not managed again
    after_call = False

    # what the replay's latest compaction wrote, by kind (its summary; the request message it
    # made for the user's compaction): (its id, the step the compaction fired at, its
    # decision); the recording's own of a compaction at the same point stands in for it when
    # it comes
    own_products: dict[MessageKind, tuple[str, int, Decision]] = {}
    # what the recording's latest compaction kept that comes after it (its request message)
    late_retained: set[str] = set()

    def summary_written(result: PolicyResult, decision: Decision, at: int) -> None:
        if decision.kind == "compaction":
            own_products.clear()
            for written in _written_products(result):
                own_products[written.message.kind] = (written.id, at, decision)

    def act_between(
        result: PolicyResult,
        detail: str | None = None,
        before: int | None = None,
        trigger: str = "",
    ) -> None:
        """A policy result between two requests (the agent's loop ended, the user's command):
        it takes effect in the next request's build-up."""
        kind = _KIND_OF_ACTION.get(result.action, result.action.value)
        if before is None:
            before = result.details.get("decided_on", result.tokens_before)
        decision = Decision(
            step + 1,
            kind,
            before,
            result.tokens_after,
            detail or result.reason,
            trigger=trigger,
        )
        pending.append(decision)
        results.append(ActionRecord(step + 1, list(context.items), result))
        if kind in _REDUCING:
            context.replace(result.items)
            summary_written(result, decision, step)

    def adopt_product(recorded: ContextItem) -> None:
        """The recording's own summary (or request message) of the compaction the replay made
        at the same point takes the place of the replay's (whose summary the summarizer wrote
        without knowing it)."""
        own_product = own_products.pop(recorded.message.kind, None)
        if own_product is None:
            return
        product_id, at, decision = own_product
        if step - at > 1:
            return  # the replay's compaction was earlier: this one is of another compaction
        position = next((p for p, i in enumerate(context.items) if i.id == product_id), None)
        if position is None:
            return
        change = recorded.tokens - context.items[position].tokens
        context.swap(position, recorded)
        fixed = replace(
            decision,
            tokens_after=None if decision.tokens_after is None else decision.tokens_after + change,
        )
        for listed in (decisions, pending, *(s.decisions for s in steps[-2:])):
            for k, d in enumerate(listed):
                if d is decision:
                    listed[k] = fixed
        for kind, (other, made_at, made) in list(own_products.items()):
            if made is decision:
                own_products[kind] = (other, made_at, fixed)
        for state in steps[-2:]:
            if state.step == decision.step:
                state.request = max(0, state.request + change)
                state.tokens = max(0, state.tokens + change)
                state.peak = max(state.tokens, state.peak + change)
                state.zone = profile.zone(state.peak)

    def end_loop() -> None:
        nonlocal loop_ran
        if loop_end is None or not loop_ran:
            return
        loop_ran = False
        with context.with_overhead(last_overhead, has_messages) as items:
            for result in loop_end(items, profile, estimate):
                if result.fired:
                    act_between(result)

    def settle() -> tuple[ReplayStep | None, RequestRejected | None]:
        """How the latest request went, once: the replayed request, and the provider's refusal
        of it if it was refused (a recorded refusal that still stands, or a replayed request
        over ``Profile.provider_limit``)."""
        nonlocal unheard
        answered, unheard = unheard, None
        if answered is None:
            return None, None
        refused = _refusal_replayed(refusals.get(answered.step), answered, provider_limit)
        if usage is not None:
            usage.answered(refused is None)
        return answered, refused

    def hear(
        items: Sequence[ContextItem], figure: int, refused: RequestRejected | None
    ) -> list[PolicyResult]:
        """What the agent does once a request is answered (``figure``: its figure) or refused
        (``refused``): the policy's ``after_request``, its fired results."""
        if after_request is None:
            return []
        heard = after_request(items, profile, estimate, summarizer, figure=figure, refused=refused)
        return [r for r in heard if r.fired]

    def check_at_compaction(
        event: Compacted, answered: ReplayStep | None, refused: RequestRejected | None
    ) -> None:
        """The replayed agent's check where the recording compacted before a request (an agent
        measuring on its usage; before what the compaction put in): the user's compaction is
        made again; otherwise the policy hears how the latest request went, then decides on
        the agent's own figure (``manage``); if it does not compact, it sent the request this
        compaction answers, which no file shows: refused when over the provider's limit. Where
        it compacts, the recorded result is taken."""
        nonlocal checked, skip_products
        assert usage is not None
        at = step + 1
        figure = usage.measure(context.total)
        fired: list[PolicyResult] = []
        reactive: set[int] = set()  # the results of a refusal
        with context.with_overhead(figure - context.total, True) as items:
            if event.trigger == MANUAL:
                # (an empty replayed context holds nothing of what the user compacted: a
                # resumed run's file that starts with the compaction; its figure stands)
                decision = Decision(
                    at,
                    "compaction",
                    figure if context.items else event.tokens_before,
                    event.tokens_after,
                    f"{MANUAL}: the user's command (the recorded result taken)",
                    trigger=MANUAL,
                )
                pending.append(decision)
            else:
                if answered is not None:
                    fired = hear(items, answered.request, refused)
                    reactive.update(id(r) for r in fired if refused is not None)
                if not _compacts(fired):
                    fired += [
                        r
                        for r in policy.manage(_after(items, fired), profile, estimate, summarizer)
                        if r.fired
                    ]
                if not _compacts(fired) and refused is None:
                    refused = _unrecorded_refusal(figure, provider_limit)
                    if refused is not None:
                        more = hear(_after(items, fired), figure, refused)
                        reactive.update(map(id, more))
                        fired += more
            before = items[:] if fired else []
        if judge is not None:
            situations.setdefault(at, Situation(True, figure, refused))
        adopted = event.trigger == MANUAL
        for result in fired:
            kind = _KIND_OF_ACTION.get(result.action, result.action.value)
            results.append(ActionRecord(at, before, result))
            compaction = kind == "compaction"
            pending.append(
                Decision(
                    at,
                    kind,
                    result.details.get("decided_on", result.tokens_before),
                    event.tokens_after if compaction else result.tokens_after,
                    result.reason,
                    persistent=bool(result.details.get("persistent", True)),
                    figure=result.tokens_before if compaction else _figure(result),
                    trigger=REACTIVE if id(result) in reactive else "",
                )
            )
            adopted = adopted or compaction
            if not compaction and kind in _REDUCING and result.details.get("persistent", True):
                context.replace(result.items)
        if adopted:
            context.keep_only(event.retained_ids, event.keep_system)
            usage.compacted()
            checked = figure
        else:
            skip_products = True

    for raw in _acted_on(session):
        if isinstance(raw, MessageRow):
            rec = raw
            if not rec.sent_in_main:
                continue
            if skip_ids:
                message = session.body(rec.position)
                if message.id in skip_ids:
                    skip_ids.discard(message.id)
                    continue  # put in by a recorded compaction the replay did not make
            if skip_products and rec.kind in (MessageKind.SUMMARY, MessageKind.ATTACHMENT):
                continue  # the summary and context a compaction the replay did not make put in
            if skip_summary and rec.kind is MessageKind.SUMMARY:
                skip_summary = False
                # the recording's own compaction summary: the replay writes its own, unless it
                # compacted at the same point
                if MessageKind.SUMMARY in own_products:
                    summary = session.body(rec.position)
                    adopt_product(ContextItem(summary, estimate(summary), rec.position))
                continue
            message = session.body(rec.position)
            if late_retained and message.id in late_retained:
                late_retained.discard(message.id)
                if message.kind in own_products:
                    # the request message the recorded compaction kept: the replay made its own
                    adopt_product(ContextItem(message, estimate(message), rec.position))
                    continue
            if message.role is Role.USER and message.kind is MessageKind.MESSAGE:
                end_loop()  # the user's next message: the agent's loop had ended
                own.prompt_starts(context)
            if dropped_sizes and message.id in dropped_sizes:  # the body's id is the record's
                message = _undropped(message, dropped_sizes.pop(message.id))
                tokens = estimate(message)
            else:
                tokens = rec.estimate if reuse_estimates else estimate(message)
            item = ContextItem(message, tokens, rec.position)
            if message.role is Role.ASSISTANT and response is not None:
                # a response carries the figure of the request it answered, as replayed
                item = ContextItem(message, tokens, rec.position, response)
                response = None
            if message.kind is MessageKind.TOOL_RESULT:
                original = item
                admitted = policy.admit(item, context.items, profile, estimate)
                if admitted is not None and not admitted.fired and admitted.details.get("restored"):
                    item = _admitted_item(admitted, item)  # cut in the recording, not here
                if admitted is not None and admitted.fired:
                    item = _admitted_item(admitted, item)
                    kind = _KIND_OF_ACTION.get(admitted.action, admitted.action.value)
                    pending.append(
                        Decision(
                            step + 1,
                            kind,
                            admitted.tokens_before,
                            admitted.tokens_after,
                            admitted.reason,
                        )
                    )
                    results.append(ActionRecord(step + 1, [original], admitted))
                    if admitted.details.get("final_turn"):
                        pending.append(Decision(step + 1, "final_turn", detail=admitted.reason))
            context.append(item)
            if usage is not None:
                usage.appended(message, context.total)
            continue
        event = raw
        if isinstance(event, RequestSent):
            if event.thread != MAIN_THREAD:
                continue
            answered, heard_refusal = settle()
            step += 1
            loop_ran = True
            if what_if is not None and step == what_if.step:
                # the user's action in this build-up: its result is the context from here on
                pending.clear()
                _act_on(context, usage, what_if, pending)
                checked = None
            state = recorded_steps[step - 1] if step - 1 < len(recorded_steps) else None
            recorded_here = recorded_by_step.get(step, [])
            recorded_reduction, recorded_persistent = _recorded_reduction(state, recorded_here)
            recorded_tokens = state.tokens if state is not None else context.total
            recorded_peak = state.peak if state is not None else None
            preflight = preflights.get(step)
            if preflight is not None:
                recorded_tokens = recorded_peak = preflight.projection
            if usage is not None:
                # the agent's own figure before the request (its latest usage plus its
                # estimate since): what it compares with its threshold
                recorded_tokens = _request_figure(state, context.total)
                pre = usage.measure(context.total)
                overhead = pre - context.total
            elif has_messages:
                # the replayed messages, plus what the recording's figure holds beyond its own
                # messages (system prompt, tool schemas) when that figure was reported
                overhead = _unshown(state, basis)
                pre = context.total + overhead
            else:
                pre = max(0, recorded_tokens + offset + recorded_reduction)
                overhead = pre
            last_overhead = overhead
            manage_now = not after_call
            after_call = event.compaction
            with context.with_overhead(overhead, has_messages) as items:
                fired: list[PolicyResult] = []
                reactive: set[int] = set()  # the results of a refusal
                if checked is None:  # no compaction decided at a check in this build-up
                    if answered is not None:
                        fired = hear(items, answered.request, heard_refusal)
                        reactive.update(id(r) for r in fired if heard_refusal is not None)
                    if manage_now:
                        guard = preflight

                        def decide(
                            its: Sequence[ContextItem], guard: GuardEvaluated | None = guard
                        ) -> list[PolicyResult]:
                            return _manage(policy, its, profile, estimate, summarizer, guard)

                        work = _after(items, fired)
                        managed = own.manage(decide, context, work, overhead, has_messages)
                        fired += [r for r in managed if r.fired]
                if judge is not None:
                    situations.setdefault(step, Situation(has_messages, pre, heard_refusal))
                # what the fired results acted on, copied once one of them is recorded
                before: list[ContextItem] | None = None
                replayed_reduction = 0
                replayed_persistent = 0
                took_recorded = False  # the recording's compaction, for a policy that takes it
                waiting: tuple[PolicyResult, Decision] | None = None
                step_decisions: list[Decision] = list(pending)
                pending.clear()
                # a final turn the agent forced for another reason than its context (its turn
                # limit, a finished task): made again whatever the settings
                if not any(d.kind == "final_turn" for d in step_decisions):
                    step_decisions += [
                        Decision(step, d.kind, d.tokens_before, d.tokens_after, d.detail)
                        for d in recorded_here
                        if d.kind == "final_turn" and not forced_by_context(d.detail)
                    ][:1]
                if event.compaction and has_messages:
                    # the agent's own summarisation call: the recorded compaction answers it
                    adopted = _answer_to_compaction_call(step, recorded_here, fired, reactive)
                    if adopted is not None:
                        step_decisions.append(adopted)
                        fired = [r for r in fired if _KIND_OF_ACTION.get(r.action) != "compaction"]
                    adopt_recorded = adopted is not None
                adopt = (
                    not has_messages
                    and any(d.kind in _REDUCING for d in recorded_here)
                    and any(_KIND_OF_ACTION.get(r.action) in _REDUCING for r in fired)
                )
                if adopt:
                    # a log shows the figures but not the messages: where the replayed agent
                    # acts and the recorded one did too, the recorded path (prune, compaction,
                    # or both) is the best knowledge of what acting did
                    step_decisions += [
                        Decision(
                            step,
                            d.kind,
                            d.tokens_before,
                            d.tokens_after,
                            d.detail,
                            d.persistent,
                            trigger=d.trigger,
                            failed=d.failed,
                        )
                        for d in recorded_here
                        if d.kind in _REDUCING
                    ]
                    replayed_reduction, replayed_persistent = (
                        recorded_reduction,
                        recorded_persistent,
                    )
                for result in fired:
                    kind = _KIND_OF_ACTION.get(result.action, result.action.value)
                    if kind == "final_turn" and any(d.kind == kind for d in step_decisions):
                        continue  # one forced final turn per request
                    if adopt and kind in _REDUCING:
                        continue
                    persistent = bool(result.details.get("persistent", True))
                    failed_here = kind == "compaction" and failed_at == step
                    # the policy decided and its compactor failed (nothing to cut)
                    failed = failed_here or bool(result.details.get("failed"))
                    adopt_here = (
                        adopts
                        and kind == "compaction"
                        and any(d.kind == kind and not d.failed for d in recorded_here)
                    )
                    detail = result.reason
                    if adopt_here:
                        failed = False
                        detail += "; the recording compacted here: its result is taken from here on"
                    elif failed_here:
                        detail = f"{result.reason} ({FAILED_HERE})"
                    decision = Decision(
                        step,
                        kind,
                        result.details.get("decided_on", result.tokens_before),
                        None if failed else result.tokens_after,
                        detail,
                        persistent,
                        _figure(result),
                        failed=failed,
                        undetermined=_unrecorded(kind, result, recorded_here, unrecorded),
                        trigger=REACTIVE if id(result) in reactive else "",
                    )
                    step_decisions.append(decision)
                    if before is None:
                        before = items[:]  # a plain list (a slice copies fast)
                    results.append(ActionRecord(step, before, result))
                    if kind not in _REDUCING or failed or id(result) in own.view_only:
                        continue
                    if not persistent:
                        # a reduction for one request only (a pruned copy sent, the agent's
                        # list kept) leaves the context, and the step's figure, as they were
                        continue
                    if adopt_here:
                        took_recorded = True
                        own.awaiting.append(decision)
                    elif result.details.get("takes_effect") == "next_prompt":
                        waiting = (result, decision)
                    else:
                        saved = max(0, result.tokens_saved)
                        replayed_reduction += saved
                        replayed_persistent += saved
                        loop_only = bool(result.details.get("loop_only"))
                        if loop_only:
                            own.note_loop_only(result, items)
                        context.replace(result.items, same_list=loop_only)
                        summary_written(result, decision, step)
            if waiting is not None and not took_recorded:
                own.defer(waiting[0], waiting[1], context)
            if adopts and not took_recorded and _follows_unknown(recorded_here, step_decisions):
                took_recorded = True
            if took_recorded:
                _adopt_recorded(session, context, step, estimate, reuse_estimates)
            # the recording's own context from here on, with what it does not show
            unreduced = max(0, pre - replayed_reduction)
            tokens = context.total + overhead if took_recorded else unreduced
            if usage is not None:
                # the request's size: the replayed messages plus what the recorded request
                # held beyond the agent's estimate of its own (system prompt, tool schemas)
                tokens = max(0, context.total + recorded_tokens - _estimated(state))
                reduced = replayed_reduction > 0
                peak = checked if checked is not None else pre if reduced else tokens
                answer = state.usage if state is not None and not state.rejected else None
                usage.requested(tokens, context.total, None if answer is None else answer.output)
                checked = None
                skip_products = False
            else:
                # an agent that decides on its last request's figure never sent the context it
                # then acted on: its step's highest figure is the one it decided on
                decided = [r.details["decided_on"] for r in fired if "decided_on" in r.details]
                peak = max([tokens, *decided]) if decided else pre
            if own.awaiting:
                made_at = [
                    steps[d.step - 1].decisions for d in own.awaiting if d.step <= len(steps)
                ]
                own.fill_after(tokens, [step_decisions, decisions, *made_at])
            offset += recorded_persistent - replayed_persistent
            decisions.extend(step_decisions)
            # the recording's figure on the basis the replayed one is made on: with messages,
            # the agent's estimate of the recorded messages plus what the replay adds to its own
            # (whatever the session's figure counts them with: a recount by a tokenizer, say)
            request_recorded = (
                state.estimated + overhead
                if state is not None and has_messages and usage is None
                else recorded_tokens
            )
            if state is None:
                shown = recorded_shown = tokens
                shown_peak = max(peak, shown)
            else:
                # the session's own figure of the step, moved by what the replay changed, and
                # by what a forced final turn leaves out of the request it sends
                withheld = _withheld(fired) - _withheld_recorded(preflight, recorded_here)
                recorded_shown = state.tokens
                shown = max(0, recorded_shown + tokens - request_recorded - withheld)
                # its highest figure on that basis: the recording's highest moved alike where
                # both removed something (what the recording removed is best known); else the
                # replayed figure before what the replay removed, or the recording's highest
                # net of what it removed (which the replay kept)
                moved = shown - recorded_shown
                if recorded_reduction and any(
                    d.kind in _REDUCING and not d.failed for d in step_decisions
                ):
                    shown_peak = max(shown, state.peak + moved)
                else:
                    shown_peak = max(
                        shown + max(0, peak - tokens), state.peak - recorded_reduction + moved
                    )
                recorded_peak = state.peak
            replayed_step = ReplayStep(
                step=step,
                tokens=shown,
                estimated=context.total,
                exact=context.exact(),
                recorded=recorded_shown,
                origin=state.origin if state is not None else Origin.ESTIMATED,
                zone=profile.zone(shown_peak),
                messages=len(context.items),
                peak=shown_peak,
                recorded_peak=recorded_peak if recorded_peak is not None else pre,
                decisions=step_decisions,
                recorded_decisions=list(recorded_here),
                request=tokens,
                request_recorded=request_recorded,
                items=tuple(context.items) if what_if is not None else None,
            )
            shown_later.settle(replayed_step, decisions)
            if _after_measured_later(state, step_decisions, recorded_here):
                shown_later.wait(replayed_step)
            steps.append(replayed_step)
            unheard = steps[-1]
            if state is not None and state.usage is not None:
                response = tokens + _output_of(state.usage)
        elif isinstance(event, Compacted):
            if event.thread != MAIN_THREAD:
                pass
            elif event.failed:
                # the agent decided to compact here and its summary failed: a compaction the
                # replay makes at this point fails alike (the summarizer is not the agent's)
                failed_at = step + 1
            elif usage is not None:
                check_at_compaction(event, *settle())
            else:
                late_retained = set(event.retained_ids).difference(map(_ITEM_ID, context.items))
                if adopt_recorded:
                    # the replay compacts here too: what the agent did is known, so it is taken
                    # (what it kept, and what it put in after)
                    context.keep_only(event.retained_ids, event.keep_system)
                elif event.added_ids:
                    skip_ids.update(event.added_ids)
                else:
                    skip_summary = True
                if event.trigger == MANUAL and has_messages and not adopt_recorded:
                    # the user's command, not the agent's decision: the replay obeys it too
                    end_loop()
                    with context.with_overhead(last_overhead, has_messages) as items:
                        forced = policy.compact(items, profile, estimate, summarizer, force=True)
                        if forced.fired:
                            act_between(
                                forced,
                                f"{MANUAL}: the user's command ({forced.reason})",
                                steps[-1].request if steps else None,
                                MANUAL,
                            )
            adopt_recorded = False
        elif isinstance(event, RequestRejected):
            if event.thread == MAIN_THREAD:
                refusals[step] = event
        elif isinstance(event, ContextReset):
            if event.thread == MAIN_THREAD:
                context.reset_after(event.keep_through, event.keep_system)
        elif isinstance(event, ToolOutputChanged) and event.tokens is not None:
            if has_messages:
                if event.action is ToolOutputAction.DROPPED and event.message_id:
                    dropped_sizes[event.message_id] = event.tokens  # admitted again, above
            else:
                offset += _figures_only_output(event, step, offset, profile, pending)
    end_loop()  # the recording ends: the agent's last loop is over
    if has_messages:
        # what the agent decided after its last request: its recovery when the provider
        # refused it, and its turn's end for a policy that decides at every one
        answered, refused = settle()
        every_turn = getattr(policy, "decides_after_each_turn", False)
        with context.with_overhead(last_overhead, has_messages) as items:
            last: list[PolicyResult] = []
            if answered is not None and refused is not None:
                last += hear(items, answered.request, refused)
            if every_turn:
                last += own.manage(
                    lambda its: policy.manage(its, profile, estimate, summarizer),
                    context,
                    items,
                    last_overhead,
                    has_messages,
                )
            for result in (r for r in last if r.fired):
                kind = _KIND_OF_ACTION.get(result.action, result.action.value)
                failed_here = kind == "compaction" and failed_at == step + 1
                failed = failed_here or bool(result.details.get("failed"))
                pending.append(
                    Decision(
                        step + 1,
                        kind,
                        result.details.get("decided_on", result.tokens_before),
                        None if failed else result.tokens_after,
                        f"{result.reason} ({FAILED_HERE})" if failed_here else result.reason,
                        figure=_figure(result),
                        failed=failed,
                        undetermined=_unrecorded(
                            kind, result, recorded_by_step.get(step + 1, []), unrecorded
                        ),
                    )
                )
                results.append(ActionRecord(step + 1, list(items), result))
    if what_if is not None and what_if.step == step + 1:
        _act_on(context, usage, what_if, pending)  # at the live end: after all the rest
    live = _live_end(session, step, context, offset, has_messages, pending, profile)
    if live is not None:
        live.recorded_decisions = list(recorded_by_step.get(live.step, []))
        if what_if is not None:
            live.items = tuple(context.items)
        steps.append(live)
    decisions.extend(pending)
    undetermined: list[tuple[Decision, str]] = []
    if judge is not None:
        for d in recorded:
            why = judge(d, profile, situations.get(d.step) or Situation(has_messages))
            if why:
                undetermined.append((d, why))
    undetermined += _after_the_last_request(recorded, decisions, step)
    undetermined += _nothing_to_replay(recorded, undetermined, step, has_messages)
    unknown = {id(d) for d, _ in undetermined}
    determinable = [d for d in recorded if id(d) not in unknown]
    # a replayed decision at the step and of the kind of an undetermined one is not judged
    # either
    unjudged = {(d.step, d.kind) for d, _ in undetermined}
    judged = [d for d in decisions if (d.step, d.kind) not in unjudged]
    agreement, disagreements = compare(determinable, judged)
    _other_setting(disagreements, decisions, profile)
    _not_shown(disagreements, session)
    return ReplayResult(
        profile,
        steps,
        decisions,
        recorded,
        agreement,
        disagreements,
        results,
        list(context.items),
        undetermined,
    )


@dataclass
class _Deferred:
    """A compaction decided during a prompt, for the agent's own list: the running loop goes
    on with its list until the prompt ends."""

    items: list[ContextItem]
    count: int  # the context's length when it was decided
    generation: int  # the context's generation then (replaced since: superseded)
    decision: Decision  # its figure after comes when it applies


class _OwnList:
    """What an agent does to its own list and what its running loop does to the loop's alone:
    a compaction waiting for the next prompt (``takes_effect``), the agent's list meanwhile
    (it decides on that one), and the loop's own changes (``loop_only``, undone when the
    prompt ends)."""

    def __init__(self) -> None:
        self.deferred: _Deferred | None = None
        self.view: ContextList | None = None  # the agent's own list while one waits
        self.view_from = 0  # the loop's items it has taken
        self.view_of: _Deferred | None = None
        self.view_only: set[int] = set()  # results done to that list, not to the loop's
        self.undo: dict[str, ContextItem | None] = {}  # the loop's own changes, to undo
        self.awaiting: list[Decision] = []  # compactions whose figure after is the next request's

    def manage(
        self,
        manage: Callable[[Sequence[ContextItem]], list[PolicyResult]],
        context: _Context,
        items: Sequence[ContextItem],
        overhead: int,
        has_messages: bool,
    ) -> list[PolicyResult]:
        """What ``manage`` gives on the loop's list; while a compaction waits, on the agent's
        own list (kept from request to request), and what it does to it stays there."""
        deferred = self.deferred
        if deferred is None or deferred.generation != context.generation:
            self.view = None
            return manage(items)
        if self.view is None or self.view_of is not deferred:
            self.view, self.view_from, self.view_of = (
                ContextList(deferred.items),
                deferred.count,
                deferred,
            )
        view = self.view
        view.extend(context.items[self.view_from :])
        self.view_from = len(context.items)
        if overhead != 0:
            view.push_head(overhead_item(overhead, has_messages))
        try:
            results = manage(view)
        finally:
            if view.has_head:
                view.pop_head()
        for result in results:
            if result.fired and result.details.get("loop_only"):
                self.view = ContextList(i for i in result.items if i.id != OVERHEAD_ID)
                self.view_only.add(id(result))
        return results

    def defer(self, result: PolicyResult, decision: Decision, context: _Context) -> None:
        kept = [i for i in result.items if i.id != OVERHEAD_ID]
        self.deferred = _Deferred(kept, len(context.items), context.generation, decision)

    def note_loop_only(self, result: PolicyResult, before: Sequence[ContextItem]) -> None:
        """What a result made in the running loop's list only: the items it replaced come back
        when the prompt ends, the ones it added go (``replaced_at``: where they were)."""
        at = result.details.get("replaced_at")
        if isinstance(at, list):
            originals = {before[i].id: before[i] for i in at if 0 <= i < len(before)}
        else:
            originals = {item.id: item for item in before}
        for change in result.changes:
            if change.status is ItemStatus.ADDED:
                self.undo[change.id] = None
            elif change.id in originals and change.id not in self.undo:
                self.undo[change.id] = originals[change.id]

    def prompt_starts(self, context: _Context) -> None:
        """A new prompt: a compaction decided during the previous one takes effect, and what
        the running loop changed in its own list only is gone (the agent's list never had it)."""
        deferred, self.deferred = self.deferred, None
        self.view = None
        items: list[ContextItem] | None = None
        if deferred is not None and deferred.generation == context.generation:
            items = [*deferred.items, *context.items[deferred.count :]]
            self.awaiting.append(deferred.decision)
        if self.undo:
            undo, current = self.undo, context.items if items is None else items
            items = [kept for i in current if (kept := undo.get(i.id, i)) is not None]
            self.undo = {}
        if items is not None:
            context.replace(items)

    def fill_after(self, tokens: int, lists: Sequence[list[Decision]]) -> None:
        """The figure after the compactions that took effect at this request: its own."""
        for waiting in self.awaiting:
            for listed in lists:
                for k, d in enumerate(listed):
                    if d is waiting:
                        listed[k] = replace(d, tokens_after=tokens)
        self.awaiting.clear()


def _unrecorded(
    kind: str, result: PolicyResult, recorded_here: list[Decision], unrecorded: object
) -> str:
    """Why the recording cannot show this replayed decision, if it cannot: the policy says so,
    or the input does not record decisions of this kind that fail (a session file that keeps
    only the compactions that succeeded) and shows none here."""
    reason = result.details.get("undetermined")
    if reason:
        return str(reason)
    shown = any(d.kind == kind for d in recorded_here)
    if isinstance(unrecorded, dict) and kind in unrecorded and not shown:
        return str(unrecorded[kind])
    return ""


def _follows_unknown(recorded_here: list[Decision], replayed: list[Decision]) -> bool:
    """A compaction the recording shows without its cause (a refusal it does not record,
    say), which the replay did not make: followed, as nothing in these settings tells it would
    not have happened."""
    made = any(d.kind == "compaction" and not d.failed for d in replayed)
    return not made and any(
        d.kind == "compaction" and not d.failed and d.detail.startswith(TRIGGER_NOT_RECORDED)
        for d in recorded_here
    )


def _adopt_recorded(
    session: Session,
    context: _Context,
    step: int,
    estimate: Estimate,
    reuse_estimates: bool,
) -> None:
    """The recording's context at ``step``, keeping the replayed items it shares."""
    by_index = {i.index: i for i in context.items if i.index is not None}
    items = []
    for index in session.in_context(step):
        item = by_index.get(index)
        if item is None:
            message = session.body(index)
            tokens = session.record(index).estimate if reuse_estimates else estimate(message)
            item = ContextItem(message, tokens, index)
        items.append(item)
    context.replace(items)


def _act_on(
    context: _Context, usage: _UsageMeasure | None, what_if: WhatIfStart, pending: list[Decision]
) -> None:
    """The user's action of a what-if: its result is the replayed context from now on."""
    pending.append(what_if.decision())
    context.replace([i for i in what_if.result.items if i.id != OVERHEAD_ID])
    if usage is not None and what_if.result.action is Action.COMPACT:
        usage.compacted()  # no earlier usage describes the context now


def _live_end(
    session: Session,
    step: int,
    context: _Context,
    offset: int,
    has_messages: bool,
    pending: Sequence[Decision],
    profile: Profile,
) -> ReplayStep | None:
    """The build-up after the last request (``step``), when the session shows it as a step
    of its own: the session's figure there (the latest report plus what came since), moved by
    what the replay changed (the replayed messages against the recorded ones, by the agent's
    estimate; in a log of figures alone, ``offset``), with what the agent decided after its
    last request."""
    if not session.open_step_shown():
        return None
    state = session.live_state()
    if state.step != step + 1:
        return None
    change = context.total - state.estimated if has_messages else offset
    shown = max(0, state.tokens + change)
    here = [d for d in pending if d.step == state.step]
    reduced = any(d.kind in _REDUCING and not d.failed for d in here)
    peak = max(shown, state.peak) if reduced else shown
    return ReplayStep(
        step=state.step,
        tokens=shown,
        estimated=context.total,
        exact=context.exact(),
        recorded=state.tokens,
        origin=state.origin,
        zone=profile.zone(peak),
        messages=len(context.items),
        peak=peak,
        recorded_peak=state.peak,
        decisions=here,
        request=shown,
        request_recorded=state.tokens,
        live_end=True,
        sent=state.peak_reported is not None or state.origin is not Origin.ANCHORED,
    )


class _ShownLater:
    """A step whose session figure is the after of a compaction the replay made there too, as
    the agent measured it at a later request (OpenCode: the next ordinary request's prompt):
    its replayed figure, and the replayed compaction's after, are that figure moved by what
    the replay changed at the next request (the replay's context at the step holds the
    summary that the recording writes after it, and that its figure already counts)."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self.waiting: ReplayStep | None = None

    def wait(self, replayed: ReplayStep) -> None:
        self.waiting = replayed

    def settle(self, following: ReplayStep, decisions: list[Decision]) -> None:
        waiting, self.waiting = self.waiting, None
        if waiting is None:
            return
        was = waiting.tokens
        waiting.tokens = max(0, waiting.recorded + following.tokens - following.recorded)
        waiting.peak = max(waiting.tokens, waiting.peak + waiting.tokens - was)
        waiting.zone = self.profile.zone(waiting.peak)
        for listed in (waiting.decisions, decisions):
            for k, d in enumerate(listed):
                if d.step == waiting.step and d.kind == "compaction" and not d.failed:
                    listed[k] = replace(d, tokens_after=waiting.tokens)


def _after_measured_later(
    state: StepState | None, replayed: Sequence[Decision], recorded_here: Sequence[Decision]
) -> bool:
    """Whether the step's session figure is the after of a recorded compaction that the
    replay made at the same step (see ``_ShownLater``)."""
    if state is None or state.reported_label != COMPACTION_LABEL:
        return False
    return any(d.kind == "compaction" and not d.failed for d in replayed) and any(
        d.kind == "compaction" and not d.failed for d in recorded_here
    )


def _withheld(fired: Sequence[PolicyResult]) -> int:
    """What a final turn the replayed agent forced leaves out of the request it then sends
    (``withheld``: ai-agent's ``new``, which enforcing drops)."""
    return max(
        (
            value
            for r in fired
            if r.action is Action.FINAL_TURN
            and isinstance(value := r.details.get("withheld", 0), int)
        ),
        default=0,
    )


def _withheld_recorded(preflight: GuardEvaluated | None, recorded_here: Sequence[Decision]) -> int:
    """What the final turn the recording forced at this preflight left out of the request it
    sent (the guard's ``new``, as logged at the decision)."""
    if preflight is None or preflight.status is not GuardStatus.FINAL:
        return 0  # (a final turn a refused tool output forced: the preflight let it go)
    forced = any(d.kind == "final_turn" and forced_by_context(d.detail) for d in recorded_here)
    return preflight.new if forced else 0


def _output_of(usage: Usage) -> int:
    """What a response added to its request's figure, by the provider's usage."""
    if usage.total:
        return max(0, usage.total - usage.prompt_tokens)
    return usage.output


def _figures_only_output(
    event: ToolOutputChanged, step: int, offset: int, profile: Profile, pending: list[Decision]
) -> int:
    """A tool output the recording dropped or cut, in a log of figures alone: what the
    replayed agent does with it (into ``pending``), and how much more of it than the recording
    kept stays in the replayed context. A change the budget caused (it gives the figure it
    would have made) is decided again against the limit; one made for the output's size alone
    is made again."""
    tokens = event.tokens or 0
    kept = 0 if event.action is ToolOutputAction.DROPPED else (event.tokens_after or 0)
    if event.projected_tokens is None:
        if event.action is not ToolOutputAction.DROPPED:
            detail = "cut for its size, as recorded"
            pending.append(Decision(step + 1, "truncated", tokens, event.tokens_after, detail))
        return 0
    projected = event.projected_tokens + offset
    if not profile.over_threshold(projected):
        return tokens - kept  # it fitted: the whole output stays in the context
    detail = f"projected {projected:,} over the limit {profile.threshold():,}"
    if event.action is ToolOutputAction.DROPPED:
        pending.append(Decision(step + 1, "dropped", projected, None, detail))
        if not any(d.kind == "final_turn" for d in pending):  # one per request
            pending.append(Decision(step + 1, "final_turn", projected, None, detail))
    else:
        pending.append(Decision(step + 1, "truncated", tokens, event.tokens_after, detail))
    return 0


# Reasons a final turn is forced for that are no context management (a turn limit, a
# finished task, a user's stop: ai-agent's names), made whatever the context's settings.
NOT_BY_CONTEXT = frozenset(
    {
        "max_turns",
        "task_status_completed",
        "task_status_only",
        "retry_exhaustion",
        "user_stop",
        "incomplete_final_report",
        "final_report_attempt",
        "xml_wrapper_as_tool",
    }
)


def forced_by_context(reason: str) -> bool:
    """Whether a final turn forced for ``reason`` was the agent's context management."""
    return reason not in NOT_BY_CONTEXT


def _preflights(session: Session) -> dict[int, GuardEvaluated]:
    """Per step, the evaluation the agent's guard logged at the preflight of the request:
    the last one that decided (``ok`` or ``final``; a skipped provider did not take the
    request, and an evaluation after enforcing decides nothing), else the last one without a
    tool output in it."""
    decided: dict[int, GuardEvaluated] = {}
    other: dict[int, GuardEvaluated] = {}
    for index, event in session.events_of(GuardEvaluated):
        if not isinstance(event, GuardEvaluated) or event.thread != MAIN_THREAD:
            continue
        step = session.step_at(index)
        if event.status in (GuardStatus.OK, GuardStatus.FINAL):
            decided[step] = event
        elif event.extra == 0:
            other[step] = event
    return {**other, **decided}


def _manage(
    policy: Policy,
    items: Sequence[ContextItem],
    profile: Profile,
    estimate: Estimate,
    summarizer: Summarizer,
    preflight: GuardEvaluated | None,
) -> list[PolicyResult]:
    """The policy's decision before a request; measured on the guard's logged projection, it
    is given that evaluation too (the counters forcing a final turn keeps, the tool schemas
    whose size the guard's rule lets an overflow within)."""
    if preflight is None:
        return policy.manage(items, profile, estimate, summarizer)
    manage: Any = policy.manage  # a guard policy's manage takes the logged evaluation
    result: list[PolicyResult] = manage(items, profile, estimate, summarizer, recorded=preflight)
    return result


# the events replay acts on, besides the messages
_ACTED_ON: tuple[type[Event], ...] = (
    RequestSent,
    RequestRejected,
    Compacted,
    ContextReset,
    ToolOutputChanged,
)


def _acted_on(session: Session) -> Iterator[MessageRow | Event]:
    """The session's messages (as rows) and the events replay acts on, in order; the other
    events (usage reports, figures, log lines: most of a long session) are not made."""
    events = session.events_of(*_ACTED_ON)
    upcoming = next(events, None)
    for rec in session.message_rows():
        while upcoming is not None and upcoming[0] < rec.event_index:
            yield upcoming[1]
            upcoming = next(events, None)
        yield rec
    while upcoming is not None:
        yield upcoming[1]
        upcoming = next(events, None)


def _unshown(state: StepState | None, basis: str = "request") -> int:
    """What a reported figure holds beyond the agent's estimate of the recorded messages: the
    request's own figure (``basis`` "request"; at a step without a figure of its own, what the
    figure it is anchored on held: the system prompt and tool schemas are still there), or the
    latest figure reported before the request, as of when it was reported (``basis`` "anchor":
    the agent's estimate of what came since is then the replayed messages'; the difference may
    be negative)."""
    if state is None:
        return 0
    if basis == "anchor":
        return 0 if state.anchor is None else state.anchor - state.anchor_estimated
    if state.reported is not None:
        return max(0, state.reported - state.estimated)
    if state.anchor is not None:
        return max(0, state.anchor - state.anchor_estimated)
    return 0


def _refusal_replayed(
    recorded: RequestRejected | None, answered: ReplayStep, limit: int | None
) -> RequestRejected | None:
    """The provider's refusal of a replayed request, if it is refused: a recorded refusal
    stands while the replayed request would be refused too (over the provider's limit by the
    provider's own count moved by what the replay changed, or, no limit given, no smaller
    than the recorded request); a request the recording shows answered is refused when the
    profile gives the provider's limit (``limit``) and the replayed request is over it."""
    change = answered.request - answered.request_recorded
    if recorded is not None:
        if recorded.limit is not None and recorded.tokens is not None:
            return recorded if recorded.tokens + change > recorded.limit else None
        return recorded if change >= 0 else None
    return _over_the_limit(answered.request, limit, "the replayed request")


def _unrecorded_refusal(figure: int, limit: int | None) -> RequestRejected | None:
    """The refusal of a request no file shows (the one a recorded compaction answered), by
    its size: the agent's own figure for it (``figure``) over the provider's limit."""
    return _over_the_limit(figure, limit, "a request no file shows")


def _over_the_limit(tokens: int, limit: int | None, what: str) -> RequestRejected | None:
    if limit is None or tokens <= limit:
        return None
    return RequestRejected(
        reason=f"{what}: {tokens:,} tokens > {limit:,} maximum", tokens=tokens, limit=limit
    )


def _compacts(results: Sequence[PolicyResult]) -> bool:
    return any(_KIND_OF_ACTION.get(r.action) == "compaction" for r in results)


def _after(items: Sequence[ContextItem], fired: Sequence[PolicyResult]) -> Sequence[ContextItem]:
    """The context once ``fired`` took effect: the latest lasting reduction's result."""
    for result in reversed(fired):
        kind = _KIND_OF_ACTION.get(result.action)
        if kind in _REDUCING and result.details.get("persistent", True):
            return result.items
    return items


def _estimated(state: StepState | None) -> int:
    return state.estimated if state is not None else 0


def _request_figure(state: StepState | None, fallback: int) -> int:
    """The recorded size of a request: its reported prompt, or, for a request the provider
    refused, the size the refusal gave (else the step's anchored figure)."""
    if state is None:
        return fallback
    return state.peak if state.rejected else state.tokens


_USAGE_BASES = ("usage", "usage+estimate")


class _UsageMeasure:
    """The figure an agent that measures on its latest usage compares before a request
    (``Profile.measure_basis``): the replayed size of the latest answered request plus its
    output, plus ("usage+estimate") the agent's estimate of what the replay added after the
    answer's first record; with no answered request yet, its estimate of everything. A
    refused request changes nothing: the agent still measures on the latest answer."""

    def __init__(self, basis: str) -> None:
        self.counts_since = basis == "usage+estimate"
        self.anchor: int | None = None
        self.base = 0  # the replayed context's estimate that the anchor covers
        # the latest request until its outcome is known: its size plus its answer's output,
        # and the context's estimate when it was sent (and at its answer's first record)
        self._sent: tuple[int, int] | None = None
        self._first: int | None = None

    def measure(self, total: int) -> int:
        """The agent's own figure for the context now (its estimate of the replayed ``total``
        messages where no usage covers them)."""
        if self.anchor is None:
            return total
        if self.counts_since:
            return self.anchor + total - self.base
        return self.anchor

    def appended(self, message: Message, total: int) -> None:
        if self._sent is not None and self._first is None and message.role is Role.ASSISTANT:
            self._first = total  # the answer's first record is covered by its usage

    def requested(self, tokens: int, total: int, output: int | None) -> None:
        """A request of ``tokens`` was sent with a context estimated at ``total``; its answer's
        output, when the recording shows it answered."""
        self._sent = (tokens + output, total) if output is not None else None
        self._first = None

    def answered(self, answered: bool) -> None:
        """The outcome of the latest request: answered (its usage is the anchor), or not."""
        sent, first = self._sent, self._first
        self._sent = self._first = None
        if answered and sent is not None:
            self.anchor = sent[0]
            self.base = first if first is not None else sent[1]

    def compacted(self) -> None:
        """The context was compacted: no earlier usage describes it."""
        self.anchor = None


_OVERHEAD_TEXT = {
    True: "(context the transcript does not show: system prompt, tool schemas)",
    False: "(the conversation, which this log does not show)",
}
_OVERHEAD_MESSAGES: dict[bool, Message] = {}


def overhead_item(overhead: int, has_messages: bool) -> ContextItem:
    """What a replayed figure holds beyond the replayed messages, as one META item."""
    message = _OVERHEAD_MESSAGES.get(has_messages)
    if message is None:
        message = _OVERHEAD_MESSAGES[has_messages] = Message(
            id=OVERHEAD_ID,
            role=Role.SYSTEM if has_messages else Role.USER,
            kind=MessageKind.META,
            parts=(Part(type=PartType.TEXT, text=_OVERHEAD_TEXT[has_messages]),),
        )
    return ContextItem(message, overhead)


def with_overhead(items: list[ContextItem], overhead: int, has_messages: bool) -> list[ContextItem]:
    """A copy of ``items`` with the overhead item first (when there is one)."""
    if overhead == 0:
        return list(items)
    return [overhead_item(overhead, has_messages), *items]


def _answer_to_compaction_call(
    step: int, recorded_here: list[Decision], fired: list[PolicyResult], reactive: set[int]
) -> Decision | None:
    """At the agent's own summarisation call, the recorded compaction that answers it, as the
    replay's decision: always when the user asked for it (the user's decision,
    made again whatever the settings), else when the replayed policy compacts here too. Its
    figures are the recorded ones: the recording shows what compacting did."""
    recorded = next((d for d in recorded_here if d.kind == "compaction"), None)
    if recorded is None:
        return None
    by_user = recorded.detail == MANUAL
    acted = next((r for r in fired if _KIND_OF_ACTION.get(r.action) == "compaction"), None)
    if not by_user and acted is None:
        return None
    return Decision(
        step,
        "compaction",
        recorded.tokens_before,
        recorded.tokens_after,
        recorded.detail,
        figure=None if by_user or acted is None else _figure(acted),
        trigger=MANUAL if by_user else REACTIVE if id(acted) in reactive else "",
        failed=recorded.failed,
    )


def _figure(result: PolicyResult) -> int | None:
    value = result.details.get("figure")
    return value if isinstance(value, int) else None


_PRODUCTS = (MessageKind.SUMMARY, MessageKind.META)


def _written_products(result: PolicyResult) -> list[ContextItem]:
    """What a compaction wrote that the recording's own compaction writes too: its summary
    and its request message (the last of each it added)."""
    added = {c.id for c in result.changes if c.status is ItemStatus.ADDED}
    found: dict[MessageKind, ContextItem] = {}
    for item in result.items:
        if item.id in added and item.message.kind in _PRODUCTS:
            found[item.message.kind] = item
    return list(found.values())


def _admitted_item(result: PolicyResult, original: ContextItem) -> ContextItem:
    """The admitted output as it enters the context (``admit``'s result holds it alone)."""
    if not result.items:
        return original
    item = result.items[0]
    return ContextItem(item.message, item.tokens, original.index)


def _undropped(message: Message, tokens: int) -> Message:
    """A recorded tool output that the agent dropped, restored at its recorded size so the
    replayed policy can decide again (its text is unknown: a placeholder of that size)."""
    text = "(tool output the recording dropped; its content is unknown) " + "x" * (tokens * 4)
    first = message.parts[0] if message.parts else None
    part = Part(
        type=PartType.TOOL_RESULT,
        text=text,
        tool_name=first.tool_name if first else None,
        call_id=first.call_id if first else None,
    )
    return message.model_copy(update={"parts": (part,)})


def _recorded_reduction(state: StepState | None, recorded_here: list[Decision]) -> tuple[int, int]:
    """How much the recording's own prunes and compactions removed in this step's build-up
    (all of it, and the part that persists to later steps)."""
    if state is None:
        return 0, 0
    reducing = [d for d in recorded_here if d.kind in _REDUCING]
    if not reducing:
        return 0, 0
    total = max(0, state.peak - state.tokens)
    return total, total if any(d.persistent for d in reducing) else 0


def recorded_decisions(session: Session) -> list[Decision]:
    """What the agent did, as recorded: compactions, applied prunes, drops, final turns."""
    out: list[Decision] = []
    for index, event in session.events_of(Compacted, Pruned, FinalTurnForced, ToolOutputChanged):
        if isinstance(event, Compacted):
            if event.thread == MAIN_THREAD:
                # a failed attempt is a decision too: the agent decided, its summary failed
                detail = (
                    f"{event.trigger} (failed: {event.error})" if event.failed else event.trigger
                )
                out.append(
                    Decision(
                        session.step_at(index),
                        "compaction",
                        event.tokens_before,
                        None if event.failed else event.tokens_after,
                        detail,
                        trigger=event.trigger,
                        failed=event.failed,
                    )
                )
        elif isinstance(event, Pruned):
            if event.applied:
                out.append(
                    Decision(
                        session.step_at(index),
                        "prune",
                        event.tokens_before,
                        event.tokens_after,
                        event.reason,
                        event.persistent,
                    )
                )
        elif isinstance(event, FinalTurnForced):
            out.append(
                Decision(
                    session.step_at(index),
                    "final_turn",
                    event.projected_tokens,
                    event.limit_tokens,
                    event.reason,
                )
            )
        elif isinstance(event, ToolOutputChanged):
            kind = "dropped" if event.action is ToolOutputAction.DROPPED else "truncated"
            out.append(
                Decision(
                    session.step_at(index), kind, event.tokens, event.tokens_after, event.tool or ""
                )
            )
    return out


def _other_setting(
    disagreements: list[dict[str, Any]], decisions: Sequence[Decision], profile: Profile
) -> None:
    """Say why at the first difference, when it is a decision the replay alone made before it
    had moved away from the recording: the replayed figure is then the recording's own, and
    the agent, at that figure, did not act. Either these settings are not the recording's, or
    the recording ran under others at that point (a resumed run can be given other settings)."""
    if not disagreements:
        return
    first = disagreements[0]
    if first["recorded"] or not first["replayed"]:
        return
    decision = next(
        (d for d in decisions if d.step == first["step"] and d.tokens_before is not None), None
    )
    if decision is None or decision.tokens_before is None:
        return
    figure = decision.tokens_before
    first["reason"] = (
        f"the recording's own figure here ({figure:,}) reaches the replayed limit "
        f"({profile.threshold():,}) and the agent did not act: its limit at this step was above "
        f"{figure:,} (a run resumed with other settings changes it mid-run)"
    )


def _after_the_last_request(
    recorded: Sequence[Decision], replayed: Sequence[Decision], last: int
) -> list[tuple[Decision, str]]:
    """Final turns the recording forced after its last request that replay did not: no request
    follows them, so no preflight of the replayed agent decides them."""
    made = {d.step for d in replayed if d.kind == "final_turn"}
    why = "decided after the recording's last request: no request to replay it at"
    return [
        (d, why)
        for d in recorded
        if d.kind == "final_turn" and d.step > last and d.step not in made
    ]


NOTHING_TO_REPLAY = (
    "the input holds neither a request nor a message: no context to replay the decision from "
    "(read it with the run's other files: --merge)"
)


def _nothing_to_replay(
    recorded: Sequence[Decision],
    known: Sequence[tuple[Decision, str]],
    requests: int,
    has_messages: bool,
) -> list[tuple[Decision, str]]:
    """Every recorded decision, when the input shows no request and no message (a log of the
    agent's decisions alone): replay has nothing to decide them from."""
    if requests or has_messages:
        return []
    seen = {id(d) for d, _ in known}
    return [(d, NOTHING_TO_REPLAY) for d in recorded if id(d) not in seen]


def _not_shown(disagreements: list[dict[str, Any]], session: Session) -> None:
    """Say why at each decision only replay made, when the input says it cannot show the
    agent's context management (a stream of messages only): the agent's own decisions are not
    in it, so whether the agent acted there cannot be known from it."""
    note = session.info.get("context_note")
    if not isinstance(note, str) or not note:
        return
    for entry in disagreements:
        if not entry["recorded"]:
            entry["reason"] = f"this input cannot show whether the agent acted here: {note}"


def compare(
    recorded: Sequence[Decision], replayed: Sequence[Decision]
) -> tuple[float, list[dict[str, Any]]]:
    """The share of recorded decisions reproduced at the same step, and every difference (a
    replayed decision a recording cannot show, ``undetermined``, is none)."""

    def key(d: Decision) -> tuple[int, str]:
        return d.step, d.kind

    remaining: dict[tuple[int, str], int] = {}
    for d in replayed:
        remaining[key(d)] = remaining.get(key(d), 0) + 1
    matched = 0
    for d in recorded:
        if remaining.get(key(d), 0) > 0:
            remaining[key(d)] -= 1
            matched += 1
    agreement = matched / len(recorded) if recorded else 1.0
    by_step: dict[int, tuple[list[str], list[str]]] = {}
    for d in recorded:
        by_step.setdefault(d.step, ([], []))[0].append(d.kind)
    for d in replayed:
        if not d.undetermined:  # a recording cannot show it: not a difference
            by_step.setdefault(d.step, ([], []))[1].append(d.kind)
    disagreements = [
        {"step": step, "recorded": sorted(rec), "replayed": sorted(rep)}
        for step, (rec, rep) in sorted(by_step.items())
        if sorted(rec) != sorted(rep)
    ]
    return agreement, disagreements
