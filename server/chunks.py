"""Coalescing of streamed output into notifications.

Output can arrive thousands of times a second; a host wants a steady trickle.
The stream sends the first text at once, then at most one notification per
interval. While the client is slow to read, text merges into the pending
buffer, which is capped: beyond the cap the oldest pending text is skipped
(the result and the artifact still hold everything).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio

from protocol import messages

CHUNK_INTERVAL_SECONDS = 0.02
MAX_PENDING_CHARS = 256 * 1024


class ChunkStream:
    def __init__(
        self,
        emit: Callable[[int, str], Awaitable[None]],
        interval: float = CHUNK_INTERVAL_SECONDS,
        max_pending: int = MAX_PENDING_CHARS,
    ) -> None:
        self._emit = emit
        self._interval = interval
        self._max_pending = max_pending
        self._parts: list[str] = []
        self._pending = 0
        self._skipped = 0
        self._seq = 0
        self._wake = anyio.Event()
        self._closing = False
        self._done = anyio.Event()

    @property
    def sent(self) -> int:
        return self._seq

    def push(self, text: str) -> None:
        if not text:
            return
        self._parts.append(text)
        self._pending += len(text)
        if self._pending > self._max_pending:
            merged = "".join(self._parts)
            keep = merged[-(self._max_pending // 2) :]
            self._skipped += len(merged) - len(keep)
            self._parts = [keep]
            self._pending = len(keep)
        self._wake.set()

    def _take(self) -> str:
        text = "".join(self._parts)
        if self._skipped:
            text = messages.NOTICE_CHUNKS_SKIPPED.format(count=self._skipped) + text
            self._skipped = 0
        self._parts = []
        self._pending = 0
        return text

    async def run(self) -> None:
        """The pump; ends once ``close`` was called and everything was sent."""
        try:
            while True:
                await self._wake.wait()
                self._wake = anyio.Event()
                if self._parts:
                    text = self._take()
                    await self._emit(self._seq, text)
                    self._seq += 1
                    if not self._closing:
                        await anyio.sleep(self._interval)
                if self._closing and not self._parts:
                    return
        finally:
            self._done.set()

    async def close(self) -> None:
        """Flush what is pending and wait until the pump has sent it."""
        self._closing = True
        self._wake.set()
        await self._done.wait()
