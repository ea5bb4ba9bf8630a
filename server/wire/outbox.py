"""The single writer: every protocol line goes out through here, whole, one at a time.

Lines wait in lanes bounded in bytes, not lines, so a client that stops
reading costs a fixed amount of memory:

- the control lane: replies the reader gives itself (`ping`, `session/list`,
  `abort_bash`, errors), written before anything in the bulk lanes. The
  reader never waits behind a flood of output, so the abort meant to stop
  one is read. Only a client that sends more than CONTROL_MAX_BYTES of such
  requests without reading their replies makes the reader wait for room: the
  ordinary backpressure of a client that never reads.
- one bulk lane per request (its key): its chunks, then its reply, in order,
  so within one request the chunks always come first. The writer serves the
  lanes round-robin, a slice of at most SLICE_BYTES (or one line) each, and
  a lane that was empty goes to the front: a reply, or another request's
  first chunk, waits behind at most one slice of a flood, not its backlog.

A producer waits while its own lane holds anything and either it holds
REQUEST_MAX_BYTES or all the bulk lanes together hold OUTBOX_MAX_BYTES. A line
is always accepted into an empty lane, whatever its size, so no message can
be starved and no flood can keep another request's reply out: the bulk total
is bounded by OUTBOX_MAX_BYTES plus one line per request in flight.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable

import anyio
from anyio.abc import AnyByteSendStream

from bashrpc.protocol import messages
from bashrpc.server import log
from bashrpc.server.pulse import Pulse

# All bulk lanes together, and one request's lane.
OUTBOX_MAX_BYTES = 2 * 1024 * 1024
REQUEST_MAX_BYTES = OUTBOX_MAX_BYTES
# Inline replies are small; this holds thousands of them (and one big artifact read).
CONTROL_MAX_BYTES = 256 * 1024
# One lane's turn in a round: other requests wait behind no more than this
# (or one line, when a line is larger).
SLICE_BYTES = 64 * 1024
# Lines joined into one write when several are ready; small, since a line that
# arrives while a write is under way waits for all of it.
WRITE_BATCH_BYTES = 64 * 1024

_log = log.get("outbox")

# Whose bulk lane a line joins: a request's own object (its flight), or None.
LaneKey = Hashable


class _Lane:
    """One lane's lines and the bytes they hold."""

    def __init__(self) -> None:
        self.lines: deque[bytes] = deque()
        self.queued = 0

    def append(self, line: bytes) -> None:
        self.lines.append(line)
        self.queued += len(line)

    def take(self, budget: int, into: list[bytes]) -> int:
        """Lines off the front, at least one, up to `budget` bytes; their size."""
        taken = 0
        while self.lines and (taken == 0 or taken + len(self.lines[0]) <= budget):
            line = self.lines.popleft()
            into.append(line)
            taken += len(line)
        self.queued -= taken
        return taken


class _BulkLanes:
    """A lane per request, served round-robin in slices."""

    def __init__(self) -> None:
        self.lanes: dict[LaneKey, _Lane] = {}
        # Keys with lines waiting, in serving order.
        self.turns: deque[LaneKey] = deque()
        self.queued = 0

    def must_wait(self, key: LaneKey) -> bool:
        lane = self.lanes.get(key)
        if lane is None or not lane.lines:
            return False
        return lane.queued >= REQUEST_MAX_BYTES or self.queued >= OUTBOX_MAX_BYTES

    def append(self, key: LaneKey, line: bytes) -> None:
        lane = self.lanes.get(key)
        if lane is None:
            lane = self.lanes[key] = _Lane()
        if not lane.lines:
            # Newly waiting: served next, ahead of the lanes that hold a backlog.
            self.turns.appendleft(key)
        lane.append(line)
        self.queued += len(line)

    def take(self, budget: int, into: list[bytes]) -> int:
        """Slices, round-robin, until `budget` bytes are taken or nothing waits."""
        taken = 0
        while self.turns and taken < budget:
            key = self.turns.popleft()
            lane = self.lanes[key]
            taken += lane.take(min(SLICE_BYTES, budget - taken), into)
            if lane.lines:
                self.turns.append(key)
            else:
                del self.lanes[key]
        self.queued -= taken
        return taken


class Outbox:
    def __init__(self, stream: AnyByteSendStream, is_stdout: bool = False) -> None:
        self._stream = stream
        # Losing stdout ends the process: a warning; losing a daemon's client: a debug line.
        self._is_stdout = is_stdout
        # A stream that can take bytes without waiting lets an idle outbox
        # write a line at once, with no hop through the writer task.
        self._try_send: Callable[[bytes], int] | None = getattr(stream, "try_send", None)
        self._writing = False
        self._control = _Lane()
        self._bulk = _BulkLanes()
        # Producers wait on `_space` for the writer to make room; the writer
        # waits on `_ready` for lines.
        self._space = Pulse()
        self._ready = Pulse()
        self._closed = False
        self.broken = anyio.Event()
        self.finished = anyio.Event()

    async def put(self, line: bytes, key: LaneKey = None) -> None:
        """Queue a line in `key`'s bulk lane, waiting while that lane may not grow."""
        while self._bulk.must_wait(key) and not self.broken.is_set():
            await self._space.wait()
        if self._accepts() and not self._sent_at_once(line):
            self._bulk.append(key, line)
            self._ready.fire()

    async def put_control(self, line: bytes) -> None:
        """Queue a reply the reader gives: ahead of bulk output, waiting only while
        the control lane itself is full."""
        while self._control.queued >= CONTROL_MAX_BYTES and not self.broken.is_set():
            await self._space.wait()
        if self._accepts() and not self._sent_at_once(line):
            self._control.append(line)
            self._ready.fire()

    def _accepts(self) -> bool:
        """Lines are dropped once the stream is gone or the outbox closed."""
        return not (self.broken.is_set() or self._closed)

    def _sent_at_once(self, line: bytes) -> bool:
        """Written straight to an idle stream, when it takes the line whole or in
        part; the rest of a line begun goes first in the control lane, since a
        line once begun is finished before any other."""
        idle = not self._control.lines and not self._bulk.turns and not self._writing
        if self._try_send is None or not idle:
            return False
        try:
            written = self._try_send(line)
        except anyio.BrokenResourceError as exc:
            self._gone(exc)
            return True
        if written == 0:
            return False
        if written < len(line):
            self._control.append(line[written:])
            self._ready.fire()
        return True

    async def drained(self, key: LaneKey) -> None:
        """Until nothing of `key`'s lane waits (a batch's reply follows its
        members' chunks, which are in lanes of their own)."""
        while key in self._bulk.lanes and not self.broken.is_set() and not self.finished.is_set():
            await self._space.wait()

    def close(self) -> None:
        """No more lines: the writer flushes what is queued, then ends."""
        self._closed = True
        self._ready.fire()

    async def run(self) -> None:
        try:
            while True:
                while self._control.lines or self._bulk.turns:
                    # Control lines first; a line already begun is always finished
                    # first, since each batch is written whole.
                    batch: list[bytes] = []
                    taken = (
                        self._control.take(WRITE_BATCH_BYTES, batch) if self._control.lines else 0
                    )
                    self._bulk.take(WRITE_BATCH_BYTES - taken, batch)
                    if not self.broken.is_set():
                        self._writing = True
                        await self._write(batch[0] if len(batch) == 1 else b"".join(batch))
                        self._writing = False
                    self._space.fire()
                if self._closed:
                    return
                await self._ready.wait()
        finally:
            self.finished.set()
            self._space.fire()

    async def _write(self, data: bytes) -> None:
        try:
            await self._stream.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            self._gone(exc)

    def _gone(self, exc: Exception) -> None:
        reason = str(exc) or "closed"
        if self._is_stdout:
            _log.warning(messages.STDOUT_GONE.format(reason=reason))
        else:
            _log.debug(messages.CLIENT_GONE.format(reason=reason))
        self.broken.set()
        self._space.fire()
