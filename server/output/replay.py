"""A request's recent notifications, kept so a new connection can resume them; sans-I/O.

The log keeps the notifications as they were sent (their method and params,
numbered in the order sent, as a command's `bash/chunk`s and `pty/output`s
number themselves), newest last, bounded in bytes: a resume from a seq it
still holds is exact, with no gap and no duplicate. Older ones are gone; a
resume from before the first one kept learns how many it missed
(`Replay.missed`); the artifact holds their text.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable

import msgspec

# Chunk text kept per request for a resume. While its connection is there, only
# what that connection may not have read yet: the outbox and the socket and
# pipe buffers on the way hold a few MiB.
REPLAY_ATTACHED_MAX_BYTES = 8 * 1024 * 1024
# Once it is cut, also what the command prints while no one is attached.
REPLAY_MAX_BYTES = 32 * 1024 * 1024


class Chunk(msgspec.Struct, frozen=True):
    """One notification as sent, and the bytes it holds (its params' JSON)."""

    seq: int
    method: str
    params: msgspec.Struct
    size: int


class Replay(msgspec.Struct, frozen=True):
    """What a resume after some seq gets: the chunks kept, and how many before them are lost."""

    chunks: list[Chunk]
    missed: int


# Told each change in the bytes a log holds (a budget shared by many logs).
Meter = Callable[[int], None]
_json = msgspec.json.Encoder().encode


class ChunkLog:
    def __init__(self, max_bytes: int = REPLAY_MAX_BYTES, meter: Meter | None = None) -> None:
        # May grow later (a cut connection); what was dropped stays dropped.
        self.max_bytes = max_bytes
        self.meter = meter
        self._chunks: deque[Chunk] = deque()
        self._bytes = 0
        self.next_seq = 0

    @property
    def bytes(self) -> int:
        return self._bytes

    def add(self, method: str, params: msgspec.Struct) -> None:
        """The next notification sent, numbered `next_seq`."""
        chunk = Chunk(self.next_seq, method, params, len(_json(params)))
        self._chunks.append(chunk)
        before = self._bytes
        self._bytes += chunk.size
        self.next_seq += 1
        self._drop_until(self.max_bytes)
        if self.meter is not None:
            self.meter(self._bytes - before)

    def trim(self, excess: int) -> None:
        """Give up at least `excess` bytes of the oldest chunks, if it has them."""
        before = self._bytes
        self._drop_until(self._bytes - excess)
        if self.meter is not None and self._bytes != before:
            self.meter(self._bytes - before)

    def _drop_until(self, size: int) -> None:
        # The newest chunk is always kept, however large: a resume from before
        # it learns from it how many it missed.
        while self._bytes > size and len(self._chunks) > 1:
            old = self._chunks.popleft()
            self._bytes -= old.size

    @property
    def bytes_held(self) -> int:
        return self._bytes

    @property
    def first_kept(self) -> int:
        return self._chunks[0].seq if self._chunks else self.next_seq

    def after(self, seq: int) -> Replay:
        """The chunks numbered above `seq` that are kept, and how many wanted ones are not."""
        first = self.first_kept
        skip = max(0, seq + 1 - first)
        return Replay(list(itertools.islice(self._chunks, skip, None)), max(0, first - seq - 1))
