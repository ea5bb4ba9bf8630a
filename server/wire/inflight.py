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

    def attach(self, abort: Callable[[], bool]) -> None:
        """A command now runs for this request; a cancel that came first aborts it."""
        self._abort = abort
        if self.cancelled:
            abort()

    def cancel(self) -> bool:
        if self.finished:
            return False
        self.cancelled = True
        if self._abort is not None:
            return self._abort()
        if self.started:
            self.scope.cancel()
        return True
