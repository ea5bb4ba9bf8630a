"""MCP tasks (2025-11-25): `tasks/get`, `tasks/result`, `tasks/list`, `tasks/cancel`.

A thin adapter over `services.tool.tasks`: a task is a background job of the
connection's owner, so it is found from any connection of that owner.
"""

from __future__ import annotations

from bashrpc.protocol.mcp import CallToolResult, EmptyParams, Task, TaskParams, TasksListResult
from bashrpc.server.connection import RequestContext
from bashrpc.server.services.api import Services
from bashrpc.server.services.tool import tasks
from bashrpc.server.wire.registry import Registry

# As the other MCP methods: silent once the client closed our stdin.
methods = Registry(answers_after_eof=False)
Ctx = RequestContext[Services]


@methods.method("tasks/get")
def tasks_get(ctx: Ctx, params: TaskParams) -> Task:
    return tasks.task_of(tasks.find(ctx.services.terminals, params.task_id))


@methods.method("tasks/result")
async def tasks_result(ctx: Ctx, params: TaskParams) -> CallToolResult:
    """Waits for the command's end, as MCP's tasks/result does."""
    if ctx.flight is not None:
        ctx.flight.runs_no_command()
    max_bytes = ctx.connection.settings.output.max_bytes
    return await tasks.result(ctx.services.terminals, params.task_id, max_bytes)


@methods.method("tasks/list")
async def tasks_list(ctx: Ctx, params: EmptyParams) -> TasksListResult:
    await tasks.sweep(ctx.services.terminals)
    return TasksListResult(tasks=tasks.listed(ctx.services.terminals))


@methods.method("tasks/cancel")
async def tasks_cancel(ctx: Ctx, params: TaskParams) -> Task:
    if ctx.flight is not None:
        ctx.flight.runs_no_command()
    return await tasks.cancel(ctx.services.terminals, params.task_id)
