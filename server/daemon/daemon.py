"""`bashrpc daemon`: many connections on one unix socket, in one guarded process.

Each accepted connection is a `Connection` over the socket, with its own
`initialize` and host options, and a runtime of its own (sessions, shells)
in a cgroup nested in the daemon's: when the connection ends, its shells and
everything they started are killed as on the end of a stdio server, and the
other connections' are untouched. The daemon as a whole is guarded like a
stdio server (`serve.guarded`): subreaper, watchdog, the final kill.

Task groups, outermost first: the guard; the watchers' (signals,
housekeeping); the connections' (the accept loop in a cancel scope of its
own, then one task per connection, each holding its runtime). Stopping
cancels the accept loop and stops every connection; the connections' group
ends when the last one has wound down.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import socket

import anyio
import anyio.abc

from protocol import messages
from server import log
from server.connection import Connection
from server.daemon import socketpath
from server.daemon.idle import IdleClock
from server.runtime import procs
from server.runtime.containment import Containment
from server.runtime.runtime import Options, Runtime
from server.serve import STOP_SIGNALS, Guard, dispatcher, guarded
from server.services.api import Services
from server.wire import liveness
from server.wire.transport import Transport

HOUSEKEEPING_INTERVAL_SECONDS = 1.0

_log = log.get("daemon")


class Daemon:
    def __init__(self, options: Options, guard: Guard, idle_seconds: float | None) -> None:
        self._options = options
        self._guard = guard
        self._ids = itertools.count(1)
        self.connections: set[Connection] = set()
        self.runtimes: set[Runtime] = set()
        self._idle = IdleClock(idle_seconds, anyio.current_time())
        self._accepting = anyio.CancelScope()
        self.stopping = False

    async def run(self, listener: anyio.abc.SocketListener) -> None:
        async with anyio.create_task_group() as watchers:
            watchers.start_soon(self._watch_signals)
            watchers.start_soon(self._housekeeping)
            async with listener, anyio.create_task_group() as connections:
                with self._accepting:
                    while True:
                        stream = await listener.accept()
                        if self._admitted(stream):
                            connections.start_soon(self._serve_one, stream)
                        else:
                            await stream.aclose()
            watchers.cancel_scope.cancel()

    def stop(self) -> None:
        """Take no more connections; end every one (each winds down as on EOF)."""
        self.stopping = True
        self._accepting.cancel()
        for connection in self.connections:
            connection.stop.set()

    def _admitted(self, stream: anyio.abc.SocketStream) -> bool:
        """Only a peer of our own uid may talk to the daemon."""
        sock: socket.socket = stream.extra(anyio.abc.SocketAttribute.raw_socket)
        peer = socketpath.peer(sock)
        if peer.uid == os.getuid():
            return True
        _log.warning(
            messages.DAEMON_PEER_REFUSED.format(pid=peer.pid, uid=peer.uid, ours=os.getuid())
        )
        return False

    def _containment(self, name: str) -> Containment:
        """A connection's own: a cgroup inside the daemon's (killed with it), or
        ancestry tracking reported to the daemon's watchdog."""
        guard = self._guard
        root = None if guard.cgroup_root is None else guard.cgroup_root.nested(name)
        containment = Containment(root, None if root else guard.watchdog.report)
        containment.spare = guard.containment.spare
        return containment

    async def _serve_one(self, stream: anyio.abc.SocketStream) -> None:
        name = f"c{next(self._ids)}"
        runtime_dir = self._guard.runtime_dir / name
        runtime_dir.mkdir(mode=0o700)
        settings = self._options.settings
        try:
            async with (
                stream,
                Runtime.open(self._options, runtime_dir, self._containment(name)) as runtime,
            ):
                transport = liveness.watched(
                    Transport(stream, stream), settings.server.client_timeout
                )
                connection = Connection(Services(runtime), dispatcher(), transport, settings)
                self.connections.add(connection)
                self.runtimes.add(runtime)
                if self.stopping:
                    connection.stop.set()
                try:
                    await connection.serve()
                finally:
                    self.connections.discard(connection)
                    self.runtimes.discard(runtime)
        except Exception:
            # One connection's bug must not end the others.
            _log.exception("connection %s failed", name)
        finally:
            shutil.rmtree(runtime_dir, ignore_errors=True)

    async def _housekeeping(self) -> None:
        """Once a second: collect orphans no runtime waits for; exit when idle."""
        while True:
            await anyio.sleep(HOUSEKEEPING_INTERVAL_SECONDS)
            known = set(self._guard.containment.spare)
            for runtime in self.runtimes:
                known |= runtime.pool.pids()
            procs.reap_orphans(known)
            now = anyio.current_time()
            self._idle.note(now, len(self.connections))
            if self._idle.expired(now) and not self.stopping:
                seconds = messages.format_seconds(self._idle.seconds or 0)
                _log.info(messages.DAEMON_IDLE_EXIT.format(seconds=seconds))
                self.stop()

    async def _watch_signals(self) -> None:
        with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
            async for signum in signals:
                _log.info(messages.DAEMON_STOPPING.format(signal=signal.Signals(signum).name))
                self.stop()


async def run_daemon(options: Options, sock: socket.socket, idle_seconds: float | None) -> int:
    """Serve the bound socket until stopped (a signal, or idleness)."""
    path = sock.getsockname()
    try:
        async with guarded(options) as guard:
            listener = await anyio.abc.SocketListener.from_socket(sock)
            _log.info(messages.DAEMON_LISTENING.format(path=path))
            await Daemon(options, guard, idle_seconds).run(listener)
    finally:
        # Ours still: the lock, held until this process ends, kept any other daemon off.
        with contextlib.suppress(OSError):
            os.unlink(path)
    return 0
