"""Logging to stderr only: stdout belongs to the protocol.

Nothing the server says may stall it. A stderr nobody reads fills its pipe, and a
write to it would then block the event loop; so what is logged, announced,
exported as a console span or written to `sys.stderr` goes into a bounded queue
that one thread of its own writes out. When the queue is full a line is dropped
and counted (`dropped()`, `logLinesDropped` in `server/stats`), never waited for;
once stderr moves again, a line says how many were lost.
"""

from __future__ import annotations

import atexit
import collections
import functools
import io
import logging
import os
import sys
import threading
import weakref
from typing import TextIO, cast

from bashrpc.protocol import messages
from bashrpc.server import fdio

LOGGER_NAME = "bashrpc"
STDERR_FD = 2
# What may wait for a slow stderr; past it, lines are dropped.
MAX_QUEUED_BYTES = 256 * 1024
# At exit, how long what is queued may take to go out.
EXIT_FLUSH_SECONDS = 1.0


class StderrQueue:
    """Lines for one fd, bounded in bytes, written by a thread of its own
    (started with the first line, a daemon thread: it never holds up an exit)."""

    def __init__(self, fd: int = STDERR_FD, limit: int = MAX_QUEUED_BYTES) -> None:
        self._fd = fd
        self._limit = limit
        self._lines: collections.deque[bytes] = collections.deque()
        # Queued and being written: a line leaves the queue once written.
        self._bytes = 0
        # Text written after its last newline (`put_text`).
        self._partial = ""
        self._ready = threading.Condition()
        self._writer: threading.Thread | None = None
        self.dropped = 0
        # How many of those the notes written so far told of.
        self.told = 0
        os.register_at_fork(after_in_child=functools.partial(_forked, weakref.ref(self)))

    def _restart(self) -> None:
        """In a forked child (the watchdog, a sandbox's listener): the lock may
        be held by a thread the child does not have, whose lines the parent
        writes; the child starts with an empty queue and a writer of its own."""
        self._ready = threading.Condition()
        self._lines.clear()
        self._bytes = 0
        self._partial = ""
        self._writer = None

    def put(self, data: bytes) -> None:
        """Queue `data`, or drop and count it: never blocks."""
        with self._ready:
            if self._bytes + len(data) > self._limit:
                self.dropped += 1
                return
            self._lines.append(data)
            self._bytes += len(data)
            if self._writer is None:
                self._writer = threading.Thread(
                    target=self._write, name="bashrpc-stderr", daemon=True
                )
                self._writer.start()
            self._ready.notify_all()

    def put_text(self, text: str, flush: bool = False) -> None:
        """Queue the whole lines `text` completes (`QueuedText`); the rest waits
        for the next, or goes as it is when `flush`."""
        with self._ready:  # an RLock: `put` takes it again, and lines keep their order
            pending = self._partial + text
            end = len(pending) if flush else pending.rfind("\n") + 1
            self._partial = pending[end:]
            if end:
                self.put(pending[:end].encode(errors="replace"))

    def flush(self, timeout: float) -> bool:
        """Wait up to `timeout` for everything queued to be written; whether it was."""
        with self._ready:
            return self._ready.wait_for(lambda: not self._lines, timeout)

    def _write(self) -> None:
        while True:
            with self._ready:
                self._ready.wait_for(lambda: bool(self._lines))
                data = self._lines[0]
            self._out(data)
            with self._ready:
                self._lines.popleft()
                self._bytes -= len(data)
                lost = self.dropped - self.told
                self._ready.notify_all()
            if lost:
                self._out(f"bashrpc: WARNING {messages.LOG_LINES_DROPPED.format(count=lost)}\n")
                with self._ready:
                    self.told += lost

    def _out(self, data: bytes | str) -> None:
        raw = data.encode(errors="replace") if isinstance(data, str) else data
        try:
            fdio.write_all_blocking(self._fd, raw)
        except OSError:
            pass  # stderr is gone: what is said there is lost, as it would be


def _forked(queue: weakref.ref[StderrQueue]) -> None:
    if (alive := queue()) is not None:
        alive._restart()


class QueuedText(io.TextIOBase):
    """A text stream onto the queue, line-buffered as stderr is: `sys.stderr`
    and writers that take a file (the console span exporter). `print` writes a
    line's text and its newline apart; each entry is whole lines, kept or
    dropped whole and written at once, so no line loses its newline or, in a
    log several processes share (daemons racing for one socket), has another's
    written into it. Text after the last newline waits for the next write or
    `flush`, under the queue's lock, which a forked child starts afresh."""

    def __init__(self, queue: StderrQueue) -> None:
        self._queue = queue

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._queue.put_text(text)
        return len(text)

    def flush(self) -> None:
        self._queue.put_text("", flush=True)


class _QueuedHandler(logging.Handler):
    def __init__(self, queue: StderrQueue) -> None:
        super().__init__()
        self._queue = queue

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._queue.put((self.format(record) + "\n").encode(errors="replace"))
        except Exception:
            self.handleError(record)


STDERR = StderrQueue()


def setup(level: str = "WARNING") -> None:
    handler = _QueuedHandler(STDERR)
    handler.setFormatter(logging.Formatter("bashrpc: %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # What writes to sys.stderr itself (a warning, a traceback, a stray print) too.
    text = sys.stderr = stderr()
    atexit.register(STDERR.flush, EXIT_FLUSH_SECONDS)
    # Run first (the last registered): a line without its newline goes out too.
    atexit.register(text.flush)


def get(name: str) -> logging.Logger:
    return logging.getLogger(f"{LOGGER_NAME}.{name}")


def stderr() -> TextIO:
    """A text stream to stderr that never blocks (through the queue); typed as
    the file it stands in for."""
    return cast(TextIO, QueuedText(STDERR))


def dropped() -> int:
    """Lines dropped so far because stderr was not read fast enough."""
    return STDERR.dropped


def announce(message: str) -> None:
    """Said whatever the log level: what a person needs to use the process (the
    port a listener bound when asked for any)."""
    STDERR.put(f"bashrpc: {message}\n".encode(errors="replace"))
