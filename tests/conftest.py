"""Shared test setup: no network, ever; paths to our fixtures and to the shared corpus."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).parent / "data"
CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"


class NetworkBlocked(RuntimeError):
    pass


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """``--snapshot-update`` runs in one process whatever ``-n`` says: the snapshot plugin
    finds (and removes) snapshots no test uses only when it sees every test."""
    if config.getoption("--snapshot-update", default=False) and config.getoption(
        "numprocesses", default=None
    ):
        config.option.numprocesses = 0


@pytest.fixture(autouse=True, scope="session")
def _no_tiktoken_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Ranks come from the bundled files in every test, whatever this machine has cached."""
    mp = pytest.MonkeyPatch()
    mp.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path_factory.mktemp("no-tiktoken-cache")))
    yield
    mp.undo()


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Any attempt to reach another host fails loudly; loopback stays allowed for local servers."""
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: object) -> object:
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and (
            host.startswith("127.") or host in {"localhost", "::1"} or host.startswith("/")
        ):
            return real_connect(self, address)  # type: ignore[arg-type]
        if self.family == socket.AF_UNIX:
            return real_connect(self, address)  # type: ignore[arg-type]
        raise NetworkBlocked(f"tests never touch the network (tried {address!r})")

    monkeypatch.setattr(socket.socket, "connect", guarded)
    monkeypatch.setattr(socket, "getaddrinfo", _no_dns(socket.getaddrinfo))
    yield


def _no_dns(real: Callable[..., Any]) -> Callable[..., Any]:
    def guarded(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host in {None, "localhost", "127.0.0.1", "::1"} or str(host).startswith("127."):
            return real(host, *args, **kwargs)
        raise NetworkBlocked(f"tests never touch the network (tried to resolve {host!r})")

    return guarded


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip(f"the shared corpus is not at {CORPUS}; real-sample tests skipped")
    return CORPUS
