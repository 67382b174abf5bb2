"""One HTTP POST and its reply under a deadline, with the standard library only.

The exchange runs on a thread of its own (``Exchange.outcome``): at the deadline the caller
stops waiting and cuts the connection (its sockets are shut down, TLS ones too), so a read or
write blocked on them ends at once, and so does the thread. That holds against a server that
never answers, answers one byte at a time, or a host name that never resolves. The reply is
read piece by piece up to a cap (``MAX_REPLY_BYTES``; ``MAX_ERROR_BODY_BYTES`` for an error
reply), and no further; redirects are not followed; a loopback server is never reached through
a proxy. What the reply means is the caller's to read (``core.endpoint``).
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import socket
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

MAX_REPLY_BYTES = 4 * 1024 * 1024  # a summary is a few KB; a reply past this is not one
MAX_ERROR_BODY_BYTES = 64 * 1024  # what is read of an error reply, for the server's message
_READ_BYTES = 64 * 1024


@dataclass(frozen=True)
class Reply:
    status: int
    reason: str
    headers: Mapping[str, str]  # names in lower case
    body: bytes  # at most the cap it was read under, plus one byte when there was more
    complete: bool  # False: the body went past its cap and was not read further


class _Cutter:
    """The sockets one exchange opened, shut down when its caller stops waiting: a read or
    write blocked on them then ends at once, and so does the exchange's thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._cut = False

    def opened(self, sock: socket.socket | None) -> None:
        if sock is None:
            return
        with self._lock:
            self._sockets.append(sock)
            if self._cut:
                _shut(sock)

    def cut(self) -> None:
        with self._lock:
            self._cut = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    # the plain socket's shutdown, also for a TLS socket (whose own would unwrap it first);
    # an error means it is closed already
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _CutAtDeadline:
    """Mixed into a connection: once connected (TLS included), its socket goes to the
    exchange's cutter."""

    def __init__(self, host: str, /, *, cutter: _Cutter | None = None, **kwargs: Any) -> None:
        super().__init__(host, **kwargs)  # type: ignore[call-arg]  # the connection's own
        self.cutter = cutter

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]  # the connection's own
        if self.cutter is not None:
            self.cutter.opened(getattr(self, "sock", None))


class _HTTPConnection(_CutAtDeadline, http.client.HTTPConnection):
    pass


class _HTTPSConnection(_CutAtDeadline, http.client.HTTPSConnection):
    pass


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, cutter: _Cutter) -> None:
        super().__init__()
        self.cutter = cutter

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_HTTPConnection, req, cutter=self.cutter)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, cutter: _Cutter) -> None:
        import ssl

        self.context = ssl.create_default_context()
        self.context.set_alpn_protocols(["http/1.1"])
        super().__init__(context=self.context)
        self.cutter = cutter

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_HTTPSConnection, req, cutter=self.cutter, context=self.context)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is answered as the error it is here: the request goes only where it was
    configured to go (another host would receive the conversation and the key)."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class Exchange:
    """One POST and its reply, on a thread of its own (``run``); ``outcome`` waits for it until
    the deadline and no longer."""

    def __init__(
        self,
        request: urllib.request.Request,
        deadline: float,
        clock: Callable[[], float],
        direct: bool,
    ) -> None:
        self.request = request
        self.deadline = deadline
        self.clock = clock
        self.direct = direct  # no proxy (a loopback server)
        self.cutter = _Cutter()
        self.done = threading.Event()
        self.reply: Reply | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.reply = self._exchange()
        except BaseException as exc:  # handed over to the caller, which raises or reports it
            self.error = exc
        finally:
            self.done.set()

    def outcome(self) -> Reply | BaseException | None:
        """The reply, what went wrong, or None when the deadline came first (the connection is
        then cut, so the thread ends too)."""
        thread = threading.Thread(target=self.run, name="summarizer request", daemon=True)
        thread.start()
        if not self.done.wait(max(0.0, self.deadline - self.clock())):
            self.cutter.cut()
            return None
        return self.error if self.error is not None else self.reply

    def _exchange(self) -> Reply:
        handlers: list[urllib.request.BaseHandler] = [_HTTPHandler(self.cutter), _NoRedirects()]
        if self.request.type == "https":
            handlers.append(_HTTPSHandler(self.cutter))
        if self.direct:
            handlers.append(urllib.request.ProxyHandler({}))  # never send loopback via a proxy
        opener = urllib.request.build_opener(*handlers)
        timeout = max(0.001, self.deadline - self.clock())
        try:
            response = opener.open(self.request, timeout=timeout)
        except urllib.error.HTTPError as exc:
            with exc:
                stream = exc.fp
                body, complete = (
                    self._read(stream, MAX_ERROR_BODY_BYTES) if stream is not None else (b"", True)
                )
                return Reply(exc.code, str(exc.reason), _headers(exc.headers), body, complete)
        with response:
            body, complete = self._read(response, MAX_REPLY_BYTES, _length(response))
            return Reply(
                response.status, response.reason, _headers(response.headers), body, complete
            )

    def _read(self, stream: Any, cap: int, announced: int | None = None) -> tuple[bytes, bool]:
        """At most ``cap`` bytes (and one more, to tell that there were more), piece by piece
        as they arrive, until the end or the deadline."""
        if announced is not None and announced > cap:
            return b"", False  # not read at all: the server said how much it would send
        read = getattr(stream, "read1", None) or stream.read
        chunks: list[bytes] = []
        size = 0
        while size <= cap:
            if self.clock() >= self.deadline:
                raise TimeoutError("the deadline passed while reading the reply")
            chunk = read(min(_READ_BYTES, cap + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks), size <= cap


def _headers(headers: Any) -> dict[str, str]:
    if headers is None:
        return {}
    return {str(name).lower(): str(value) for name, value in headers.items()}


def _length(response: http.client.HTTPResponse) -> int | None:
    value = (response.getheader("Content-Length") or "").strip()
    if not value.isdecimal():
        return None
    return int(value) if len(value) <= 18 else sys.maxsize


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# --------------------------------------------------------------------------------------------
# The summarizer
