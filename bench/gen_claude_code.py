"""Generate a Claude-Code-like session transcript of a given size, deterministically.

The file looks like a long real session (``~/.claude/projects/<project>/<session>.jsonl``,
Claude Code 2.0/2.1 line shapes, transcripts.md section 1): user prompts now and then; each
model response split over one line per content block (thinking, text, one to three tool calls)
that all repeat the response's usage (the first lines with a streaming partial output count);
one tool-result line per call, its result 1-40 KB (log-uniform) and repeated in
``toolUseResult`` as the CLI does; ``progress`` lines while tools run; ``file-history-snapshot``
lines after edits; hook attachments; ``turn_duration`` system lines; and a few auto-compactions
(``compact_boundary`` then the ``isCompactSummary`` user line). Between two compactions the
prompt size in the usage climbs from ~30k to ~190k tokens, as a real session's does, whatever
the byte size of the file (a real 1 GiB session would compact hundreds of times).

Same seed and size, same bytes. Written to ``bench/data/`` (git-ignored) by default:

    .venv/bin/python bench/gen_claude_code.py [--mb 1024] [--compactions 6] [--seed 7] [--out PATH]
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import orjson

DEFAULT_MB = 1024
DATA_DIR = Path(__file__).parent / "data"
SESSION_ID = "0b5e55ed-1de4-4c1a-9d2e-bench0000001"
CWD = "/home/dev/projects/webshop"
MODEL = "claude-opus-4-5-20251101"
VERSION = "2.0.64"
MIN_RESULT = 1_000
MAX_RESULT = 40_000
POOL_SIZE = 512
FLOOR_TOKENS = 30_000  # prompt size right after a compaction
CLIMB_TOKENS = 160_000  # growth until the next one

_WORDS = (
    "the of and to in is that it for on are as with be by this at from or have an not which you "
    "context window token message agent model prompt summary tool output function error result "
    "request response file directory test build user session limit budget threshold however "
    "because instead actually probably check update handler config render value index count"
)
_IDENTS = (
    "config session items total path reader parser event offset chunk buffer state step cache "
    "key data text line request response handler client server retry timeout payload price cart"
)
WORDS = tuple(_WORDS.split())
IDENTS = tuple(_IDENTS.split())
TOOLS = ("Read", "Bash", "Grep", "Edit", "Glob", "Write")


class Generator:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.clock = 1_760_000_000.0
        self.prose = [self._prose(self.rng.randint(200, 4000)) for _ in range(POOL_SIZE)]
        self.code = [self._code(self.rng.randint(400, 8000)) for _ in range(POOL_SIZE)]
        self.logs = [self._logs(self.rng.randint(400, 8000)) for _ in range(POOL_SIZE)]

    # -- text pools (built once; lines are cut from them) ----------------------------------

    def _prose(self, size: int) -> str:
        rng = self.rng
        out: list[str] = []
        n = 0
        while n < size:
            sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 18)))
            sentence = sentence.capitalize() + rng.choice((".", ".", "?", ":"))
            out.append(sentence)
            n += len(sentence) + 1
        return " ".join(out)

    def _code(self, size: int) -> str:
        rng = self.rng
        lines: list[str] = []
        n = 0
        while n < size:
            indent = "    " * rng.randint(0, 3)
            a, b, c = (rng.choice(IDENTS) for _ in range(3))
            line = rng.choice(
                (
                    f"{indent}def {a}_{b}(self, {c}: int) -> str:",
                    f'{indent}{a} = {b}.get("{c}", {rng.randint(0, 999)})',
                    f"{indent}if {a} is not None and {b} > {rng.randint(1, 99)}:",
                    f"{indent}return {a}[{b}:{c}]",
                    f"{indent}# {self._words(6)}",
                    f'{indent}raise ValueError(f"bad {a}: {{{b}!r}}")',
                )
            )
            lines.append(f"{len(lines) + 1:>6}\t{line}")
            n += len(lines[-1]) + 1
        return "\n".join(lines)

    def _logs(self, size: int) -> str:
        rng = self.rng
        lines: list[str] = []
        n = 0
        while n < size:
            line = (
                f"2025-11-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:"
                f"{rng.randint(0, 59):02d}"
                f" {rng.choice(('INFO', 'WARN', 'ERROR', 'DEBUG'))} [{rng.choice(IDENTS)}] "
                f"{self._words(rng.randint(3, 10))} status={rng.choice((200, 201, 404, 500))} "
                f'path="/api/{rng.choice(IDENTS)}/{rng.randint(1, 9999)}"'
            )
            lines.append(line)
            n += len(line) + 1
        return "\n".join(lines)

    def _words(self, n: int) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(n))

    def text(self, size: int, kind: str = "prose") -> str:
        pool = {"prose": self.prose, "code": self.code, "logs": self.logs}[kind]
        pieces: list[str] = []
        n = 0
        while n < size:
            piece = self.rng.choice(pool)
            pieces.append(piece)
            n += len(piece) + 1
        return "\n".join(pieces)[:size]

    # -- envelope --------------------------------------------------------------------------

    def uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def now(self, step: float = 1.5) -> str:
        self.clock += self.rng.uniform(0.05, step)
        t = time.gmtime(self.clock)
        millis = int((self.clock % 1) * 1000)
        return time.strftime("%Y-%m-%dT%H:%M:%S", t) + f".{millis:03d}Z"

    def env(self, kind: str, parent: str | None, **fields: Any) -> dict[str, Any]:
        line: dict[str, Any] = {
            "parentUuid": parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": CWD,
            "sessionId": SESSION_ID,
            "version": VERSION,
            "gitBranch": "main",
            "slug": "quiet-bench-session",
            "type": kind,
        }
        line.update(fields)
        line["uuid"] = self.uid()
        line["timestamp"] = self.now()
        return line


def log_uniform(rng: random.Random, low: int, high: int) -> int:
    return int(math.exp(rng.uniform(math.log(low), math.log(high))))


def generate(out: Path, size: int, seed: int, compactions: int) -> dict[str, int]:
    g = Generator(seed)
    rng = g.rng
    written = 0
    counts: dict[str, int] = {}
    parent: str | None = None
    context = FLOOR_TOKENS  # the prompt size the usage reports, in tokens
    interval = size // (compactions + 1)
    next_compaction = interval if compactions else size + 1
    interval_start = 0
    done_compactions = 0
    message_no = 0

    def emit(line: dict[str, Any]) -> None:
        nonlocal written
        data = orjson.dumps(line) + b"\n"
        fh.write(data)
        written += len(data)
        key = line["type"]
        counts[key] = counts.get(key, 0) + 1

    with out.open("wb") as fh:
        first_prompt = g.env("user", None, message={"role": "user", "content": g.text(400)})
        emit({"type": "summary", "summary": "Refactor the checkout flow", "leafUuid": g.uid()})
        emit(first_prompt)
        parent = first_prompt["uuid"]
        while written < size:
            if written >= next_compaction and done_compactions < compactions:
                boundary = g.env(
                    "system",
                    None,
                    subtype="compact_boundary",
                    content="Conversation compacted",
                    isMeta=False,
                    level="info",
                    logicalParentUuid=parent,
                    compactMetadata={"trigger": "auto", "preTokens": context},
                )
                emit(boundary)
                summary = g.env(
                    "user",
                    boundary["uuid"],
                    message={
                        "role": "user",
                        "content": "This session is being continued from a previous "
                        "conversation that ran out of context. The conversation is summarized "
                        "below:\n" + g.text(rng.randint(6_000, 14_000)),
                    },
                    isVisibleInTranscriptOnly=True,
                    isCompactSummary=True,
                )
                emit(summary)
                parent = summary["uuid"]
                done_compactions += 1
                interval_start = written
                next_compaction += interval
            if rng.random() < 0.08:  # a new prompt from the user
                prompt = g.env(
                    "user",
                    parent,
                    message={"role": "user", "content": g.text(rng.randint(40, 1500))},
                )
                emit(prompt)
                parent = prompt["uuid"]
                snapshot = {
                    "type": "file-history-snapshot",
                    "messageId": prompt["uuid"],
                    "snapshot": {
                        "messageId": prompt["uuid"],
                        "trackedFileBackups": {},
                        "timestamp": g.now(0.1),
                    },
                    "isSnapshotUpdate": False,
                }
                emit(snapshot)
            # One model response, one line per content block.
            message_no += 1
            msg_id = f"msg_01{message_no:022d}"
            request_id = f"req_011C{message_no:020d}"
            calls = rng.choice((1, 1, 1, 2, 2, 3))
            blocks: list[dict[str, Any]] = []
            if rng.random() < 0.5:
                blocks.append(
                    {
                        "type": "thinking",
                        "thinking": g.text(rng.randint(200, 3000)),
                        "signature": g.text(300).replace(" ", ""),
                    }
                )
            if rng.random() < 0.7:
                blocks.append({"type": "text", "text": g.text(rng.randint(50, 800))})
            tool_ids: list[tuple[str, str]] = []
            for _ in range(calls):
                name = rng.choice(TOOLS)
                call_id = f"toolu_01{g.uid().replace('-', '')[:22]}"
                if name in ("Write", "Edit") and rng.random() < 0.5:
                    arguments: dict[str, Any] = {
                        "file_path": f"{CWD}/src/{rng.choice(IDENTS)}.py",
                        "content": g.text(rng.randint(2_000, 20_000), "code"),
                    }
                elif name == "Bash":
                    arguments = {
                        "command": f"pytest -q tests/test_{rng.choice(IDENTS)}.py",
                        "description": g.text(40),
                    }
                else:
                    arguments = {
                        "file_path": f"{CWD}/src/{rng.choice(IDENTS)}.py",
                        "pattern": rng.choice(IDENTS),
                    }
                blocks.append({"type": "tool_use", "id": call_id, "name": name, "input": arguments})
                tool_ids.append((call_id, name))
            climbed = (written - interval_start) / max(1, interval)
            context = FLOOR_TOKENS + int(CLIMB_TOKENS * min(1.0, climbed)) + rng.randint(0, 999)
            cache_write = rng.randint(200, 4_000)
            output = rng.randint(40, 2_500)
            final = {
                "input_tokens": rng.randint(1, 12),
                "cache_creation_input_tokens": cache_write,
                "cache_read_input_tokens": max(0, context - cache_write),
                "cache_creation": {
                    "ephemeral_5m_input_tokens": cache_write,
                    "ephemeral_1h_input_tokens": 0,
                },
                "output_tokens": output,
                "service_tier": "standard",
            }
            block_lines: list[str] = []
            partial = dict(final, output_tokens=rng.choice((1, 2, 3, 8)))  # streaming partial
            for i, block in enumerate(blocks):
                usage = partial if i < len(blocks) - 1 else final
                line = g.env(
                    "assistant",
                    parent,
                    message={
                        "model": MODEL,
                        "id": msg_id,
                        "type": "message",
                        "role": "assistant",
                        "content": [block],
                        "stop_reason": "tool_use" if tool_ids else "end_turn",
                        "stop_sequence": None,
                        "usage": usage,
                    },
                    requestId=request_id,
                )
                emit(line)
                parent = line["uuid"]
                block_lines.append(line["uuid"])
            context += output  # what preTokens will show if a compaction follows
            # Tool results (parallel calls answer the tool-call line that asked).
            call_lines = block_lines[len(blocks) - len(tool_ids) :]
            for (call_id, name), call_line in zip(tool_ids, call_lines, strict=True):
                for _ in range(rng.choice((0, 1, 1, 2))):
                    emit(
                        g.env(
                            "progress",
                            call_line,
                            data={
                                "type": "bash_progress" if name == "Bash" else "hook_progress",
                                "output": g.text(rng.randint(100, 900), "logs"),
                                "elapsedTimeSeconds": rng.randint(1, 30),
                            },
                            toolUseID=f"bash-progress-{rng.randint(0, 9)}",
                            parentToolUseID=call_id,
                        )
                    )
                size_result = log_uniform(rng, MIN_RESULT, MAX_RESULT)
                body = g.text(size_result, "code" if name in ("Read", "Grep", "Glob") else "logs")
                if name == "Read":
                    meta: dict[str, Any] = {
                        "type": "text",
                        "file": {
                            "filePath": f"{CWD}/src/x.py",
                            "content": body,
                            "numLines": body.count("\n") + 1,
                            "startLine": 1,
                            "totalLines": 400,
                        },
                    }
                else:
                    meta = {"stdout": body, "stderr": "", "interrupted": False, "isImage": False}
                result = g.env(
                    "user",
                    call_line,
                    message={
                        "role": "user",
                        "content": [
                            {"tool_use_id": call_id, "type": "tool_result", "content": body}
                        ],
                    },
                )
                result["toolUseResult"] = meta  # the last key, as Claude Code 1.0 and 2.0 write it
                emit(result)
                parent = result["uuid"]
                if name in ("Edit", "Write"):
                    emit(
                        {
                            "type": "file-history-snapshot",
                            "messageId": call_line,
                            "snapshot": {
                                "messageId": call_line,
                                "trackedFileBackups": {
                                    f"src/{rng.choice(IDENTS)}.py": {
                                        "backupFileName": f"{g.uid()[:16]}@v{k}",
                                        "version": k,
                                        "backupTime": g.now(0.1),
                                    }
                                    for k in range(1, rng.randint(2, 12))
                                },
                                "timestamp": g.now(0.1),
                            },
                            "isSnapshotUpdate": True,
                        }
                    )
                if rng.random() < 0.15:
                    hook = g.env(
                        "attachment",
                        parent,
                        attachment={
                            "type": "hook_success",
                            "hookName": f"PostToolUse:{name}",
                            "toolUseID": call_id,
                            "hookEvent": "PostToolUse",
                            "content": "",
                            "stdout": "",
                            "stderr": "",
                            "exitCode": 0,
                        },
                    )
                    emit(hook)
                    parent = hook["uuid"]
            if not tool_ids:
                turn = g.env(
                    "system",
                    parent,
                    subtype="turn_duration",
                    durationMs=rng.randint(2_000, 90_000),
                    isMeta=False,
                )
                emit(turn)
                parent = turn["uuid"]
    return {"bytes": written, **counts, "compactions": done_compactions}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=DEFAULT_MB, help="size in MiB (default 1024)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--compactions", type=int, default=6)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    size = int(args.mb * 1024 * 1024)
    out = args.out or DATA_DIR / f"claude_code_{args.mb:g}m_seed{args.seed}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    counts = generate(out, size, args.seed, args.compactions)
    took = time.perf_counter() - started
    print(f"wrote {out} in {took:.1f} s: " + ", ".join(f"{k}={v}" for k, v in counts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
