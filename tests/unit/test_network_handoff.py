"""A sandbox's listener, made in it from outside before its command runs; what
the server reads from bwrap, trusted no further than it must be; a gateway's
record of refusals; the tests' resolver mapping."""

from __future__ import annotations

import ipaddress
import logging
import os
import subprocess
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from bashrpc.server.runtime.network import handoff
from bashrpc.server.runtime.network.gateway import Gateway, find
from bashrpc.server.runtime.network.proxy import Record
from bashrpc.server.runtime.network.resolver import MappedResolver, SystemResolver
from bashrpc.server.runtime.sandbox import bwrap
from bashrpc.server.runtime.seam.egress import Egress
from tests.sandboxing import skip_without_sandbox


def _received(info: bytes) -> tuple[handoff.Listener | None, bytes]:
    """What the server makes of `info` from a sandbox's bwrap, and what bwrap's
    wait then reads (b"G": let go; b"": its pipe closed, let go as well)."""
    ends = handoff.ends()
    info_write, block_read = ends.inside
    with os.fdopen(info_write, "wb") as written:
        written.write(info)
    try:
        got = anyio.run(handoff.receive, ends)
        return got, os.read(block_read, 1)
    finally:
        os.close(block_read)


def test_a_process_in_the_servers_own_network_is_no_sandbox() -> None:
    """Were bwrap's word ever another's, a listener in the host's network would take
    the host's connections as a sandbox's."""
    got, word = _received(f'{{"child-pid": {os.getpid()}}}'.encode())
    assert got is None and word == b"G"


@pytest.mark.parametrize(
    "info",
    [
        b"",
        b"not json",
        b'{"child-pid": "12"}',
        b'{"pid": 1}',
        b"{" + b" " * handoff.INFO_MAX_BYTES,
        # No process at all.
        b'{"child-pid": 2147483647}',
    ],
)
def test_info_that_names_no_sandbox_gives_no_listener_and_lets_it_go(info: bytes) -> None:
    # What this process holds besides: another test's, not this one's to count.
    before = set(os.listdir("/proc/self/fd"))
    got, word = _received(info)
    assert got is None and word in (b"G", b"")
    # Nothing was left open.
    assert set(os.listdir("/proc/self/fd")) - before == set()


def test_a_listener_is_made_in_the_sandbox_before_its_command_runs(tmp_path: Path) -> None:
    """Real bwrap: the command's first connection to the proxy's port is accepted
    by the server, and its environment points at it."""
    skip_without_sandbox()
    path, _ = bwrap.probe()
    assert path is not None
    ends = handoff.ends()
    check = (
        "import os, socket; print(os.environ['https_proxy']);"
        " print(socket.create_connection(('127.0.0.1', 3128)).recv(5).decode())"
    )
    argv = [path, "--die-with-parent", "--unshare-pid", "--unshare-net"]
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    argv += [*handoff.bwrap_args(ends), "--", "/usr/bin/python3", "-c", check]
    sandbox = subprocess.Popen(argv, stdout=subprocess.PIPE, pass_fds=ends.inside)
    for fd in ends.inside:
        os.close(fd)

    async def serve() -> None:
        listener = await handoff.receive(ends)
        assert listener is not None
        try:
            listener.sock.setblocking(True)
            accepted, _ = await anyio.to_thread.run_sync(listener.sock.accept)
            with accepted:
                accepted.sendall(b"hello")
        finally:
            listener.close()

    anyio.run(serve)
    out, _ = sandbox.communicate(timeout=60)
    assert out.decode().splitlines() == [handoff.PROXY_URL, "hello"]


def _record(host: str, port: int, allowed: bool, reason: str) -> Record:
    return Record(host, port, allowed, reason, "connect", 0, 0, 0.0, 0.0)  # type: ignore[arg-type]


def test_refused_hosts_since_a_mark_each_once_only_what_a_setting_would_allow() -> None:
    anyio.run(_refusals)


async def _refusals() -> None:
    gateway = Gateway(Egress(), SystemResolver(), lambda record: None)
    gateway._done(_record("early.example.org", 443, False, "not-allowed"))
    mark = gateway.mark()
    for record in (
        _record("a.example.org", 443, False, "not-allowed"),
        _record("b.example.org", 22, False, "port"),
        _record("a.example.org", 80, False, "not-allowed"),
        _record("ok.example.org", 443, True, "allowed"),
        _record("smuggler.example.org", 80, False, "smuggled"),
        _record("", 0, False, "malformed"),
    ):
        gateway._done(record)
    assert gateway.refused_since(mark) == ["a.example.org:443", "b.example.org:22"]
    assert len(gateway.recent) == 7
    assert find(gateway.key) is gateway
    gateway.close()
    assert find(gateway.key) is None


def test_the_mapped_resolver_knows_its_names_only() -> None:
    mapping = MappedResolver(
        {"Index.Example.org.": "93.184.216.34"}, {("93.184.216.34", 443): ("127.0.0.1", 8443)}
    )
    found = anyio.run(mapping.resolve, "index.example.org", 443)
    assert found == [ipaddress.ip_address("93.184.216.34")]
    assert anyio.run(mapping.resolve, "other.example.org", 443) == []
    assert mapping.dial(found[0], 443) == ("127.0.0.1", 8443)
    assert mapping.dial(found[0], 80) == ("93.184.216.34", 80)


def test_every_connection_is_logged_at_info(caplog: pytest.LogCaptureFixture) -> None:
    async def log_two() -> None:
        gateway = Gateway(Egress(), SystemResolver(), lambda record: None)
        gateway._done(Record("a.example.org", 443, True, "allowed", "connect", 10, 2000, 0.5, 0.0))
        gateway._done(_record("b.example.org", 80, False, "not-allowed"))
        gateway.close()

    with caplog.at_level(logging.INFO, logger="bashrpc"):
        anyio.run(log_two)
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert "network connect a.example.org:443 allowed out=10 in=2000 0.500s" in lines
    assert "network connect b.example.org:80 refused (not-allowed) out=0 in=0 0.000s" in lines
