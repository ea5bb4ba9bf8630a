"""MCP tasks (2025-11-25): a bash tools/call with `task` runs as a background job,
polled with tasks/get and tasks/list, read with tasks/result, killed by tasks/cancel."""

from __future__ import annotations

import os

import msgspec
import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.client import notification_params
from bashrpc.protocol.errors import ErrorCode
from bashrpc.protocol.mcp import (
    TASK_STATUS,
    BashToolArguments,
    CallToolResult,
    EmptyParams,
    RelatedTask,
    ResultMeta,
    Task,
    TaskMetadata,
    TaskParams,
    TasksCapability,
    TasksListResult,
    ToolsCallParams,
    ToolsListResult,
)
from bashrpc.protocol.mcpclient import bash_tool_call
from tests.daemon import introduce
from tests.e2e.conftest import SpawnDaemon
from tests.e2e.test_mcp_revisions import initialize_at
from tests.inprocess import InProcessServer
from tests.rpc import RpcClient, wait_until

BOUND_SECONDS = 60.0


def task_call(command: str, ttl: int | None = None) -> ToolsCallParams:
    call = bash_tool_call(BashToolArguments(command=command), None)
    call.task = TaskMetadata(ttl=ttl)
    return call


def start_task(server: RpcClient, command: str, ttl: int | None = None) -> Task:
    created = server.typed(CallToolResult, "tools/call", task_call(command, ttl))
    assert created.content == [] and created.task is not None
    assert created.task.status == "working"
    return created.task


def get(server: RpcClient, task: Task) -> Task:
    return server.typed(Task, "tasks/get", TaskParams(task_id=task.task_id))


def test_2025_11_25_declares_tasks(server: InProcessServer) -> None:
    tasks = initialize_at(server, "2025-11-25").capabilities.tasks
    assert isinstance(tasks, TasksCapability) and tasks.requests.tools == {"call": {}}
    assert tasks.list == {} and tasks.cancel == {}
    for older in ("2025-06-18", "2025-03-26", "2024-11-05"):
        assert initialize_at(server, older).capabilities.tasks is msgspec.UNSET
    bash = server.typed(ToolsListResult, "tools/list").tools[0]
    assert bash.execution is not None and bash.execution.task_support == "optional"


def test_a_task_runs_as_a_job_and_its_result_is_the_bash_result(server: InProcessServer) -> None:
    initialize_at(server, "2025-11-25")
    task = start_task(server, "echo started; sleep 0.5; echo done; (exit 3)", ttl=60_000)
    assert task.ttl == 60_000 and task.poll_interval is not None
    assert get(server, task).status in ("working", "completed")
    listed = server.typed(TasksListResult, "tasks/list", EmptyParams()).tasks
    assert [t.task_id for t in listed] == [task.task_id]
    result = server.typed(CallToolResult, "tasks/result", TaskParams(task_id=task.task_id))
    assert result.is_error
    assert result.text.startswith("started\ndone\n")
    assert "exited with code 3" in result.text
    assert isinstance(result.meta, ResultMeta)
    assert result.meta.related_task == RelatedTask(task_id=task.task_id)
    ended = get(server, task)
    assert ended.status == "completed" and ended.poll_interval is None
    assert ended.last_updated_at >= ended.created_at
    # The client heard of the end.
    server.receive_until(lambda: bool(server.notifications(TASK_STATUS)))
    told = notification_params(server.notifications(TASK_STATUS)[0], Task)
    assert told.task_id == task.task_id and told.status == "completed"
    # Its end is the task's, not a line in the model's next result.
    assert call_text(server, "echo next") == "next\n"


def call_text(server: RpcClient, command: str) -> str:
    call = bash_tool_call(BashToolArguments(command=command), None)
    return server.typed(CallToolResult, "tools/call", call).text


def test_cancel_kills_the_command(server: InProcessServer, tmp_path: os.PathLike[str]) -> None:
    initialize_at(server, "2025-11-25")
    pid_file = f"{tmp_path}/pid"
    task = start_task(server, f"echo $$ > {pid_file}; exec sleep 60")
    assert wait_until(lambda: os.path.exists(pid_file) and open(pid_file).read().strip() != "")
    pid = int(open(pid_file).read())
    cancelled = server.typed(Task, "tasks/cancel", TaskParams(task_id=task.task_id))
    assert cancelled.status == "cancelled"
    assert cancelled.status_message == messages.TASK_CANCELLED
    assert wait_until(lambda: not os.path.exists(f"/proc/{pid}"))
    assert get(server, task).status == "cancelled"
    again = server.error("tasks/cancel", TaskParams(task_id=task.task_id))
    assert again.code == ErrorCode.INVALID_PARAMS
    assert again.data == messages.TASK_ALREADY_ENDED.format(
        task_id=task.task_id, status="cancelled"
    )


def test_unknown_tasks_are_invalid_params(server: InProcessServer) -> None:
    initialize_at(server, "2025-11-25")
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        error = server.error(method, TaskParams(task_id="term-99"))
        assert error.code == ErrorCode.INVALID_PARAMS
        assert error.data == messages.NO_SUCH_TASK.format(task_id="term-99")
    # A job the model started is not a task.
    job = server.typed(
        CallToolResult,
        "tools/call",
        bash_tool_call(BashToolArguments(command="sleep 5", run_in_background=True), None),
    )
    terminal = job.text.split()[-1].rstrip("]")
    error = server.error("tasks/get", TaskParams(task_id=terminal))
    assert error.data == messages.NO_SUCH_TASK.format(task_id=terminal)


@pytest.mark.slow
def test_a_task_is_its_tenants_and_read_from_a_new_connection_after_a_cut(
    spawn_daemon: SpawnDaemon,
) -> None:
    daemon = spawn_daemon("--detach-grace", "60").wait_listening()
    first = introduce(daemon.connect(), "owner")
    finished = start_task(first, "sleep 1; echo finished")
    endless = start_task(first, "echo up; exec sleep 600")
    first.cut()
    other = introduce(daemon.connect(), "someone-else")
    second = introduce(daemon.connect(), "owner")
    # Another tenant sees none of them.
    error = other.error("tasks/get", TaskParams(task_id=finished.task_id))
    assert error.data == messages.NO_SUCH_TASK.format(task_id=finished.task_id)
    assert other.typed(TasksListResult, "tasks/list", EmptyParams()).tasks == []
    listed = second.typed(TasksListResult, "tasks/list", EmptyParams()).tasks
    assert {t.task_id for t in listed} == {finished.task_id, endless.task_id}
    params = TaskParams(task_id=finished.task_id)
    result = second.typed(CallToolResult, "tasks/result", params, BOUND_SECONDS)
    assert not result.is_error and result.text.startswith("finished\n")
    # The new connection's cancel kills the command the first one started.
    cancelled = second.typed(Task, "tasks/cancel", TaskParams(task_id=endless.task_id))
    assert cancelled.status == "cancelled"
    assert wait_until(lambda: daemon.owned_processes() == [], BOUND_SECONDS)
    other.close()
    second.close()
