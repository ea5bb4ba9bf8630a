"""The host's own surface: `bash`, `abort_bash`, sessions, artifacts, PTY control, lifecycle.

Commands here run exactly as given: no normalization, no interception.
"""

from __future__ import annotations

import msgspec

from bashrpc.protocol import messages, paths
from bashrpc.protocol.mcp import ProgressParams
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
    PtyOutput,
    PtyResizeParams,
    PtyResizeResult,
    PtyScreen,
    PtyScreenParams,
    RequestInfo,
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
from bashrpc.server.services import bashcall, bashjobs
from bashrpc.server.services.api import Services
from bashrpc.server.services.commands import CommandSpec, terminal
from bashrpc.server.services.keys import encode_keys
from bashrpc.server.services.resumable import Resumable, Resumables
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
    if bashjobs.wanted(params):
        return await bashjobs.run(ctx.services.terminals, params, ctx.connection.settings)
    spec = bashcall.plan(params, request_id=ctx.id, settings=ctx.connection.settings)
    resumables = ctx.services.resumables
    record = None if resumables is None else _record(ctx, resumables, spec)
    if record is not None:
        record.cancel = None if ctx.flight is None else ctx.flight.cancel
    listener = bashcall.listener(ctx.notify, spec, record)
    result: BashResult | None = None
    try:
        began = None if record is None else record.begin
        outcome = await ctx.services.commands.stream(spec, listener, ctx.tasks, ctx.flight, began)
        result = bashcall.finish(outcome)
        return result
    finally:
        if record is not None and resumables is not None:
            resumables.end(record, result)


def _record(ctx: Ctx, resumables: Resumables, spec: CommandSpec) -> Resumable | None:
    """The request's record for a resume; a PTY's holds the lane accepted for it
    (always there: its command has not started yet)."""
    if spec.terminal is None:
        return resumables.start(ctx.id, "bash", spec.session_id, ctx.connection)
    lane = ctx.services.commands.accepted_pty(ctx.id)
    if lane is None:
        return None
    return resumables.start(ctx.id, "bash", spec.session_id, ctx.connection, lane)


@methods.method("bash/attach")
async def bash_attach(ctx: Ctx, params: BashAttachParams) -> BashResult:
    """A request of this client's, maybe begun on a cut connection: its chunks
    (`pty/output`s on a PTY) after `afterSeq`, then live ones, then its result."""
    resumables = ctx.services.resumables
    if resumables is None:
        raise errors.InvalidArgument(
            messages.NO_SUCH_RESUMABLE.format(request_id=params.request_id)
        )
    record = resumables.find(params.request_id)

    async def send(seq: int, text: str, skipped: int) -> None:
        if record.method == "tools/call":
            await ctx.notify("notifications/progress", _decode_progress(text))
            return
        if record.pty:
            await ctx.notify(
                "pty/output", PtyOutput(request_id=record.request_id, seq=seq, data=text)
            )
            return
        chunk = bashcall.bash_chunk(record.request_id, record.session_id, seq, text, skipped)
        await ctx.notify("bash/chunk", chunk)

    return await resumables.follow(
        record, params.after_seq, ctx.connection, send, params.accept_gap
    )


_decode_progress = msgspec.json.Decoder(ProgressParams).decode


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
    session_id, cwd = ctx.services.sessions.open(params.session_id, params.cwd, params.env, mode)
    text, exact = paths.to_wire(cwd)
    return SessionOpenResult(session_id=session_id, cwd=text, cwd_base64=exact)


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
    run = await ctx.services.pty(params.request_id).running()
    snap = await run.snapshot()
    return PtyScreen(
        cols=snap.cols,
        rows=snap.rows,
        lines=snap.lines,
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
