"""The host's own surface: `bash`, `abort_bash`, sessions, artifacts, PTY control, lifecycle.

Commands here run exactly as given: no normalization, no interception.
"""

from __future__ import annotations

from protocol import paths
from protocol.methods import (
    DEFAULT_SESSION_ID,
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
from server.connection import RequestContext
from server.services.commands import CommandSpec, Outcome, Terminal, clamp_timeout, terminal
from server.services.keys import encode_keys
from server.services.streams import command_streams, streaming
from server.settings import tightened
from server.wire.registry import Registry

methods = Registry()


def _terminal(params: BashParams) -> Terminal | None:
    if not params.pty:
        return None
    size = params.pty if isinstance(params.pty, PtySize) else PtySize()
    return terminal(size.cols, size.rows)


def _admit_bash(ctx: RequestContext, params: BashParams) -> None:
    """A PTY takes input and size from now on, before its program is spawned."""
    pty = _terminal(params)
    if pty is not None:
        assert ctx.flight is not None
        ctx.flight.keep(ctx.services.commands.accept_pty(ctx.id, pty).close)


@methods.method("bash", admit=_admit_bash)
async def bash(ctx: RequestContext, params: BashParams) -> BashResult:
    pty = _terminal(params)
    spec = CommandSpec(
        command=params.command,
        session_id=params.session_id,
        cwd=params.cwd,
        timeout=None if params.timeout is None else clamp_timeout(params.timeout),
        max_bytes=ctx.connection.settings.output.max_bytes,
        request_id=ctx.id,
        env=params.env or {},
        terminal=pty,
        sandbox=ctx.connection.settings.sandbox.mode,
    )

    async def emit_chunk(seq: int, text: str, skipped: int) -> None:
        chunk = BashChunk(
            request_id=ctx.id, session_id=params.session_id, seq=seq, text=text, skipped=skipped
        )
        await ctx.notify("bash/chunk", chunk)

    async def emit_raw(data: str) -> None:
        await ctx.notify("pty/output", PtyOutput(request_id=ctx.id, data=data))

    streams = command_streams(emit_chunk, emit_raw, terminal=pty is not None)
    async with streaming(streams, ctx.tasks) as out:
        outcome = await ctx.services.commands.run(spec, out, ctx.flight)
    return bash_result(outcome)


def bash_result(outcome: Outcome) -> BashResult:
    s = outcome.summary
    # How the command ended, then what became of its shell; the output; the sandbox.
    heading = (line for line in (outcome.notice, outcome.shell_notice) if line is not None)
    text = "".join(f"{line}\n" for line in heading) + s.text
    if outcome.sandbox_denied is not None:
        text += ("" if not text or text.endswith("\n") else "\n") + outcome.sandbox_denied + "\n"
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
        sandbox_denied=outcome.sandbox_denied is not None,
        shell_restarted=outcome.shell_restarted,
    )


@methods.method("abort_bash")
def abort_bash(ctx: RequestContext, params: AbortBashParams) -> AbortBashResult:
    if params.request_id is not None and params.session_id is None:
        # Any request of this connection in flight under that id: a command, or a PTY write.
        return AbortBashResult(aborted=ctx.connection.cancel(params.request_id))
    aborted = ctx.services.commands.abort(
        request_id=params.request_id, session_id=params.session_id or DEFAULT_SESSION_ID
    )
    return AbortBashResult(aborted=aborted)


@methods.method("session/open")
def session_open(ctx: RequestContext, params: SessionOpenParams) -> SessionOpenResult:
    mode = tightened(ctx.connection.settings.sandbox.mode, params.sandbox)
    session_id, cwd = ctx.services.sessions.open(params.session_id, params.cwd, params.env, mode)
    text, exact = paths.to_wire(cwd)
    return SessionOpenResult(session_id=session_id, cwd=text, cwd_base64=exact)


@methods.method("session/close")
async def session_close(ctx: RequestContext, params: SessionCloseParams) -> SessionCloseResult:
    return SessionCloseResult(closed=await ctx.services.sessions.close(params.session_id))


@methods.method("session/list")
def session_list(ctx: RequestContext, params: SessionListParams) -> SessionListResult:
    infos = []
    for view in ctx.services.sessions.list():
        cwd, cwd_base64 = paths.to_wire(view.cwd)
        infos.append(
            SessionInfo(
                session_id=view.id,
                state="busy" if view.busy else "idle",
                pid=view.pid,
                cwd=cwd,
                cwd_base64=cwd_base64,
                background_jobs=view.background_jobs,
            )
        )
    return SessionListResult(sessions=infos)


@methods.method("artifact/read")
def artifact_read(ctx: RequestContext, params: ArtifactReadParams) -> ArtifactReadResult:
    chunk = ctx.services.artifacts.read(params.id, params.offset, params.limit)
    return ArtifactReadResult(
        id=params.id,
        text=chunk.data.decode("utf-8", "replace"),
        offset=chunk.offset,
        next_offset=chunk.next_offset,
        total_bytes=chunk.total_bytes,
    )


def _admit_input(ctx: RequestContext, params: PtyInputParams) -> None:
    """Bad keys are refused now; the write takes its place in line behind earlier ones."""
    encode_keys(params.keys or [], app_cursor=False)
    lane = ctx.services.commands.pty(params.request_id)
    assert ctx.flight is not None
    lane.reserve(ctx.flight)
    ctx.flight.keep(lambda: lane.withdraw(ctx.flight))


@methods.method("pty/input", admit=_admit_input)
async def pty_input(ctx: RequestContext, params: PtyInputParams) -> PtyInputResult:
    lane = ctx.services.commands.pty(params.request_id)

    def encode(app_cursor: bool) -> bytes:
        return (params.data or "").encode() + encode_keys(params.keys or [], app_cursor=app_cursor)

    return PtyInputResult(bytes_written=await lane.write(ctx.flight, encode))


@methods.method("pty/resize")
def pty_resize(ctx: RequestContext, params: PtyResizeParams) -> PtyResizeResult:
    size = terminal(params.cols, params.rows)
    ctx.services.commands.pty(params.request_id).resize(size.cols, size.rows)
    return PtyResizeResult(cols=size.cols, rows=size.rows)


@methods.method("pty/screen")
async def pty_screen(ctx: RequestContext, params: PtyScreenParams) -> PtyScreen:
    run = await ctx.services.commands.pty(params.request_id).running()
    snap = await run.snapshot()
    return PtyScreen(
        cols=snap.cols,
        rows=snap.rows,
        lines=snap.lines,
        cursor=Cursor(x=snap.cursor_x, y=snap.cursor_y),
    )


@methods.method("shutdown")
async def shutdown(ctx: RequestContext, params: ShutdownParams) -> None:
    await ctx.connection.wind_down()
    # The host is done with its sessions, not just this connection (under the daemon).
    await ctx.services.shut_down()


@methods.method("exit")
def exit_(ctx: RequestContext, params: ExitParams) -> None:
    ctx.connection.stop.set()
