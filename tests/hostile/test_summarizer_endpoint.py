"""A faulty summarizer endpoint: every fault ends in a one-line error within the deadline.

Each fault is a server on 127.0.0.1 started here (raw sockets, one thread per connection), so
that it can do what a well-behaved HTTP server never does: trickle, hang, reset, lie about
lengths, nest a reply 100,000 deep. The summarizer is built from its configuration, as the
commands build it. The deadline is only a hang guard here (a call that has not returned well
after its deadline has hung); it measures nothing.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static, TextArea
from textual.widgets._toast import Toast

from ctx_inspect.app.config import build_profile
from ctx_inspect.cli import main
from ctx_inspect.core.model import Message, Part, PartType, Role
from ctx_inspect.core.policies.base import Summarizer
from ctx_inspect.core.summarize import summarizer_from_config
from ctx_inspect.errors import InspectorError
from ctx_inspect.ui.app import InspectorApp, OpenRequest
from ctx_inspect.ui.screens.action_picker import ActionPicker
from ctx_inspect.ui.screens.explain_screen import ExplainScreen
from ctx_inspect.ui.screens.sweep_form import SweepForm
from ctx_inspect.ui.screens.tune_screen import TuneScreen
from tests.ui.test_diff_screen import SIZE, loaded, wait_for

DATA = Path(__file__).parents[1] / "data"
SESSION = DATA / "baseagent" / "typical.log"  # its compaction asks the summarizer
# a manual compaction needs the messages themselves (a log of figures cannot be simulated)
CHAT = DATA / "openai_chat" / "typical.json"
COMPACT_CHAT = ["diff", str(CHAT), "--profile", "baseagent", "--action", "compact"]
KEY_VAR = "CTX_INSPECT_HOSTILE_SUMMARIZER_KEY"
SECRET = "sk-hostile-9f8e7d6c5b4aSecret"
TIMEOUT = 1.0  # seconds: the deadline of one summary in these tests
SLACK = 30.0  # past the deadline by this much, a call has hung (a trickled reply without the
# deadline takes ~2,000 s here; a loaded machine starts a sweep's worker processes slowly)
ESCAPES = "\x1b]0;owned\x07\x1b[31mred\x1b[0m [bold]not markup[/bold] [/]"

Respond = Callable[["Connection"], None]


# -- the faulty server ---------------------------------------------------------------------


@dataclass
class Connection:
    sock: socket.socket
    request: bytes
    stopped: threading.Event

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def trickle(self, data: bytes, every: float = 0.05) -> None:
        """``data`` one byte at a time, each well within any read timeout."""
        for byte in data:
            if self.stopped.wait(every):
                return
            self.sock.sendall(bytes([byte]))


@dataclass
class FaultServer:
    respond: Respond
    reads_request: bool = True  # False: it answers at once (a TLS client speaks first)
    listener: socket.socket = field(init=False)
    requests: list[bytes] = field(default_factory=list)
    stopped: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)
    conns: list[socket.socket] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.05)
        self._spawn(self._accept)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}/v1"

    def _spawn(self, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self.threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                sock, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.conns.append(sock)
            self._spawn(self._serve, sock)

    def _serve(self, sock: socket.socket) -> None:
        try:
            request = _read_request(sock) if self.reads_request else b""
            self.requests.append(request)
            self.respond(Connection(sock, request, self.stopped))
        except OSError:
            pass  # the client gave up: expected of a faulty server
        finally:
            sock.close()

    def close(self) -> None:
        self.stopped.set()
        self.listener.close()
        for sock in list(self.conns):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for thread in self.threads:
            thread.join(5)


def _read_request(sock: socket.socket) -> bytes:
    sock.settimeout(5)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


@pytest.fixture
def serve() -> Iterator[Callable[..., FaultServer]]:
    servers: list[FaultServer] = []

    def start(respond: Respond, reads_request: bool = True) -> FaultServer:
        server = FaultServer(respond, reads_request)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


# -- replies ---------------------------------------------------------------------------------


def http(status: int, body: bytes, *headers: str, length: bool = True) -> bytes:
    lines = [f"HTTP/1.1 {status} Status", "Content-Type: application/json", *headers]
    if length:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def answer(status: int, body: bytes, *headers: str) -> Respond:
    return lambda conn: conn.send(http(status, body, *headers))


def completion(content: Any, **choice: Any) -> bytes:
    message = {"role": "assistant", "content": content}
    return json.dumps({"choices": [{"index": 0, "message": message, **choice}]}).encode()


def ok(content: Any) -> Respond:
    return answer(200, completion(content))


def hang(conn: Connection) -> None:
    conn.stopped.wait(60)


def reset(conn: Connection) -> None:
    conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.sock.close()  # with a zero linger: a reset, not a close


def trickle_body(conn: Connection) -> None:
    body = completion("a summary that never finishes arriving " * 1000)
    conn.send(http(200, body)[: -len(body)])
    conn.trickle(body)


def trickle_headers(conn: Connection) -> None:
    conn.trickle(b"HTTP/1.1 200 OK\r\nX-Slow: " + b"z" * 60_000)


def nested(conn: Connection) -> None:
    depth = 100_000
    conn.send(http(200, b'{"choices": ' + b"[" * depth + b"]" * depth + b"}"))


def ten_megabytes(chunked: bool) -> Respond:
    content = "x" * (10 * 1024 * 1024)
    body = completion(content)

    def respond(conn: Connection) -> None:
        if not chunked:
            conn.send(http(200, body))
            return
        conn.send(http(200, b"", "Transfer-Encoding: chunked", length=False))
        for start in range(0, len(body), 65536):
            piece = body[start : start + 65536]
            conn.send(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        conn.send(b"0\r\n\r\n")

    return respond


# -- calling ---------------------------------------------------------------------------------

MESSAGES = [
    Message(id="u", role=Role.USER, parts=(Part(type=PartType.TEXT, text="Fix src/parser.py"),)),
    Message(id="a", role=Role.ASSISTANT, parts=(Part(type=PartType.TEXT, text="On it."),)),
]


def summarizer(base_url: str, **settings: Any) -> Summarizer:
    config = {
        "summarizer": "openai",
        "summarizer_base_url": base_url,
        "summarizer_model": "tiny",
        "summarizer_timeout": TIMEOUT,
        "summarizer_retries": 0,
    }
    config.update({f"summarizer_{k}": v for k, v in settings.items()})
    return summarizer_from_config(config)


def within_deadline(call: Callable[[], Any], deadline: float = TIMEOUT) -> Any:
    """``call()``'s result or the exception it raised, on a thread that must end within the
    deadline and the slack (a hang guard, not a measure)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = call()
        except BaseException as exc:
            box["result"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(deadline + SLACK)
    assert not thread.is_alive(), f"still running {SLACK} s past its {deadline} s deadline"
    return box["result"]


def fails(base_url: str, **settings: Any) -> str:
    """The one-line error of a summary from ``base_url``; the summary must fail in time, its
    retries included."""
    outcome = within_deadline(lambda: summarizer(base_url, **settings).summarize(MESSAGES, 200))
    assert isinstance(outcome, InspectorError), f"expected a summarizer error, got {outcome!r}"
    line = outcome.one_line()
    assert outcome.title.startswith("Summarizer"), line
    assert line.isprintable(), f"not one printable line: {line!r}"
    assert SECRET not in line
    return line


# -- every fault: one printable line, within the deadline -------------------------------------


def test_a_reply_nested_100000_deep(serve: Callable[..., FaultServer]) -> None:
    line = fails(serve(nested).base_url)
    assert "nested too deeply" in line


def test_a_trickled_body_is_cut_at_the_deadline_retries_included(
    serve: Callable[..., FaultServer],
) -> None:
    server = serve(trickle_body)
    line = fails(server.base_url, retries=1)
    assert "Summarizer timed out" in line and f"within {TIMEOUT:g} s" in line
    assert len(server.requests) == 1  # the first attempt used the whole deadline


def test_trickled_headers_are_cut_at_the_deadline(
    serve: Callable[..., FaultServer],
) -> None:
    line = fails(serve(trickle_headers).base_url)
    assert "Summarizer timed out" in line


def test_a_server_that_never_answers_uses_one_deadline_for_every_retry(
    serve: Callable[..., FaultServer],
) -> None:
    server = serve(hang)
    line = fails(server.base_url, retries=5)
    assert "Summarizer timed out" in line
    assert len(server.requests) == 1


def test_a_500_is_retried_then_reported(serve: Callable[..., FaultServer]) -> None:
    error = json.dumps({"error": {"message": "model overloaded"}}).encode()
    server = serve(answer(500, error))
    line = fails(server.base_url, retries=1)
    assert "HTTP 500" in line and "model overloaded" in line and "after 2 attempts" in line
    assert len(server.requests) == 2


def test_a_reset_connection(serve: Callable[..., FaultServer]) -> None:
    line = fails(serve(reset).base_url)
    assert "Summarizer unreachable" in line and "reset" in line.lower()


def test_https_to_a_server_that_never_completes_the_handshake(
    serve: Callable[..., FaultServer],
) -> None:
    url = serve(hang).base_url.replace("http://", "https://")
    assert "Summarizer timed out" in fails(url, retries=3)


def test_https_to_a_server_that_answers_garbage(serve: Callable[..., FaultServer]) -> None:
    garbage = serve(lambda conn: conn.send(b"HTTP/1.1 200 OK\r\n\r\n"), reads_request=False)
    line = fails(garbage.base_url.replace("http://", "https://"))
    assert "Summarizer unreachable: cannot connect to https://" in line


@pytest.mark.parametrize(
    ("respond", "problem"),
    [
        (lambda conn: conn.send(b"\x00\xff\xfe garbage, not HTTP\r\n\r\n"), "not valid HTTP"),
        (answer(200, b"\x00garbage{{ not json"), "the reply is not JSON"),
        (answer(200, b'{"choices": []}'), "has no choices"),
        (answer(200, b'{"id": "x"}'), "has no choices"),
        (answer(200, b"[1, 2]"), "the reply is a list, not a JSON object"),
        (answer(200, b'{"choices": ["text"]}'), "first choice is a string, not an object"),
        (answer(200, b'{"choices": [{"message": "text"}]}'), "has no message"),
        (ok(None), "has null as content"),
        (ok(42), "has a number as content"),
        (ok({"text": "x"}), "has an object as content"),
        (ok(True), "has a boolean as content"),
        (ok([1, 2]), "content parts are not text"),
        (ok([{"type": "text", "text": 5}]), "content parts are not text"),
        (ok("   "), "empty content"),
        (answer(200, completion("caf\xe9").replace(b"caf\\u00e9", b"caf\xe9")), "not UTF-8"),
        (ten_megabytes(chunked=False), "larger than 4 MiB"),
        (ten_megabytes(chunked=True), "larger than 4 MiB"),
    ],
    ids=[
        "garbage",
        "not-json",
        "empty-choices",
        "no-choices",
        "a-list",
        "choice-a-string",
        "message-a-string",
        "null-content",
        "number-content",
        "object-content",
        "boolean-content",
        "parts-of-numbers",
        "part-text-a-number",
        "blank-content",
        "not-utf8",
        "10mb-with-length",
        "10mb-chunked",
    ],
)
def test_malformed_replies_are_one_line_errors(
    serve: Callable[..., FaultServer], respond: Respond, problem: str
) -> None:
    server = serve(respond)
    assert problem in fails(server.base_url, retries=2)


def test_a_content_of_another_type_deep_inside_is_never_printed(
    serve: Callable[..., FaultServer],
) -> None:
    """A part's text nested 900 deep (within the decoder's reach) is refused, not rendered."""
    deep = b"[" * 900 + b"]" * 900
    body = b'{"choices": [{"message": {"content": [{"text": ' + deep + b"}]}}]}"
    line = fails(serve(answer(200, body)).base_url)
    assert "content parts are not text" in line


# -- what the server says is data ------------------------------------------------------------


def test_escape_sequences_in_the_summary_are_kept_as_data(
    serve: Callable[..., FaultServer],
) -> None:
    server = serve(ok(ESCAPES))
    text = within_deadline(lambda: summarizer(server.base_url).summarize(MESSAGES, 200))
    assert text == ESCAPES.strip()  # the summary is the server's text, unchanged: data


def test_escape_sequences_in_an_error_are_escaped(serve: Callable[..., FaultServer]) -> None:
    error = json.dumps({"error": {"message": ESCAPES}}).encode()
    line = fails(serve(answer(400, error)).base_url)
    assert "\x1b" not in line and "\\x1b]0;owned\\x07" in line


@pytest.mark.parametrize("before", [0, 150, 155], ids=["first", "across-the-cut", "at-the-cut"])
def test_the_key_is_never_echoed(
    serve: Callable[..., FaultServer], monkeypatch: pytest.MonkeyPatch, before: int
) -> None:
    """The server echoes the request's headers in its error, the key where a cut to one line
    would fall: no part of the key is shown."""
    monkeypatch.setenv(KEY_VAR, SECRET)

    def echo(conn: Connection) -> None:
        auth = [h for h in conn.request.split(b"\r\n") if h.lower().startswith(b"authorization")]
        message = "x" * before + auth[0].decode().split()[-1] + " was refused"
        conn.send(http(401, json.dumps({"error": {"message": message}}).encode()))

    server = serve(echo)
    line = fails(server.base_url, api_key_env=KEY_VAR)
    assert f"Bearer {SECRET}".encode() in server.requests[0]  # it was sent, in its header
    assert "HTTP 401" in line and SECRET[:8] not in line


def test_a_key_a_header_cannot_carry_is_refused_unseen(
    serve: Callable[..., FaultServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_VAR, f"{SECRET}\r\nX-Injected: 1")
    server = serve(ok("never"))
    line = fails(server.base_url, api_key_env=KEY_VAR)
    assert "HTTP header cannot carry" in line
    assert server.requests == []


def test_a_password_in_the_url_is_refused_unseen() -> None:
    with pytest.raises(InspectorError) as info:
        summarizer(f"http://user:{SECRET}@127.0.0.1:9/v1")
    assert SECRET not in info.value.one_line() and "user name or password" in info.value.message


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_to_another_host_is_not_followed(
    serve: Callable[..., FaultServer], monkeypatch: pytest.MonkeyPatch, status: int
) -> None:
    monkeypatch.setenv(KEY_VAR, SECRET)
    elsewhere = serve(ok("the conversation and the key, received elsewhere"))
    target = f"{elsewhere.base_url}/chat/completions"
    line = fails(serve(answer(status, b"", f"Location: {target}")).base_url, api_key_env=KEY_VAR)
    assert f"HTTP {status}" in line and "redirects are not followed" in line and target in line
    assert elsewhere.requests == []


# -- through the commands: exit 0 or 2, never a traceback, never past the deadline --------------


def config_file(tmp_path: Path, base_url: str, retries: int = 0) -> Path:
    path = tmp_path / "ctx.toml"
    path.write_text(
        "[summarizer]\n"
        'kind = "openai"\n'
        f'base_url = "{base_url}"\n'
        'model = "tiny"\n'
        f"timeout = {TIMEOUT}\n"
        f"retries = {retries}\n"
    )
    return path


def run_cli(capsys: pytest.CaptureFixture[str], *args: str, deadline: float = TIMEOUT) -> str:
    """The command's one-line error: exit 2, nothing else on stderr, in time."""
    code = within_deadline(lambda: main(list(args)), deadline)
    err = capsys.readouterr().err
    assert code == 2, f"exit {code!r}: {err}"
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ctx-inspect: Summarizer"), err
    assert lines[0].isprintable()
    return lines[0]


FAULTS: dict[str, Respond] = {
    "nested": nested,
    "trickle": trickle_body,
    "500": answer(500, b'{"error": {"message": "overloaded"}}'),
    "garbage": lambda conn: conn.send(b"\x00 garbage\r\n\r\n"),
    "empty-choices": answer(200, b'{"choices": []}'),
    "10mb": ten_megabytes(chunked=False),
    "hang": hang,
    "reset": reset,
    "null-content": ok(None),
    "escapes": answer(400, json.dumps({"error": {"message": ESCAPES}}).encode()),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_diff_compact_reports_each_fault_on_one_line(
    serve: Callable[..., FaultServer],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    fault: str,
) -> None:
    config = config_file(tmp_path, serve(FAULTS[fault]).base_url)
    run_cli(capsys, *COMPACT_CHAT, "--config", str(config))


@pytest.mark.parametrize(
    "command",
    [
        ["replay"],
        ["explain"],
        ["sweep", "--vary", "compact_ratio=0.8,0.85", "--workers", "1"],
        ["sweep", "--vary", "compact_ratio=0.8,0.85", "--workers", "2"],
    ],
    ids=["replay", "explain", "sweep", "sweep-in-parallel"],
)
@pytest.mark.parametrize("fault", ["500", "trickle"])
def test_every_command_reports_the_fault_on_one_line(
    serve: Callable[..., FaultServer],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    command: list[str],
    fault: str,
) -> None:
    config = config_file(tmp_path, serve(FAULTS[fault]).base_url, retries=1)
    line = run_cli(
        capsys,
        command[0],
        str(SESSION),
        *command[1:],
        "--config",
        str(config),
        deadline=2 * TIMEOUT,  # workers in parallel each wait one deadline at most
    )
    assert ("HTTP 500" in line) if fault == "500" else ("timed out" in line)


def test_a_working_endpoint_still_summarizes_through_the_cli(
    serve: Callable[..., FaultServer], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    server = serve(ok(ESCAPES))
    config = config_file(tmp_path, server.base_url)
    args = [*COMPACT_CHAT, "--config", str(config), "--json"]
    assert within_deadline(lambda: main(args)) == 0
    out, err = capsys.readouterr()
    assert "\x1b" not in out and err == ""
    assert json.loads(out)["statuses"].get("added") == 1
    assert len(server.requests) == 1


# -- in the dashboard: the error is shown, as text, and the app goes on -----------------------


def dashboard(tmp_path: Path, base_url: str, path: Path = SESSION) -> InspectorApp:
    return InspectorApp(
        OpenRequest(
            paths=(path,),
            profile_for=lambda spec: build_profile("baseagent"),
            config=config_file(tmp_path, base_url),
        )
    )


def notified(app: InspectorApp, title: str) -> list[str]:
    """The notifications with this title, as they read on screen."""
    shown = [str(toast.render()) for toast in app.screen.query(Toast)]
    return [text.partition("\n")[2] for text in shown if text.startswith(title + "\n")]


REFUSAL = answer(400, json.dumps({"error": {"message": ESCAPES}}).encode())


async def test_the_compact_action_shows_the_error_as_text(
    serve: Callable[..., FaultServer], tmp_path: Path
) -> None:
    app = dashboard(tmp_path, serve(REFUSAL).base_url, CHAT)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        state = await loaded(pilot)
        await pilot.press("C")
        await wait_for(pilot, lambda: isinstance(app.screen, ActionPicker))
        await pilot.press("enter")
        await wait_for(pilot, lambda: notified(app, "cannot compute the preview"))
        await pilot.pause()
        [message] = notified(app, "cannot compute the preview")
        assert message.startswith("Summarizer request failed: HTTP 400")
        assert "\x1b" not in message and "[bold]not markup[/bold] [/]" in message
        shown = str(app.screen.query_one("#picker-error", Static).render())
        assert "[/bold] [/]" in shown  # as written, not as markup
        assert isinstance(app.screen, ActionPicker) and state.what_if is None


async def test_the_tune_screen_shows_the_error_of_its_replay_and_its_sweep(
    serve: Callable[..., FaultServer], tmp_path: Path
) -> None:
    app = dashboard(tmp_path, serve(REFUSAL).base_url)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await loaded(pilot)
        await pilot.press("U")
        await wait_for(pilot, lambda: isinstance(app.screen, TuneScreen))
        screen = app.screen
        await wait_for(pilot, lambda: notified(app, "replay failed"))  # its first replay
        assert notified(app, "replay failed")[0].startswith("Summarizer request failed")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, SweepForm))
        app.screen.query_one(TextArea).text = "compact_ratio=0.5,0.7"
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: app.screen is screen)
        await wait_for(pilot, lambda: notified(app, "sweep failed"), timeout=60)
        await pilot.pause()
        [message] = notified(app, "sweep failed")
        assert message.startswith("Summarizer request failed: HTTP 400")
        assert "[/bold] [/]" in str(screen.query_one("#sweep-count", Static).render())


async def test_explain_shows_the_error_as_text(
    serve: Callable[..., FaultServer], tmp_path: Path
) -> None:
    app = dashboard(tmp_path, serve(REFUSAL).base_url)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await loaded(pilot)
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, ExplainScreen))
        await wait_for(pilot, lambda: notified(app, "cannot explain"))
        [message] = notified(app, "cannot explain")
        assert message.startswith("Summarizer request failed: HTTP 400")
        assert "[/bold] [/]" in str(app.screen.query_one("#explain-title", Static).render())
