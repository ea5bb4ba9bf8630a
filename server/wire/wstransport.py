"""A WebSocket connection as a `Transport`: one JSON-RPC message per text frame.

The connection reads and writes lines; here each incoming message becomes one
line, and each outgoing line one text frame. A message's own newlines can only
be JSON whitespace (a raw newline is not allowed inside a JSON string), so they
become spaces: one frame is always one message. The send side awaits the
library's `send`, which waits while its write buffer is above its limit, so a
client that stops reading holds the outbox, and the outbox's bounds hold.
"""

from __future__ import annotations

import anyio
import anyio.abc
from websockets.asyncio.connection import Connection
from websockets.exceptions import ConnectionClosed

from bashrpc.server.wire.transport import Transport

NEWLINE = b"\n"


def as_line(message: bytes) -> bytes:
    """One message as one line, whatever whitespace it holds."""
    if NEWLINE in message:
        message = message.replace(NEWLINE, b" ")
    return message + NEWLINE


class MessageReceive(anyio.abc.ByteReceiveStream):
    """Each message whole, as a line (the library bounds its size: `max_size`)."""

    def __init__(self, websocket: Connection) -> None:
        self._websocket = websocket

    async def receive(self, max_bytes: int = 65536) -> bytes:
        try:
            message = await self._websocket.recv(decode=False)
        except ConnectionClosed:
            raise anyio.EndOfStream from None
        return as_line(message)

    async def aclose(self) -> None:
        """The listener's handler closes the connection when it returns."""


class LineSend(anyio.abc.ByteSendStream):
    """Whole lines, each sent as one text frame without its newline."""

    def __init__(self, websocket: Connection) -> None:
        self._websocket = websocket
        self._partial = b""

    async def send(self, item: bytes) -> None:
        *lines, self._partial = (self._partial + item).split(NEWLINE)
        try:
            for line in lines:
                # Already UTF-8 (the encoder's JSON): a text frame with no decoding.
                await self._websocket.send(line, text=True)
        except ConnectionClosed as exc:
            raise anyio.BrokenResourceError from exc

    async def aclose(self) -> None:
        """The listener's handler closes the connection when it returns."""


def websocket_transport(websocket: Connection) -> Transport:
    return Transport(MessageReceive(websocket), LineSend(websocket))
