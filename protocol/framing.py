"""Newline-delimited framing, sans-I/O.

Feed bytes in, get whole lines out. Only ``\\n`` splits, so U+2028/U+2029 and
anything else inside a JSON string stay data. A line longer than the limit is
reported as :class:`Oversized` and skipped as it streams past: the framer never
holds more than ``max_line_bytes`` of it.
"""

from __future__ import annotations

import msgspec

DEFAULT_MAX_LINE_BYTES = 16 * 1024 * 1024


class Oversized(msgspec.Struct, frozen=True):
    """A line that exceeded the limit and was discarded."""

    size: int


Frame = bytes | Oversized


class LineFramer:
    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be positive")
        self._max = max_line_bytes
        self._buf = bytearray()
        # Bytes of an oversized line skipped so far; None while not skipping.
        self._skipped: int | None = None

    def feed(self, data: bytes) -> list[Frame]:
        frames: list[Frame] = []
        start = 0
        end = len(data)
        while start < end:
            nl = data.find(b"\n", start)
            if nl < 0:
                self._absorb(data, start, end)
                break
            self._absorb(data, start, nl)
            self._finish_line(frames)
            start = nl + 1
        return frames

    def close(self) -> list[Frame]:
        """End of input: a last line without a trailing newline still counts."""
        frames: list[Frame] = []
        if self._buf or self._skipped is not None:
            self._finish_line(frames)
        return frames

    def _absorb(self, data: bytes, start: int, stop: int) -> None:
        if self._skipped is not None:
            self._skipped += stop - start
            return
        if len(self._buf) + (stop - start) > self._max:
            self._skipped = len(self._buf) + (stop - start)
            self._buf.clear()
            return
        self._buf += data[start:stop]

    def _finish_line(self, frames: list[Frame]) -> None:
        if self._skipped is not None:
            frames.append(Oversized(self._skipped))
            self._skipped = None
            return
        line = bytes(self._buf)
        self._buf.clear()
        if line.endswith(b"\r"):
            line = line[:-1]
        if line.strip():
            frames.append(line)
