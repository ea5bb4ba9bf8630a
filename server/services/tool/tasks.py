"""MCP tasks (2025-11-25) as the model's background jobs: one mechanism.

A `tools/call` of `bash` with `task` starts its planned command as a job of
the tool session, whose terminal id is the task's id; `tasks/get`, `tasks/list`
and `tasks/result` read the job, `tasks/cancel` kills it. Tasks live where the
jobs live, in the services of the connection's owner: under the daemon a task
is its tenant's, and a new connection of the same clientId reads it after a
cut. What a job is as a task (when it was made, how long it is kept, whether
it was cancelled) is kept beside it, as `jobview` keeps the model's view.
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from bashrpc.protocol import messages
from bashrpc.protocol.mcp import (
    TASK_NOTIFICATION,
    TASK_STATUS,
    CallToolResult,
    RelatedTask,
    ResultMeta,
    Task,
    TaskMetadata,
    TaskStatus,
    TaskV2,
    task_v2,
)
from bashrpc.server import errors
from bashrpc.server.runtime.jobs.job import Job
from bashrpc.server.services.commands import CommandSpec
from bashrpc.server.services.jobs import JobService, end_line
from bashrpc.server.services.tool import jobtools, jobview
from bashrpc.server.services.tool.plan import TOOL_SESSION_ID

# How long an ended task is kept when the call names no ttl, and at most.
DEFAULT_TTL_MS = 60 * 60 * 1000
MAX_TTL_MS = 24 * 60 * 60 * 1000
POLL_INTERVAL_MS = 1000

Notify = Callable[[str, Task | TaskV2], Awaitable[None]]


def _now() -> datetime:
    return datetime.now(UTC)


class TaskRecord:
    """What a job is as a task."""

    def __init__(self, ttl_ms: int) -> None:
        self.created = self.updated = _now()
        self.ttl_ms = ttl_ms
        self.cancelled = False
        # A status read has seen the command's end (and dated it).
        self.ended = False


_records: weakref.WeakKeyDictionary[Job, TaskRecord] = weakref.WeakKeyDictionary()


async def create(
    terminals: JobService, spec: CommandSpec, asked: TaskMetadata
) -> tuple[CallToolResult, Job | None]:
    """The call's command started as a task; past the job limit, the tool error
    `run_in_background` gives, and no job."""
    await sweep(terminals)
    job = await jobtools.launch(terminals, spec)
    if isinstance(job, CallToolResult):
        return job, None
    ttl = DEFAULT_TTL_MS if asked.ttl is None else max(0, min(asked.ttl, MAX_TTL_MS))
    _records[job] = TaskRecord(ttl)
    # Its end is the task's status, not a line in the model's next result.
    jobview.of(job).told_end = True
    return CallToolResult(task=task_of(job)), job


def task_of(job: Job) -> Task:
    record = _records[job]
    status: TaskStatus = "working"
    message = None
    if job.exited.is_set():
        if not record.ended:
            record.ended, record.updated = True, _now()
        status = "cancelled" if record.cancelled else "completed"
        message = messages.TASK_CANCELLED if record.cancelled else end_line(job)
    elif job.input_wait is not None:
        # Still working, as MCP has no status for what `bash_input` answers.
        message = jobtools.status_line(job)
    return Task(
        task_id=job.id,
        status=status,
        created_at=record.created.isoformat(),
        last_updated_at=record.updated.isoformat(),
        ttl=record.ttl_ms,
        poll_interval=POLL_INTERVAL_MS if status == "working" else None,
        status_message=message,
    )


def find(terminals: JobService, task_id: str) -> Job:
    """The task's job, among the owner's: -32602 when there is none."""
    try:
        job = terminals.job(TOOL_SESSION_ID, task_id)
    except errors.NoSuchTerminal:
        job = None
    if job is None or job not in _records:
        raise errors.InvalidArgument(messages.NO_SUCH_TASK.format(task_id=task_id))
    return job


def listed(terminals: JobService) -> list[Task]:
    return [task_of(job) for job in terminals.jobs(TOOL_SESSION_ID) if job in _records]


async def result(terminals: JobService, task_id: str, max_bytes: int) -> CallToolResult:
    """Once the command ended: its output (the tail within `max_bytes`) and how it
    ended, as the bash tool's result; a non-zero exit is a tool error."""
    job = find(terminals, task_id)
    await terminals.wait(job)
    text, _ = jobtools.output_after(job, 0, max_bytes)
    if job.ring.total == 0:
        text = messages.NO_OUTPUT
    failed = job.exit is None or job.exit.code != 0
    # As the call would have said had it run in the foreground: how it ended
    # only when that was a failure.
    if failed:
        text += end_line(job)
    answer = jobtools.text_result(text, None if job.exit is None else job.exit.code)
    answer.is_error = failed
    answer.meta = ResultMeta(related_task=RelatedTask(task_id=job.id))
    return answer


async def cancel(terminals: JobService, task_id: str) -> Task:
    """Kill the task's command; -32602 when it already ended, as MCP says."""
    job = find(terminals, task_id)
    if job.exited.is_set():
        status = task_of(job).status
        raise errors.InvalidArgument(
            messages.TASK_ALREADY_ENDED.format(task_id=task_id, status=status)
        )
    _records[job].cancelled = True
    await terminals.kill(job)
    return task_of(job)


async def tell_end(
    job: Job, notify: Notify, terminals: JobService, max_bytes: int, *, v2: bool
) -> None:
    """The task's status once the command ends, to the client that made it:
    `notifications/tasks/status` (2025-11-25), or `notifications/tasks` with the
    result (2026-07-28)."""
    await job.exited.wait()
    if job not in _records:
        return
    if not v2:
        await notify(TASK_STATUS, task_of(job))
        return
    await notify(TASK_NOTIFICATION, task_v2(await detailed(terminals, job.id, max_bytes)))


async def detailed(terminals: JobService, task_id: str, max_bytes: int) -> Task:
    """The task, with its result once completed (as 2026-07-28 has it)."""
    job = find(terminals, task_id)
    task = task_of(job)
    if task.status == "completed":
        task.result = await result(terminals, task_id, max_bytes)
    return task


def refuse_input(terminals: JobService, task_id: str) -> None:
    """`tasks/update`: a task never asks by `inputRequests` (the model answers its
    command's waits with `bash_input`, as any job's), so there is nothing to take."""
    find(terminals, task_id)
    raise errors.InvalidArgument(messages.TASK_TAKES_NO_INPUT.format(task_id=task_id))


async def sweep(terminals: JobService) -> None:
    """Release the ended tasks kept past their ttl (with their jobs)."""
    now = _now()
    for job in terminals.jobs(TOOL_SESSION_ID):
        record = _records.get(job)
        if record is None or not job.exited.is_set():
            continue
        if (now - record.created).total_seconds() * 1000 >= record.ttl_ms:
            await terminals.release(job)
