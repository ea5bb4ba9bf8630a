"""A request's recent `bash/chunk`s, kept so a new connection can resume them; sans-I/O.

The log keeps the chunks as they were sent (same seq, same text), newest
last, bounded in bytes: a resume from a seq it still holds is exact, with no
gap and no duplicate. Older chunks are gone; a resume from before the first
one kept learns how many chunks it missed (`Replay.missed`); the artifact
holds their text.
"""

from __future__ import annotations

import itertools
from collections import deque

import msgspec

# Chunk text kept per request for a resume. While its connection is there, only
# what that connection may not have read yet: the outbox and the socket and
# pipe buffers on the way hold a few MiB.
REPLAY_ATTACHED_MAX_BYTES = 8 * 1024 * 1024
# Once it is cut, also what the command prints while no one is attached.
REPLAY_MAX_BYTES = 32 * 1024 * 1024


class Chunk(msgspec.Struct, frozen=True):
    seq: int
    text: str
    skipped: int
    size: int


class Replay(msgspec.Struct, frozen=True):
    """What a resume after some seq gets: the chunks kept, and how many before them are lost."""

    chunks: list[Chunk]
    missed: int


class ChunkLog:
    def __init__(self, max_bytes: int = REPLAY_MAX_BYTES) -> None:
        # May grow later (a cut connection); what was dropped stays dropped.
        self.max_bytes = max_bytes
        self._chunks: deque[Chunk] = deque()
        self._bytes = 0
        self.next_seq = 0

    def add(self, seq: int, text: str, skipped: int) -> None:
        """Chunks come in seq order, each once."""
        chunk = Chunk(seq, text, skipped, len(text.encode()))
        self._chunks.append(chunk)
        self._bytes += chunk.size
        self.next_seq = seq + 1
        # The newest chunk is always kept, however large.
        while self._bytes > self.max_bytes and len(self._chunks) > 1:
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
