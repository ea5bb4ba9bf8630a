"""Frames from a byte stream: the framer of `bashrpc.protocol.framing`, driven by reads."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
from anyio.abc import AnyByteReceiveStream

from bashrpc.protocol.framing import Frame, LineFramer


async def frames(stream: AnyByteReceiveStream, framer: LineFramer) -> AsyncIterator[Frame]:
    """Every frame until the stream ends; a last line without a newline counts."""
    while True:
        try:
            data = await stream.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            for frame in framer.close():
                yield frame
            return
        for frame in framer.feed(data):
            yield frame
