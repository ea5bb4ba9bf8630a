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
from bashrpc.protocol.errors import ErrorCode
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
from bashrpc.protocol.methods import (
    BashParams,
    BashResult,
    NeedsInput,
    PtyInputParams,
    PtyInputResult,
    SessionListParams,
    SessionListResult,
)
from bashrpc.protocol.terminals import (
    TerminalCreateParams,
    TerminalCreateResult,
    TerminalEmptyResult,
    TerminalExited,
    TerminalListParams,
    TerminalListResult,
    TerminalOutputResult,
    TerminalParams,
    TerminalWaitResult,
    TerminalWriteParams,
    TerminalWriteResult,
)
from tests.e2e.test_tools_jobs import bash as job_text
from tests.e2e.test_tools_jobs import job_tool, started_id
from tests.inputcases import BOUND_SECONDS, on_a_terminal, sandboxed_server
from tests.rpc import ServerProcess, ok_result

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


def test_what_follows_a_long_output_is_read_after_the_answer(process: ServerProcess) -> None:
    """A command that printed more than its request keeps before it waited: the
    model reads on from where the call's answer ended, not past what the job got."""
    on_a_terminal(process)
    command = "head -c 1500000 /dev/zero | tr '\\0' x; echo; read -p 'Name: ' n; echo \"hi $n\""
    result, _ = _call(process, command)
    assert result.text.endswith(
        messages.TOOL_WAITS_FOR_INPUT.format(prompt='"Name:"', terminal_id="term-1")
    )
    answered = _answer(process, "term-1", "Ada")
    assert "hi Ada" in answered.text and "x" * 100 not in answered.text, answered.text


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


# -- the host's `bash` with onInput: "return" ----------------------------------


def _terminal(terminal_id: str) -> TerminalParams:
    return TerminalParams(session_id="default", terminal_id=terminal_id)


def _returned(process: ServerProcess, command: str) -> BashResult:
    """`bash` on a PTY with `onInput: "return"`, answered."""
    params = BashParams(command=command, pty=True, on_input="return", timeout=120)
    return process.bash_result(process.request("bash", params), BOUND_SECONDS)


def test_bash_that_asked_to_return_answers_with_the_wait_and_goes_on_as_a_job(
    process: ServerProcess,
) -> None:
    result = _returned(process, 'echo starting; python3 -c \'print("Hello", input("Name: "))\'')
    assert result.terminal_id == "term-1" and result.exit_code is None
    assert result.needs_input is not None
    named = (result.needs_input.prompt, result.needs_input.secret, result.needs_input.terminal_id)
    assert named == ("Name:", False, "term-1")
    assert "starting" in result.output
    # The job shows the wait, in terminal/output, terminal/list and session/list,
    # naming the job that answers it.
    output = process.typed(TerminalOutputResult, "terminal/output", _terminal("term-1"))
    assert output.needs_input is not None and output.needs_input.prompt == "Name:"
    assert output.needs_input.terminal_id == "term-1" and output.exit_status is None
    listed = process.typed(TerminalListResult, "terminal/list", TerminalListParams())
    assert [t.needs_input for t in listed.terminals] == [output.needs_input]
    sessions = process.typed(SessionListResult, "session/list", SessionListParams())
    assert {s.session_id: s for s in sessions.sessions}["default"].needs_input == [
        output.needs_input
    ]
    # Its pid is the program's on the terminal.
    assert [t.pid is not None and t.pid > 0 for t in listed.terminals] == [True]
    write = TerminalWriteParams(session_id="default", terminal_id="term-1", data="Ada\r")
    process.typed(TerminalWriteResult, "terminal/write", write)
    ended = process.typed(TerminalWaitResult, "terminal/wait_for_exit", _terminal("term-1"))
    assert ended.exit_code == 0
    output = process.typed(TerminalOutputResult, "terminal/output", _terminal("term-1"))
    assert "Hello Ada" in output.output and output.needs_input is None
    exited = process.wait_for(lambda m: m.method == "terminal/exited", BOUND_SECONDS)
    assert notification_params(exited, TerminalExited).terminal_id == "term-1"


def test_a_secret_answer_to_a_returned_bash_is_typed_without_echo(
    process: ServerProcess,
) -> None:
    result = _returned(process, "read -s -p 'Password: ' p; echo; echo \"got ${#p} characters\"")
    assert result.needs_input is not None and result.needs_input.secret
    write = TerminalWriteParams(
        session_id="default", terminal_id="term-1", data="hunter22\r", secret=True
    )
    process.typed(TerminalWriteResult, "terminal/write", write)
    process.typed(TerminalWaitResult, "terminal/wait_for_exit", _terminal("term-1"))
    output = process.typed(TerminalOutputResult, "terminal/output", _terminal("term-1"))
    assert "got 8 characters" in output.output and "hunter22" not in output.output


def test_a_secret_is_not_typed_into_a_terminal_that_echoes(process: ServerProcess) -> None:
    assert _returned(process, "read -p 'Name: ' n").terminal_id == "term-1"
    write = TerminalWriteParams(
        session_id="default", terminal_id="term-1", data="hunter22\r", secret=True
    )
    error = process.error("terminal/write", write)
    assert error.code == ErrorCode.INVALID_PARAMS and error.data == messages.SECRET_WOULD_ECHO
    process.typed(TerminalEmptyResult, "terminal/kill", _terminal("term-1"))


def test_bash_that_asked_to_return_but_never_waits_ends_as_ever(process: ServerProcess) -> None:
    for pty in (True, False):
        params = BashParams(command="sleep 1.5; echo done", pty=pty, on_input="return")
        result = process.bash_result(process.request("bash", params), BOUND_SECONDS)
        assert result.exit_code == 0 and "done" in result.output
        assert result.terminal_id is None and result.needs_input is None


def test_a_request_id_used_again_names_the_new_command(process: ServerProcess) -> None:
    """Once answered, a returned `bash`'s id is free again (JSON-RPC): a new request
    of that id is its own, which `pty/input` of the id reaches and the job's kill
    leaves alone."""
    first = BashParams(command="read -p 'Name: ' n; echo \"hi $n\"", pty=True, on_input="return")
    job = process.bash_result(process.request("bash", first, id="again"), BOUND_SECONDS)
    assert job.terminal_id == "term-1"
    second = BashParams(
        command="read -p 'Second: ' s; sleep 1; echo \"second $s\"", pty=True, timeout=30
    )
    ident = process.request("bash", second, id="again")
    # Typed once the new command has the session's turn, which the job holds.
    typed = process.request("pty/input", PtyInputParams(request_id=ident, data="two\r"))
    process.typed(TerminalEmptyResult, "terminal/kill", _terminal("term-1"))
    ok_result(process.response(typed, BOUND_SECONDS), PtyInputResult)
    result = process.bash_result(ident, BOUND_SECONDS)
    assert (result.exit_code, result.cancelled) == (0, False), result
    assert "second two" in result.output
    output = process.typed(TerminalOutputResult, "terminal/output", _terminal("term-1"))
    assert "two" not in output.output and output.exit_status is not None


# -- background jobs on pipes: a wait on their stdin ----------------------------


def _job_output(process: ServerProcess, session: str, terminal_id: str) -> TerminalOutputResult:
    params = TerminalParams(session_id=session, terminal_id=terminal_id)
    return process.typed(TerminalOutputResult, "terminal/output", params)


def _until_waiting(process: ServerProcess, session: str, terminal_id: str) -> NeedsInput:
    """The job's wait, once terminal/output shows one (looked at a few times a second)."""
    deadline = time.monotonic() + BOUND_SECONDS
    while time.monotonic() < deadline:
        wait = _job_output(process, session, terminal_id).needs_input
        if wait is not None:
            return wait
        time.sleep(0.2)
    raise AssertionError(f"{terminal_id} was never shown waiting")


def test_a_job_that_reads_its_stdin_shows_its_wait(process: ServerProcess) -> None:
    command = 'python3 -c \'print("Hello", input("Name: "))\''
    create = TerminalCreateParams(session_id="default", command=command)
    terminal = process.typed(TerminalCreateResult, "terminal/create", create).terminal_id
    wait = _until_waiting(process, "default", terminal)
    assert (wait.prompt, wait.secret, wait.terminal_id) == ("Name:", False, terminal)
    assert wait.program == "python3"
    listed = process.typed(TerminalListResult, "terminal/list", TerminalListParams())
    assert [t.needs_input for t in listed.terminals] == [wait]
    sessions = process.typed(SessionListResult, "session/list", SessionListParams())
    assert {s.session_id: s for s in sessions.sessions}["default"].needs_input == [wait]
    write = TerminalWriteParams(session_id="default", terminal_id=terminal, data="Ada\n")
    process.typed(TerminalWriteResult, "terminal/write", write)
    params = TerminalParams(session_id="default", terminal_id=terminal)
    assert process.typed(TerminalWaitResult, "terminal/wait_for_exit", params).exit_code == 0
    output = _job_output(process, "default", terminal)
    assert "Hello Ada" in output.output and output.needs_input is None


def test_an_answered_wait_is_over_as_the_answer_is_written(process: ServerProcess) -> None:
    """The host types the answer: the job's wait is over once the write returns,
    not at its watch's next look a second later, so nothing shows it (or answers
    it again) any longer; the next prompt is a wait of its own."""
    # On a pipe `read -p` shows no prompt.
    command = "printf 'First: '; read a; printf 'Second: '; read b; echo \"got $a $b\""
    create = TerminalCreateParams(session_id="default", command=command)
    terminal = process.typed(TerminalCreateResult, "terminal/create", create).terminal_id
    first = _until_waiting(process, "default", terminal)
    assert first.prompt == "First:"
    write = TerminalWriteParams(session_id="default", terminal_id=terminal, data="one\n")
    process.typed(TerminalWriteResult, "terminal/write", write)
    # Gone, or (had this client been held up for the settle time) the next one.
    shown = _job_output(process, "default", terminal).needs_input
    assert shown is None or shown.since != first.since, shown
    second = _until_waiting(process, "default", terminal)
    # Nothing echoes on a pipe: the prompts share the output's last line.
    assert second.prompt == "First: Second:" and second.since != first.since
    write = TerminalWriteParams(session_id="default", terminal_id=terminal, data="two\n")
    process.typed(TerminalWriteResult, "terminal/write", write)
    params = TerminalParams(session_id="default", terminal_id=terminal)
    assert process.typed(TerminalWaitResult, "terminal/wait_for_exit", params).exit_code == 0
    assert "got one two" in _job_output(process, "default", terminal).output


@pytest.mark.parametrize(
    "command",
    [
        "sleep 4",
        "for i in 1 2 3 4 5 6 7 8; do echo tick; sleep 0.5; done",
        "(sleep 4; echo late) | cat",
        "python3 -c 'import time; time.sleep(4)' < /dev/null",
    ],
)
def test_a_busy_job_is_never_shown_waiting(process: ServerProcess, command: str) -> None:
    create = TerminalCreateParams(session_id="default", command=command)
    terminal = process.typed(TerminalCreateResult, "terminal/create", create).terminal_id
    params = TerminalParams(session_id="default", terminal_id=terminal)
    seen = []
    while (output := _job_output(process, "default", terminal)).exit_status is None:
        seen.append(output.needs_input)
        time.sleep(0.2)
    assert seen and not any(seen)
    assert process.typed(TerminalWaitResult, "terminal/wait_for_exit", params).exit_code == 0


def test_the_model_answers_its_background_job(process: ServerProcess) -> None:
    """A job of the model's reads its stdin: `bash_output` says it waits (bash prints
    no prompt without a terminal), `bash_input` answers it."""
    started = job_text(process, 'read -r name; echo "hi $name"', run_in_background=True)
    terminal = started_id(started)
    _until_waiting(process, TOOL_SESSION, terminal)
    waits = messages.JOB_WAITS.format(terminal_id=terminal, prompt=messages.NO_PROMPT_TEXT)
    assert job_tool(process, BASH_OUTPUT_TOOL, terminal).text.endswith(waits)
    answered = _answer(process, terminal, "Bob")
    assert "hi Bob" in answered.text and "exited with code 0" in answered.text, answered.text


def test_commands_gone_on_as_jobs_end_with_the_server(process: ServerProcess) -> None:
    """At the input's end every job goes, those a waiting command became too:
    the server exits and leaves no process behind."""
    on_a_terminal(process)
    result, _ = _call(process, "python3 -c 'input(\"Name: \")'")
    assert "term-1" in result.text
    assert _returned(process, "read -p 'Again: ' x").terminal_id == "term-2"
    assert process.close(BOUND_SECONDS) == 0
    assert process.owned_commands() == []


@pytest.mark.parametrize("user", ["server-user", "uid-65534"])
def test_sandboxed_waits_go_on_as_jobs_as_root_and_as_nobody(user: str) -> None:
    """In the sandbox, run by root and by uid 65534: a job reading its stdin is
    seen waiting, and a returned `bash` goes on as a job its host answers."""
    with sandboxed_server(user) as (server, _):
        create = TerminalCreateParams(session_id="default", command='read -r n; echo "hi $n"')
        reader = server.typed(TerminalCreateResult, "terminal/create", create).terminal_id
        assert _until_waiting(server, "default", reader).terminal_id == reader
        write = TerminalWriteParams(session_id="default", terminal_id=reader, data="Bob\n")
        server.typed(TerminalWriteResult, "terminal/write", write)
        ended = server.typed(TerminalWaitResult, "terminal/wait_for_exit", _terminal(reader))
        assert ended.exit_code == 0
        assert "hi Bob" in _job_output(server, "default", reader).output
        result = _returned(server, "read -s -p 'Password: ' p; echo; echo \"got ${#p}\"")
        assert result.needs_input is not None and result.needs_input.secret
        assert result.terminal_id is not None
        answer = TerminalWriteParams(
            session_id="default", terminal_id=result.terminal_id, data="hunter22\r", secret=True
        )
        server.typed(TerminalWriteResult, "terminal/write", answer)
        done = _terminal(result.terminal_id)
        assert server.typed(TerminalWaitResult, "terminal/wait_for_exit", done).exit_code == 0
        assert "got 8" in _job_output(server, "default", result.terminal_id).output
