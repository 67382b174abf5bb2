"""The summaries a compaction keeps, and which summarizer writes them.

Policies take a ``Summarizer`` (``ctx_inspect.core.policies.base``): anything with
``summarize(messages, budget_tokens) -> str``. Two exist:

- ``LocalSummarizer`` (here), the default: deterministic, offline, extractive. It keeps what
  compaction prompts ask an agent to keep (the task, the files, the commands, the errors and
  their fixes, the decisions, the next steps), one fact per line under a section header, and
  drops the least valuable lines until the text fits the budget. What it reads of each message
  is ``core.summary_extract``'s (its paths, commands and errors by ``core.facts``' detectors);
  how the lines are laid out and dropped, ``core.summary_layout``'s.
- ``OpenAICompatibleSummarizer`` (``ctx_inspect.core.endpoint``): a server the user configured.

``summarizer_from_config`` chooses between them. Both raise before returning anything, so a
failed summary never leaves a half-built context: policies call ``summarize`` before they
change anything.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from itertools import chain

from ctx_inspect.core.endpoint import SETTING_NAMES, endpoint_from_config
from ctx_inspect.core.estimate import Counter
from ctx_inspect.core.facts import paths
from ctx_inspect.core.model import Message
from ctx_inspect.core.policies.base import Summarizer
from ctx_inspect.core.summary_extract import (
    CHECK_BOXES,
    MessageFacts,
    extract_sections,
    fingerprint,
    message_facts,
    unlisted,
)
from ctx_inspect.core.summary_layout import SECTIONS, drop_plan, fewest_dropped, forget_plans
from ctx_inspect.errors import ConfigError

__all__ = [
    "SUMMARIZER_KEYS",
    "LocalSummarizer",
    "forget_memos",
    "summarizer_from_config",
]


def _chars_over_four(text: str) -> int:
    """The default measure: a token per four characters, rounded up (never under-counts)."""
    return -(-len(text) // 4)


def forget_memos() -> None:
    """Empty the memos every summarizer in the process shares (paths read from tokens, drop
    plans), as in a new process: for a figure of a first summary, and for tests."""
    paths.forget_memos()
    forget_plans()


class LocalSummarizer:
    """An extractive summary, offline and deterministic (the same messages give the same text).

    ``counter`` measures the budget (anything with ``count(text) -> int``); without one a token
    is four characters, rounded up. Lines are whole facts: when the budget is short the least
    valuable lines go first (within a section, the oldest); a line is cut only when it is the
    last one left and alone longer than the budget.
    """

    CACHE_SIZE = 16_384  # messages whose facts are kept
    RENDERED_SIZE = 8  # summaries written last, with the lines they carry over

    def __init__(self, counter: Counter | None = None) -> None:
        self._counter = counter
        self._facts: dict[tuple[object, ...], MessageFacts] = {}
        self._rendered: dict[str, tuple[str, ...]] = {}

    def _facts_of(self, message: Message) -> MessageFacts:
        """A message's facts, cached by its id and a fingerprint of its content (replays in a
        sweep summarize the same messages many times)."""
        key = fingerprint(message)
        facts = self._facts.get(key)
        if facts is None:
            if len(self._facts) >= self.CACHE_SIZE:
                del self._facts[next(iter(self._facts))]  # the oldest entry
            facts = self._facts[key] = message_facts(message, self._rendered)
        return facts

    def measure(self, text: str) -> int:
        if not text:
            return 0
        return self._counter.count(text) if self._counter is not None else _chars_over_four(text)

    def summarize(self, messages: Sequence[Message], budget_tokens: int) -> str:
        if budget_tokens <= 0:
            return ""
        extracted = extract_sections(messages, self._facts_of)
        sections = [extracted[section.key] for section in SECTIONS]  # each oldest first
        texts = list(chain.from_iterable(sections))  # every line, section after section
        if not texts:
            if not messages:
                return ""
            # nothing to extract (e.g. a conversation a log does not show): say so, briefly,
            # rather than return nothing, which agents treat as a failed compaction
            note = f"(summary of {len(messages)} messages: no task, file, command or error found)"
            return note if self.measure(note) <= budget_tokens else note[: budget_tokens * 4]
        plan = drop_plan(tuple(map(len, sections)))
        order = plan.order

        def kept(dropped: int) -> list[list[str]]:
            """Each section's lines less the first ``dropped`` of ``order``.

            Within a section the values grow with recency, so the lines ``order`` takes from
            a section first are its oldest: a section keeps its newest lines. The first
            request is the exception: its bonus puts it last of all, after the task's other
            lines."""
            if not dropped:
                return sections
            taken = plan.owners[:dropped]
            lines = [items[taken.count(s_index) :] for s_index, items in enumerate(sections)]
            count = taken.count(0)
            if 0 < count < len(sections[0]):
                lines[0] = [sections[0][0], *sections[0][count + 1 :]]
            return lines

        def render(lines: list[list[str]]) -> str:
            return "\n\n".join(
                "\n- ".join([section.header, *body])  # "- " per line
                for section, body in zip(SECTIONS, lines, strict=True)
                if body
            )

        if self._counter is None:
            low = fewest_dropped(plan, texts, budget_tokens)
            if low < len(texts):
                lines = kept(low)
                return self._remember(render(lines), lines)
            return self._cut(texts[order[-1]], budget_tokens)
        low, high = 0, len(texts)  # the fewest lines to drop so that the text fits
        while low < high:
            middle = (low + high) // 2
            if self.measure(render(kept(middle))) <= budget_tokens:
                high = middle
            else:
                low = middle + 1
        while low < len(texts) and self.measure(render(kept(low))) > budget_tokens:
            low += 1  # a real tokenizer is not always monotone in removed lines
        if low < len(texts):
            lines = kept(low)
            return self._remember(render(lines), lines)
        return self._cut(texts[order[-1]], budget_tokens)

    def _remember(self, summary: str, sections: Sequence[Sequence[str]]) -> str:
        """Keep what ``summary`` (the rendering of ``sections``' lines) will carry over when it
        is summarized in turn (its lines are known: no need to read it again):
        ``carried_over(summary)``.

        A line is rendered as ``"- " + text``, where ``text`` is on one line and not empty
        (every fact is), so it carries over as ``text`` itself (``unlisted``), unless it
        starts with a check box (``[x] ...``) that ``unlisted`` takes away with the dash, or
        it ends with a colon (a heading, left out).
        """
        lines = list(chain.from_iterable(sections))
        odd = [text for text in lines if text[0] == "[" or text[-1] == ":"]
        # ``unlisted`` takes a check box away, but leaves a line that starts with another "["
        if any(text[:3] in CHECK_BOXES or text[-1] == ":" for text in odd):
            carried = []
            for text in lines:
                if text[0] == "[":
                    text = unlisted("- " + text)
                    if not text:
                        continue
                if text[-1] != ":":
                    carried.append(text)
            lines = carried
        if len(self._rendered) >= self.RENDERED_SIZE:
            del self._rendered[next(iter(self._rendered))]
        # each line once, at its latest place (``summary_extract._distinct_lines``)
        self._rendered[summary] = tuple(reversed(dict.fromkeys(reversed(lines))))
        return summary

    def _cut(self, text: str, budget_tokens: int) -> str:
        """The one line left, alone, cut to the budget when it is longer."""
        if self.measure(text) <= budget_tokens:
            return text
        low, high = 0, len(text)  # the longest prefix that fits with its ellipsis
        while low < high:
            middle = (low + high + 1) // 2
            if self.measure(text[:middle].rstrip() + "…") <= budget_tokens:
                low = middle
            else:
                high = middle - 1
        if low == 0:
            return ""
        return text[:low].rstrip() + "…"


# --------------------------------------------------------------------------------------------
# Which summarizer

SUMMARIZER_KEYS: tuple[str, ...] = ("summarizer", *SETTING_NAMES)


def summarizer_from_config(config: Mapping[str, object]) -> Summarizer:
    """The summarizer the configuration asks for (``summarizer = "local"`` by default).

    Keys: ``summarizer`` (``"local"`` or ``"openai"``), and for ``"openai"`` the endpoint's
    settings (``core.endpoint.EndpointSettings``): ``summarizer_base_url``,
    ``summarizer_model``, ``summarizer_api_key_env`` (the NAME of the environment variable that
    holds the key), ``summarizer_timeout`` (seconds: the most one summary takes, all attempts
    included), ``summarizer_retries`` and ``summarizer_max_tokens``. Other keys are left to
    their owners; an unknown ``summarizer_*`` key is an error.
    """
    for key in config:
        if key.startswith("summarizer") and key not in SUMMARIZER_KEYS:
            close = difflib.get_close_matches(key, SUMMARIZER_KEYS, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(
                "Invalid summarizer setting",
                f"unknown setting {key!r}{hint}; known: {', '.join(SUMMARIZER_KEYS)}",
            )
    kind = config.get("summarizer", "local")
    if kind == "local":
        return LocalSummarizer()
    if kind != "openai":
        raise ConfigError(
            "Invalid summarizer setting", f"summarizer: expected 'local' or 'openai', got {kind!r}"
        )
    return endpoint_from_config(config)
