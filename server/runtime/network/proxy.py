"""One connection a sandboxed command made to its session's proxy: read the
request (HTTP CONNECT, an absolute-URI request, or SOCKS5), decide on the name,
resolve it and check the addresses, connect, then move bytes both ways.

Every wait is bounded: the request must arrive within `HEAD_SECONDS` (a
slowloris ends there), the connection out within `CONNECT_SECONDS`, and a
tunnel with no byte either way for the policy's idle time is closed. A refusal
answers 403 (its body names the host and the setting that would allow it) or
the SOCKS code, and every connection ends in one `Record`; while it is open,
its `Connection` shows what it has moved so far.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

import anyio
import msgspec

from bashrpc.protocol import messages
from bashrpc.protocol.methods import NetworkConnection
from bashrpc.server.runtime.network import httphead, rawsocket, rules, socks
from bashrpc.server.runtime.network.rawsocket import RawSocket
from bashrpc.server.runtime.network.resolver import Resolver
from bashrpc.server.runtime.network.rules import Decision
from bashrpc.server.runtime.network.tunnel import Tunnel
from bashrpc.server.runtime.seam.egress import Egress

HEAD_SECONDS = 10.0
CONNECT_SECONDS = 10.0
RECEIVE_BYTES = 64 * 1024
Protocol = Literal["http", "connect", "socks"]
# Refusals a change of the settings would lift: the ones the model is told of.
ALLOWABLE: tuple[rules.Reason, ...] = ("not-allowed", "denied", "port", "address")


class Record(msgspec.Struct, frozen=True):
    """One connection, as the audit keeps it."""

    host: str
    port: int
    allowed: bool
    reason: rules.Reason
    protocol: Protocol
    bytes_out: int
    bytes_in: int
    seconds: float
    started: float
    rule: str | None = None


def record_view(record: Record, *, still_open: bool = False) -> NetworkConnection:
    """A connection as `session/list` shows it."""
    return NetworkConnection(
        host=record.host,
        port=record.port,
        allowed=record.allowed,
        reason=record.reason,
        protocol=record.protocol,
        bytes_sent=record.bytes_out,
        bytes_received=record.bytes_in,
        seconds=round(record.seconds, 6),
        started=record.started,
        rule=record.rule,
        open=still_open,
    )


class Context(msgspec.Struct, frozen=True):
    egress: Egress
    resolver: Resolver
    idle_seconds: float


class Refused(Exception):
    """A decision against the connection, with what it asked for."""

    def __init__(self, host: str, port: int, decision: Decision) -> None:
        super().__init__(decision.reason)
        self.host, self.port, self.decision = host, port, decision


def explain(host: str, port: int, decision: Decision) -> str:
    """Why a connection was refused, naming the setting that would allow it."""
    text = messages.NETWORK_REFUSED[decision.reason].format(
        host=host, port=port, rule=decision.rule
    )
    return f"{text}. {messages.NETWORK_HINT}" if decision.reason in ALLOWABLE else text


class Connection:
    """One connection while it is served: what the audit shows of it before it
    ends (`session/list` lists it from when it goes out), then its record."""

    def __init__(self, client: RawSocket, idle_seconds: float) -> None:
        self.client = client
        self.tunnel = Tunnel(client, idle_seconds)
        self.started, self.clock = time.time(), time.monotonic()
        self.host, self.port = "", 0
        self.protocol: Protocol = "http"
        self.decision = Decision(False, "malformed", "no request")

    @property
    def out(self) -> bool:
        """Let through, and not yet ended."""
        return self.decision.allowed and self.tunnel.refused is None

    def record(self) -> Record:
        decision = self.tunnel.refused or self.decision
        return Record(
            self.host,
            self.port,
            decision.allowed,
            decision.reason,
            self.protocol,
            self.tunnel.bytes_out,
            self.tunnel.bytes_in,
            time.monotonic() - self.clock,
            self.started,
            decision.rule,
        )


async def serve(connection: Connection, context: Context, done: Callable[[Record], None]) -> None:
    """Serve one connection; `done` gets its record however it ends."""
    client = connection.client
    try:
        first = await _first_bytes(client)
        if first[:1] == bytes((socks.VERSION,)):
            connection.protocol = "socks"
        serving = _socks if connection.protocol == "socks" else _http
        host, port, protocol, upstream, rest = await serving(client, first, context)
        connection.host, connection.port, connection.protocol = host, port, protocol
        connection.decision = Decision(True, "allowed")
        await connection.tunnel.run(upstream, rest, host, check_tls=protocol != "http")
    except Refused as refused:
        connection.host = refused.host or connection.host
        connection.port = refused.port or connection.port
        connection.decision = refused.decision
    except (OSError, anyio.BrokenResourceError, anyio.EndOfStream, TimeoutError):
        pass
    finally:
        with anyio.CancelScope(shield=True):
            await client.aclose()
        done(connection.record())


async def _first_bytes(client: RawSocket) -> bytes:
    with anyio.fail_after(HEAD_SECONDS):
        return await client.receive(RECEIVE_BYTES)


Request = tuple[str, int, Protocol, RawSocket, bytes]


async def _read_until(
    client: RawSocket, data: bytes, parse: Callable[[bytes], msgspec.Struct]
) -> tuple[bytes, msgspec.Struct]:
    """More of the client's bytes until `parse` reads more than `more`."""
    with anyio.fail_after(HEAD_SECONDS):
        while (step := parse(data)).status == "more":  # type: ignore[attr-defined]
            data += await client.receive(RECEIVE_BYTES)
    return data, step


async def _http(client: RawSocket, data: bytes, context: Context) -> Request:
    data, step = await _read_until(client, data, httphead.read)
    assert isinstance(step, httphead.Head)
    if step.status == "refused":
        reason: rules.Reason = "smuggled" if step.reason == "smuggled" else "malformed"
        refusal = Refused(step.host, step.port, Decision(False, reason, step.other or step.reason))
        await _answer_http(client, step.code, refusal)
        raise refusal
    try:
        upstream = await open_upstream(context, step.host, step.port)
    except Refused as refused:
        await _answer_http(
            client, 403 if refused.decision.reason != "unreachable" else 502, refused
        )
        raise
    rest = data[step.used :]
    if step.status == "connect":
        await _tell(client, upstream, b"HTTP/1.1 200 Connection established\r\n\r\n")
        return step.host, step.port, "connect", upstream, rest
    return step.host, step.port, "http", upstream, step.upstream + rest


async def _answer_http(client: RawSocket, code: int, refused: Refused) -> None:
    body = (explain(refused.host, refused.port, refused.decision) + "\n").encode()
    phrase = {400: "Bad Request", 403: "Forbidden", 431: "Request Header Fields Too Large"}
    head = (
        f"HTTP/1.1 {code} {phrase.get(code, 'Bad Gateway')}\r\nContent-Type: text/plain\r\n"
        f"X-Proxy-Error: {refused.decision.reason}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    await client.send(head.encode() + body)


async def _socks(client: RawSocket, data: bytes, context: Context) -> Request:
    data, hello = await _read_until(client, data, socks.greeting)
    assert isinstance(hello, socks.Step)
    await client.send(socks.greeting_reply(hello))
    if hello.status == "refused":
        raise Refused("", 0, Decision(False, "malformed", "SOCKS greeting"))
    data, step = await _read_until(client, data[hello.used :], socks.request)
    assert isinstance(step, socks.Step)
    if step.status == "refused":
        await client.send(socks.reply(step.code))
        raise Refused("", 0, Decision(False, "malformed", "SOCKS request"))
    try:
        upstream = await open_upstream(context, step.host, step.port)
    except Refused as refused:
        code = (
            socks.HOST_UNREACHABLE
            if refused.decision.reason in ("unresolved", "unreachable")
            else socks.NOT_ALLOWED
        )
        await client.send(socks.reply(code))
        raise
    await _tell(client, upstream, socks.reply(socks.SUCCEEDED))
    return step.host, step.port, "socks", upstream, data[step.used :]


async def _tell(client: RawSocket, upstream: RawSocket, reply: bytes) -> None:
    """The client told its tunnel is open; the host's connection closed if the
    client is gone."""
    try:
        await client.send(reply)
    except BaseException:
        await upstream.aclose()
        raise


async def open_upstream(context: Context, host: str, port: int) -> RawSocket:
    """A connection to what the client asked for, if the policy allows it."""
    decision = rules.decide_name(context.egress, host, port)
    if not decision.allowed:
        raise Refused(host, port, decision)
    name = rules.normalize(host) or host
    address = rules.literal(name)
    try:
        with anyio.fail_after(CONNECT_SECONDS):
            found = [address] if address else await context.resolver.resolve(name, port)
    except (OSError, TimeoutError):
        raise Refused(host, port, Decision(False, "unresolved")) from None
    refused = Decision(False, "unresolved")
    for candidate in found:
        checked = rules.decide_address(context.egress, candidate)
        if not checked.allowed:
            refused = checked if refused.reason == "unresolved" else refused
            continue
        try:
            with anyio.fail_after(CONNECT_SECONDS):
                return await rawsocket.connect(*context.resolver.dial(candidate, port))
        except (OSError, TimeoutError):
            refused = Decision(False, "unreachable")
    raise Refused(host, port, refused)
