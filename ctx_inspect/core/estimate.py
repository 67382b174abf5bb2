"""Token estimates by rule name, the generic rules, and the measures the agents' rules share.

When an agent decided something (prune, compact, block a tool output) on the strength of its own
estimate, we must compute that estimate, not ours (DESIGN.md, decision 2). Each agent's rule is
its own (``ctx_inspect/agents/<agent>/estimate.py``, a ``Rule`` declared as the agent's
estimator) and reproduces the details that move the result: which parts count, floor versus
ceiling versus JavaScript's ``Math.round``, and whether a "character" is a Python code point, a
UTF-16 code unit (``js_len``) or a UTF-8 byte (``utf8_len``). Here: ``rule`` finds a rule by
name, ``exact`` and ``chars4`` are ours, and the measures below are shared by several agents.
``docs/profiles.md`` gives the source of every rule.

The rules that can use a real tokenizer take a ``Counter``: anything with ``count(text) -> int``
(``ctx_inspect.core.tokens.TokenCounter`` is one). Without one they fall back to the agent's own
approximation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ctx_inspect.core import agents
from ctx_inspect.core.model import Message, Part, PartType

GENERIC_RULES: tuple[str, ...] = ("exact", "chars4")  # every other rule is an agent's own

EXACT_MESSAGE_OVERHEAD = 3  # Chat Completions framing per message (transcripts.md 3.4)

CONTENT_PARTS = frozenset({PartType.TEXT, PartType.TOOL_RESULT, PartType.ATTACHMENT})


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
    messages, unless the agent counts a list otherwise (``Rule.list_tokens``)."""
    return rule(name).messages(messages, counter)


# --------------------------------------------------------------------------------------------
# Measures


def ceil_div(n: int, d: int) -> int:
    return -(-n // d)


def js_len(text: str) -> int:
    """JavaScript ``String.length``: UTF-16 code units."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def utf8_len(text: str) -> int:
    """UTF-8 bytes (Go ``len``, Node ``Buffer.byteLength``, a Forth string's length)."""
    # ``isascii`` reads a flag the string keeps: an ASCII text is measured without encoding it
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def content_texts(message: Message) -> list[str]:
    return [p.text for p in message.parts if p.type in CONTENT_PARTS]


def tool_calls(message: Message) -> list[Part]:
    return [p for p in message.parts if p.type is PartType.TOOL_CALL]


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


def parse_arguments(arguments: str | None) -> tuple[bool, object]:
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
# Our own count


def _exact_text(text: str, counter: Counter | None) -> int:
    if counter is not None:
        return counter.count(text)
    return ceil_div(len(text), 4)


# --------------------------------------------------------------------------------------------
# The rules


def _chars4(text: str, counter: Counter | None = None) -> int:
    return ceil_div(len(text), 4)


EXACT = Rule(
    "exact",
    lambda m, c: _exact_text(m.text, c) + EXACT_MESSAGE_OVERHEAD,
    _exact_text,
    uses_counter=True,
)
CHARS4 = Rule("chars4", lambda m, c: _chars4(m.text), _chars4)
_GENERIC: dict[str, agents.Estimator] = {"exact": EXACT, "chars4": CHARS4}
