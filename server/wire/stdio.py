"""The stdio transport: the process's stdin and stdout as anyio byte streams.

At start the protocol fds are moved away from 0 and 1: fd 0 becomes
/dev/null and fd 1 becomes a copy of stderr. Whatever a library prints or a
child inherits by accident then lands on stderr, never in the protocol.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import sys
from dataclasses import dataclass

import anyio
import anyio.abc
import anyio.lowlevel

from server import fdio
from server.wire.transport import Transport

READ_CHUNK_BYTES = 256 * 1024
# A bigger stdout pipe means fewer writes and wakeups for a fast client.
PIPE_BUFFER_BYTES = 1024 * 1024
_F_SETPIPE_SZ = 1031


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


class FdReceiveStream(anyio.abc.ByteReceiveStream):
    """Reads an fd on readiness; a regular file (`bashrpc < requests.jsonl`)
    cannot be polled, so it is read directly, yielding between big reads."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._pollable = not stat.S_ISREG(os.fstat(fd).st_mode)
        if self._pollable:
            os.set_blocking(fd, False)

    async def receive(self, max_bytes: int = READ_CHUNK_BYTES) -> bytes:
        try:
            if self._pollable:
                data = await fdio.read(self._fd, max_bytes)
            else:
                data = os.read(self._fd, max_bytes)
                await anyio.lowlevel.checkpoint()
        except OSError as exc:
            if exc.errno not in (errno.EIO, errno.EBADF):
                raise
            data = b""
        if not data:
            raise anyio.EndOfStream
        return data

    async def aclose(self) -> None:
        pass


class FdSendStream(anyio.abc.ByteSendStream):
    """Writes an fd without ever blocking the event loop on a slow reader."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        os.set_blocking(fd, False)
        try:
            fcntl.fcntl(fd, _F_SETPIPE_SZ, PIPE_BUFFER_BYTES)
        except OSError:
            pass  # not a pipe, or not allowed: the default size works too

    async def send(self, item: bytes) -> None:
        try:
            await fdio.write_all(self._fd, item)
        except OSError as exc:
            raise anyio.BrokenResourceError(exc.strerror) from exc

    async def aclose(self) -> None:
        pass


def transport(fds: ProtocolFds) -> Transport:
    return Transport(FdReceiveStream(fds.input), FdSendStream(fds.output))
