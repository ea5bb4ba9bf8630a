"""A pulse: wakes whoever waits for the next change, then re-arms.

An `anyio.Event` cannot be cleared, so waking every waiter of a change and
letting the next waiter wait for the one after is "set it, then make a new
one". Waiters check their condition before `wait`, with no checkpoint in
between, so a pulse with nobody waiting is never missed.

The event is made by the first waiter, so a fire with nobody waiting (a
writer's every line, a reader's every chunk) costs one attribute test.

Not a pulse: an event that stands for a state reached (`Flights`' idle, set
when nothing runs any more), or one whose existence says a task runs
(`Throttle`'s wake).
"""

from __future__ import annotations

import anyio


class Pulse:
    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event: anyio.Event | None = None

    def fire(self) -> None:
        """Wake every task waiting now; a later `wait` waits for the next one."""
        event, self._event = self._event, None
        if event is not None:
            event.set()

    async def wait(self) -> None:
        if self._event is None:
            self._event = anyio.Event()
        await self._event.wait()
