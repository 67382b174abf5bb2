"""Facts, survival, and the before/after diff of an action."""

from __future__ import annotations

from ctx_inspect.core.diff import diff_action
from ctx_inspect.core.facts import Fact, FactKind, extract, survival
from ctx_inspect.core.model import Message, MessageKind, Part, PartType, Role
from ctx_inspect.core.policies.base import (
    Action,
    ContextItem,
    ItemChange,
    ItemStatus,
    PolicyResult,
    replace_text,
    summary_message,
)

TOOL_OUTPUT = """$ pytest tests/test_parser.py -q
F.
tests/test_parser.py:41: AssertionError: expected 3 records, got 2
FAILED tests/test_parser.py::test_last_record - AssertionError
see src/reader.py and read_records() in parse_line_buffer
"""


def item(
    mid: str,
    role: Role,
    text: str,
    tokens: int,
    kind: MessageKind = MessageKind.MESSAGE,
    index: int | None = None,
) -> ContextItem:
    ptype = PartType.TOOL_RESULT if kind is MessageKind.TOOL_RESULT else PartType.TEXT
    return ContextItem(
        Message(id=mid, role=role, kind=kind, parts=(Part(type=ptype, text=text),)), tokens, index
    )


def test_facts_are_found_by_kind() -> None:
    facts = extract(TOOL_OUTPUT)
    assert Fact(FactKind.PATH, "tests/test_parser.py") in facts
    assert Fact(FactKind.PATH, "src/reader.py") in facts
    assert Fact(FactKind.COMMAND, "pytest tests/test_parser.py -q") in facts
    errors = {f.text for f in facts if f.kind is FactKind.ERROR}
    assert any("expected 3 records" in e for e in errors)
    idents = {f.text for f in facts if f.kind is FactKind.IDENTIFIER}
    assert {"read_records", "parse_line_buffer", "test_last_record"} <= idents
    assert Fact(FactKind.IDENTIFIER, "see") not in facts


def test_survival_counts_what_is_still_present() -> None:
    kept = "We fixed src/reader.py: parse_line_buffer now flushes; read_records is unchanged."
    result = survival([TOOL_OUTPUT], [kept])
    assert result.share(FactKind.PATH) is not None
    assert 0 < result.score < 1
    lost = {f.text for f in result.lost}
    assert "tests/test_parser.py" in lost
    assert "src/reader.py" not in lost
    assert survival([], ["anything"]).score == 1.0
    assert survival([TOOL_OUTPUT], [TOOL_OUTPUT]).score == 1.0


def test_diff_reports_each_message_status_tokens_and_text() -> None:
    system = item("s", Role.SYSTEM, "You are an agent.", 5, index=0)
    tool = item("t", Role.TOOL, TOOL_OUTPUT, 60, MessageKind.TOOL_RESULT, index=1)
    user = item("u", Role.USER, "Fix the parser.", 4, index=2)
    before = [system, tool, user]
    cleared = ContextItem(replace_text(tool.message, "[Old tool result content cleared]"), 8, 1)
    summary = ContextItem(summary_message("sum1", "Summary: fixed src/reader.py"), 9)
    result = PolicyResult(
        action=Action.COMPACT,
        policy="test",
        fired=True,
        reason="over the threshold",
        items=[system, cleared, summary],
        changes=[
            ItemChange("s", ItemStatus.KEPT, 5, 5),
            ItemChange("t", ItemStatus.PRUNED, 60, 8),
            ItemChange("u", ItemStatus.SUMMARIZED, 4, 0),
            ItemChange("sum1", ItemStatus.ADDED, 0, 9),
        ],
        tokens_before=69,
        tokens_after=22,
    )
    diff = diff_action(before, result)
    statuses = {m.id: m.status for m in diff.messages}
    assert statuses == {
        "s": ItemStatus.KEPT,
        "t": ItemStatus.PRUNED,
        "u": ItemStatus.SUMMARIZED,
        "sum1": ItemStatus.ADDED,
    }
    assert diff.tokens_saved == 47
    assert diff.counts() == {"kept": 1, "pruned": 1, "summarized": 1, "added": 1}
    pruned = next(m for m in diff.messages if m.id == "t")
    assert pruned.delta == -52
    assert any(line.startswith("+[Old tool result") for line in pruned.text_diff)
    assert any(line.startswith("-FAILED") for line in pruned.text_diff)
    assert diff.messages_before == 3 and diff.messages_after == 3
    # the summary kept one path of the pruned output; the test path and the error were lost
    assert 0 < diff.survived.score < 1
    data = diff.as_dict()
    assert data["statuses"]["pruned"] == 1
    assert data["survived"]["by_kind"]["path"]["found"] >= 1


def test_a_message_the_changes_do_not_list_is_a_kept_row_in_its_place() -> None:
    system = item("s", Role.SYSTEM, "You are an agent.", 5, index=0)
    tool = item("t", Role.TOOL, TOOL_OUTPUT, 60, MessageKind.TOOL_RESULT, index=1)
    user = item("u", Role.USER, "Fix the parser.", 4, index=2)
    cleared = ContextItem(replace_text(tool.message, "[Old tool result content cleared]"), 8, 1)
    note = ContextItem(summary_message("n1", "pruned one output"), 3)
    result = PolicyResult(
        action=Action.PRUNE,
        policy="test",
        fired=True,
        reason="old output cleared",
        items=[system, cleared, user, note],
        changes=[  # what was not kept, then what was added: "s" and "u" are kept
            ItemChange("t", ItemStatus.PRUNED, 60, 8),
            ItemChange("n1", ItemStatus.ADDED, 0, 3),
        ],
        tokens_before=69,
        tokens_after=20,
    )
    diff = diff_action([system, tool, user], result)
    assert [(m.id, m.status, m.tokens_before, m.tokens_after) for m in diff.messages] == [
        ("s", ItemStatus.KEPT, 5, 5),
        ("t", ItemStatus.PRUNED, 60, 8),
        ("u", ItemStatus.KEPT, 4, 4),
        ("n1", ItemStatus.ADDED, 0, 3),
    ]
    assert [m.text_diff for m in diff.messages if m.status is ItemStatus.KEPT] == [(), ()]
    assert diff.counts() == {"kept": 2, "pruned": 1, "added": 1}
