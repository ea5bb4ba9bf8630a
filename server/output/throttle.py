"""Rate-limited flushing for streams of notifications.

Output can arrive thousands of times a second; a host wants a steady
trickle. A Throttle calls its flush soon after the first poke, then at most
once per interval while pokes keep coming, and once more at close if
anything is still pending. An urgent poke (a full batch is waiting) cuts the
interval short, so a fast command streams at the client's pace instead of
one batch per interval. The flush runs in the throttle's own task.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

import anyio

from bashrpc.server import clock


class Owner(Protocol):
    """Where a helper task runs: a task group, or a connection's request workers
    (`wire/workers.py`), which start none while one of theirs waits for work."""

    def start_soon(self, func: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> object: ...


class Throttle:
    """Its pump task starts on the first poke, in its owner, so a
    command that prints nothing costs no task at all."""

    def __init__(
        self,
        flush: Callable[[], Awaitable[None]],
        interval: float,
        owner: Owner,
    ) -> None:
        # None once closed: it is mostly the owner's method, which the owner
        # then frees as it is dropped, not the collector.
        self._flush: Callable[[], Awaitable[None]] | None = flush
        self._interval = interval
        self._owner = owner
        # Events are made when the pump starts: most commands never start it.
        self._wake: anyio.Event | None = None
        self._done: anyio.Event | None = None
        self._urgent: anyio.Event | None = None
        self._dirty = False
        # An urgent poke came since the last flush: flush without waiting.
        self._hurry = False
        # When the interval since the last flush is over (anyio's clock).
        self._due = 0.0
        self._closing = False

    def poke(self, urgent: bool = False) -> None:
        self._dirty = True
        if urgent:
            self._hurry = True
            if self._urgent is not None:
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
                    await self._interval_over()
                    self._dirty = self._hurry = False
                    assert self._flush is not None, "flushed only before its close"
                    await self._flush()
                    self._due = clock.now() + self._interval
                    continue
                if self._closing:
                    return
                self._wake = anyio.Event()
                await self._wake.wait()
        finally:
            self._done.set()

    async def _interval_over(self) -> None:
        """Until the interval since the last flush is over, or an urgent poke or
        close cuts it short. A stream that is always urgent (a flood) never
        arms a timer or a cancel scope here: one less of each per batch."""
        if self._hurry or self._closing:
            return
        wait = self._due - clock.now()
        if wait <= 0:
            return
        self._urgent = anyio.Event()
        with anyio.move_on_after(wait):
            await self._urgent.wait()
        self._urgent = None

    async def close(self) -> None:
        """Flush what is pending and wait for the pump to finish, whatever cancels
        the caller meanwhile (an abort, the deadline): every notification of a
        request precedes its reply. With no pump, nothing waits."""
        self._closing = True
        if self._urgent is not None:
            self._urgent.set()
        if self._wake is not None and self._done is not None:
            self._wake.set()
            with anyio.CancelScope(shield=True):
                await self._done.wait()
        self._flush = None
