"""When an idle daemon exits: pure, so the rule is tested without a clock.

The daemon is idle while it holds nothing a client could come back for (no
connection, no session left); it exits once that has lasted `seconds`. Any
connection or session restarts the count from its end.
"""

from __future__ import annotations


class IdleClock:
    def __init__(self, seconds: float | None, now: float) -> None:
        # None: never exit for idleness (`--stay`).
        self.seconds = seconds
        self._idle_since: float | None = now

    def note(self, now: float, holding: int) -> None:
        """What the daemon holds at `now`: connections plus sessions kept for one."""
        if holding:
            self._idle_since = None
        elif self._idle_since is None:
            self._idle_since = now

    def expired(self, now: float) -> bool:
        if self.seconds is None or self._idle_since is None:
            return False
        return now - self._idle_since >= self.seconds
