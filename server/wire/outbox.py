"""The single writer: every protocol line goes out through here, in order.

The queue is bounded in bytes, not lines: a producer waits while more than
OUTBOX_MAX_BYTES are queued, so a client that stops reading costs a fixed
amount of memory. A line is always accepted into an empty queue, whatever
its size, so no message can be starved.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import anyio
from anyio.abc import AnyByteSendStream

from protocol import messages
from server import log

OUTBOX_MAX_BYTES = 2 * 1024 * 1024
# Lines joined into one write when several are ready.
WRITE_BATCH_BYTES = 1024 * 1024

_log = log.get("outbox")


class Outbox:
    def __init__(self, stream: AnyByteSendStream) -> None:
        self._stream = stream
        # A stream that can take bytes without waiting lets an idle outbox
        # write a line at once, with no hop through the writer task.
        self._try_send: Callable[[bytes], int] | None = getattr(stream, "try_send", None)
        self._writing = False
        self._lines: deque[bytes] = deque()
        self._queued = 0
        self._ready = anyio.Event()
        self._space = anyio.Event()
        self._closed = False
        self.broken = anyio.Event()
        self.finished = anyio.Event()

    async def put(self, line: bytes) -> None:
        """Queue a line, waiting while the queue is full. Dropped once the stream is gone."""
        while self._queued >= OUTBOX_MAX_BYTES and not self.broken.is_set():
            if self._space.is_set():
                self._space = anyio.Event()
            await self._space.wait()
        if self.broken.is_set() or self._closed:
            return
        if self._try_send is not None and not self._lines and not self._writing:
            try:
                written = self._try_send(line)
            except anyio.BrokenResourceError as exc:
                self._gone(exc)
                return
            if written == len(line):
                return
            line = line[written:]
        self._lines.append(line)
        self._queued += len(line)
        self._ready.set()

    def close(self) -> None:
        """No more lines: the writer flushes what is queued, then ends."""
        self._closed = True
        self._ready.set()

    async def run(self) -> None:
        try:
            while True:
                await self._ready.wait()
                self._ready = anyio.Event()
                while self._lines:
                    batch: list[bytes] = []
                    size = 0
                    while self._lines and size < WRITE_BATCH_BYTES:
                        line = self._lines.popleft()
                        batch.append(line)
                        size += len(line)
                    if not self.broken.is_set():
                        self._writing = True
                        await self._write(batch[0] if len(batch) == 1 else b"".join(batch))
                        self._writing = False
                    self._queued -= size
                    self._space.set()
                if self._closed:
                    return
        finally:
            self.finished.set()
            self._space.set()

    async def _write(self, data: bytes) -> None:
        try:
            await self._stream.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            self._gone(exc)

    def _gone(self, exc: Exception) -> None:
        _log.warning(messages.STDOUT_GONE.format(reason=exc or "closed"))
        self.broken.set()
        self._space.set()
