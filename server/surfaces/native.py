"""The host's own surface: `bash`, `abort_bash`, sessions, artifacts, PTY control, lifecycle.

Commands here run exactly as given: no normalization, no interception.
"""

from __future__ import annotations

from bashrpc.protocol import messages, paths
from bashrpc.protocol.methods import (
    DEFAULT_SESSION_ID,
    AbortBashParams,
    AbortBashResult,
    ArtifactReadParams,
    ArtifactReadResult,
    BashAttachParams,
    BashParams,
    BashResult,
    Cursor,
    ExitParams,
    PtyInputParams,
    PtyInputResult,
    PtyResizeParams,
    PtyResizeResult,
    PtyScreen,
    PtyScreenParams,
    RequestInfo,
    SecretsAddParams,
    SecretsAddResult,
    ServerStatsParams,
    ServerStatsResult,
    SessionCloseParams,
    SessionCloseResult,
    SessionInfo,
    SessionListParams,
    SessionListResult,
    SessionOpenParams,
    SessionOpenResult,
    SessionResetInfo,
    SessionResetParams,
    SessionResetResult,
    ShutdownParams,
)
from bashrpc.server import errors
from bashrpc.server.connection import RequestContext
from bashrpc.server.observe.stats import STATS
from bashrpc.server.services import bashcall, bashjobs, request
from bashrpc.server.services.api import Services
from bashrpc.server.services.commands import terminal
from bashrpc.server.services.keys import encode_keys
from bashrpc.server.services.streams import needs_input
from bashrpc.server.settings import tightened
from bashrpc.server.wire.registry import Registry

methods = Registry()
# What a handler gets: the connection and these services, typed.
Ctx = RequestContext[Services]


def _admit_bash(ctx: Ctx, params: BashParams) -> None:
    """A PTY takes input and size from now on, before its program is spawned."""
    if bashjobs.wanted(params):
        bashjobs.check(params)
        # A job, not a command of the session: an abort read before it starts
        # cancels it before its job exists.
        assert ctx.flight is not None
        ctx.flight.runs_no_command()
        return
    pty = bashcall.pty_terminal(params)
    if pty is not None:
        assert ctx.flight is not None
        ctx.flight.keep(ctx.services.commands.accept_pty(ctx.id, pty).close)


@methods.method("bash", admit=_admit_bash)
async def bash(ctx: Ctx, params: BashParams) -> BashResult:
    settings, terminals = ctx.connection.settings, ctx.services.jobs
    planned = bashcall.planned(params, request_id=ctx.id, settings=settings, terminals=terminals)
    if bashjobs.returns_on_input(params) and isinstance(planned, request.Command):
        return await bashjobs.on_input_return(ctx, ctx.services, planned, terminals)
    return await request.serve(ctx, ctx.services, planned)


@methods.method("bash/attach")
async def bash_attach(ctx: Ctx, params: BashAttachParams) -> BashResult:
    """A request of this client's, maybe begun on a cut connection: the
    notifications it sent after `afterSeq` (its chunks, a PTY's output, a tool
    call's progress), as sent, then live ones, then its result."""
    resumables = ctx.services.resumables
    if resumables is None:
        raise errors.InvalidArgument(
            messages.NO_SUCH_RESUMABLE.format(request_id=params.request_id)
        )
    record = resumables.find(params.request_id)
    return await resumables.follow(
        record, params.after_seq, ctx.connection, ctx.notify, params.accept_gap
    )


@methods.method("abort_bash")
def abort_bash(ctx: Ctx, params: AbortBashParams) -> AbortBashResult:
    if params.request_id is not None and params.session_id is None:
        # Any request of this connection in flight under that id (a command, or a PTY
        # write); only when there is none, its client's request of a cut connection.
        if ctx.connection.cancel(params.request_id):
            return AbortBashResult(aborted=True)
        resumables = ctx.services.resumables
        aborted = resumables is not None and resumables.abort(params.request_id)
        return AbortBashResult(aborted=aborted)
    aborted = ctx.services.commands.abort(
        request_id=params.request_id, session_id=params.session_id or DEFAULT_SESSION_ID
    )
    return AbortBashResult(aborted=aborted)


@methods.method("session/open")
def session_open(ctx: Ctx, params: SessionOpenParams) -> SessionOpenResult:
    mode = tightened(ctx.connection.settings.sandbox.mode, params.sandbox)
    session_id, cwd = ctx.services.sessions.open(
        params.session_id,
        params.cwd,
        params.env,
        mode,
        params.secret_env or (),
        params.network,
    )
    text, exact = paths.to_wire(cwd)
    return SessionOpenResult(session_id=session_id, cwd=text, cwd_base64=exact)


@methods.method("secrets/add")
def secrets_add(ctx: Ctx, params: SecretsAddParams) -> SecretsAddResult:
    named = [(secret.name, secret.value) for secret in params.secrets]
    return SecretsAddResult(added=ctx.services.add_secrets(named, params.session_id))


@methods.method("session/close")
async def session_close(ctx: Ctx, params: SessionCloseParams) -> SessionCloseResult:
    return SessionCloseResult(closed=await ctx.services.sessions.close(params.session_id))


@methods.method("session/list")
def session_list(ctx: Ctx, params: SessionListParams) -> SessionListResult:
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
                owner=view.owner,
                requests=_requests(ctx, view.id),
                queued=view.queued or None,
                network=view.network,
                connections=view.connections,
                needs_input=[needs_input(w) for w in view.input_waits] or None,
            )
        )
    return SessionListResult(sessions=infos)


def _requests(ctx: Ctx, session_id: str) -> list[RequestInfo] | None:
    """The session's requests a `bash/attach` may resume (under the daemon, for a clientId)."""
    resumables = ctx.services.resumables
    if resumables is None:
        return None
    return [
        RequestInfo(
            request_id=r.request_id, method=r.method, seq=r.log.next_seq, state=r.state, pty=r.pty
        )
        for r in resumables.records.values()
        if r.session_id == session_id
    ]


@methods.method("session/reset")
async def session_reset(ctx: Ctx, params: SessionResetParams) -> SessionResetResult:
    done = await ctx.services.sessions.reset(params.session_id)
    return SessionResetResult(
        sessions=[
            SessionResetInfo(
                session_id=r.id,
                processes_killed=r.cleaned.processes,
                commands_aborted=r.commands_aborted,
                jobs_ended=r.jobs_ended,
                tmp_entries_removed=r.cleaned.tmp_entries,
                cwd=paths.to_wire(r.cwd)[0],
            )
            for r in done
        ]
    )


@methods.method("server/stats")
def server_stats(ctx: Ctx, params: ServerStatsParams) -> ServerStatsResult:
    return STATS.figures(ctx.services.gauges())


@methods.method("artifact/read")
def artifact_read(ctx: Ctx, params: ArtifactReadParams) -> ArtifactReadResult:
    chunk = ctx.services.artifacts.read(params.id, params.offset, params.limit)
    text, exact = paths.bytes_to_wire(chunk.data)
    return ArtifactReadResult(
        id=params.id,
        text=text,
        offset=chunk.offset,
        next_offset=chunk.next_offset,
        total_bytes=chunk.total_bytes,
        text_base64=exact,
    )


def _admit_input(ctx: Ctx, params: PtyInputParams) -> None:
    """Bad keys are refused now; the write takes its place in line behind earlier ones."""
    encode_keys(params.keys or [], app_cursor=False)
    lane = ctx.services.pty(params.request_id)
    assert ctx.flight is not None
    lane.reserve(ctx.flight)
    ctx.flight.keep(lambda: lane.withdraw(ctx.flight))


@methods.method("pty/input", admit=_admit_input)
async def pty_input(ctx: Ctx, params: PtyInputParams) -> PtyInputResult:
    lane = ctx.services.pty(params.request_id)
    if params.secret and params.data and (await lane.running()).echoes():
        raise errors.InvalidArgument(messages.SECRET_WOULD_ECHO)

    def encode(app_cursor: bool) -> bytes:
        return (params.data or "").encode() + encode_keys(params.keys or [], app_cursor=app_cursor)

    return PtyInputResult(bytes_written=await lane.write(ctx.flight, encode))


@methods.method("pty/resize")
def pty_resize(ctx: Ctx, params: PtyResizeParams) -> PtyResizeResult:
    size = terminal(params.cols, params.rows)
    ctx.services.pty(params.request_id).resize(size.cols, size.rows)
    return PtyResizeResult(cols=size.cols, rows=size.rows)


@methods.method("pty/screen")
async def pty_screen(ctx: Ctx, params: PtyScreenParams) -> PtyScreen:
    lane = ctx.services.pty(params.request_id)
    run = await lane.running()
    snap = await run.snapshot()
    return PtyScreen(
        cols=snap.cols,
        rows=snap.rows,
        lines=lane.screen_filter(snap.lines, snap.cols),
        cursor=Cursor(x=snap.cursor_x, y=snap.cursor_y),
    )


@methods.method("shutdown")
async def shutdown(ctx: Ctx, params: ShutdownParams) -> None:
    await ctx.connection.wind_down()
    # The host is done with its sessions, not just this connection (under the daemon).
    await ctx.services.shut_down()


@methods.method("exit")
def exit_(ctx: Ctx, params: ExitParams) -> None:
    ctx.connection.stop.set()
