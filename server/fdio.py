"""Awaitable reads and writes on non-blocking file descriptors.

Pipes, FIFOs and the protocol's stdio are all driven the same way: try the
syscall, and on EAGAIN wait for readiness, so the event loop never blocks.
Readers that read often keep a `Watch` instead (the asyncio loop's own
`add_reader`, under anyio's asyncio backend, uvloop included).
"""

from __future__ import annotations

import asyncio
import os
import select
from collections.abc import Callable

import anyio


def pollable(fd: int) -> bool:
    """Whether epoll takes `fd`. Regular files and some devices (/dev/null) it
    refuses: they are always ready, so they are read directly instead."""
    with select.epoll(1) as probe:
        try:
            probe.register(fd, select.EPOLLIN)
        except PermissionError:
            return False
    return True


async def read(fd: int, size: int) -> bytes:
    """Up to `size` bytes; b"" at EOF."""
    while True:
        try:
            return os.read(fd, size)
        except BlockingIOError:
            await anyio.wait_readable(fd)


async def write_all(fd: int, data: bytes) -> None:
    """Write every byte, waiting while the reader is behind. OSError propagates."""
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            await anyio.wait_writable(fd)
            continue
        view = view[n:]


class Watch:
    """Persistent readiness: the loop calls `callback` whenever `fd` is readable.

    Waiting with `wait_readable` registers the fd with the loop and removes it
    again on every wait; a reader that stays registered costs two epoll_ctl
    calls and a task switch less per read, which is most of a short
    command's round trip. The callback reads, and must not block.
    """

    def __init__(self, fd: int, callback: Callable[[], None]) -> None:
        self._loop = asyncio.get_running_loop()
        self._fd = fd
        self._callback: Callable[[], None] | None = callback
        self.active = False
        self.start()

    def start(self) -> None:
        # Closed: never again, as its fd may be closed, and its number reused.
        if not self.active and self._callback is not None:
            self._loop.add_reader(self._fd, self._callback)
            self.active = True

    def stop(self) -> None:
        if self.active:
            self._loop.remove_reader(self._fd)
            self.active = False

    def close(self) -> None:
        """Stopped for good. It forgets its callback, which is mostly its owner's
        method: the owner is then freed as it is dropped, not by the collector."""
        self.stop()
        self._callback = None


def write_all_blocking(fd: int, data: bytes) -> None:
    """Write every byte from a thread of its own, waiting as a blocking write
    would even when someone made the shared open file non-blocking."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            select.select([], [fd], [])
