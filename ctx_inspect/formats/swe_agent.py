"""SWE-agent trajectories: one ``*.traj`` JSON document per task instance.

The document holds ``history[]`` (the message list as SWE-agent built it: ``role``, ``content``,
``agent``, ``message_type``, ``thought``, ``action``, ``tool_calls`` / ``tool_call_ids``,
``is_demo``), ``trajectory[]`` (one entry per step: action, observation, response, state, and in
v1 replays a ``messages`` snapshot of the prompt), ``info`` (``exit_status``, ``submission``,
``model_stats``) and sometimes ``replay_config`` / ``environment``.

What it becomes:

- ``history`` is the timeline: one message per item, ids ``h<index>``. Messages are converted
  as OpenAI Chat Completions messages (``tool_calls``, the plural ``tool_call_ids``, content as
  text or parts). Demonstrations (``is_demo``) are injected examples, a large fixed cost the
  agent did not write: kind ATTACHMENT (still sent to the model). The per-step ``messages``
  snapshots are not read: they repeat ``history`` as processed for one request (e.g. with old
  observations elided by ``last_n_observations``); only when ``history`` is missing is the last
  snapshot used instead.
- A ``RequestSent`` goes before each assistant message. The file stores no per-call usage.
- ``SessionInfo``: agent "swe-agent", the model named in ``replay_config`` (when there is one),
  and as extra ``model_stats`` (``tokens_sent`` is cumulative over all calls, a sum of prompt
  sizes, not a context size), ``exit_status``, ``submission``, the history processors and the
  number of trajectory steps.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from ctx_inspect.core.model import (
    Event,
    Message,
    MessageAdded,
    MessageKind,
    ParseIssue,
    RequestSent,
    Role,
    SessionInfo,
    SourceSpan,
)
from ctx_inspect.formats.base import DocumentParser, compact_json, excerpt
from ctx_inspect.formats.chat_common import as_str, kind_for, type_name
from ctx_inspect.formats.json_prefix import parse_prefix
from ctx_inspect.formats.registry import FormatSpec, Head, register


class SweAgentParser(DocumentParser):
    format_name = "swe-agent"

    def finish(self) -> list[Event]:
        size = self._size
        data = b"".join(self._chunks)
        self._chunks = []
        span = SourceSpan(source=self.source, offset=0, length=size, line=1)
        if size > self.max_document_bytes:
            return [self.issue(span, f"document too large ({size} bytes); not read")]
        if not data.strip():
            return []
        out: list[Event] = []
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as err:
            line = data.count(b"\n", 0, err.start) + 1
            where = SourceSpan(source=self.source, offset=err.start, length=0, line=line)
            bad = data[max(err.start - 40, 0) : err.start + 40]
            out.append(self.issue(where, "invalid UTF-8 replaced with U+FFFD", bad))
            data = data.decode("utf-8", "replace").encode()
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            shown = data[max(exc.pos - 60, 0) : exc.pos + 60]
            at = (exc.lineno, exc.pos)
            out.append(self.issue(span, f"not valid JSON ({exc.msg})", shown, at=at))
            return out
        out.extend(self.parse_document(value, span))
        return out

    def parse_document(self, value: Any, span: SourceSpan) -> Iterable[Event]:
        out: list[Event] = []
        if not isinstance(value, dict):
            out.append(self.issue(span, f"not a SWE-agent trajectory ({type_name(value)})"))
            return out
        history = value.get("history")
        source = "history"
        if not isinstance(history, list):
            history = _last_snapshot(value.get("trajectory"))
            source = "trajectory[-1].messages"
        info = _session_info(value, source)
        out.append(info)
        if history is None:
            keys = ", ".join(list(value)[:8]) or "none"
            out.append(self.issue(span, f"no history in this trajectory (keys: {keys})"))
            return out
        # Imported here, not at the top: importing another format module would register it
        # before this one and change the registry's order (ties, guesses by extension).
        from ctx_inspect.formats.openai_chat import OpenAIChatParser

        convert = OpenAIChatParser(self.source, self.path)
        for index, raw in enumerate(history):
            try:
                converted = convert.convert(raw)
            except Exception as exc:  # a reader bug must not lose the rest
                converted = f"unreadable message ({type(exc).__name__}: {exc})"
            if isinstance(converted, str):
                text = compact_json(raw)[:200]
                out.append(self._item_issue(f"history[{index}]: {converted}", text))
                continue
            kind = converted.kind or kind_for(converted.role, converted.parts)
            if isinstance(raw, dict) and raw.get("is_demo") is True:
                kind = MessageKind.ATTACHMENT
            message = Message(
                id=f"h{index}",
                role=converted.role,
                kind=kind,
                parts=tuple(converted.parts),
                name=as_str(raw.get("agent")) if isinstance(raw, dict) else None,
                model=info.model if converted.role is Role.ASSISTANT else None,
            )
            if converted.role is Role.ASSISTANT:
                out.append(RequestSent(model=info.model))
            out.append(MessageAdded(message=message))
        return out

    def _item_issue(self, reason: str, raw: str) -> ParseIssue:
        return ParseIssue(
            file=self.path,
            line=0,
            offset=0,
            reason=reason,
            excerpt=excerpt(raw),
        )


def _last_snapshot(trajectory: Any) -> list[Any] | None:
    if not isinstance(trajectory, list):
        return None
    for step in reversed(trajectory):
        if isinstance(step, dict) and isinstance(step.get("messages"), list):
            messages: list[Any] = step["messages"]
            return messages
    return None


def _session_info(value: dict[str, Any], source: str) -> SessionInfo:
    info = value.get("info")
    info = info if isinstance(info, dict) else {}
    extra: dict[str, Any] = {"history_source": source}
    for key in ("model_stats", "exit_status", "submission"):
        if info.get(key) is not None:
            extra[key] = info[key]
    trajectory = value.get("trajectory")
    if isinstance(trajectory, list):
        extra["trajectory_steps"] = len(trajectory)
    environment = value.get("environment")
    if isinstance(environment, str) and environment:
        extra["environment"] = environment
    model: str | None = None
    config = value.get("replay_config")
    if isinstance(config, str):
        try:
            config = orjson.loads(config)
        except orjson.JSONDecodeError:
            config = None
    agent = config.get("agent") if isinstance(config, dict) else None
    if isinstance(agent, dict):
        model_config = agent.get("model")
        if isinstance(model_config, dict):
            model = as_str(model_config.get("name"))
        processors = agent.get("history_processors")
        if processors:
            extra["history_processors"] = processors
    return SessionInfo(
        agent="swe-agent",
        model=model,
        version=as_str(info.get("swe_agent_version")),
        extra=extra,
    )


def sniff(head: Head) -> float:
    text = head.text.lstrip("\ufeff").lstrip()
    if not text.startswith("{"):
        return 0.0
    value = parse_prefix(text[:HEAD_SAMPLE], max_depth=2)
    if not isinstance(value, dict):
        return 0.0
    keys = set(value)
    if {"history", "trajectory", "info"} <= keys:
        return 1.0
    if head.path.suffix == ".traj" and keys & {"history", "trajectory", "info"}:
        return 0.95
    steps = value.get("trajectory")
    first = steps[0] if isinstance(steps, list) and steps else None
    step_like = (
        isinstance(first, dict)
        and {"action", "observation"} <= set(first)
        and bool({"response", "thought"} & set(first))
    )
    if step_like or {"history", "trajectory"} <= keys:
        return 0.8
    return 0.0


HEAD_SAMPLE = 64 * 1024

SPEC = register(
    FormatSpec(
        name="swe-agent",
        description="SWE-agent trajectories (*.traj: history, trajectory and info)",
        reads="*.traj files in SWE-agent's trajectories/<user>/<run>/ folders",
        parser=SweAgentParser,
        sniff=sniff,
        default_profile="generic",
    )
)
