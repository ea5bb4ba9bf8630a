"""The single writer: every protocol line goes out through here, whole, one at a time.

Lines wait in two lanes, each bounded in bytes, not lines, so a client that
stops reading costs a fixed amount of memory:

- the control lane: replies the reader gives itself (`ping`, `session/list`,
  `abort_bash`, errors), written before anything queued in the bulk lane.
  The reader never waits behind a flood of output, so the abort meant to stop
  one is read. Only a client that sends more than CONTROL_MAX_BYTES of such
  requests without reading their replies makes the reader wait for room: the
  ordinary backpressure of a client that never reads.
- the bulk lane: what request tasks send, in order: a request's chunks, then
  its reply, so within one request the chunks always come first.

A producer waits while its lane holds more than its bound. A line is always
accepted into an empty lane, whatever its size, so no message can be starved.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import anyio
from anyio.abc import AnyByteSendStream

from protocol import messages
from server import log

OUTBOX_MAX_BYTES = 2 * 1024 * 1024
# Inline replies are small; this holds thousands of them (and one big artifact read).
CONTROL_MAX_BYTES = 256 * 1024
# Lines joined into one write when several are ready.
WRITE_BATCH_BYTES = 1024 * 1024

_log = log.get("outbox")


class _Lane:
    """Lines waiting to be written, and the producers waiting for room."""

    def __init__(self, max_bytes: int) -> None:
        self.lines: deque[bytes] = deque()
        self.queued = 0
        self._max_bytes = max_bytes
        self._space = anyio.Event()

    @property
    def full(self) -> bool:
        return self.queued >= self._max_bytes

    async def wait_for_room(self) -> None:
        if self._space.is_set():
            self._space = anyio.Event()
        await self._space.wait()

    def append(self, line: bytes) -> None:
        self.lines.append(line)
        self.queued += len(line)

    def written(self, size: int) -> None:
        self.queued -= size
        self._space.set()

    def release(self) -> None:
        """Wake every producer (the stream is gone, or the writer ended)."""
        self._space.set()


class Outbox:
    def __init__(self, stream: AnyByteSendStream) -> None:
        self._stream = stream
        # A stream that can take bytes without waiting lets an idle outbox
        # write a line at once, with no hop through the writer task.
        self._try_send: Callable[[bytes], int] | None = getattr(stream, "try_send", None)
        self._writing = False
        self._control = _Lane(CONTROL_MAX_BYTES)
        self._bulk = _Lane(OUTBOX_MAX_BYTES)
        self._ready = anyio.Event()
        self._closed = False
        self.broken = anyio.Event()
        self.finished = anyio.Event()

    async def put(self, line: bytes) -> None:
        """Queue a line in the bulk lane, waiting while it is full."""
        await self._put(self._bulk, line)

    async def put_control(self, line: bytes) -> None:
        """Queue a reply the reader gives: ahead of bulk output, waiting only while
        the control lane itself is full."""
        await self._put(self._control, line)

    async def _put(self, lane: _Lane, line: bytes) -> None:
        """Dropped once the stream is gone."""
        while lane.full and not self.broken.is_set():
            await lane.wait_for_room()
        if self.broken.is_set() or self._closed:
            return
        idle = not self._control.lines and not self._bulk.lines and not self._writing
        if self._try_send is not None and idle:
            try:
                written = self._try_send(line)
            except anyio.BrokenResourceError as exc:
                self._gone(exc)
                return
            if written == len(line):
                return
            line = line[written:]
        lane.append(line)
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
                while self._control.lines or self._bulk.lines:
                    # Control lines first; a line already begun is always finished first,
                    # since each batch is written whole.
                    batch: list[bytes] = []
                    sizes = [0, 0]
                    for index, lane in enumerate((self._control, self._bulk)):
                        while lane.lines and sizes[0] + sizes[1] < WRITE_BATCH_BYTES:
                            line = lane.lines.popleft()
                            batch.append(line)
                            sizes[index] += len(line)
                    if not self.broken.is_set():
                        self._writing = True
                        await self._write(batch[0] if len(batch) == 1 else b"".join(batch))
                        self._writing = False
                    self._control.written(sizes[0])
                    self._bulk.written(sizes[1])
                if self._closed:
                    return
        finally:
            self.finished.set()
            self._control.release()
            self._bulk.release()

    async def _write(self, data: bytes) -> None:
        try:
            await self._stream.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            self._gone(exc)

    def _gone(self, exc: Exception) -> None:
        _log.warning(messages.STDOUT_GONE.format(reason=exc or "closed"))
        self.broken.set()
        self._control.release()
        self._bulk.release()
