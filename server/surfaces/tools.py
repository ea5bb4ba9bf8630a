"""The model's surface, MCP-compatible: handshake, ping, cancellation, `tools/list`, `tools/call`.

`tools/call` is an adapter over the tool-call steps (`services.tool.toolplan`,
`toolupdates`, `toolfinish`) and the command service, in the same shape as
the host's `bash`.
"""

from __future__ import annotations

import os
from functools import partial

from bashrpc.protocol import __version__, messages
from bashrpc.protocol.icons import icons
from bashrpc.protocol.mcp import (
    BASH_TOOL,
    LATEST_PROTOCOL_VERSION,
    SERVER_NAME,
    SUPPORTED_PROTOCOL_VERSIONS,
    TASK_REVISIONS,
    CallToolResult,
    CancelledParams,
    CancelRequestParams,
    EmptyParams,
    EmptyResult,
    HostOptions,
    Implementation,
    InitializeParams,
    InitializeResult,
    ServerCapabilities,
    TaskMetadata,
    TasksCapability,
    ToolsCallParams,
    ToolsListResult,
)
from bashrpc.server.connection import RequestContext
from bashrpc.server.errors import InvalidArgument, InvalidToolArguments
from bashrpc.server.services import request
from bashrpc.server.services.api import Services
from bashrpc.server.services.commands import CommandSpec
from bashrpc.server.services.tool import (
    args,
    inputrequired,
    jobtools,
    meta,
    requeststate,
    tasks,
    waits,
)
from bashrpc.server.services.tool import call as toolcall
from bashrpc.server.services.tool import plan as toolplan
from bashrpc.server.settings import for_connection
from bashrpc.server.wire.registry import Registry

# An MCP client that closed our stdin reads nothing more (see Registry).
methods = Registry(answers_after_eof=False)
# What a handler gets: the connection and these services, typed.
Ctx = RequestContext[Services]


@methods.method("initialize")
def initialize(ctx: Ctx, params: InitializeParams) -> InitializeResult:
    connection = ctx.connection
    host = params.initialization_options
    if host is None and params.capabilities.experimental is not None:
        host = params.capabilities.experimental.bashrpc
    host = host or HostOptions()
    # Each refusal comes before anything changes. Another workspace than this one:
    if host.workspace is not None and host.workspace != ctx.services.workspace:
        mode = connection.settings.sandbox.mode
        served = ctx.services.workspace
        detail = messages.WORKSPACE_NOT_SERVED.format(
            served=served, mode=mode, requested=host.workspace
        )
        raise InvalidArgument(detail)
    # A looser sandbox than the connection has:
    settings = for_connection(connection.settings, connection.file_settings, host.settings)
    # A sandbox that would tighten a busy session, here or (under the daemon)
    # among those of the client it names:
    version = params.protocol_version
    if version not in SUPPORTED_PROTOCOL_VERSIONS:
        version = LATEST_PROTOCOL_VERSION
    connection.initialize(host, settings)
    connection.protocol_version = version
    return InitializeResult(
        protocol_version=version,
        server_info=Implementation(name=SERVER_NAME, version=__version__, icons=icons(version)),
        capabilities=_capabilities(version),
        instructions=messages.SERVER_INSTRUCTIONS,
        network=settings.sandbox.network_policy(),
    )


def _capabilities(version: str) -> ServerCapabilities:
    """Tasks from 2025-11-25, the revision that has them."""
    if version in TASK_REVISIONS:
        return ServerCapabilities(tasks=TasksCapability())
    return ServerCapabilities()


@methods.method("ping")
def ping(ctx: Ctx, params: EmptyParams) -> EmptyResult:
    return EmptyResult()


@methods.method("notifications/initialized")
def initialized(ctx: Ctx, params: EmptyParams) -> None:
    return None


@methods.method("notifications/cancelled")
def cancelled(ctx: Ctx, params: CancelledParams) -> None:
    """As MCP says, the cancelled request gets no response: its command is still
    killed, and the next result tells of the shell it took."""
    ctx.connection.cancel(params.request_id, silent=True)


@methods.method("$/cancelRequest")
def cancel_request(ctx: Ctx, params: CancelRequestParams) -> None:
    ctx.connection.cancel(params.id)


@methods.method("tools/list")
def tools_list(ctx: Ctx, params: EmptyParams) -> ToolsListResult:
    revision = params.revision(ctx.connection.protocol_version)
    return ToolsListResult(tools=meta.tools(ctx.connection.settings, icons(revision)))


def _admit_call(ctx: Ctx, params: ToolsCallParams) -> None:
    """A call that will run on a PTY takes input and size from now on, as `bash` does."""
    connection = ctx.connection
    pty = toolplan.pty_terminal(connection.settings, os.environ, connection.host)
    if pty is not None and params.name == BASH_TOOL:
        assert ctx.flight is not None
        ctx.flight.keep(ctx.services.commands.accept_pty(ctx.id, pty).close)


@methods.method("tools/call", admit=_admit_call)
async def tools_call(ctx: Ctx, params: ToolsCallParams) -> CallToolResult:
    revision = params.revision(ctx.connection.protocol_version)
    try:
        result = await _call(ctx, params)
    except InvalidToolArguments as error:
        answer = meta.argument_error(error, params.name, revision)
        if answer is None:
            raise
        result = answer
    if result.request_state is not None:
        # input_required: the user's answer first, nothing for the model yet.
        return result
    # The model hears of its jobs' ends in the next result, whichever tool it is.
    ends = jobtools.untold_ends(ctx.services.jobs, toolplan.TOOL_SESSION_ID)
    result = jobtools.with_job_ends(result, ends)
    return meta.with_links(result, revision)


async def _call(ctx: Ctx, params: ToolsCallParams) -> CallToolResult:
    connection, services = ctx.connection, ctx.services
    if inputrequired.unexpected(params) or (
        params.request_state is not None and params.name != BASH_TOOL
    ):
        raise InvalidArgument(messages.REQUEST_STATE_UNEXPECTED)
    asking = None
    if params.name == BASH_TOOL and params.wants_elicitation:
        asking = inputrequired.Asking(params, services.principal, requeststate.sealer())
    if asking is not None and params.request_state is not None:
        _runs_no_command(ctx)
        return await asking.resume(params, services.jobs, connection.settings.output.max_bytes)
    if params.name in jobtools.TOOLS:
        _runs_no_command(ctx)
        session = toolplan.TOOL_SESSION_ID
        return await jobtools.call(services.jobs, params, session, connection.settings)
    sent = args.arguments(params)
    plan = toolplan.plan(
        sent.arguments,
        timeout_null="timeout" in sent.nulls,
        request_id=ctx.id,
        settings=connection.settings,
        host=connection.host,
        environ=os.environ,
        workspace=services.workspace,
        home=services.home(toolplan.TOOL_SESSION_ID, connection.settings.sandbox.mode),
        directory=services.directory,
    )
    if plan.spec is not None and params.task is not None:
        _runs_no_command(ctx)
        return await _as_task(ctx, plan.spec, params.task, v2=params.modern)
    context = toolcall.Context(
        ctx.id,
        connection.host,
        None if params.meta is None else params.meta.progress,
        connection.settings,
        services.artifacts,
        services.jobs,
    )
    background = bool(args.given(sent.arguments.run_in_background))
    planned = toolcall.planned(plan, background, context)
    if isinstance(planned, request.Command) and planned.spec.terminal is not None:
        # On a terminal it may wait for input: then answered at once, going on as a job.
        return await waits.serve(ctx, services, planned, services.jobs, asking)
    return await request.serve(ctx, services, planned)


async def _as_task(ctx: Ctx, spec: CommandSpec, asked: TaskMetadata, *, v2: bool) -> CallToolResult:
    """A call with `task`: its command as a job; the client hears of its end."""
    terminals = ctx.services.jobs
    result, job = await tasks.create(terminals, spec, asked)
    if job is not None:
        max_bytes = ctx.connection.settings.output.max_bytes
        end = partial(tasks.tell_end, job, ctx.connection.notify, terminals, max_bytes, v2=v2)
        ctx.tasks.start_soon(end)
    return result


def _runs_no_command(ctx: Ctx) -> None:
    """A job tool, or a job started: no command of the session, so a cancel that
    came before (MCP's, or `$/cancelRequest`) cancels the call now."""
    if ctx.flight is not None:
        ctx.flight.runs_no_command()
