"""Rate-limited flushing for streams of notifications.

Output can arrive thousands of times a second; a host wants a steady
trickle. A Throttle calls its flush soon after the first poke, then at most
once per interval while pokes keep coming, and once more at close if
anything is still pending. An urgent poke (a full batch is waiting) cuts the
interval short, so a fast command streams at the client's pace instead of
one batch per interval. The flush runs in the throttle's own task.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
import anyio.abc


class Throttle:
    """Its pump task starts on the first poke, in the owner's task group, so a
    command that prints nothing costs no task at all."""

    def __init__(
        self,
        flush: Callable[[], Awaitable[None]],
        interval: float,
        owner: anyio.abc.TaskGroup,
    ) -> None:
        self._flush = flush
        self._interval = interval
        self._owner = owner
        # Events are made when the pump starts: most commands never start it.
        self._wake: anyio.Event | None = None
        self._done: anyio.Event | None = None
        self._urgent: anyio.Event | None = None
        self._dirty = False
        self._closing = False

    def poke(self, urgent: bool = False) -> None:
        self._dirty = True
        if urgent and self._urgent is not None:
            self._urgent.set()
        if self._wake is not None:
            self._wake.set()
        elif not self._closing:
            self._wake = anyio.Event()
            self._done = anyio.Event()
            self._owner.start_soon(self._pump)

    async def _pump(self) -> None:
        assert self._done is not None
        try:
            while True:
                if self._dirty:
                    self._dirty = False
                    await self._flush()
                    if not self._closing:
                        self._urgent = anyio.Event()
                        with anyio.move_on_after(self._interval):
                            await self._urgent.wait()
                        self._urgent = None
                    continue
                if self._closing:
                    return
                self._wake = anyio.Event()
                await self._wake.wait()
        finally:
            self._done.set()

    async def close(self) -> None:
        """Flush what is pending and wait for the pump to finish."""
        self._closing = True
        if self._urgent is not None:
            self._urgent.set()
        if self._wake is not None and self._done is not None:
            self._wake.set()
            await self._done.wait()
