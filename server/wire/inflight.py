"""A request running as a task, as its connection keeps it: by id, cancellable."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import anyio

from protocol.envelope import RequestId


@dataclass(eq=False)
class InFlight:
    """A request running as a task. Cancelling aborts its command gracefully if
    it runs one (the reply then says cancelled), or else cancels its task."""

    id: RequestId | None
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    cancelled: bool = False
    started: bool = False
    finished: bool = False
    _abort: Callable[[], bool] | None = None
    # Run when the request ends, however it ends (see `keep`).
    releases: list[Callable[[], None]] = field(default_factory=list)

    def attach(self, abort: Callable[[], bool]) -> None:
        """A command now runs for this request; a cancel that came first aborts it."""
        self._abort = abort
        if self.cancelled:
            abort()

    def keep(self, release: Callable[[], None]) -> None:
        """Something held for this request, released when it ends, whether or
        not its handler got to use it."""
        self.releases.append(release)

    def cancel(self) -> bool:
        if self.finished:
            return False
        self.cancelled = True
        if self._abort is not None:
            return self._abort()
        if self.started:
            self.scope.cancel()
        return True
