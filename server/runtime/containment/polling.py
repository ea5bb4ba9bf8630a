"""Waiting for what the kernel does not announce: a process gone, a cgroup emptied.

A SIGKILLed process is usually gone within a millisecond, so the first
checks come quickly and then back off to `POLL_SECONDS`. A fixed 20 ms poll
made every kill (abort, timeout, session close, shutdown) take at least 20 ms.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import TypeVar

import anyio

FIRST_POLL_SECONDS = 0.001
POLL_SECONDS = 0.02

T = TypeVar("T")


def intervals() -> Iterator[float]:
    """The pauses between checks: doubling from the first to the steady one."""
    pause = FIRST_POLL_SECONDS
    while True:
        yield pause
        pause = min(pause * 2, POLL_SECONDS)


async def until(done: Callable[[], bool], timeout: float = math.inf) -> bool:
    """Whether `done()` held before `timeout` seconds passed (it is checked at once)."""
    with anyio.move_on_after(timeout):
        for pause in intervals():
            if done():
                return True
            await anyio.sleep(pause)
    return done()


async def repeat_while(remaining: Callable[[], T], act: Callable[[T], object]) -> None:
    """`act` on what `remaining()` returns (the survivors of a kill, say) until it
    returns nothing. One check a round, and the act gets what that check found."""
    for pause in intervals():
        left = remaining()
        if not left:
            return
        act(left)
        await anyio.sleep(pause)
