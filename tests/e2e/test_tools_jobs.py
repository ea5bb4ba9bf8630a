"""The model's background jobs through the real process: `run_in_background`,
`bash_output` (new output only), `bash_kill`, and a job's end told in the
next tool result, as one line."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.mcp import (
    BASH_KILL_TOOL,
    BASH_OUTPUT_TOOL,
    BashToolArguments,
    CallToolResult,
    JobToolArguments,
    ToolsCallParams,
)
from bashrpc.protocol.mcpclient import bash_tool_call
from bashrpc.protocol.terminals import TerminalListParams, TerminalListResult
from tests.rpc import ServerProcess, marked_processes, wait_until

pytestmark = pytest.mark.slow

BOUND_SECONDS = 60.0


def bash(server: ServerProcess, command: str, **arguments: Any) -> str:
    call = bash_tool_call(BashToolArguments(command=command, **arguments))
    result = server.typed(CallToolResult, "tools/call", call, BOUND_SECONDS)
    return result.text


def job_tool(server: ServerProcess, name: str, terminal_id: str) -> CallToolResult:
    arguments = msgspec.Raw(msgspec.json.encode(JobToolArguments(terminal_id=terminal_id)))
    call = ToolsCallParams(name=name, arguments=arguments)
    return server.typed(CallToolResult, "tools/call", call, BOUND_SECONDS)


def started_id(text: str) -> str:
    """The terminal id a `run_in_background` result names."""
    prefix, _, rest = messages.JOB_STARTED.partition("{terminal_id}")
    assert text.startswith(prefix), text
    return text[len(prefix) : len(text) - len(rest)]


def test_a_background_job_read_in_pieces_then_killed(process: ServerProcess) -> None:
    text = bash(
        process,
        "echo one; read -t 1 || true; echo two; exec -a model-job-mark sleep 300",
        run_in_background=True,
    )
    terminal = started_id(text)
    running = messages.JOB_RUNNING.format(terminal_id=terminal)
    reads: list[str] = []

    def read() -> str:
        reads.append(job_tool(process, BASH_OUTPUT_TOOL, terminal).text)
        return reads[-1]

    assert read().endswith(running)
    assert wait_until(lambda: "two" in read(), BOUND_SECONDS)
    assert read() == messages.JOB_NO_NEW_OUTPUT + "\n" + running
    # Each read has only what is new; together, everything once.
    printed = "".join(reads).replace(running, "").replace(messages.JOB_NO_NEW_OUTPUT + "\n", "")
    assert printed == "one\ntwo\n"
    killed = job_tool(process, BASH_KILL_TOOL, terminal).text
    assert killed.startswith(messages.JOB_NO_NEW_OUTPUT)
    assert killed.endswith(" was ended by SIGKILL]")
    assert marked_processes("model-job-mark") == []
    listing = process.typed(TerminalListResult, "terminal/list", TerminalListParams())
    assert listing.terminals == []


def test_a_jobs_end_shows_once_in_the_next_tool_result(process: ServerProcess) -> None:
    terminal = started_id(bash(process, "exit 3", run_in_background=True))
    assert wait_until(
        lambda: (
            process.typed(TerminalListResult, "terminal/list", TerminalListParams())
            .terminals[0]
            .state
            == "exited"
        ),
        BOUND_SECONDS,
    )
    told = bash(process, "echo next")
    line = messages.JOB_EXITED_CODE.format(terminal_id=terminal, command="exit 3", code=3)
    assert told == f"next\n\n{line}"
    assert line not in bash(process, "echo again")
    # The model's jobs are not announced as terminal/exited (an MCP client has no use for it).
    assert process.notifications("terminal/exited") == []


def test_an_unknown_job_is_a_tool_error(process: ServerProcess) -> None:
    result = job_tool(process, BASH_OUTPUT_TOOL, "term-99")
    assert result.is_error
    assert result.text == messages.NO_SUCH_TERMINAL.format(terminal_id="term-99")
