"""The server's side of a sandbox's listener handoff trusts nothing it receives;
a gateway's record of refusals; the tests' resolver mapping."""

from __future__ import annotations

import ipaddress
import logging
import os
import socket

import anyio
import pytest

from bashrpc.server.runtime.network import handoff
from bashrpc.server.runtime.network.gateway import Gateway, find
from bashrpc.server.runtime.network.proxy import Record
from bashrpc.server.runtime.network.resolver import MappedResolver, SystemResolver
from bashrpc.server.runtime.seam.egress import Egress


def _handed(data: bytes, *fds: int) -> handoff.Listener | None:
    ends = handoff.pair()
    inside = socket.socket(fileno=ends.inside)
    with inside:
        socket.send_fds(inside, [data], list(fds))
        return anyio.run(handoff.receive, ends.outside)


def test_a_listening_tcp_socket_is_taken_with_a_pidfd_of_its_sender() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        got = _handed(b"L", server.fileno())
        assert got is not None
        try:
            assert got.sock.getsockname() == server.getsockname()
            assert got.pidfd >= 0
        finally:
            got.close()


@pytest.mark.parametrize("kind", ["unix", "connected", "udp", "two", "none", "word"])
def test_anything_else_is_refused(kind: str) -> None:
    with (
        socket.create_server(("127.0.0.1", 0)) as listening,
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp,
    ):
        left, right = socket.socketpair()
        unbound = socket.socket()
        fds = {
            "unix": (left.fileno(),),
            "connected": (unbound.fileno(),),
            "udp": (udp.fileno(),),
            "two": (listening.fileno(), listening.fileno()),
            "none": (),
            "word": (listening.fileno(),),
        }[kind]
        try:
            assert _handed(b"X" if kind == "word" else b"L", *fds) is None
        finally:
            for sock in (left, right, unbound):
                sock.close()
    # Nothing received was left open.
    assert len(os.listdir("/proc/self/fd")) < 64


def test_a_sandbox_that_hands_nothing_out_gives_no_listener() -> None:
    ends = handoff.pair()
    os.close(ends.inside)
    assert anyio.run(handoff.receive, ends.outside) is None


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
