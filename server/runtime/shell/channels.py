"""A shell's channels besides its stdin: the status FIFO and the output FIFOs.

The status FIFO carries one record per command (see `protocol.py`). Each
command writes into a FIFO of its own, made under a random name while the
command before it runs (making one was most of a short command's cost, and
the server is idle while the shell works) and unlinked as the command ends,
so nothing left running can open it by a path, let alone a later command's.
Until then only the shell and the command know its name: the command holds it
open anyway.
Its reader forwards what it reads while the command is current, pausing when
the consumer asks it to
(backpressure), then drains what is left when the command ends, bounded by
idleness (see `drain.py`), and after that keeps reading only to discard,
so a chatty background job never blocks or dies of SIGPIPE. Both are read
by loop callbacks, with no task per read.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import struct
import termios
from collections.abc import Callable
from pathlib import Path

import anyio

from bashrpc.server import clock, fdio
from bashrpc.server.pulse import Pulse
from bashrpc.server.runtime.seam import drain
from bashrpc.server.runtime.seam.backend import Backpressure
from bashrpc.server.runtime.shell.protocol import (
    TOKEN_BYTES,
    BadRecord,
    RecordReader,
    StatusRecord,
)

# One read of a command's output is processed whole in one loop callback (sanitize,
# count, artifact, chunk): the slice of CPU another session's reply may wait behind.
READ_CHUNK_BYTES = 64 * 1024
STATUS_READ_BYTES = 4096
PIPE_BUFFER_BYTES = 1024 * 1024
# An output FIFO's random name: unguessable, and shorter than a token (the driver
# line carries it, and bash reads a pipe a byte at a time).
OUTPUT_NAME_BYTES = 12
_F_SETPIPE_SZ = 1031
# What a command wrote before it ended is read whole, however slowly a loaded
# machine reads it; this bounds only a pipe that something else empties as fast
# as a background job fills it.
OWED_MAX_SECONDS = 30.0


def unread_bytes(fd: int) -> int:
    """How many bytes a pipe holds that no one has read yet."""
    try:
        raw = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
    except OSError:
        return 0
    return int(struct.unpack("i", raw)[0])


class Fifo:
    """A command's output FIFO: made for it, its path gone once its command ends."""

    def __init__(self, directory: Path) -> None:
        # The system's CSPRNG, as `secrets` reads it, without its three calls.
        self.name = f"{os.urandom(OUTPUT_NAME_BYTES).hex()}.out"
        # A string: each system call would format a Path again.
        self._at = at = f"{directory}/{self.name}"
        os.mkfifo(at, 0o600)
        self.linked = True
        self.fd = os.open(at, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            fcntl.fcntl(self.fd, _F_SETPIPE_SZ, PIPE_BUFFER_BYTES)
        except OSError:
            pass
        self._writer = os.open(at, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)

    @property
    def path(self) -> Path:
        return Path(self._at)

    def hold(self) -> int:
        """Our own writer, which keeps the FIFO from reading as EOF before the
        shell opens it: the caller's to close."""
        writer, self._writer = self._writer, -1
        return writer

    def unlink(self) -> None:
        if self.linked:
            self.linked = False
            try:
                os.unlink(self._at)
            except OSError:
                pass

    def close(self) -> None:
        os.close(self.fd)
        if self._writer >= 0:
            os.close(self._writer)
            self._writer = -1
        self.unlink()


class OutputPipe:
    """Reads one command's FIFO from a loop callback until EOF: forwards while
    attached, pauses while the consumer is backlogged, then only discards."""

    def __init__(self, fifo: Fifo) -> None:
        """Watched from now on, forwarding nothing until `attach`: made ahead, its
        name on no driver line yet, nothing can write into it before then."""
        self.fifo = fifo
        self._on_output: Callable[[bytes], None] | None = None
        self._backpressure: Backpressure | None = None
        self.eof = asyncio.Event()
        self._blocked = False
        self._wake = Pulse()
        self._retired = False
        self._watch = fdio.Watch(fifo.fd, self.read_now)
        self.last_data = clock.now()
        self.bytes_read = 0

    def attach(
        self, on_output: Callable[[bytes], None], backpressure: Backpressure | None
    ) -> OutputPipe:
        """Its command's: where what it reads goes, and who may pause it."""
        self._on_output = on_output
        self._backpressure = backpressure
        self.last_data = clock.now()
        return self

    def read_now(self) -> None:
        """One read, as the loop calls it on readiness (and as a caller may, to
        learn at once what is already there)."""
        try:
            data = os.read(self.fifo.fd, READ_CHUNK_BYTES)
        except BlockingIOError:
            return
        if not data:
            self._watch.close()
            self.eof.set()
            if self._retired:
                self.fifo.close()
            return
        self.last_data = clock.now()
        self.bytes_read += len(data)
        if self._on_output is not None:
            self._on_output(data)
        if self._backpressure is not None and self._backpressure.backlogged:
            self._watch.stop()
            self._blocked = True
            self.poke()

    def poke(self) -> None:
        """Wake `until`: its condition may hold now."""
        self._wake.fire()

    async def until(self, done: asyncio.Event) -> None:
        """Until `done` is set (and poked); meanwhile honour the consumer's backpressure."""
        while not done.is_set():
            if self._blocked and self._backpressure is not None:
                await self._backpressure.wait_for_room()
                self._resume()
                continue
            if done.is_set() or self._blocked:
                continue
            await self._wake.wait()

    def _resume(self) -> None:
        self._blocked = False
        if not self.eof.is_set():
            self._watch.start()

    def release(self) -> None:
        """No more pauses for the consumer: read whatever comes."""
        self._backpressure = None
        if self._blocked:
            self._resume()

    async def drain(self, quiet_seconds: float) -> None:
        """Read on until EOF, or until `quiet_seconds` without output (background
        jobs may hold the FIFO open), and never longer than DRAIN_MAX_SECONDS.

        The command has ended, so what it wrote is already in the pipe: it is
        read at once, with no pause for the consumer, and whole. Silence and the
        deadline bound only what comes after: a read that a loaded machine made
        take longer than the silence had ended the drain with the command's own
        last lines unread, and they were discarded."""
        self.release()
        owed = self.bytes_read + unread_bytes(self.fifo.fd)
        self.read_now()
        now = clock.now()
        deadline, owed_deadline = now + drain.DRAIN_MAX_SECONDS, now + OWED_MAX_SECONDS
        while not self.eof.is_set():
            now = clock.now()
            if self.bytes_read < owed and now < owed_deadline:
                wait = quiet_seconds
            else:
                wait = min(self.last_data + quiet_seconds, deadline) - now
                if wait <= 0:
                    return
            with anyio.move_on_after(wait):
                await self.eof.wait()

    def detach(self) -> None:
        """Stop forwarding: its command is over."""
        self._on_output = None
        self.release()

    def retire(self) -> None:
        """Its path gone; read and discard until EOF, then close the FIFO."""
        self.detach()
        self.fifo.unlink()
        self._retired = True
        if self.eof.is_set():
            self.fifo.close()

    def stop(self) -> None:
        """The shell is gone: stop reading (the FIFO is closed by its owner)."""
        self._watch.close()

    def abandon(self) -> None:
        """Its shell is gone: stop reading, and close the FIFO unless EOF already
        did (as it does once the pipe is retired)."""
        self.stop()
        if not (self._retired and self.eof.is_set()):
            self.fifo.close()


class Fifos:
    """One shell's FIFOs: one per command, made ahead while the command before
    it runs; one that background jobs still hold is read until they let go."""

    def __init__(self, directory: Path) -> None:
        self._dir = directory
        self._retired: list[OutputPipe] = []
        # The next command's FIFO and its watched reader, made off the request path
        # (`_make_next`).
        self._next: OutputPipe | None = None
        self._closed = False
        self._loop = asyncio.get_running_loop()
        self._loop.call_soon(self._make_next)

    def take(
        self, on_output: Callable[[bytes], None], backpressure: Backpressure | None
    ) -> OutputPipe:
        """The FIFO made ahead, or, when it could not be, one made now; read for
        its command from now on. The next command's is made once the caller
        waits for this one's end: the server has nothing else to do while the
        shell works, and a client that sends its next request as soon as it has
        the reply does not wait for it."""
        pipe, self._next = self._next, None
        if pipe is None:
            pipe = OutputPipe(Fifo(self._dir))
        self._loop.call_soon(self._make_next)
        return pipe.attach(on_output, backpressure)

    def _make_next(self) -> None:
        """Make the next command's FIFO, and watch it (registering a reader with
        the loop is a few system calls): scheduled as a command is taken, it
        runs when that command's task first waits, past its driver line; as a
        command is settled, it makes one only if that making failed. Its name
        stays on no driver line until its command's, and the directory is
        unlisted, so none of it is exposed the longer. A failure here is met
        again, and raised, by `take`."""
        if self._closed or self._next is not None:
            return
        try:
            self._next = OutputPipe(Fifo(self._dir))
        except OSError:
            pass

    def settle(self, pipe: OutputPipe) -> None:
        """A command's FIFO once its command is over: it forwards nothing from now
        on; in the loop's next turn (after its command's reply) its path goes,
        and it is closed at EOF or retired while something still holds it; and
        the next command's is made, if its making failed as this one ran."""
        pipe.detach()
        self._loop.call_soon(self._settle, pipe)

    def _settle(self, pipe: OutputPipe) -> None:
        pipe.retire()
        if self._closed:
            # The shell's end came first: nothing reads a FIFO still held.
            pipe.abandon()
            return
        self._retired = [p for p in self._retired if not p.eof.is_set()]
        if not pipe.eof.is_set():
            self._retired.append(pipe)
        if self._next is None:
            self._make_next()

    def close(self) -> None:
        self._closed = True
        for pipe in self._retired:
            pipe.abandon()
        self._retired.clear()
        if self._next is not None:
            self._next.abandon()
            self._next = None


class StatusChannel:
    """The status FIFO: the running command's record, or None once the shell is
    gone; anything else in it (see `RecordReader`) goes to `on_bad`, once, and
    ends the channel.

    Our own writer keeps it from reading as EOF between the driver's writes,
    so the shell's end comes from its exit (`shell_exited`), not from here."""

    def __init__(
        self,
        path: Path,
        on_record: Callable[[StatusRecord | None], None],
        on_bad: Callable[[BadRecord], None],
    ) -> None:
        os.mkfifo(path, 0o600)
        self.path = path
        self._fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        self._hold = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        self._on_record = on_record
        self._on_bad = on_bad
        self._records = RecordReader()
        self.ended = False
        self._watch = fdio.Watch(self._fd, self._readable)

    def expect(self) -> str:
        """A fresh token for the next command, which its record must carry."""
        # The system's CSPRNG, as for a FIFO's name.
        token = os.urandom(TOKEN_BYTES).hex()
        self._records.expect(token)
        return token

    def _readable(self) -> None:
        self._read_once()

    def _read_once(self) -> bool:
        """One read; whether there may be more."""
        if self.ended:
            return False
        try:
            data = os.read(self._fd, STATUS_READ_BYTES)
        except BlockingIOError:
            return False
        try:
            record = self._records.feed(data)
        except BadRecord as bad:
            self.ended = True
            self._watch.stop()
            self._on_bad(bad)
            return False
        if record is not None:
            self._on_record(record)
        return True

    def shell_exited(self) -> None:
        """Read what the shell wrote before it went, then say it is gone."""
        while self._read_once():
            pass
        self.ended = True
        self._watch.stop()
        self._on_record(None)

    def close(self) -> None:
        """Its fds closed; it forgets its callbacks, the shell's methods, so the
        shell is freed as it is dropped, not by the collector."""
        self.ended = True
        self._watch.close()
        self._on_record = self._on_bad = _ignored
        anyio.notify_closing(self._fd)
        for fd in (self._fd, self._hold):
            os.close(fd)


def _ignored(_: object) -> None:
    """A closed status channel's callback: it reads nothing more."""
