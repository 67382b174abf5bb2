"""Where a line of a Claude Code transcript belongs: its session (the facts its first lines
give, a sub-agent file's parent), its thread (inline sidechains, sub-agents), its message id, its
place on the conversation tree, and the response it is part of.

The conversation is a tree (``uuid`` / ``parentUuid``). The main chain is followed
incrementally: when a line's parent is an earlier point than the response in progress (a rewind
or an edited prompt), ``ContextReset`` goes back to the message the branch continues from. Tool
results of parallel tool calls point at the tool-call line of the same response; that is no
branch.

``EnvelopeReader`` keeps that state for the readers built on it, which share it line by line:
the full reader (``reader_lines.LineReader``) and its fast path (``reader_fast``).
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

from ctx_inspect.agents.claude_code.profile import WINDOW_1M
from ctx_inspect.agents.claude_code.records import (
    AGENT,
    request_event,
    text_or_none,
    usage_event,
)
from ctx_inspect.agents.claude_code.subagents import meta_facts, parent_call
from ctx_inspect.core.model import (
    ContextReset,
    Event,
    Message,
    MessageAdded,
    MessageKind,
    Part,
    Role,
    SessionInfo,
    SourceSpan,
)
from ctx_inspect.formats.base import EventSink, LineParser, trusted

MAX_CHAIN_WALK = 1_000_000
SHARED_STRINGS = 4096  # recurring strings kept once (see ``_shared``)
FACT_KEYS = (("version", "version"), ("cwd", "cwd"), ("gitBranch", "git_branch"))
FACT_LINES = 1000  # lines searched for session facts the first lines lack
_AGENT_FILE = re.compile(r"^agent-([0-9A-Za-z_-]+)\.jsonl$")


class EnvelopeReader(LineParser):
    """The state a Claude Code reader keeps across lines: session facts, threads, ids, the
    main chain and the open responses (see the module's docstring)."""

    stream_json: ClassVar[bool] = False  # the CLI's stream-json stdout (snake_case envelopes)

    def __init__(self, source: int = 0, path: str = "") -> None:
        super().__init__(source, path)
        name = Path(path).name if path else ""
        match = _AGENT_FILE.match(name)
        self._agent_file_id: str | None = match.group(1) if match else None
        self._subagent_file: bool | None = True if match else None  # None: not decided yet
        self._info_sent = False
        self._facts_missing: dict[str, str] = dict(FACT_KEYS)  # envelope key -> our name
        self._facts_budget = FACT_LINES  # lines still searched for missing facts
        self._model: str | None = None
        self._parent_link_sent = False
        self._session_id: str | None = None
        self._agent_id: str | None = None
        # The main chain: every main-thread line with a uuid is a node.
        self._node: dict[str, int] = {}
        self._node_parent = array("l")  # parent node, -1 when none or unknown
        self._node_message: list[str | None] = []  # the node's own message id
        self._last_node = -1
        self._segment: set[int] = set()  # nodes since the latest response began
        # Responses (API calls), per thread: the open one and its usage.
        self._open: dict[str, tuple[str | None, tuple[int, int, int, int] | None]] = {}
        self._responses: set[str] = set()
        # Tools, sidechains, sub-agents.
        self._tool_names: dict[str, str] = {}
        self._results: dict[str, str] = {}  # tool call id -> tool-result message id (main)
        self._threads: dict[str, str] = {}  # sidechain line uuid -> thread
        self._sidechains = 0
        self._task_prompts: dict[str, str] = {}  # Task/Agent prompt -> tool call id
        self._subagents: dict[str, str] = {}  # tool call id -> agent id or thread
        self._pending_link = False  # a sub-agent link to announce
        self._skipped: tuple[bytes, int, int] | None = None  # the toolUseResult not parsed
        self._dup_lines: set[int] = set()  # lines whose uuid was seen before (id gets #line)
        self._reread = False
        self._strings: dict[str, str] = {}
        self._refused = False  # the provider refused the latest main request (not yet answered)
        self._max_output: int | None = None  # the max_tokens the agent's requests ask for

    def end_of_input(self) -> Iterable[Event]:
        if self._reread:
            return ()
        if self._subagent_file and not self._parent_link_sent and self._agent_id:
            link = self._find_parent_call()
            if link is not None:
                self._parent_link_sent = True
                return [SessionInfo(extra={"parent_tool_use_id": link})]
        return ()

    # -- session facts ----------------------------------------------------------------------

    def _session_info(self, obj: dict[str, Any], span: SourceSpan, out: list[Event]) -> None:
        session_id = text_or_none(obj.get("session_id" if self.stream_json else "sessionId"))
        if session_id is None:
            return
        self._info_sent = True
        self._session_id = session_id
        ts = text_or_none(obj.get("timestamp"))
        if self.stream_json:
            self._facts_missing.clear()
            self._stream_info(obj, session_id, span, out)
            return
        extra = self._take_facts(obj)
        slug = text_or_none(obj.get("slug"))
        if slug is not None:
            extra["slug"] = slug
        version = extra.pop("version", None)
        agent_id = text_or_none(obj.get("agentId"))
        if self._subagent_file is None:
            self._subagent_file = bool(
                obj.get("isSidechain") is True and agent_id and obj.get("parentUuid") is None
            )
        session_label = session_id
        if self._subagent_file:
            self._agent_id = agent_id or self._agent_file_id
            extra["parent_session"] = session_id
            if self._agent_id:
                extra["agent_id"] = self._agent_id
                session_label = f"{session_id}/agent-{self._agent_id}"
            extra.update(meta_facts(self.path))
            if "parent_tool_use_id" not in extra and self._agent_id:
                link = self._find_parent_call()
                if link is not None:
                    extra["parent_tool_use_id"] = link
            self._parent_link_sent = "parent_tool_use_id" in extra
        out.append(
            SessionInfo(
                agent=AGENT,
                version=version,
                session_id=session_label,
                extra=extra,
                timestamp=ts,
                span=span,
            )
        )

    def _take_facts(self, obj: dict[str, Any]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for key, name in list(self._facts_missing.items()):
            value = text_or_none(obj.get(key))
            if value is not None:
                found[name] = value
                del self._facts_missing[key]
        return found

    def _late_facts(self, obj: dict[str, Any], span: SourceSpan, out: list[Event]) -> None:
        """Version, cwd or branch that the first line with a session id did not carry."""
        self._facts_budget -= 1
        found = self._take_facts(obj)
        if found:
            version = found.pop("version", None)
            out.append(SessionInfo(version=version, extra=found, span=span))

    def _stream_info(
        self, obj: dict[str, Any], session_id: str | None, span: SourceSpan, out: list[Event]
    ) -> None:
        extra: dict[str, Any] = {}
        if text_or_none(obj.get("cwd")):
            extra["cwd"] = obj["cwd"]
        tools = obj.get("tools")
        if isinstance(tools, list):
            extra["tool_count"] = len(tools)
        model = text_or_none(obj.get("model")) if obj.get("subtype") == "init" else None
        if model is not None:
            self._model = model
        out.append(
            SessionInfo(
                agent=AGENT,
                model=model,
                context_window=WINDOW_1M if model and "[1m]" in model.lower() else None,
                version=text_or_none(obj.get("claude_code_version")),
                session_id=session_id,
                extra=extra,
                span=span,
            )
        )

    def _find_parent_call(self) -> str | None:
        """The parent's tool call that ran this sub-agent (``subagents.parent_call``)."""
        if not self.path or not self._agent_id or not self._session_id:
            return None
        return parent_call(self.path, self._session_id, self._agent_id)

    def _model_info(self, model: str, span: SourceSpan, out: EventSink) -> None:
        self._model = model
        out.append(
            SessionInfo(
                model=model,
                context_window=WINDOW_1M if "[1m]" in model.lower() else None,
                span=span,
            )
        )

    # -- threads and the chain --------------------------------------------------------------

    def _thread(self, obj: dict[str, Any]) -> str:
        if self.stream_json:
            parent_call = obj.get("parent_tool_use_id")
            if not parent_call:
                return "main"
            agent = text_or_none(obj.get("agent_id")) or str(parent_call)
            return self._shared(f"agent-{agent}")
        if obj.get("isSidechain") is not True or self._subagent_file:
            return "main"
        uuid = obj.get("uuid")
        if isinstance(uuid, str) and uuid in self._threads:
            return self._threads[uuid]
        agent_id = text_or_none(obj.get("agentId"))
        parent = obj.get("parentUuid")
        if agent_id is not None:
            thread = self._shared(f"agent-{agent_id}")
        elif isinstance(parent, str) and parent in self._threads:
            thread = self._threads[parent]
        else:
            self._sidechains += 1
            thread = f"sidechain-{self._sidechains}"
            self._link_sidechain(obj, thread)
        if isinstance(uuid, str) and not self._reread:
            self._threads[uuid] = thread
        return thread

    def _link_sidechain(self, obj: dict[str, Any], thread: str) -> None:
        """A v1.0 inline sub-agent run starts with the prompt of the Task call that ran it."""
        message = obj.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            call = self._task_prompts.pop(content, None)
            if call is not None:
                self._subagents[call] = thread
                self._pending_link = True

    def _shared(self, text: str) -> str:
        """One string object for a text that recurs (model and tool names, log texts of
        metadata lines, thread names), so many events can hold it without a copy each."""
        shared = self._strings.get(text)
        if shared is None:
            if len(self._strings) >= SHARED_STRINGS:
                return text
            shared = self._strings[text] = text
        return shared

    def _message_id(self, obj: dict[str, Any], span: SourceSpan) -> str:
        uuid = obj.get("uuid")
        return self._id_of(uuid if isinstance(uuid, str) and uuid else None, span.line)

    def _id_of(self, uuid: str | None, line: int) -> str:
        """The message id of a line: its uuid, made unique by the line number when seen before."""
        if uuid is None:
            return f"line{line}"
        if self._reread:
            return f"{uuid}#{line}" if line in self._dup_lines else uuid
        if uuid in self._node or uuid in self._threads:
            self._dup_lines.add(line)
            return f"{uuid}#{line}"
        return uuid

    def _enter_main(self, obj: dict[str, Any], span: SourceSpan, out: list[Event]) -> int:
        """Place a main-thread line on the chain; emits ContextReset when it starts a branch.
        Returns its node (or -1 when the line has no uuid)."""
        uuid = obj.get("uuid")
        if self.stream_json or not isinstance(uuid, str) or not uuid:
            return -1
        parent = obj.get("parentUuid")
        return self._enter_node(
            uuid,
            parent if parent is None or isinstance(parent, str) else "",
            obj.get("type") == "user",
            obj.get("subtype") == "compact_boundary",
            span,
            out,
        )

    def _enter_node(
        self,
        uuid: str,
        parent: str | None,
        user: bool,
        boundary: bool,
        span: SourceSpan,
        out: EventSink,
    ) -> int:
        """``_enter_main`` from the line's values (``parent`` is "" when it is not a string)."""
        parent_node = self._node.get(parent, -1) if parent is not None else -1
        if self._last_node >= 0 and not boundary:
            if parent is None and user:
                out.append(ContextReset(keep_through=None, reason="new-root", span=span))
                self._segment = set()
            elif parent_node >= 0 and parent_node not in self._segment:
                keep = self._anchor(parent_node)
                out.append(ContextReset(keep_through=keep, reason="rewind", span=span))
                self._segment = set()
        node = len(self._node_message)
        self._node[uuid] = node
        self._node_parent.append(parent_node)
        self._node_message.append(None)
        self._last_node = node
        self._segment.add(node)
        return node

    def _anchor(self, node: int) -> str | None:
        """The latest message at or above ``node`` on its chain."""
        parents = self._node_parent
        messages = self._node_message
        for _ in range(MAX_CHAIN_WALK):
            if node < 0:
                return None
            mid = messages[node]
            if mid is not None:
                return mid
            node = parents[node]
        return None

    def _emit_message(
        self,
        out: list[Event],
        span: SourceSpan,
        mid: str,
        role: Role,
        kind: MessageKind,
        parts: list[Part],
        *,
        thread: str,
        node: int,
        timestamp: str | None,
        model: str | None = None,
        visible: bool = True,
    ) -> None:
        if node >= 0:
            self._node_message[node] = mid
        message = trusted(
            Message,
            {
                "id": mid,
                "role": role,
                "kind": kind,
                "parts": tuple(parts),
                "visible": visible,
                "parent_id": None,
                "timestamp": timestamp,
                "model": model,
                "name": None,
                "thread": thread,
            },
        )
        out.append(
            trusted(
                MessageAdded,
                {
                    "timestamp": timestamp,
                    "span": span,
                    "type": "message",
                    "message": message,
                    "tokens": None,
                    "tokens_origin": None,
                },
            )
        )

    def _flush_links(self, span: SourceSpan, out: EventSink) -> None:
        if self._pending_link and not self._reread:
            self._pending_link = False
            out.append(SessionInfo(extra={"subagents": dict(self._subagents)}, span=span))

    def _preserved_nodes(self, meta: dict[str, Any]) -> list[int]:
        """The nodes a partial compaction kept verbatim, oldest first."""
        nodes: list[int] = []
        segment = meta.get("preservedSegment")
        if isinstance(segment, dict):
            head = self._node.get(text_or_none(segment.get("headUuid")) or "", -1)
            node = self._node.get(text_or_none(segment.get("tailUuid")) or "", -1)
            walked: list[int] = []
            for _ in range(MAX_CHAIN_WALK):
                if node < 0:
                    break
                walked.append(node)
                if node == head:
                    break
                node = self._node_parent[node]
            if head >= 0 and walked and walked[-1] == head:
                nodes.extend(reversed(walked))
        preserved = meta.get("preservedMessages")
        if isinstance(preserved, dict):
            for key in ("uuids", "allUuids"):
                uuids = preserved.get(key)
                if isinstance(uuids, list):
                    for uuid in uuids:
                        node = self._node.get(uuid, -1) if isinstance(uuid, str) else -1
                        if node >= 0:
                            nodes.append(node)
        return list(dict.fromkeys(nodes))

    # -- responses --------------------------------------------------------------------------

    def _response_of(
        self,
        key: str | None,
        usage: tuple[int, int, int, int] | None,
        model: str | None,
        thread: str,
        span: SourceSpan,
        ts: str | None,
        out: EventSink,
    ) -> None:
        """A response's line: the request when it is the response's first, else its usage when
        that changed."""
        request, report = self._response_step(key, usage, thread)
        if request:
            out.append(request_event(model, key, thread, ts, span))
        if report:
            assert usage is not None
            out.append(usage_event(usage, model, key, thread, ts, span))

    def _response_step(
        self, key: str | None, usage: tuple[int, int, int, int] | None, thread: str
    ) -> tuple[bool, bool]:
        """Whether a response's line is a request, and whether it reports a usage (see
        ``_response_of``)."""
        current = self._open.get(thread)
        if key is not None and current is not None and current[0] == key:
            if usage is not None and usage != current[1]:
                self._open[thread] = (key, usage)
                return False, True
            return False, False
        if key is not None:
            if key in self._responses:
                return False, False  # a late line of an earlier response: no new request
            self._responses.add(key)
        self._open[thread] = (key, usage)
        if thread == "main":
            self._segment = {self._last_node} if self._last_node >= 0 else set()
            self._refused = False
        return True, usage is not None
