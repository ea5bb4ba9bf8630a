"""`bashrpc daemon`: many connections on one unix socket, in one guarded process.

Each accepted connection is a `Connection` over the socket, with its own
`initialize` and host options, serving its owner's tenant (`tenants.py`): a
runtime (sessions, shells) in a cgroup nested in the daemon's. Its `View` is
the connection's `Tenancy`, given to it when it is made: `initialize` may
move it to the tenant of the `clientId` or shared scope it names. When the
last connection of an owner ends, the owner's sessions wait out the detach
grace (none for a connection that named no `clientId`), then they and all
they started are killed as on the end of a stdio server; other owners' are
untouched. The daemon as a whole is guarded like a stdio server
(`serve.guarded`): subreaper, watchdog, the final kill.

Task groups, outermost first: the guard; the watchers' (signals, housekeeping,
probes); the connections' (the accept loop in a cancel scope of its own, then
one task per connection). Stopping cancels the accept loop and stops every
connection; the group ends when the last one has wound down.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import anyio
import anyio.abc

from bashrpc.protocol import messages
from bashrpc.protocol.health import NotReady, Readiness
from bashrpc.protocol.mcp import HostOptions
from bashrpc.protocol.methods import SandboxMode, ServerStatsResult
from bashrpc.server import clock, log
from bashrpc.server.connection import Connection
from bashrpc.server.daemon import health, socketpath
from bashrpc.server.daemon.idle import IdleClock
from bashrpc.server.daemon.tenants import Tenant, Tenants, TenantServices, tenant_key
from bashrpc.server.observe.stats import STATS, Gauges
from bashrpc.server.runtime.containment import procs
from bashrpc.server.runtime.instance import Options
from bashrpc.server.runtime.sandbox import bwrap, mounts
from bashrpc.server.serve import STOP_SIGNALS, Guard, dispatcher, guarded
from bashrpc.server.services.api import Services, runtime_gauges
from bashrpc.server.wire import liveness
from bashrpc.server.wire.transport import Transport

HOUSEKEEPING_INTERVAL_SECONDS = 1.0

_log = log.get("daemon")

# Other listeners (WebSocket, Streamable HTTP): each serves each connection it accepts
# through the callable it is given, until cancelled.
Listen = Callable[[Callable[[Transport], Awaitable[None]]], Awaitable[None]]


def together(listens: Sequence[Listen]) -> Listen:
    """Several listeners as one: each runs until all are cancelled."""
    if len(listens) == 1:
        return listens[0]

    async def listen(serve: Callable[[Transport], Awaitable[None]]) -> None:
        async with anyio.create_task_group() as group:
            for one in listens:
                group.start_soon(_run_listen, one, serve)

    return listen


async def _run_listen(listen: Listen, serve: Callable[[Transport], Awaitable[None]]) -> None:
    await listen(serve)


class View:
    """One connection's view onto its owner's tenant, and its `Tenancy`: a
    private one until `initialize` names a `clientId` or a shared scope, then
    that one's."""

    def __init__(self, tenants: Tenants, tenant: Tenant, gauges: Callable[[], Gauges]) -> None:
        self._tenants = tenants
        self._gauges = gauges
        self.tenant = tenant
        # Every one the connection has had, the current one last.
        self.services: list[Services] = [TenantServices(tenant, gauges)]
        self._attached = True
        # A client's commands outlive a cut connection, as its sessions do.
        self._outlives_cut = False
        tenant.attach()

    def introduce(
        self, connection: Connection[Services], host: HostOptions, mode: SandboxMode
    ) -> Services:
        """Move to the tenant `host` names, unless it has a busy session that
        `mode` would tighten: then refuse (-32602) and stay where it was."""
        client_id = host.client_id
        key = tenant_key(client_id, host.scope)
        if key is None:
            return self.services[-1]
        tenant = self._tenants.get(key)
        if tenant is self.tenant:
            return self.services[-1]
        services = TenantServices(tenant, self._gauges, client_id)
        services.sessions.check_tighten_all(mode)
        tenant.attach()
        self.tenant.detach()
        self.tenant = tenant
        self.services[-1].detached()
        services.attached(connection.notify)
        self.services.append(services)
        self._outlives_cut = self._outlives_cut or client_id is not None
        return services

    def cut(self, connection: Connection[Services]) -> bool:
        if not self._outlives_cut:
            return False
        self.detach(connection)
        return True

    def detach(self, connection: Connection[Services]) -> None:
        """The connection is gone: its owner's grace starts now."""
        if self._attached:
            self._attached = False
            # Its jobs' ends wait for the owner's next connection, not this dying one.
            self.services[-1].detached()
            resumables = self.services[-1].resumables
            if resumables is not None:
                resumables.cut(connection)
            self.tenant.detach()

    def close(self, connection: Connection[Services]) -> None:
        for services in self.services:
            services.commands.abort()
        self.detach(connection)


class Daemon:
    def __init__(
        self, options: Options, guard: Guard, idle_seconds: float | None, grace: float
    ) -> None:
        self._options = options
        self._guard = guard
        self._grace = grace
        self.connections: set[Connection[Services]] = set()
        self._tenants: Tenants | None = None
        self._idle = IdleClock(idle_seconds, clock.now())
        self._accepting = anyio.CancelScope()
        self._accepting_also = anyio.CancelScope()
        self.stopping = False
        self.draining = False

    async def run(
        self,
        listener: anyio.abc.SocketListener,
        also: Listen | None = None,
        http: health.HttpListener | None = None,
    ) -> None:
        async with anyio.create_task_group() as watchers:
            watchers.start_soon(self._watch_signals)
            watchers.start_soon(self._housekeeping)
            if http is not None:
                if self._options.settings.sandbox.mode != "off":
                    # Probed once, off the loop; readiness reads the answer kept.
                    await anyio.to_thread.run_sync(bwrap.probe)
                probes = health.Probes(http.token, http.open_probes, self.readiness, self.figures)
                watchers.start_soon(health.serve_http, http.sock, probes)
            async with listener, anyio.create_task_group() as connections:
                self._tenants = Tenants(self._options, self._guard, connections, self._grace)
                with self._accepting:
                    if also is not None:
                        connections.start_soon(self._listen_also, also)
                    while True:
                        stream = await listener.accept()
                        if self._admitted(stream):
                            connections.start_soon(self._serve_one, stream)
                        else:
                            await stream.aclose()
            watchers.cancel_scope.cancel()

    async def _listen_also(self, listen: Listen) -> None:
        with self._accepting_also:
            await listen(self.serve)

    def gauges(self) -> Gauges:
        tenants = [] if self._tenants is None else list(self._tenants.all.values())
        return runtime_gauges(
            [tenant.runtime for tenant in tenants],
            connections=len(self.connections),
            tenants=len(tenants),
            replay_bytes=sum(tenant.replay_bytes for tenant in tenants),
        )

    def figures(self) -> ServerStatsResult:
        return STATS.figures(self.gauges())

    def readiness(self) -> Readiness:
        reasons = []
        if self.draining or self.stopping:
            text = messages.READY_DRAINING if self.draining else messages.READY_STOPPING
            reasons.append(NotReady("draining", text))
        mode = self._options.settings.sandbox.mode
        if mode != "off":
            _path, problem = bwrap.probe()
            if problem is not None:
                text = messages.READY_NO_SANDBOX.format(mode=mode, reason=problem)
                reasons.append(NotReady("sandbox", text))
        if STATS.rc_capture_failing:
            reasons.append(NotReady("rc_capture", messages.READY_RC_CAPTURE))
        return Readiness(ready=not reasons, reasons=reasons)

    async def drain(self, seconds: float) -> None:
        """SIGTERM with a drain configured: take no new connection, let every
        connection's running commands finish within `seconds` (new ones are
        refused), then stop. Readiness says 503 from the first moment."""
        self.draining = True
        self._accepting.cancel()
        self._accepting_also.cancel()
        async with anyio.create_task_group() as draining:
            for connection in list(self.connections):
                draining.start_soon(connection.drain, seconds)
        self.stop()

    def stop(self) -> None:
        """Take no more connections; end every one (each winds down as on EOF),
        and every tenant."""
        self.stopping = True
        self._accepting.cancel()
        self._accepting_also.cancel()
        for connection in self.connections:
            connection.stop.set()
        if self._tenants is not None:
            self._tenants.end_all()

    def _admitted(self, stream: anyio.abc.SocketStream) -> bool:
        """Only a peer of our own uid, outside every sandbox, may talk to the daemon."""
        sock: socket.socket = stream.extra(anyio.abc.SocketAttribute.raw_socket)
        peer = socketpath.peer(sock)
        if peer.uid != os.getuid():
            _log.warning(
                messages.DAEMON_PEER_REFUSED.format(pid=peer.pid, uid=peer.uid, ours=os.getuid())
            )
            return False
        if socketpath.sandboxed(sock, peer):
            _log.warning(messages.DAEMON_PEER_SANDBOXED.format(pid=peer.pid))
            return False
        return True

    async def _serve_one(self, stream: anyio.abc.SocketStream) -> None:
        async with stream:
            await self.serve(Transport(stream, stream))

    async def serve(self, transport: Transport) -> None:
        """One connection, from whichever listener, until it ends."""
        assert self._tenants is not None
        settings = self._options.settings
        view = View(self._tenants, self._tenants.get(transport.owner), self.gauges)
        transport = liveness.watched(transport, settings.server.client_timeout)
        connection: Connection[Services] = Connection(
            view.services[0],
            dispatcher(),
            transport,
            settings,
            tenancy=view,
            budget=self._tenants.budget,
        )
        self.connections.add(connection)
        if self.stopping:
            connection.stop.set()
        view.services[0].attached(connection.notify)
        try:
            await connection.serve()
        except Exception:
            # One connection's bug must not end the others.
            _log.exception("a connection failed")
        finally:
            connection.services.detached()
            self.connections.discard(connection)
            view.close(connection)

    async def _housekeeping(self) -> None:
        """Once a second: collect orphans no runtime waits for; exit when idle."""
        while True:
            await anyio.sleep(HOUSEKEEPING_INTERVAL_SECONDS)
            tenants = [] if self._tenants is None else list(self._tenants.all.values())
            known = set(self._guard.containment.spare)
            for tenant in tenants:
                known |= tenant.runtime.pool.pids()
            procs.reap_orphans(known)
            now = clock.now()
            self._idle.note(now, len(self.connections) + len(tenants))
            if self._idle.expired(now) and not self.stopping:
                seconds = messages.format_seconds(self._idle.seconds or 0)
                _log.info(messages.DAEMON_IDLE_EXIT.format(seconds=seconds))
                self.stop()

    async def _watch_signals(self) -> None:
        """The first SIGTERM drains when a drain is configured (as a stdio server
        does); any other stop signal, or a second one, stops at once."""
        drain_seconds = self._options.settings.server.drain_seconds
        async with anyio.create_task_group() as draining:
            with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
                async for signum in signals:
                    if signum == signal.SIGTERM and drain_seconds > 0 and not self.draining:
                        seconds = messages.format_seconds(drain_seconds)
                        _log.info(messages.DRAINING.format(seconds=seconds))
                        draining.start_soon(self.drain, drain_seconds)
                        continue
                    _log.info(messages.DAEMON_STOPPING.format(signal=signal.Signals(signum).name))
                    self.stop()


async def run_daemon(
    options: Options,
    path: Path,
    sock: socket.socket,
    idle_seconds: float | None,
    grace: float,
    also: Listen | None = None,
    http: health.HttpListener | None = None,
    secrets: Sequence[Path] = (),
) -> int:
    """Serve the socket bound at `path` until stopped (a signal, or idleness).
    `secrets`: the token files, hidden (with the socket's directory) in every
    sandbox the daemon starts."""
    mounts.hide_in_every_sandbox(hidden(path, secrets))
    try:
        async with guarded(options) as guard:
            listener = await anyio.abc.SocketListener.from_socket(sock)
            _log.info(messages.DAEMON_LISTENING.format(path=path))
            await Daemon(options, guard, idle_seconds, grace).run(listener, also, http)
    finally:
        # Ours still: the lock, held until this process ends, kept any other daemon off.
        with contextlib.suppress(OSError):
            os.unlink(path)
    return 0


def hidden(path: Path, secrets: Sequence[Path]) -> mounts.Hidden:
    """The daemon's files no sandbox may see: its socket's directory and, should a
    sandbox bind that directory (a workspace holding it), each file in it the
    daemon makes; and the token files, where their bytes are (a link resolved)."""
    own = (path, socketpath.lock_path(path), socketpath.log_path(path))
    files = (*own, *(Path(os.path.realpath(secret)) for secret in secrets))
    return mounts.Hidden((str(path.parent),), tuple(str(f) for f in files))
