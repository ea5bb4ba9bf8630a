"""`abort_bash` on a new connection reaches a command its client started on a cut one."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.methods import BashResult
from tests.daemon import DaemonProcess, SocketClient
from tests.rpc import marked_processes, wait_until

pytestmark = pytest.mark.slow

# Generous bounds, only to catch a hang.
GONE_BOUND_SECONDS = 10.0


def introduce(client: SocketClient, client_id: str) -> SocketClient:
    options = {"clientId": client_id}
    client.result("initialize", {"protocolVersion": "2025-06-18", "initializationOptions": options})
    return client


def cut(client: SocketClient) -> None:
    client.sock.shutdown(socket.SHUT_RDWR)
    client.sock.close()


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[DaemonProcess]:
    process = DaemonProcess(tmp=tmp_path)
    try:
        yield process.wait_listening()
    finally:
        process.kill()


def start_detached(
    daemon: DaemonProcess, client_id: str, marker: str, id: int | None = None, **params: object
) -> object:
    """A command that runs on after its connection is cut; its request id."""
    first = introduce(daemon.connect(), client_id)
    command = f"exec -a {marker} sleep 300"
    ident = first.request("bash", {"command": command, **params}, id=id)
    assert wait_until(lambda: marked_processes(marker))
    cut(first)
    return ident


def test_an_abort_by_session_reaches_a_detached_command(daemon: DaemonProcess) -> None:
    marker = "detached-abort-session-mark"
    ident = start_detached(daemon, "by-session", marker, sessionId="work")
    again = introduce(daemon.connect(), "by-session")
    assert again.abort(sessionId="work")
    assert wait_until(lambda: not marked_processes(marker), GONE_BOUND_SECONDS)
    result = again.typed(BashResult, "bash/attach", {"requestId": ident})
    assert result.cancelled
    again.close()
