"""The proxy's bounds with real bwrap, in-process: connections a session holds at
once, and a connection idle past its time; and the proxy under the daemon."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from bashrpc.server.runtime.network import resolver
from tests.conftest import SpawnInProcess
from tests.daemon import DaemonProcess, introduce, stop_daemon
from tests.inprocess import InProcessServer
from tests.netserve import Mapping
from tests.networld import HELLO, World, netserve_env, settings
from tests.rpc import logged
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


def test_under_the_daemon_a_tenants_sessions_have_the_allowlist(tmp_path: Path) -> None:
    """A daemon's tenant runtime runs its sessions' proxies; each connection is
    logged at INFO on the daemon's stderr."""
    skip_without_sandbox()
    made = World(tmp_path / "world")
    config = tmp_path / "settings.toml"
    config.write_text(settings("read-only"))
    daemon = DaemonProcess(
        "--config",
        str(config),
        tmp=tmp_path,
        env=netserve_env(),
        launcher=(sys.executable, "-m", "tests.netserve", str(made.mapping)),
    )
    try:
        # The connection's own tenant.
        client = introduce(daemon.connect(), None)
        try:
            done = client.bash("curl -sS -m 20 http://plain.example.org/hello.txt", wait=120)
            refused = client.bash("curl -s -o /dev/null http://evil.example.net/", wait=120)
        finally:
            client.close()
        assert done.output == HELLO
        assert refused.sandbox_denied
        assert logged(daemon, "network http plain.example.org:80 allowed")
        assert logged(daemon, "network http evil.example.net:80 refused (not-allowed)")
    finally:
        stop_daemon(daemon.socket_path)
        daemon.kill()
        made.stop()
