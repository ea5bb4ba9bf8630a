"""The control side of one PTY request, from its acceptance until its program is gone.

Requests are processed in order, so a host may write `bash {pty}` and at
once `pty/input` or `pty/resize` (typed-ahead answers, a panel resized),
before the program is spawned. The lane exists from the moment the request
is accepted: a size given early is the size the program starts with, and
writes wait for the program. Writes go one at a time, in the order they were
accepted (two tasks writing one fd would be refused by the event loop), and
a write that waits on a program that does not read holds only its own
request. When the PTY is gone, or never came, every write still waiting
fails with NoSuchPty.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import anyio

from bashrpc.server import errors
from bashrpc.server.pulse import Pulse
from bashrpc.server.runtime.seam.backend import PtyHandle

# What a write sends, given whether the program set application cursor mode:
# computed when its turn comes, so arrows follow the mode set by then.
Encode = Callable[[bool], bytes]


# A screen's rows as they may be shown (secrets redacted), given its width.
ScreenFilter = Callable[[list[str], int], list[str]]


def _as_is(lines: list[str], cols: int) -> list[str]:
    return lines


def _nothing() -> None:
    return None


class PtyLane:
    def __init__(
        self, request_id: Any, cols: int, rows: int, on_close: Callable[[PtyLane], None]
    ) -> None:
        self.request_id = request_id
        self.cols, self.rows = cols, rows
        self.run: PtyHandle | None = None
        self.closed = False
        # Taken by the command that runs for this request (requests may share an id).
        self.claimed = False
        self._on_close = on_close
        # Writes accepted and not yet done, oldest first: the first one writes.
        self._writes: deque[object] = deque()
        self._changed = Pulse()
        # What `pty/screen` shows of the rows: the command's redaction.
        self.screen_filter: ScreenFilter = _as_is
        # Told as each write has gone to the program.
        self._typed: Callable[[], None] = _nothing

    # -- the command's side -----------------------------------------------

    def open(self, run: PtyHandle, typed: Callable[[], None] = _nothing) -> None:
        """The program runs: waiting writes may go; `typed` is told of each, as
        it is written (whatever the program waited for has its answer)."""
        self.run = run
        self._typed = typed
        self._wake()

    def close(self) -> None:
        """The program is gone, or never came (idempotent)."""
        if not self.closed:
            self.closed = True
            self._wake()
            self._on_close(self)

    # -- the control methods' side ----------------------------------------

    def resize(self, cols: int, rows: int) -> None:
        """Now when running, else at spawn; the kernel sends SIGWINCH."""
        self.cols, self.rows = cols, rows
        if self.run is not None and not self.closed:
            self.run.resize(cols, rows)

    def reserve(self, token: object) -> None:
        """A write's place in line, taken when its request is accepted."""
        self._writes.append(token)

    def withdraw(self, token: object) -> None:
        """A write that is done, failed, or will never run gives up its place."""
        if token in self._writes:
            self._writes.remove(token)
            self._wake()

    async def write(self, token: object, encode: Encode) -> int:
        """Write in turn, once the program runs; the bytes written."""
        if token not in self._writes:
            # Its lane is gone; another request with the same id holds this one.
            raise errors.NoSuchPty(self.request_id)
        try:
            while not self.closed and (self.run is None or self._writes[0] is not token):
                await self._changed.wait()
            if self.closed or self.run is None:
                raise errors.NoSuchPty(self.request_id)
            data = encode(self.run.app_cursor)
            try:
                await self.run.write(data)
            except (OSError, anyio.ClosedResourceError):
                # The program closed its terminal, or ended, while this waited.
                raise errors.NoSuchPty(self.request_id) from None
            self._typed()
            return len(data)
        finally:
            self.withdraw(token)

    async def running(self) -> PtyHandle:
        """The program, once spawned; NoSuchPty when it is gone or never came."""
        while not self.closed and self.run is None:
            await self._changed.wait()
        if self.closed or self.run is None:
            raise errors.NoSuchPty(self.request_id)
        return self.run

    def _wake(self) -> None:
        self._changed.fire()
