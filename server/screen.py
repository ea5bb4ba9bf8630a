"""The rendered terminal viewport, from a VT emulator fed the raw PTY stream.

pyte does the emulation. Hosts without a terminal widget can show what the
program shows, and the keys encoder asks it whether the program switched
on application-cursor mode.
"""

from __future__ import annotations

from dataclasses import dataclass

# pyte keeps DEC private modes shifted left by 5 bits.
_DECCKM = 1 << 5


@dataclass(frozen=True, slots=True)
class Snapshot:
    cols: int
    rows: int
    lines: list[str]
    cursor_x: int
    cursor_y: int


class TerminalScreen:
    def __init__(self, cols: int, rows: int) -> None:
        # Imported here: only PTY commands need it, and startup time matters.
        import pyte

        self._screen = pyte.Screen(cols, rows)
        self._stream = pyte.ByteStream(self._screen)

    def feed(self, data: bytes) -> None:
        self._stream.feed(data)

    def resize(self, cols: int, rows: int) -> None:
        self._screen.resize(lines=rows, columns=cols)

    @property
    def app_cursor(self) -> bool:
        return _DECCKM in self._screen.mode

    def snapshot(self) -> Snapshot:
        screen = self._screen
        return Snapshot(
            cols=screen.columns,
            rows=screen.lines,
            lines=[line.rstrip() for line in screen.display],
            cursor_x=screen.cursor.x,
            cursor_y=screen.cursor.y,
        )
