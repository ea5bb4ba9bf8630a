"""The model's surface, MCP-compatible: handshake, `tools/list` and `tools/call`.

A tool call goes through fixed steps, in order: normalize, intercept, check
the cwd, clamp the timeout, choose PTY or pipes, execute on the shared
executor while streaming snapshots, then shape the result.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import msgspec

from protocol import __version__, messages, paths
from protocol.envelope import Call
from protocol.errors import ErrorCode
from protocol.mcp import (
    BASH_TOOL,
    LATEST_PROTOCOL_VERSION,
    SUPPORTED_PROTOCOL_VERSIONS,
    BashStructured,
    BashToolArguments,
    Blocked,
    CallToolResult,
    CancelledOutput,
    CancelledParams,
    CancelRequestParams,
    EmptyParams,
    EmptyResult,
    HostOptions,
    Implementation,
    InitializeParams,
    InitializeResult,
    ProgressParams,
    ServerCapabilities,
    TextContent,
    Tool,
    ToolDetails,
    ToolsCallParams,
    ToolsListResult,
    ToolUpdate,
)
from protocol.schema import inline_schema
from server import log
from server.dispatch import RpcError
from server.executor import Execution
from server.interceptor import DEFAULT_RULES, CompiledRule, compile_rules, intercept
from server.native import clamp_timeout, reject_nul, run_on_pty
from server.normalize import normalize
from server.pty import clamp_size
from server.sessions import resolve_path
from server.settings import Settings, with_overrides
from server.sink import OutputSink
from server.throttle import Throttle
from server.toolresult import Shaping, shape

if TYPE_CHECKING:
    from server.app import Server

TOOL_UPDATE_INTERVAL_SECONDS = 0.1
PROGRESS_MESSAGE_MAX_CHARS = 200
NO_PTY_ENV_VARS = ("BASHRPC_NO_PTY", "PI_NO_PTY")
SERVER_NAME = "bashrpc"
INSTRUCTIONS = (
    "bashrpc runs commands for you in a persistent bash shell through the `bash` tool."
    " Full outputs of long commands are resources at artifact://N."
)

_log = log.get("tools")
_decode_arguments = msgspec.json.Decoder(BashToolArguments).decode


def wants_pty(settings: Settings, environ: Mapping[str, str], host: HostOptions) -> bool:
    """A PTY only when configured on, not vetoed by the environment, and the host has a UI."""
    if settings.bash.virtual_terminal != "on":
        return False
    if any(environ.get(name) == "1" for name in NO_PTY_ENV_VARS):
        return False
    return host.ui is not None


def bash_tool(default_timeout: float, max_bytes: int) -> Tool:
    schema = inline_schema(BashToolArguments)
    # The default depends on settings, so it is filled in here, not in the type.
    schema["properties"]["timeout"]["default"] = default_timeout
    return Tool(
        name=BASH_TOOL,
        description=messages.BASH_TOOL_DESCRIPTION.format(
            limit=f"{max_bytes // 1024}KB", timeout=messages.format_seconds(default_timeout)
        ),
        input_schema=schema,
        output_schema=inline_schema(BashStructured),
    )


class ToolUpdates:
    """`tool/update` snapshots and MCP progress for one running tool call."""

    def __init__(
        self,
        server: Server,
        request_id: Any,
        sink: OutputSink,
        progress_token: str | int | None,
        owner: anyio.abc.TaskGroup,
    ) -> None:
        opted_out = set(server.host.opt_out_notifications)
        self._server = server
        self._request_id = request_id
        self._sink = sink
        self._snapshots = "tool/update" not in opted_out
        self._token = None if "notifications/progress" in opted_out else progress_token
        self._throttle = Throttle(self._flush, TOOL_UPDATE_INTERVAL_SECONDS, owner)

    @property
    def active(self) -> bool:
        return self._snapshots or self._token is not None

    def poke(self, _clean: bytes) -> None:
        self._throttle.poke()

    async def close(self) -> None:
        await self._throttle.close()

    async def _flush(self) -> None:
        tail = self._sink.tail_text()
        if self._snapshots:
            update = ToolUpdate(request_id=self._request_id, content=[TextContent(text=tail)])
            await self._server.notify("tool/update", update)
        if self._token is not None:
            last = next((line for line in reversed(tail.split("\n")) if line), "")
            progress = ProgressParams(
                progress_token=self._token,
                progress=self._sink.total_bytes,
                message=last[:PROGRESS_MESSAGE_MAX_CHARS],
            )
            await self._server.notify("notifications/progress", progress)


def tool_error(text: str, details: ToolDetails | None = None) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(text=text)],
        structured_content=BashStructured(
            exit_code=None, cancelled=False, timed_out=False, truncation=None
        ),
        is_error=True,
        details=details,
    )


def register(server: Server) -> None:
    rules_cache: dict[int, tuple[CompiledRule, ...]] = {}

    def current_rules() -> tuple[CompiledRule, ...]:
        # Compiled once per distinct rule set, so a broken rule is logged once.
        configured = server.settings.interceptor.rules
        key = id(configured)
        if key not in rules_cache:
            rules_cache.clear()
            rules_cache[key] = compile_rules(
                DEFAULT_RULES if configured is None else configured, _log.warning
            )
        return rules_cache[key]

    async def initialize(call: Call, p: InitializeParams) -> InitializeResult:
        host = p.initialization_options
        if host is None and p.capabilities.experimental is not None:
            host = p.capabilities.experimental.bashrpc
        server.host = host or HostOptions()
        server.settings = server.options.settings
        if server.host.settings is not None:
            server.settings = with_overrides(server.settings, server.host.settings)
        version = p.protocol_version
        if version not in SUPPORTED_PROTOCOL_VERSIONS:
            version = LATEST_PROTOCOL_VERSION
        return InitializeResult(
            protocol_version=version,
            server_info=Implementation(name=SERVER_NAME, version=__version__),
            capabilities=ServerCapabilities(),
            instructions=INSTRUCTIONS,
        )

    async def ping(call: Call, p: EmptyParams) -> EmptyResult:
        return EmptyResult()

    async def initialized(call: Call, p: EmptyParams) -> None:
        return None

    async def cancelled(call: Call, p: CancelledParams) -> None:
        server.abort(request_id=p.request_id)

    async def cancel_request(call: Call, p: CancelRequestParams) -> None:
        server.abort(request_id=p.id)

    async def tools_list(call: Call, p: EmptyParams) -> ToolsListResult:
        settings = server.settings
        tool = bash_tool(settings.tool.default_timeout, settings.output.max_bytes)
        return ToolsListResult(tools=[tool])

    async def tools_call(call: Call, p: ToolsCallParams) -> CallToolResult:
        if p.name != BASH_TOOL:
            raise RpcError(
                ErrorCode.INVALID_PARAMS,
                messages.INVALID_PARAMS,
                messages.UNKNOWN_TOOL.format(name=p.name),
            )
        try:
            args = _decode_arguments(p.arguments)
        except msgspec.ValidationError as exc:
            raise RpcError(
                ErrorCode.INVALID_PARAMS, messages.INVALID_PARAMS, f"arguments: {exc}"
            ) from None
        reject_nul("arguments.command", args.command)
        reject_nul("arguments.cwd", args.cwd)
        settings = server.settings

        # 1. Normalize.
        norm = normalize(args.command, args.head, args.tail)
        # 2. Intercept.
        if settings.interceptor.enabled:
            block = intercept(norm.command, current_rules(), server.host.tool_names)
            if block is not None:
                return tool_error(
                    block.text(norm.command),
                    ToolDetails(blocked=Blocked(suggested_tool=block.tool, rule=block.rule)),
                )
        # 3. cwd.
        workspace = str(server.options.workspace)
        session = server.tool_session()
        cwd = workspace
        if args.cwd is not None:
            cwd = resolve_path(workspace, args.cwd, session.home)
            if not os.path.exists(cwd):
                return tool_error(messages.CWD_MISSING.format(path=paths.printable(cwd)))
            if not os.path.isdir(cwd):
                return tool_error(messages.CWD_NOT_A_DIRECTORY.format(path=paths.printable(cwd)))
        # 4. Timeout.
        requested = settings.tool.default_timeout if args.timeout is None else args.timeout
        timeout = clamp_timeout(requested)
        clamp = None if timeout == requested else (requested, timeout)
        # 5. The artifact is allocated by the sink the moment output overflows.
        sink = OutputSink(settings.output.max_bytes, server.artifacts.create)
        # 6. PTY or pipes.
        use_pty = wants_pty(settings, os.environ, server.host)
        # 7. Execute.
        execution = Execution(call.reply_id, session.id)
        token = None if p.meta is None else p.meta.progress_token
        with server.track(execution):
            async with anyio.create_task_group() as tg:
                updates = ToolUpdates(server, call.reply_id, sink, token, tg)
                on_text = updates.poke if updates.active else _ignore
                try:
                    if use_pty:
                        ui = server.host.ui
                        outcome = await run_on_pty(
                            server,
                            call,
                            session,
                            norm.command,
                            cwd=cwd,
                            env={},
                            timeout=timeout,
                            sink=sink,
                            size=clamp_size(ui.cols if ui else None, ui.rows if ui else None),
                            execution=execution,
                            on_text=on_text,
                        )
                    else:
                        outcome = await server.executor.run(
                            session,
                            norm.command,
                            cwd=cwd,
                            env={},
                            timeout=timeout,
                            sink=sink,
                            on_text=on_text,
                            execution=execution,
                        )
                finally:
                    if updates.active:
                        with anyio.CancelScope(shield=True):
                            await updates.close()
        # 8. Shape.
        if outcome.cancelled and not outcome.timed_out:
            raise RpcError(
                ErrorCode.REQUEST_CANCELLED,
                messages.REQUEST_CANCELLED,
                CancelledOutput(output=outcome.summary.text),
            )
        return shape(
            outcome,
            Shaping(
                head=norm.head,
                tail=norm.tail,
                max_bytes=settings.output.max_bytes,
                clamp=clamp,
            ),
        )

    server.add_method("initialize", InitializeParams, initialize)
    server.add_method("ping", EmptyParams, ping)
    server.add_method("notifications/initialized", EmptyParams, initialized)
    server.add_method("notifications/cancelled", CancelledParams, cancelled)
    server.add_method("$/cancelRequest", CancelRequestParams, cancel_request)
    server.add_method("tools/list", EmptyParams, tools_list)
    server.add_method("tools/call", ToolsCallParams, tools_call, slow=True)


def _ignore(_clean: bytes) -> None:
    return None
