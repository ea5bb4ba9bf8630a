"""The host's own surface: `bash`, `abort_bash`, sessions, artifacts, shutdown.

Commands here run exactly as given: no normalization, no interception.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio

from protocol import messages, paths
from protocol.envelope import Call
from protocol.errors import ErrorCode
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
    Cursor,
    ExitParams,
    PtyInputParams,
    PtyInputResult,
    PtyOutput,
    PtyResizeParams,
    PtyResizeResult,
    PtyScreen,
    PtyScreenParams,
    PtySize,
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
from server.app import no_such_pty
from server.artifacts import ArtifactNotFound
from server.chunks import ChunkStream, RawStream
from server.dispatch import RpcError
from server.executor import Execution, Outcome, PtyRequest
from server.keys import UnknownKey, encode_keys
from server.pty import clamp_size
from server.sessions import Session
from server.sink import OutputSink

if TYPE_CHECKING:
    from server.app import Server


def clamp_timeout(seconds: float) -> float:
    return min(max(seconds, MIN_TIMEOUT_SECONDS), MAX_TIMEOUT_SECONDS)


def reject_nul(field: str, value: str | None) -> None:
    """NUL cannot reach bash (it ends C strings), so it is refused up front."""
    if value is not None and "\0" in value:
        raise RpcError(
            ErrorCode.INVALID_PARAMS,
            messages.INVALID_PARAMS,
            messages.FIELD_HAS_NUL.format(field=field),
        )


def reject_nul_env(env: dict[str, str] | None) -> None:
    for name, value in (env or {}).items():
        reject_nul(f"env.{name}", value)


def bash_result(outcome: Outcome) -> BashResult:
    s = outcome.summary
    text = s.text if outcome.notice is None else f"{outcome.notice}\n{s.text}"
    working_dir, working_dir_base64 = (None, None)
    if outcome.working_dir is not None:
        working_dir, working_dir_base64 = paths.to_wire(outcome.working_dir)
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
        working_dir=working_dir,
        working_dir_base64=working_dir_base64,
        artifact_id=outcome.artifact_id,
        artifact_truncated=outcome.artifact_truncated,
    )


async def run_on_pty(
    server: Server,
    call: Call,
    session: Session,
    command: str,
    *,
    cwd: str | None,
    env: dict[str, str],
    timeout: float | None,
    sink: OutputSink,
    size: tuple[int, int],
    execution: Execution,
    on_text: Callable[[bytes], None] = lambda _clean: None,
) -> Outcome:
    """Run on a PTY, streaming the raw terminal bytes as `pty/output`."""

    async def emit(data: str) -> None:
        await server.notify("pty/output", PtyOutput(request_id=call.reply_id, data=data))

    async with anyio.create_task_group() as tg:
        raw = RawStream(emit, tg)
        try:
            outcome = await server.executor.run_pty(
                session,
                command,
                cwd=cwd,
                timeout=timeout,
                sink=sink,
                on_text=on_text,
                execution=execution,
                terminal=PtyRequest(cols=size[0], rows=size[1], on_raw=raw.push, env=env),
            )
        finally:
            with anyio.CancelScope(shield=True):
                await raw.close()
    return outcome


def register(server: Server) -> None:
    async def bash(call: Call, p: BashParams) -> BashResult:
        reject_nul("command", p.command)
        reject_nul("cwd", p.cwd)
        reject_nul_env(p.env)
        session = server.session(p.session_id)

        async def emit(seq: int, text: str, skipped: int) -> None:
            chunk = BashChunk(
                request_id=call.reply_id, session_id=session.id, seq=seq, text=text, skipped=skipped
            )
            await server.notify("bash/chunk", chunk)

        timeout = None if p.timeout is None else clamp_timeout(p.timeout)
        sink = OutputSink(server.settings.output.max_bytes, server.artifacts.create)
        execution = Execution(call.reply_id, session.id)
        if p.pty:
            size = p.pty if isinstance(p.pty, PtySize) else PtySize()
            with server.track(execution):
                outcome = await run_on_pty(
                    server,
                    call,
                    session,
                    p.command,
                    cwd=p.cwd,
                    env=p.env or {},
                    timeout=timeout,
                    sink=sink,
                    size=clamp_size(size.cols, size.rows),
                    execution=execution,
                )
            return bash_result(outcome)
        with server.track(execution):
            async with anyio.create_task_group() as tg:
                stream = ChunkStream(emit, tg)
                try:
                    outcome = await server.executor.run(
                        session,
                        p.command,
                        cwd=p.cwd,
                        env=envmod.without_guards(p.env),
                        timeout=timeout,
                        sink=sink,
                        on_text=stream.push,
                        execution=execution,
                        backpressure=stream,
                    )
                finally:
                    with anyio.CancelScope(shield=True):
                        await stream.close()
        return bash_result(outcome)

    async def abort_bash(call: Call, p: AbortBashParams) -> AbortBashResult:
        session_id = p.session_id
        if session_id is None and p.request_id is None:
            session_id = DEFAULT_SESSION_ID
        return AbortBashResult(aborted=server.abort(request_id=p.request_id, session_id=session_id))

    async def session_open(call: Call, p: SessionOpenParams) -> SessionOpenResult:
        reject_nul("cwd", p.cwd)
        reject_nul_env(p.env)
        session_id = p.session_id or server.sessions.new_id()
        session = server.sessions.get(session_id)
        if session is None:
            cwd = str(server.options.workspace)
            if p.cwd is not None:
                cwd = server.resolve_dir(cwd, p.cwd)
            session = server.new_session(session_id, cwd, p.env)
        cwd, cwd_base64 = paths.to_wire(session.cwd)
        return SessionOpenResult(session_id=session.id, cwd=cwd, cwd_base64=cwd_base64)

    async def session_close(call: Call, p: SessionCloseParams) -> SessionCloseResult:
        session = server.sessions.pop(p.session_id)
        if session is None:
            return SessionCloseResult(closed=False)
        server.abort(session_id=session.id)
        if session.shell is not None:
            await server.shells.close(session.shell, server.executor.grace_seconds)
            session.shell = None
        return SessionCloseResult(closed=True)

    async def session_list(call: Call, p: SessionListParams) -> SessionListResult:
        table = server.shells.process_table()
        infos = []
        for s in server.sessions.all():
            cwd, cwd_base64 = paths.to_wire(s.cwd)
            infos.append(
                SessionInfo(
                    session_id=s.id,
                    state="busy" if s.busy else "idle",
                    pid=None if s.shell is None else s.shell.pid,
                    cwd=cwd,
                    cwd_base64=cwd_base64,
                    background_jobs=s.background_jobs(table),
                )
            )
        return SessionListResult(sessions=infos)

    async def artifact_read(call: Call, p: ArtifactReadParams) -> ArtifactReadResult:
        try:
            chunk = server.artifacts.read(p.id, p.offset, p.limit)
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

    async def pty_input(call: Call, p: PtyInputParams) -> PtyInputResult:
        execution = server.pty_of(p.request_id)
        assert execution.pty is not None
        data = (p.data or "").encode()
        try:
            data += encode_keys(p.keys or [], app_cursor=execution.pty.screen.app_cursor)
        except UnknownKey as exc:
            raise RpcError(
                ErrorCode.INVALID_PARAMS,
                messages.INVALID_PARAMS,
                messages.UNKNOWN_KEY.format(key=exc.key, index=exc.index),
            ) from None
        try:
            await execution.pty.write(data)
        except OSError:
            # The program closed its terminal between the lookup and the write.
            raise no_such_pty(p.request_id) from None
        return PtyInputResult(bytes_written=len(data))

    async def pty_resize(call: Call, p: PtyResizeParams) -> PtyResizeResult:
        execution = server.pty_of(p.request_id)
        assert execution.pty is not None
        cols, rows = clamp_size(p.cols, p.rows)
        execution.pty.resize(cols, rows)
        return PtyResizeResult(cols=cols, rows=rows)

    async def pty_screen(call: Call, p: PtyScreenParams) -> PtyScreen:
        execution = server.pty_of(p.request_id)
        assert execution.pty is not None
        snap = execution.pty.snapshot()
        return PtyScreen(
            cols=snap.cols,
            rows=snap.rows,
            lines=snap.lines,
            cursor=Cursor(x=snap.cursor_x, y=snap.cursor_y),
        )

    async def shutdown(call: Call, p: ShutdownParams) -> None:
        await server.wind_down()

    async def exit_(call: Call, p: ExitParams) -> None:
        server.stop.set()

    server.add_method("bash", BashParams, bash, slow=True)
    server.add_method("abort_bash", AbortBashParams, abort_bash)
    server.add_method("session/open", SessionOpenParams, session_open)
    server.add_method("session/close", SessionCloseParams, session_close, slow=True)
    server.add_method("session/list", SessionListParams, session_list)
    server.add_method("artifact/read", ArtifactReadParams, artifact_read)
    server.add_method("pty/input", PtyInputParams, pty_input)
    server.add_method("pty/resize", PtyResizeParams, pty_resize)
    server.add_method("pty/screen", PtyScreenParams, pty_screen)
    server.add_method("shutdown", ShutdownParams, shutdown, slow=True)
    server.add_method("exit", ExitParams, exit_)
