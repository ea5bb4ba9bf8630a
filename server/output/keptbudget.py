"""What the requests kept for a resume, and those waiting or running, may hold
across every tenant of a daemon: pure.

Each kept record's chunks and result count against one budget, and so do the
bytes of every request in flight (`hold`): a request that would take the
requests past the budget on their own is refused (OverBudget). When a byte
more would pass it, the records whose connection was cut give way, the one
cut longest ago first: their oldest chunks go (the newest stays, so a resume
from before it is told how many it missed), then, if that is not enough,
finished ones are dropped whole (a resume then learns there is no such
request). Records still attached are counted, never trimmed: their
connection is reading them.

`RecordCount` caps how many records one tenant keeps, whatever their size.
"""

from __future__ import annotations

from typing import Protocol

from bashrpc.server import errors

# All tenants' kept chunks and results together; a cut request alone may keep 32 MiB.
DEFAULT_KEPT_BYTES = 64 * 1024 * 1024
# Records kept per tenant (running or finished, attached or cut).
DEFAULT_MAX_KEPT_REQUESTS = 64


class Kept(Protocol):
    @property
    def finished(self) -> bool: ...

    def trim(self, excess: int) -> None:
        """Free up to `excess` bytes of its oldest chunks (through the budget's `charge`)."""

    def evict(self) -> None:
        """Be dropped whole (its bytes released through `release`)."""


class KeptBudget:
    def __init__(self, max_bytes: int = DEFAULT_KEPT_BYTES) -> None:
        self.max_bytes = max_bytes
        self.used = 0
        # Of `used`: the bytes of requests in flight (waiting for their turn or running).
        self.requests = 0
        # Cut records, the one cut longest ago first.
        self._cut: dict[int, Kept] = {}

    def charge(self, delta: int) -> None:
        """A kept record's bytes changed by `delta`; make room if they are too many."""
        self.used += delta
        if delta > 0 and self.used > self.max_bytes:
            self._make_room()

    def hold(self, size: int) -> None:
        """A request's `size` bytes are held while it is in flight: counted with the
        kept records' (cut ones give way to them as to a chunk); refused, changing
        nothing, when the requests in flight would pass the budget on their own."""
        if self.requests + size > self.max_bytes:
            raise errors.OverBudget(size, self.requests, self.max_bytes)
        self.requests += size
        self.charge(size)

    def drop(self, size: int) -> None:
        """A request held with `hold` has ended."""
        self.requests -= size
        self.used -= size

    def cut(self, record: Kept) -> None:
        """`record`'s connection is gone: it may give way from now on."""
        self._cut.setdefault(id(record), record)

    def release(self, record: Kept, size: int) -> None:
        """`record` is no longer kept; it held `size` bytes."""
        self._cut.pop(id(record), None)
        self.used -= size

    def _make_room(self) -> None:
        for record in list(self._cut.values()):
            if self.used <= self.max_bytes:
                return
            record.trim(self.used - self.max_bytes)
        for record in list(self._cut.values()):
            if self.used <= self.max_bytes:
                return
            if record.finished:
                record.evict()


class RecordCount:
    """How many records a tenant keeps, shared by its clients' `Resumables`."""

    def __init__(self, maximum: int = DEFAULT_MAX_KEPT_REQUESTS) -> None:
        self.maximum = maximum
        self.kept = 0

    @property
    def full(self) -> bool:
        return self.kept >= self.maximum
