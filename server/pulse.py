"""A pulse: wakes whoever waits for the next change, then re-arms.

An `anyio.Event` cannot be cleared, so waking every waiter of a change and
letting the next waiter wait for the one after is "set it, then make a new
one". Waiters check their condition before `wait`, with no checkpoint in
between, so a pulse with nobody waiting is never missed.
"""

from __future__ import annotations

import anyio


class Pulse:
    def __init__(self) -> None:
        self._event = anyio.Event()

    def fire(self) -> None:
        """Wake every task waiting now; a later `wait` waits for the next one."""
        event, self._event = self._event, anyio.Event()
        event.set()

    async def wait(self) -> None:
        await self._event.wait()
