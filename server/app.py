"""The server core: reads requests, runs them concurrently, and shuts down cleanly.

Cheap methods are answered inline by the reader; methods that wait on a
process run as tasks of the request task group. Every task has an owner:
the request group for requests, the shell group for shells, the root group
for the reader, the writer and the reaper. The methods themselves live in
`native.py` (the host's surface), `tools.py` and `resources.py` (MCP).
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import traceback
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import msgspec

from protocol import messages, paths
from protocol.envelope import (
    Call,
    ErrorResponse,
    Notification,
    Rejected,
    RequestId,
    SuccessResponse,
    encode,
    error_response,
    parse_line,
)
from protocol.errors import ErrorCode
from protocol.framing import LineFramer, Oversized
from protocol.mcp import HostOptions
from server import env as envmod
from server import log, procs, stdio
from server.artifacts import ArtifactStore
from server.cgroups import CgroupRoot
from server.containment import Containment
from server.dispatch import Dispatcher, RpcError
from server.executor import Execution, Executor
from server.sessions import PoolLimits, Session, SessionRegistry, ShellPool, resolve_path
from server.settings import Settings
from server.shell import ShellConfig
from server.snapshot import SnapshotStore
from server.watchdog import Watchdog

# Requests that may run at once; beyond this a request is refused, not queued,
# so the reader never stalls and an abort can always get through.
MAX_IN_FLIGHT_REQUESTS = 256
# Shutdown must finish within a few seconds even with TERM-ignoring children.
SHUTDOWN_GRACE_SECONDS = 1.0
# How long queued output may take to reach a client at exit.
SHUTDOWN_FLUSH_SECONDS = 0.5
HOUSEKEEPING_INTERVAL_SECONDS = 1.0
# Tool calls carry no session: they share this one, whose shell configuration
# is the server's (shell, prefix, snapshot, env).
TOOL_SESSION_ID = "@tools"

_log = log.get("app")

Handler = Callable[[Call, Any], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Options:
    settings: Settings
    workspace: Path
    shell: str
    artifacts_dir: Path


class Server:
    def __init__(
        self,
        options: Options,
        outbox: stdio.Outbox,
        shells: ShellPool,
        sessions: SessionRegistry,
        requests: anyio.abc.TaskGroup,
    ) -> None:
        self.options = options
        # Per connection: `initialize` may override parts of the file's settings.
        self.settings = options.settings
        self.host = HostOptions()
        self.shells = shells
        self.sessions = sessions
        self.executor = Executor(shells, self.settings.kill.grace_seconds)
        self.artifacts = ArtifactStore(
            options.artifacts_dir,
            self.settings.artifacts.max_total_bytes,
            self.settings.artifacts.max_bytes,
        )
        self.dispatcher = Dispatcher()
        self.stop = anyio.Event()
        self.shutting_down = False
        self.wound_down = False
        self._idle: anyio.Event | None = None
        self._outbox = outbox
        self._requests = requests
        self._in_flight = 0
        self._executions: set[Execution] = set()
        self._slow: set[str] = set()
        self.watchdog: Watchdog | None = None

    def add_method(
        self, name: str, params: type[msgspec.Struct], handler: Handler, *, slow: bool = False
    ) -> None:
        """Register a method; `slow` ones (that wait on processes) run as their own tasks."""
        self.dispatcher.register(name, params, handler)
        if slow:
            self._slow.add(name)

    # -- input ------------------------------------------------------------

    async def read_loop(self, fd: int) -> None:
        framer = LineFramer(self.settings.max_line_bytes)
        async for frame in stdio.read_frames(fd, framer):
            if isinstance(frame, Oversized):
                await self._reply(
                    error_response(ErrorCode.INVALID_REQUEST, messages.MESSAGE_TOO_LARGE)
                )
                continue
            items, is_batch = parse_line(frame)
            if is_batch:
                self._requests.start_soon(self._run_batch, [self._admit(i) for i in items])
            else:
                await self._handle_one(items[0])
            if self.stop.is_set():
                return

    async def _handle_one(self, item: Call | Rejected) -> None:
        if isinstance(item, Rejected):
            await self._reply(item.response)
        elif item.method in self._slow:
            self._spawn(self._run_single, item)
        else:
            await self._run_single(item)

    def _admit(self, item: Call | Rejected) -> Call | Rejected:
        """Each batch member takes a slot in flight, or is refused on its own."""
        if isinstance(item, Rejected):
            return item
        if self._in_flight >= MAX_IN_FLIGHT_REQUESTS:
            return Rejected(
                error_response(ErrorCode.SERVER_BUSY, messages.SERVER_BUSY, item.reply_id)
            )
        self._in_flight += 1
        return item

    def _release(self) -> None:
        self._in_flight -= 1
        if self._in_flight == 0 and self._idle is not None:
            self._idle.set()

    def _spawn(self, fn: Callable[[Any], Awaitable[None]], arg: Any) -> None:
        if self._in_flight >= MAX_IN_FLIGHT_REQUESTS:
            self._requests.start_soon(self._refuse, arg)
            return
        self._in_flight += 1
        self._requests.start_soon(self._guarded, fn, arg)

    async def _guarded(self, fn: Callable[[Any], Awaitable[None]], arg: Any) -> None:
        try:
            await fn(arg)
        finally:
            self._release()

    async def wait_idle(self) -> None:
        """Until no request is in flight (used at shutdown)."""
        if self._in_flight:
            self._idle = anyio.Event()
            await self._idle.wait()

    async def _refuse(self, call: Call) -> None:
        if not call.is_notification:
            await self._reply(
                error_response(ErrorCode.SERVER_BUSY, messages.SERVER_BUSY, call.reply_id)
            )

    async def _run_single(self, call: Call) -> None:
        reply = await self._answer(call)
        if reply is not None:
            await self._reply(reply)

    async def _run_batch(self, items: list[Call | Rejected]) -> None:
        replies: list[ErrorResponse | SuccessResponse | None] = [None] * len(items)

        async def one(index: int, item: Call | Rejected) -> None:
            if isinstance(item, Rejected):
                # Refused notifications get no reply, like every notification.
                busy = item.response.error.code == ErrorCode.SERVER_BUSY
                replies[index] = None if busy and item.response.id is None else item.response
                return
            try:
                replies[index] = await self._answer(item)
            finally:
                self._release()

        async with anyio.create_task_group() as tg:
            for index, item in enumerate(items):
                tg.start_soon(one, index, item)
        answered = [r for r in replies if r is not None]
        if answered:
            await self._outbox.put(_encode_batch(answered))

    async def _answer(self, call: Call) -> ErrorResponse | SuccessResponse | None:
        if self.shutting_down and call.method not in ("exit", "shutdown"):
            if call.is_notification:
                return None
            return error_response(ErrorCode.SHUTTING_DOWN, messages.SHUTTING_DOWN, call.reply_id)
        return await self.dispatcher.dispatch(call)

    async def _reply(self, message: ErrorResponse | SuccessResponse) -> None:
        await self._outbox.put(_encode_reply(message))

    async def notify(self, method: str, params: msgspec.Struct) -> None:
        try:
            line = encode(Notification(method=method, params=params))
        except Exception:
            _log.error("notification %s not sent:\n%s", method, traceback.format_exc())
            return
        await self._outbox.put(line)

    # -- sessions and executions ------------------------------------------

    def resolve_dir(self, base: str, path: str) -> str:
        """An existing directory, relative to `base`; -32602 otherwise."""
        resolved = resolve_path(base, path, os.environ.get("HOME"))
        if not os.path.isdir(resolved):
            raise RpcError(
                ErrorCode.INVALID_PARAMS,
                messages.INVALID_PARAMS,
                messages.CWD_NOT_DIRECTORY.format(path=paths.printable(resolved)),
            )
        return resolved

    def new_session(self, session_id: str, cwd: str, env: dict[str, str] | None) -> Session:
        session_env = envmod.without_guards(env)
        config = ShellConfig(
            shell=self.options.shell,
            prefix=self.settings.prefix,
            snapshot=None,
            env=tuple(sorted(session_env.items())),
        )
        inherited = envmod.excluding(os.environ, self.settings.env_exclude)
        full_env = envmod.build(inherited, self.settings.env_vars, session_env)
        return self.sessions.add(Session(session_id, config, full_env, cwd))

    def session(self, session_id: str) -> Session:
        """The named session, created in the workspace on first use."""
        session = self.sessions.get(session_id)
        if session is None:
            session = self.new_session(session_id, str(self.options.workspace), None)
        return session

    def tool_session(self) -> Session:
        """The shared session of tool calls with the current configuration."""
        return self.session(TOOL_SESSION_ID)

    @contextmanager
    def track(self, execution: Execution) -> Iterator[Execution]:
        """Make a running command findable by abort and cancel requests."""
        self._executions.add(execution)
        try:
            yield execution
        finally:
            self._executions.discard(execution)

    def abort(self, *, request_id: RequestId | None = None, session_id: str | None = None) -> bool:
        """Abort running commands matching both filters (an absent filter matches all)."""
        aborted = False
        for execution in list(self._executions):
            if request_id is not None and execution.request_id != request_id:
                continue
            if session_id is not None and execution.session_id != session_id:
                continue
            aborted = execution.abort() or aborted
        return aborted

    # -- lifecycle --------------------------------------------------------

    async def wind_down(self) -> None:
        """Abort everything and kill every process the server started."""
        self.shutting_down = True
        self.wound_down = True
        self.executor.grace_seconds = min(self.executor.grace_seconds, SHUTDOWN_GRACE_SECONDS)
        for execution in list(self._executions):
            execution.abort()
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for shell in list(self.shells.live):
                    tg.start_soon(self.shells.close, shell, SHUTDOWN_GRACE_SECONDS)
            for session in self.sessions.all():
                session.shell = None
            # Whatever escaped every shell: in the server's cgroup, or below us
            # thanks to the subreaper.
            await self.shells.containment.kill_everything()
            await _kill_descendants(self.own_children(), SHUTDOWN_GRACE_SECONDS)
            procs.reap_orphans(self.own_children())

    def own_children(self) -> set[int]:
        """Children whose exit status the server collects itself, not the reaper."""
        own = self.shells.pids() | self.executor.pty_pids
        if self.watchdog is not None:
            own.add(self.watchdog.pid)
        return own

    async def housekeeping(self) -> None:
        """Once a second: reap re-parented orphans, record what shells started
        (where that is tracked by ancestry), close idle shells."""
        while True:
            await anyio.sleep(HOUSEKEEPING_INTERVAL_SECONDS)
            procs.reap_orphans(self.own_children())
            self.shells.note_members()
            await self.shells.evict_idle()

    def pty_of(self, request_id: RequestId) -> Execution:
        """The running PTY command of a request, or -32005."""
        for execution in self._executions:
            running = execution.pty is not None and not execution.finished
            if running and execution.request_id == request_id:
                return execution
        raise no_such_pty(request_id)


def _encode_reply(message: ErrorResponse | SuccessResponse) -> bytes:
    """A reply that cannot be encoded becomes -32603 for its request, not a crash."""
    try:
        return encode(message)
    except Exception as exc:
        _log.error("reply to %r not encodable:\n%s", message.id, traceback.format_exc())
        summary = f"{type(exc).__name__}: {exc}".splitlines()[0]
        failed = error_response(
            ErrorCode.INTERNAL_ERROR, messages.INTERNAL_ERROR, message.id, summary
        )
        return encode(failed)


def _encode_batch(replies: list[ErrorResponse | SuccessResponse]) -> bytes:
    return b"[" + b",".join(_encode_reply(r).rstrip(b"\n") for r in replies) + b"]\n"


def no_such_pty(request_id: RequestId) -> RpcError:
    return RpcError(
        ErrorCode.NO_SUCH_PTY,
        messages.NO_SUCH_PTY.format(request_id=request_id),
        {"requestId": request_id},
    )


async def _watch_signals(stop: anyio.Event) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async for signum in signals:
            _log.info("received %s; shutting down", signal.Signals(signum).name)
            stop.set()
            return


async def _cancel_when(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


async def _read_input(server: Server, fd: int, scope: anyio.CancelScope) -> None:
    await server.read_loop(fd)
    scope.cancel()


def _register_methods(server: Server) -> None:
    from server import native, resources, tools

    native.register(server)
    tools.register(server)
    resources.register(server)


async def _kill_descendants(spare: set[int], grace_seconds: float) -> None:
    """SIGTERM everything below the server but `spare`, then SIGKILL what is left."""

    def current() -> set[int]:
        return procs.descendants(procs.direct_children() - spare, procs.snapshot())

    pids = current()
    if not pids:
        return
    procs.signal_all(pids, signal.SIGTERM)
    with anyio.move_on_after(grace_seconds):
        while current():
            await anyio.sleep(procs.KILL_POLL_SECONDS)
    while survivors := current():
        procs.signal_all(survivors, signal.SIGKILL)
        await anyio.sleep(procs.KILL_POLL_SECONDS)


async def serve(options: Options) -> int:
    """Serve until stdin ends, `exit`, a signal, or stdout breaks; then clean up.

    Whatever ends the loop, a bug included, the shells and everything they
    started are killed before this returns; if the process dies too hard for
    that (SIGKILL), the watchdog does it.
    """
    fds = stdio.take_over_stdio()
    procs.become_subreaper()
    runtime_dir = Path(tempfile.mkdtemp(prefix="bashrpc-"))
    settings = options.settings
    cgroup_root = CgroupRoot.create() if settings.kill.cgroups else None
    watchdog = Watchdog.start(
        None if cgroup_root is None else cgroup_root.path,
        runtime_dir,
        f"{os.getpid()}.",
    )
    containment = Containment(
        cgroup_root, report=None if cgroup_root is not None else watchdog.report
    )
    containment.spare.add(watchdog.pid)
    outbox = stdio.Outbox(fds.output)
    server: Server | None = None
    try:
        async with anyio.create_task_group() as root:
            root.start_soon(outbox.run)
            async with anyio.create_task_group() as shells_tg:
                sessions = SessionRegistry()
                limits = PoolLimits(
                    max_shells=settings.sessions.max_shells,
                    idle_seconds=settings.sessions.idle_seconds,
                    grace_seconds=settings.kill.grace_seconds,
                )
                snapshots = (
                    SnapshotStore(runtime_dir, containment) if settings.bash.snapshot else None
                )
                shells = ShellPool(shells_tg, runtime_dir, sessions, limits, snapshots, containment)
                async with anyio.create_task_group() as requests:
                    server = Server(options, outbox, shells, sessions, requests)
                    server.watchdog = watchdog
                    _register_methods(server)
                    root.start_soon(server.housekeeping)
                    root.start_soon(_watch_signals, server.stop)
                    try:
                        async with anyio.create_task_group() as reader:
                            reader.start_soon(_read_input, server, fds.input, reader.cancel_scope)
                            reader.start_soon(_cancel_when, server.stop, reader.cancel_scope)
                            reader.start_soon(_cancel_when, outbox.broken, reader.cancel_scope)
                    finally:
                        await server.wind_down()
                    # Aborted requests answer quickly; one stuck on a full outbox is dropped.
                    with anyio.move_on_after(SHUTDOWN_FLUSH_SECONDS):
                        await server.wait_idle()
                    requests.cancel_scope.cancel()
                shells_tg.cancel_scope.cancel()
            outbox.close()
            with anyio.move_on_after(SHUTDOWN_FLUSH_SECONDS):
                await outbox.finished.wait()
            root.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            # A bug that escaped everything above still must not leave processes.
            if server is not None and not server.wound_down:
                await server.wind_down()
            await containment.kill_everything()
            await _kill_descendants({watchdog.pid}, 0)
        shutil.rmtree(runtime_dir, ignore_errors=True)
        stdio.restore_stdio(fds)
        watchdog.close()
    return 0
