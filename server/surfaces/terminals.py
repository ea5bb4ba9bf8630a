"""The `terminal/*` methods: ACP's five as ACP has them, and bashrpc's own three;
and ACP's `$/cancel_request`.

Each finds its job by `sessionId` and `terminalId` (-32002 when the session
has no such terminal) and leaves the work to the terminal service.
"""

from __future__ import annotations

from bashrpc.protocol import messages
from bashrpc.protocol.terminals import (
    CancelAcpRequestParams,
    TerminalCreateParams,
    TerminalCreateResult,
    TerminalEmptyResult,
    TerminalListParams,
    TerminalListResult,
    TerminalOutputParams,
    TerminalOutputResult,
    TerminalParams,
    TerminalWaitResult,
    TerminalWriteParams,
    TerminalWriteResult,
)
from bashrpc.server import errors
from bashrpc.server.connection import RequestContext
from bashrpc.server.services.api import Services
from bashrpc.server.services.jobs import JobStart, compile_pattern
from bashrpc.server.wire.registry import Registry

methods = Registry()
Ctx = RequestContext[Services]


def _admit_create(ctx: Ctx, params: TerminalCreateParams) -> None:
    """A bad pattern is refused before anything starts; a draining server starts nothing."""
    if ctx.connection.draining:
        raise errors.ShuttingDown
    if params.ready is not None and params.ready.log is not None:
        compile_pattern(params.ready.log)


@methods.method("terminal/create", admit=_admit_create)
async def terminal_create(ctx: Ctx, params: TerminalCreateParams) -> TerminalCreateResult:
    terminals = ctx.services.jobs
    what = JobStart(
        params.session_id,
        params.command,
        args=params.args,
        env={variable.name: variable.value for variable in params.env or []},
        cwd=params.cwd,
        output_limit=params.output_byte_limit,
        sandbox=ctx.connection.settings.sandbox.mode,
        secret_env=params.secret_env,
        redact=params.redact,
    )
    job = await terminals.start(what)
    ready = None if params.ready is None else await terminals.ready(job, params.ready)
    return TerminalCreateResult(terminal_id=job.id, ready=ready)


@methods.method("terminal/output")
def terminal_output(ctx: Ctx, params: TerminalOutputParams) -> TerminalOutputResult:
    terminals = ctx.services.jobs
    job = terminals.job(params.session_id, params.terminal_id)
    return terminals.output(job, params.after_offset)


@methods.method("terminal/wait_for_exit")
async def terminal_wait_for_exit(ctx: Ctx, params: TerminalParams) -> TerminalWaitResult:
    terminals = ctx.services.jobs
    status = await terminals.wait(terminals.job(params.session_id, params.terminal_id))
    return TerminalWaitResult(exit_code=status.code, signal=status.signal)


@methods.method("terminal/kill")
async def terminal_kill(ctx: Ctx, params: TerminalParams) -> TerminalEmptyResult:
    terminals = ctx.services.jobs
    await terminals.kill(terminals.job(params.session_id, params.terminal_id))
    return TerminalEmptyResult()


@methods.method("terminal/release")
async def terminal_release(ctx: Ctx, params: TerminalParams) -> TerminalEmptyResult:
    terminals = ctx.services.jobs
    await terminals.release(terminals.job(params.session_id, params.terminal_id))
    return TerminalEmptyResult()


@methods.method("terminal/write")
async def terminal_write(ctx: Ctx, params: TerminalWriteParams) -> TerminalWriteResult:
    job = ctx.services.jobs.job(params.session_id, params.terminal_id)
    # A job on a terminal (a command gone on as one) would show an echoed secret.
    if params.secret and params.data and await job.echoes():
        raise errors.InvalidArgument(messages.SECRET_WOULD_ECHO)
    return TerminalWriteResult(bytes_written=await job.write(params.data.encode()))


@methods.method("terminal/close_stdin")
def terminal_close_stdin(ctx: Ctx, params: TerminalParams) -> TerminalEmptyResult:
    ctx.services.jobs.job(params.session_id, params.terminal_id).close_stdin()
    return TerminalEmptyResult()


@methods.method("$/cancel_request")
def cancel_request(ctx: Ctx, params: CancelAcpRequestParams) -> None:
    """ACP's cancel: the request answers -32800 (see `Connection.cancel`)."""
    ctx.connection.cancel(params.request_id)


@methods.method("terminal/list")
def terminal_list(ctx: Ctx, params: TerminalListParams) -> TerminalListResult:
    return TerminalListResult(terminals=ctx.services.jobs.info(params.session_id))
