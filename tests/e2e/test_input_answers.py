"""A command that waits for input never stalls its caller, through the real
`bashrpc`: a model's tool call on a terminal answers at once and goes on as a
background job the model answers (`bash_input`) or stops (`bash_kill`); a secret
prompt is the user's alone."""

from __future__ import annotations

import time

import msgspec
import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.client import notification_params
from bashrpc.protocol.mcp import (
    BASH_INPUT_TOOL,
    BASH_KILL_TOOL,
    BASH_OUTPUT_TOOL,
    BashToolArguments,
    CallToolResult,
    JobInputArguments,
    ToolsCallParams,
)
from bashrpc.protocol.mcpclient import bash_tool_call
from bashrpc.protocol.methods import NeedsInput, SessionListParams, SessionListResult
from tests.e2e.test_tools_jobs import job_tool
from tests.inputcases import BOUND_SECONDS, on_a_terminal
from tests.rpc import ServerProcess

pytestmark = pytest.mark.slow

TOOL_SESSION = "@tools"


def _call(process: ServerProcess, command: str) -> tuple[CallToolResult, float]:
    """The tool call's answer, and how long it took."""
    began = time.monotonic()
    call = bash_tool_call(BashToolArguments(command=command, timeout=120))
    result = process.typed(CallToolResult, "tools/call", call, BOUND_SECONDS)
    return result, time.monotonic() - began


def _answer(process: ServerProcess, terminal_id: str, text: str) -> CallToolResult:
    arguments = msgspec.Raw(
        msgspec.json.encode(JobInputArguments(terminal_id=terminal_id, text=text))
    )
    call = ToolsCallParams(name=BASH_INPUT_TOOL, arguments=arguments)
    return process.typed(CallToolResult, "tools/call", call, BOUND_SECONDS)


def test_a_tool_call_that_waits_answers_at_once_and_the_model_answers_it(
    process: ServerProcess,
) -> None:
    on_a_terminal(process)
    command = 'echo starting; python3 -c \'print("Hello", input("Name: "))\''
    result, took = _call(process, command)
    # Told after the settle time, far below the call's 120 s timeout.
    assert took < 30, took
    notice = messages.TOOL_WAITS_FOR_INPUT.format(prompt='"Name:"', terminal_id="term-1")
    assert result.text.endswith(notice), result.text
    assert "starting" in result.text
    assert not result.is_error
    # The host heard of it too, as an ordinary prompt.
    told = process.notified("bash/needsInput", NeedsInput)
    assert [(t.prompt, t.secret) for t in told] == [("Name:", False)]
    # While it waits, the session lists it.
    sessions = process.typed(SessionListResult, "session/list", SessionListParams())
    listed = {s.session_id: s for s in sessions.sessions}[TOOL_SESSION]
    assert [w.prompt for w in listed.needs_input or []] == ["Name:"]
    answered = _answer(process, "term-1", "Ada")
    assert "Hello Ada" in answered.text, answered.text
    assert "term-1" in answered.text and "exited with code 0" in answered.text
    assert not answered.is_error


def test_a_second_prompt_of_the_job_is_told_in_the_answer(process: ServerProcess) -> None:
    on_a_terminal(process)
    command = "read -p 'First: ' a; read -p 'Second: ' b; echo \"got $a $b\""
    result, _ = _call(process, command)
    assert '"First:"' in result.text
    answered = _answer(process, "term-1", "one")
    waits = messages.JOB_WAITS.format(terminal_id="term-1", prompt='"Second:"')
    assert answered.text.endswith(waits), answered.text
    output = job_tool(process, BASH_OUTPUT_TOOL, "term-1")
    assert output.text.endswith(waits), output.text
    answered = _answer(process, "term-1", "two")
    assert "got one two" in answered.text, answered.text


def test_a_secret_prompt_is_the_users_alone(process: ServerProcess) -> None:
    on_a_terminal(process)
    command = "read -s -p 'Password: ' p; echo; echo \"got ${#p} characters\""
    result, _ = _call(process, command)
    notice = messages.TOOL_WAITS_FOR_SECRET.format(prompt='"Password:"', terminal_id="term-1")
    assert result.text.endswith(notice), result.text
    told = process.notified("bash/needsInput", NeedsInput)
    assert [(t.prompt, t.secret) for t in told] == [("Password:", True)]
    refused = _answer(process, "term-1", "hunter22")
    assert refused.is_error
    assert refused.text == messages.INPUT_TO_SECRET.format(terminal_id="term-1")
    killed = job_tool(process, BASH_KILL_TOOL, "term-1")
    assert "term-1" in killed.text and "hunter22" not in killed.text
    assert "was ended by" in killed.text, killed.text


def test_a_tool_call_that_never_waits_is_answered_as_ever(process: ServerProcess) -> None:
    on_a_terminal(process)
    result, _ = _call(process, "sleep 2; echo done")
    assert result.text.strip() == "done"
    assert process.notifications("bash/needsInput") == []


def test_waiting_notice_names_its_prompt(process: ServerProcess) -> None:
    """The host's notification and the model's text agree on the prompt."""
    on_a_terminal(process)
    result, _ = _call(process, "read -p 'Overwrite notes.txt? [y/N] ' a; echo \"said $a\"")
    told = notification_params(process.notifications("bash/needsInput")[0], NeedsInput)
    assert told.prompt == "Overwrite notes.txt? [y/N]"
    assert '"Overwrite notes.txt? [y/N]"' in result.text
    assert "said y" in _answer(process, "term-1", "y").text
