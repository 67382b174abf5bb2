"""What the local summarizer extracts: each message's contribution to a summary, and the
summary's sections (the task, what an earlier summary carried over, the files, the commands,
the errors and what was done about them, the decisions, where it stopped).

The facts (paths, commands, error lines) come from ``core.facts``' detectors; the rest is read
here: a user's request, an assistant's decisions and plans (sentences with their words), the
first sentence after an error (what was done about it). A long text is read at its head and its
tail (``_scanned``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import chain
from typing import NamedTuple

from ctx_inspect.core.facts.calls import call_facts
from ctx_inspect.core.facts.commands import command_lines
from ctx_inspect.core.facts.errors import error_lines, is_error_line, last_error_lines
from ctx_inspect.core.facts.lines import first_line, one_line
from ctx_inspect.core.facts.paths import paths_in
from ctx_inspect.core.model import Message, MessageKind, Part, PartType, Role

_CONTENT_TYPES = (PartType.TEXT, PartType.TOOL_RESULT, PartType.ATTACHMENT)
_ERROR_TYPES = (PartType.TEXT, PartType.TOOL_RESULT)  # the parts error lines are read from


def _content_texts(message: Message) -> list[str]:
    return [p.text for p in message.parts if p.type in _CONTENT_TYPES and p.text]


def _plain_texts(message: Message) -> list[str]:
    return [p.text for p in message.parts if p.type is PartType.TEXT and p.text]


def _tool_calls(message: Message) -> list[Part]:
    return [p for p in message.parts if p.type is PartType.TOOL_CALL]


_DECISION = re.compile(
    r"\b(decided|decide|decision|will|won't|instead|because|chose|choose|opted|going to|"
    r"i'll|we'll|prefer|rather than|switch(?:ed|ing)? to)\b",
    re.IGNORECASE,
)
_PLAN = re.compile(
    r"\b(todo|to-do|next|then|i will|i'll|we will|we'll|let's|need to|needs to|should|"
    r"remaining|left to|still|plan|going to)\b",
    re.IGNORECASE,
)
_LIST_ITEM = re.compile(r"^\s*(?:[-*•]\s+(?:\[[ xX]\]\s*)?|\d+[.)]\s+)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")
_NEXT_LINE = re.compile(r"\s*(todo|next)\b", re.IGNORECASE)
_MIN_SENTENCE = 12
_ERRORS_PER_MESSAGE = 3


def _dash_item(line: str) -> bool:
    """Whether ``line`` starts with "- " and a character ``_LIST_ITEM`` would not take away
    too (a space or a check box): its marker is then exactly "- ", found faster."""
    return line.startswith("- ") and not line[2:3].isspace() and line[2:3] != "["


def unlisted(line: str) -> str:
    """``line`` without its list marker (``- ``, ``* [x] ``, ``1. ``), stripped."""
    if _dash_item(line):
        return line[2:].strip()
    first = line.lstrip()[:1]
    if first in ("-", "*", "•") or first.isdecimal():
        line = _LIST_ITEM.sub("", line)
    return line.strip()


def _sentences(text: str) -> list[str]:
    out: list[str] = []
    for line in text.splitlines():
        line = unlisted(line)
        if line:
            out.extend(s.strip() for s in _SENTENCE_END.split(line) if s.strip())
    return out


def _is_heading(line: str) -> bool:
    line = line.strip()
    return line.endswith(":") and len(line) <= 40


# What is read of a long text: its head and its tail. Facts cluster at the ends of tool outputs
# (the command's first lines, the error and the summary line at the end); the middle of a long
# listing repeats itself. Cuts fall on line breaks (else on a space) within these windows.
SCAN_HEAD_CHARS = 4_000
SCAN_TAIL_CHARS = 2_000


def _scanned(text: str) -> str:
    """``text`` when it is at most ``SCAN_HEAD_CHARS + SCAN_TAIL_CHARS`` characters long, else
    its head and tail (whole lines when the windows hold a line break) joined by a line break."""
    head, tail = SCAN_HEAD_CHARS, SCAN_TAIL_CHARS
    if len(text) <= head + tail:
        return text
    first = text[:head]
    cut = first.rfind("\n")
    if cut < 0:
        cut = first.rfind(" ")
    if cut > 0:
        first = first[:cut]
    last = text[len(text) - tail :] if tail > 0 else ""
    cut = last.find("\n")
    if cut < 0:
        cut = last.find(" ")
    if cut >= 0:
        last = last[cut + 1 :]
    return f"{first}\n{last}"


class MessageFacts(NamedTuple):
    """What one message contributes to a summary (see ``message_facts``)."""

    kind: str  # "meta" (nothing but its text as an assistant's), "summary" or "message"
    earlier: tuple[str, ...] = ()  # an earlier summary's lines
    request: str = ""  # a user's request, on one line
    files: tuple[str, ...] = ()  # one line each, distinct, in order of their latest mention
    commands: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()  # the last few distinct error lines
    decisions: tuple[str, ...] = ()  # in order, repeats included
    said: bool = False  # an assistant's message with text (what ``resolution`` can read)
    resolution: str = ""  # its first sentence that is not an error line nor a heading
    text: str = ""  # an assistant's text (for the next steps, read from the last one)


def _latest(lines: list[str]) -> list[str]:
    """Each line once, at its latest place (in the order of their latest mention)."""
    return list(reversed(dict.fromkeys(reversed(lines))))


def _distinct_lines(lines: Iterable[str], *, joined: bool = False) -> tuple[str, ...]:
    """One-line forms, without empty ones, each once at its latest place (``_latest`` over
    them). ``joined``: the lines are in that form already."""
    ordered: dict[str, None] = {}
    for line in lines:
        if not joined:
            line = one_line(line)
        if line:
            ordered.pop(line, None)
            ordered[line] = None
    return tuple(ordered)


def _resolution(text: str) -> str:
    for line in text.splitlines():
        if line.strip() and not is_error_line(line) and not _is_heading(line):
            sentences = _sentences(line)
            return sentences[0] if sentences else ""
    return ""


def carried_over(text: str) -> tuple[str, ...]:
    """What an earlier summary's text carries over: its lines without list markers, less the
    empty ones and the headings (lines that end with a colon), on one line each, distinct."""
    lines = (unlisted(line) for line in text.splitlines())
    return _distinct_lines(line for line in lines if line and not line.endswith(":"))


def _then(first: tuple[str, ...], then: tuple[str, ...]) -> tuple[str, ...]:
    """``_distinct_lines(first + then)`` for two tuples of distinct one-line lines."""
    if not first:
        return then
    later = set(then)
    return (*(line for line in first if line not in later), *then)


def _summary_lines(text: str, rendered: Mapping[str, tuple[str, ...]] | None) -> tuple[str, ...]:
    """``carried_over(text)``, taken from ``rendered`` when ``text`` ends with a summary this
    summarizer wrote (after a prefix that ends a line: a policy's header)."""
    if rendered:
        for summary, lines in rendered.items():
            if text.endswith(summary):
                prefix = text[: len(text) - len(summary)]
                if not prefix or prefix.endswith("\n"):
                    return _then(carried_over(prefix), lines)
    return carried_over(text)


def message_facts(
    message: Message, rendered: Mapping[str, tuple[str, ...]] | None = None
) -> MessageFacts:
    """One message's facts, from the head and tail of each long text (``_scanned``); an
    earlier summary is read whole (it is facts already), and so are a user's request and a
    tool call's arguments (decoded as JSON; their long strings scanned like texts)."""
    said = False
    resolution = text = ""
    if message.role is Role.ASSISTANT:
        text = _scanned("\n".join(_plain_texts(message)))
        said = bool(text.strip())
        resolution = _resolution(text) if said else ""
    if message.kind is MessageKind.META:
        return MessageFacts("meta", said=said, resolution=resolution, text=text)
    if message.kind is MessageKind.SUMMARY:
        earlier: tuple[str, ...] = ()
        for content in _content_texts(message):
            earlier = _then(earlier, _summary_lines(content, rendered))
        return MessageFacts("summary", earlier=earlier, said=said, resolution=resolution, text=text)
    request = ""
    if message.role is Role.USER and message.kind is MessageKind.MESSAGE:
        request = one_line(" ".join(_plain_texts(message)))
    # the paths found, in pieces; one piece from ``paths_in`` alone is distinct already
    pieces: list[list[str]] = []
    mixed = False  # a piece from a tool call's decoded arguments (not distinct)
    commands: list[str] = []
    error_texts: list[tuple[str, bool]] = []  # (scanned text, is_error) of each error source
    reads_errors = message.role is not Role.SYSTEM and message.role is not Role.DEVELOPER
    for part in message.parts:
        if part.type in _CONTENT_TYPES and part.text:
            content = _scanned(part.text)
            pieces.append(paths_in(content))
            commands.extend(command_lines(content))
            if reads_errors and part.type in _ERROR_TYPES:
                error_texts.append((content, part.is_error))
    for call in _tool_calls(message):
        found_in_call = call_facts(call.tool_name, call.arguments, _scanned)
        if found_in_call.paths is not None:
            pieces.append(found_in_call.paths)
            mixed = mixed or found_in_call.decoded
        if found_in_call.command:
            commands.append(first_line(found_in_call.command))
    errors: tuple[str, ...] = ()
    if len(error_texts) == 1:
        errors = tuple(last_error_lines(*error_texts[0], _ERRORS_PER_MESSAGE))
    elif error_texts:
        found: list[str] = []
        for content, is_error in error_texts:
            found.extend(error_lines(content, is_error))
        errors = tuple(list(dict.fromkeys(found))[-_ERRORS_PER_MESSAGE:])
    decisions: tuple[str, ...] = ()
    if message.role is Role.ASSISTANT:
        decisions = tuple(
            sentence
            for sentence in _sentences(text)
            if len(sentence) >= _MIN_SENTENCE and _DECISION.search(sentence)
        )
    if len(pieces) == 1 and not mixed:
        files = tuple(pieces[0])  # one ``paths_in``: distinct, none empty
    else:
        files = _distinct_lines(chain.from_iterable(pieces), joined=True)
    return MessageFacts(
        "message",
        (),
        request,
        files,
        _distinct_lines(commands) if commands else (),
        errors,
        decisions,
        said,
        resolution,
        text,
    )


def fingerprint(message: Message) -> tuple[object, ...]:
    """What ``message_facts`` reads of a message, as lengths and hashes (strings cache their
    hash, so this is cheap; it keeps no text alive)."""
    return (
        message.id,
        message.role,
        message.kind,
        tuple(
            [
                (p.type, len(p.text), hash(p.text), hash(p.arguments), p.is_error, p.tool_name)
                for p in message.parts
            ]
        ),
    )


def _next_steps(last: str) -> list[str]:
    next_steps: list[str] = []
    for line in last.splitlines():
        if not line.strip() or _is_heading(line):
            continue
        if _dash_item(line):
            next_steps.append(one_line(line[2:]))
            continue
        if _LIST_ITEM.match(line) or _NEXT_LINE.match(line):
            next_steps.append(one_line(_LIST_ITEM.sub("", line)))
            continue
        next_steps.extend(
            s for s in _sentences(line) if len(s) >= _MIN_SENTENCE and _PLAN.search(s)
        )
    if not next_steps:
        sentences = _sentences(last)
        if sentences:
            next_steps.append(f"last said: {sentences[-1]}")
    return list(dict.fromkeys(one_line(s) for s in next_steps if s.strip()))


def extract_sections(
    messages: Sequence[Message], facts_of: Callable[[Message], MessageFacts] = message_facts
) -> dict[str, list[str]]:
    facts = [facts_of(m) for m in messages]
    requests: list[str] = []
    # every mention, in order (each fact's lines are on one line and not empty)
    earlier: list[str] = []
    files: list[str] = []
    commands: list[str] = []
    errors: list[str] = []
    decisions: list[str] = []
    summaries = 0  # the facts ``earlier`` comes from

    fixes: list[str] = []  # what each error was followed by, once one is met
    for index, fact in enumerate(facts):
        if fact.kind == "meta":
            continue
        if fact.kind == "summary":
            earlier += fact.earlier
            summaries += 1
            continue
        if fact.request:
            requests.append(fact.request)
        files += fact.files
        commands += fact.commands
        if fact.errors:
            if not fixes:
                fixes = _fixes(facts)
            errors += fact.errors[:-1]
            last_error = fact.errors[-1]
            errors.append(
                one_line(f"{last_error} → {fixes[index]}") if fixes[index] else last_error
            )
        if fact.decisions:
            decisions.extend(filter(None, map(one_line, fact.decisions)))

    last = next((f.text for f in reversed(facts) if f.said), "")
    next_steps = _next_steps(last) if last else []
    planned = set(next_steps)

    task = []
    if requests:
        task.append(f"first: {requests[0]}")
        later = list(dict.fromkeys(r for r in requests[1:] if r != requests[0]))
        task.extend(f"then: {r}" for r in later)
    return {
        "task": task,
        # one summary's lines are distinct already
        "earlier": earlier if summaries <= 1 else _latest(earlier),
        "files": _latest(files),
        "commands": _latest(commands),
        "errors": _latest(errors),
        "decisions": [d for d in _latest(decisions) if d not in planned] if decisions else [],
        "next": next_steps,
    }


def _fixes(facts: Sequence[MessageFacts]) -> list[str]:
    """What each message was followed by: the first sentence of the next assistant message
    with text (what an error line is followed by in the summary)."""
    fixes = [""] * len(facts)
    fix = ""
    for index in range(len(facts) - 1, -1, -1):
        fixes[index] = fix
        if facts[index].said:
            fix = facts[index].resolution
    return fixes


CHECK_BOXES = ("[ ]", "[x]", "[X]")  # what ``_LIST_ITEM`` takes away after a list marker
