"""Every line of a Claude Code transcript read whole: ``LineReader``, the full reader.

Each line type becomes the events ``reader``'s docstring lists: assistant and user lines their
message (with its body), the first line of a response its request and usage, system lines
compactions, micro-compactions, refusals and log lines, metadata lines log lines. Where a line
belongs (session, thread, id, chain, response) is ``EnvelopeReader``'s. The session reader adds
reading without bodies to it (``reader_fast``), for the lines that need no more than their own
values.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterable
from typing import Any

import orjson

from ctx_inspect.agents.claude_code.reader_envelope import EnvelopeReader
from ctx_inspect.agents.claude_code.records import (
    BOM,
    CALL_TYPES,
    ERROR_SUBTYPES,
    SYNTHETIC_MODEL,
    TASK_TOOLS,
    attachment_pieces,
    attachment_text,
    document_part,
    image_part,
    log_event,
    loose_part,
    make_part,
    metadata_text,
    positive_int,
    refusal_of,
    request_event,
    result_content,
    shortened,
    text_or_none,
    unknown_block,
    usage_key,
)
from ctx_inspect.core.model import (
    Compacted,
    Event,
    Message,
    MessageAdded,
    MessageKind,
    Part,
    PartType,
    Pruned,
    RequestRejected,
    Role,
    SessionInfo,
    SourceSpan,
)
from ctx_inspect.formats.chat_common import compact_json, kind_for, type_name

_RESULT_KEY = b',"toolUseResult":'
_USER_TYPE = b'"type":"user"'
ENVELOPE_BYTES = 1024  # a user line says its type before its message
_AFTER_RESULT = (b',"sourceToolAssistantUUID":', b',"sandboxed":')
# Keys read from a user line: none of them may sit in the bytes left out.
_USED_KEY = re.compile(
    rb',"(?:uuid|parentUuid|timestamp|type|message|isSidechain|agentId|isMeta|isCompactSummary'
    rb'|sessionId|version|cwd|gitBranch|slug)":'
)
RESULT_TAIL_WINDOW = 4096  # the keys after toolUseResult are looked for in the line's tail


class LineReader(EnvelopeReader):
    """Reads every line of a Claude Code session file (or sub-agent file) whole."""

    # -- entry points -----------------------------------------------------------------------

    def feed(self, data: bytes) -> list[Event]:
        # Reading a chunk makes many short-lived containers (each line's parsed JSON) while
        # the session keeps many long-lived ones, so the cyclic collector, run every few
        # hundred allocations, mostly rescans what the session keeps (about a quarter of the
        # time to load a 256 MB transcript). Nothing here makes reference cycles worth
        # collecting mid-chunk; the collector runs again as soon as the chunk is read.
        if not gc.isenabled():
            return super().feed(data)
        gc.disable()
        try:
            return super().feed(data)
        finally:
            gc.enable()

    def parse_line(self, line: bytes, span: SourceSpan) -> Iterable[Event]:
        try:
            return self._parse(line, span)
        finally:
            self._skipped = None  # do not keep the line's bytes past it

    def _parse(self, line: bytes, span: SourceSpan) -> list[Event]:
        out: list[Event] = []
        if span.offset == 0 and line.startswith(BOM):
            line = line[3:]
        obj = None
        if not self.stream_json and line.find(_USER_TYPE, 0, ENVELOPE_BYTES) >= 0:
            pos = line.find(_RESULT_KEY)
            if pos > 0:
                obj = self._load_without_result(line, pos)
        if obj is None:
            obj = self.load_json(line, span, out)
        if not isinstance(obj, dict):
            if obj is not None or not out:
                out.append(self.issue(span, f"not a JSON object ({type_name(obj)})", line))
            return out
        kind = obj.get("type")
        if not isinstance(kind, str):
            out.append(self.issue(span, "record without a type", line))
            return out
        if self._facts_budget and not self._reread:
            if not self._info_sent:
                self._session_info(obj, span, out)
            elif self._facts_missing:
                self._late_facts(obj, span, out)
        if kind == "assistant":
            self._assistant(obj, span, out)
        elif kind == "user":
            self._user(obj, span, out)
        elif kind == "system":
            self._system(obj, span, out)
        elif kind == "attachment":
            self._attachment(obj, span, out)
        elif not self._reread:
            self._metadata(kind, obj, span, out)
        return out

    def _load_without_result(self, line: bytes, pos: int) -> dict[str, Any] | None:
        """The line's object without its ``toolUseResult``, or None to parse it whole.

        ``toolUseResult`` is the CLI's own copy of a tool's result, not context, and often as
        big as the result itself: only the bytes around it are parsed. Its value runs to the
        next top-level key (2.1: ``sourceToolAssistantUUID``, sometimes ``sandboxed``) or to the
        closing brace (1.0, 2.0). The cut is right when what is left parses as one object (a cut
        at any other depth leaves the braces unbalanced) and the bytes left out hold none of the
        keys this reader uses (else the value was not the last one before the cut, and the line
        is parsed whole). The value itself is only read back when a Task/Agent result needs its
        ``agentId``.
        """
        start = pos + len(_RESULT_KEY)
        end = len(line)
        window = max(start, end - RESULT_TAIL_WINDOW)
        cut = -1
        for key in _AFTER_RESULT:
            found = line.find(key, window)
            if found >= 0 and (cut < 0 or found < cut):
                cut = found
        if cut >= 0:
            head = line[:pos] + line[cut:]
        elif line.endswith(b"}"):
            head = line[:pos] + b"}"
            cut = end - 1
        else:
            return None
        try:
            obj = orjson.loads(head)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(obj, dict) or _RESULT_KEY in head:
            return None
        if _USED_KEY.search(line, start, cut) is not None:
            return None
        self._skipped = (line, start, cut)
        return obj

    def _skipped_result(self) -> Any:
        """The ``toolUseResult`` that ``_load_without_result`` left out, parsed now."""
        if self._skipped is None:
            return None
        line, start, end = self._skipped
        try:
            return orjson.loads(line[start:end])
        except orjson.JSONDecodeError:
            return None

    def messages_at(self, data: bytes, span: SourceSpan) -> list[Message]:
        """Re-read the message of one line, with the id and thread the first read gave it."""
        fresh = type(self)(self.source, self.path)
        fresh._reread = True
        fresh._subagent_file = self._subagent_file
        fresh._agent_id = self._agent_id
        fresh._tool_names = self._tool_names
        fresh._threads = self._threads
        fresh._dup_lines = self._dup_lines
        fresh._line_no = max(span.line - 1, 0)
        fresh._offset = span.offset
        events = [*fresh.feed(data + b"\n"), *fresh.finish()]
        return [e.message for e in events if isinstance(e, MessageAdded)]

    # -- assistant --------------------------------------------------------------------------

    def _assistant(self, obj: dict[str, Any], span: SourceSpan, out: list[Event]) -> None:
        message = obj.get("message")
        if not isinstance(message, dict):
            out.append(self.issue(span, "assistant line without a message object"))
            return
        mid = self._message_id(obj, span)
        thread = self._thread(obj)
        main = thread == "main"
        node = self._enter_main(obj, span, out) if main and not self._reread else -1
        ts = text_or_none(obj.get("timestamp"))
        model = message.get("model")
        model = self._shared(model) if isinstance(model, str) and model else None
        synthetic = model == SYNTHETIC_MODEL
        if not synthetic and not self._reread:
            if main and model is not None and model != self._model:
                self._model_info(model, span, out)
            self._response(obj, message, model, thread, span, ts, out)
        elif synthetic and not self._reread:
            self._note_refusal(obj, thread, ts, span, out)
        parts = self._assistant_parts(message.get("content"), main)
        kind = MessageKind.META if synthetic else kind_for(Role.ASSISTANT, parts)
        self._emit_message(
            out,
            span,
            mid,
            Role.ASSISTANT,
            kind,
            parts,
            thread=thread,
            node=node,
            timestamp=ts,
            model=model,
            visible=not synthetic,
        )

    def _response(
        self,
        obj: dict[str, Any],
        message: dict[str, Any],
        model: str | None,
        thread: str,
        span: SourceSpan,
        ts: str | None,
        out: list[Event],
    ) -> None:
        key = text_or_none(message.get("id")) or text_or_none(
            obj.get("request_id" if self.stream_json else "requestId")
        )
        self._response_of(key, usage_key(message.get("usage")), model, thread, span, ts, out)

    def _assistant_parts(self, content: Any, main: bool) -> list[Part]:
        if isinstance(content, str):
            return [make_part(PartType.TEXT, content)] if content else []
        if not isinstance(content, list):
            return []
        parts: list[Part] = []
        for block in content:
            if not isinstance(block, dict):
                parts.append(loose_part(block))
                continue
            btype = text_or_none(block.get("type"))  # a list would not even hash
            if btype == "text":
                parts.append(make_part(PartType.TEXT, text_or_none(block.get("text")) or ""))
            elif btype == "thinking":
                parts.append(
                    make_part(PartType.THINKING, text_or_none(block.get("thinking")) or "")
                )
            elif btype == "redacted_thinking":
                data = block.get("data")
                size = len(data) if isinstance(data, str) else 0
                parts.append(Part(type=PartType.THINKING, data_bytes=size))
            elif btype in CALL_TYPES:
                parts.append(self._call_part(block, main))
            else:
                parts.append(unknown_block(block))
        return parts

    def _call_part(self, block: dict[str, Any], main: bool) -> Part:
        call_id = text_or_none(block.get("id"))
        name = block.get("name")
        name = self._shared(name) if isinstance(name, str) and name else None
        raw = block.get("input")
        arguments = compact_json(raw) if raw is not None else ""
        if call_id is not None and name is not None and not self._reread:
            self._tool_names[call_id] = name
            if main and name in TASK_TOOLS and isinstance(raw, dict):
                prompt = raw.get("prompt")
                if isinstance(prompt, str):
                    self._task_prompts[prompt] = call_id
        return make_part(PartType.TOOL_CALL, tool_name=name, call_id=call_id, arguments=arguments)

    # -- user -------------------------------------------------------------------------------

    def _user(self, obj: dict[str, Any], span: SourceSpan, out: list[Event]) -> None:
        message = obj.get("message")
        if not isinstance(message, dict):
            out.append(self.issue(span, "user line without a message object"))
            return
        mid = self._message_id(obj, span)
        thread = self._thread(obj)
        self._flush_links(span, out)
        main = thread == "main"
        node = self._enter_main(obj, span, out) if main and not self._reread else -1
        parts, results = self._user_parts(message.get("content"))
        if obj.get("isCompactSummary") is True:
            kind = MessageKind.SUMMARY
        elif results:
            kind = MessageKind.TOOL_RESULT
        elif obj.get("isMeta") is True:
            kind = MessageKind.ATTACHMENT
        else:
            kind = MessageKind.MESSAGE
        if results and not self._reread:
            if main:
                for call_id in results:
                    self._results[call_id] = mid
            self._note_subagent_result(obj, results, span, out)
        ts = text_or_none(obj.get("timestamp"))
        self._emit_message(
            out, span, mid, Role.USER, kind, parts, thread=thread, node=node, timestamp=ts
        )

    def _user_parts(self, content: Any) -> tuple[list[Part], list[str]]:
        if isinstance(content, str):
            return ([make_part(PartType.TEXT, content)] if content else []), []
        if not isinstance(content, list):
            return [], []
        parts: list[Part] = []
        results: list[str] = []
        for block in content:
            if not isinstance(block, dict):
                parts.append(loose_part(block))
                continue
            btype = block.get("type")
            if btype == "text":
                parts.append(make_part(PartType.TEXT, text_or_none(block.get("text")) or ""))
            elif btype == "tool_result":
                call_id = text_or_none(block.get("tool_use_id"))
                if call_id is not None:
                    results.append(call_id)
                self._result_parts(block, call_id, parts)
            elif btype == "image":
                parts.append(image_part(block))
            elif btype == "document":
                parts.append(document_part(block))
            else:
                parts.append(unknown_block(block))
        return parts, results

    def _result_parts(self, block: dict[str, Any], call_id: str | None, parts: list[Part]) -> None:
        name = self._tool_names.get(call_id) if call_id is not None else None
        is_error = block.get("is_error") is True
        text, extra = result_content(block.get("content"))
        parts.append(
            make_part(
                PartType.TOOL_RESULT, text, tool_name=name, call_id=call_id, is_error=is_error
            )
        )
        parts.extend(extra)

    def _note_subagent_result(
        self, obj: dict[str, Any], results: list[str], span: SourceSpan, out: list[Event]
    ) -> None:
        """A Task/Agent result names the sub-agent it ran (``toolUseResult.agentId``)."""
        meta = obj.get("tool_use_result" if self.stream_json else "toolUseResult")
        if meta is None and self._skipped is not None:
            names = self._tool_names
            if any(names.get(call, "Task") in TASK_TOOLS for call in results):
                meta = self._skipped_result()
        if not isinstance(meta, dict):
            return
        agent_id = text_or_none(meta.get("agentId"))
        if agent_id is None or len(results) != 1:
            return
        call = results[0]
        if self._subagents.get(call) == agent_id:
            return
        self._subagents[call] = agent_id
        out.append(SessionInfo(extra={"subagents": dict(self._subagents)}, span=span))

    # -- attachments ------------------------------------------------------------------------

    def _attachment(self, obj: dict[str, Any], span: SourceSpan, out: list[Event]) -> None:
        att = obj.get("attachment")
        atype = text_or_none(att.get("type")) if isinstance(att, dict) else None
        mid = self._message_id(obj, span)
        thread = self._thread(obj)
        main = thread == "main"
        node = self._enter_main(obj, span, out) if main and not self._reread else -1
        text = attachment_text(obj, att if isinstance(att, dict) else {}, atype)
        ts = text_or_none(obj.get("timestamp"))
        if text is None:
            if not self._reread:
                out.append(
                    log_event(self._shared(f"attachment {atype or '?'}"), "attachment", ts, span)
                )
            return
        parts = [make_part(PartType.TEXT, piece) for piece in attachment_pieces(obj, text)]
        self._emit_message(
            out,
            span,
            mid,
            Role.USER,
            MessageKind.ATTACHMENT,
            parts,
            thread=thread,
            node=node,
            timestamp=ts,
        )

    # -- system -----------------------------------------------------------------------------

    def _system(self, obj: dict[str, Any], span: SourceSpan, out: list[Event]) -> None:
        if self._reread:
            return
        subtype = text_or_none(obj.get("subtype"))
        thread = self._thread(obj)
        main = thread == "main"
        ts = text_or_none(obj.get("timestamp"))
        if self.stream_json and subtype == "init":
            if not any(isinstance(e, SessionInfo) for e in out):  # not the first line: a resume
                self._stream_info(obj, text_or_none(obj.get("session_id")), span, out)
            return
        if subtype == "compact_boundary":
            self._compaction(obj, thread, span, ts, out)
            return
        if main:
            self._enter_main(obj, span, out)
        if subtype == "microcompact_boundary":
            self._microcompaction(obj, thread, span, ts, out)
            return
        if self.stream_json and subtype == "task_started":
            call = text_or_none(obj.get("tool_use_id"))
            task = text_or_none(obj.get("task_id"))
            if call is not None and task is not None:
                self._subagents[call] = task
                out.append(SessionInfo(extra={"subagents": dict(self._subagents)}, span=span))
                return
        level = text_or_none(obj.get("level"))
        if subtype in ERROR_SUBTYPES:
            level = "error"
            self._note_refusal(obj, thread, ts, span, out)
        content = obj.get("content")
        label = subtype or "system"
        text = f"{label}: {shortened(content)}" if isinstance(content, str) and content else label
        out.append(log_event(text, "system", ts, span, level))

    def _note_refusal(
        self, obj: dict[str, Any], thread: str, ts: str | None, span: SourceSpan, out: list[Event]
    ) -> None:
        """A line that reports the provider refusing the latest request as too long: the
        request (no line of its own records it) and its refusal, once per request."""
        found = refusal_of(obj)
        if found is None:
            return
        main = thread == "main"
        if main and self._refused:
            return  # another report of the same refusal
        reason, tokens, limit = found
        out.append(request_event(self._model, None, thread, ts, span))
        out.append(
            RequestRejected(
                reason=reason,
                code="prompt_too_long",
                tokens=tokens,
                limit=limit,
                model=self._model,
                thread=thread,
                timestamp=ts,
                span=span,
            )
        )
        if main:
            self._refused = True

    def _compaction(
        self, obj: dict[str, Any], thread: str, span: SourceSpan, ts: str | None, out: list[Event]
    ) -> None:
        meta = obj.get("compact_metadata" if self.stream_json else "compactMetadata")
        if not isinstance(meta, dict):
            meta = obj.get("compactMetadata") or obj.get("compact_metadata") or {}
            if not isinstance(meta, dict):
                meta = {}
        trigger = text_or_none(meta.get("trigger")) or text_or_none(obj.get("trigger")) or "auto"
        if thread == "main" and self._refused:
            if trigger == "auto":
                trigger = "reactive"  # after the provider refused the request as too long
            self._refused = False
        before = positive_int(meta.get("preTokens", meta.get("pre_tokens")))
        after = positive_int(meta.get("postTokens", meta.get("post_tokens")))
        retained: list[str] = []
        kept_nodes: list[int] = []
        if thread == "main":
            kept_nodes = self._preserved_nodes(meta)
            retained = [m for m in (self._node_message[n] for n in kept_nodes) if m is not None]
        out.append(
            Compacted(
                trigger=trigger,
                tokens_before=before,
                tokens_after=after,
                retained_ids=tuple(dict.fromkeys(retained)),
                keep_system=True,
                thread=thread,
                timestamp=ts,
                span=span,
            )
        )
        if thread == "main":
            node = self._enter_main(obj, span, out)
            self._segment = {*kept_nodes, node} if node >= 0 else set(kept_nodes)

    def _microcompaction(
        self, obj: dict[str, Any], thread: str, span: SourceSpan, ts: str | None, out: list[Event]
    ) -> None:
        meta = obj.get("microcompactMetadata")
        if not isinstance(meta, dict):
            meta = {}
        ids = meta.get("compactedToolIds")
        cleared: list[str] = []
        if isinstance(ids, list):
            for call in ids:
                mid = self._results.get(call) if isinstance(call, str) else None
                if mid is not None:
                    cleared.append(mid)
        saved = meta.get("tokensSaved")
        out.append(
            Pruned(
                tokens_before=positive_int(meta.get("preTokens")),
                tokens_recovered=saved if type(saved) is int and saved >= 0 else None,
                outputs_pruned=len(ids) if isinstance(ids, list) else None,
                message_ids=tuple(dict.fromkeys(cleared)),
                reason="microcompact",
                timestamp=ts,
                span=span,
            )
        )

    # -- everything else --------------------------------------------------------------------

    def _metadata(self, kind: str, obj: dict[str, Any], span: SourceSpan, out: list[Event]) -> None:
        ts = obj.get("timestamp")
        ts = ts if isinstance(ts, str) and ts else None
        text = metadata_text(kind, obj, self.stream_json)
        out.append(log_event(self._shared(text), self._shared(kind), ts, span))
        if kind == "api-request":
            self._request_facts(obj, span, out)
        elif kind == "result" and self.stream_json:
            self._result_facts(obj, span, out)

    def _request_facts(self, obj: dict[str, Any], span: SourceSpan, out: list[Event]) -> None:
        """The max_tokens of the agent's own requests (2.1.3xx ``api-request`` lines record
        what was sent): its output reserve comes from it. A compaction's request is not one."""
        source = text_or_none(obj.get("querySource")) or ""
        params = obj.get("params")
        if "compact" in source or not isinstance(params, dict):
            return
        max_tokens = positive_int(params.get("max_tokens"))
        if max_tokens is not None and max_tokens != self._max_output:
            self._max_output = max_tokens
            out.append(SessionInfo(extra={"max_output_tokens": max_tokens}, span=span))

    def _result_facts(self, obj: dict[str, Any], span: SourceSpan, out: list[Event]) -> None:
        """The stream's last line: the model's window and max output as the CLI resolved them
        (``modelUsage``), and a run that ended on a refused prompt."""
        usage = obj.get("modelUsage")
        model_usage = usage.get(self._model) if isinstance(usage, dict) and self._model else None
        if isinstance(model_usage, dict):
            window = positive_int(model_usage.get("contextWindow"))
            max_output = positive_int(model_usage.get("maxOutputTokens"))
            extra: dict[str, Any] = {}
            if max_output is not None:
                extra["max_output_tokens"] = max_output
            if window is not None:
                extra["context_window_source"] = "the result's modelUsage.contextWindow"
            if window is not None or extra:
                out.append(SessionInfo(context_window=window, extra=extra, span=span))
        if obj.get("is_error") is True:
            self._note_refusal(obj, "main", None, span, out)
