"""One client connection: its request loop, its requests in flight, its state.

It owns the reader (bytes, frames, calls), the replies (through the outbox: the reader's
own in its control lane, so they never wait behind output), its requests in flight
(`wire.inflight.Flights`, where their states are written down), the shutdown checks, and
its state: what the host said in `initialize`, and the services it serves it with. It
starts no process: that is its services' business.

Whose sessions it serves may change in `initialize` only, and only as its `Tenancy`
decides (the daemon's: see daemon/daemon.py); a stdio server's connection has none.

Where a request runs is decided by its handler alone (see wire.registry): a plain
function answers on the reader at once; a coroutine always runs in a task of the
requests group (a worker it is handed to, see wire.workers), inside its own cancel
scope, so no request can stall the reader, and an abort always gets through.

Task groups, each with one owner: `serve` holds the writer's group around the requests
group around the reader's group, so the reader stops first, then running requests are
wound down and answered (under the daemon a cut may leave them running: `Tenancy.cut`),
then the outbox flushes. On EOF the MCP surfaces' requests end silently (`Registry`),
unless the input is a script (`in_order`): then each was answered before the next was read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

import anyio
import msgspec

from bashrpc.protocol import messages
from bashrpc.protocol.envelope import Call, Rejected, RequestId, error_response, parse_line
from bashrpc.protocol.errors import ErrorCode
from bashrpc.protocol.framing import LineFramer, Oversized
from bashrpc.protocol.mcp import HostOptions
from bashrpc.protocol.methods import SandboxMode, ServerDraining
from bashrpc.server import errors
from bashrpc.server.settings import Settings
from bashrpc.server.wire.dispatch import Dispatcher, Reply
from bashrpc.server.wire.events import cancel_when, then_set
from bashrpc.server.wire.frames import frames
from bashrpc.server.wire.inflight import Flights, InFlight
from bashrpc.server.wire.outbox import Outbox
from bashrpc.server.wire.phase import Phase, admits, advance
from bashrpc.server.wire.registry import Method
from bashrpc.server.wire.replies import encode_batch, encode_notification, encode_reply
from bashrpc.server.wire.transport import Transport
from bashrpc.server.wire.workers import Workers

# Requests that may run at once; beyond this a request is refused, not queued,
# so the reader never stalls and an abort can always get through.
MAX_IN_FLIGHT_REQUESTS = 256
# How long requests aborted at shutdown, and queued output, may take to go out.
SHUTDOWN_FLUSH_SECONDS = 0.5
LIFECYCLE_METHODS = frozenset({"shutdown", "exit"})
# What starts a command: refused while draining, when everything else still works.
COMMAND_METHODS = frozenset({"bash", "tools/call"})


class ConnectionServices(Protocol):
    """All a connection itself asks of its services; its handlers ask the rest."""

    def tighten_all(self, mode: SandboxMode) -> None:
        """Put every session it sees under `mode` (-32602 when a busy one would
        be tightened, with nothing changed)."""
        ...

    async def wind_down(self) -> None: ...


S = TypeVar("S", bound=ConnectionServices)


class RequestBudget(Protocol):
    """The daemon's memory budget (`KeptBudget`), which the bytes of every
    connection's requests in flight count against."""

    def hold(self, size: int) -> None:
        """Count `size` bytes more; OverBudget (-32003), counting nothing, past it."""
        ...

    def drop(self, size: int) -> None: ...


class ConnectionState(msgspec.Struct, Generic[S], frozen=True):
    """What `initialize` settles for the rest of the connection."""

    services: S
    host: HostOptions
    # The file's settings with the host's overrides.
    settings: Settings


class Tenancy(Protocol[S]):
    """Whose sessions a connection serves: given to it when it is made, asked
    in `initialize` and when the connection is cut."""

    def introduce(self, connection: Connection[S], host: HostOptions, mode: SandboxMode) -> S:
        """The services of the owner `host` names (the current ones when it names
        none): refused (-32602), changing nothing, when a busy session of that
        owner's would be tightened to `mode`."""
        ...

    def cut(self, connection: Connection[S]) -> bool:
        """The client went away (EOF, a broken pipe): True when the connection's
        requests run on, for a new connection of the same owner to resume."""
        ...


class Admitted(msgspec.Struct, frozen=True):
    """A request admitted to run in a task of its own."""

    method: Method
    call: Call
    flight: InFlight
    # Decoded on the reader: bad params are answered without a task.
    params: Any


class RequestContext(msgspec.Struct, Generic[S]):
    """What a handler gets besides its params; typed by its services (`S`)."""

    connection: Connection[S]
    id: RequestId | None
    # None for plain handlers, which run on the reader.
    flight: InFlight | None = None
    # False for a request of the MCP surfaces: silent once the input ended.
    answers_after_eof: bool = True

    @property
    def services(self) -> S:
        return self.connection.services

    @property
    def tasks(self) -> Workers:
        """Where a request's helpers run (stream flushes): the requests group's
        workers, as the request itself does."""
        assert self.connection.workers is not None
        return self.connection.workers

    async def notify(self, method: str, params: msgspec.Struct) -> None:
        if self.answers_after_eof or not self.connection.input_ended:
            await self.connection.notify(method, params, self.flight)


class Connection(Generic[S]):
    def __init__(
        self,
        services: S,
        dispatcher: Dispatcher,
        transport: Transport,
        settings: Settings,
        tenancy: Tenancy[S] | None = None,
        budget: RequestBudget | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        # The daemon's: what waits in memory for a turn counts against it.
        self._budget = budget
        # Per connection: `initialize` may override parts of the file's settings.
        self.file_settings = settings
        self._state = ConnectionState(services, HostOptions(), settings)
        # The MCP revision `initialize` settled; None before it.
        self.protocol_version: str | None = None
        self._tenancy = tenancy
        self.stop = anyio.Event()
        self.phase: Phase = "open"
        # The client closed our input (EOF), as opposed to `exit` or a signal.
        self.input_ended = False
        self._transport = transport
        self._outbox = Outbox(transport.send, transport.is_stdout)
        # The requests group's tasks, which run its requests and their helpers.
        self.workers: Workers | None = None
        self._flights = Flights(MAX_IN_FLIGHT_REQUESTS)
        # The input is a script (`--on-eof finish`): each request answered before the next.
        self.in_order = False

    @property
    def services(self) -> S:
        return self._state.services

    @property
    def draining(self) -> bool:
        """No new command is taken: draining, or winding down."""
        return self.phase != "open"

    @property
    def shutting_down(self) -> bool:
        return self.phase == "winding_down"

    @property
    def host(self) -> HostOptions:
        return self._state.host

    @property
    def settings(self) -> Settings:
        return self._state.settings

    def initialize(self, host: HostOptions, settings: Settings) -> ConnectionState[S]:
        """The state `initialize` settles: the host's options and settings, and the
        services of the owner it names, with every session they see under the
        settings' sandbox mode. Each refusal comes before anything changes."""
        mode = settings.sandbox.mode
        services = self.services
        if self._tenancy is not None:
            services = self._tenancy.introduce(self, host, mode)
        services.tighten_all(mode)
        self._state = ConnectionState(services, host, settings)
        return self._state

    # -- the loop ---------------------------------------------------------

    async def serve(self) -> None:
        """Until the input ends, `exit`, `stop`, or the output breaks; then wind down."""
        async with anyio.create_task_group() as writer:
            writer.start_soon(self._outbox.run)
            async with anyio.create_task_group() as requests:
                self.workers = Workers(requests)
                async with anyio.create_task_group() as reader:
                    reader.start_soon(self._read, reader.cancel_scope)
                    reader.start_soon(cancel_when, self.stop, reader.cancel_scope)
                    reader.start_soon(cancel_when, self._outbox.broken, reader.cancel_scope)
                if self._cut():
                    await self._flights.wait_idle()
                await self.wind_down()
                # Aborted requests answer quickly; one stuck on a full outbox is dropped.
                with anyio.move_on_after(SHUTDOWN_FLUSH_SECONDS):
                    await self._flights.wait_idle()
                requests.cancel_scope.cancel()
            self._outbox.close()
            with anyio.move_on_after(SHUTDOWN_FLUSH_SECONDS):
                await self._outbox.finished.wait()
            writer.cancel_scope.cancel()

    def _cut(self) -> bool:
        """The reader ended without `exit` or a stop: whether requests run on."""
        if self._tenancy is None or self.stop.is_set() or self.shutting_down:
            return False
        return self._tenancy.cut(self)

    async def wind_down(self) -> None:
        """Refuse new work, abort everything, kill every process (idempotent)."""
        self.phase = advance(self.phase, "wind_down")
        self._flights.cancel_all()
        await self.services.wind_down()

    async def drain(self, seconds: float) -> None:
        """No new commands; running ones get `seconds` to finish, then stop (aborting the rest)."""
        self.phase = advance(self.phase, "drain")
        await self.notify("server/draining", ServerDraining(seconds=seconds))
        with anyio.move_on_after(seconds):
            await self._flights.wait_idle()
        self.stop.set()

    async def _read(self, scope: anyio.CancelScope) -> None:
        framer = LineFramer(self.settings.max_line_bytes)
        async for frame in frames(self._transport.receive, framer):
            if isinstance(frame, Oversized):
                await self._answer(
                    error_response(ErrorCode.INVALID_REQUEST, messages.MESSAGE_TOO_LARGE)
                )
                continue
            items, is_batch = parse_line(frame)
            if is_batch:
                await self._batch(items)
            else:
                await self._single(items[0])
            if self.stop.is_set():
                break
        else:
            self.input_ended = True
        scope.cancel()

    # -- requests ---------------------------------------------------------

    def _prepare(self, item: Call | Rejected) -> Reply | Admitted | None:
        """A reply now (None for a notification), or a request admitted to run."""
        if isinstance(item, Rejected):
            return item.response
        call = item
        try:
            lifecycle, command = call.method in LIFECYCLE_METHODS, call.method in COMMAND_METHODS
            if not admits(self.phase, lifecycle=lifecycle, command=command):
                raise errors.ShuttingDown
            method = self.dispatcher.lookup(call.method)
            if method is None:
                return None if call.is_notification else self.dispatcher.not_found(call)
            if not method.is_async:
                return self.dispatcher.answer(method, call, RequestContext(self, call.reply_id))
            params = self.dispatcher.params(method, call)
            flight = self._flights.admit(call.reply_id, runs_command=call.method in COMMAND_METHODS)
        except Exception as exc:
            return None if call.is_notification else self.dispatcher.failure(call, exc)
        try:
            self._hold(flight, len(call.params))
            if method.admit is not None:
                method.admit(RequestContext(self, call.reply_id, flight), params)
        except Exception as exc:
            self._flights.release(flight)
            return None if call.is_notification else self.dispatcher.failure(call, exc)
        return Admitted(method, call, flight, params)

    def _hold(self, flight: InFlight, size: int) -> None:
        """The request's bytes count against the daemon's budget until it ends."""
        budget = self._budget
        if budget is not None:
            budget.hold(size)
            flight.keep(lambda: budget.drop(size))

    async def _single(self, item: Call | Rejected) -> None:
        prepared = self._prepare(item)
        if isinstance(prepared, Admitted):
            await self._start(prepared.flight, self._run, prepared, None)
        elif prepared is not None:
            await self._answer(prepared)

    async def _start(self, lane: object, run: Callable[..., Any], *args: Any) -> None:
        """`run(*args)` as a request task; `in_order`, waited for with its output (`lane`)."""
        assert self.workers is not None
        if not self.in_order:
            self.workers.start_soon(run, *args)
            return
        done = anyio.Event()
        self.workers.start_soon(then_set, done, run, *args)
        await done.wait()
        await self._outbox.drained(lane)

    async def _batch(self, items: list[Call | Rejected]) -> None:
        """Each member on its own, and in flight on its own; one array of replies."""
        replies: list[Reply] = []
        admitted: list[Admitted] = []
        for item in items:
            prepared = self._prepare(item)
            if isinstance(prepared, Admitted):
                admitted.append(prepared)
            elif prepared is not None:
                replies.append(prepared)
        if admitted:
            await self._start(None, self._finish_batch, replies, admitted)
        elif replies:
            await self._outbox.put_control(encode_batch(replies))

    async def _finish_batch(self, replies: list[Reply], admitted: list[Admitted]) -> None:
        async with anyio.create_task_group() as members:
            for request in admitted:
                members.start_soon(self._run, request, replies)
        if replies:
            # After every member's chunks, which wait in the members' own lanes.
            for request in admitted:
                await self._outbox.drained(request.flight)
            await self._outbox.put(encode_batch(replies))

    async def _run(self, request: Admitted, collect: list[Reply] | None) -> None:
        """One request in its own task and cancel scope; its reply goes out, or
        into `collect` for a batch."""
        method, call, flight = request.method, request.call, request.flight
        reply: Reply
        try:
            ctx = RequestContext(self, call.reply_id, flight, method.answers_after_eof)
            with self._flights.start(flight):
                try:
                    result = await flight.run(method.handler, ctx, request.params)
                except Exception as exc:
                    reply = self.dispatcher.failure(call, exc)
                else:
                    reply = self.dispatcher.success(call, result)
            if flight.scope.cancelled_caught:
                reply = self.dispatcher.failure(call, errors.RequestCancelled())
        finally:
            self._flights.release(flight)
        unanswered = flight.silent or (self.input_ended and not method.answers_after_eof)
        if call.is_notification or unanswered:
            return
        if collect is not None:
            collect.append(reply)
        else:
            # After the chunks it queued, in its own bulk lane.
            await self._outbox.put(encode_reply(reply), flight)

    # -- out --------------------------------------------------------------

    def cancel(self, request_id: RequestId, *, silent: bool = False) -> bool:
        """Cancel every request in flight with this id (`silent`: unanswered); False if none."""
        return self._flights.cancel(request_id, silent=silent)

    async def notify(
        self, method: str, params: msgspec.Struct, flight: InFlight | None = None
    ) -> None:
        """In the bulk lane of the request it belongs to (`flight`), if any."""
        line = encode_notification(method, params)
        if line is not None:
            await self._outbox.put(line, flight)

    async def _answer(self, reply: Reply) -> None:
        """The reader's own reply: in the control lane, so it never waits behind
        bulk output and the reader goes on to the next request (an abort)."""
        await self._outbox.put_control(encode_reply(reply))
