"""A simulated agent run that goes through every context situation ctx-inspect explains.

The run grows through the safe zone into warning, prunes old tool outputs, compacts, has a
tool output dropped because it does not fit, and ends with a forced final turn. It is
deterministic, needs no network, and is written in the native event format, either at once or
step by step with a delay (the live demo).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path

from ctx_inspect.core.model import (
    Compacted,
    Event,
    FinalTurnForced,
    GuardEvaluated,
    GuardStatus,
    GuardTarget,
    LogLine,
    Message,
    MessageAdded,
    MessageKind,
    Part,
    PartType,
    Pruned,
    RequestSent,
    Role,
    SessionInfo,
    ToolOutputAction,
    ToolOutputChanged,
    Usage,
    UsageReported,
)

WINDOW = 131_072
BUFFER = 8_192
MAX_OUTPUT = 32_768
LIMIT = WINDOW - BUFFER - MAX_OUTPUT  # 90,112: the ai-agent profile's default limit
SCHEMA_TOKENS = 2_400
MODEL = "demo-model"
DROPPED_TEXT = "(tool failed: context window budget exceeded)"
PRUNED_TEXT = "[Old tool result content cleared]"

_WORDS = [
    "context",
    "window",
    "token",
    "budget",
    "agent",
    "request",
    "tool",
    "output",
    "summary",
    "prune",
    "compaction",
    "function",
    "return",
    "value",
    "error",
    "trace",
    "file",
    "path",
    "module",
    "import",
    "config",
    "retry",
    "limit",
]


def _tokens(text: str) -> int:
    """The simulated provider counts with the same tokenizer ctx-inspect uses (o200k_base), so
    reported and exact figures agree; without the tokenizer it falls back to characters / 4."""
    from ctx_inspect.core.tokens import get_counter

    return get_counter("o200k_base").count(text)


def _text(rng: random.Random, tokens: int, kind: str) -> str:
    """Text of about ``tokens`` tokens that looks like a tool output of ``kind``."""
    lines: list[str] = []
    size = 0
    n = 0
    while size < tokens * 4:
        n += 1
        if kind == "read":
            line = (
                f"{n:4d}  def {rng.choice(_WORDS)}_{n}(value): return value  # {rng.choice(_WORDS)}"
            )
        elif kind == "grep":
            line = f"src/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}.py:{n}: {rng.choice(_WORDS)}"
        else:
            line = " ".join(rng.choice(_WORDS) for _ in range(12))
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)[: tokens * 4]


class DemoAgent:
    """Produces the events of the simulated run, one step at a time."""

    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        self.context: list[tuple[Message, int]] = []  # (message, tokens) in context
        self.counter = 0
        self.step = 0
        self.pending = 0
        self.new = 0
        self.current = 0

    def _id(self) -> str:
        self.counter += 1
        return f"m{self.counter}"

    def _add(self, role: Role, kind: MessageKind, parts: tuple[Part, ...]) -> MessageAdded:
        message = Message(id=self._id(), role=role, kind=kind, parts=parts)
        tokens = _tokens(message.text) + 3
        self.context.append((message, tokens))
        self.new += tokens
        return MessageAdded(message=message)

    def _context_tokens(self) -> int:
        return sum(tokens for _, tokens in self.context)

    def _guard(self, extra: int = 0) -> GuardEvaluated:
        projected = self.current + self.pending + self.new + extra
        blocked = projected > LIMIT
        return GuardEvaluated(
            current=self.current,
            pending=self.pending,
            new=self.new,
            schema_tokens=SCHEMA_TOKENS,
            extra=extra,
            projected=projected,
            targets=(
                GuardTarget(
                    provider="demo",
                    model=MODEL,
                    context_window=WINDOW,
                    buffer_tokens=BUFFER,
                    max_output_tokens=MAX_OUTPUT,
                    limit=LIMIT,
                    projected=projected,
                    blocked=blocked,
                ),
            ),
            status=GuardStatus.FINAL if blocked else GuardStatus.OK,
            trigger="turn_preflight" if not extra else "tool_preflight",
        )

    def _request(self, reply: str, *, final: bool = False) -> list[Event]:
        self.step += 1
        prompt = self._context_tokens()
        self.current = prompt
        self.pending = 0
        self.new = 0
        output = _tokens(reply) + 3
        events: list[Event] = [
            RequestSent(model=MODEL, request_id=f"req{self.step}", final_turn=final),
            UsageReported(
                usage=Usage(input=prompt, output=output), model=MODEL, request_id=f"req{self.step}"
            ),
        ]
        kind = MessageKind.MESSAGE if final else MessageKind.TOOL_CALL
        parts = (Part(type=PartType.TEXT, text=reply),)
        if not final:
            parts = (
                Part(
                    type=PartType.TOOL_CALL,
                    tool_name="fs__read",
                    call_id=f"c{self.step}",
                    arguments='{"path": "src/module.py"}',
                ),
            )
        events.append(self._add(Role.ASSISTANT, kind, parts))
        self.current = prompt + output
        self.new = 0
        return events

    def _tool(self, tokens: int, kind: str) -> MessageAdded:
        text = _text(self.rng, tokens, kind)
        return self._add(
            Role.TOOL,
            MessageKind.TOOL_RESULT,
            (
                Part(
                    type=PartType.TOOL_RESULT,
                    text=text,
                    tool_name=f"fs__{kind}",
                    call_id=f"c{self.step}",
                ),
            ),
        )

    def run(self) -> Iterator[list[Event]]:
        """The run, as batches of events: one batch per step."""
        yield [
            SessionInfo(
                model=MODEL,
                context_window=WINDOW,
                agent="demo-agent",
                version="1.0",
                session_id="demo",
                extra={"tool_schema_tokens": SCHEMA_TOKENS},
            ),
            self._add(
                Role.SYSTEM,
                MessageKind.MESSAGE,
                (Part(type=PartType.TEXT, text=_text(self.rng, 1_800, "prose")),),
            ),
            self._add(
                Role.USER,
                MessageKind.MESSAGE,
                (
                    Part(
                        type=PartType.TEXT,
                        text="Find why the parser drops the last record and fix it.",
                    ),
                ),
            ),
            self._guard(),
            *self._request("Reading the parser first."),
        ]
        sizes = [3_000, 4_500, 6_000, 2_500, 7_000, 5_500, 8_000, 6_500, 7_500, 5_000, 5_000]
        for i, size in enumerate(sizes):
            yield [
                self._tool(size, "read" if i % 2 else "grep"),
                self._guard(),
                *self._request(f"Step {i + 2}: looking further."),
            ]
        yield self._prune()
        for size in (6_000, 7_000, 5_000, 6_500, 7_000, 8_000):
            yield [self._tool(size, "read"), self._guard(), *self._request("Checking the fix.")]
        yield self._compact()
        for size in (6_000, 9_000, 11_000, 12_000, 10_000, 9_000, 8_000):
            yield [self._tool(size, "grep"), self._guard(), *self._request("Running the tests.")]
        yield self._drop_and_finish()

    def _prune(self) -> list[Event]:
        before = self._context_tokens()
        cleared: list[str] = []
        recovered = 0
        protected = 0
        for index in range(len(self.context) - 1, -1, -1):
            message, tokens = self.context[index]
            if message.kind is not MessageKind.TOOL_RESULT:
                continue
            protected += tokens
            if protected <= 30_000:
                continue
            marker = _tokens(PRUNED_TEXT) + 3
            self.context[index] = (message, marker)
            recovered += tokens - marker
            cleared.append(message.id)
        after = self._context_tokens()
        self.current -= recovered
        return [
            LogLine(
                text=f"prune: {len(cleared)} old tool outputs cleared", level="info", tag="context"
            ),
            Pruned(
                tokens_before=before,
                tokens_after=after,
                tokens_recovered=recovered,
                outputs_pruned=len(cleared),
                message_ids=tuple(cleared),
                reason="context in the warning zone",
            ),
            self._guard(),
            *self._request("Pruned old outputs; continuing."),
        ]

    def _compact(self) -> list[Event]:
        before = self._context_tokens()
        messages_before = len(self.context)
        system = self.context[0]
        summary = (
            "Summary of the work so far: the parser reads records line by line; the last "
            "record is dropped when the file does not end with a newline. Files read: "
            "src/parser.py, src/reader.py. Next step: flush the held line at end of input.\n"
            + _text(self.rng, 1_500, "prose")
        )
        self.context = [system]
        self.current = 0
        self.new = 0
        summary_event = self._add(
            Role.USER, MessageKind.SUMMARY, (Part(type=PartType.TEXT, text=summary),)
        )
        after = self._context_tokens()
        return [
            Compacted(
                trigger="auto",
                tokens_before=before,
                tokens_after=after,
                messages_before=messages_before,
                messages_after=len(self.context),
                summary=summary[:200],
                summary_tokens=after - system[1],
                retained_ids=(system[0].id,),
                keep_system=True,
            ),
            summary_event,
            self._guard(),
            *self._request("Continuing from the summary."),
        ]

    def _drop_and_finish(self) -> list[Event]:
        size = 30_000
        projected = self.current + self.pending + self.new + size
        guard = self._guard(extra=size)
        dropped = self._add(
            Role.TOOL,
            MessageKind.TOOL_RESULT,
            (
                Part(
                    type=PartType.TOOL_RESULT,
                    text=DROPPED_TEXT,
                    tool_name="fs__read",
                    call_id=f"c{self.step}",
                ),
            ),
        )
        return [
            guard,
            ToolOutputChanged(
                action=ToolOutputAction.DROPPED,
                tool="fs__read",
                message_id=dropped.message.id,
                tokens=size,
                tokens_after=_tokens(DROPPED_TEXT) + 3,
                original_bytes=size * 4,
                final_bytes=len(DROPPED_TEXT),
                projected_tokens=projected,
                limit_tokens=LIMIT,
                replacement=DROPPED_TEXT,
            ),
            dropped,
            FinalTurnForced(
                reason="context",
                projected_tokens=projected,
                limit_tokens=LIMIT,
                provider="demo",
                model=MODEL,
                turn=self.step + 1,
            ),
            self._guard(),
            *self._request(
                "The parser drops the last record because the held partial line "
                "is never flushed; the fix flushes it at end of input.",
                final=True,
            ),
        ]


def demo_batches(seed: int = 7) -> Iterator[list[Event]]:
    return DemoAgent(seed).run()


def write_demo_session(path: Path, *, delay: float = 0.0, seed: int = 7) -> None:
    """Write the simulated run to ``path``; with a delay, one step at a time (for following)."""
    from ctx_inspect.formats.native import write_events

    with path.open("w", encoding="utf-8") as fh:
        write_events([], fh, header_extra={"source": "ctx-inspect demo", "profile": "aiagent"})
        fh.flush()
        for batch in demo_batches(seed):
            write_events(batch, fh, header=False)
            fh.flush()
            if delay:
                time.sleep(delay)
