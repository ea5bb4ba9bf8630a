"""The stdio transport: framed input from stdin, one serialized writer to stdout.

At start the protocol fds are moved away from 0 and 1: fd 0 becomes
/dev/null and fd 1 becomes a copy of stderr. Whatever a library prints or a
child inherits by accident then lands on stderr, never in the protocol.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass

import anyio

from protocol import messages
from protocol.framing import Frame, LineFramer
from server import fdio, log

READ_CHUNK_BYTES = 256 * 1024
# Bytes queued for stdout before producers wait. Chunk producers coalesce
# while they wait, so this bounds memory without losing any response.
OUTBOX_MAX_BYTES = 2 * 1024 * 1024
# Lines joined into one write() when several are ready.
WRITE_BATCH_BYTES = 1024 * 1024

_log = log.get("stdio")


@dataclass(frozen=True, slots=True)
class ProtocolFds:
    input: int
    output: int
    restore_blocking: tuple[tuple[int, bool], ...]


def take_over_stdio() -> ProtocolFds:
    """Move the protocol off fds 0 and 1, and guard them."""
    proto_in = os.dup(0)
    proto_out = os.dup(1)
    os.set_inheritable(proto_in, False)
    os.set_inheritable(proto_out, False)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    blocking = ((proto_in, os.get_blocking(proto_in)), (proto_out, os.get_blocking(proto_out)))
    return ProtocolFds(proto_in, proto_out, blocking)


def restore_stdio(fds: ProtocolFds) -> None:
    """Non-blocking mode belongs to the shared open file: give it back as found."""
    for fd, was_blocking in fds.restore_blocking:
        try:
            os.set_blocking(fd, was_blocking)
        except OSError:
            pass


async def read_frames(fd: int, framer: LineFramer) -> AsyncIterator[Frame]:
    """Frames until EOF. A regular file cannot be polled, so it is read directly."""
    pollable = not stat.S_ISREG(os.fstat(fd).st_mode)
    if pollable:
        os.set_blocking(fd, False)
    while True:
        try:
            data = (
                await fdio.read(fd, READ_CHUNK_BYTES) if pollable else os.read(fd, READ_CHUNK_BYTES)
            )
        except OSError as exc:
            if exc.errno in (errno.EIO, errno.EBADF):
                data = b""
            else:
                raise
        if not data:
            for frame in framer.close():
                yield frame
            return
        for frame in framer.feed(data):
            yield frame
        if not pollable:
            # Let other tasks run between big reads of a file.
            await anyio.lowlevel.checkpoint()


class Outbox:
    """The single writer: every protocol line goes through here, in order.

    The queue is bounded in bytes, not lines: a producer waits while more than
    OUTBOX_MAX_BYTES are queued, so a client that stops reading costs a fixed
    amount of memory. A line is always accepted into an empty queue, whatever
    its size, so no message can be starved.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lines: deque[bytes] = deque()
        self._queued = 0
        self._ready = anyio.Event()
        self._space = anyio.Event()
        self._closed = False
        self.broken = anyio.Event()
        self.finished = anyio.Event()

    async def put(self, line: bytes) -> None:
        """Queue a line, waiting while the queue is full. Dropped once stdout is gone."""
        while self._queued >= OUTBOX_MAX_BYTES and not self.broken.is_set():
            if self._space.is_set():
                self._space = anyio.Event()
            await self._space.wait()
        if self.broken.is_set() or self._closed:
            return
        self._lines.append(line)
        self._queued += len(line)
        self._ready.set()

    def close(self) -> None:
        """No more lines: the writer flushes what is queued, then ends."""
        self._closed = True
        self._ready.set()

    async def run(self) -> None:
        os.set_blocking(self._fd, False)
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
                        await self._write(batch[0] if len(batch) == 1 else b"".join(batch))
                    self._queued -= size
                    self._space.set()
                if self._closed:
                    return
        finally:
            self.finished.set()
            self._space.set()

    async def _write(self, data: bytes) -> None:
        try:
            await fdio.write_all(self._fd, data)
        except OSError as exc:
            _log.warning(messages.STDOUT_GONE.format(reason=exc.strerror))
            self.broken.set()
            self._space.set()
