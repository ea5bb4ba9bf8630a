"""A TCP socket the proxy drives itself: non-blocking, waited on with anyio, so a
tunnel can move a download with `splice(2)` (socket to pipe to socket, no copy
through Python), which an event loop's transport, owning its socket, forbids.

It speaks as anyio's byte streams do (`receive`, `send`, `send_eof`, `aclose`;
`EndOfStream` at the end, `BrokenResourceError` on a reset).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
from collections.abc import Callable

import anyio

# Bytes one splice moves at most; the pipe between is made this big.
SPLICE_BYTES = 1 << 20
_SPLICE_FLAGS = getattr(os, "SPLICE_F_MOVE", 1) | getattr(os, "SPLICE_F_NONBLOCK", 2)
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


class RawSocket:
    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock

    async def receive(self, max_bytes: int = 65536) -> bytes:
        while True:
            try:
                data = self.sock.recv(max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self.sock)
                continue
            except OSError as exc:
                raise anyio.BrokenResourceError from exc
            if not data:
                raise anyio.EndOfStream
            return data

    async def send(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                sent = self.sock.send(view)
            except BlockingIOError:
                await anyio.wait_writable(self.sock)
                continue
            except OSError as exc:
                raise anyio.BrokenResourceError from exc
            view = view[sent:]

    async def send_eof(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)

    async def aclose(self) -> None:
        self.sock.close()

    async def splice_to(self, sink: RawSocket, moved: Callable[[int], None]) -> None:
        """Everything this side sends, to `sink`, through a pipe in the kernel,
        until this side's end (returns) or either side fails (BrokenResourceError)."""
        read_end, write_end = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            with contextlib.suppress(OSError):
                fcntl.fcntl(write_end, _F_SETPIPE_SZ, SPLICE_BYTES)
            while count := await self._splice_in(write_end):
                moved(count)
                while count:
                    count -= await sink._splice_out(read_end, count)
        finally:
            os.close(read_end)
            os.close(write_end)

    async def _splice_in(self, pipe: int) -> int:
        while True:
            try:
                return os.splice(self.sock.fileno(), pipe, SPLICE_BYTES, flags=_SPLICE_FLAGS)
            except BlockingIOError:
                await anyio.wait_readable(self.sock)
            except OSError as exc:
                raise anyio.BrokenResourceError from exc

    async def _splice_out(self, pipe: int, count: int) -> int:
        while True:
            try:
                return os.splice(pipe, self.sock.fileno(), count, flags=_SPLICE_FLAGS)
            except BlockingIOError:
                await anyio.wait_writable(self.sock)
            except OSError as exc:
                raise anyio.BrokenResourceError from exc


async def accept(listener: socket.socket) -> RawSocket:
    """The next connection on a non-blocking listening socket."""
    while True:
        try:
            sock, _ = listener.accept()
        except BlockingIOError:
            await anyio.wait_readable(listener)
            continue
        except OSError as exc:
            if exc.errno in (errno.ECONNABORTED, errno.EPROTO, errno.EMFILE, errno.ENFILE):
                # Gone before it was taken, or no descriptor now: wait, then again.
                await anyio.sleep(0.05)
                continue
            raise
        return RawSocket(sock)


async def connect(host: str, port: int) -> RawSocket:
    """A connection to an address (an IP literal); OSError when refused."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        try:
            sock.connect((host, port))
        except BlockingIOError:
            await anyio.wait_writable(sock)
            error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if error:
                raise OSError(error, os.strerror(error)) from None
    except BaseException:
        sock.close()
        raise
    return RawSocket(sock)
