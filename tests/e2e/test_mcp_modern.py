"""MCP 2026-07-28 beside the initialize era, decided per request: server/discover,
the revision in each request's `_meta`, `resultType` on every result, the removed
methods answered -32601."""

from __future__ import annotations

import time
from typing import Any

import msgspec

from bashrpc.protocol import messages
from bashrpc.protocol.errors import ErrorCode
from bashrpc.protocol.mcp import (
    ALL_PROTOCOL_VERSIONS,
    BASH_INPUT_TOOL,
    BASH_TOOL,
    PROTOCOL_VERSION_KEY,
    TASK_NOTIFICATION,
    TASKS_EXTENSION,
    BashToolArguments,
    CallToolResult,
    JobInputArguments,
    TaskV2,
)
from tests.e2e.test_mcp_revisions import initialize_at, wire
from tests.inprocess import InProcessServer

MODERN = "2026-07-28"
CLIENT = {"name": "modern-test", "version": "1"}


def meta(version: str = MODERN, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        PROTOCOL_VERSION_KEY: version,
        "io.modelcontextprotocol/clientCapabilities": capabilities or {},
        "io.modelcontextprotocol/clientInfo": CLIENT,
    }


TASKS: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}}


def modern(server: InProcessServer, method: str, **params: Any) -> Any:
    return wire(server.call_raw(method, {**params, "_meta": meta()}))


def test_discover_names_every_revision(server: InProcessServer) -> None:
    found = modern(server, "server/discover")
    assert found["supportedVersions"] == list(ALL_PROTOCOL_VERSIONS)
    assert found["supportedVersions"][0] == MODERN
    assert found["resultType"] == "complete"
    assert found["cacheScope"] == "private" and found["ttlMs"] == 0
    assert found["capabilities"] == {
        "tools": {},
        "resources": {},
        "extensions": {TASKS_EXTENSION: {}},
    }
    assert found["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "bashrpc"
    assert found["instructions"] == messages.SERVER_INSTRUCTIONS


def test_modern_requests_need_no_initialize_and_say_their_kind(server: InProcessServer) -> None:
    listed = modern(server, "tools/list")
    assert [t["name"] for t in listed["tools"]] == [
        "bash",
        "bash_output",
        "bash_kill",
        "bash_input",
    ]
    assert listed["resultType"] == "complete" and listed["cacheScope"] == "private"
    called = modern(server, "tools/call", name=BASH_TOOL, arguments={"command": "echo hi"})
    assert called["resultType"] == "complete" and called["content"][0]["text"] == "hi\n"
    assert "cacheScope" not in called
    assert modern(server, "resources/list")["resultType"] == "complete"
    assert modern(server, "resources/templates/list")["resultType"] == "complete"
    assert modern(server, "tasks/list")["resultType"] == "complete"


def test_both_eras_on_one_connection(server: InProcessServer) -> None:
    initialize_at(server, "2025-11-25")
    legacy = wire(server.call_raw("tools/list", {}))
    assert "resultType" not in legacy and "cacheScope" not in legacy
    assert modern(server, "tools/list")["resultType"] == "complete"
    # A request naming an initialize-era revision is of that era.
    old = wire(server.call_raw("tools/list", {"_meta": meta("2025-06-18")}))
    assert "resultType" not in old


def test_removed_methods_and_unknown_revisions(server: InProcessServer) -> None:
    error = server.error_raw("ping", {"_meta": meta()})
    assert error.code == ErrorCode.METHOD_NOT_FOUND
    assert error.message == messages.REMOVED_METHOD.format(method="ping", revision=MODERN)
    # Without a modern revision, ping is what it was.
    assert wire(server.call_raw("ping", {})) == {}
    error = server.error_raw("logging/setLevel", {"level": "info", "_meta": meta()})
    assert error.code == ErrorCode.METHOD_NOT_FOUND
    error = server.error_raw("tools/list", {"_meta": meta("2099-01-01")})
    assert error.code == ErrorCode.UNSUPPORTED_PROTOCOL_VERSION
    assert int(error.code) == -32022
    data = msgspec.convert(error.data, dict[str, Any])
    assert data == {"requested": "2099-01-01", "supported": list(ALL_PROTOCOL_VERSIONS)}


def test_a_modern_task_request_runs_as_a_plain_call(server: InProcessServer) -> None:
    called = modern(
        server, "tools/call", name=BASH_TOOL, arguments={"command": "echo now"}, task={}
    )
    assert "task" not in called and called["content"][0]["text"] == "now\n"


def with_tasks(server: InProcessServer, method: str, **params: Any) -> Any:
    """A modern request of a client that declares the tasks extension."""
    return wire(server.call_raw(method, {**params, "_meta": meta(capabilities=TASKS)}))


def test_tasks_as_the_2026_extension(server: InProcessServer) -> None:
    command = {"command": "echo from a task; sleep 0.2", "run_in_background": True}
    created = with_tasks(server, "tools/call", name=BASH_TOOL, arguments=command)
    assert created["resultType"] == "task" and created["status"] == "working"
    assert created["ttlMs"] == 3_600_000 and created["pollIntervalMs"] == 1000
    task_id = created["taskId"]
    server.receive_until(lambda: bool(server.notifications(TASK_NOTIFICATION)))
    told = msgspec.json.decode(server.notifications(TASK_NOTIFICATION)[0].params)
    assert told["taskId"] == task_id and told["status"] == "completed"
    got = with_tasks(server, "tasks/get", taskId=task_id)
    assert got["resultType"] == "complete" and got["status"] == "completed"
    assert got["result"]["content"][0]["text"] == "from a task\n"
    # Exit 0: not a tool error (isError is left out when false).
    assert "isError" not in got["result"]
    assert told["result"] == got["result"]
    error = server.error_raw("tasks/update", {"taskId": task_id, "inputResponses": {}})
    assert error.data == messages.TASK_TAKES_NO_INPUT.format(task_id=task_id)


def _task(server: InProcessServer, task_id: str) -> TaskV2:
    reply = server.call_raw("tasks/get", {"taskId": task_id, "_meta": meta(capabilities=TASKS)})
    return msgspec.json.decode(reply.result, type=TaskV2)


def test_a_task_that_waits_says_so_and_bash_input_answers_it(server: InProcessServer) -> None:
    """A task's command that reads its stdin is seen waiting: its status says so,
    `tasks/update` (which these tasks never ask for) names what answers it, and
    `bash_input` does."""
    arguments = BashToolArguments(command='read -r name; echo "hi $name"', run_in_background=True)
    params = {"name": BASH_TOOL, "arguments": msgspec.to_builtins(arguments)}
    created = server.call_raw("tools/call", {**params, "_meta": meta(capabilities=TASKS)})
    task_id = msgspec.json.decode(created.result, type=TaskV2).task_id
    waits = messages.JOB_WAITS.format(terminal_id=task_id, prompt=messages.NO_PROMPT_TEXT)
    deadline = time.monotonic() + 30
    while (task := _task(server, task_id)).status_message != waits:
        assert task.status == "working" and time.monotonic() < deadline, task
        time.sleep(0.2)
    error = server.error_raw("tasks/update", {"taskId": task_id, "inputResponses": {}})
    assert error.data == messages.TASK_TAKES_NO_INPUT.format(task_id=task_id)
    answer = msgspec.to_builtins(JobInputArguments(terminal_id=task_id, text="Bob"))
    reply = server.call_raw(
        "tools/call", {"name": BASH_INPUT_TOOL, "arguments": answer, "_meta": meta()}
    )
    assert "hi Bob" in msgspec.json.decode(reply.result, type=CallToolResult).text
    while (task := _task(server, task_id)).status == "working":
        assert time.monotonic() < deadline, task
        time.sleep(0.2)
    assert task.status == "completed" and task.result is not None
    assert task.result.text == "hi Bob\n"


def test_a_2026_task_is_cancelled(server: InProcessServer) -> None:
    arguments = {"command": "exec sleep 60", "run_in_background": True}
    task_id = with_tasks(server, "tools/call", name=BASH_TOOL, arguments=arguments)["taskId"]
    cancelled = with_tasks(server, "tasks/cancel", taskId=task_id)
    assert cancelled["resultType"] == "complete" and "status" not in cancelled
    got = with_tasks(server, "tasks/get", taskId=task_id)
    assert got["status"] == "cancelled" and "result" not in got


def test_only_a_background_call_of_a_declaring_client_is_a_task(server: InProcessServer) -> None:
    plain = with_tasks(server, "tools/call", name=BASH_TOOL, arguments={"command": "echo now"})
    assert plain["resultType"] == "complete" and plain["content"][0]["text"] == "now\n"
    undeclared = modern(
        server,
        "tools/call",
        name=BASH_TOOL,
        arguments={"command": "sleep 5", "run_in_background": True},
    )
    assert undeclared["resultType"] == "complete"
    assert undeclared["content"][0]["text"].startswith("[Running in the background as term-")


def test_a_modern_call_gets_resource_links_and_argument_errors_as_tool_errors(
    server: InProcessServer,
) -> None:
    """What 2025-11-25 gets, a 2026-07-28 request gets too, with no initialize
    to say its revision."""
    big = modern(server, "tools/call", name=BASH_TOOL, arguments={"command": "seq 1 200000"})
    assert [c["type"] for c in big["content"]] == ["text", "resource_link"]
    assert big["content"][1]["uri"] == big["structuredContent"]["artifactUri"]
    bad = modern(server, "tools/call", name=BASH_TOOL, arguments={"command": 1})
    assert bad["isError"] is True and bad["resultType"] == "complete"
    assert "Expected `str`, got `int`" in bad["content"][0]["text"]
