"""Tasks tied to events: a task group's scope cancelled when an event is set, and
an event set when a task ends."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio


async def then_set(done: anyio.Event, run: Callable[..., Any], *args: Any) -> None:
    """`run(*args)`, then `done` set however it ended."""
    try:
        await run(*args)
    finally:
        done.set()


async def cancel_when(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()
