"""A job's output in bounded memory, addressed by absolute byte offsets: pure.

Bytes are numbered from 0 as they arrive. The ring keeps the newest
`capacity` of them; what it dropped is counted, so a reader with a cursor
learns exactly which bytes it can no longer have here (the artifact holds
them all) instead of skipping them unawares. Reads are cut on UTF-8
character boundaries, as ACP asks of `outputByteLimit`.
"""

from __future__ import annotations

import msgspec

from bashrpc.server.output import utf8

# Compact only once the buffer is this many times the capacity: O(1) amortized.
_COMPACT_FACTOR = 2


class Slice(msgspec.Struct, frozen=True):
    data: bytes
    # The offset of data[0], and the cursor after it.
    start: int
    end: int
    # Bytes asked for (from the cursor, or by the limit) that the ring no longer holds.
    missed_from: int | None


class OutputRing:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._buf = bytearray()
        # The offset of _buf[0].
        self._base = 0
        self._newlines = 0

    @property
    def total(self) -> int:
        """Bytes ever added: the offset the next one gets."""
        return self._base + len(self._buf)

    @property
    def kept_from(self) -> int:
        """The oldest offset still held."""
        return max(self._base, self.total - self.capacity)

    @property
    def lines(self) -> int:
        """Lines of all the output, a last one without LF counted."""
        unfinished = bool(self._buf) and self._buf[-1:] != b"\n"
        return self._newlines + unfinished

    def add(self, data: bytes) -> None:
        self._newlines += data.count(b"\n")
        self._buf += data
        if len(self._buf) > self.capacity * _COMPACT_FACTOR:
            drop = len(self._buf) - self.capacity
            del self._buf[:drop]
            self._base += drop

    def newest(self, limit: int | None) -> Slice:
        """The newest bytes, at most `limit` (and at most what is kept)."""
        start = self.kept_from
        if limit is not None:
            start = max(start, self.total - limit)
        return self._from(start, None)

    def after(self, cursor: int) -> Slice:
        """Everything from `cursor` on; `missed_from` is set when the ring no longer
        has the bytes just after it. A cursor past the end gets nothing."""
        cursor = min(cursor, self.total)
        if cursor < self.kept_from:
            return self._from(self.kept_from, cursor)
        return self._from(cursor, None)

    def _from(self, start: int, missed_from: int | None) -> Slice:
        index = start - self._base
        begin = utf8.char_start(self._buf, index) if index < len(self._buf) else index
        data = bytes(self._buf[begin:])
        return Slice(data, self._base + begin, self.total, missed_from)
