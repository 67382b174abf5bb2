"""Summaries written by an OpenAI-compatible endpoint: ``POST {base_url}/chat/completions``.

The server is one the user configured (llama.cpp, vLLM, Ollama's ``/v1``, OpenAI, ...); this is
the only network call the inspector makes, and only when asked (DESIGN.md, decision 9). The
standard library only. What the server sends is hostile input, and the call keeps to these
bounds whatever it does:

- **one deadline**: a summary takes at most ``timeout`` seconds, every attempt and every wait
  between attempts included. The deadline holds against a server that never answers, answers
  one byte at a time, or a host name that never resolves: the request runs on a thread of its
  own, and at the deadline the caller stops waiting and cuts the connection;
- **retries within it**: a refused or broken connection, HTTP 429 and 5xx are tried again, up to
  ``retries`` more times, after a short wait (0.5 s, doubling, at most 5 s; longer when the
  server's ``Retry-After`` asks for it), and only while the deadline leaves time for the wait;
- **a bounded reply**: at most ``MAX_REPLY_BYTES`` are read (a larger reply is an error, not a
  truncated summary), it must be UTF-8 JSON of a chat completion, nested no deeper than the
  decoder allows, with text as the first choice's content;
- **no redirects**: a 3xx answer is an error naming where the server points; the request (the
  conversation, the key) never goes anywhere it was not configured to go;
- **errors on one line**: every failure is a ``SummarizerError`` whose message is one printable
  line (what the server said is quoted with its control characters escaped) and never holds
  the API key.

The summary text itself is data: it is returned as the server wrote it (stripped of the
surrounding whitespace) and shown, like every transcript text, as plain text.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from ctx_inspect.core.http_exchange import MAX_REPLY_BYTES, Exchange, Reply, is_loopback
from ctx_inspect.core.model import Message, MessageKind, PartType
from ctx_inspect.errors import ConfigError, InspectorError

__all__ = [
    "MAX_REPLY_BYTES",
    "MAX_TIMEOUT_SECONDS",
    "SETTING_NAMES",
    "EndpointSettings",
    "OpenAICompatibleSummarizer",
    "SummarizerError",
    "endpoint_from_config",
    "render_conversation",
    "system_prompt",
]

MAX_PART_CHARS = 8_000  # a longer part is sent as its head and tail
MAX_BACKOFF_SECONDS = 5.0
MAX_TIMEOUT_SECONDS = 3600.0
_SNIPPET = 160
_ERROR_TEXT_CHARS = 8_192  # what is searched for the message of an error page


class SummarizerError(InspectorError):
    """A summary could not be written: the server timed out, failed, replied nonsense, or the
    API key is missing. The message is one printable line and never contains the key."""


# --------------------------------------------------------------------------------------------
# What is sent


def system_prompt(budget_tokens: int) -> str:
    """The instructions sent with the conversation (our wording)."""
    return (
        "You write the summary that will replace the earlier part of a conversation between a "
        "user and a coding agent, so that the agent can carry on with the task without it. "
        "Keep, in this order: the task (what the user asked, first and later); the files read "
        "or changed; the commands run; the errors met and how each one was resolved; the "
        "decisions taken and why; the next steps. Keep paths, commands and error messages "
        "word for word, invent nothing, and leave out pleasantries. "
        f"Stay within {budget_tokens} tokens. Reply with the summary only."
    )


def _clip(text: str, limit: int = MAX_PART_CHARS) -> str:
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    omitted = len(text) - head - tail
    return f"{text[:head]}\n[... {omitted} characters left out ...]\n{text[-tail:]}"


def render_conversation(messages: Sequence[Message]) -> str:
    """The conversation as plain text, one labelled block per part."""
    blocks: list[str] = []
    for message in messages:
        if message.kind is MessageKind.META:
            continue
        role = "earlier summary" if message.kind is MessageKind.SUMMARY else message.role.value
        for part in message.parts:
            if part.type is PartType.TOOL_CALL:
                label = f"[{role} called {part.tool_name or 'a tool'}]"
                blocks.append(f"{label} {_clip(part.arguments or '')}".rstrip())
            elif part.type is PartType.TOOL_RESULT:
                name = f" {part.tool_name}" if part.tool_name else ""
                status = " (error)" if part.is_error else ""
                blocks.append(f"[tool{name} result{status}]\n{_clip(part.text)}")
            elif part.type is PartType.THINKING:
                continue
            elif part.type is PartType.IMAGE:
                blocks.append(f"[{role}: an image]")
            elif part.text:
                blocks.append(f"[{role}]\n{_clip(part.text)}")
    return "\n\n".join(blocks)


# --------------------------------------------------------------------------------------------
# The summarizer


class _Retry(Exception):
    """An attempt failed in a way worth another try; ``error`` is what to raise at the end."""

    def __init__(self, error: SummarizerError, wait: float | None = None) -> None:
        super().__init__(error.message)
        self.error = error
        self.wait = wait


def check_base_url(base_url: str) -> urllib.parse.SplitResult:
    """``base_url`` read as an http(s) URL, or a ConfigError that never echoes a password."""
    if any(c.isspace() or not c.isprintable() for c in base_url):
        raise ConfigError(
            "Invalid summarizer setting",
            f"summarizer_base_url: expected a URL without spaces or control characters, "
            f"got {base_url!r}",
        )
    parsed = urllib.parse.urlsplit(base_url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ConfigError(
            "Invalid summarizer setting",
            f"summarizer_base_url: expected an http:// or https:// URL, got {base_url!r}",
        )
    if parsed.username is not None or parsed.password is not None:
        raise ConfigError(
            "Invalid summarizer setting",
            "summarizer_base_url must not hold a user name or password (it is not shown); "
            "put the key in the environment variable named by api_key_env",
        )
    if parsed.query or parsed.fragment:
        raise ConfigError(
            "Invalid summarizer setting",
            f"summarizer_base_url: expected no query or fragment, got {base_url!r}",
        )
    try:
        parsed.port  # noqa: B018  (reading it checks it)
    except ValueError:
        raise ConfigError(
            "Invalid summarizer setting", f"summarizer_base_url: invalid port in {base_url!r}"
        ) from None
    return parsed


class OpenAICompatibleSummarizer:
    """A summary from ``POST {base_url}/chat/completions``.

    ``base_url`` ends before ``/chat/completions`` (``http://127.0.0.1:8080/v1``). The API key is
    read at call time from the environment variable named ``api_key_env`` (None: no key, as for a
    local server). ``timeout`` is the most one summary takes, all attempts included; connection
    errors, 429 and 5xx are retried ``retries`` times within it, with a short exponential
    backoff; everything else fails at once. ``max_tokens`` caps the reply (None: the summary
    budget).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str | None = None,
        timeout: float = 60,
        retries: int = 2,
        max_tokens: int | None = None,
        *,
        backoff: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        parsed = check_base_url(base_url)
        if (
            not 0 < timeout <= MAX_TIMEOUT_SECONDS
            or retries < 0
            or (max_tokens is not None and max_tokens <= 0)
        ):
            raise ConfigError(
                "Invalid summarizer setting",
                f"timeout must be > 0 and at most {MAX_TIMEOUT_SECONDS:g} s, retries >= 0 and "
                "max_tokens > 0",
            )
        self.base_url = base_url.rstrip("/")
        self.url = f"{self.base_url}/chat/completions"
        self.model = model
        self.api_key_env = api_key_env
        self.timeout = timeout
        self.retries = retries
        self.max_tokens = max_tokens
        self.backoff = backoff
        self._sleep = sleep
        self._clock = clock
        self._direct = is_loopback(parsed.hostname)

    # -- the call -------------------------------------------------------------------------

    def summarize(self, messages: Sequence[Message], budget_tokens: int) -> str:
        deadline = self._clock() + self.timeout
        key = self._api_key()
        body = json.dumps(self.request_body(messages, budget_tokens)).encode("utf-8")
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": "ctx-inspect",
        }
        if key:
            headers["Authorization"] = f"Bearer {key}"
        attempts = self.retries + 1
        for attempt in range(1, attempts + 1):
            try:
                return self._attempt(body, headers, key, deadline)
            except _Retry as retry:
                wait = min(MAX_BACKOFF_SECONDS, self.backoff * (2 ** (attempt - 1)))
                if retry.wait is not None:
                    wait = max(wait, retry.wait)
                if attempt >= attempts:
                    raise self._final(retry.error, attempt, out_of_time=False) from None
                if self._clock() + wait >= deadline:
                    raise self._final(retry.error, attempt, out_of_time=True) from None
                self._sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    def request_body(self, messages: Sequence[Message], budget_tokens: int) -> dict[str, Any]:
        budget = max(1, budget_tokens)
        return {
            "model": self.model,
            "messages": [
                {"role": "system", "content": system_prompt(budget)},
                {
                    "role": "user",
                    "content": "The conversation to summarise:\n\n" + render_conversation(messages),
                },
            ],
            "max_tokens": self.max_tokens if self.max_tokens is not None else budget,
            "temperature": 0,
            "stream": False,
        }

    def _api_key(self) -> str | None:
        if self.api_key_env is None:
            return None
        key = os.environ.get(self.api_key_env, "").strip()
        if not key:
            raise SummarizerError(
                "Summarizer API key missing",
                f"the environment variable {self.api_key_env} (summarizer_api_key_env) is not "
                "set or is empty",
            )
        if not (key.isascii() and key.isprintable()):
            raise SummarizerError(
                "Summarizer API key unusable",
                f"the value of {self.api_key_env} holds characters an HTTP header cannot carry "
                "(the value is not shown)",
            )
        return key

    def _final(self, error: SummarizerError, attempts: int, out_of_time: bool) -> SummarizerError:
        notes = []
        if attempts > 1:
            notes.append(f"after {attempts} attempts")
        if out_of_time and not isinstance(error, _TimedOut):
            notes.append(f"no time left for another within the {self.timeout:g} s timeout")
        if not notes:
            return error
        return type(error)(error.title, f"{error.message} ({'; '.join(notes)})")

    def _attempt(
        self, body: bytes, headers: dict[str, str], key: str | None, deadline: float
    ) -> str:
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        outcome = Exchange(request, deadline, self._clock, self._direct).outcome()
        if outcome is None:
            raise _Retry(self._timed_out())
        if isinstance(outcome, BaseException):
            raise _Retry(self._transport_error(outcome, key))
        status = outcome.status
        if 300 <= status < 400:
            where = outcome.headers.get("location", "")
            target = f" to {_snippet(where, key)}" if where.strip() else ""
            raise SummarizerError(
                "Summarizer request failed",
                _redact(
                    f"HTTP {status} from {self.url}: the server redirects{target}; redirects are "
                    "not followed (set base_url to the address that answers)",
                    key,
                ),
            )
        if not 200 <= status < 300:
            error = self._http_error(outcome, key)
            if status == 429 or status >= 500:
                raise _Retry(error, _retry_after(outcome.headers))
            raise error
        return self._content(outcome, key)

    def _timed_out(self) -> SummarizerError:
        return _TimedOut(
            "Summarizer timed out",
            f"no complete reply from {self.url} within {self.timeout:g} s",
        )

    def _transport_error(self, exc: BaseException, key: str | None) -> SummarizerError:
        if isinstance(exc, urllib.error.URLError):
            reason = exc.reason
            if isinstance(reason, TimeoutError):
                return self._timed_out()
            text = reason.strerror if isinstance(reason, OSError) else reason
            return SummarizerError(
                "Summarizer unreachable",
                _redact(f"cannot connect to {self.url}: {text or _describe(exc)}", key),
            )
        if isinstance(exc, TimeoutError):
            return self._timed_out()
        if isinstance(exc, OSError):
            what = exc.strerror or _describe(exc)
        elif isinstance(exc, http.client.HTTPException | ValueError):
            what = f"the reply is not valid HTTP ({_snippet(_describe(exc), key)})"
        else:
            raise exc  # not the server's doing: a bug, shown as one
        return SummarizerError(
            "Summarizer unreachable", _redact(f"the connection to {self.url} failed: {what}", key)
        )

    def _http_error(self, reply: Reply, key: str | None) -> SummarizerError:
        detail = _server_message(reply.body, key) or _snippet(reply.reason, key) or "no message"
        return SummarizerError(
            "Summarizer request failed",
            _redact(f"HTTP {reply.status} from {self.url}: {detail}", key),
        )

    def _content(self, reply: Reply, key: str | None) -> str:
        def malformed(what: str) -> SummarizerError:
            return SummarizerError(
                "Summarizer reply malformed", _redact(f"{self.url}: {what}", key)
            )

        if not reply.complete:
            raise malformed(
                f"the reply is larger than {MAX_REPLY_BYTES // (1024 * 1024)} MiB "
                f"({MAX_REPLY_BYTES:,} bytes), the most that is read"
            )
        try:
            text = reply.body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise malformed(f"the reply is not UTF-8 text (byte {exc.start})") from None
        loaded, data = _load_json(text)
        if loaded is None:
            kind = _snippet(reply.headers.get("content-type", "").split(";")[0], key)
            raise malformed(
                f"the reply is not JSON ({kind or 'no content type'}: {_snippet(text, key)!r})"
            )
        if loaded is False:
            raise malformed("the reply is nested too deeply to be a chat completion")
        if not isinstance(data, dict):
            raise malformed(f"the reply is {_kind(data)}, not a JSON object")
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            server = _server_message(reply.body, key)
            extra = f"; the server says: {server}" if server else ""
            raise malformed(f"the reply has no choices{extra}")
        first = choices[0]
        if not isinstance(first, dict):
            raise malformed(f"the reply's first choice is {_kind(first)}, not an object")
        finish = first.get("finish_reason")
        why = f" (finish_reason {_snippet(finish, key)})" if isinstance(finish, str) else ""
        message = first.get("message")
        if not isinstance(message, dict):
            raise malformed(f"the reply's first choice has no message{why}")
        content = message.get("content")
        if isinstance(content, list):  # content parts
            content = _joined_parts(content)
            if content is None:
                raise malformed("the reply's content parts are not text")
        if not isinstance(content, str):
            raise malformed(f"the reply's first choice has {_kind(content)} as content{why}")
        if not content.strip():
            raise malformed(f"the reply's first choice has empty content{why}")
        return content.strip()


class _TimedOut(SummarizerError):
    """The deadline came before a complete reply."""


def _joined_parts(parts: list[Any]) -> str | None:
    """The text of content parts (``[{"type": "text", "text": ...}, ...]``); parts without
    text (an image) are left out. None when a part is not an object or its text not a string."""
    texts = []
    for part in parts:
        if not isinstance(part, dict):
            return None
        text = part.get("text")
        if text is None:
            continue
        if not isinstance(text, str):
            return None
        texts.append(text)
    return "".join(texts)


def _load_json(text: str) -> tuple[bool | None, Any]:
    """``(True, value)``; ``(None, None)`` when ``text`` is not JSON; ``(False, None)`` when
    it is nested deeper than the decoder goes (its recursion limit)."""
    try:
        return True, json.loads(text)
    except RecursionError:
        return False, None
    except ValueError:
        return None, None


def _kind(value: object) -> str:
    """What a JSON value is, in words (never the value itself, which may be huge or deep)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("retry-after")
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and 0 <= seconds <= MAX_TIMEOUT_SECONDS else None


def _printable(text: str) -> str:
    """``text`` on one line with nothing a terminal would act on: whitespace runs as one
    space, any other character that is not printable as its escape (ESC as ``\\x1b``)."""
    line = " ".join(text.split())
    if line.isprintable():
        return line
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in line)


def _snippet(text: str, key: str | None) -> str:
    """The head of a text from the server, on one printable line, the key taken out first
    (a cut must not leave a part of it)."""
    if key:
        text = text.replace(key, "[redacted]")
    text = _printable(text[: _SNIPPET * 8])  # a snippet's worth (whitespace runs shrink)
    return text if len(text) <= _SNIPPET else text[:_SNIPPET] + "…"


def _server_message(raw: bytes, key: str | None) -> str:
    """The server's own error message from an error body (OpenAI, llama.cpp, vLLM, Ollama)."""
    text = raw.decode("utf-8", errors="replace")
    if not text.strip():
        return ""
    loaded, data = _load_json(text)
    if loaded is None:
        return _snippet(_TAG.sub(" ", text[:_ERROR_TEXT_CHARS]), key)
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict):
            for field in ("message", "type", "code"):
                if isinstance(error.get(field), str) and error[field].strip():
                    return _snippet(error[field], key)
        if isinstance(error, str) and error.strip():
            return _snippet(error, key)
        for field in ("message", "detail"):
            if isinstance(data.get(field), str) and data[field].strip():
                return _snippet(data[field], key)
        return ""
    return _snippet(text, key) if loaded else ""


_TAG = re.compile(r"<[^<>]*>")  # an HTML tag (``[^<>]``: linear even on a run of "<")


def _redact(text: str, key: str | None) -> str:
    if key:
        text = text.replace(key, "[redacted]")
    return _printable(text)


# --------------------------------------------------------------------------------------------
# Its settings

SETTING_PREFIX = "summarizer_"  # a setting's name in the configuration: the prefix, the field
_TITLE = "Invalid summarizer setting"
_Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class EndpointSettings(BaseModel):
    """The settings of an OpenAI-compatible summarizer (each named ``summarizer_<field>`` in the
    configuration): strict (no silent coercion), closed and frozen, as a profile's are. A
    field's description is what it expects, as an error says it."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, allow_inf_nan=False)

    base_url: _Text = Field(description="a non-empty string")
    model: _Text = Field(description="a non-empty string")
    # the NAME of the environment variable that holds the key (never the key: not echoed)
    api_key_env: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    # the most one summary takes, all attempts included
    timeout: float = Field(
        60.0,
        gt=0,
        le=MAX_TIMEOUT_SECONDS,
        description=f"a number of seconds > 0 and at most {MAX_TIMEOUT_SECONDS:g}",
    )
    retries: int = Field(2, ge=0, le=10, description="an integer from 0 to 10")
    max_tokens: int | None = Field(None, gt=0, description="an integer > 0")


SETTING_NAMES: tuple[str, ...] = tuple(
    SETTING_PREFIX + name for name in EndpointSettings.model_fields
)


def endpoint_from_config(config: Mapping[str, object]) -> OpenAICompatibleSummarizer:
    """The summarizer the ``summarizer_*`` keys of ``config`` describe (other keys are left to
    their owners); a ConfigError names the first setting that is missing or invalid."""
    values = {
        key.removeprefix(SETTING_PREFIX): value
        for key, value in config.items()
        if key.startswith(SETTING_PREFIX)
    }
    try:
        settings = EndpointSettings.model_validate(values)
    except ValidationError as exc:
        raise _settings_error(exc, values) from None
    return OpenAICompatibleSummarizer(
        settings.base_url,
        settings.model,
        api_key_env=settings.api_key_env,
        timeout=settings.timeout,
        retries=settings.retries,
        max_tokens=settings.max_tokens,
    )


def _settings_error(exc: ValidationError, values: Mapping[str, object]) -> ConfigError:
    error = exc.errors(include_url=False)[0]
    field = str(error["loc"][0]) if error["loc"] else ""
    key = SETTING_PREFIX + field
    value = values.get(field)
    if error["type"] == "extra_forbidden":
        return ConfigError(_TITLE, f"unknown setting {key!r}; known: {', '.join(SETTING_NAMES)}")
    if field == "api_key_env":  # never echo the value: it may be the key itself, misplaced
        return ConfigError(
            _TITLE,
            "summarizer_api_key_env must be the NAME of an environment variable (letters, "
            "digits and underscores, e.g. OPENAI_API_KEY), not the key itself",
        )
    if error["type"] == "missing" or (value is None and field in ("base_url", "model")):
        return ConfigError(_TITLE, f'{key} is required when summarizer = "openai"')
    expected = EndpointSettings.model_fields[field].description
    return ConfigError(_TITLE, f"{key}: expected {expected}, got {value!r}")
