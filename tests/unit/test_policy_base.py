"""What every policy shares: the context list with its kept totals, heads and marks; the result
contract (changes list what was not kept); ``unchanged`` and ``admitted``."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctx_inspect.core.model import Message, MessageKind, Part, PartType, Role
from ctx_inspect.core.policies.base import (
    Action,
    ContextItem,
    ContextList,
    ItemChange,
    ItemStatus,
    PolicyResult,
    admitted,
    full_changes,
    replace_text,
    summary_message,
    total,
    unchanged,
    visible_total,
)


def item(mid: str, tokens: int, visible: bool = True) -> ContextItem:
    message = Message(
        id=mid, role=Role.USER, visible=visible, parts=(Part(type=PartType.TEXT, text=mid),)
    )
    return ContextItem(message, tokens)


def sums(items: list[ContextItem]) -> tuple[int, int]:
    return (
        sum(i.tokens for i in items),
        sum(i.tokens for i in items if i.message.visible),
    )


def test_the_totals_follow_every_change() -> None:
    items = ContextList([item("a", 10), item("b", 20, visible=False)])
    assert (total(items), visible_total(items)) == (30, 10)
    items.append(item("c", 5))
    items.insert(0, item("d", 1, visible=False))
    items[1] = item("e", 100)
    items.extend([item("f", 7), item("g", 3)])
    items += [item("h", 2)]
    del items[-1]
    items.pop(0)
    items.remove(items[-1])
    items[0:1] = [item("i", 4), item("j", 6, visible=False)]
    del items[1:2]
    items.sort(key=lambda i: i.id)
    items.reverse()
    assert (total(items), visible_total(items)) == sums(list(items))
    items.clear()
    assert (total(items), visible_total(items)) == (0, 0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1_000), st.booleans()), max_size=20))
def test_plain_lists_and_context_lists_total_alike(spec: list[tuple[int, bool]]) -> None:
    plain = [item(f"m{n}", tokens, visible) for n, (tokens, visible) in enumerate(spec)]
    kept = ContextList(plain)
    assert (total(kept), visible_total(kept)) == (total(plain), visible_total(plain))
    assert kept == plain and type(kept[:1]) is list


def test_the_head_comes_and_goes_and_the_marks_stay() -> None:
    items = ContextList([item("a", 10), item("b", 20)])
    items.mark("k", 1, "data")
    items.push_head(item("head", 5))
    assert items[0].id == "head" and total(items) == 35
    assert items.marked("k") == (2, "data")  # positions count from after the head
    with pytest.raises(ValueError):
        items.push_head(item("again", 1))
    items.append(item("c", 1))  # appending keeps the marks
    assert items.pop_head().id == "head"
    assert items.marked("k") == (1, "data") and total(items) == 31
    with pytest.raises(ValueError):
        items.pop_head()
    items.insert(1, item("x", 1))  # any other change drops them
    assert items.marked("k") is None


def test_replaced_copies_with_totals_head_and_the_marks_before_the_edit() -> None:
    items = ContextList([item("a", 10), item("b", 20), item("c", 30), item("d", 40)])
    items.push_head(item("head", 5))
    items.mark("early", 2)
    items.mark("late", 4)
    edited = items.replaced({3: item("c", 3, visible=False)})
    assert [i.tokens for i in edited] == [5, 10, 20, 3, 40]
    assert (total(edited), visible_total(edited)) == sums(list(edited))
    assert edited.has_head and edited.marked("early") == (2, None)
    assert edited.marked("late") is None  # it reached the replaced item
    assert [i.tokens for i in items] == [5, 10, 20, 30, 40]  # the original is untouched
    copy = edited.copy()
    copy.pop_head()
    assert copy.marked("early") == (1, None) and edited.has_head


def test_unchanged_lists_no_changes() -> None:
    items = [item("a", 1), item("b", 2)]
    result = unchanged(Action.PRUNE, "x", items, "nothing")
    assert not result.fired and result.changes == []
    assert result.items == items and result.tokens_before == result.tokens_after == 3
    assert [c.status for c in full_changes(items, result)] == [ItemStatus.KEPT] * 2


def test_admitted_is_about_the_admitted_item_alone() -> None:
    original = ContextItem(item("t", 0).message, 100, 7)
    result = admitted(
        Action.TRUNCATE,
        "x",
        original,
        replace_text(original.message, "short"),
        lambda m: len(m.text),
        reason="cut",
        details={"n": 1},
    )
    assert [(i.id, i.tokens, i.index) for i in result.items] == [("t", 5, 7)]
    assert result.changes == [ItemChange("t", ItemStatus.TRUNCATED, 100, 5)]
    assert (result.tokens_before, result.tokens_after) == (100, 5)


def test_full_changes_fills_in_the_kept_items_in_order_then_the_added() -> None:
    before = [item("a", 1), item("b", 2), item("c", 3)]
    result = PolicyResult(
        Action.COMPACT,
        "x",
        True,
        "r",
        [before[0], item("s", 9)],
        [
            ItemChange("b", ItemStatus.SUMMARIZED, 2, 0),
            ItemChange("c", ItemStatus.SUMMARIZED, 3, 0),
            ItemChange("s", ItemStatus.ADDED, 0, 9),
        ],
        6,
        10,
    )
    assert [
        (c.id, c.status, c.tokens_before, c.tokens_after) for c in full_changes(before, result)
    ] == [
        ("a", ItemStatus.KEPT, 1, 1),
        ("b", ItemStatus.SUMMARIZED, 2, 0),
        ("c", ItemStatus.SUMMARIZED, 3, 0),
        ("s", ItemStatus.ADDED, 0, 9),
    ]


def same_model(made: Message, validated: Message) -> None:
    """Equal, with the same fields set (the message's and its parts'), dumped alike."""
    assert made == validated and made.model_dump_json() == validated.model_dump_json()
    assert made.model_fields_set == validated.model_fields_set
    assert [p.model_fields_set for p in made.parts] == [p.model_fields_set for p in validated.parts]
    assert repr(made) == repr(validated)


TOOL_PART = Part(type=PartType.TOOL_RESULT, text="out", tool_name="bash", call_id="c1")


@pytest.mark.parametrize(
    "message",
    [
        Message(id="t", role=Role.TOOL, kind=MessageKind.TOOL_RESULT, parts=(TOOL_PART,)),
        Message(id="e", role=Role.USER, thread="sub", timestamp="2024", visible=False),
        Message(
            id="c",
            role=Role.ASSISTANT,
            parts=(Part(type=PartType.TOOL_CALL, tool_name="ls", arguments="{}"), TOOL_PART),
        ),
        Message(id="i", role=Role.USER, parts=(Part(type=PartType.IMAGE, data_bytes=5),)),
        Message.model_construct(id="bare", role=Role.USER),  # "parts" not among the fields set
    ],
)
@pytest.mark.parametrize("text", ["", "short", "é😀\r\n"])
def test_replace_text_is_the_validated_copy(message: Message, text: str) -> None:
    first = message.parts[0] if message.parts else None
    part = Part(
        type=first.type
        if first is not None and first.type in (PartType.TEXT, PartType.TOOL_RESULT)
        else PartType.TEXT,
        text=text,
        tool_name=first.tool_name if first is not None else None,
        call_id=first.call_id if first is not None else None,
    )
    replaced = replace_text(message, text)
    same_model(replaced, message.model_copy(update={"parts": (part,)}))
    # copying it again (pydantic copies the fields set before it adds to it) leaves it be
    renamed = replaced.model_copy(update={"model": "m"})
    assert "model" in renamed.model_fields_set and "model" not in replaced.model_fields_set
    assert "parts" not in message.model_fields_set or message.model_fields_set == (
        replaced.model_fields_set
    )


@pytest.mark.parametrize("role", [Role.USER, Role.ASSISTANT, Role.SYSTEM])
def test_summary_message_is_the_validated_message(role: Role) -> None:
    validated = Message(
        id="s:1", role=role, kind=MessageKind.SUMMARY, parts=(Part(type=PartType.TEXT, text="é"),)
    )
    same_model(summary_message("s:1", "é", role), validated)
    same_model(summary_message("s:1", "é"), validated.model_copy(update={"role": Role.USER}))
