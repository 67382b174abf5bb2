"""A file of a conversation per line (an evaluation output) makes a session per conversation:
100,000 of them are read one after the other, each with its own counts and figures; more
threads than a 16-bit column holds, more tool names than 32,767, and numbers past 32 bits
(line numbers, message lengths) widen their columns instead of failing; splitting threads
reads no message body back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ctx_inspect.app.config import build_profile
from ctx_inspect.app.loader import (
    LoadedSession,
    iter_inputs,
    load_session,
    resolve_format,
    split_threads,
)
from ctx_inspect.core.model import MessageKind, Role, SourceSpan
from ctx_inspect.core.session import MessageEntry, Session
from ctx_inspect.formats.registry import FormatSpec

CONVERSATIONS = 100_000


def _conversation(k: int) -> dict[str, Any]:
    """Conversation ``k``: 1 to 3 exchanges, the last request's prompt ``1000 + k``."""
    exchanges = 1 + k % 3
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Solve it."}]
    for turn in range(exchanges):
        prompt = 1000 + k - (exchanges - 1 - turn)
        messages.append({"role": "user", "content": f"task {k} part {turn}"})
        messages.append(
            {
                "role": "assistant",
                "content": "done" * (1 + turn),
                "usage": {"prompt_tokens": prompt, "completion_tokens": 3},
            }
        )
    return {"messages": messages}


def _write(path: Path, count: int) -> Path:
    with path.open("w") as fh:
        for k in range(1, count + 1):
            fh.write(json.dumps(_conversation(k), separators=(",", ":")) + "\n")
    return path


def _profile(spec: FormatSpec) -> Any:
    return build_profile(None, default=spec.default_profile)


def test_100000_conversations_are_each_their_own_session(tmp_path: Path) -> None:
    path = _write(tmp_path / "eval.jsonl", CONVERSATIONS)
    seen = 0
    for loaded in iter_inputs([path], _profile, count_exact=False, tokenize=False):
        assert isinstance(loaded, LoadedSession), loaded
        seen += 1
        k = seen
        exchanges = 1 + k % 3
        session = loaded.session
        assert loaded.label == f"conv{k}"
        assert session.info["thread"] == f"conv{k}"
        assert session.message_count == 1 + 2 * exchanges
        assert len(session.steps) == exchanges
        assert session.issues == []
        last = session.steps[-1]
        assert last.reported == 1000 + k  # this conversation's own figure, no other's
        assert last.messages == 2 * exchanges  # its system prompt, questions and answers
        assert set(session.table.threads) == {"main"}
    assert seen == CONVERSATIONS


def test_splitting_threads_reads_no_body(tmp_path: Path) -> None:
    path = _write(tmp_path / "eval.jsonl", 300)
    spec = resolve_format(path, None)
    loaded = load_session(path, _profile(spec), format_spec=spec, count_exact=False)
    parent = loaded.session
    reads: list[SourceSpan] = []

    def refuse(span: SourceSpan) -> list[Any]:
        reads.append(span)
        raise AssertionError("a body was read back")

    parent.body_reader = refuse
    subs = split_threads(loaded)
    assert reads == []
    assert len(subs) == 300
    estimates = dict(zip(parent.table.ids, parent.table.estimate, strict=True))
    for sub in subs:
        table = sub.session.table
        assert list(table.estimate) == [estimates[mid] for mid in table.ids]
        assert all(span is not None for span in (r.span for r in sub.session.records()))


def _entries(count: int, **fields: Any) -> Iterator[MessageEntry]:
    for i in range(count):
        values: dict[str, Any] = {
            "id": f"m{i}",
            "role": Role.TOOL,
            "kind": MessageKind.TOOL_RESULT,
            "visible": True,
            "thread": "main",
            "tool_name": None,
            "chars": 10,
            "tokens": None,
            "source": 0,
            "offset": 100 * i,
            "length": 99,
            "line": i + 1,
        }
        values.update({name: value(i) for name, value in fields.items()})
        yield MessageEntry(**values)


def test_columns_widen_when_numbers_do_not_fit() -> None:
    session = Session(body_reader=lambda span: [])
    tools = 40_000  # past a 16-bit signed column
    session.append(list(_entries(tools, tool_name=lambda i: f"tool-{i}")))
    big = list(
        _entries(
            3,
            id=lambda i: f"big{i}",
            chars=lambda i: 3 * 2**30 + i,  # a message of 3 GiB
            offset=lambda i: 2**40 + i,
            length=lambda i: 5 * 2**30 + i,
            line=lambda i: 3 * 10**9 + i,  # past 2**31 lines
        )
    )
    session.append(big)
    records = list(session.records())
    assert [r.tool_name for r in records[:tools]] == [f"tool-{i}" for i in range(tools)]
    for i, record in enumerate(records[tools:]):
        assert record.chars == 3 * 2**30 + i
        assert record.span is not None
        assert (record.span.offset, record.span.length, record.span.line) == (
            2**40 + i,
            5 * 2**30 + i,
            3 * 10**9 + i,
        )
    assert records[0].tool_name == "tool-0" and records[0].span is not None
    assert records[0].span.line == 1  # the rows before the widening are kept as they were


def test_more_threads_than_a_16_bit_column_holds() -> None:
    session = Session(body_reader=lambda span: [])
    threads = 70_000
    session.append(list(_entries(threads, thread=lambda i: f"conv{i}")))
    names = session.table.threads
    assert [names[code] for code in session.table.thread] == [f"conv{i}" for i in range(threads)]
    assert session.record(threads - 1).thread == f"conv{threads - 1}"
