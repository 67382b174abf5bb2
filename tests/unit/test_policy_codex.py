"""Codex's policy (transcripts.md 2.3-2.4): auto-compaction into the user's messages + summary."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctx_inspect.agents.codex.policy import (
    COMPACT_USER_MESSAGE_MAX_TOKENS,
    POLICY,
    SUMMARY_PREFIX,
    approx_tokens,
    codex_figure,
    truncate_to,
)
from ctx_inspect.agents.codex.profile import CodexProfile
from ctx_inspect.cli import main
from ctx_inspect.core.model import Message, MessageKind, Part, PartType, Role
from ctx_inspect.core.policies import policy_for
from ctx_inspect.core.policies.base import ContextItem, ItemStatus, full_changes

PROFILE = CodexProfile()


def estimate(message: Message) -> int:
    return PROFILE.estimate(message)


def text(
    role: Role, mid: str, body: str = "hi", kind: MessageKind = MessageKind.MESSAGE
) -> Message:
    return Message(id=mid, role=role, kind=kind, parts=(Part(type=PartType.TEXT, text=body),))


def output(mid: str) -> Message:
    return Message(
        id=mid,
        role=Role.TOOL,
        kind=MessageKind.TOOL_RESULT,
        parts=(Part(type=PartType.TOOL_RESULT, text="ls output", call_id=mid),),
    )


def item(message: Message, tokens: int | None = None) -> ContextItem:
    return ContextItem(message, estimate(message) if tokens is None else tokens)


class FakeSummarizer:
    def __init__(self, summary: str = "we listed files") -> None:
        self.summary = summary
        self.calls: list[tuple[list[Message], int]] = []

    def summarize(self, messages: Sequence[Message], budget_tokens: int) -> str:
        self.calls.append((list(messages), budget_tokens))
        return self.summary


def rollout(last_tokens: int = 100) -> list[ContextItem]:
    return [
        item(text(Role.DEVELOPER, "dev", "<permissions instructions>")),
        item(text(Role.USER, "agents", "# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>")),
        item(text(Role.USER, "env", "<environment_context>cwd=/repo</environment_context>")),
        item(text(Role.USER, "u1", "list the files")),
        item(text(Role.ASSISTANT, "a1", "running ls")),
        item(output("o1")),
        item(text(Role.USER, "u2", "now fix the bug")),
        item(text(Role.ASSISTANT, "a2", "done"), last_tokens),
    ]


def test_registered() -> None:
    assert policy_for("codex") is POLICY


def test_auto_compaction_when_the_count_reaches_the_limit() -> None:
    assert PROFILE.threshold() == 244_800
    base = sum(i.tokens for i in rollout(0))
    assert POLICY.manage(rollout(244_799 - base), PROFILE, estimate, FakeSummarizer()) == []
    (result,) = POLICY.manage(rollout(244_800 - base), PROFILE, estimate, FakeSummarizer())
    assert result.fired and result.details["trigger"] == "auto"
    limited = PROFILE.model_copy(update={"model_auto_compact_token_limit": 1_000})
    assert POLICY.manage(rollout(1_000 - base), limited, estimate, FakeSummarizer())


def test_replacement_history_is_initial_context_user_messages_and_summary() -> None:
    summarizer = FakeSummarizer()
    items = rollout()
    result = POLICY.compact(items, PROFILE, estimate, summarizer, force=True)
    assert [i.id for i in result.items][:5] == ["dev", "agents", "env", "u1", "u2"]
    summary = result.items[-1].message
    assert summary.role is Role.USER and summary.kind is MessageKind.SUMMARY
    assert summary.text == SUMMARY_PREFIX + "\nwe listed files"
    assert len(result.items) == 6
    status = {c.id: c.status for c in full_changes(items, result)}
    assert status["a1"] is ItemStatus.SUMMARIZED and status["o1"] is ItemStatus.SUMMARIZED
    assert status["u1"] is ItemStatus.KEPT and status["env"] is ItemStatus.KEPT
    assert result.changes[-1].status is ItemStatus.ADDED
    assert [m.id for m in summarizer.calls[0][0]] == ["u1", "a1", "o1", "u2", "a2"]


def test_earlier_summaries_are_not_carried_over() -> None:
    first = POLICY.compact(rollout(), PROFILE, estimate, FakeSummarizer("one"), force=True)
    more = [*first.items, item(text(Role.USER, "u3", "and the tests"))]
    second = POLICY.compact(more, PROFILE, estimate, FakeSummarizer("two"), force=True)
    texts = [i.message.text for i in second.items]
    assert texts[-1] == SUMMARY_PREFIX + "\ntwo"
    assert sum(t.startswith(SUMMARY_PREFIX) for t in texts) == 1
    assert [i.id for i in second.items][3:6] == ["u1", "u2", "u3"]


def test_user_messages_newest_first_within_20000_tokens() -> None:
    assert COMPACT_USER_MESSAGE_MAX_TOKENS == 20_000
    items = [
        item(text(Role.USER, "oldest", "o" * 4_000)),
        item(text(Role.USER, "big", "b" * 68_000)),  # 17,000 tokens
        item(text(Role.USER, "mid", "m" * 12_000)),  # 3,000
        item(text(Role.ASSISTANT, "a", "ok")),
        item(text(Role.USER, "new", "n" * 4_000)),  # 1,000
    ]
    result = POLICY.compact(items, PROFILE, estimate, FakeSummarizer(), force=True)
    assert [i.id for i in result.items][:3] == ["big", "mid", "new"]
    status = {c.id: c.status for c in full_changes(items, result)}
    assert status["oldest"] is ItemStatus.SUMMARIZED
    assert status["big"] is ItemStatus.TRUNCATED
    assert status["mid"] is ItemStatus.KEPT
    cut = result.items[0].message.text
    assert approx_tokens(cut.split("…")[0]) + approx_tokens(cut.split("…")[-1]) == 16_000
    assert "…" in cut and "tokens truncated" in cut


def test_images_are_not_carried_over() -> None:
    with_image = Message(
        id="pic",
        role=Role.USER,
        parts=(
            Part(type=PartType.IMAGE, media_type="image/png", data_bytes=50_000),
            Part(type=PartType.TEXT, text="what is this?"),
        ),
    )
    items = [item(with_image), item(text(Role.ASSISTANT, "a", "a cat"))]
    result = POLICY.compact(items, PROFILE, estimate, FakeSummarizer(), force=True)
    assert result.items[0].message.parts == (Part(type=PartType.TEXT, text="what is this?"),)
    assert result.changes[0].status is ItemStatus.TRUNCATED


def test_not_over_the_limit_and_no_prune_or_truncation() -> None:
    items = rollout()
    assert not POLICY.compact(items, PROFILE, estimate, FakeSummarizer()).fired
    assert not POLICY.prune(items, PROFILE, estimate, force=True).fired
    assert not POLICY.truncate(items, PROFILE, estimate, force=True).fired
    assert POLICY.admit(items[5], items[:5], PROFILE, estimate) is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=30_000), min_size=1, max_size=8))
def test_user_message_budget_properties(sizes: list[int]) -> None:
    items = [item(text(Role.USER, f"u{k}", "€" * size)) for k, size in enumerate(sizes)]
    result = POLICY.compact(items, PROFILE, estimate, FakeSummarizer(), force=True)
    kept = [i for i in result.items if i.message.kind is not MessageKind.SUMMARY]
    spent = sum(approx_tokens(re.sub(r"…\d+ tokens truncated…", "", i.message.text)) for i in kept)
    assert spent <= COMPACT_USER_MESSAGE_MAX_TOKENS
    assert kept[-1].id == f"u{len(sizes) - 1}"  # the newest is always carried over
    ids = [i.id for i in kept]
    assert ids == sorted(ids, key=lambda x: int(x[1:]))  # in the original order
    if sum(approx_tokens("€" * size) for size in sizes) <= COMPACT_USER_MESSAGE_MAX_TOKENS:
        assert len(kept) == len(sizes)
    assert truncate_to("x" * 10, 100) == "x" * 10


def test_codex_compares_its_figure_before_recording_a_new_user_turn() -> None:
    items = rollout()
    turn = [
        item(text(Role.DEVELOPER, "mode", "<collaboration_mode>Default</collaboration_mode>")),
        item(text(Role.USER, "u3", "and now the tests"), 900),
    ]
    # Codex checks before a turn, then records the user's message and its context updates
    assert codex_figure([*items, *turn]) == codex_figure(items) == sum(i.tokens for i in items)
    # what came after the model's last item in the turn (a tool output) counts
    tools = [item(text(Role.ASSISTANT, "a3", "running")), item(output("o3"), 5_000)]
    assert codex_figure([*items, *tools]) == sum(i.tokens for i in [*items, *tools])
    limited = PROFILE.model_copy(update={"model_auto_compact_token_limit": 1_000})
    base = sum(i.tokens for i in rollout(0))
    below = rollout(999 - base)
    assert POLICY.manage([*below, *turn], limited, estimate, FakeSummarizer()) == []
    (fired,) = POLICY.manage(rollout(1_000 - base), limited, estimate, FakeSummarizer())
    assert fired.details["figure"] == 1_000
    assert fired.reason.startswith("1,000 ≥ auto-compact limit 1,000")


FIXTURES = Path(__file__).parents[1] / "data" / "codex"


def replay_json(capsys: pytest.CaptureFixture[str], name: str, *sets: str) -> dict[str, Any]:
    args = [part for s in sets for part in ("--set", s)]
    assert main(["replay", "--json", *args, str(FIXTURES / name)]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


def test_replay_reproduces_a_preturn_compaction_at_resume(
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = replay_json(
        capsys, "resume_preturn_compact.jsonl", "model_auto_compact_token_limit=50000"
    )
    assert data["agreement"] == 1.0 and data["disagreements"] == []
    (compaction,) = data["compactions"]
    assert (compaction["step"], compaction["before_tokens"], compaction["after_tokens"]) == (
        4,
        57_310,
        5_480,
    )
    # before the new turn Codex compared the last total, 57,000, with 50,000
    assert data["curve"][3]["request"] == 57_000
    above = replay_json(
        capsys, "resume_preturn_compact.jsonl", "model_auto_compact_token_limit=57001"
    )
    assert above["agreement"] == 0.0
    assert above["disagreements"] == [{"step": 4, "recorded": ["compaction"], "replayed": []}]


def test_replay_makes_the_users_compaction_again(capsys: pytest.CaptureFixture[str]) -> None:
    data = replay_json(capsys, "compaction.jsonl")
    manual = [c for c in data["compactions"] if c["trigger"] == "manual"]
    assert [(c["step"], c["before_tokens"], c["after_tokens"]) for c in manual] == [
        (3, 9_800, 1_234)
    ]
    recorded = [d for d in data["recorded_decisions"] if d["detail"] == "manual"]
    assert recorded and 3 not in [d["step"] for d in data["disagreements"]]
