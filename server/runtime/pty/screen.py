"""The rendered terminal viewport, from a VT emulator fed the raw PTY stream.

pyte does the emulation, in pure Python, at well under 1 MB/s. Feeding it
every byte would make a chatty command on a PTY crawl, so the screen is
rendered on demand: raw output is kept (the last REPLAY_BYTES of it) and fed
to the emulator only when someone asks for the screen, on a worker thread. Up to that much
unseen output is replayed exactly; past it, the emulator starts over from
the newest REPLAY_BYTES, which holds the current screen of any program that
redraws or scrolls. The application-cursor mode that arrow keys depend on
is tracked on every byte, with a regex, since it must never be stale.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

import anyio

from bashrpc.server.runtime.seam.backend import Snapshot

REPLAY_BYTES = 256 * 1024
# DEC private mode set/reset: ESC [ ? Pm h / l. Mode 1 is DECCKM.
_PRIVATE_MODE = re.compile(rb"\x1b\[\?([0-9;]*)([hl])")
# A sequence cut at a read boundary is at most this long.
_MODE_CARRY_BYTES = 32


class TerminalScreen:
    """Fed on the event loop's thread; rendered on a worker thread, one render
    at a time (the caller holds `lock`), so a long replay never stalls the loop."""

    def __init__(self, cols: int, rows: int) -> None:
        self._cols, self._rows = cols, rows
        self._unseen = bytearray()
        self._overflowed = False
        self._screen: Any = None
        self._stream: Any = None
        self._carry = b""
        self.app_cursor = False
        self.lock = anyio.Lock()

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
        """Takes effect at the next render, after the output sent before it."""
        self._cols, self._rows = cols, rows

    def take(self) -> Callable[[], Snapshot]:
        """What was fed so far (taken on the loop's thread), as a render to run off it."""
        unseen, overflowed = bytes(self._unseen), self._overflowed
        self._unseen.clear()
        self._overflowed = False
        cols, rows = self._cols, self._rows

        def render() -> Snapshot:
            return self._render(unseen, overflowed, cols, rows)

        return render

    def _render(self, unseen: bytes, overflowed: bool, cols: int, rows: int) -> Snapshot:
        if self._screen is None or overflowed:
            # Imported here: only PTY commands need it, and startup time matters.
            import pyte

            self._screen = _screen_class()(cols, rows)
            self._stream = pyte.ByteStream(self._screen)
        if unseen:
            self._stream.feed(unseen)
        screen = self._screen
        if (screen.columns, screen.lines) != (cols, rows):
            screen.resize(lines=rows, columns=cols)
        return Snapshot(
            cols=screen.columns,
            rows=screen.lines,
            lines=[line.rstrip() for line in screen.display],
            cursor_x=screen.cursor.x,
            cursor_y=screen.cursor.y,
        )


@functools.cache
def _screen_class() -> Any:
    """pyte's screen, minus its one crash: pyte hands `CSI ? Ps m` (an xterm
    query of a key mode, which vim sends) to the rendition handler with `private`,
    which that handler does not take. It sets no rendition, so it is dropped."""
    # Imported here: only PTY commands need it, and startup time matters.
    import pyte

    class Screen(pyte.Screen):
        def select_graphic_rendition(self, *attrs: int, private: bool = False) -> None:
            if not private:
                super().select_graphic_rendition(*attrs)

    return Screen
