"""The stdio transport: the process's stdin and stdout as anyio byte streams.

At start the protocol fds are moved away from 0 and 1: fd 0 becomes
/dev/null and fd 1 becomes a copy of stderr. Whatever a library prints or a
child inherits by accident then lands on stderr, never in the protocol.

A terminal as stdin or stdout (`kubectl exec -it`, `docker run -it`, `ssh
-tt`, all habits) is put in raw mode: its line discipline would echo every
request, cut lines at 4095 bytes, let a DEL byte erase the character before
it, and turn bytes into signals. When stderr is that same terminal, it is
pointed at /dev/null, so no log line lands inside the protocol stream. The
terminal's settings are given back at exit.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import sys
import termios
import tty
from collections import deque
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import msgspec

from bashrpc.server import fdio
from bashrpc.server.pulse import Pulse
from bashrpc.server.wire.transport import Transport

READ_CHUNK_BYTES = 256 * 1024
# Chunks read ahead of the connection before reading stops for a while.
BUFFERED_CHUNKS = 4
# stdout's pipe: bigger means fewer writes and wakeups for a fast client, but every
# byte in it is one that a reply queued after it cannot overtake (see the outbox).
PIPE_BUFFER_BYTES = 256 * 1024
_F_SETPIPE_SZ = 1031


class ProtocolFds(msgspec.Struct, frozen=True):
    input: int
    output: int
    restore_blocking: tuple[tuple[int, bool], ...]
    # Terminals put in raw mode, with the settings they had (termios attributes).
    restore_terminals: tuple[tuple[int, list[Any]], ...] = ()


def take_over_stdio() -> ProtocolFds:
    """Move the protocol off fds 0 and 1, and guard them."""
    proto_in = os.dup(0)
    proto_out = os.dup(1)
    os.set_inheritable(proto_in, False)
    os.set_inheritable(proto_out, False)
    terminals = _raw_terminals(proto_in, proto_out)
    if terminals and _same_device(2, [fd for fd, _ in terminals]):
        _point_at_devnull(2, os.O_WRONLY)
    _point_at_devnull(0, os.O_RDONLY)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    blocking = ((proto_in, os.get_blocking(proto_in)), (proto_out, os.get_blocking(proto_out)))
    return ProtocolFds(proto_in, proto_out, blocking, terminals)


def _raw_terminals(*fds: int) -> tuple[tuple[int, list[Any]], ...]:
    """Put each terminal among `fds` in raw mode (one shared terminal once);
    their settings as they were."""
    found: list[tuple[int, list[Any]]] = []
    for fd in fds:
        if not os.isatty(fd) or _same_device(fd, [known for known, _ in found]):
            continue
        try:
            found.append((fd, termios.tcgetattr(fd)))
            tty.setraw(fd, termios.TCSANOW)
        except termios.error:
            continue
    return tuple(found)


def _same_device(fd: int, others: list[int]) -> bool:
    """Whether `fd` is the same character device (terminal) as one of `others`."""
    try:
        mine = os.fstat(fd)
        return stat.S_ISCHR(mine.st_mode) and any(
            os.fstat(other).st_rdev == mine.st_rdev for other in others
        )
    except OSError:
        return False


def _point_at_devnull(fd: int, flags: int) -> None:
    devnull = os.open(os.devnull, flags)
    os.dup2(devnull, fd)
    os.close(devnull)


def restore_stdio(fds: ProtocolFds) -> None:
    """Non-blocking mode belongs to the shared open file, and a terminal's settings
    to whoever uses it next: give them back as found."""
    for fd, was_blocking in fds.restore_blocking:
        try:
            os.set_blocking(fd, was_blocking)
        except OSError:
            pass
    for fd, attributes in fds.restore_terminals:
        try:
            termios.tcsetattr(fd, termios.TCSADRAIN, attributes)
        except termios.error:
            pass


class FdReceiveStream(anyio.abc.ByteReceiveStream):
    """Reads an fd from a loop callback, so a steady stream of requests costs no
    readiness registration per read. What epoll refuses (`bashrpc < requests.jsonl`,
    `< /dev/null`) never blocks, so it is read directly, yielding between reads."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._pollable = fdio.pollable(fd)
        if self._pollable:
            os.set_blocking(fd, False)
        self._chunks: deque[bytes] = deque()
        # Read into, then copied out at the size read: a fresh 256 KiB bytes per
        # read is past glibc's mmap threshold, so every request line would cost an
        # mmap, an mremap and a munmap.
        self._buffer = bytearray(READ_CHUNK_BYTES)
        self._eof = False
        self._ready = Pulse()
        self._watch: fdio.Watch | None = None

    def _readable(self) -> None:
        try:
            size = os.readv(self._fd, (self._buffer,))
        except BlockingIOError:
            return
        except OSError as exc:
            if exc.errno not in (errno.EIO, errno.EBADF):
                raise
            size = 0
        if size:
            with memoryview(self._buffer) as buffer:
                self._chunks.append(bytes(buffer[:size]))
        else:
            self._eof = True
        assert self._watch is not None
        if self._eof or len(self._chunks) >= BUFFERED_CHUNKS:
            # Unread input stays in the pipe: the client waits, as on any full pipe.
            self._watch.stop()
        self._ready.fire()

    async def receive(self, max_bytes: int = READ_CHUNK_BYTES) -> bytes:
        if not self._pollable:
            data = os.read(self._fd, max_bytes)
            await anyio.lowlevel.checkpoint()
            if not data:
                raise anyio.EndOfStream
            return data
        if self._watch is None:
            self._watch = fdio.Watch(self._fd, self._readable)
        while not self._chunks and not self._eof:
            await self._ready.wait()
        if not self._chunks:
            raise anyio.EndOfStream
        data = self._chunks.popleft()
        if not self._eof:
            self._watch.start()
        return data

    async def aclose(self) -> None:
        if self._watch is not None:
            self._watch.stop()


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

    def try_send(self, item: bytes) -> int:
        """As much as the pipe takes now, without waiting; how much that was."""
        try:
            return os.write(self._fd, item)
        except BlockingIOError:
            return 0
        except OSError as exc:
            raise anyio.BrokenResourceError(exc.strerror) from exc

    async def aclose(self) -> None:
        pass


def transport(fds: ProtocolFds) -> Transport:
    return Transport(FdReceiveStream(fds.input), FdSendStream(fds.output), is_stdout=True)
