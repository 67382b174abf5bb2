"""What a long session keeps per message stays bounded (``docs/architecture.md`` states it in
bytes): counted, not timed, over everything reachable from the session and its reader (columns,
the events kept, the steps, the reader's own state), for transcripts read as ``stats
--no-exact`` reads them. No body is among it. The summary makes a few steps, not one per step
(making them all was most of the peak of a long session's ``stats``)."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from ctx_inspect.app.config import build_profile
from ctx_inspect.app.loader import LoadedSession, open_inputs
from ctx_inspect.core.session import Session, StepTable
from ctx_inspect.core.stats import RunFacts, summarize

# docs/architecture.md, "Sessions keep columns, not bodies"
BYTES_PER_MESSAGE = 250
BODY = "a line of the tool's output that nobody keeps in memory\n" * 12  # ~680 characters

_NOT_KEPT_PER_MESSAGE = (
    type,
    types.FunctionType,
    types.MethodType,
    types.BuiltinFunctionType,
    types.ModuleType,
    types.CodeType,
)


def kept_bytes(*roots: object, leave_out: tuple[object, ...] = ()) -> int:
    """The bytes of every object reachable from ``roots`` (containers, instance dicts and
    slots), each counted once; functions, classes and modules (code, not data) and the objects
    in ``leave_out`` are not followed."""
    seen = {id(obj) for obj in leave_out}
    total = 0
    stack = list(roots)
    while stack:
        obj = stack.pop()
        if id(obj) in seen or obj is None or isinstance(obj, _NOT_KEPT_PER_MESSAGE):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, list | tuple | set | frozenset):
            stack.extend(obj)
        if hasattr(obj, "__dict__"):
            stack.append(vars(obj))
        for cls in type(obj).__mro__:
            for slot in getattr(cls, "__slots__", ()):
                if slot not in ("__dict__", "__weakref__") and hasattr(obj, slot):
                    stack.append(getattr(obj, slot))
    return total


def _session_and_reader_bytes(loaded: LoadedSession) -> int:
    session = loaded.session
    # the estimator and the body reader are functions over the profile and the parser, which
    # are counted through ``loaded.parser``; the tokenizer is shared by every session
    leave_out = (session.counter, session.estimator, session.estimate_chars, session.body_reader)
    return kept_bytes(session, loaded.parser, leave_out=leave_out)


def _chat_transcript(path: Path, replies: int) -> Path:
    """An agent's chat transcript, a message per line: a question, a reply with a tool call
    and the provider's usage, the tool's output (three messages, a request, a usage report)."""
    with path.open("w") as fh:
        for i in range(replies):
            call = f"call_{i:024d}"
            fh.write(json.dumps({"role": "user", "content": f"step {i}: " + BODY}) + "\n")
            reply = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {"name": "bash", "arguments": '{"cmd": "make test"}'},
                    }
                ],
                "usage": {"prompt_tokens": 2000 + 300 * i, "completion_tokens": 40},
            }
            fh.write(json.dumps(reply) + "\n")
            fh.write(json.dumps({"role": "tool", "tool_call_id": call, "content": BODY}) + "\n")
    return path


def _native_log(path: Path, replies: int) -> Path:
    """A native log: per reply a question, a request, its usage, the answer."""
    with path.open("w") as fh:
        fh.write(json.dumps({"format": "ctx-inspect", "version": 1}) + "\n")
        for i in range(replies):
            for role, kind in (("user", "message"), ("assistant", "message")):
                if role == "assistant":
                    fh.write(json.dumps({"type": "request"}) + "\n")
                    usage = {"input": 2000 + 300 * i, "output": 40}
                    fh.write(json.dumps({"type": "usage", "usage": usage}) + "\n")
                message = {
                    "id": f"{role[0]}{i}",
                    "role": role,
                    "kind": kind,
                    "parts": [{"type": "text", "text": BODY}],
                }
                fh.write(json.dumps({"type": "message", "message": message}) + "\n")
    return path


def _read(path: Path) -> LoadedSession:
    [loaded] = open_inputs(
        [path],
        lambda spec: build_profile(None, default=spec.default_profile),
        count_exact=False,
        tokenize=False,
    )
    return loaded


@pytest.mark.parametrize("write", [_chat_transcript, _native_log], ids=["chat", "native"])
def test_what_a_session_keeps_per_message_is_bounded(tmp_path: Path, write: Any) -> None:
    per_message = []
    for replies in (2_000, 8_000):
        loaded = _read(write(tmp_path / f"run-{replies}.jsonl", replies))
        session = loaded.session
        assert session.message_count in (2 * replies, 3 * replies)
        assert len(session.steps) == replies
        per_message.append(_session_and_reader_bytes(loaded) / session.message_count)
    assert max(per_message) <= BYTES_PER_MESSAGE, per_message
    # four times the messages: no more per message (nothing grows faster than the messages)
    assert per_message[1] <= per_message[0] * 1.05, per_message


def test_the_summary_makes_a_few_steps_not_one_per_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loaded = _read(_chat_transcript(tmp_path / "run.jsonl", 3_000))
    session: Session = loaded.session
    assert len(session.steps) == 3_000
    made: list[int] = []
    state = StepTable._state

    def counted(self: StepTable, i: int) -> Any:
        made.append(i)
        return state(self, i)

    monkeypatch.setattr(StepTable, "_state", counted)
    summary = summarize(session, loaded.profile, RunFacts(str(loaded.path), "openai-chat", "-"))
    assert summary["steps"] == 3_000
    assert summary["peak_step"] == 3_000  # the prompt grows at every request
    assert summary["peak_context_tokens"] == 2000 + 300 * 2_999
    assert len(made) <= 5, len(made)
