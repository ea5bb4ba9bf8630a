"""A command's output FIFO, and the reader that drains it.

Each command writes into a FIFO of its own. The reader forwards what it
reads while the command is current, pausing when the consumer asks it to
(backpressure), then drains what is left when the command ends, bounded by
idleness (see `drain.py`), and after that keeps reading only to discard,
so a chatty background job never blocks or dies of SIGPIPE.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import anyio
import anyio.abc
import anyio.lowlevel

from server import fdio
from server.runtime import drain

READ_CHUNK_BYTES = 256 * 1024
PIPE_BUFFER_BYTES = 1024 * 1024
_F_SETPIPE_SZ = 1031


class Fifo:
    """A command's output FIFO. One that reached EOF is reused by the next command."""

    def __init__(self, path: Path) -> None:
        os.mkfifo(path, 0o600)
        self.path = path
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            fcntl.fcntl(self.fd, _F_SETPIPE_SZ, PIPE_BUFFER_BYTES)
        except OSError:
            pass

    def hold(self) -> int:
        """Our own writer keeps the FIFO from reading as EOF before the shell opens it."""
        return os.open(self.path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)

    def close(self) -> None:
        anyio.notify_closing(self.fd)
        os.close(self.fd)
        with contextlib.suppress(OSError):
            os.unlink(self.path)


class Backpressure(Protocol):
    """A consumer that may ask the reader to pause, as a full pipe would."""

    @property
    def backlogged(self) -> bool: ...

    async def wait_for_room(self) -> None: ...


class OutputPipe:
    """Reads one command's FIFO until EOF; forwards while attached, then discards."""

    def __init__(
        self, fd: int, on_output: Callable[[bytes], None], backpressure: Backpressure | None
    ) -> None:
        self.fd = fd
        self._on_output: Callable[[bytes], None] | None = on_output
        self._backpressure = backpressure
        self.eof = anyio.Event()
        self.last_data = anyio.current_time()

    def detach(self) -> None:
        self._on_output = None
        self._backpressure = None

    async def pump(self) -> None:
        """Read until EOF. Cancelling it loses nothing: each read is whole."""
        while data := await fdio.read(self.fd, READ_CHUNK_BYTES):
            self.last_data = anyio.current_time()
            if self._on_output is not None:
                self._on_output(data)
            if self._backpressure is not None and self._backpressure.backlogged:
                await self._backpressure.wait_for_room()
                self.last_data = anyio.current_time()
            elif len(data) == READ_CHUNK_BYTES:
                # A command that never pauses must not starve the other tasks
                # (a short read means the next one waits anyway).
                await anyio.lowlevel.checkpoint()
        self.eof.set()

    async def drain(self) -> None:
        """Read on until EOF, bounded by idleness and total time.

        The command has ended: what is left in the pipe is read at once, with
        no pause for the consumer, so no deadline cuts off the command's own
        last output."""
        self._backpressure = None
        deadline = anyio.current_time() + drain.DRAIN_MAX_SECONDS
        while not self.eof.is_set():
            wait = min(self.last_data + drain.DRAIN_IDLE_SECONDS, deadline)
            wait -= anyio.current_time()
            if wait <= 0:
                return
            with anyio.move_on_after(wait):
                await self.pump()


class Fifos:
    """One shell's FIFOs: one per command; one that reached EOF serves the next."""

    def __init__(self, directory: Path, name: str, owner: anyio.abc.TaskGroup) -> None:
        self._dir = directory
        self._name = name
        self._owner = owner
        self._seq = 0
        self._spare: Fifo | None = None

    def take(self) -> Fifo:
        if self._spare is not None:
            fifo, self._spare = self._spare, None
            return fifo
        self._seq += 1
        return Fifo(self._dir / f"{self._name}.{self._seq}.out")

    def settle(self, pipe: OutputPipe, fifo: Fifo) -> None:
        """Keep a FIFO that reached EOF for the next command; retire one still held open."""
        if pipe.eof.is_set() and self._spare is None:
            self._spare = fifo
        else:
            self._owner.start_soon(self._retire, pipe, fifo)

    async def _retire(self, pipe: OutputPipe, fifo: Fifo) -> None:
        """Read a FIFO that background jobs hold open until they let go."""
        try:
            await pipe.pump()
        finally:
            fifo.close()

    def close(self) -> None:
        if self._spare is not None:
            self._spare.close()
            self._spare = None
