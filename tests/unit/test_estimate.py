"""Each agent's own token arithmetic, checked against values computed by hand from its rule."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctx_inspect.agents.aiagent.estimate import (
    json_string_bytes,
    message_parts,
    message_tool_calls,
    tool_schema_tokens,
)
from ctx_inspect.core.estimate import (
    MAX_ARGUMENT_DEPTH,
    estimate_message,
    estimate_messages,
    estimate_text,
    rule_names,
)
from ctx_inspect.core.model import Message, Part, PartType, Role


class CharCounter:
    """A stand-in tokenizer: one token per character. Records what it was asked."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def count(self, text: str) -> int:
        self.seen.append(text)
        return len(text)


def text(t: str) -> Part:
    return Part(type=PartType.TEXT, text=t)


def msg(*parts: Part, role: Role = Role.USER, visible: bool = True) -> Message:
    return Message(id="m", role=role, parts=parts, visible=visible)


def call(name: str, arguments: str, call_id: str | None = "c1") -> Part:
    return Part(type=PartType.TOOL_CALL, tool_name=name, arguments=arguments, call_id=call_id)


def result(t: str, call_id: str = "c1") -> Part:
    return Part(type=PartType.TOOL_RESULT, text=t, call_id=call_id)


IMAGE = Part(type=PartType.IMAGE, media_type="image/png", data_bytes=5000)
THINKING = Part(type=PartType.THINKING, text="hmm, let me see")  # 15 chars


def test_every_rule_is_listed_and_unknown_rules_fail() -> None:
    assert set(rule_names()) == {
        "baseagent", "aiagent", "goagent", "fifth", "opencode", "guide", "exact", "chars4",
        "codex",
        "claude-code",
    }  # fmt: skip
    for rule in rule_names():
        assert estimate_message(rule, msg(text("abcd"))) >= 0
        assert estimate_text(rule, "abcd") >= 0
    with pytest.raises(ValueError, match="unknown estimation rule"):
        estimate_message("nope", msg(text("abcd")))
    with pytest.raises(ValueError, match="unknown estimation rule"):
        estimate_text("nope", "abcd")


# -- BaseAgent: floor(len/4) per content part + 4 + 1000 per image + name/args floor(len/4) --


def test_baseagent_text_floor_and_overhead() -> None:
    assert estimate_message("baseagent", msg(text("abcdefgh"))) == 2 + 4
    assert estimate_message("baseagent", msg(text("abcdef"))) == 1 + 4  # 6/4 floors to 1
    assert estimate_message("baseagent", msg()) == 4
    assert estimate_message("baseagent", msg(text(""))) == 4


def test_baseagent_counts_each_content_part_separately() -> None:
    # A list content: each part floors on its own (3//4 + 3//4 = 0), not 7//4 = 1.
    assert estimate_message("baseagent", msg(text("abc"), text("def"))) == 4


def test_baseagent_images_and_tool_calls() -> None:
    assert estimate_message("baseagent", msg(text("abcd"), IMAGE)) == 1 + 1000 + 4
    # name "read_file" 9 -> 2, arguments 16 chars -> 4
    m = msg(call("read_file", '{"path": "a.py"}'), role=Role.ASSISTANT)
    assert estimate_message("baseagent", m) == 2 + 4 + 4


def test_baseagent_ignores_thinking_and_visibility() -> None:
    assert estimate_message("baseagent", msg(text("abcd"), THINKING, visible=False)) == 5


def test_baseagent_text_is_code_points() -> None:
    assert estimate_text("baseagent", "é" * 8) == 2  # 8 code points, 16 UTF-8 bytes
    assert estimate_text("baseagent", "abc") == 0


# -- OpenCode: Math.round(length/4), halves up, UTF-16 code units ------------------------


@pytest.mark.parametrize(
    ("chars", "expected"),
    [(0, 0), (1, 0), (2, 1), (5, 1), (6, 2), (10, 3), (14, 4), (18, 5)],
)
def test_opencode_math_round_halves_up(chars: int, expected: int) -> None:
    # Python's round(2.5) is 2 (banker's rounding); JavaScript's Math.round(2.5) is 3.
    assert estimate_text("opencode", "x" * chars) == expected


def test_opencode_versus_baseagent_on_six_chars() -> None:
    assert estimate_text("opencode", "abcdef") == 2
    assert estimate_text("baseagent", "abcdef") == 1


def test_opencode_counts_utf16_units() -> None:
    assert estimate_text("opencode", "😀") == 1  # one code point, two UTF-16 units: round(0.5)
    assert estimate_text("opencode", "é") == 0  # one unit: round(0.25)


def test_opencode_message_sums_parts() -> None:
    m = msg(text("abcdef"), call("ls", "abcdef"), IMAGE, role=Role.ASSISTANT)
    assert estimate_message("opencode", m) == 2 + 2


@given(st.text(alphabet="abc xyz\n", max_size=200))
def test_opencode_is_floor_of_quarter_plus_half(s: str) -> None:
    assert estimate_text("opencode", s) == math.floor(len(s) / 4 + 0.5)


# -- Claude Code: Math.round(length / 4) per content block -------------------------------


def test_claude_code_rounds_each_block_on_its_own() -> None:
    # the real run's figures: a 69,851-char tool result and two reminders, each rounded
    # on its own, add up to the 17,600 of its preTokens (123,610 − 105,918 − 92)
    parts = (result("x" * 69_851), text("y" * 458), text("z" * 86))
    assert estimate_message("claude-code", msg(*parts)) == 17_463 + 115 + 22 == 17_600
    assert estimate_message("claude-code", msg(text("x" * 23_293))) == 5_823  # 5,823.25
    assert estimate_text("claude-code", "abcdef") == 2  # 1.5 rounds up
    assert estimate_text("claude-code", "😀😀") == 1  # four UTF-16 units


def test_claude_code_blocks() -> None:
    m = msg(
        Part(type=PartType.THINKING, text="hmm, let me see"),  # 15 -> 4
        call("Read", '{"file_path":"/a"}'),  # 4 + 18 = 22 -> 6 (5.5 up)
        IMAGE,  # 2,000 whatever its size
        Part(type=PartType.THINKING, data_bytes=10),  # redacted: its data, 10 -> 3
        role=Role.ASSISTANT,
    )
    assert estimate_message("claude-code", m) == 4 + 6 + 2_000 + 3
    document = Part(type=PartType.ATTACHMENT, media_type="application/pdf", data_bytes=9)
    assert estimate_message("claude-code", msg(document)) == 2_000
    no_input = Part(type=PartType.TOOL_CALL, tool_name="Glob", arguments="")
    assert estimate_message("claude-code", msg(no_input)) == 2  # "Glob{}"


@given(st.lists(st.text(max_size=60), max_size=6))
def test_claude_code_sums_the_blocks(texts: list[str]) -> None:
    def js_round(t: str) -> int:
        units = len(t.encode("utf-16-le", "surrogatepass")) // 2
        return math.floor(units / 4 + 0.5)

    m = msg(*(text(t) for t in texts))
    assert estimate_message("claude-code", m) == sum(js_round(t) for t in texts)


# -- the guide: len//4 + 1, 0 for empty, text content only ------------------------------


def test_guide_rule() -> None:
    assert estimate_text("guide", "") == 0
    assert estimate_text("guide", "abc") == 1
    assert estimate_text("guide", "abcd") == 2
    assert estimate_message("guide", msg(text("abcd"), text("ab"))) == 2 + 1
    assert estimate_message("guide", msg(result("abcdefgh"), role=Role.TOOL)) == 3


def test_guide_ignores_tool_calls_thinking_images() -> None:
    m = msg(call("ls", "{}"), THINKING, IMAGE, role=Role.ASSISTANT)
    assert estimate_message("guide", m) == 0


# -- goagent: ceil(UTF-8 bytes/4) over text, thinking, name, Go-marshalled args -------


def test_goagent_text_bytes_ceiling() -> None:
    assert estimate_message("goagent", msg(text("héllo"))) == 2  # 6 bytes
    assert estimate_message("goagent", msg(text("abcd"))) == 1
    assert estimate_message("goagent", msg(text("abcde"))) == 2
    assert estimate_message("goagent", msg()) == 0


def test_goagent_invisible_counts_zero() -> None:
    assert estimate_message("goagent", msg(text("x" * 400), visible=False)) == 0


def test_goagent_images_count_4800_chars() -> None:
    assert estimate_message("goagent", msg(IMAGE)) == 1200
    assert estimate_message("goagent", msg(IMAGE, text("ab"))) == 1201  # 4802 / 4


def test_goagent_thinking_counts() -> None:
    assert estimate_message("goagent", msg(THINKING, role=Role.ASSISTANT)) == 4  # 15 -> 4


def test_goagent_tool_call_args_are_go_marshalled() -> None:
    # json.Marshal(map): sorted keys, compact, < and > escaped, 1.0 printed as 1:
    # {"a":"\u003cx\u003e","b":1} is 27 bytes; + "ls" = 29 -> 8
    m = msg(call("ls", '{"b": 1.0, "a": "<x>"}'), role=Role.ASSISTANT)
    assert estimate_message("goagent", m) == 8
    # arguments that are not JSON count as their raw bytes: 2 + 5 = 7 -> 2
    assert estimate_message("goagent", msg(call("ls", "oops!"), role=Role.ASSISTANT)) == 2
    # no arguments: only the name
    assert estimate_message("goagent", msg(call("ls", ""), role=Role.ASSISTANT)) == 1


@pytest.mark.parametrize("depth", [100_000, 1_000, 500, MAX_ARGUMENT_DEPTH + 1])
def test_arguments_nested_past_the_bound_count_as_their_text(depth: int) -> None:
    # decoding and re-encoding them would exhaust Python's recursion (a hostile transcript)
    arguments = "[" * depth + "]" * depth
    m = msg(call("ls", arguments), role=Role.ASSISTANT)
    assert estimate_message("goagent", m) == math.ceil((2 + 2 * depth) / 4)
    assert message_tool_calls(m)[0]["parameters"] == arguments
    assert estimate_message("aiagent", m) > depth // 2


def test_arguments_within_the_bound_are_decoded() -> None:
    arguments = "[" * MAX_ARGUMENT_DEPTH + "1.0" + "]" * MAX_ARGUMENT_DEPTH
    m = msg(call("ls", arguments), role=Role.ASSISTANT)
    assert message_tool_calls(m)[0]["parameters"] == json.loads(arguments.replace("1.0", "1"))
    # brackets inside strings (escaped quotes and backslashes too) are not nesting
    code = {"code": '\\"' + "[{" * 5000, "more": ["]}" * 5000]}
    m = msg(call("edit", json.dumps(code)), role=Role.ASSISTANT)
    assert message_tool_calls(m)[0]["parameters"] == code


def test_goagent_sums_every_part_whatever_the_order() -> None:
    # the text of a tool call or an image is not counted; a lone surrogate is 3 bytes
    parts = [
        text("héllo"),  # 6
        THINKING,  # 15
        Part(type=PartType.TOOL_CALL, text="not counted", tool_name="ls", arguments='{"a":"<"}'),
        IMAGE,  # 4800
        result("abc\ud800"),  # 6
        Part(type=PartType.ATTACHMENT, text="att"),  # 3
        Part(type=PartType.IMAGE, text="not counted"),  # 4800
    ]
    name_and_args = len("ls") + len('{"a":"\\u003c"}')
    expected = math.ceil((6 + 15 + name_and_args + 4800 + 6 + 3 + 4800) / 4)
    for order in (parts, parts[::-1], parts[3:] + parts[:3]):
        assert estimate_message("goagent", msg(*order, role=Role.ASSISTANT)) == expected


# -- Fifth: max(1, bytes // 4); tiktoken (text + newline) above 1000 bytes ------------


def test_fifth_minimum_one() -> None:
    assert estimate_text("fifth", "") == 1
    assert estimate_text("fifth", "abc") == 1
    assert estimate_text("fifth", "abcdefgh") == 2
    assert estimate_text("fifth", "ééé") == 1  # 6 bytes


def test_fifth_counts_exactly_only_above_1000_bytes() -> None:
    counter = CharCounter()
    assert estimate_text("fifth", "x" * 1000, counter) == 250
    assert counter.seen == []
    assert estimate_text("fifth", "x" * 1001, counter) == 1002  # echo adds a newline
    assert counter.seen == ["x" * 1001 + "\n"]
    assert estimate_text("fifth", "x" * 1001) == 250  # no tokenizer: the estimate


def test_fifth_message_uses_its_text() -> None:
    assert estimate_message("fifth", msg(text("abcdefgh"))) == 2


# -- ai-agent: max(tokenizer("role:..\n..") + 4 + 2/call, ceil(JSON bytes / 4)) ----------


def test_aiagent_plain_message() -> None:
    # "role:user\nhello wor" is 19 chars -> 5, + 4 = 9;
    # {"role":"user","content":"hello wor"} is 37 bytes -> 10
    assert estimate_message("aiagent", msg(text("hello wor"))) == 10


def test_aiagent_json_bytes_win_on_non_ascii() -> None:
    # tokenizer: "role:user\n" + 40 chars = 50 -> 13, + 4 = 17;
    # JSON: 26 + 80 bytes + 2 = 108 -> 27
    assert estimate_message("aiagent", msg(text("é" * 40))) == 27


def test_aiagent_tool_result_has_tool_call_id() -> None:
    # "role:tool\nok\ntoolCallId:c1" 26 -> 7, + 4 = 11;
    # {"role":"tool","content":"ok","toolCallId":"c1"} 48 bytes -> 12
    assert estimate_message("aiagent", msg(result("ok"), role=Role.TOOL)) == 12


def test_aiagent_tool_calls_add_two_each() -> None:
    counter = CharCounter()
    m = msg(call("ls", '{"path":"."}'), role=Role.ASSISTANT)
    # toolCalls JSON [{"id":"c1","name":"ls","parameters":{"path":"."}}] is 51 chars;
    # "role:assistant\n" + 51 = 66 chars: 66 (one per char) + 4 + 2 = 72 > ceil(97 / 4) = 25
    assert estimate_message("aiagent", m, counter) == 72
    assert counter.seen == ['role:assistant\n[{"id":"c1","name":"ls","parameters":{"path":"."}}]']
    # the approximate tokenizer: ceil(66 / 4) + 6 = 23 < 25
    assert estimate_message("aiagent", m) == 25


def test_aiagent_text_rule() -> None:
    assert estimate_text("aiagent", "") == 0
    assert estimate_text("aiagent", "abcde") == 2
    assert estimate_text("aiagent", "abcde", CharCounter()) == 5


def test_aiagent_list_estimate_is_max_of_sums() -> None:
    m = msg(text("hello wor"))  # tokenizer 9, JSON 37 bytes
    assert estimate_message("aiagent", m) == 10
    # two of them: max(9 + 9, ceil(74 / 4)) = 19, not 10 + 10
    assert estimate_messages("aiagent", [m, m]) == 19
    assert estimate_messages("baseagent", [m, m]) == 2 * estimate_message("baseagent", m)


def test_aiagent_tool_schema_tokens() -> None:
    # system message with content {"name":"x"}: "role:system\n" + 12 = 24 -> 6 + 4 = 10;
    # JSON {"role":"system","content":"{\"name\":\"x\"}"} is 46 bytes -> 12; ceil(12 * 2.09) = 26
    assert tool_schema_tokens(['{"name":"x"}']) == 26
    assert tool_schema_tokens([]) == 0
    # two tools: max(10 + 10, ceil(92 / 4) = 23) = 23; ceil(23 * 2.09) = ceil(48.07) = 49
    assert tool_schema_tokens(['{"name":"x"}', '{"name":"x"}']) == 49


def _aiagent_json(message: Message) -> str:
    """ai-agent's JSON of one message, written out (what ``message_parts`` counts the bytes
    of without writing it)."""
    obj: dict[str, object] = {
        "role": message.role.value,
        "content": "\n".join(
            p.text for p in message.parts if p.type in (PartType.TEXT, PartType.TOOL_RESULT)
        ),
    }
    calls = message_tool_calls(message)
    if calls:
        obj["toolCalls"] = calls
    call_id = next(
        (p.call_id for p in message.parts if p.type is PartType.TOOL_RESULT and p.call_id), None
    )
    if call_id:
        obj["toolCallId"] = call_id
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def test_aiagent_json_bytes_count_every_escape() -> None:
    # '"' and backslash take two bytes, a newline or a tab two, another control character six
    assert json_string_bytes('a"b\\c') == len('"a\\"b\\\\c"')
    assert json_string_bytes("\n\t\x01") == len('"\\n\\t\\u0001"')
    assert json_string_bytes("é😀") == 2 + 2 + 4
    assert json_string_bytes("\ud800") == 2 + 3  # a lone surrogate, as surrogatepass writes it
    assert json_string_bytes("") == 2
    # every character below U+0800 and a few above, one at a time
    for code in [*range(0x800), 0x2028, 0xD800, 0xFFFF, 0x1F600]:
        char = chr(code)
        written = json.dumps(char, ensure_ascii=False).encode("utf-8", "surrogatepass")
        assert json_string_bytes(char) == len(written), hex(code)


json_texts = st.text(alphabet=st.sampled_from(list('ab"\\\n\t\r\x00\x1f\x7fé\u2028😀{}:,')))


@given(
    st.sampled_from([Role.USER, Role.TOOL, Role.ASSISTANT]),
    st.lists(
        st.one_of(
            json_texts.map(text),
            st.tuples(json_texts, json_texts).map(lambda t: result(t[0], t[1])),
            st.tuples(json_texts, st.sampled_from(['{"a": 1.0, "b": ["x\\n"]}', "not json"])).map(
                lambda t: call(t[0], t[1])
            ),
        ),
        max_size=4,
    ),
)
def test_aiagent_json_bytes_are_those_of_the_written_json(role: Role, parts: list[Part]) -> None:
    message = Message(id="m", role=role, parts=tuple(parts))
    written = _aiagent_json(message).encode("utf-8", "surrogatepass")
    assert message_parts(message, None)[1] == len(written)


# -- exact and chars4 ----------------------------------------------------------------------


def test_exact_uses_counter_plus_three() -> None:
    counter = CharCounter()
    assert estimate_message("exact", msg(text("abc")), counter) == 3 + 3
    assert estimate_message("exact", msg(text("abc"))) == 1 + 3
    assert estimate_message("exact", msg()) == 3
    assert estimate_text("exact", "abcde") == 2
    assert estimate_text("exact", "abcde", counter) == 5


def test_exact_counts_tool_call_name_and_arguments() -> None:
    counter = CharCounter()
    estimate_message("exact", msg(call("ls", "{}"), role=Role.ASSISTANT), counter)
    assert counter.seen == ["ls\n{}"]


def test_chars4() -> None:
    assert estimate_text("chars4", "") == 0
    assert estimate_text("chars4", "abcde") == 2
    assert estimate_message("chars4", msg(text("abcd"), text("e"))) == 2  # "abcd\ne" is 6


@given(st.text(max_size=300))
def test_ceiling_rules_never_below_floor_rules(s: str) -> None:
    assert estimate_text("chars4", s) >= estimate_text("baseagent", s)
    assert estimate_text("guide", s) >= estimate_text("baseagent", s)
    assert estimate_text("goagent", s) >= estimate_text("chars4", s)  # bytes >= code points


# -- Codex (codex-rs context_manager/history.rs estimate_item_token_count) ----------------

# what every item Codex keeps carries besides its own fields (a 36-character turn id)
CODEX_METADATA = ',"internal_chat_message_metadata_passthrough":{"turn_id":"' + "t" * 36 + '"}'


def codex_tokens(item_json: str) -> int:
    """Codex's rule by hand: the item's serialized bytes, with its metadata, over 4, up."""
    return math.ceil(len((item_json + CODEX_METADATA).encode()) / 4)


def test_codex_tool_output_is_its_serialized_item_over_four() -> None:
    out = Message(id="o1", role=Role.TOOL, parts=(result('ok "quoted"\nline', "call_1"),))
    item = '{"type":"function_call_output","id":"o1","call_id":"call_1",'
    item += '"output":"ok \\"quoted\\"\\nline"}'
    assert estimate_message("codex", out) == codex_tokens(item)


def test_codex_user_and_assistant_messages_and_calls() -> None:
    user = Message(id="u", role=Role.USER, parts=(text("héllo"),))
    item = '{"type":"message","id":"u","role":"user",'
    item += '"content":[{"type":"input_text","text":"héllo"}]}'
    assert estimate_message("codex", user) == codex_tokens(item)
    said = Message(id="a", role=Role.ASSISTANT, parts=(text("done"),))
    item = (
        '{"type":"message","status":"completed","id":"a","role":"assistant",'
        '"content":[{"type":"output_text","text":"done","annotations":[]}]}'
    )
    assert estimate_message("codex", said) == codex_tokens(item)
    command = call("exec_command", '{"cmd":"ls"}', "c9")
    called = Message(id="f", role=Role.ASSISTANT, parts=(command,))
    item = (
        '{"type":"function_call","status":"completed","id":"f","name":"exec_command",'
        '"arguments":"{\\"cmd\\":\\"ls\\"}","call_id":"c9"}'
    )
    assert estimate_message("codex", called) == codex_tokens(item)


def test_codex_encrypted_reasoning_and_images_and_instructions() -> None:
    # encrypted reasoning: 3/4 of its length less 650 bytes, never below 0
    sealed = Part(type=PartType.THINKING, text="", data_bytes=4000)
    assert estimate_message("codex", msg(sealed, role=Role.ASSISTANT)) == (3000 - 650 + 3) // 4
    small = Part(type=PartType.THINKING, text="", data_bytes=86)
    assert estimate_message("codex", msg(small, role=Role.ASSISTANT)) == 0
    # an inline image counts 7,373 bytes whatever its size
    item = '{"type":"message","id":"m","role":"user",'
    item += '"content":[{"type":"input_text","text":"see"}]}'
    size = len((item + CODEX_METADATA).encode())
    assert estimate_message("codex", msg(text("see"))) == math.ceil(size / 4)
    assert estimate_message("codex", msg(text("see"), IMAGE)) == math.ceil((size + 7373) / 4)
    # the base instructions (system) count as their text
    assert estimate_message("codex", msg(text("x" * 401), role=Role.SYSTEM)) == 101
    assert estimate_text("codex", "é" * 3) == 2  # 6 bytes
