"""Bytes both ways between a sandboxed client and the server it was allowed to
reach, counted, closed after a time with no byte either way.

In a tunnel (CONNECT, SOCKS) the client's first bytes are read before any goes
out: when they are a TLS ClientHello, its server name must be the tunnel's host
(no domain fronting behind an allowed name). The server's bytes flow from the
start meanwhile, so a protocol where the server speaks first still works.
"""

from __future__ import annotations

import contextlib
import time

import anyio

from bashrpc.server.runtime.network import clienthello, rules
from bashrpc.server.runtime.network.rawsocket import RawSocket
from bashrpc.server.runtime.network.rules import Decision

RECEIVE_BYTES = 256 * 1024
# How long a client may take to send its whole ClientHello.
HELLO_SECONDS = 10.0
_GONE = (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)


class Tunnel:
    def __init__(self, client: RawSocket, idle_seconds: float) -> None:
        self.client = client
        self.idle_seconds = idle_seconds
        self.bytes_out = 0
        self.bytes_in = 0
        # Set when the client's first bytes named another host.
        self.refused: Decision | None = None
        self._last = time.monotonic()
        self._open = 2

    async def run(self, upstream: RawSocket, first: bytes, host: str, *, check_tls: bool) -> None:
        """Move bytes until both sides are done, one fails, or the tunnel idles."""
        try:
            async with anyio.create_task_group() as group:
                scope = group.cancel_scope
                group.start_soon(self._watch, scope)
                group.start_soon(self._down, upstream, scope)
                group.start_soon(self._outbound, upstream, first, host, check_tls, scope)
        finally:
            await upstream.aclose()

    async def _outbound(
        self,
        upstream: RawSocket,
        first: bytes,
        host: str,
        check_tls: bool,
        scope: anyio.CancelScope,
    ) -> None:
        if check_tls:
            try:
                first = await self._hello(first, host)
            except (anyio.EndOfStream, TimeoutError, *_GONE):
                scope.cancel()
                return
            if self.refused is not None:
                scope.cancel()
                return
        if first:
            self.bytes_out += len(first)
            try:
                await upstream.send(first)
            except _GONE:
                scope.cancel()
                return
        await self._copy(self.client, upstream, scope)

    async def _hello(self, data: bytes, host: str) -> bytes:
        with anyio.fail_after(HELLO_SECONDS):
            while not data or (hello := clienthello.read(data)).status == "more":
                data += await self.client.receive(RECEIVE_BYTES)
        if hello.status == "malformed":
            self.refused = Decision(False, "malformed", "TLS ClientHello")
        elif hello.server_name is not None and (
            rules.normalize(hello.server_name) != rules.normalize(host)
        ):
            self.refused = Decision(False, "sni", hello.server_name)
        return data

    async def _down(self, upstream: RawSocket, scope: anyio.CancelScope) -> None:
        """The host's bytes to the client, spliced in the kernel."""
        try:
            await upstream.splice_to(self.client, self._received)
        except _GONE:
            scope.cancel()
            return
        await _half_close(self.client)
        self._ended(scope)

    def _received(self, count: int) -> None:
        self._last = time.monotonic()
        self.bytes_in += count

    async def _copy(self, source: RawSocket, sink: RawSocket, scope: anyio.CancelScope) -> None:
        """The client's bytes to the host (requests: small, parsed no more)."""
        try:
            while True:
                try:
                    data = await source.receive(RECEIVE_BYTES)
                except anyio.EndOfStream:
                    await _half_close(sink)
                    break
                self._last = time.monotonic()
                self.bytes_out += len(data)
                await sink.send(data)
        except _GONE:
            scope.cancel()
            return
        self._ended(scope)

    def _ended(self, scope: anyio.CancelScope) -> None:
        """One direction is done; the tunnel, when both are."""
        self._open -= 1
        if self._open == 0:
            scope.cancel()

    async def _watch(self, scope: anyio.CancelScope) -> None:
        while True:
            left = self._last + self.idle_seconds - time.monotonic()
            if left <= 0:
                scope.cancel()
                return
            await anyio.sleep(left)


async def _half_close(sink: RawSocket) -> None:
    """Pass an end of stream on; a side already gone has nothing to be told (an
    event loop's transport once raised RuntimeError here, and took the server down)."""
    with contextlib.suppress(*_GONE, RuntimeError):
        await sink.send_eof()
