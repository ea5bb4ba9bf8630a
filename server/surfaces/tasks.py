"""MCP tasks (2025-11-25): `tasks/get`, `tasks/result`, `tasks/list`, `tasks/cancel`.

A thin adapter over `services.tool.tasks`: a task is a background job of the
connection's owner, so it is found from any connection of that owner.
"""

from __future__ import annotations

from bashrpc.protocol.mcp import (
    CallToolResult,
    EmptyParams,
    EmptyResult,
    Task,
    TaskParams,
    TasksListResult,
    TaskUpdateParams,
)
from bashrpc.server.connection import RequestContext
from bashrpc.server.services.api import Services
from bashrpc.server.services.tool import tasks
from bashrpc.server.wire.registry import Registry

# As the other MCP methods: silent once the client closed our stdin.
methods = Registry(answers_after_eof=False)
Ctx = RequestContext[Services]


@methods.method("tasks/get")
async def tasks_get(ctx: Ctx, params: TaskParams) -> Task:
    """2026-07-28's holds the result once completed."""
    terminals = ctx.services.jobs
    if not params.modern:
        return tasks.task_of(tasks.find(terminals, params.task_id))
    max_bytes = ctx.connection.settings.output.max_bytes
    return await tasks.detailed(terminals, params.task_id, max_bytes)


@methods.method("tasks/result")
async def tasks_result(ctx: Ctx, params: TaskParams) -> CallToolResult:
    """Waits for the command's end, as MCP's tasks/result does."""
    if ctx.flight is not None:
        ctx.flight.runs_no_command()
    max_bytes = ctx.connection.settings.output.max_bytes
    return await tasks.result(ctx.services.jobs, params.task_id, max_bytes)


@methods.method("tasks/list")
async def tasks_list(ctx: Ctx, params: EmptyParams) -> TasksListResult:
    await tasks.sweep(ctx.services.jobs)
    return TasksListResult(tasks=tasks.listed(ctx.services.jobs))


@methods.method("tasks/update")
def tasks_update(ctx: Ctx, params: TaskUpdateParams) -> EmptyResult:
    """2026-07-28: answers to input requests, which these tasks never make."""
    tasks.refuse_input(ctx.services.jobs, params.task_id)
    return EmptyResult()


@methods.method("tasks/cancel")
async def tasks_cancel(ctx: Ctx, params: TaskParams) -> Task:
    if ctx.flight is not None:
        ctx.flight.runs_no_command()
    return await tasks.cancel(ctx.services.jobs, params.task_id)
