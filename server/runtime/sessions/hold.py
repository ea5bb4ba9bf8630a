"""A session held whole by a `session/reset`, from its start to its answer.

A reset takes the hold before it awaits anything (`take`) and lets go as it
answers (`release`): every request that arrives in between waits (`open`)
and then sees the fresh session; what was there before it is the reset's to
end. A job's start is not in the session's line: from the wait to its entry
in the job table it counts as entering (`entering`), and the reset waits for
it to be in before it ends the session's jobs. Resets of one session follow
each other (`alone`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import anyio

from bashrpc.server.pulse import Pulse


class Hold:
    def __init__(self) -> None:
        self._holders = 0
        self._released = anyio.Event()
        self._released.set()
        self._entering = 0
        self._entered = Pulse()
        self._one_at_a_time = anyio.Lock()

    @property
    def free(self) -> bool:
        """No reset holds the session: `open` would not wait."""
        return not self._holders

    async def open(self) -> bool:
        """Until no reset holds the session (one taken meanwhile is waited for too);
        whether it waited."""
        waited = False
        while self._holders:
            waited = True
            await self._released.wait()
        return waited

    @contextlib.asynccontextmanager
    async def entering(self) -> AsyncIterator[None]:
        """Something that is not a command entering the session (a job's start):
        after any reset, and a reset taken meanwhile waits for it."""
        await self.open()
        self._entering += 1
        try:
            yield
        finally:
            self._entering -= 1
            self._entered.fire()

    def take(self) -> None:
        """Hold the session from now: requests arriving wait, until `release`."""
        if not self._holders:
            self._released = anyio.Event()
        self._holders += 1

    def release(self) -> None:
        self._holders -= 1
        if not self._holders:
            self._released.set()

    @contextlib.asynccontextmanager
    async def alone(self) -> AsyncIterator[None]:
        """Within a `take`: the session to this reset alone (another waits), once
        what was entering is in."""
        async with self._one_at_a_time:
            while self._entering:
                await self._entered.wait()
            yield
