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
import anyio.abc

from bashrpc.server.runtime.network import clienthello, rules
from bashrpc.server.runtime.network.rules import Decision

RECEIVE_BYTES = 256 * 1024
# How long a client may take to send its whole ClientHello.
HELLO_SECONDS = 10.0
_GONE = (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)


class Tunnel:
    def __init__(self, client: anyio.abc.SocketStream, idle_seconds: float) -> None:
        self.client = client
        self.idle_seconds = idle_seconds
        self.bytes_out = 0
        self.bytes_in = 0
        # Set when the client's first bytes named another host.
        self.refused: Decision | None = None
        self._last = time.monotonic()
        self._open = 2

    async def run(
        self, upstream: anyio.abc.SocketStream, first: bytes, host: str, *, check_tls: bool
    ) -> None:
        """Move bytes until both sides are done, one fails, or the tunnel idles."""
        async with upstream, anyio.create_task_group() as group:
            scope = group.cancel_scope
            group.start_soon(self._watch, scope)
            group.start_soon(self._copy, upstream, self.client, False, scope)
            group.start_soon(self._outbound, upstream, first, host, check_tls, scope)

    async def _outbound(
        self,
        upstream: anyio.abc.SocketStream,
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
        await self._copy(self.client, upstream, True, scope)

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

    async def _copy(
        self,
        source: anyio.abc.SocketStream,
        sink: anyio.abc.SocketStream,
        outbound: bool,
        scope: anyio.CancelScope,
    ) -> None:
        try:
            while True:
                try:
                    data = await source.receive(RECEIVE_BYTES)
                except anyio.EndOfStream:
                    await _half_close(sink)
                    break
                except anyio.ClosedResourceError:
                    # The other direction ended the tunnel.
                    return
                self._last = time.monotonic()
                if outbound:
                    self.bytes_out += len(data)
                else:
                    self.bytes_in += len(data)
                await sink.send(data)
        except _GONE:
            scope.cancel()
            return
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


async def _half_close(sink: anyio.abc.SocketStream) -> None:
    """Pass an end of stream on; a side already gone (uvloop raises RuntimeError
    for a transport it closed) has nothing to be told."""
    with contextlib.suppress(*_GONE, RuntimeError):
        await sink.send_eof()
