"""The rendered terminal viewport, from a VT emulator fed the raw PTY stream.

pyte does the emulation, in pure Python, at well under 1 MB/s. Feeding it
every byte would make a chatty command on a PTY crawl, so the screen is
rendered on demand: raw output is kept (the last REPLAY_BYTES of it) and fed
to the emulator only when someone asks for the screen. Up to that much
unseen output is replayed exactly; past it, the emulator starts over from
the newest REPLAY_BYTES, which holds the current screen of any program that
redraws or scrolls. The application-cursor mode that arrow keys depend on
is tracked on every byte, with a regex, since it must never be stale.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

REPLAY_BYTES = 256 * 1024
# DEC private mode set/reset: ESC [ ? Pm h / l. Mode 1 is DECCKM.
_PRIVATE_MODE = re.compile(rb"\x1b\[\?([0-9;]*)([hl])")
# A sequence cut at a read boundary is at most this long.
_MODE_CARRY_BYTES = 32


@dataclass(frozen=True, slots=True)
class Snapshot:
    cols: int
    rows: int
    lines: list[str]
    cursor_x: int
    cursor_y: int


class TerminalScreen:
    def __init__(self, cols: int, rows: int) -> None:
        self._cols, self._rows = cols, rows
        self._unseen = bytearray()
        self._overflowed = False
        self._screen: Any = None
        self._stream: Any = None
        self._carry = b""
        self.app_cursor = False

    def feed(self, data: bytes) -> None:
        if b"\x1b[?" in self._carry + data[:_MODE_CARRY_BYTES] or b"\x1b[?" in data:
            for match in _PRIVATE_MODE.finditer(self._carry + data):
                if b"1" in match.group(1).split(b";"):
                    self.app_cursor = match.group(2) == b"h"
        self._carry = data[-_MODE_CARRY_BYTES:]
        self._unseen += data
        if len(self._unseen) > REPLAY_BYTES:
            del self._unseen[: len(self._unseen) - REPLAY_BYTES]
            self._overflowed = True

    def resize(self, cols: int, rows: int) -> None:
        self._sync()
        self._cols, self._rows = cols, rows
        self._screen.resize(lines=rows, columns=cols)

    def _sync(self) -> None:
        if self._screen is None or self._overflowed:
            # Imported here: only PTY commands need it, and startup time matters.
            import pyte

            self._screen = pyte.Screen(self._cols, self._rows)
            self._stream = pyte.ByteStream(self._screen)
            self._overflowed = False
        if self._unseen:
            self._stream.feed(bytes(self._unseen))
            self._unseen.clear()

    def snapshot(self) -> Snapshot:
        self._sync()
        screen = self._screen
        return Snapshot(
            cols=screen.columns,
            rows=screen.lines,
            lines=[line.rstrip() for line in screen.display],
            cursor_x=screen.cursor.x,
            cursor_y=screen.cursor.y,
        )
