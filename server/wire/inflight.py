"""Requests running as tasks, as their connection keeps them: by id, cancellable."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal, ParamSpec, TypeVar, get_args

import anyio
import anyio.lowlevel

from bashrpc.protocol.envelope import RequestId
from bashrpc.server import errors
from bashrpc.server.transitions import step

P = ParamSpec("P")
T = TypeVar("T")


# A request's life, one pure table (moved by `Flights` and its `InFlight`):
#
#     admitted --start--> running --release--> finished
#        |                   |
#      cancel              cancel
#        v                   v
#     marked --start--> cancelled --release--> finished
#
# A cancel before the start only marks the request; after the release it finds
# nothing (`cancel` says False). A request refused by its method's admission
# check is released unstarted.
State = Literal["admitted", "marked", "running", "cancelled", "finished"]
Event = Literal["start", "cancel", "release"]
STATES: tuple[State, ...] = get_args(State)

TRANSITIONS: dict[tuple[State, Event], State] = {
    ("admitted", "start"): "running",
    ("admitted", "cancel"): "marked",
    ("admitted", "release"): "finished",
    ("marked", "start"): "cancelled",
    ("marked", "cancel"): "marked",
    ("marked", "release"): "finished",
    ("running", "cancel"): "cancelled",
    ("running", "release"): "finished",
    ("cancelled", "cancel"): "cancelled",
    ("cancelled", "release"): "finished",
    ("finished", "cancel"): "finished",
}


@dataclass(eq=False)
class InFlight:
    """A request running as a task. Cancelling aborts its command gracefully if
    it runs one (the reply then says cancelled), or else cancels its task."""

    id: RequestId | None
    # It runs a command, which a cancel aborts (once attached) rather than its task.
    runs_command: bool = False
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    state: State = "admitted"
    # Cancelled by MCP's `notifications/cancelled`: it gets no response at all.
    silent: bool = False
    _abort: Callable[[], bool] | None = None
    # Run when the request ends, however it ends (see `keep`).
    releases: list[Callable[[], None]] = field(default_factory=list)

    @property
    def cancelled(self) -> bool:
        return self.state in ("marked", "cancelled")

    @property
    def started(self) -> bool:
        return self.state in ("running", "cancelled")

    @property
    def finished(self) -> bool:
        return self.state == "finished"

    def move(self, event: Event) -> State:
        self.state = step(TRANSITIONS, self.state, event)
        return self.state

    def attach(self, abort: Callable[[], bool]) -> None:
        """A command now runs for this request; a cancel that came first aborts it."""
        self._abort = abort
        if self.cancelled:
            abort()

    def runs_no_command(self) -> None:
        """It runs no command after all (a background job, an answer of its own):
        a cancel cancels its task, and one that came first does so now, or at
        its start."""
        self.runs_command = False
        if self.state == "cancelled":
            self.scope.cancel()

    async def run(self, handler: Callable[P, Awaitable[T]], *args: P.args, **kw: P.kwargs) -> T:
        """The request's handler, in its started scope: one cancelled before its
        start never runs (a cancel lands only at a checkpoint, after whatever
        the handler would do first)."""
        if self.scope.cancel_called:
            await anyio.lowlevel.checkpoint()
        return await handler(*args, **kw)

    def end(self) -> list[Callable[[], None]]:
        """What it held, to release now; it forgets its command and its releases,
        which reach back to its context: so a finished request is freed as it is
        dropped, not left in a cycle for the collector."""
        releases, self.releases = self.releases, []
        self._abort = None
        return releases

    def keep(self, release: Callable[[], None]) -> None:
        """Something held for this request, released when it ends, whether or
        not its handler got to use it."""
        self.releases.append(release)

    def hand_over(self, release: Callable[[], None]) -> None:
        """Something `keep` held, now held by what outlives the request (a command
        that goes on as a job): not released at its end."""
        if release in self.releases:
            self.releases.remove(release)

    def cancel(self, *, silent: bool = False) -> bool:
        """`silent`: the client wants no response to the request (MCP's cancel)."""
        if self.finished:
            return False
        self.move("cancel")
        self.silent = self.silent or silent
        if self._abort is not None:
            return self._abort()
        if self.started:
            self.scope.cancel()
        return True


class Flights:
    """The requests a connection has in flight, by id: the whole life of one.

    A request's states are the table above, moved here or by the `InFlight`
    it is given:

    - admitted: `admit`, on the reader; refused (ServerBusy) at the limit, so
      the reader never waits and an abort can always be read;
    - running: `start`, as its task enters the flight's cancel scope;
    - finished: `release`, however it ended; what it held is released.

    `cancel` may come in any state before finished: before the start it only
    marks the flight, so a command is aborted as soon as it is attached, and a
    request that runs none is cancelled as it starts.
    Ids may repeat (a client's mistake, or batches), so each id keeps a list.
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._by_id: dict[RequestId | None, list[InFlight]] = {}
        self._count = 0
        # Set when nothing runs any more; made by the first to wait for that, so a
        # request costs no event of its own.
        self._idle: anyio.Event | None = None

    def admit(self, request_id: RequestId | None, *, runs_command: bool = False) -> InFlight:
        if self._count >= self._limit:
            raise errors.ServerBusy
        flight = InFlight(request_id, runs_command)
        self._by_id.setdefault(request_id, []).append(flight)
        self._count += 1
        return flight

    def start(self, flight: InFlight) -> anyio.CancelScope:
        """The scope its task runs in, entered at once: from now on a cancel
        cancels the task (before, it only marks the flight; a marked request
        that runs no command is cancelled here)."""
        if flight.move("start") == "cancelled" and not flight.runs_command:
            flight.scope.cancel()
        return flight.scope

    def release(self, flight: InFlight) -> None:
        flight.move("release")
        for release in flight.end():
            release()
        same = self._by_id.get(flight.id, [])
        same.remove(flight)
        if not same:
            self._by_id.pop(flight.id, None)
        self._count -= 1
        if self._count == 0 and self._idle is not None:
            # One event for each busy spell, so a waiter never holds a stale one.
            self._idle.set()
            self._idle = None

    def cancel(self, request_id: RequestId, *, silent: bool = False) -> bool:
        """Cancel every request in flight with this id; False when there is none."""
        flights = self._by_id.get(request_id, [])
        return any([flight.cancel(silent=silent) for flight in flights])

    def cancel_all(self) -> None:
        for flights in list(self._by_id.values()):
            for flight in flights:
                flight.cancel()

    async def wait_idle(self) -> None:
        """Until nothing is in flight (at once when nothing is)."""
        if self._count == 0:
            await anyio.lowlevel.checkpoint()
            return
        if self._idle is None:
            self._idle = anyio.Event()
        await self._idle.wait()
