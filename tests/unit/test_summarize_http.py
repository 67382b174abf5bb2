"""The OpenAI-compatible summarizer against a real HTTP server on 127.0.0.1 (started here)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from ctx_inspect.agents.fifth.policy import POLICY
from ctx_inspect.core.endpoint import OpenAICompatibleSummarizer, SummarizerError
from ctx_inspect.core.model import Message, Part, PartType, Role
from ctx_inspect.core.policies.base import ContextItem
from ctx_inspect.core.profiles import default_profile

KEY_VAR = "CTX_INSPECT_TEST_SUMMARIZER_KEY"
SECRET = "sk-test-Zq8v1Secret"
FAST = 0.3  # seconds: the client timeout in the timeout tests


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    delay: float = 0.0


def ok(content: Any, **extra: Any) -> Reply:
    choice = {"index": 0, "message": {"role": "assistant", "content": content}, **extra}
    return Reply(body=json.dumps({"id": "x", "choices": [choice]}).encode())


def error(status: int, message: str) -> Reply:
    return Reply(status, json.dumps({"error": {"message": message, "type": "x"}}).encode())


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class Server:
    base_url: str = ""
    script: list[Reply] = field(default_factory=list)
    requests: list[Recorded] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)

    def next_reply(self) -> Reply:
        index = min(len(self.requests) - 1, len(self.script) - 1)
        return self.script[index]


class _Httpd(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    state: Server

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up (the timeout tests) is expected


class _Handler(BaseHTTPRequestHandler):
    server: _Httpd

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        state = self.server.state
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length)
        state.requests.append(
            Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, json.loads(raw))
        )
        reply = state.next_reply()
        if reply.delay:
            state.release.wait(reply.delay)
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)
        except OSError:
            pass


@pytest.fixture
def server() -> Iterator[Server]:
    httpd = _Httpd(("127.0.0.1", 0), _Handler)
    state = Server(base_url=f"http://127.0.0.1:{httpd.server_address[1]}/v1")
    httpd.state = state
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


class Sleeps:
    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def client(server: Server, **kwargs: Any) -> OpenAICompatibleSummarizer:
    kwargs.setdefault("timeout", 2.0)
    kwargs.setdefault("retries", 0)
    kwargs.setdefault("sleep", Sleeps())
    return OpenAICompatibleSummarizer(server.base_url, "tiny-model", **kwargs)


NOW = datetime(2026, 1, 29, 12, 0, tzinfo=UTC)


def session() -> list[ContextItem]:
    """A context in which Fifth's compress command has three old messages to summarise."""
    texts = [
        (Role.SYSTEM, "You are helpful.", 60),
        (Role.USER, "Fix the parser crash in src/parser.py", 30),
        (Role.ASSISTANT, "I will add a guard because empty input is valid.", 29),
        (Role.USER, "Thanks, now run the tests.", 28),
        (Role.ASSISTANT, "Running them now.", 0),
    ]
    return [
        ContextItem(
            Message(
                id=f"m{i}",
                role=role,
                parts=(Part(type=PartType.TEXT, text=body),),
                timestamp=(NOW - timedelta(minutes=minutes)).isoformat(),
            ),
            100,
            i,
        )
        for i, (role, body, minutes) in enumerate(texts)
    ]


MESSAGES = [item.message for item in session()]


def assert_session_untouched(summarizer: OpenAICompatibleSummarizer) -> SummarizerError:
    """A compaction with this summarizer raises, and the caller's items are as they were."""
    items = session()
    before = list(items)
    profile = default_profile("fifth")
    with pytest.raises(SummarizerError) as info:
        POLICY.compact(items, profile, profile.estimate, summarizer, force=True)
    assert items == before
    assert all(a is b for a, b in zip(items, before, strict=True))
    return info.value


def one_line(exc: SummarizerError) -> str:
    line = exc.one_line()
    assert "\n" not in line
    assert SECRET not in line
    return line


# --------------------------------------------------------------------------------------------


def test_success_sends_model_prompt_conversation_and_key(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_VAR, SECRET)
    server.script = [ok("  The parser crash is fixed; tests next.\n")]
    summary = client(server, api_key_env=KEY_VAR).summarize(MESSAGES, 300)
    assert summary == "The parser crash is fixed; tests next."
    [request] = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {SECRET}"
    assert request.headers["content-type"] == "application/json"
    body = request.body
    assert body["model"] == "tiny-model"
    assert body["max_tokens"] == 300
    system, user = body["messages"]
    assert system["role"] == "system" and "within 300 tokens" in system["content"]
    assert user["role"] == "user"
    assert "Fix the parser crash in src/parser.py" in user["content"]
    assert "[assistant]\nI will add a guard" in user["content"]


def test_a_compaction_with_the_endpoint_inserts_its_summary(server: Server) -> None:
    server.script = [ok("Parser crash: guard added; run the tests next.")]
    items = session()
    profile = default_profile("fifth")
    result = POLICY.compact(items, profile, profile.estimate, client(server), force=True)
    assert result.fired
    assert result.items[1].message.text == "Parser crash: guard added; run the tests next."
    assert server.requests[0].body["max_tokens"] == 500  # Fifth's summary budget


def test_no_key_variable_means_no_authorization_header(server: Server) -> None:
    server.script = [ok("fine")]
    assert client(server, max_tokens=64).summarize(MESSAGES, 300) == "fine"
    assert "authorization" not in server.requests[0].headers
    assert server.requests[0].body["max_tokens"] == 64


def test_content_given_as_parts_is_joined(server: Server) -> None:
    server.script = [ok([{"type": "text", "text": "part one, "}, {"type": "text", "text": "two"}])]
    assert client(server).summarize(MESSAGES, 100) == "part one, two"


def test_missing_key_variable_fails_before_any_request(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_VAR, raising=False)
    server.script = [ok("never")]
    summarizer = client(server, api_key_env=KEY_VAR)
    exc = assert_session_untouched(summarizer)
    assert exc.title == "Summarizer API key missing"
    assert KEY_VAR in one_line(exc)
    assert server.requests == []


def test_timeout(server: Server) -> None:
    server.script = [Reply(delay=3.0, body=ok("late").body)]
    started = time.monotonic()
    exc = assert_session_untouched(client(server, timeout=FAST))
    assert time.monotonic() - started < 2.0
    assert exc.title == "Summarizer timed out"
    assert f"within {FAST:g} s" in one_line(exc)
    assert len(server.requests) == 1


def test_the_timeout_is_a_deadline_for_the_whole_call(server: Server) -> None:
    """A timed-out attempt used the whole deadline: there is no time left for a retry."""
    server.script = [Reply(delay=3.0, body=ok("late").body)]
    sleeps = Sleeps()
    exc = assert_session_untouched(client(server, timeout=FAST, retries=1, sleep=sleeps))
    assert exc.title == "Summarizer timed out"
    assert "attempts" not in one_line(exc)
    assert len(server.requests) == 1
    assert sleeps.waits == []


def test_500_is_retried_with_a_short_backoff_then_reported(server: Server) -> None:
    server.script = [error(500, "model overloaded")]
    sleeps = Sleeps()
    exc = assert_session_untouched(client(server, retries=2, sleep=sleeps))
    line = one_line(exc)
    assert exc.title == "Summarizer request failed"
    assert "HTTP 500" in line and "model overloaded" in line and "after 3 attempts" in line
    assert len(server.requests) == 3
    assert sleeps.waits == [0.5, 1.0]


def test_a_retry_that_succeeds_returns_the_summary(server: Server) -> None:
    server.script = [error(503, "loading model"), error(429, "slow down"), ok("at last")]
    assert client(server, retries=2).summarize(MESSAGES, 100) == "at last"
    assert len(server.requests) == 3


def test_a_client_error_is_not_retried_and_the_key_never_leaks(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_VAR, SECRET)
    server.script = [error(401, f"Incorrect API key provided: {SECRET}")]
    exc = assert_session_untouched(client(server, api_key_env=KEY_VAR, retries=3))
    line = one_line(exc)
    assert "HTTP 401" in line and "Incorrect API key provided: [redacted]" in line
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        (
            Reply(body=b"<html><body>502 Bad Gateway</body></html>", content_type="text/html"),
            "the reply is not JSON (text/html",
        ),
        (Reply(body=json.dumps({"object": "list", "data": []}).encode()), "has no choices"),
        (Reply(body=json.dumps({"choices": []}).encode()), "has no choices"),
        (ok("", finish_reason="length"), "empty content (finish_reason length)"),
        (ok(None), "has null as content"),
        (ok(7), "has a number as content"),
    ],
)
def test_malformed_replies(server: Server, reply: Reply, problem: str) -> None:
    server.script = [reply]
    exc = assert_session_untouched(client(server, retries=2))
    assert exc.title == "Summarizer reply malformed"
    assert problem in one_line(exc)
    assert len(server.requests) == 1  # a malformed reply is not retried


def free_port() -> int:
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    probe.bind(("127.0.0.1", 0))
    port: int = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    return port


def test_connection_refused() -> None:
    port = free_port()
    sleeps = Sleeps()
    summarizer = OpenAICompatibleSummarizer(
        f"http://127.0.0.1:{port}/v1", "m", timeout=2.0, retries=1, sleep=sleeps
    )
    exc = assert_session_untouched(summarizer)
    line = one_line(exc)
    assert exc.title == "Summarizer unreachable"
    assert f"cannot connect to http://127.0.0.1:{port}/v1/chat/completions" in line
    assert "refused" in line.lower() and "after 2 attempts" in line
    assert sleeps.waits == [0.5]  # one retry


def test_no_retry_when_its_wait_would_pass_the_deadline() -> None:
    sleeps = Sleeps()
    summarizer = OpenAICompatibleSummarizer(
        f"http://127.0.0.1:{free_port()}/v1", "m", timeout=FAST, retries=3, sleep=sleeps
    )
    line = one_line(assert_session_untouched(summarizer))
    assert "refused" in line.lower()
    assert f"no time left for another within the {FAST:g} s timeout" in line
    assert sleeps.waits == []
