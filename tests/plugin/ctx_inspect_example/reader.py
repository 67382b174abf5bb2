"""The example agent's log: JSON Lines after a header line ``{"example": 1}``; a line is a
message (``{"role": "user", "text": "..."}``) or a model call with its prompt's size
(``{"call": 1234}``)."""

from __future__ import annotations

from ctx_inspect.core.model import (
    Event,
    Message,
    MessageAdded,
    Part,
    PartType,
    RequestSent,
    Role,
    SessionInfo,
    SourceSpan,
    Usage,
    UsageReported,
)
from ctx_inspect.formats.base import LineParser
from ctx_inspect.formats.registry import FormatSpec, Head, register

_ROLES = {role.value: role for role in Role}


class ExampleParser(LineParser):
    format_name = "example-log"

    def parse_line(self, line: bytes, span: SourceSpan) -> list[Event]:
        out: list[Event] = []
        record = self.load_json(line, span, out)
        if record is None:
            return out
        if not isinstance(record, dict):
            out.append(self.issue(span, "not a JSON object", line))
        elif "example" in record:
            out.append(SessionInfo(agent="example", span=span))
        elif isinstance(record.get("call"), int):
            usage = Usage(input=record["call"], input_includes_cache=True)
            out.append(RequestSent(span=span))
            out.append(UsageReported(usage=usage, span=span))
        elif record.get("role") in _ROLES and isinstance(record.get("text"), str):
            message = Message(
                id=f"m{span.line}",
                role=_ROLES[record["role"]],
                parts=(Part(type=PartType.TEXT, text=record["text"]),),
            )
            out.append(MessageAdded(message=message, span=span))
        else:
            out.append(self.issue(span, "neither a message nor a call", line))
        return out


def _sniff(head: Head) -> float:
    return 0.99 if head.data.startswith(b'{"example"') else 0.0


register(
    FormatSpec(
        name="example-log",
        description="the example plug-in agent's log",
        reads="example.jsonl",
        parser=ExampleParser,
        sniff=_sniff,
        default_profile="example",
    )
)
