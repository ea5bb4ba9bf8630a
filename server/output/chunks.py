"""Streaming output as notifications: text for `bash/chunk`, raw bytes for `pty/output`.

The first text goes out at once, then at most one notification per interval,
or sooner when a full batch is waiting. A client that keeps reading loses
nothing: past MAX_PENDING_BYTES of text not yet sent, the command's output is
no longer read (the command waits, as it would on a full pipe) until the
client catches up. Only a client that takes nothing for CLIENT_STALL_SECONDS
loses text: the oldest pending text is skipped, with a notice, until it reads
again. The result and the artifact hold everything either way.
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable

import anyio

from bashrpc.protocol import messages
from bashrpc.server.output import utf8
from bashrpc.server.output.throttle import Owner, Throttle
from bashrpc.server.pulse import Pulse

CHUNK_INTERVAL_SECONDS = 0.02
MAX_PENDING_BYTES = 1024 * 1024
# Pending text worth a notification at once, without waiting out the interval; also
# the most another request's reply waits for, behind a chunk already begun.
FLUSH_BYTES = 64 * 1024
CLIENT_STALL_SECONDS = 2.0
# Where the producer cannot be paused (a command's last output, read after it
# ended), pending text is still bounded: beyond this many times the cap, skip.
HARD_CAP_FACTOR = 4
# Raw terminal bytes cannot take a notice: past this many not yet sent, the
# oldest are dropped (counted in the next `pty/output`'s `skipped`), and a host
# that fell behind resyncs from pty/screen.
MAX_PENDING_RAW_BYTES = 1024 * 1024


class ChunkStream:
    """Sanitized UTF-8 in, coalesced `bash/chunk` texts out, in order."""

    def __init__(
        self,
        emit: Callable[[int, str, int], Awaitable[None]],
        owner: Owner,
        interval: float = CHUNK_INTERVAL_SECONDS,
        max_pending: int = MAX_PENDING_BYTES,
        stall_seconds: float = CLIENT_STALL_SECONDS,
    ) -> None:
        self._emit = emit
        self._max_pending = max_pending
        self._flush_bytes = min(FLUSH_BYTES, max_pending)
        self._stall_seconds = stall_seconds
        self._pending = bytearray()
        self._skipped = 0
        self._seq = 0
        # Set while the client takes nothing: then text is skipped, not waited for.
        self._stalled = False
        # Fired as each chunk goes out: what a producer waiting for room waits on.
        self._progress = Pulse()
        self._throttle = Throttle(self._send, interval, owner)

    def push(self, data: bytes) -> None:
        if not data:
            return
        self._pending += data
        size = len(self._pending)
        if size > self._max_pending and (
            self._stalled or size > HARD_CAP_FACTOR * self._max_pending
        ):
            self._skip()
        self._throttle.poke(urgent=len(self._pending) >= self._flush_bytes)

    @property
    def backlogged(self) -> bool:
        """The producer should wait (see `wait_for_room`)."""
        return len(self._pending) > self._max_pending and not self._stalled

    async def wait_for_room(self) -> None:
        """Until the client has taken the backlog, or has stalled (then skip)."""
        while self.backlogged:
            sent = self._seq
            with anyio.move_on_after(self._stall_seconds):
                await self._progress.wait()
            if self._seq == sent:
                self._stalled = True
                self._skip()

    def _skip(self) -> None:
        """Drop the oldest pending text, keeping the newest half, on a character boundary."""
        cut = utf8.char_start(self._pending, len(self._pending) - self._max_pending // 2)
        self._skipped += cut
        del self._pending[:cut]

    async def _send(self) -> None:
        """Send what is pending, a batch per notification, so no one message is huge."""
        while self._pending:
            cut = utf8.char_start(self._pending, min(len(self._pending), self._flush_bytes))
            # Decoded in place: a slice of a bytearray would be one more copy. Bytes
            # that are not UTF-8 stay exact as lone surrogates (`paths.to_wire`).
            with memoryview(self._pending) as pending:
                text = str(pending[:cut], "utf-8", "surrogateescape")
            del self._pending[:cut]
            skipped = self._skipped
            if skipped:
                text = messages.NOTICE_CHUNKS_SKIPPED.format(count=skipped) + text
                self._skipped = 0
            await self._emit(self._seq, text, skipped)
            self._seq += 1
            self._stalled = False
            self._progress.fire()

    async def close(self) -> None:
        """Send what is pending and wait until it is queued."""
        await self._throttle.close()


class RawStream:
    """Raw PTY bytes, coalesced like text chunks, sent base64-encoded and
    numbered from 0 (a resume replays them by number), each with the count of
    bytes dropped just before it."""

    def __init__(
        self,
        emit: Callable[[int, str, int], Awaitable[None]],
        owner: Owner,
        interval: float = CHUNK_INTERVAL_SECONDS,
        max_pending: int = MAX_PENDING_RAW_BYTES,
    ) -> None:
        self._emit = emit
        self._max_pending = max_pending
        self._pending = bytearray()
        self._skipped = 0
        self._seq = 0
        self._throttle = Throttle(self._send, interval, owner)

    def push(self, data: bytes) -> None:
        self._pending += data
        over = len(self._pending) - self._max_pending
        if over > 0:
            del self._pending[:over]
            self._skipped += over
        self._throttle.poke()

    async def _send(self) -> None:
        if not self._pending:
            return
        data = base64.b64encode(self._pending).decode("ascii")
        self._pending.clear()
        skipped, self._skipped = self._skipped, 0
        seq, self._seq = self._seq, self._seq + 1
        await self._emit(seq, data, skipped)

    async def close(self) -> None:
        await self._throttle.close()
