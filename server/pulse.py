"""A pulse: wakes whoever waits for the next change, then re-arms.

Waking every waiter of a change and letting the next waiter wait for the one
after is "set the event, then make a new one". Waiters check their condition
before `wait`, with no checkpoint in between, so a pulse with nobody waiting
is never missed.

The event is made by the first waiter, so a fire with nobody waiting (a
writer's every line, a reader's every chunk) costs one attribute test. It is
asyncio's own: anyio's is the same event behind a backend lookup as it is
made, and every command waits on a pulse twice.

Not a pulse: an event that stands for a state reached (`Flights`' idle, set
when nothing runs any more), or one whose existence says a task runs
(`Throttle`'s wake).
"""

from __future__ import annotations

import asyncio


class Pulse:
    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event: asyncio.Event | None = None

    def fire(self) -> None:
        """Wake every task waiting now; a later `wait` waits for the next one."""
        event, self._event = self._event, None
        if event is not None:
            event.set()

    async def wait(self) -> None:
        if self._event is None:
            self._event = asyncio.Event()
        await self._event.wait()
