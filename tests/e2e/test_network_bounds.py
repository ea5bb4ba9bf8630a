"""The proxy's bounds with real bwrap, in-process: connections a session holds at
once, and a connection idle past its time."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from bashrpc.server.runtime.network import resolver
from tests.conftest import SpawnInProcess
from tests.inprocess import InProcessServer
from tests.netserve import Mapping
from tests.networld import World, settings
from tests.sandboxing import skip_without_sandbox

pytestmark = pytest.mark.slow


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    skip_without_sandbox()
    made = World(tmp_path / "world")
    resolver.install(msgspec.json.decode(made.mapping.read_bytes(), type=Mapping).resolver())
    try:
        yield made
    finally:
        resolver.install(None)
        made.stop()


def _server(spawn: SpawnInProcess, extra: str) -> InProcessServer:
    server: InProcessServer = spawn(settings("read-only", extra))
    return server


HOLD = """
import socket, time
held, opened = [], 0
for _ in range(10):
    s = socket.create_connection(("127.0.0.1", 3128))
    s.sendall(b"CONNECT plain.example.org:80 HTTP/1.1\\r\\n\\r\\n")
    held.append(s)
time.sleep(3)
for s in held:
    s.setblocking(False)
    try:
        opened += s.recv(100).startswith(b"HTTP/1.1 200")
    except BlockingIOError:
        pass
print(opened)
"""


def test_a_session_holds_at_most_max_connections(world: World, spawn: SpawnInProcess) -> None:
    server = _server(spawn, "maxConnections = 4\n")
    done = server.bash(f"python3 - <<'EOF'\n{HOLD}\nEOF", timeout=60, wait=120)
    assert done.output == "4\n"


IDLE = """
import socket, time
s = socket.create_connection(("127.0.0.1", 3128))
s.sendall(b"CONNECT plain.example.org:80 HTTP/1.1\\r\\n\\r\\n")
print(s.recv(100).split(b"\\r\\n")[0].decode())
began = time.monotonic()
s.settimeout(30)
print(s.recv(100) == b"", round(time.monotonic() - began))
"""


def test_an_idle_tunnel_is_closed(world: World, spawn: SpawnInProcess) -> None:
    server = _server(spawn, "idleSeconds = 2\n")
    done = server.bash(f"python3 - <<'EOF'\n{IDLE}\nEOF", timeout=60, wait=120)
    first, second = done.output.splitlines()
    assert first == "HTTP/1.1 200 Connection established"
    closed, seconds = second.split()
    assert closed == "True" and 2 <= int(seconds) <= 10
