"""OpenAI Chat Completions messages: arrays, request bodies, mini-swe-agent trajectories, JSONL.

Containers (one parser reads them all, see ``ChatParser``): a bare JSON array of messages; an
object with ``messages`` (a request body, or a mini-swe-agent trajectory with ``info`` and
``trajectory_format``); JSON Lines with one message, or one ``chat.completion`` response, per
line; JSON Lines with one conversation object per line (threads ``conv1``, ``conv2``, ...).

Messages: ``role`` system / developer / user / assistant / tool (legacy ``function``), ``content``
as a string, null or a list of parts (text, image_url, input_audio, file, refusal), assistant
``tool_calls`` (and the legacy ``function_call``), ``tool_call_id`` (or SWE-agent's plural
``tool_call_ids``), ``name``, ``refusal``, ``reasoning_content``. Usage comes from a message's own
``usage``, from the ``chat.completion`` object around it, or from mini-swe-agent's
``extra.response``.
"""

from __future__ import annotations

from typing import Any

from ctx_inspect.core.model import Part, PartType, Role, SessionInfo, Usage
from ctx_inspect.formats.chat_common import (
    ChatParser,
    Converted,
    as_int,
    as_str,
    compact_json,
    data_url,
    iso_time,
    text_part,
    tools_info,
    type_name,
    unknown_part,
)
from ctx_inspect.formats.chat_sniff import sample_head
from ctx_inspect.formats.registry import FormatSpec, Head, register

ROLES: dict[str, Role] = {
    "system": Role.SYSTEM,
    "developer": Role.DEVELOPER,
    "user": Role.USER,
    "assistant": Role.ASSISTANT,
    "tool": Role.TOOL,
    "function": Role.TOOL,  # the legacy function-calling result
}
TEXT_TYPES = frozenset({"text", "input_text", "output_text"})


def openai_usage(raw: Any) -> Usage | None:
    """Chat Completions usage (``prompt_tokens`` already counts the cached tokens; the
    Responses API's names, ``input_tokens`` and ``output_tokens``, are read too)."""
    if not isinstance(raw, dict):
        return None
    prompt = raw.get("prompt_tokens", raw.get("input_tokens"))
    completion = raw.get("completion_tokens", raw.get("output_tokens"))
    if prompt is None and completion is None:
        return None
    prompt_details = raw.get("prompt_tokens_details") or raw.get("input_tokens_details")
    output_details = raw.get("completion_tokens_details") or raw.get("output_tokens_details")
    cached = prompt_details.get("cached_tokens") if isinstance(prompt_details, dict) else None
    reasoning = output_details.get("reasoning_tokens") if isinstance(output_details, dict) else None
    total = raw.get("total_tokens")
    return Usage(
        input=as_int(prompt),
        cache_read=as_int(cached),
        output=as_int(completion),
        reasoning=as_int(reasoning),
        total=as_int(total) if total is not None else None,
        input_includes_cache=True,
    )


class OpenAIChatParser(ChatParser):
    format_name = "openai-chat"

    def is_record(self, obj: dict[str, Any]) -> bool:
        return "role" in obj or isinstance(obj.get("choices"), list)

    def session_info(self, wrapper: dict[str, Any]) -> SessionInfo | None:
        info = wrapper.get("info")
        fmt = as_str(wrapper.get("trajectory_format"))
        if not isinstance(info, dict) and fmt is None:
            return super().session_info(wrapper)
        info = info if isinstance(info, dict) else {}
        config = info.get("config")
        model_config = config.get("model") if isinstance(config, dict) else None
        model = as_str(model_config.get("model_name")) if isinstance(model_config, dict) else None
        extra: dict[str, Any] = {}
        if fmt is not None:
            extra["trajectory_format"] = fmt
        for key in ("model_stats", "exit_status"):
            if info.get(key) is not None:
                extra[key] = info[key]
        extra.update(tools_info(wrapper.get("tools")))
        return SessionInfo(
            model=model or as_str(wrapper.get("model")),
            agent="mini-swe-agent" if fmt and fmt.startswith("mini-swe-agent") else None,
            version=as_str(info.get("mini_version")),
            extra=extra,
        )

    def conversation_items(self, wrapper: dict[str, Any]) -> list[tuple[str, Any]]:
        items = super().conversation_items(wrapper)
        response = wrapper.get("response")  # a logged request with its response beside it
        if isinstance(response, dict) and isinstance(response.get("choices"), list):
            items.append(("response", response))
        return items

    # -- one message ----------------------------------------------------------------------

    def convert(self, raw: Any) -> Converted | str:
        if not isinstance(raw, dict):
            return f"not a message object ({type_name(raw)})"
        request_id: str | None = None
        model: str | None = None
        usage: Usage | None = None
        timestamp: str | None = None
        choices = raw.get("choices")
        if isinstance(choices, list):  # a chat.completion response object
            choice = choices[0] if choices else None
            message = choice.get("message") if isinstance(choice, dict) else None
            if not isinstance(message, dict):
                return "response without a message"
            request_id = as_str(raw.get("id"))
            model = as_str(raw.get("model"))
            usage = openai_usage(raw.get("usage"))
            timestamp = iso_time(raw.get("created"))
            raw = message
        role_name = raw.get("role")
        if role_name is None:
            return "no role"
        if not isinstance(role_name, str):
            return f"role is {type_name(role_name)}, not text"
        role = ROLES.get(role_name)
        if role is None:
            return f"unknown role {role_name!r}"
        content = raw.get("content")
        if content is not None and not isinstance(content, str | list):
            return f"content is {type_name(content)}, not text or a list of parts"
        tool_calls = raw.get("tool_calls")
        if tool_calls is not None and not isinstance(tool_calls, list):
            return f"tool_calls is {type_name(tool_calls)}, not a list"

        parts: list[Part] = []
        for key in ("reasoning_content", "reasoning"):
            reasoning = as_str(raw.get(key))
            if reasoning:
                parts.append(Part(type=PartType.THINKING, text=reasoning))
                break
        if role is Role.TOOL:
            parts.extend(self._result_parts(raw, content))
        elif isinstance(content, str):
            if content:
                parts.append(text_part(content))
        elif content is not None:
            parts.extend(self._content_part(item) for item in content)
        refusal = as_str(raw.get("refusal"))
        if refusal:
            parts.append(text_part(refusal))
        for call in tool_calls or ():
            parts.append(self._call_part(call))
        function_call = raw.get("function_call")
        if isinstance(function_call, dict):
            parts.append(self._function_part(function_call, None))

        if usage is None:
            usage = openai_usage(raw.get("usage"))
        extra = raw.get("extra")  # mini-swe-agent >= 2 keeps the whole response here
        if isinstance(extra, dict):
            response = extra.get("response")
            if isinstance(response, dict):
                usage = usage or openai_usage(response.get("usage"))
                model = model or as_str(response.get("model"))
                request_id = request_id or as_str(response.get("id"))
            timestamp = timestamp or iso_time(extra.get("timestamp"))
        return Converted(
            role=role,
            parts=parts,
            id=as_str(raw.get("id")) or request_id,
            name=None if role is Role.TOOL else as_str(raw.get("name")),
            timestamp=iso_time(raw.get("timestamp")) or timestamp,
            model=as_str(raw.get("model")) or model,
            usage=usage if role is Role.ASSISTANT else None,
            request_id=request_id,
        )

    def _result_parts(self, raw: dict[str, Any], content: Any) -> list[Part]:
        call_id = as_str(raw.get("tool_call_id"))
        ids = raw.get("tool_call_ids")
        if call_id is None and isinstance(ids, list) and ids:
            call_id = as_str(ids[0])
        tool_name = self.tool_name_of(call_id) or as_str(raw.get("name"))

        def result(text: str) -> Part:
            return Part(type=PartType.TOOL_RESULT, text=text, tool_name=tool_name, call_id=call_id)

        if not isinstance(content, list):
            return [result(content if isinstance(content, str) else "")]
        parts: list[Part] = []
        for item in content:
            part = self._content_part(item)
            parts.append(result(part.text) if part.type is PartType.TEXT else part)
        if not any(p.type is PartType.TOOL_RESULT for p in parts):
            parts.insert(0, result(""))
        return parts

    def _call_part(self, call: Any) -> Part:
        if not isinstance(call, dict):
            return unknown_part(call)
        call_id = as_str(call.get("id"))
        function = call.get("function")
        if isinstance(function, dict):
            return self._function_part(function, call_id)
        custom = call.get("custom")  # custom (free-form) tools
        if isinstance(custom, dict):
            name = as_str(custom.get("name"))
            self.remember_call(call_id, name)
            data = custom.get("input")
            arguments = data if isinstance(data, str) else compact_json(data)
            return Part(
                type=PartType.TOOL_CALL, tool_name=name, call_id=call_id, arguments=arguments
            )
        return unknown_part(call)

    def _function_part(self, function: dict[str, Any], call_id: str | None) -> Part:
        name = as_str(function.get("name"))
        self.remember_call(call_id, name)
        args = function.get("arguments")
        arguments = (
            args if isinstance(args, str) else compact_json(args) if args is not None else ""
        )
        return Part(type=PartType.TOOL_CALL, tool_name=name, call_id=call_id, arguments=arguments)

    def _content_part(self, item: Any) -> Part:
        if isinstance(item, str):
            return text_part(item)
        if not isinstance(item, dict):
            return unknown_part(item)
        kind = as_str(item.get("type"))
        if kind in TEXT_TYPES and isinstance(item.get("text"), str):
            return text_part(item["text"])
        if kind == "refusal" and isinstance(item.get("refusal"), str):
            return text_part(item["refusal"])
        if kind in ("image_url", "input_image"):
            image = item.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if isinstance(url, str):
                media_type, size = data_url(url)
                return Part(type=PartType.IMAGE, media_type=media_type, data_bytes=size)
        if kind == "input_audio":
            audio = item.get("input_audio")
            if isinstance(audio, dict) and isinstance(audio.get("data"), str):
                fmt = as_str(audio.get("format"))
                return Part(
                    type=PartType.ATTACHMENT,
                    media_type=f"audio/{fmt}" if fmt else None,
                    data_bytes=len(audio["data"]),
                )
        if kind == "file":
            file = item.get("file")
            if isinstance(file, dict):
                name = as_str(file.get("filename")) or as_str(file.get("file_id")) or ""
                payload = file.get("file_data")
                media_type, size = data_url(payload) if isinstance(payload, str) else (None, 0)
                return Part(
                    type=PartType.ATTACHMENT, text=name, media_type=media_type, data_bytes=size
                )
        return unknown_part(item)


def sniff(head: Head) -> float:
    sample = sample_head(head)
    if sample.with_role == 0:
        return 0.6 if sample.conversation and sample.messages == 0 else 0.0
    if sample.with_role * 2 < sample.messages:
        return 0.1
    if sample.mini_swe_agent:
        return 0.95
    if sample.anthropic:
        return 0.7 if sample.openai else 0.3
    if sample.openai or sample.string_content:
        return 0.8
    return 0.7 if sample.lines else 0.6


SPEC = register(
    FormatSpec(
        name="openai-chat",
        description="OpenAI Chat Completions messages: arrays, request bodies, JSONL",
        reads=(
            "*.json message arrays and request bodies, *.jsonl with one message, response or "
            "conversation per line, mini-swe-agent *.traj.json"
        ),
        parser=OpenAIChatParser,
        sniff=sniff,
        default_profile="generic",
    )
)
