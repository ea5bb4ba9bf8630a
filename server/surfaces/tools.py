"""The model's surface, MCP-compatible: handshake, ping, cancellation, `tools/list`, `tools/call`.

`tools/call` is an adapter over the tool-call steps in `services.toolcall`
and the command service, the same one the host's `bash` uses.
"""

from __future__ import annotations

import os

from protocol import __version__
from protocol.mcp import (
    BASH_TOOL,
    LATEST_PROTOCOL_VERSION,
    SUPPORTED_PROTOCOL_VERSIONS,
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
    ToolsCallParams,
    ToolsListResult,
)
from protocol.methods import PtyOutput
from server.connection import RequestContext
from server.services import toolargs, toolcall
from server.services.streams import streaming
from server.settings import with_overrides
from server.wire.registry import Registry

SERVER_NAME = "bashrpc"
INSTRUCTIONS = (
    "bashrpc runs commands for you in a persistent bash shell through the `bash` tool."
    " Full outputs of long commands are resources at artifact://N."
)

# An MCP client that closed our stdin reads nothing more (see Registry).
methods = Registry(answers_after_eof=False)


@methods.method("initialize")
def initialize(ctx: RequestContext, params: InitializeParams) -> InitializeResult:
    connection = ctx.connection
    host = params.initialization_options
    if host is None and params.capabilities.experimental is not None:
        host = params.capabilities.experimental.bashrpc
    connection.host = host or HostOptions()
    connection.settings = connection.file_settings
    if connection.host.settings is not None:
        connection.settings = with_overrides(connection.settings, connection.host.settings)
    if connection.on_initialize is not None:
        connection.on_initialize(connection)
    version = params.protocol_version
    if version not in SUPPORTED_PROTOCOL_VERSIONS:
        version = LATEST_PROTOCOL_VERSION
    return InitializeResult(
        protocol_version=version,
        server_info=Implementation(name=SERVER_NAME, version=__version__),
        capabilities=ServerCapabilities(),
        instructions=INSTRUCTIONS,
    )


@methods.method("ping")
def ping(ctx: RequestContext, params: EmptyParams) -> EmptyResult:
    return EmptyResult()


@methods.method("notifications/initialized")
def initialized(ctx: RequestContext, params: EmptyParams) -> None:
    return None


@methods.method("notifications/cancelled")
def cancelled(ctx: RequestContext, params: CancelledParams) -> None:
    ctx.connection.cancel(params.request_id)


@methods.method("$/cancelRequest")
def cancel_request(ctx: RequestContext, params: CancelRequestParams) -> None:
    ctx.connection.cancel(params.id)


@methods.method("tools/list")
def tools_list(ctx: RequestContext, params: EmptyParams) -> ToolsListResult:
    return ToolsListResult(tools=[toolcall.tool_definition(ctx.connection.settings)])


def _admit_call(ctx: RequestContext, params: ToolsCallParams) -> None:
    """A call that will run on a PTY takes input and size from now on, as `bash` does."""
    connection = ctx.connection
    pty = toolcall.pty_terminal(connection.settings, os.environ, connection.host)
    if pty is not None and params.name == BASH_TOOL:
        assert ctx.flight is not None
        ctx.flight.keep(ctx.services.commands.accept_pty(ctx.id, pty).close)


@methods.method("tools/call", admit=_admit_call)
async def tools_call(ctx: RequestContext, params: ToolsCallParams) -> CallToolResult:
    connection, services = ctx.connection, ctx.services
    plan = toolcall.plan(
        toolargs.arguments(params),
        request_id=ctx.id,
        settings=connection.settings,
        host=connection.host,
        environ=os.environ,
        workspace=services.workspace,
        home=services.home(toolcall.TOOL_SESSION_ID, connection.settings.sandbox.mode),
    )
    if plan.spec is None:
        assert plan.early is not None
        return plan.early

    async def emit_raw(data: str) -> None:
        await ctx.notify("pty/output", PtyOutput(request_id=ctx.id, data=data))

    listener = toolcall.updates(
        ctx.notify,
        emit_raw,
        ctx.id,
        host=connection.host,
        progress_token=None if params.meta is None else params.meta.progress_token,
        settings=connection.settings,
        terminal=plan.spec.terminal is not None,
    )
    async with streaming(listener, ctx.tasks) as out:
        outcome = await services.commands.run(plan.spec, out, ctx.flight)
    return toolcall.finish(outcome, plan, services.artifacts)
