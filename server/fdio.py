"""Awaitable reads and writes on non-blocking file descriptors.

Pipes, FIFOs and the protocol's stdio are all driven the same way: try the
syscall, and on EAGAIN wait for readiness, so the event loop never blocks.
"""

from __future__ import annotations

import os

import anyio


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
