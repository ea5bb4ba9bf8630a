"""Streaming output as notifications: text for `bash/chunk`, raw bytes for `pty/output`.

The first text goes out at once, then at most one notification per interval.
While the client is slow to read, text merges into the pending buffer, which
is capped: beyond the cap the oldest pending text is skipped with a notice
(the result and the artifact still hold everything).
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable

import anyio.abc

from protocol import messages
from server import utf8
from server.throttle import Throttle

CHUNK_INTERVAL_SECONDS = 0.02
MAX_PENDING_BYTES = 256 * 1024
# Raw terminal bytes cannot take a notice; a host that fell behind resyncs
# from pty/screen, so the cap is larger and the oldest bytes are dropped.
MAX_PENDING_RAW_BYTES = 1024 * 1024


class ChunkStream:
    """Sanitized UTF-8 in, coalesced `bash/chunk` texts out, in order."""

    def __init__(
        self,
        emit: Callable[[int, str], Awaitable[None]],
        owner: anyio.abc.TaskGroup,
        interval: float = CHUNK_INTERVAL_SECONDS,
        max_pending: int = MAX_PENDING_BYTES,
    ) -> None:
        self._emit = emit
        self._max_pending = max_pending
        self._pending = bytearray()
        self._skipped = 0
        self._seq = 0
        self._throttle = Throttle(self._send, interval, owner)

    def push(self, data: bytes) -> None:
        if not data:
            return
        self._pending += data
        if len(self._pending) > self._max_pending:
            # Keep the newest half, cut on a character boundary.
            cut = utf8.char_start(self._pending, len(self._pending) - self._max_pending // 2)
            self._skipped += cut
            del self._pending[:cut]
        self._throttle.poke()

    async def _send(self) -> None:
        text = self._pending.decode()
        if self._skipped:
            text = messages.NOTICE_CHUNKS_SKIPPED.format(count=self._skipped) + text
            self._skipped = 0
        self._pending.clear()
        await self._emit(self._seq, text)
        self._seq += 1

    async def close(self) -> None:
        """Send what is pending and wait until it is queued."""
        await self._throttle.close()


class RawStream:
    """Raw PTY bytes, coalesced like text chunks, sent base64-encoded."""

    def __init__(
        self,
        emit: Callable[[str], Awaitable[None]],
        owner: anyio.abc.TaskGroup,
        interval: float = CHUNK_INTERVAL_SECONDS,
        max_pending: int = MAX_PENDING_RAW_BYTES,
    ) -> None:
        self._emit = emit
        self._max_pending = max_pending
        self._pending = bytearray()
        self._throttle = Throttle(self._send, interval, owner)

    def push(self, data: bytes) -> None:
        self._pending += data
        if len(self._pending) > self._max_pending:
            del self._pending[: len(self._pending) - self._max_pending]
        self._throttle.poke()

    async def _send(self) -> None:
        data = base64.b64encode(self._pending).decode("ascii")
        self._pending.clear()
        await self._emit(data)

    async def close(self) -> None:
        await self._throttle.close()
