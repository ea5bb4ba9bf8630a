"""The host's own surface: `bash`, `abort_bash`, sessions, artifacts, shutdown.

Commands here run exactly as given: no normalization, no interception.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from protocol import messages
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
    ExitParams,
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
from server.artifacts import ArtifactNotFound
from server.chunks import ChunkStream
from server.dispatch import RpcError
from server.executor import Execution, Outcome
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


def register(server: Server) -> None:
    async def bash(call: Call, p: BashParams) -> BashResult:
        reject_nul("command", p.command)
        reject_nul("cwd", p.cwd)
        reject_nul_env(p.env)
        session = server.session(p.session_id)

        async def emit(seq: int, text: str) -> None:
            chunk = BashChunk(request_id=call.reply_id, session_id=session.id, seq=seq, text=text)
            await server.notify("bash/chunk", chunk)

        stream = ChunkStream(emit)
        execution = Execution(call.reply_id, session.id)
        with server.track(execution):
            async with anyio.create_task_group() as tg:
                tg.start_soon(stream.run)
                try:
                    outcome = await server.executor.run(
                        session,
                        p.command,
                        cwd=p.cwd,
                        env=envmod.without_guards(p.env),
                        timeout=None if p.timeout is None else clamp_timeout(p.timeout),
                        sink=OutputSink(server.settings.output.max_bytes, server.artifacts.create),
                        on_text=stream.push,
                        execution=execution,
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
        return SessionOpenResult(session_id=session.id, cwd=session.cwd)

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
        return SessionListResult(
            sessions=[
                SessionInfo(
                    session_id=s.id,
                    state="busy" if s.busy else "idle",
                    pid=None if s.shell is None else s.shell.pid,
                    cwd=s.cwd,
                )
                for s in server.sessions.all()
            ]
        )

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
    server.add_method("shutdown", ShutdownParams, shutdown, slow=True)
    server.add_method("exit", ExitParams, exit_)
