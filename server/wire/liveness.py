"""A client that stops sending, taken for gone: the remote stream's missing EOF.

A frozen client (a SIGSTOPped ssh, a half-open TCP path, a stuck `kubectl
exec`) never closes its stream, so without a deadline the server and its
commands would run for ever. The clock runs only while the connection waits
for input: a connection that is not reading (its client is not reading its
output) is not the client's silence.
"""

from __future__ import annotations

import anyio
import anyio.abc
import msgspec
from anyio.abc import AnyByteReceiveStream

from bashrpc.protocol import messages
from bashrpc.server import log
from bashrpc.server.wire.transport import Transport

_log = log.get("liveness")


class SilenceLimit(anyio.abc.ByteReceiveStream):
    """`stream`, ending as on EOF once no byte has come for `seconds` of waiting."""

    def __init__(self, stream: AnyByteReceiveStream, seconds: float) -> None:
        self._stream = stream
        self._seconds = seconds

    async def receive(self, max_bytes: int = 65536) -> bytes:
        with anyio.move_on_after(self._seconds):
            data = await self._stream.receive()
            assert isinstance(data, bytes)
            return data
        _log.warning(messages.CLIENT_SILENT.format(seconds=messages.format_seconds(self._seconds)))
        raise anyio.EndOfStream

    async def aclose(self) -> None:
        await self._stream.aclose()


def watched(transport: Transport, seconds: float | None) -> Transport:
    """The transport, with its input ending after `seconds` of silence (None: never)."""
    if seconds is None:
        return transport
    return msgspec.structs.replace(transport, receive=SilenceLimit(transport.receive, seconds))
