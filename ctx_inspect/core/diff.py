"""Before and after of an action: each message's status and tokens, text diffs, what survived."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ctx_inspect.core.facts import Fact, Survival, message_fact_texts, survival_of
from ctx_inspect.core.policies.base import ContextItem, ItemStatus, PolicyResult, full_changes

TEXT_DIFF_LINES = 400


@dataclass(frozen=True)
class MessageDiff:
    id: str
    role: str
    kind: str
    status: ItemStatus
    tokens_before: int
    tokens_after: int
    text_diff: tuple[str, ...] = ()  # unified diff lines, for changed content
    note: str = ""

    @property
    def delta(self) -> int:
        return self.tokens_after - self.tokens_before


@dataclass
class ActionDiff:
    action: str
    policy: str
    fired: bool
    reason: str
    messages: list[MessageDiff]
    tokens_before: int
    tokens_after: int
    messages_before: int
    messages_after: int
    survived: Survival
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def tokens_saved(self) -> int:
        return self.tokens_before - self.tokens_after

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for m in self.messages:
            out[m.status.value] = out.get(m.status.value, 0) + 1
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "policy": self.policy,
            "fired": self.fired,
            "reason": self.reason,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "tokens_saved": self.tokens_saved,
            "messages_before": self.messages_before,
            "messages_after": self.messages_after,
            "statuses": self.counts(),
            "survived": self.survived.as_dict(),
            "messages": [
                {
                    "id": m.id,
                    "role": m.role,
                    "kind": m.kind,
                    "status": m.status.value,
                    "tokens_before": m.tokens_before,
                    "tokens_after": m.tokens_after,
                    "note": m.note,
                    "text_diff": list(m.text_diff),
                }
                for m in self.messages
            ],
            "details": self.details,
        }


REMOVING = {  # the statuses whose content the action took out of the context
    ItemStatus.PRUNED,
    ItemStatus.TRUNCATED,
    ItemStatus.SUMMARIZED,
    ItemStatus.DROPPED,
    ItemStatus.ARCHIVED,
}


def diff_action(before: Sequence[ContextItem], result: PolicyResult) -> ActionDiff:
    """Compare the context before an action with the policy's result: one row per message of
    ``before`` in order (KEPT, same tokens, for those the result's changes do not list), then
    one per message the action added."""
    after_by_id = {item.id: item for item in result.items}
    before_by_id = {item.id: item for item in before}
    rows: list[MessageDiff] = []
    at_risk: set[Fact] = set()  # the facts of the removed messages
    for change in full_changes(before, result):
        old = before_by_id.get(change.id)
        new = after_by_id.get(change.id)
        source = old or new
        if source is None:
            continue
        lines: tuple[str, ...] = ()
        old_text = old.message.text if old is not None else ""
        if change.status in REMOVING and old is not None:
            for kind, values in message_fact_texts(old.message, old_text).items():
                at_risk.update(Fact(kind, value) for value in values)
        if old is not None and new is not None and old_text != new.message.text:
            lines = _text_diff(old_text, new.message.text, change.id)
        rows.append(
            MessageDiff(
                id=change.id,
                role=source.message.role.value,
                kind=(new or source).message.kind.value,
                status=change.status,
                tokens_before=change.tokens_before,
                tokens_after=change.tokens_after,
                text_diff=lines,
                note=change.note,
            )
        )
    visible_after = [item.message.text for item in result.items if item.message.visible]
    return ActionDiff(
        action=result.action.value,
        policy=result.policy,
        fired=result.fired,
        reason=result.reason,
        messages=rows,
        tokens_before=result.tokens_before,
        tokens_after=result.tokens_after,
        messages_before=sum(1 for i in before if i.message.visible),
        messages_after=len(visible_after),
        survived=survival_of(at_risk, visible_after),
        details=dict(result.details),
    )


def _text_diff(old: str, new: str, label: str) -> tuple[str, ...]:
    lines = difflib.unified_diff(
        old.splitlines(),
        new.splitlines(),
        f"{label} (before)",
        f"{label} (after)",
        lineterm="",
        n=2,
    )
    out = []
    for i, line in enumerate(lines):
        if i >= TEXT_DIFF_LINES:
            out.append(f"... diff cut at {TEXT_DIFF_LINES} lines")
            break
        out.append(line)
    return tuple(out)
