"""Hostile inputs: strings that would act on a terminal, and files that carry them everywhere an
input's text can reach the screen (model names, compaction triggers, tool names, message ids and
text, sub-agent threads, session titles, log and debug topics, file and folder names)."""

from __future__ import annotations

import json
import re
import shutil
import unicodedata
from collections.abc import Iterable
from pathlib import Path
from typing import Any

DATA = Path(__file__).parents[1] / "data"

HOSTILE_STRINGS = {
    "csi": "\x1b[31mred\x1b[0m\x1b[2J\x1b[H\x1b[?1049h",
    "osc0": "\x1b]0;owned title\x07",
    "osc2": "\x1b]2;owned title\x1b\\",
    "osc8": "\x1b]8;;http://evil.example/\x1b\\link\x1b]8;;\x1b\\",
    "osc52": "\x1b]52;c;ZWNobyBvd25lZA==\x07",
    "dcs": "\x1bP1$r0m\x1b\\",
    "apc": "\x1b_Gf=100;payload\x1b\\",
    "c1": "\x9b31m\x9d0;c1 title\x9c\x90dcs\x9c\x85\x9f",
    "bel_bs_cr": "bell\x07back\x08\x08space cr\roverwritten",
    "bidi": "\u202eevil\u202c \u2066iso\u2069 \u200f\u061c",
    "zero_width": "zero\u200bwidth\u200c\u200d\u2060\ufeff",
    "tags": "tag\U000e0001\U000e0068\U000e0069\U000e0064\U000e007f",
    "selectors": "x\ufe0f\ufe0f\U000e0100",
    "markup": "[/] [bold red]markup[/bold red] [link=http://x]l[/link] [@click=app.quit]q[/]",
}
# (ending with an escape sequence: a label cut to its end still holds one)
HOSTILE = "".join(HOSTILE_STRINGS.values()) + "\x1b]0;end\x07"
# for names of files and folders: no "/" nor NUL (so no closing markup tag), short enough
HOSTILE_NAME = "[b][@click=app.quit]\u202e\u200b\U000e0041\x9b\x9d\x1b[31m\x1b]0;t\x07"

# what must never reach a terminal from an input: C0 controls (newline and tab are layout), DEL,
# C1, and every format, separator or surrogate character; and runs of variation selectors
_FORBIDDEN = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_HIDDEN_CATEGORIES = {"Cf", "Zl", "Zp", "Cs"}
_SELECTOR_RUN = re.compile("[\ufe00-\ufe0f\U000e0100-\U000e01ef]{2,}|\U000e0100")


def leaks(text: str) -> list[str]:
    """The characters in ``text`` that should never have reached the terminal."""
    found = _FORBIDDEN.findall(text)
    found += [c for c in text if unicodedata.category(c) in _HIDDEN_CATEGORIES]
    found += _SELECTOR_RUN.findall(text)
    return found


def _jsonl(records: Iterable[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def _text_message(mid: str, role: str, text: str, **extra: Any) -> dict[str, Any]:
    message = {"id": mid, "role": role, "parts": [{"type": "text", "text": text}], **extra}
    return {"type": "message", "message": message}


def _request(tokens: int, h: str) -> list[dict[str, Any]]:
    """A request and the provider's usage for it."""
    return [
        {"type": "request", "model": "model" + h},
        {"type": "usage", "usage": {"input": tokens, "output": 10}, "model": "model" + h},
    ]


def native_records(h: str = HOSTILE) -> list[dict[str, Any]]:
    """A native session in which every text field holds ``h``: a system prompt, tool calls and
    large tool results (so a prune removes something), a guard, a debug topic and a log line, a
    dropped tool output, a prune, a compaction, a reset, a sub-agent thread and a forced final
    turn; its last line is not JSON (a parse issue)."""
    big = "output line " * 120
    records: list[dict[str, Any]] = [
        {
            "format": "ctx-inspect",
            "version": 1,
            "created": "2026-01-15T10:00:00+00:00",
            "producer": "ctx-inspect " + h,
            "source": "run" + h,
            "profile": "generic",
            # an export of ours names the settings it was made with: text ones too
            "settings": {"context_window": 4000, "description": h, "encoding": "enc" + h},
        },
        {
            "type": "info",
            "model": "model" + h,
            "context_window": 4000,
            "agent": "agent" + h,
            "version": h,
            "session_id": "session" + h,
        },
        _text_message("sys" + h, "system", "system prompt " + h),
        _text_message("user" + h, "user", "task " + h, name=h),
    ]
    for i in range(1, 5):
        call = f"c{i}" + h
        records += [
            {"type": "request", "model": "model" + h, "request_id": "req" + h},
            {
                "type": "usage",
                "usage": {"input": 400 * i, "output": 20},
                "model": "model" + h,
                "request_id": "req" + h,
            },
            {
                "type": "message",
                "message": {
                    "id": f"call{i}" + h,
                    "role": "assistant",
                    "kind": "tool_call",
                    "model": "model" + h,
                    "parts": [
                        {"type": "thinking", "text": "thinking " + h},
                        {
                            "type": "tool_call",
                            "tool_name": "tool" + h,
                            "call_id": call,
                            "arguments": json.dumps({"cmd": h}, ensure_ascii=False),
                        },
                    ],
                },
            },
            {
                "type": "message",
                "message": {
                    "id": f"result{i}" + h,
                    "role": "tool",
                    "kind": "tool_result",
                    "parts": [
                        {
                            "type": "tool_result",
                            "text": big + h + "\n" + h,
                            "tool_name": "tool" + h,
                            "call_id": call,
                            "is_error": i == 2,
                        }
                    ],
                },
            },
            {"type": "context", "tokens": 400 * i + 300, "limit": 4000, "label": "ctx" + h},
        ]
    records += [
        {
            "type": "guard",
            "current": 2000,
            "pending": 100,
            "new": 50,
            "schema_tokens": 20,
            "targets": [
                {
                    "provider": "p" + h,
                    "model": "m" + h,
                    "context_window": 4000,
                    "limit": 3600,
                    "projected": 2150,
                }
            ],
            "status": "ok",
            "trigger": "trigger" + h,
        },
        {"type": "debug", "name": "topic" + h, "payload": {"key" + h: "value" + h, "n": [h]}},
        {"type": "log", "text": "log line " + h, "level": "warn" + h, "tag": "tag" + h},
        {
            "type": "tool_output",
            "action": "dropped",
            "tool": "tool" + h,
            "message_id": "result3" + h,
            "tokens": 500,
            "projected_tokens": 3900,
            "limit_tokens": 3600,
            "replacement": "replacement " + h,
        },
        {
            "type": "prune",
            "tokens_before": 2200,
            "tokens_after": 1900,
            "tokens_recovered": 300,
            "outputs_pruned": 1,
            "message_ids": ["result1" + h],
            "reason": "reason" + h,
        },
        *_request(3700, h),
        {
            "type": "compaction",
            "trigger": "trigger" + h,
            "tokens_before": 3700,
            "tokens_after": 600,
            "summary": "summary " + h,
            "retained_ids": ["user" + h],
        },
        _text_message("summary" + h, "user", "summary " + h, kind="summary"),
        {"type": "reset", "keep_through": "summary" + h, "reason": "reason" + h},
        _text_message("sub1" + h, "user", "sub-agent task " + h, thread="agent" + h),
        {"type": "request", "model": "model" + h, "thread": "agent" + h},
        {"type": "usage", "usage": {"input": 900, "output": 5}, "thread": "agent" + h},
        _text_message("sub2" + h, "assistant", "sub-agent answer " + h, thread="agent" + h),
        _text_message("user2" + h, "user", "more " + big + h),
        *_request(3950, h),
        {
            "type": "final_turn",
            "reason": "context" + h,
            "projected_tokens": 4100,
            "limit_tokens": 3600,
            "provider": "p" + h,
            "model": "model" + h,
            "turn": 7,
        },
        _text_message("last" + h, "assistant", "final answer " + h),
    ]
    return records


def native_file(folder: Path, name: str = "run" + HOSTILE_NAME + ".jsonl") -> Path:
    path = folder / name
    path.write_text(_jsonl(native_records()) + "not json " + HOSTILE + "\n", encoding="utf-8")
    return path


_POISONED_KEYS = {"model", "trigger", "name", "text", "title", "modelID", "tool", "agentId"}


def _poison(value: Any, h: str) -> Any:
    """Every string under the keys that name or say something, with ``h`` appended."""
    if isinstance(value, dict):
        return {
            k: (v + h if k in _POISONED_KEYS and isinstance(v, str) else _poison(v, h))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_poison(item, h) for item in value]
    return value


def _poison_jsonl(source: Path, target: Path, h: str = HOSTILE) -> Path:
    lines = source.read_text(encoding="utf-8").splitlines()
    target.write_text(_jsonl(_poison(json.loads(line), h) for line in lines), encoding="utf-8")
    return target


def claude_code_file(folder: Path, source: str = "compaction.jsonl") -> Path:
    """A Claude Code transcript whose model, compaction trigger, tool names, sub-agent ids and
    texts are hostile, under a hostile file name."""
    target = folder / f"{Path(source).stem}{HOSTILE_NAME}.jsonl"
    return _poison_jsonl(DATA / "claude_code" / source, target)


def claude_code_project(folder: Path) -> Path:
    """A Claude Code project folder (read as a folder input) whose transcripts have hostile file
    names and contents, with sidechains (sub-agents)."""
    project = folder / ("project" + HOSTILE_NAME)
    shutil.copytree(DATA / "claude_code" / "project", project)
    for path in sorted(project.rglob("*.jsonl")):
        target = path.with_name(path.stem + HOSTILE_NAME + path.suffix)
        _poison_jsonl(path, target)
        path.unlink()
    return project


def opencode_storage(folder: Path) -> Path:
    """OpenCode's storage folder whose session titles, model and tool names are hostile."""
    storage = folder / ("storage" + HOSTILE_NAME)
    shutil.copytree(DATA / "opencode" / "storage", storage)
    for path in storage.rglob("*.json"):
        doc = json.loads(path.read_text(encoding="utf-8"))
        path.write_text(json.dumps(_poison(doc, HOSTILE), ensure_ascii=False), encoding="utf-8")
    return storage


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string (controls escaped, everything else as it is)."""
    escaped = "".join(
        f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7F or c in '"\\' else c for c in text
    )
    return f'"{escaped}"'


def hostile_config(folder: Path, key: str) -> Path:
    """A configuration file whose ``key`` holds hostile text."""
    path = folder / f"config{HOSTILE_NAME}.toml"
    path.write_text(f"{key} = {toml_string(HOSTILE)}\n", encoding="utf-8")
    return path


def all_inputs(folder: Path) -> dict[str, Path]:
    return {
        "native": native_file(folder),
        "claude_code": claude_code_file(folder),
        "claude_code_sidechains": claude_code_file(folder, "sidechains.jsonl"),
        "claude_code_project": claude_code_project(folder),
        "opencode": opencode_storage(folder),
    }
