"""The model's bash tool before its command runs: with the arguments decoded
(`toolargs`), in order: normalize, intercept, check the cwd, clamp the
timeout, choose PTY or pipes (steps 1-6 of a tool call). Pure: what it asks
of the world (the cwd's kind, HOME) comes in as arguments.

A tool call has the shape of every command-like method: `plan` here, the
command service runs the spec (7) while `toolupdates.listener` streams, and
`toolfinish.finish` shapes the result (8); `bashcall` is the same for `bash`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from bashrpc.protocol import messages, paths
from bashrpc.protocol.mcp import (
    BASH_TOOL,
    BashStructured,
    BashToolArguments,
    Blocked,
    CallToolResult,
    HostOptions,
    InterceptorRule,
    Tool,
    ToolDetails,
)
from bashrpc.protocol.schema import inline_schema
from bashrpc.server import log
from bashrpc.server.runtime.seam.backend import DirKind
from bashrpc.server.runtime.sessions.session import resolve_path
from bashrpc.server.services.commands import CommandSpec, Terminal, clamp_timeout, terminal
from bashrpc.server.services.fieldchecks import reject_nul
from bashrpc.server.services.tool.args import given
from bashrpc.server.services.tool.finish import tool_error
from bashrpc.server.services.tool.interceptor import DEFAULT_RULES, Rule, compile_rules, intercept
from bashrpc.server.services.tool.normalize import normalize
from bashrpc.server.services.tool.shaping import DEFAULT_MAX_LINES, Shaping
from bashrpc.server.settings import Settings

# Tool calls carry no session: they share this one, whose shell configuration
# is the server's (shell, prefix, snapshot, env).
TOOL_SESSION_ID = "@tools"
NO_PTY_ENV_VARS = ("BASHRPC_NO_PTY", "PI_NO_PTY")

_log = log.get("toolcall")
_compiled: dict[tuple[InterceptorRule, ...], tuple[Rule, ...]] = {}


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
    timeout_null: bool = False,
) -> Plan:
    """Steps 1-6 of a tool call; `directory` says what is at a path; `timeout_null`:
    the timeout was sent as null, and the default taken."""
    given_cwd, given_timeout = given(args.cwd), given(args.timeout)
    reject_nul({"command": args.command, "cwd": given_cwd}, "arguments.")
    norm = normalize(args.command, given(args.head), given(args.tail))
    requested = settings.tool.default_timeout if given_timeout is None else given_timeout
    timeout = clamp_timeout(requested)
    shaping = Shaping(
        head=norm.head,
        tail=norm.tail,
        max_bytes=settings.output.max_bytes,
        clamp=None if timeout == requested else (requested, timeout),
        null_timeout=timeout if timeout_null else None,
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
