"""A session's line of commands (pure): one runs, the others wait in arrival order.

A session has one shell, and its state (directory, variables) is what the
commands before left; so its commands take turns. The line knows only who
holds the turn and who waits: the waiting itself is the caller's (see
`Session.turn`). Whoever leaves, running or still waiting, is out of line,
and when the one running leaves, the first waiting gets the turn.
"""

from __future__ import annotations

from collections import deque
from typing import Generic, TypeVar

from bashrpc.server import errors

T = TypeVar("T")

# Commands one session may hold waiting; beyond, a request is refused (-32003),
# as beyond the requests a connection may have in flight.
MAX_WAITING_COMMANDS = 256


class CommandLine(Generic[T]):
    def __init__(self, limit: int = MAX_WAITING_COMMANDS) -> None:
        self._limit = limit
        self.running: T | None = None
        self._waiting: deque[T] = deque()

    @property
    def busy(self) -> bool:
        return self.running is not None

    @property
    def waiting(self) -> list[T]:
        """Those waiting, first in line first."""
        return list(self._waiting)

    def join(self, item: T) -> bool:
        """Whether `item` runs now; else it waits behind the others (ServerBusy when full)."""
        if self.running is None:
            self.running = item
            return True
        if len(self._waiting) >= self._limit:
            raise errors.ServerBusy
        self._waiting.append(item)
        return False

    def leave(self, item: T) -> T | None:
        """`item` is done, or gives up waiting: the one whose turn it now is, if
        that changed."""
        if item is self.running:
            self.running = self._waiting.popleft() if self._waiting else None
            return self.running
        try:
            self._waiting.remove(item)
        except ValueError:
            pass
        return None
