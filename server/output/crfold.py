"""Carriage-return folding for command output (pure), on pipes and PTYs alike.

On a terminal a bare CR moves the cursor back to the start of the line, so
a progress bar that redraws itself 10 000 times shows one line. The text
result mirrors that: CRLF is a line break, and text after a bare CR starts
its line over, so only a line's final state is kept. A line longer than
MAX_LINE_BYTES goes on in whole pieces of that size, to keep memory bounded;
the pieces fall where a byte-by-byte feed would put them, so the output is
the same for every split of the input. A CR is never part of a UTF-8
sequence, so bytes that are not text fold like any others.
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
        if not self._cr and b"\r" not in data:
            # Fast path, the common case on pipes: no CR at all.
            return self._lines(data)
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
            self._pass_on_overflow(out)
        return bytes(out)

    def _lines(self, data: bytes) -> bytes:
        """No CR to fold: whole lines go on, the last one waits (within the bound).
        Written for few copies: this is every chunk of most commands."""
        newline = data.rfind(b"\n")
        if newline < 0:
            return self._bounded(data)
        cut = newline + 1
        if self._line:
            out = b"".join((self._line, memoryview(data)[:cut]))
            self._line.clear()
        else:
            out = data if cut == len(data) else data[:cut]
        if cut == len(data):
            return out
        return out + self._bounded(memoryview(data)[cut:])

    def _bounded(self, data: bytes | memoryview) -> bytes:
        """`data` (no CR, no LF) joins the line; past the bound, whole pieces of
        the bound go on, where a byte-by-byte feed would send them."""
        total = len(self._line) + len(data)
        if total <= self._max:
            self._line += data
            return b""
        taken = (total - 1) // self._max * self._max - len(self._line)
        out = b"".join((self._line, data[:taken]))
        self._line[:] = data[taken:]
        return out

    def _pass_on_overflow(self, out: bytearray) -> None:
        """Past the bound, the line goes on in whole pieces of the bound, so the
        pieces fall at the same bytes whatever the reads were; a later CR
        starts over only what is left."""
        if len(self._line) > self._max:
            # As if byte by byte: at max + 1 bytes, the first max go on.
            overflow = (len(self._line) - 1) // self._max * self._max
            out += self._line[:overflow]
            del self._line[:overflow]

    def pending(self) -> bytes:
        """The current, unfinished line as it stands now."""
        return bytes(self._line)

    def finish(self) -> bytes:
        line = bytes(self._line)
        self._line.clear()
        self._cr = False
        return line
