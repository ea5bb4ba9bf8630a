"""How long an owner's sessions outlive its connections: pure, tested without a clock.

An owner (a `clientId`, or one connection) holds sessions while at least one
connection is attached. When the last one goes, the sessions are kept for
the detach grace; a connection of the same owner arriving within it takes
them up again, and the count starts anew at its end. Past the grace they
are closed as on the end of a stdio server.
"""

from __future__ import annotations


class Grace:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.attached = 0
        self._detached_at: float | None = None

    def attach(self) -> None:
        self.attached += 1
        self._detached_at = None

    def detach(self, now: float) -> None:
        self.attached = max(0, self.attached - 1)
        if self.attached == 0:
            self._detached_at = now

    @property
    def detached_at(self) -> float | None:
        """When its last connection went; None while one is attached."""
        return None if self.attached else self._detached_at

    def deadline(self) -> float | None:
        """When the sessions end if no connection comes back; None while one is attached."""
        if self.attached or self._detached_at is None:
            return None
        return self._detached_at + self.seconds

    def expired(self, now: float) -> bool:
        deadline = self.deadline()
        return deadline is not None and now >= deadline
