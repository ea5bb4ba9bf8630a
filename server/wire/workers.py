"""Long-lived request tasks: a request, or a helper of one (a stream's pump), is
handed to one waiting for work instead of a task spawned for it.

Since anyio 4.14 a spawn makes a handle, a cancel scope and a wrapper coroutine
for its task: with its end, about 15 µs a request, against 6 before. A hand-over
to a task already waiting costs one event. Each worker is a task of the
connection's requests group, which owns and cancels it, and runs one thing at a
time: a request in its own cancel scope (its flight's), a helper in the group's,
as a task spawned for it would. When none waits, a new one starts; one that
finishes when `keep` others already wait ends. It starts them as a task group
does (`start_soon`), so it is an `Owner` of streams.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.abc

# Workers that wait for the next request, at most: a connection's requests come
# one or two at a time, and a burst's extra workers end as it does.
KEEP_IDLE = 4

Run = Callable[..., Awaitable[Any]]
Work = tuple[Run, tuple[Any, ...]]


class _Waiting:
    """A worker between requests: what it is given next."""

    def __init__(self) -> None:
        self.given = asyncio.Event()
        self.work: Work | None = None

    def give(self, work: Work) -> None:
        self.work = work
        self.given.set()


class Workers:
    def __init__(self, group: anyio.abc.TaskGroup, keep: int = KEEP_IDLE) -> None:
        self._group = group
        self._keep = keep
        self._waiting: list[_Waiting] = []

    @property
    def idle(self) -> int:
        """How many wait for a request now."""
        return len(self._waiting)

    def start_soon(self, run: Run, *args: Any) -> None:
        """`run(*args)` in a worker: one that waits, or a new one."""
        if self._waiting:
            self._waiting.pop().give((run, args))
        else:
            self._group.start_soon(self._work, (run, args))

    async def _work(self, work: Work) -> None:
        while True:
            run, args = work
            await run(*args)
            # Nothing of the request is held while waiting for the next.
            del run, args, work
            if len(self._waiting) >= self._keep:
                return
            work = await self._next()

    async def _next(self) -> Work:
        waiting = _Waiting()
        self._waiting.append(waiting)
        try:
            await waiting.given.wait()
        except anyio.get_cancelled_exc_class():
            if waiting.work is None:
                # Its group ends: it is never given a request now.
                self._waiting.remove(waiting)
                raise
            # Given one as its group was cancelled: it still runs, as a task spawned
            # for it would, up to its first checkpoint, so its flight is released.
            run, args = waiting.work
            await run(*args)
            raise
        assert waiting.work is not None
        return waiting.work
