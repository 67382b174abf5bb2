"""The local extractive summarizer and the summarizer configuration."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctx_inspect.core import summarize, summary_extract, summary_layout
from ctx_inspect.core.endpoint import (
    OpenAICompatibleSummarizer,
    SummarizerError,
    render_conversation,
    system_prompt,
)
from ctx_inspect.core.facts import paths
from ctx_inspect.core.model import Message, MessageKind, Part, PartType, Role
from ctx_inspect.core.summarize import LocalSummarizer, summarizer_from_config
from ctx_inspect.core.summary_extract import (
    SCAN_HEAD_CHARS,
    SCAN_TAIL_CHARS,
    _scanned,
    carried_over,
)
from ctx_inspect.errors import ConfigError, InspectorError


def text(role: Role, body: str, id: str = "m") -> Message:
    return Message(id=id, role=role, parts=(Part(type=PartType.TEXT, text=body),))


def call(name: str, arguments: object, id: str = "c") -> Message:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return Message(
        id=id,
        role=Role.ASSISTANT,
        kind=MessageKind.TOOL_CALL,
        parts=(Part(type=PartType.TOOL_CALL, tool_name=name, call_id=id, arguments=args),),
    )


def output(body: str, is_error: bool = False, id: str = "r") -> Message:
    return Message(
        id=id,
        role=Role.TOOL,
        kind=MessageKind.TOOL_RESULT,
        parts=(Part(type=PartType.TOOL_RESULT, text=body, is_error=is_error),),
    )


PYTEST_FAILURE = """\
============================= FAILURES =============================
___________________________ test_empty ___________________________
tests/test_parser.py:12: in test_empty
    parse("")
src/parser/core.py:45: in parse
    return tokens[0]
E   IndexError: list index out of range
=========== 1 failed, 3 passed in 0.12s ===========
"""

SESSION = [
    text(Role.SYSTEM, "You are a careful coding agent. Never run rm -rf.", "sys"),
    text(Role.USER, "Fix the crash in the parser on empty input (tests/test_parser.py).", "u1"),
    call("bash", {"command": "pytest -x tests/test_parser.py"}, "c1"),
    output(PYTEST_FAILURE, id="r1"),
    text(
        Role.ASSISTANT,
        "Added a guard for empty token lists in src/parser/core.py.\n"
        "I decided to return an empty Tree instead of raising, because empty input is valid.",
        "a1",
    ),
    call("str_replace_editor", {"path": "src/parser/core.py", "old_str": "x", "new_str": "y"}),
    output("The file src/parser/core.py has been edited.", id="r2"),
    call("shell", {"command": ["bash", "-lc", "ruff check src && mypy src"]}, "c3"),
    output("src/parser/tree.py:3: error: Missing return statement", id="r3"),
    text(Role.ASSISTANT, "Fixed the missing return in src/parser/tree.py.", "a2"),
    text(Role.USER, "Also add a CHANGELOG.md entry.", "u2"),
    text(
        Role.ASSISTANT,
        "Ran the checks:\n$ make test\nAll green.\n\nNext steps:\n"
        "1. Add the CHANGELOG.md entry\n- [ ] release 0.4.1\n"
        "TODO: bump the version in pyproject.toml",
        "a3",
    ),
]


def section(summary: str, header_start: str) -> list[str]:
    lines = summary.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    body: list[str] = []
    for line in lines[start + 1 :]:
        if not line.startswith("- "):
            break
        body.append(line[2:])
    return body


# --------------------------------------------------------------------------------------------
# Local summarizer


def test_every_section_is_there_with_what_compaction_prompts_ask_for() -> None:
    summary = LocalSummarizer().summarize(SESSION, 2000)
    task = section(summary, "Task")
    assert task[0] == "first: Fix the crash in the parser on empty input (tests/test_parser.py)."
    assert task[1] == "then: Also add a CHANGELOG.md entry."
    files = section(summary, "Files")
    for path in (
        "tests/test_parser.py",
        "src/parser/core.py",
        "src/parser/tree.py",
        "CHANGELOG.md",
        "pyproject.toml",
    ):
        assert path in files
    commands = section(summary, "Commands")
    assert commands == ["pytest -x tests/test_parser.py", "ruff check src && mypy src", "make test"]
    errors = section(summary, "Errors")
    assert "E IndexError: list index out of range" in errors
    assert (
        "1 failed, 3 passed in 0.12s → Added a guard for empty token lists in src/parser/core.py."
        in errors
    )
    assert (
        "src/parser/tree.py:3: error: Missing return statement → "
        "Fixed the missing return in src/parser/tree.py." in errors
    )
    assert any(e.endswith("→ Added a guard for empty token lists in src/parser/core.py.")
               for e in errors)  # fmt: skip
    decisions = section(summary, "Decisions")
    assert decisions == [
        "I decided to return an empty Tree instead of raising, because empty input is valid."
    ]
    steps = section(summary, "Where it stopped")
    assert steps == [
        "Add the CHANGELOG.md entry",
        "release 0.4.1",
        "TODO: bump the version in pyproject.toml",
    ]
    assert "Never run rm -rf" not in summary  # the system prompt is not the task
    assert "FAILURES" not in summary  # banners are not errors


def test_the_same_input_gives_the_same_output() -> None:
    a = LocalSummarizer().summarize(SESSION, 120)
    b = LocalSummarizer().summarize(list(SESSION), 120)
    assert a == b


@pytest.mark.parametrize("budget", [2000, 300, 120, 60, 25, 10, 3, 1])
def test_the_budget_is_respected(budget: int) -> None:
    summarizer = LocalSummarizer()
    summary = summarizer.summarize(SESSION, budget)
    assert summarizer.measure(summary) <= budget
    assert -(-len(summary) // 4) <= budget
    assert summary  # something always fits a budget of one token or more


def test_zero_budget_and_no_messages_give_nothing() -> None:
    assert LocalSummarizer().summarize(SESSION, 0) == ""
    assert LocalSummarizer().summarize([], 100) == ""


def test_messages_with_nothing_to_extract_still_get_a_short_summary() -> None:
    blank = [Message(id="x", role=Role.USER, kind=MessageKind.META)]
    text = LocalSummarizer().summarize(blank, 100)
    assert "1 messages" in text and "no task" in text
    assert len(LocalSummarizer().summarize(blank, 3)) <= 12


def test_lowest_value_lines_go_first_oldest_within_a_section_never_cut() -> None:
    full = LocalSummarizer().summarize(SESSION, 2000)
    short = LocalSummarizer().summarize(SESSION, 150)
    assert len(short) < len(full)
    full_lines = set(full.splitlines())
    assert set(short.splitlines()) <= full_lines  # whole lines only
    assert "Commands run:" not in short  # commands are the least valuable
    assert section(short, "Task")[0].startswith("first: ")


def test_within_a_section_the_oldest_mention_goes_first() -> None:
    messages = [text(Role.USER, "Tidy the package.", "u")]
    messages += [output(f"wrote src/pkg/module_{i:02}.py", id=f"r{i}") for i in range(12)]
    messages.append(output("checked src/pkg/module_00.py again", id="again"))
    summarizer = LocalSummarizer()
    full = section(summarizer.summarize(messages, 1000), "Files")
    assert full[-1] == "src/pkg/module_00.py"  # ordered by latest mention
    short = summarizer.summarize(messages, 60)
    files = section(short, "Files")
    assert 0 < len(files) < len(full)
    assert files == full[-len(files) :]  # the oldest mentions went first
    assert "src/pkg/module_00.py" in files


def test_only_a_single_line_longer_than_the_budget_is_cut() -> None:
    request = "Please refactor " + "the module " * 200
    summary = LocalSummarizer().summarize([text(Role.USER, request)], 20)
    assert summary.endswith("…")
    assert summary.startswith("first: Please refactor the module")
    assert -(-len(summary) // 4) <= 20


def test_a_counter_measures_the_budget() -> None:
    class Words:
        def count(self, text: str) -> int:
            return len(text.split())

    summarizer = LocalSummarizer(Words())
    summary = summarizer.summarize(SESSION, 40)
    assert len(summary.split()) <= 40
    assert len(summary) > 40 * 4 // 2  # words, not four-char tokens


def test_paths_commands_and_errors_from_realistic_tool_output() -> None:
    messages = [
        text(Role.USER, "Why does the build fail?", "u"),
        call(
            "run_terminal_cmd",
            {"command": "cd web && npm run build 2>&1 | tail -5", "is_background": False},
            "c1",
        ),
        output(
            "> web@1.0.0 build\n> tsc -p tsconfig.json\n"
            "src/components/Chart.tsx(41,7): error TS2322: Type 'string' is not assignable\n"
            "npm ERR! code ELIFECYCLE\nnpm ERR! Failed at the web@1.0.0 build script.",
            is_error=True,
            id="r1",
        ),
        text(
            Role.ASSISTANT, "The Chart prop must be a number; I'll convert it with Number().", "a"
        ),
        call("exec_command", {"cmd": ["bash", "-lc", "rg -n 'width=' web/src/components"]}, "c2"),
        output("web/src/components/Chart.tsx:41:      width={props.w}", id="r2"),
        call("read_file", {"file_path": "/home/dev/web/package.json"}, "c3"),
        output(
            "Traceback (most recent call last):\n  File \"x.py\", line 1\nKeyError: 'w'", id="r4"
        ),
    ]
    summary = LocalSummarizer().summarize(messages, 2000)
    files = section(summary, "Files")
    assert "tsconfig.json" in files
    assert "web/src/components/Chart.tsx" in files
    assert "/home/dev/web/package.json" in files
    assert "x.py" in files
    assert "web@1.0.0" not in files and "Number()." not in files
    commands = section(summary, "Commands")
    assert commands == [
        "cd web && npm run build 2>&1 | tail -5",
        "rg -n 'width=' web/src/components",
    ]
    errors = section(summary, "Errors")
    assert any("error TS2322" in e for e in errors)
    assert any(e.startswith("npm ERR! Failed at the web@1.0.0 build script. → The Chart prop")
               for e in errors)  # fmt: skip
    assert "KeyError: 'w'" in errors


def test_a_failed_tool_output_without_error_words_still_counts_as_an_error() -> None:
    messages = [
        call("bash", {"command": "cat /etc/shadow"}, "c"),
        output("cat: /etc/shadow: Permission denied", is_error=True, id="r"),
        text(Role.ASSISTANT, "That file needs root; skipping it.", "a"),
    ]
    summary = LocalSummarizer().summarize(messages, 500)
    assert section(summary, "Errors") == [
        "cat: /etc/shadow: Permission denied → That file needs root; skipping it."
    ]
    assert section(summary, "Commands") == ["cat /etc/shadow"]
    not_a_shell = [call("read_file", {"command": "not run"}, "c")]
    assert "Commands run:" not in LocalSummarizer().summarize(not_a_shell, 500)


def test_tool_arguments_nested_too_deep_to_decode_are_read_as_text() -> None:
    deep = "[" * 100_000 + '"src/deep.py"' + "]" * 100_000
    summary = LocalSummarizer().summarize(
        [text(Role.USER, "Fix the parser"), call("bash", deep)], 300
    )
    assert "Fix the parser" in summary


def test_dollar_lines_and_earlier_summaries_are_kept() -> None:
    earlier = Message(
        id="s",
        role=Role.USER,
        kind=MessageKind.SUMMARY,
        parts=(Part(type=PartType.TEXT, text="Files touched:\n- kept from before: lexer.rs"),),
    )
    messages = [earlier, text(Role.ASSISTANT, "I ran it:\n  $ cargo test -q\nok", "a")]
    summary = LocalSummarizer().summarize(messages, 500)
    assert section(summary, "Carried over") == ["kept from before: lexer.rs"]
    assert section(summary, "Commands") == ["cargo test -q"]


def test_no_plan_in_the_last_message_keeps_its_last_sentence() -> None:
    messages = [text(Role.USER, "hi", "u"), text(Role.ASSISTANT, "Hello. All tests pass.", "a")]
    summary = LocalSummarizer().summarize(messages, 500)
    assert section(summary, "Where it stopped") == ["last said: All tests pass."]


words = st.text(
    alphabet=st.sampled_from(list("abcdefghij ./$-_:\nEerror0123456789é漢🙂")), max_size=300
)
message_specs = st.lists(
    st.tuples(st.sampled_from([Role.USER, Role.ASSISTANT, Role.TOOL, Role.SYSTEM]), words),
    max_size=12,
)


def messages_of(specs: list[tuple[Role, str]]) -> list[Message]:
    return [
        output(body, id=f"r{i}") if role is Role.TOOL else text(role, body, f"m{i}")
        for i, (role, body) in enumerate(specs)
    ]


@settings(max_examples=150, deadline=None)
@given(message_specs, st.integers(0, 400))
def test_property_never_exceeds_the_budget_and_is_deterministic(specs, budget) -> None:
    messages = messages_of(specs)
    summarizer = LocalSummarizer()
    summary = summarizer.summarize(messages, budget)
    assert summarizer.measure(summary) <= budget
    assert summarizer.summarize(messages, budget) == summary


# --------------------------------------------------------------------------------------------
# Rendering for an endpoint


def test_system_prompt_names_every_section_and_the_budget() -> None:
    prompt = system_prompt(500)
    for word in ("task", "files", "commands", "errors", "resolved", "decisions", "next steps"):
        assert word in prompt
    assert "500 tokens" in prompt


def test_render_conversation_labels_each_part_and_clips_huge_outputs() -> None:
    rendered = render_conversation(
        [
            text(Role.USER, "hello", "u"),
            call("bash", {"command": "ls"}, "c"),
            output("x" * 50_000, id="r"),
        ]
    )
    assert "[user]\nhello" in rendered
    assert '[assistant called bash] {"command": "ls"}' in rendered
    assert "characters left out" in rendered
    assert len(rendered) < 10_000


# --------------------------------------------------------------------------------------------
# Configuration


def test_default_is_local() -> None:
    assert isinstance(summarizer_from_config({}), LocalSummarizer)
    assert isinstance(summarizer_from_config({"summarizer": "local"}), LocalSummarizer)


def test_openai_from_config() -> None:
    s = summarizer_from_config(
        {
            "summarizer": "openai",
            "summarizer_base_url": "http://127.0.0.1:8080/v1/",
            "summarizer_model": "qwen2.5-7b",
            "summarizer_api_key_env": "MY_KEY",
            "summarizer_timeout": 5,
            "summarizer_retries": 0,
            "profile": "fifth",  # other keys belong to others
        }
    )
    assert isinstance(s, OpenAICompatibleSummarizer)
    assert s.url == "http://127.0.0.1:8080/v1/chat/completions"
    assert (s.model, s.api_key_env, s.timeout, s.retries) == ("qwen2.5-7b", "MY_KEY", 5.0, 0)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"summarizer": "gpt"}, "summarizer: expected 'local' or 'openai'"),
        ({"summarizer": "openai", "summarizer_model": "m"}, "summarizer_base_url is required"),
        (
            {"summarizer": "openai", "summarizer_base_url": "ftp://x", "summarizer_model": "m"},
            "http:// or https://",
        ),
        ({"summarizer": "openai", "summarizer_base_url": "http://h/v1"}, "summarizer_model"),
        (
            {
                "summarizer": "openai",
                "summarizer_base_url": "http://h/v1",
                "summarizer_model": "m",
                "summarizer_timeout": 0,
            },
            "summarizer_timeout",
        ),
        (
            {
                "summarizer": "openai",
                "summarizer_base_url": "http://h/v1",
                "summarizer_model": "m",
                "summarizer_retries": True,
            },
            "summarizer_retries",
        ),
        (
            {
                "summarizer": "openai",
                "summarizer_base_url": "http://h/v1",
                "summarizer_model": "m",
                "summarizer_retries": -1,
            },
            "summarizer_retries",
        ),
        ({"summarizer_modle": "m"}, "did you mean summarizer_model"),
    ],
)
def test_bad_values_are_config_errors(config: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        summarizer_from_config(config)
    assert message in info.value.one_line()


def test_a_key_pasted_as_the_variable_name_is_refused_without_echoing_it() -> None:
    secret = "sk-proj-AbC123secret"
    with pytest.raises(ConfigError) as info:
        summarizer_from_config(
            {
                "summarizer": "openai",
                "summarizer_base_url": "https://api.openai.com/v1",
                "summarizer_model": "gpt-4o-mini",
                "summarizer_api_key_env": secret,
            }
        )
    assert secret not in info.value.one_line()
    assert "NAME of an environment variable" in info.value.one_line()


def test_summarizer_error_is_a_titled_inspector_error() -> None:
    error = SummarizerError("Summarizer timed out", "no reply")
    assert isinstance(error, InspectorError)
    assert error.one_line() == "Summarizer timed out: no reply"


# -- cost: what a long text has read of it, the facts cache ----------------------------------


def test_a_long_output_is_read_at_its_head_and_tail_only() -> None:
    filler = "\n".join(f"line {n} of an uneventful listing" for n in range(2_000))
    body = (
        "$ make build\nsrc/head_file.py: Error: at the head\n"
        + filler
        + "\nsrc/middle_file.py: Error: in the middle\n"
        + filler
        + "\nsrc/tail_file.py: Error: at the tail\n"
    )
    assert len(body) > 10 * (SCAN_HEAD_CHARS + SCAN_TAIL_CHARS)
    summary = LocalSummarizer().summarize([output(body)], 4_000)
    assert "src/head_file.py" in summary and "src/tail_file.py" in summary
    assert "make build" in summary
    assert "middle" not in summary  # facts cluster at the ends; the middle is not read
    # a text within the two windows is read whole
    short = "src/a.py: Error: one\n" + "x\n" * 100 + "src/b.py: Error: two\n"
    assert len(short) < SCAN_HEAD_CHARS
    assert "src/b.py" in LocalSummarizer().summarize([output(short)], 4_000)


def test_the_cut_between_head_and_tail_falls_on_line_breaks() -> None:
    head = "a" * (SCAN_HEAD_CHARS - 10) + "\nsrc/cut_in_half_at_the_head.py\n"
    tail = "\nsrc/cut_in_half_at_the_tail.py\n" + "z" * (SCAN_TAIL_CHARS - 10)
    scanned = _scanned(head + "m" * 50_000 + tail)
    assert scanned.splitlines() == ["a" * (SCAN_HEAD_CHARS - 10), "z" * (SCAN_TAIL_CHARS - 10)]


def test_facts_are_extracted_once_per_message_and_summarizer() -> None:
    summarizer = LocalSummarizer()
    first = summarizer.summarize(SESSION, 2_000)
    cached = len(summarizer._facts)
    assert cached == len(SESSION)
    assert summarizer.summarize(SESSION, 2_000) == first  # from the cache
    assert len(summarizer._facts) == cached
    edited = [*SESSION[:-1], text(Role.ASSISTANT, "Next: run the linter.", SESSION[-1].id)]
    assert summarizer.summarize(edited, 2_000) == LocalSummarizer().summarize(edited, 2_000)
    assert len(summarizer._facts) == cached + 1  # same id, other content: other facts


# the summarizer's own lines, each made of these: some start with a check box, some end with a
# colon (``_carried_over`` leaves those out)
fact_words = st.sampled_from(
    [
        *("[x]", "[ ]", "[X]", "[note]", "[", "Error:", "fix", "src/a.py", "$", "done:"),
        *("will", "next", "é", "a:"),
    ]
)
fact_texts = st.lists(fact_words, min_size=1, max_size=5).map(" ".join)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([Role.USER, Role.ASSISTANT, Role.TOOL]), fact_texts),
        min_size=1,
        max_size=10,
    ),
    st.integers(1, 200),
)
def test_what_a_summary_carries_over_is_what_reading_it_again_gives(specs, budget) -> None:
    messages = messages_of(specs)
    summarizer = LocalSummarizer()
    summary = summarizer.summarize(messages, budget)
    if summary in summarizer._rendered:
        assert summarizer._rendered[summary] == carried_over(summary)
    # and summarizing the summary reads the same lines with or without what was kept
    earlier = Message(
        id="s",
        role=Role.USER,
        kind=MessageKind.SUMMARY,
        parts=(Part(type=PartType.TEXT, text="[Summary]\n" + summary),),
    )
    again = summarizer.summarize([earlier, *messages[-1:]], 4_000)
    assert again == LocalSummarizer().summarize([earlier, *messages[-1:]], 4_000)


class FourChars:
    """The default measure as a counter: ``summarize`` then searches by rendering."""

    def count(self, text: str) -> int:
        return -(-len(text) // 4)


@settings(max_examples=200, deadline=None)
@given(message_specs, st.integers(1, 300))
def test_the_lines_dropped_without_rendering_are_those_a_rendering_search_drops(
    specs, budget
) -> None:
    messages = messages_of(specs)
    counted = LocalSummarizer(FourChars()).summarize(messages, budget)
    assert LocalSummarizer().summarize(messages, budget) == counted


names = st.text(alphabet=st.sampled_from(list("abcdefghijklmnop")), min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(st.lists(names, min_size=1, max_size=30), st.integers(1, 400))
def test_many_lines_dropped_without_rendering_are_those_a_rendering_search_drops(
    stems, budget
) -> None:
    # many distinct lines (a file, a command and an error per output), so that many are dropped
    messages: list[Message] = []
    for i, stem in enumerate(stems):
        messages.append(call("bash", {"command": f"pytest tests/test_{stem}.py"}, f"c{i}"))
        messages.append(output(f"src/{stem}/mod{i}.py:{i}: error {stem} failed", id=f"r{i}"))
    counted = LocalSummarizer(FourChars()).summarize(messages, budget)
    assert LocalSummarizer().summarize(messages, budget) == counted


SESSION_SUMMARY_CHECK = LocalSummarizer(FourChars()).summarize(SESSION, 120)


def test_a_counter_with_the_default_measure_drops_the_same_lines() -> None:
    assert LocalSummarizer().summarize(SESSION, 120) == SESSION_SUMMARY_CHECK
    assert "Task (what the user asked):" in SESSION_SUMMARY_CHECK
    assert FourChars().count(SESSION_SUMMARY_CHECK) <= 120


# --------------------------------------------------------------------------------------------
# Faster ways to the same result, each against a plainly written reference


def moved_to_the_end(lines: list[str]) -> list[str]:
    """Each line moved to the end as it comes: the order of their latest mention."""
    ordered: dict[str, None] = {}
    for line in lines:
        ordered.pop(line, None)
        ordered[line] = None
    return list(ordered)


@given(st.lists(st.sampled_from(["a", "b", "c", " c ", "c", "d \t e", "d e", ""]), max_size=20))
def test_lines_are_kept_once_at_their_latest_mention(lines: list[str]) -> None:
    assert summary_extract._latest(lines) == moved_to_the_end(lines)
    one_line = [" ".join(line.split()) for line in lines]
    assert summary_extract._distinct_lines(lines) == tuple(
        moved_to_the_end([line for line in one_line if line])
    )


@given(st.text(alphabet=st.sampled_from(list("ab [xX]-*•1.) \t\u00a0:")), max_size=10))
def test_a_dash_and_a_space_are_what_the_list_marker_takes(rest: str) -> None:
    line = "- " + rest
    if not line[2:3].isspace() and line[2:3] != "[":  # ``_next_steps`` takes "- " itself
        assert summary_extract._LIST_ITEM.match(line)
        assert summary_extract._LIST_ITEM.sub("", line) == line[2:]


def test_an_error_its_fix_and_a_decision_are_each_on_one_line() -> None:
    messages = [
        output("src/a.py:1: error: boom", id="r"),
        text(
            Role.ASSISTANT, "Fixed  it\twith a guard, because   it was needed.  Then ran it.", "a"
        ),
    ]
    summary = LocalSummarizer().summarize(messages, 500)
    fix = "Fixed it with a guard, because it was needed."
    assert section(summary, "Errors") == [f"src/a.py:1: error: boom → {fix}"]
    assert section(summary, "Decisions") == [fix]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 9), min_size=7, max_size=7))
def test_the_drop_plan_is_the_lines_by_value_then_later_section_then_older_line(
    sizes: list[int],
) -> None:
    plan = summary_layout.drop_plan(tuple(sizes))
    keys = []  # (value, -section, position), line by line, section after section
    for s_index, (section, size) in enumerate(zip(summary_layout.SECTIONS, sizes, strict=True)):
        for position in range(size):
            value = section.weight + (position + 1) / (size + 1)
            if s_index == 0 and position == 0:
                value += summary_layout.FIRST_REQUEST_BONUS
            keys.append((value, -s_index, position))
    order = sorted(range(len(keys)), key=keys.__getitem__)
    assert plan.order == order
    assert plan.owners == [-keys[index][1] for index in order]
    # the rendering's length, with one-character lines, as lines are dropped
    for dropped in range(len(order)):  # the last line's cost is never asked for
        gone = set(order[:dropped])
        blocks = []
        first = 0
        for section, size in zip(summary_layout.SECTIONS, sizes, strict=True):
            body = ["- x" for index in range(first, first + size) if index not in gone]
            first += size
            if body:
                blocks.append("\n".join([section.header, *body]))
        length = plan.frame + len(order) - sum(1 + cost for cost in plan.costs[:dropped])
        assert length == len("\n\n".join(blocks))


def test_the_lines_of_two_earlier_summaries_are_kept_once_at_their_latest_place() -> None:
    def earlier(body: str, id: str) -> Message:
        part = Part(type=PartType.TEXT, text=body)
        return Message(id=id, role=Role.USER, kind=MessageKind.SUMMARY, parts=(part,))

    messages = [earlier("- a\n- b\n- c", "s1"), earlier("- b\n- d", "s2")]
    assert summary_extract.extract_sections(messages)["earlier"] == ["a", "c", "b", "d"]
    assert summary_extract.extract_sections(messages[:1])["earlier"] == ["a", "b", "c"]


def reference_summary(messages: list[Message], budget: int) -> str | None:
    """The summary as its rule says: the least valuable lines go first (by value, then the
    later section, then the older line) until the rendering fits; None: a single line left."""
    extracted = summary_extract.extract_sections(messages)
    sections = [extracted[section.key] for section in summary_layout.SECTIONS]
    ranked: list[tuple[float, int, int]] = []
    for s_index, (section, items) in enumerate(zip(summary_layout.SECTIONS, sections, strict=True)):
        for position in range(len(items)):
            value = section.weight + (position + 1) / (len(items) + 1)
            if s_index == 0 and position == 0:
                value += summary_layout.FIRST_REQUEST_BONUS
            ranked.append((value, -s_index, position))
    ranked.sort()
    for dropped in range(len(ranked)):
        gone = {(-minus, position) for _, minus, position in ranked[:dropped]}
        blocks = []
        for s_index, (section, items) in enumerate(
            zip(summary_layout.SECTIONS, sections, strict=True)
        ):
            body = [f"- {line}" for p, line in enumerate(items) if (s_index, p) not in gone]
            if body:
                blocks.append("\n".join([section.header, *body]))
        rendered = "\n\n".join(blocks)
        if -(-len(rendered) // 4) <= budget:
            return rendered
    return None


@settings(max_examples=200, deadline=None)
@given(message_specs, st.integers(1, 300))
def test_the_least_valuable_lines_are_dropped_first(specs, budget) -> None:
    messages = messages_of(specs)
    expected = reference_summary(messages, budget)
    if expected is not None and messages:
        summarizer = LocalSummarizer()
        summary = summarizer.summarize(messages, budget)
        assert summary == expected
        assert summarizer._rendered[summary] == carried_over(summary)


call_arguments = st.sampled_from(
    [
        {"command": "ls  src/a.py\n  && echo  x"},
        {"command": ["bash", "-lc", "  make\ttest  "]},
        {"path": "  src/a b.py  "},
        {"path": "\t"},
        {"file_path": "src/x.py", "content": "see src/y.py:3: error: no\n\tbad  thing"},
        "not json src/z.py",
    ]
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.sampled_from([Role.USER, Role.ASSISTANT, Role.TOOL]), words),
            st.tuples(st.just("call"), call_arguments),
            st.tuples(st.just("error"), words),
        ),
        max_size=10,
    )
)
def test_the_lines_of_facts_are_on_one_line_and_not_empty(specs) -> None:
    # what ``_extract`` keeps once each at its latest mention, without making them one line
    messages: list[Message] = []
    for i, (kind, body) in enumerate(specs):
        if kind == "call":
            messages.append(call("bash", body, f"c{i}"))
        elif kind == "error":
            messages.append(output(body, is_error=True, id=f"e{i}"))
        elif kind is Role.TOOL:
            messages.append(output(body, id=f"r{i}"))
        else:
            messages.append(text(kind, body, f"m{i}"))
    summarizer = LocalSummarizer()
    summary = summarizer.summarize(messages, 300)
    messages.append(
        Message(
            id="s",
            role=Role.USER,
            kind=MessageKind.SUMMARY,
            parts=(Part(type=PartType.TEXT, text="[Summary]\n" + summary + "\n- x  y"),),
        )
    )
    for message in messages:
        facts = summarizer._facts_of(message)
        for line in (*facts.earlier, *facts.files, *facts.commands, *facts.errors):
            assert line and line == " ".join(line.split())


def test_summaries_are_the_same_after_the_shared_memos_are_forgotten() -> None:
    messages = [
        text(Role.USER, "Fix src/app/main.py so that make test passes", "u"),
        output("src/app/main.py:3: TypeError: bad operand\nsrc/app/util.py:9: ok", id="t"),
    ]
    first = LocalSummarizer().summarize(messages, 60)
    summarize.forget_memos()
    assert not paths._PATH_OF and not paths._LOOKS_LIKE_PATH and not summary_layout._PLANS
    assert LocalSummarizer().summarize(messages, 60) == first
    assert "src/app/main.py" in first
