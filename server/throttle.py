"""Rate-limited flushing for streams of notifications.

Output can arrive thousands of times a second; a host wants a steady
trickle. A Throttle calls its flush soon after the first poke, then at most
once per interval while pokes keep coming, and once more at close if
anything is still pending. The flush runs in the throttle's own task, so a
slow client delays notifications, never the command.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio


class Throttle:
    def __init__(self, flush: Callable[[], Awaitable[None]], interval: float) -> None:
        self._flush = flush
        self._interval = interval
        self._wake = anyio.Event()
        self._dirty = False
        self._closing = False
        self._done = anyio.Event()

    def poke(self) -> None:
        self._dirty = True
        self._wake.set()

    async def run(self) -> None:
        """The pump; ends once `close` was called and the last flush is done."""
        try:
            while True:
                await self._wake.wait()
                self._wake = anyio.Event()
                if self._dirty:
                    self._dirty = False
                    await self._flush()
                    if not self._closing:
                        await anyio.sleep(self._interval)
                        continue
                if self._closing and not self._dirty:
                    return
        finally:
            self._done.set()

    async def close(self) -> None:
        self._closing = True
        self._wake.set()
        await self._done.wait()
