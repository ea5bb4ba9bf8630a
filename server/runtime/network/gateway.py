"""A session's proxy: the listeners its sandboxes hand out, the connections
accepted on them (at most the policy's `max_connections` at once; past that the
kernel's backlog holds them), and the audit of each.

The gateway is registered under a random key that the session's policy carries
(`Egress.gateway`), so a sandbox started for that policy hands its listener to
this session's proxy and no other. Closing the gateway cancels every connection.
"""

from __future__ import annotations

import collections
import math
import secrets
import socket
from collections.abc import Callable

import anyio
import msgspec

from bashrpc.protocol.methods import NetworkConnection
from bashrpc.server import log
from bashrpc.server.runtime.network import handoff, proxy, rawsocket
from bashrpc.server.runtime.network.proxy import Record
from bashrpc.server.runtime.network.rawsocket import RawSocket
from bashrpc.server.runtime.network.resolver import Resolver
from bashrpc.server.runtime.seam.egress import Egress

# What `session/list` shows of a session's connections.
RECENT = 100
# Refusals kept for the commands that ask which hosts they were refused.
REFUSALS_KEPT = 1000
_log = log.get("network")
_gateways: dict[str, Gateway] = {}


def find(key: str) -> Gateway | None:
    return _gateways.get(key)


class Gateway:
    def __init__(
        self, egress: Egress, resolver: Resolver, on_record: Callable[[Record], None]
    ) -> None:
        self.key = secrets.token_hex(16)
        self.egress = msgspec.structs.replace(egress, gateway=self.key)
        self.context = proxy.Context(self.egress, resolver, egress.idle_seconds)
        self.limiter = anyio.CapacityLimiter(egress.max_connections)
        self.recent: collections.deque[Record] = collections.deque(maxlen=RECENT)
        # Connections being served, in the order they were accepted.
        self.open: dict[proxy.Connection, None] = {}
        # (sequence number, host, port) of each refusal, for `refused_since`.
        self.refusals: collections.deque[tuple[int, str, int]] = collections.deque(
            maxlen=REFUSALS_KEPT
        )
        self.count = 0
        self._on_record = on_record
        self._send, self._receive = anyio.create_memory_object_stream[handoff.Ends](math.inf)
        self._scope = anyio.CancelScope()
        # Found from now on, before `run` starts: a sandbox started meanwhile waits
        # in the stream, rather than going without a way out.
        _gateways[self.key] = self

    def attach(self, ends: handoff.Ends) -> None:
        """A sandbox started for this gateway: the server's ends of its handoff."""
        try:
            self._send.send_nowait(ends)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            ends.close()

    async def run(self) -> None:
        """Serve every sandbox attached, until `close`."""
        try:
            with self._scope:
                async with anyio.create_task_group() as group:
                    async for ends in self._receive:
                        group.start_soon(self._sandbox, ends)
        finally:
            _gateways.pop(self.key, None)
            self._send.close()
            # Handoffs queued but never served: their sandboxes get no way out.
            while True:
                try:
                    self._receive.receive_nowait().close()
                except (anyio.WouldBlock, anyio.EndOfStream):
                    break
            self._receive.close()

    def close(self) -> None:
        """Stop serving: every listener and connection closes."""
        _gateways.pop(self.key, None)
        self._send.close()
        self._scope.cancel()

    def mark(self) -> int:
        return self.count

    def refused_since(self, mark: int) -> list[str]:
        """The hosts refused after `mark`, each once (`host:port`, the first port
        it was refused on), in order."""
        first: dict[str, int] = {}
        for seq, host, port in self.refusals:
            if seq > mark:
                first.setdefault(host, port)
        return [f"{host}:{port}" for host, port in first.items()]

    async def _sandbox(self, ends: handoff.Ends) -> None:
        listener = await handoff.receive(ends)
        if listener is None:
            _log.warning("no proxy listener could be made in a sandbox: it has no network")
            return
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self._accept, listener.sock)
                # The sandbox's command is gone: nothing can connect any more.
                await anyio.wait_readable(listener.pidfd)
                group.cancel_scope.cancel()
        finally:
            listener.close()

    async def _accept(self, sock: socket.socket) -> None:
        async with anyio.create_task_group() as group:
            while True:
                token = object()
                await self.limiter.acquire_on_behalf_of(token)
                try:
                    stream = await rawsocket.accept(sock)
                except BaseException:
                    self.limiter.release_on_behalf_of(token)
                    raise
                group.start_soon(self._serve, stream, token)

    def connections(self) -> list[NetworkConnection]:
        """The last `RECENT` connections: those that ended, then those still open
        that went out (a command that has its answer may end before its
        connection does)."""
        ended = [proxy.record_view(record) for record in self.recent]
        going = [proxy.record_view(c.record(), still_open=True) for c in self.open if c.out]
        return (ended + going)[-RECENT:]

    async def _serve(self, stream: RawSocket, token: object) -> None:
        connection = proxy.Connection(stream, self.context.idle_seconds)
        self.open[connection] = None
        try:
            await proxy.serve(connection, self.context, self._done)
        except Exception:
            # One connection's bug must not end the session's proxy, or the server.
            _log.exception("the network proxy failed on a connection")
        finally:
            self.open.pop(connection, None)
            self.limiter.release_on_behalf_of(token)

    def _done(self, record: Record) -> None:
        self.count += 1
        self.recent.append(record)
        if not record.allowed and record.host and record.reason in proxy.ALLOWABLE:
            self.refusals.append((self.count, record.host, record.port))
        _log.info(
            "network %s %s:%d %s%s out=%d in=%d %.3fs",
            record.protocol,
            record.host or "-",
            record.port,
            "allowed" if record.allowed else "refused",
            "" if record.allowed else f" ({record.reason})",
            record.bytes_out,
            record.bytes_in,
            record.seconds,
        )
        self._on_record(record)
