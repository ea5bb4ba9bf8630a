"""The server: reads requests, runs them concurrently, and shuts down cleanly.

Cheap methods are answered inline by the reader; methods that wait on a
process run as tasks of the request task group. Every task has an owner:
the request group for requests, the shell group for shells, the root group
for the reader, the writer and the reaper.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import msgspec

from protocol import messages
from protocol.envelope import (
    Call,
    ErrorResponse,
    Notification,
    Rejected,
    SuccessResponse,
    encode,
    encode_batch,
    error_response,
    parse_line,
)
from protocol.errors import ErrorCode
from protocol.framing import LineFramer, Oversized
from protocol.methods import (
    DEFAULT_SESSION_ID,
    MAX_TIMEOUT_SECONDS,
    MIN_TIMEOUT_SECONDS,
    AbortBashParams,
    AbortBashResult,
    ArtifactReadParams,
    ArtifactReadResult,
    BashChunk,
    BashParams,
    BashResult,
    ExitParams,
    Params,
    SessionCloseParams,
    SessionCloseResult,
    SessionInfo,
    SessionListParams,
    SessionListResult,
    SessionOpenParams,
    SessionOpenResult,
    ShutdownParams,
)
from server import env as envmod
from server import log, procs, stdio
from server.artifacts import ArtifactNotFound, ArtifactStore
from server.chunks import ChunkStream
from server.dispatch import Dispatcher, RpcError
from server.executor import Execution, Executor, Outcome
from server.sessions import Session, SessionRegistry, ShellFactory
from server.settings import Settings
from server.shell import ShellConfig
from server.sink import OutputSink

# Requests that may run at once; beyond this a request is refused, not queued,
# so the reader never stalls and an abort can always get through.
MAX_IN_FLIGHT_REQUESTS = 256
# Shutdown must finish within a few seconds even with TERM-ignoring children.
SHUTDOWN_GRACE_SECONDS = 1.0
# How long queued output may take to reach a client at exit.
SHUTDOWN_FLUSH_SECONDS = 0.5
ORPHAN_REAP_INTERVAL_SECONDS = 1.0

_log = log.get("app")


@dataclass(frozen=True, slots=True)
class Options:
    settings: Settings
    workspace: Path
    shell: str
    artifacts_dir: Path


def clamp_timeout(seconds: float | None) -> float | None:
    if seconds is None:
        return None
    return min(max(seconds, MIN_TIMEOUT_SECONDS), MAX_TIMEOUT_SECONDS)


def _reject_nul(field: str, value: str | None) -> None:
    if value is not None and "\0" in value:
        raise RpcError(
            ErrorCode.INVALID_PARAMS,
            messages.INVALID_PARAMS,
            messages.FIELD_HAS_NUL.format(field=field),
        )


def bash_result(outcome: Outcome) -> BashResult:
    s = outcome.summary
    text = s.text if outcome.notice is None else f"{outcome.notice}\n{s.text}"
    return BashResult(
        output=text,
        exit_code=outcome.exit_code,
        cancelled=outcome.cancelled,
        timed_out=outcome.timed_out,
        truncated=s.truncated,
        total_lines=s.total_lines,
        total_bytes=s.total_bytes,
        output_lines=s.output_lines,
        output_bytes=s.output_bytes,
        working_dir=outcome.working_dir,
        artifact_id=outcome.artifact_id,
    )


class Server:
    def __init__(
        self,
        options: Options,
        outbox: stdio.Outbox,
        shells: ShellFactory,
        requests: anyio.abc.TaskGroup,
    ) -> None:
        self.options = options
        self.settings = options.settings
        self._outbox = outbox
        self._shells = shells
        self._requests = requests
        self._in_flight = 0
        self.idle = anyio.Event()
        self.idle.set()
        self._executions: set[Execution] = set()
        self._sessions = SessionRegistry()
        self._base_env = envmod.build(os.environ, self.settings.env)
        self._executor = Executor(shells, self.settings.kill.grace_seconds)
        self.artifacts = ArtifactStore(
            options.artifacts_dir, self.settings.artifacts.max_total_bytes
        )
        self.stop = anyio.Event()
        self.shutting_down = False
        self.dispatcher = Dispatcher()
        self._slow: set[str] = set()
        self._register()

    # -- method table -----------------------------------------------------

    def _register(self) -> None:
        self._add("bash", BashParams, self._bash, slow=True)
        self._add("abort_bash", AbortBashParams, self._abort_bash)
        self._add("session/open", SessionOpenParams, self._session_open, slow=True)
        self._add("session/close", SessionCloseParams, self._session_close, slow=True)
        self._add("session/list", SessionListParams, self._session_list)
        self._add("artifact/read", ArtifactReadParams, self._artifact_read)
        self._add("shutdown", ShutdownParams, self._shutdown, slow=True)
        self._add("exit", ExitParams, self._exit)

    def _add(
        self,
        name: str,
        params: type[Params],
        handler: Callable[[Call, Any], Awaitable[Any]],
        *,
        slow: bool = False,
    ) -> None:
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
                self._spawn(self._run_batch, items)
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

    def _spawn(self, fn: Callable[[Any], Awaitable[None]], arg: Any) -> None:
        if self._in_flight >= MAX_IN_FLIGHT_REQUESTS:
            self._requests.start_soon(self._refuse, arg)
            return
        self._in_flight += 1
        if self.idle.is_set():
            self.idle = anyio.Event()
        self._requests.start_soon(self._guarded, fn, arg)

    async def _guarded(self, fn: Callable[[Any], Awaitable[None]], arg: Any) -> None:
        try:
            await fn(arg)
        finally:
            self._in_flight -= 1
            if self._in_flight == 0:
                self.idle.set()

    async def _refuse(self, arg: Call | list[Call | Rejected]) -> None:
        calls = arg if isinstance(arg, list) else [arg]
        replies = [
            error_response(ErrorCode.SERVER_BUSY, messages.SERVER_BUSY, c.reply_id)
            for c in calls
            if isinstance(c, Call) and not c.is_notification
        ]
        if isinstance(arg, list) and replies:
            await self._outbox.put(encode_batch(list(replies)))
        elif replies:
            await self._reply(replies[0])

    async def _run_single(self, call: Call) -> None:
        reply = await self._answer(call)
        if reply is not None:
            await self._reply(reply)

    async def _run_batch(self, items: list[Call | Rejected]) -> None:
        replies: list[ErrorResponse | SuccessResponse | None] = [None] * len(items)

        async def one(index: int, item: Call | Rejected) -> None:
            replies[index] = (
                item.response if isinstance(item, Rejected) else await self._answer(item)
            )

        async with anyio.create_task_group() as tg:
            for index, item in enumerate(items):
                tg.start_soon(one, index, item)
        answered = [r for r in replies if r is not None]
        if answered:
            await self._outbox.put(encode_batch(answered))

    async def _answer(self, call: Call) -> ErrorResponse | SuccessResponse | None:
        if self.shutting_down and call.method not in ("exit", "shutdown"):
            if call.is_notification:
                return None
            return error_response(ErrorCode.SHUTTING_DOWN, messages.SHUTTING_DOWN, call.reply_id)
        return await self.dispatcher.dispatch(call)

    async def _reply(self, message: ErrorResponse | SuccessResponse) -> None:
        await self._outbox.put(encode(message))

    async def notify(self, method: str, params: msgspec.Struct) -> None:
        await self._outbox.put(encode(Notification(method=method, params=params)))

    # -- sessions ---------------------------------------------------------

    def _resolve_dir(self, base: str, cwd: str) -> str:
        path = os.path.normpath(os.path.join(base, os.path.expanduser(cwd)))
        if not os.path.isdir(path):
            raise RpcError(
                ErrorCode.INVALID_PARAMS,
                messages.INVALID_PARAMS,
                messages.CWD_NOT_DIRECTORY.format(path=path),
            )
        return path

    def _new_session(self, session_id: str, cwd: str, env: dict[str, str] | None) -> Session:
        session_env = envmod.without_guards(env)
        config = ShellConfig(
            shell=self.options.shell,
            prefix=self.settings.prefix,
            snapshot=None,
            env=tuple(sorted(session_env.items())),
        )
        full_env = envmod.build(os.environ, self.settings.env, session_env)
        return self._sessions.add(Session(session_id, config, full_env, cwd))

    def _session(self, session_id: str) -> Session:
        session = self._sessions.get(session_id)
        if session is None:
            session = self._new_session(session_id, str(self.options.workspace), None)
        return session

    async def _session_open(self, call: Call, p: SessionOpenParams) -> SessionOpenResult:
        _reject_nul("cwd", p.cwd)
        for name, value in (p.env or {}).items():
            _reject_nul(f"env.{name}", value)
        session_id = p.session_id or self._sessions.new_id()
        session = self._sessions.get(session_id)
        if session is None:
            cwd = str(self.options.workspace)
            if p.cwd is not None:
                cwd = self._resolve_dir(cwd, p.cwd)
            session = self._new_session(session_id, cwd, p.env)
        return SessionOpenResult(session_id=session.id, cwd=session.cwd)

    async def _session_close(self, call: Call, p: SessionCloseParams) -> SessionCloseResult:
        session = self._sessions.pop(p.session_id)
        if session is None:
            return SessionCloseResult(closed=False)
        for execution in list(self._executions):
            if execution.session_id == session.id:
                execution.abort()
        if session.shell is not None:
            await self._shells.close(session.shell, self._executor.grace_seconds)
            session.shell = None
        return SessionCloseResult(closed=True)

    async def _session_list(self, call: Call, p: SessionListParams) -> SessionListResult:
        return SessionListResult(
            sessions=[
                SessionInfo(
                    session_id=s.id,
                    state="busy" if s.busy else "idle",
                    pid=None if s.shell is None else s.shell.pid,
                    cwd=s.cwd,
                )
                for s in self._sessions.all()
            ]
        )

    # -- bash -------------------------------------------------------------

    async def _bash(self, call: Call, p: BashParams) -> BashResult:
        _reject_nul("command", p.command)
        _reject_nul("cwd", p.cwd)
        for name, value in (p.env or {}).items():
            _reject_nul(f"env.{name}", value)
        session = self._session(p.session_id)
        execution = Execution(call.reply_id, session.id)
        self._executions.add(execution)

        async def emit(seq: int, text: str) -> None:
            await self.notify(
                "bash/chunk",
                BashChunk(request_id=call.reply_id, session_id=session.id, seq=seq, text=text),
            )

        stream = ChunkStream(emit)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(stream.run)
                try:
                    outcome = await self._executor.run(
                        session,
                        p.command,
                        cwd=p.cwd,
                        env=envmod.without_guards(p.env),
                        timeout=clamp_timeout(p.timeout),
                        sink=OutputSink(self.settings.output.max_bytes, self.artifacts.create),
                        on_text=stream.push,
                        execution=execution,
                    )
                finally:
                    with anyio.CancelScope(shield=True):
                        await stream.close()
        finally:
            self._executions.discard(execution)
        return bash_result(outcome)

    async def _abort_bash(self, call: Call, p: AbortBashParams) -> AbortBashResult:
        session_id = p.session_id
        if session_id is None and p.request_id is None:
            session_id = DEFAULT_SESSION_ID
        aborted = False
        for execution in list(self._executions):
            if p.request_id is not None and execution.request_id != p.request_id:
                continue
            if session_id is not None and execution.session_id != session_id:
                continue
            aborted = execution.abort() or aborted
        return AbortBashResult(aborted=aborted)

    # -- artifacts --------------------------------------------------------

    async def _artifact_read(self, call: Call, p: ArtifactReadParams) -> ArtifactReadResult:
        try:
            chunk = self.artifacts.read(p.id, p.offset, p.limit)
        except ArtifactNotFound as exc:
            raise RpcError(
                ErrorCode.ARTIFACT_NOT_FOUND,
                messages.artifact_not_found(exc.artifact_id, exc.available),
                {"available": exc.available},
            ) from None
        return ArtifactReadResult(
            id=p.id,
            text=chunk.data.decode("utf-8", "replace"),
            offset=chunk.offset,
            next_offset=chunk.next_offset,
            total_bytes=chunk.total_bytes,
        )

    # -- lifecycle --------------------------------------------------------

    async def _shutdown(self, call: Call, p: ShutdownParams) -> None:
        await self.wind_down()
        return None

    async def _exit(self, call: Call, p: ExitParams) -> None:
        self.stop.set()

    async def wind_down(self) -> None:
        """Abort everything and kill every process the server started."""
        self.shutting_down = True
        self._executor.grace_seconds = min(self._executor.grace_seconds, SHUTDOWN_GRACE_SECONDS)
        for execution in list(self._executions):
            execution.abort()
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for shell in list(self._shells.live):
                    tg.start_soon(self._shells.close, shell, SHUTDOWN_GRACE_SECONDS)
            for session in self._sessions.all():
                session.shell = None
            # Whatever escaped every shell is still below us, thanks to the subreaper.
            await procs.terminate(
                procs.descendants(), SHUTDOWN_GRACE_SECONDS, rescan=procs.descendants
            )
            procs.reap_orphans(self._shells.pids())

    async def reap_forever(self) -> None:
        while True:
            await anyio.sleep(ORPHAN_REAP_INTERVAL_SECONDS)
            procs.reap_orphans(self._shells.pids())


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


async def serve(options: Options) -> int:
    """Serve until stdin ends, `exit`, a signal, or stdout breaks; then clean up."""
    fds = stdio.take_over_stdio()
    procs.become_subreaper()
    runtime_dir = Path(tempfile.mkdtemp(prefix="bashrpc-"))
    outbox = stdio.Outbox(fds.output)
    try:
        async with anyio.create_task_group() as root:
            root.start_soon(outbox.run)
            async with anyio.create_task_group() as shells_tg:
                shells = ShellFactory(shells_tg, runtime_dir)
                async with anyio.create_task_group() as requests:
                    server = Server(options, outbox, shells, requests)
                    root.start_soon(server.reap_forever)
                    root.start_soon(_watch_signals, server.stop)
                    async with anyio.create_task_group() as reader:
                        reader.start_soon(_read_input, server, fds.input, reader.cancel_scope)
                        reader.start_soon(_cancel_when, server.stop, reader.cancel_scope)
                        reader.start_soon(_cancel_when, outbox.broken, reader.cancel_scope)
                    await server.wind_down()
                    # Aborted requests answer quickly; one stuck on a full outbox is dropped.
                    with anyio.move_on_after(SHUTDOWN_FLUSH_SECONDS):
                        await server.idle.wait()
                    requests.cancel_scope.cancel()
                shells_tg.cancel_scope.cancel()
            outbox.close()
            with anyio.move_on_after(SHUTDOWN_FLUSH_SECONDS):
                await outbox.finished.wait()
            root.cancel_scope.cancel()
    finally:
        shutil.rmtree(runtime_dir, ignore_errors=True)
        stdio.restore_stdio(fds)
    return 0
