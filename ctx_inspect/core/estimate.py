"""Each agent's own token arithmetic, reproduced.

When an agent decided something (prune, compact, block a tool output) on the strength of its own
estimate, we must compute that estimate, not ours (DESIGN.md, decision 2). Each rule below
reproduces one agent's heuristic on our ``Message`` model, including the details that move the
result: which parts count, floor versus ceiling versus JavaScript's ``Math.round``, and whether a
"character" is a Python code point, a UTF-16 code unit (JavaScript ``length``) or a UTF-8 byte
(Go ``len``, Forth strings). ``docs/profiles.md`` gives the source of every rule.

The rules that can use a real tokenizer take a ``Counter``: anything with ``count(text) -> int``
(``ctx_inspect.core.tokens.TokenCounter`` is one). Without one they fall back to the agent's own
approximation.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ctx_inspect.core import agents
from ctx_inspect.core.model import Message, Part, PartType, Role

GENERIC_RULES: tuple[str, ...] = ("exact", "chars4")  # every other rule is an agent's own

AIAGENT_MESSAGE_OVERHEAD = 4  # tokenizer-registry.ts MESSAGE_OVERHEAD_TOKENS
AIAGENT_TOOL_CALL_OVERHEAD = 2  # tokenizer-registry.ts TOOL_CALL_OVERHEAD_TOKENS
AIAGENT_SCHEMA_FACTOR = 2.09  # context-guard.ts estimateToolSchemaTokens
FIFTH_EXACT_MIN_BYTES = 1000  # main.fs count-tokens: tiktoken only above 1000 chars
EXACT_MESSAGE_OVERHEAD = 3  # Chat Completions framing per message (transcripts.md 3.4)

_CONTENT_PARTS = frozenset({PartType.TEXT, PartType.TOOL_RESULT, PartType.ATTACHMENT})


Counter = agents.Counter


# --------------------------------------------------------------------------------------------
# Public API


@dataclass(frozen=True)
class Rule:
    """An agent's token arithmetic made of two functions: what it attributes to a message and
    to a bare text; a list of messages is the sum of its messages unless ``list_tokens`` says
    otherwise (an ``agents.Estimator``)."""

    name: str
    message_tokens: Callable[[Message, Counter | None], int]
    text_tokens: Callable[[str, Counter | None], int]
    uses_counter: bool = False  # a real tokenizer changes the result
    list_tokens: Callable[[Iterable[Message], Counter | None], int] | None = None

    def message(self, message: Message, counter: Counter | None) -> int:
        return self.message_tokens(message, counter)

    def text(self, text: str, counter: Counter | None) -> int:
        return self.text_tokens(text, counter)

    def messages(self, messages: Iterable[Message], counter: Counter | None) -> int:
        if self.list_tokens is not None:
            return self.list_tokens(messages, counter)
        return sum(self.message_tokens(m, counter) for m in messages)


def rule_names() -> tuple[str, ...]:
    """Every estimation rule a profile may name: the generic ones and every agent's own."""
    return GENERIC_RULES + tuple(a.name for a in agents.all_agents() if a.estimator is not None)


def rule(name: str) -> agents.Estimator:
    """The estimation rule ``name``: a generic one, or the arithmetic of the agent so named."""
    found = _GENERIC.get(name)
    if found is not None:
        return found
    agent = agents.find(name)
    if agent is None or agent.estimator is None:
        raise ValueError(f"unknown estimation rule {name!r}; known: {', '.join(rule_names())}")
    return agent.estimator


def uses_counter(name: str) -> bool:
    """Whether the rule ``name``'s result changes when a real tokenizer is supplied."""
    return rule(name).uses_counter


def estimate_message(name: str, message: Message, counter: Counter | None = None) -> int:
    """The tokens rule ``name``'s agent attributes to ``message``."""
    return rule(name).message(message, counter)


def estimate_text(name: str, text: str, counter: Counter | None = None) -> int:
    """The tokens rule ``name``'s agent attributes to a bare text (no per-message overhead)."""
    return rule(name).text(text, counter)


def estimate_messages(
    name: str, messages: Iterable[Message], counter: Counter | None = None
) -> int:
    """The tokens rule ``name``'s agent attributes to a list of messages: the sum of its
    messages for every rule but ``aiagent``, whose guard takes the larger of the summed
    tokenizer counts and a quarter of the summed JSON bytes over the whole list."""
    return rule(name).messages(messages, counter)


def tool_schema_tokens(
    schema_json_texts: Sequence[str],
    counter: Counter | None = None,
    factor: float = AIAGENT_SCHEMA_FACTOR,
) -> int:
    """ai-agent's tool-schema estimate: each tool's JSON as a system message, estimated like a
    conversation, then scaled by 2.09 and rounded up."""
    if not schema_json_texts:
        return 0
    messages = [
        Message(id=f"schema-{i}", role=Role.SYSTEM, parts=(Part(type=PartType.TEXT, text=text),))
        for i, text in enumerate(schema_json_texts)
    ]
    return math.ceil(estimate_messages("aiagent", messages, counter) * factor)


# --------------------------------------------------------------------------------------------
# Measures


def _ceil_div(n: int, d: int) -> int:
    return -(-n // d)


def _js_len(text: str) -> int:
    """JavaScript ``String.length``: UTF-16 code units."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def utf8_len(text: str) -> int:
    """UTF-8 bytes (Go ``len``, Node ``Buffer.byteLength``, a Forth string's length)."""
    # ``isascii`` reads a flag the string keeps: an ASCII text is measured without encoding it
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def _content_texts(message: Message) -> list[str]:
    return [p.text for p in message.parts if p.type in _CONTENT_PARTS]


def _tool_calls(message: Message) -> list[Part]:
    return [p for p in message.parts if p.type is PartType.TOOL_CALL]


def _tool_call_id(message: Message) -> str | None:
    for part in message.parts:
        if part.type is PartType.TOOL_RESULT and part.call_id:
            return part.call_id
    return None


def _normalise_numbers(value: object) -> object:
    """Integral floats print as integers in Go and JavaScript (``1.0`` -> ``1``)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return int(value)
    if isinstance(value, dict):
        return {k: _normalise_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalise_numbers(v) for v in value]
    return value


# Tool-call arguments nested deeper than this are counted as their raw text, as arguments that
# are not JSON are: decoding and re-encoding them would exhaust Python's recursion (real
# arguments nest a few levels; a hostile transcript can nest them 100,000 deep).
MAX_ARGUMENT_DEPTH = 100
_JSON_STRING = re.compile(r'"[^"]*"')
_BRACKETS = re.compile(r"[\[\]{}]")


def _nested_deeper_than(text: str, limit: int) -> bool:
    """Whether the JSON text ``text`` nests arrays and objects more than ``limit`` levels deep
    (brackets inside strings are not counted). Linear, and nearly free for texts with few
    brackets."""
    if text.count("[") + text.count("{") <= limit:
        return False
    # escaped backslashes, then escaped quotes, out; then every string: brackets are left
    bare = _JSON_STRING.sub("", text.replace("\\\\", "").replace('\\"', ""))
    depth = 0
    for char in _BRACKETS.findall(bare):
        if char in "[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def _parse_arguments(arguments: str | None) -> tuple[bool, object]:
    """(True, the decoded value) for JSON arguments, else (False, the raw text) (None for
    none); arguments nested past ``MAX_ARGUMENT_DEPTH`` are taken as raw text."""
    if not arguments:
        return False, None
    if _nested_deeper_than(arguments, MAX_ARGUMENT_DEPTH):
        return False, arguments
    try:
        return True, _normalise_numbers(json.loads(arguments))
    except ValueError:
        return False, arguments


# --------------------------------------------------------------------------------------------
# netdata ai-agent (src/tokenizer-registry.ts, src/context-guard.ts)


def _aiagent_count(text: str, counter: Counter | None) -> int:
    if not text:
        return 0
    if counter is not None:
        return counter.count(text)
    return max(1, _ceil_div(_js_len(text), 4))  # the "approximate" tokenizer


def _aiagent_tool_calls(message: Message) -> list[dict[str, object]]:
    calls: list[dict[str, object]] = []
    for part in _tool_calls(message):
        call: dict[str, object] = {}
        if part.call_id is not None:
            call["id"] = part.call_id
        call["name"] = part.tool_name or ""
        parsed, value = _parse_arguments(part.arguments)
        call["parameters"] = value if parsed or value is not None else {}
        calls.append(call)
    return calls


def _aiagent_parts(message: Message, counter: Counter | None) -> tuple[int, int]:
    """(tokenizer estimate, UTF-8 bytes of the message's JSON) for one message.

    We do not have ai-agent's ``ConversationMessage`` object, so its JSON is rebuilt as
    ``{"role","content","toolCalls"?,"toolCallId"?}`` with tool calls as ``{id,name,parameters}``.
    """
    content = "\n".join(_content_texts(message))
    calls = _aiagent_tool_calls(message)
    call_id = _tool_call_id(message)
    calls_json = _js_json(calls) if calls else ""

    lines = [f"role:{message.role.value}"]
    if content:
        lines.append(content)
    if calls:
        lines.append(calls_json)
    if call_id:
        lines.append(f"toolCallId:{call_id}")
    tokens = (
        _aiagent_count("\n".join(lines), counter)
        + AIAGENT_MESSAGE_OVERHEAD
        + AIAGENT_TOOL_CALL_OVERHEAD * len(calls)
    )

    # the UTF-8 bytes of ``_js_json({"role", "content", "toolCalls"?, "toolCallId"?})``,
    # counted without writing the JSON (the content is most of it)
    size = _JSON_OBJECT_BYTES + _json_string_bytes(message.role.value)
    size += _JSON_CONTENT_KEY_BYTES + _json_string_bytes(content)
    if calls:
        size += _JSON_CALLS_KEY_BYTES + utf8_len(calls_json)
    if call_id:
        size += _JSON_CALL_ID_KEY_BYTES + _json_string_bytes(call_id)
    return tokens, size


def _js_json(value: object) -> str:
    """``JSON.stringify``: compact, non-ASCII kept as is."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# ``_js_json`` of ``{"role": r, "content": c, ...}``: the braces and '"role":', then ',"content":'
# and the other keys, each with its comma
_JSON_OBJECT_BYTES = len('{"role":}')
_JSON_CONTENT_KEY_BYTES = len(',"content":')
_JSON_CALLS_KEY_BYTES = len(',"toolCalls":')
_JSON_CALL_ID_KEY_BYTES = len(',"toolCallId":')
# the characters ``_js_json`` escapes in a string: every one below U+0020, '"' and '\\'; those
# below take six bytes (``\\u00XX``) but for the five with a short escape (``\\n``...), which
# take two, as '"' and '\\' do
_JSON_ESCAPED = bytes(range(0x20)) + b'"\\'
_JSON_LONG_ESCAPED = bytes(c for c in range(0x20) if c not in b"\b\t\n\f\r")


def _json_string_bytes(text: str) -> int:
    """``utf8_len(_js_json(text))`` for a string: its UTF-8 bytes, the quotes, and a byte more
    per escaped character (five more for a ``\\u00XX`` escape). Escaped characters are ASCII,
    so they are counted in the UTF-8 bytes, where deleting them is fast."""
    data = text.encode("utf-8", "surrogatepass")
    size = len(data)
    escaped = size - len(data.translate(None, _JSON_ESCAPED))
    if escaped:
        escaped += 4 * (size - len(data.translate(None, _JSON_LONG_ESCAPED)))
    return size + 2 + escaped


# --------------------------------------------------------------------------------------------
# Fifth (examples/context-manager/main.fs estimate-tokens / count-tokens)


def _fifth_text(text: str, counter: Counter | None) -> int:
    size = utf8_len(text)
    if counter is not None and size > FIFTH_EXACT_MIN_BYTES:
        # `echo '<text>' | python3 ... tiktoken`: echo appends a newline.
        return counter.count(text + "\n")
    return max(1, size // 4)


# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Our own count


def _exact_text(text: str, counter: Counter | None) -> int:
    if counter is not None:
        return counter.count(text)
    return _ceil_div(len(text), 4)


# --------------------------------------------------------------------------------------------
# The rules


def _aiagent_message(message: Message, counter: Counter | None) -> int:
    tokens, size = _aiagent_parts(message, counter)
    return max(tokens, _ceil_div(size, 4))


def _aiagent_text(text: str, counter: Counter | None) -> int:
    # context-guard.ts countTokens: max(tokenizer, ceil(length / 4))
    return max(_aiagent_count(text, counter), _ceil_div(_js_len(text), 4))


def _aiagent_list(messages: Iterable[Message], counter: Counter | None) -> int:
    tokens = 0
    size = 0
    for message in messages:
        t, b = _aiagent_parts(message, counter)
        tokens += t
        size += b
    return max(tokens, _ceil_div(size, 4))


def _chars4(text: str, counter: Counter | None = None) -> int:
    return _ceil_div(len(text), 4)


EXACT = Rule(
    "exact",
    lambda m, c: _exact_text(m.text, c) + EXACT_MESSAGE_OVERHEAD,
    _exact_text,
    uses_counter=True,
)
CHARS4 = Rule("chars4", lambda m, c: _chars4(m.text), _chars4)
_GENERIC: dict[str, agents.Estimator] = {"exact": EXACT, "chars4": CHARS4}

AIAGENT = Rule("aiagent", _aiagent_message, _aiagent_text, True, _aiagent_list)
FIFTH = Rule("fifth", lambda m, c: _fifth_text(m.text, c), _fifth_text, uses_counter=True)

# --------------------------------------------------------------------------------------------
# Measures for the agents' own rules

js_len = _js_len  # JavaScript ``String.length``: UTF-16 code units
content_texts = _content_texts  # the texts of the content parts (text, tool result, attachment)
tool_calls = _tool_calls  # the tool-call parts
ceil_div = _ceil_div  # integer division rounded up
parse_arguments = _parse_arguments  # tool-call arguments as decoded JSON, else their raw text
CONTENT_PARTS = _CONTENT_PARTS  # the parts whose text is content: text, tool result, attachment
