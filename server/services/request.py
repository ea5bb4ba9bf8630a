"""One recipe for a command request, whichever surface it came in on: `bash`
(on pipes or a PTY), a `tools/call` of the `bash` tool, and the background
starts both may ask for.

A surface turns its params into what it `Planned`: an answer it already has
(`Answer`), a job to start (`Background`), or a command (`Command`: its spec,
and how the surface's notifications and reply look). `serve` does the rest
the same for all: the resumable record (the notifications the request sends,
as sent, for a `bash/attach` elsewhere to replay), the cancel hookup (a cancel
of the request, or an abort from another connection of its client, aborts
the command), the streaming (every notification before the reply), and the
finish (the record ends with what a resume returns).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Generic, Protocol, TypeVar

import msgspec

from bashrpc.protocol.methods import BashResult
from bashrpc.server.output.throttle import Owner
from bashrpc.server.services import commands
from bashrpc.server.services.commands import CommandService, CommandSpec
from bashrpc.server.services.outcome import Outcome
from bashrpc.server.services.resumable import EVERY, Logged, Resumable, Resumables
from bashrpc.server.services.streams import ListenerFactory, Notify

R = TypeVar("R")


class Flight(commands.Flight, Protocol):
    """The request in flight on its connection."""

    def cancel(self) -> bool: ...

    def runs_no_command(self) -> None: ...

    def hand_over(self, release: Callable[[], None]) -> None: ...


class Caller(Protocol):
    """The request as its connection runs it (a surface's `RequestContext`)."""

    @property
    def id(self) -> Any: ...

    @property
    def flight(self) -> Flight | None: ...

    # The connection, as the records know it: an identity.
    @property
    def connection(self) -> object: ...

    @property
    def tasks(self) -> Owner: ...

    async def notify(self, method: str, params: msgspec.Struct) -> None: ...


class Services(Protocol):
    @property
    def commands(self) -> CommandService: ...

    @property
    def resumables(self) -> Resumables | None: ...


class Answer(msgspec.Struct, Generic[R], frozen=True):
    """Answered without running anything (an intercepted tool call)."""

    result: R


class Background(msgspec.Struct, Generic[R], frozen=True):
    """A background job: no command of the session, so a cancel cancels the
    request; it sends no notification, and a resume gets its reply."""

    method: str
    session_id: str
    start: Callable[[], Awaitable[R]]
    # The reply as a resume returns it.
    kept: Callable[[R], BashResult]


class Command(msgspec.Struct, Generic[R], frozen=True):
    """A command, and how its surface shapes it."""

    spec: CommandSpec
    # The request's method, as its record is listed.
    method: str
    # What streams its output as the surface's notifications, through `notify`.
    listener: Callable[[Notify], ListenerFactory]
    # Its reply.
    finish: Callable[[Outcome], R]
    # The BashResult a resume gets, from the outcome and the reply: made only for
    # a record (a connection without resumes, such as stdio, keeps none).
    kept: Callable[[Outcome, R], BashResult]
    # What its record keeps of the notifications it sends.
    logged: Logged = EVERY
    # Whether its record holds the PTY's lane (a PTY's input and size from another connection).
    holds_lane: bool = False


Planned = Answer[R] | Background[R] | Command[R]


async def serve(caller: Caller, services: Services, planned: Planned[R]) -> R:
    """The request, planned, run to its reply."""
    if isinstance(planned, Answer):
        return planned.result
    if isinstance(planned, Background) and caller.flight is not None:
        caller.flight.runs_no_command()
    resumables = services.resumables
    record = None if resumables is None else _record(caller, services.commands, resumables, planned)
    notify = caller.notify if record is None else _recording(caller.notify, record)
    kept: BashResult | None = None
    try:
        reply, keep = await _run(caller, services.commands, planned, notify, record)
        if record is not None:
            kept = keep()
        return reply
    finally:
        if record is not None and resumables is not None:
            resumables.end(record, kept)


async def _run(
    caller: Caller,
    commands: CommandService,
    planned: Background[R] | Command[R],
    notify: Notify,
    record: Resumable | None,
) -> tuple[R, Callable[[], BashResult]]:
    """The reply, and how to make what a resume gets; the record is listed
    running from when the command has its session's turn (a job's start waits
    for none)."""
    if isinstance(planned, Background):
        if record is not None:
            record.begin()
        reply = await planned.start()
        return reply, lambda: planned.kept(reply)
    listener = planned.listener(notify)
    began = None if record is None else record.begin
    outcome = await commands.stream(planned.spec, listener, caller.tasks, caller.flight, began)
    reply = planned.finish(outcome)
    return reply, lambda: planned.kept(outcome, reply)


def _record(
    caller: Caller,
    commands: CommandService,
    resumables: Resumables,
    planned: Background[R] | Command[R],
) -> Resumable | None:
    """The request's record for a resume, its cancel reachable from another
    connection; one that holds a PTY's lane holds the lane accepted for it
    (always there: its command has not started yet)."""
    if isinstance(planned, Background):
        session, lane, logged = planned.session_id, None, EVERY
    else:
        session, lane, logged = planned.spec.session_id, None, planned.logged
        if planned.holds_lane and planned.spec.terminal is not None:
            lane = commands.accepted_pty(caller.id)
            if lane is None:
                return None
    record = resumables.start(caller.id, planned.method, session, caller.connection, lane, logged)
    flight = caller.flight
    if flight is not None:
        record.cancel = flight.cancel
    return record


def _recording(notify: Notify, record: Resumable) -> Notify:
    """`notify`, each notification also given to `record`, in order, as sent."""

    async def send(method: str, params: msgspec.Struct) -> None:
        record.sent(method, params)
        await notify(method, params)

    return send
