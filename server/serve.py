"""The process: stdio, signals, the watchdog, containment, and who owns which task group.

`serve` runs one connection over the process's stdin and stdout until the
input ends, `exit`, a signal, or stdout breaks. Whatever ends it, a bug
included, every shell and everything they started is killed before it
returns; if the process dies too hard for that (SIGKILL), the watchdog
kills them.

Task groups, outermost first: the signal watcher's; the runtime's (shells
and housekeeping, see runtime.Runtime.open); the connection's (the writer,
then the requests, then the reader, see connection.Connection.serve).
"""

from __future__ import annotations

import os
import signal
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import msgspec

from bashrpc.protocol import messages
from bashrpc.server import log, rundir
from bashrpc.server.connection import Connection
from bashrpc.server.observe import traces
from bashrpc.server.runtime.containment import child, polling, procs
from bashrpc.server.runtime.containment.cgroups import CgroupRoot
from bashrpc.server.runtime.containment.registry import Containment
from bashrpc.server.runtime.containment.watchdog import Watchdog, remove_runtime_dir
from bashrpc.server.runtime.instance import SHUTDOWN_GRACE_SECONDS, Options, Runtime
from bashrpc.server.services.api import Services
from bashrpc.server.settings import OnEof
from bashrpc.server.surfaces import era, native, resources, tasks, terminals, tools
from bashrpc.server.wire import liveness, stdio
from bashrpc.server.wire.dispatch import Dispatcher, Wrap

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

_log = log.get("serve")


def dispatcher() -> Dispatcher:
    """Every surface's methods, in one table; a name registered twice, or a
    method of the protocol with no handler, fails here."""
    surfaces = (
        native.methods,
        tools.methods,
        era.methods,
        tasks.methods,
        resources.methods,
        terminals.methods,
    )
    table = Dispatcher(*surfaces, wrap=_both(era.wrap, traces.spans()))
    table.check_complete()
    return table


def _both(inner: Wrap, outer: Wrap | None) -> Wrap:
    """`inner` around each handler, then `outer` (tracing) around that."""
    if outer is None:
        return inner
    return lambda name, handler: outer(name, inner(name, handler))


class Guard(msgspec.Struct, frozen=True):
    """What a serving process sets up before any shell: see `guarded`."""

    runtime_dir: Path
    cgroup_root: CgroupRoot | None
    containment: Containment
    watchdog: Watchdog


@asynccontextmanager
async def guarded(options: Options) -> AsyncIterator[Guard]:
    """The process as a server: a subreaper with a private runtime dir, a cgroup
    root (where one can be made) and a watchdog. However the block ends, every
    process below the server is killed before this returns."""
    # Before any thread starts: threads take their signal mask from their creator.
    child.clear_inherited_signals()
    procs.become_subreaper()
    cgroup_root = CgroupRoot.create() if options.settings.kill.cgroups else None
    # The watchdog makes the runtime directory, once nothing that kills the
    # server can take it too (a stale cgroup is swept by the next server).
    watchdog, runtime_dir = Watchdog.start(
        None if cgroup_root is None else cgroup_root.path, rundir.make, f"{os.getpid()}."
    )
    containment = Containment(cgroup_root, None if cgroup_root else watchdog.report)
    containment.spare.add(watchdog.pid)
    try:
        yield Guard(runtime_dir, cgroup_root, containment, watchdog)
    finally:
        with anyio.CancelScope(shield=True):
            await containment.kill_everything()
            # Whatever escaped every shell is still below us, thanks to the subreaper.
            await _kill_descendants(containment.spare, SHUTDOWN_GRACE_SECONDS)
            procs.reap_orphans(containment.spare)
        remove_runtime_dir(runtime_dir)
        watchdog.close()


async def serve(options: Options) -> int:
    fds = stdio.take_over_stdio()
    try:
        async with (
            guarded(options) as guard,
            anyio.create_task_group() as signals,
            Runtime.open(options, guard.runtime_dir, guard.containment, reap_orphans=True) as rt,
        ):
            transport = liveness.watched(
                stdio.transport(fds), options.settings.server.client_timeout
            )
            connection = Connection(Services(rt), dispatcher(), transport, options.settings)
            connection.in_order = finishes_on_eof(options.settings.server.on_eof, fds.input)
            signals.start_soon(_watch_signals, connection, options.settings.server.drain_seconds)
            connection.services.attached(connection.notify)
            try:
                await connection.serve()
            finally:
                connection.services.detached()
            signals.cancel_scope.cancel()
    finally:
        stdio.restore_stdio(fds)
    return 0


def finishes_on_eof(on_eof: OnEof | None, fd: int) -> bool:
    """Whether the end of input means "finish what was asked": as set, else for a
    regular file or /dev/null, which hold requests rather than a live client."""
    if on_eof is not None:
        return on_eof == "finish"
    mode = os.fstat(fd)
    if stat.S_ISREG(mode.st_mode):
        return True
    return stat.S_ISCHR(mode.st_mode) and mode.st_rdev == os.stat(os.devnull).st_rdev


async def _watch_signals(connection: Connection[Services], drain_seconds: float) -> None:
    """The first SIGTERM drains the connection when a drain is configured; any
    other stop signal, or a second one, shuts down at once."""
    async with anyio.create_task_group() as draining:
        with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
            async for signum in signals:
                if signum == signal.SIGTERM and drain_seconds > 0 and not connection.draining:
                    _log.info(
                        messages.DRAINING.format(seconds=messages.format_seconds(drain_seconds))
                    )
                    draining.start_soon(connection.drain, drain_seconds)
                    continue
                _log.info("received %s; shutting down", signal.Signals(signum).name)
                connection.stop.set()
                draining.cancel_scope.cancel()
                return


async def _kill_descendants(spare: set[int], grace_seconds: float) -> None:
    """SIGTERM everything below the server but `spare`, then SIGKILL what is left."""

    def current() -> set[int]:
        scan = procs.Scan()
        return scan.descendants(scan.children(os.getpid()) - spare)

    pids = current()
    if not pids:
        return
    procs.signal_all(pids, signal.SIGTERM)
    await polling.until(lambda: not current(), grace_seconds)
    await polling.repeat_while(
        current, lambda survivors: procs.signal_all(survivors, signal.SIGKILL)
    )
