"""The model's `bash` tool call as a command request (`services/request.py`):
its plan (`toolplan`) answered at once, started as a job, or run as a command
whose updates stream while it runs (`toolupdates`) and whose result is shaped
for the model (`toolfinish`); a resume elsewhere replays its progress.
"""

from __future__ import annotations

import functools
from typing import Any

import msgspec

from bashrpc.protocol.mcp import CallToolResult, HostOptions
from bashrpc.protocol.methods import BashResult
from bashrpc.server.output.artifacts import ArtifactStore
from bashrpc.server.output.sink import count_lines
from bashrpc.server.services import bashcall
from bashrpc.server.services.jobs import JobService
from bashrpc.server.services.outcome import Outcome
from bashrpc.server.services.request import Answer, Background, Command, Planned
from bashrpc.server.services.resumable import Logged
from bashrpc.server.services.streams import ListenerFactory, Notify
from bashrpc.server.services.tool import finish as toolfinish
from bashrpc.server.services.tool import jobtools
from bashrpc.server.services.tool import updates as toolupdates
from bashrpc.server.services.tool.plan import Plan
from bashrpc.server.settings import Settings

# What a tool call's record keeps for a resume: its MCP progress.
PROGRESS = Logged(frozenset({"notifications/progress"}))


class Context(msgspec.Struct, frozen=True):
    """What the tool call's shape depends on besides its plan."""

    request_id: Any
    host: HostOptions
    progress_token: str | int | None
    settings: Settings
    artifacts: ArtifactStore
    jobs: JobService


def planned(plan: Plan, background: bool, context: Context) -> Planned[CallToolResult]:
    if plan.spec is None:
        assert plan.early is not None
        return Answer(plan.early)
    spec = plan.spec
    if background:
        start = functools.partial(jobtools.start, context.jobs, spec)
        return Background("tools/call", spec.session_id, start, kept=_kept)

    def listener(notify: Notify) -> ListenerFactory:
        return toolupdates.listener(
            notify,
            context.request_id,
            host=context.host,
            progress_token=context.progress_token,
            settings=context.settings,
            terminal=spec.terminal is not None,
        )

    def finish(outcome: Outcome) -> CallToolResult:
        return toolfinish.finish(outcome, plan.shaping, context.artifacts)

    return Command(spec, "tools/call", listener, finish, _resumed, logged=PROGRESS)


def _resumed(outcome: Outcome, result: CallToolResult) -> BashResult:
    """A tool result as a resume gets it: the command's, with the model's text."""
    return msgspec.structs.replace(bashcall.finish(outcome), tool_text=result.text)


def _kept(result: CallToolResult) -> BashResult:
    """A tool result with no command behind it (a job started), as a resume gets it."""
    text = result.text
    lines, size = count_lines(text.encode()), len(text.encode())
    return BashResult(
        output=text,
        exit_code=None,
        cancelled=False,
        timed_out=False,
        truncated=False,
        total_lines=lines,
        total_bytes=size,
        output_lines=lines,
        output_bytes=size,
        working_dir=None,
        tool_text=text,
    )
