"""Carriage-return folding for terminal output (pure).

On a terminal a bare CR moves the cursor back to the start of the line, so
a progress bar that redraws itself 10 000 times shows one line. The text
result mirrors that: CRLF is a line break, and text after a bare CR starts
its line over, so only a line's final state is kept. A line longer than
MAX_LINE_BYTES is passed on unfolded, to keep memory bounded.
"""

from __future__ import annotations

MAX_LINE_BYTES = 64 * 1024


class CarriageReturnFolder:
    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self._max = max_line_bytes
        self._line = bytearray()
        # A CR was the last byte seen: the next byte decides CRLF or redraw.
        self._cr = False

    def feed(self, data: bytes) -> bytes:
        if not self._cr and not data.endswith(b"\r") and data.count(b"\r") == data.count(b"\r\n"):
            # Fast path, the common case on a terminal: every CR ends a line.
            return self._lines(data.replace(b"\r\n", b"\n"))
        out = bytearray()
        for index, part in enumerate(data.split(b"\r")):
            if index:
                self._cr = True
            if not part:
                continue
            if self._cr:
                self._cr = False
                if part[0] != 0x0A:  # not CRLF: the line is redrawn from the start
                    self._line.clear()
            newline = part.rfind(b"\n")
            if newline >= 0:
                out += self._line
                out += part[: newline + 1]
                self._line[:] = part[newline + 1 :]
            else:
                self._line += part
            if len(self._line) > self._max:
                out += self._line
                self._line.clear()
        return bytes(out)

    def _lines(self, data: bytes) -> bytes:
        newline = data.rfind(b"\n")
        if newline < 0:
            self._line += data
            out = b""
        else:
            out = bytes(self._line) + data[: newline + 1]
            self._line[:] = data[newline + 1 :]
        if len(self._line) > self._max:
            out += bytes(self._line)
            self._line.clear()
        return out

    def pending(self) -> bytes:
        """The current, unfinished line as it stands now."""
        return bytes(self._line)

    def finish(self) -> bytes:
        line = bytes(self._line)
        self._line.clear()
        self._cr = False
        return line
