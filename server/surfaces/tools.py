"""The model's surface, MCP-compatible: handshake, ping, cancellation, `tools/list`, `tools/call`.

`tools/call` is an adapter over the tool-call steps (`services.tool.toolplan`,
`toolupdates`, `toolfinish`) and the command service, in the same shape as
the host's `bash`.
"""

from __future__ import annotations

import os

from bashrpc.protocol import __version__
from bashrpc.protocol.mcp import (
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
from bashrpc.server.connection import RequestContext
from bashrpc.server.services.api import Services
from bashrpc.server.services.tool import toolargs, toolfinish, toolplan, toolupdates
from bashrpc.server.settings import for_connection
from bashrpc.server.wire.registry import Registry

SERVER_NAME = "bashrpc"
INSTRUCTIONS = (
    "bashrpc runs commands for you in a persistent bash shell through the `bash` tool."
    " Full outputs of long commands are resources at artifact://N."
)

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
    # Each refusal comes before anything changes. A looser sandbox than the
    # connection has:
    settings = for_connection(connection.settings, connection.file_settings, host.settings)
    # A sandbox that would tighten a busy session, here or (under the daemon)
    # among those of the client it names:
    connection.initialize(host, settings)
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
def ping(ctx: Ctx, params: EmptyParams) -> EmptyResult:
    return EmptyResult()


@methods.method("notifications/initialized")
def initialized(ctx: Ctx, params: EmptyParams) -> None:
    return None


@methods.method("notifications/cancelled")
def cancelled(ctx: Ctx, params: CancelledParams) -> None:
    ctx.connection.cancel(params.request_id)


@methods.method("$/cancelRequest")
def cancel_request(ctx: Ctx, params: CancelRequestParams) -> None:
    ctx.connection.cancel(params.id)


@methods.method("tools/list")
def tools_list(ctx: Ctx, params: EmptyParams) -> ToolsListResult:
    return ToolsListResult(tools=[toolplan.tool_definition(ctx.connection.settings)])


def _admit_call(ctx: Ctx, params: ToolsCallParams) -> None:
    """A call that will run on a PTY takes input and size from now on, as `bash` does."""
    connection = ctx.connection
    pty = toolplan.pty_terminal(connection.settings, os.environ, connection.host)
    if pty is not None and params.name == BASH_TOOL:
        assert ctx.flight is not None
        ctx.flight.keep(ctx.services.commands.accept_pty(ctx.id, pty).close)


@methods.method("tools/call", admit=_admit_call)
async def tools_call(ctx: Ctx, params: ToolsCallParams) -> CallToolResult:
    connection, services = ctx.connection, ctx.services
    plan = toolplan.plan(
        toolargs.arguments(params),
        request_id=ctx.id,
        settings=connection.settings,
        host=connection.host,
        environ=os.environ,
        workspace=services.workspace,
        home=services.home(toolplan.TOOL_SESSION_ID, connection.settings.sandbox.mode),
        directory=services.directory,
    )
    if plan.spec is None:
        assert plan.early is not None
        return plan.early
    listener = toolupdates.listener(
        ctx.notify,
        ctx.id,
        host=connection.host,
        progress_token=None if params.meta is None else params.meta.progress_token,
        settings=connection.settings,
        terminal=plan.spec.terminal is not None,
    )
    outcome = await services.commands.stream(plan.spec, listener, ctx.tasks, ctx.flight)
    return toolfinish.finish(outcome, plan.shaping, services.artifacts)
