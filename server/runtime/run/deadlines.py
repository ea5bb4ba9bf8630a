"""The running commands' deadlines, kept under one timer of the event loop.

A cancel scope's own deadline arms a timer of the loop as the scope is entered
and disarms it as the scope is left: under uvloop, a libuv timer made, started,
stopped and closed for every command with a timeout, which is every tool call
(3% of its round trip, `bench.ab`). Here the deadlines of the commands running
now are kept in one place, under one timer armed for the earliest of them. A
command that ends takes its own out and leaves the timer be: commands whose
timeouts are alike each come due after the one before, so in a steady stream
the timer is armed about once per timeout, and when it fires for deadlines
already gone it only arms itself for the next one, if any.
"""

from __future__ import annotations

import asyncio
import math

import anyio

from bashrpc.server import clock


class Deadlines:
    def __init__(self) -> None:
        # The scope each running command runs in, and when it is due.
        self._due: dict[anyio.CancelScope, float] = {}
        self._timer: asyncio.TimerHandle | None = None
        # When the timer fires; inf: none is armed.
        self._at = math.inf

    def __len__(self) -> int:
        return len(self._due)

    @property
    def armed_for(self) -> float:
        """When the timer fires next; inf when none is armed."""
        return self._at

    def add(self, scope: anyio.CancelScope, deadline: float) -> None:
        """`scope` is cancelled at `deadline` (the loop's clock), unless it is
        discarded first. The caller has entered it."""
        self._due[scope] = deadline
        if deadline < self._at:
            self._arm(deadline)

    def discard(self, scope: anyio.CancelScope) -> None:
        """Its command is over: never cancelled from here."""
        self._due.pop(scope, None)

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_at(when, self._fire)
        self._at = when

    def _fire(self) -> None:
        """Cancel every scope that is due (a timer may fire a little early: one
        not due yet is looked at again), then arm for the next."""
        self._timer, self._at = None, math.inf
        now = clock.now()
        for scope, deadline in list(self._due.items()):
            if deadline <= now:
                del self._due[scope]
                scope.cancel()
        if self._due:
            self._arm(min(self._due.values()))
