"""The model's bash tool: the steps of a `tools/call`, before and after the command.

With the arguments decoded (`toolargs`), in order: normalize, intercept, check
the cwd, clamp the timeout, choose PTY or pipes (steps 1-6, `plan`); the
command service runs it (7) while `updates` streams snapshots and progress;
`finish` shapes the result (8).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio.abc
import msgspec

from protocol import messages, paths
from protocol.mcp import (
    BASH_TOOL,
    BashStructured,
    BashToolArguments,
    Blocked,
    CallToolResult,
    HostOptions,
    InterceptorRule,
    ProgressParams,
    TextContent,
    Tool,
    ToolDetails,
    ToolUpdate,
)
from protocol.schema import inline_schema
from server import errors, log
from server.output.artifacts import ArtifactStore
from server.output.chunks import RawStream
from server.output.throttle import Throttle
from server.runtime.backend import DirKind
from server.runtime.sessions import resolve_path
from server.services.commands import CommandSpec, Terminal, clamp_timeout, terminal
from server.services.interceptor import DEFAULT_RULES, Rule, compile_rules, intercept
from server.services.normalize import normalize
from server.services.outcome import Outcome
from server.services.shaping import DEFAULT_MAX_LINES, Shaping, shape
from server.services.streams import EmitRaw, StreamListener
from server.services.toolargs import given
from server.settings import Settings

# Tool calls carry no session: they share this one, whose shell configuration
# is the server's (shell, prefix, snapshot, env).
TOOL_SESSION_ID = "@tools"
TOOL_UPDATE_INTERVAL_SECONDS = 0.1
PROGRESS_MESSAGE_MAX_CHARS = 200
NO_PTY_ENV_VARS = ("BASHRPC_NO_PTY", "PI_NO_PTY")

_log = log.get("toolcall")
_compiled: dict[tuple[InterceptorRule, ...], tuple[Rule, ...]] = {}

Notify = Callable[[str, msgspec.Struct], Awaitable[None]]


def tool_definition(settings: Settings) -> Tool:
    schema = inline_schema(BashToolArguments)
    # The default depends on settings, so it is filled in here, not in the type.
    schema["properties"]["timeout"]["default"] = settings.tool.default_timeout
    return Tool(
        name=BASH_TOOL,
        description=messages.BASH_TOOL_DESCRIPTION.format(
            lines=DEFAULT_MAX_LINES,
            limit=f"{settings.output.max_bytes // 1024}KB",
            timeout=messages.format_seconds(settings.tool.default_timeout),
        ),
        input_schema=schema,
        output_schema=inline_schema(BashStructured),
    )


def wants_pty(settings: Settings, environ: Mapping[str, str], host: HostOptions) -> bool:
    """A PTY only when configured on, not vetoed by the environment, and the host has a UI."""
    if settings.bash.virtual_terminal != "on":
        return False
    if any(environ.get(name) == "1" for name in NO_PTY_ENV_VARS):
        return False
    return host.ui is not None


def pty_terminal(
    settings: Settings, environ: Mapping[str, str], host: HostOptions
) -> Terminal | None:
    """The PTY a call runs on, sized to the host's UI; None: pipes."""
    if not wants_pty(settings, environ, host):
        return None
    ui = host.ui
    return terminal(ui.cols if ui else None, ui.rows if ui else None)


class Plan(msgspec.Struct, frozen=True):
    # What to run; None when the call already ended (blocked, or a bad cwd).
    spec: CommandSpec | None
    early: CallToolResult | None
    shaping: Shaping


def plan(
    args: BashToolArguments,
    *,
    request_id: Any,
    settings: Settings,
    host: HostOptions,
    environ: Mapping[str, str],
    workspace: str,
    home: str | None,
    directory: Callable[[str], DirKind],
) -> Plan:
    """Steps 1-6 of a tool call."""
    given_cwd, given_timeout = given(args.cwd), given(args.timeout)
    for name, value in (("command", args.command), ("cwd", given_cwd)):
        if value is not None and "\0" in value:
            raise errors.InvalidArgument(messages.FIELD_HAS_NUL.format(field=f"arguments.{name}"))
    norm = normalize(args.command, given(args.head), given(args.tail))
    requested = settings.tool.default_timeout if given_timeout is None else given_timeout
    timeout = clamp_timeout(requested)
    shaping = Shaping(
        head=norm.head,
        tail=norm.tail,
        max_bytes=settings.output.max_bytes,
        clamp=None if timeout == requested else (requested, timeout),
    )
    if settings.interceptor.enabled:
        block = intercept(norm.command, _rules(settings), host.tool_names, cwd=given_cwd)
        if block is not None:
            blocked = Blocked(suggested_tool=block.tool, rule=block.rule, recovery=block.recovery)
            details = ToolDetails(blocked=blocked)
            return Plan(None, tool_error(block.text(norm.command), details), shaping)
    cwd = workspace
    if given_cwd is not None:
        cwd = resolve_path(workspace, given_cwd, home)
        problem = _cwd_problem(cwd, directory(cwd))
        if problem is not None:
            return Plan(None, tool_error(problem), shaping)
    spec = CommandSpec(
        command=norm.command,
        session_id=TOOL_SESSION_ID,
        cwd=cwd,
        timeout=timeout,
        max_bytes=settings.output.max_bytes,
        request_id=request_id,
        terminal=pty_terminal(settings, environ, host),
        field_prefix="arguments.",
        sandbox=settings.sandbox.mode,
        result_when_cancelled=False,
    )
    return Plan(spec, None, shaping)


def _cwd_problem(cwd: str, kind: DirKind) -> str | None:
    if kind == "missing":
        return messages.CWD_MISSING.format(path=paths.printable(cwd))
    if kind == "other":
        return messages.CWD_NOT_A_DIRECTORY.format(path=paths.printable(cwd))
    return None


def _rules(settings: Settings) -> tuple[Rule, ...]:
    """Configured rules replace the defaults; each set is compiled once, so a broken
    rule is reported once."""
    configured = settings.interceptor.rules
    if configured is None:
        return DEFAULT_RULES
    if configured not in _compiled:
        _compiled[configured] = compile_rules(configured, _log.warning)
    return _compiled[configured]


def tool_error(text: str, details: ToolDetails | None = None) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(text=text)],
        structured_content=BashStructured(
            output=text, exit_code=None, cancelled=False, timed_out=False, truncation=None
        ),
        is_error=True,
        details=details,
    )


def finish(outcome: Outcome, plan: Plan, artifacts: ArtifactStore) -> CallToolResult:
    """Step 8; a cancelled call answers -32800 with the output so far."""
    if outcome.cancelled and not outcome.timed_out:
        raise errors.RequestCancelled(outcome.summary.text)
    return shape(outcome, plan.shaping, _head_prefix(outcome, plan.shaping, artifacts))


def _head_prefix(outcome: Outcome, shaping: Shaping, artifacts: ArtifactStore) -> str | None:
    """The artifact's first bytes, when `head` may want lines the summary no longer holds.

    As many bytes as a result may show: a selection past them is cut by that cap anyway."""
    if shaping.head is None or not outcome.summary.truncated or outcome.artifact_id is None:
        return None
    try:
        chunk = artifacts.read(outcome.artifact_id, 0, shaping.max_bytes)
    except (errors.ArtifactNotFound, OSError):
        return None
    return chunk.data.decode("utf-8", "replace")


class ToolUpdates:
    """`tool/update` snapshots and MCP progress for one running tool call.

    It keeps its own bounded tail of the output, so a snapshot costs no more
    than the newest `max_bytes`."""

    def __init__(
        self,
        notify: Notify,
        request_id: Any,
        *,
        snapshots: bool,
        progress_token: str | int | None,
        max_bytes: int,
        owner: anyio.abc.TaskGroup,
    ) -> None:
        self._notify = notify
        self._request_id = request_id
        self._snapshots = snapshots
        self._token = progress_token
        self._max = max_bytes
        self._tail = bytearray()
        self._total = 0
        self._throttle = Throttle(self._flush, TOOL_UPDATE_INTERVAL_SECONDS, owner)

    @property
    def active(self) -> bool:
        return self._snapshots or self._token is not None

    def push(self, data: bytes) -> None:
        self._total += len(data)
        self._tail += data
        if len(self._tail) > 2 * self._max:
            del self._tail[: len(self._tail) - self._max]
        self._throttle.poke()

    async def close(self) -> None:
        await self._throttle.close()

    async def _flush(self) -> None:
        tail = self._tail[-self._max :].decode("utf-8", "ignore")
        if self._snapshots:
            update = ToolUpdate(request_id=self._request_id, content=[TextContent(text=tail)])
            await self._notify("tool/update", update)
        if self._token is not None:
            last = next((line for line in reversed(tail.split("\n")) if line), "")
            progress = ProgressParams(
                progress_token=self._token,
                progress=self._total,
                message=last[:PROGRESS_MESSAGE_MAX_CHARS],
            )
            await self._notify("notifications/progress", progress)


def updates(
    notify: Notify,
    emit_raw: EmitRaw,
    request_id: Any,
    *,
    host: HostOptions,
    progress_token: str | int | None,
    settings: Settings,
    terminal: bool,
) -> Callable[[anyio.abc.TaskGroup], StreamListener]:
    """The listener of a tool call: updates while it runs; raw bytes on a PTY."""
    opted_out = set(host.opt_out_notifications)

    def make(tg: anyio.abc.TaskGroup) -> StreamListener:
        tool_updates = ToolUpdates(
            notify,
            request_id,
            snapshots="tool/update" in host.notifications and "tool/update" not in opted_out,
            progress_token=None if "notifications/progress" in opted_out else progress_token,
            max_bytes=settings.output.max_bytes,
            owner=tg,
        )
        text = [tool_updates] if tool_updates.active else []
        raw = [RawStream(emit_raw, tg)] if terminal else []
        return StreamListener(text=text, raw=raw)

    return make
