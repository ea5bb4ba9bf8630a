"""MCP 2026-07-28's `input_required` for a tool call whose command waits for input,
in-process over the in-memory transport with real programs on a real terminal:
the user is asked through the client, the call sent again with the answer goes
on; the `requestState` is sealed, and a forged, replayed or foreign one refused."""

from __future__ import annotations

from typing import Any, Literal

import msgspec
import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.errors import ErrorCode
from bashrpc.protocol.mcp import (
    BASH_INPUT_TOOL,
    BASH_TOOL,
    BashOverrides,
    CallToolResult,
    ConnectionSettings,
    ElicitResult,
    HostOptions,
    InputResponse,
    JobInputArguments,
    UiSize,
)
from bashrpc.protocol.mcpclient import initialize_params
from bashrpc.protocol.terminals import (
    TerminalOutputResult,
    TerminalParams,
    TerminalWaitResult,
    TerminalWriteParams,
    TerminalWriteResult,
)
from bashrpc.server.services.tool.inputrequired import ANSWER_FIELD, INPUT_KEY
from bashrpc.server.services.tool.plan import TOOL_SESSION_ID
from tests.daemon import DaemonProcess
from tests.e2e.test_mcp_modern import meta
from tests.e2e.test_mcp_revisions import wire
from tests.inprocess import InProcessServer
from tests.inputcases import BOUND_SECONDS, on_a_terminal
from tests.rpc import RpcClient

pytestmark = pytest.mark.slow

Action = Literal["accept", "decline", "cancel"]
ASKS: dict[str, Any] = {"elicitation": {}}
GREETER = 'python3 -c \'print("Hello", input("Name: "))\''


def _params(command: str, extra: dict[str, Any]) -> dict[str, Any]:
    """A 2026-07-28 `tools/call` of bash, its client able to ask its user."""
    params = {
        "name": BASH_TOOL,
        "arguments": {"command": command},
        "_meta": meta(capabilities=ASKS),
    }
    return {**params, **extra}


def _call(server: RpcClient, command: str, **extra: Any) -> CallToolResult:
    return _result(server, _params(command, extra))


def _result(server: RpcClient, params: dict[str, Any]) -> CallToolResult:
    reply = server.call_raw("tools/call", params, BOUND_SECONDS)
    return msgspec.json.decode(reply.result, type=CallToolResult)


def _answer(text: str, action: Action = "accept") -> Any:
    """`inputResponses` answering the one input request, as the wire has them."""
    answer = InputResponse(result=ElicitResult(action=action, content={ANSWER_FIELD: text}))
    return msgspec.to_builtins({INPUT_KEY: answer})


def _asked(result: CallToolResult) -> str:
    """What an `input_required` result asks the user."""
    assert result.result_type == "input_required" and result.input_requests is not None
    return result.input_requests[INPUT_KEY].params.message


def _refused(server: RpcClient, command: str, **extra: Any) -> str:
    error = server.error_raw("tools/call", _params(command, extra), BOUND_SECONDS)
    assert error.code == ErrorCode.INVALID_PARAMS, error
    assert isinstance(error.data, str)
    return error.data


@pytest.fixture
def asked(server: InProcessServer) -> InProcessServer:
    """A host with a UI runs tool calls on a terminal, where a command may wait."""
    on_a_terminal(server)
    return server


def test_the_user_is_asked_and_the_call_goes_on_with_the_answer(asked: InProcessServer) -> None:
    # The wire's own names, as a client reads them.
    first = wire(asked.call_raw("tools/call", _params(GREETER, {}), BOUND_SECONDS))
    assert first["resultType"] == "input_required"
    (request,) = first["inputRequests"].values()
    assert request["method"] == "elicitation/create"
    assert request["params"]["mode"] == "form"
    assert '"Name:"' in request["params"]["message"]
    schema = request["params"]["requestedSchema"]
    assert schema["required"] == [ANSWER_FIELD]
    assert schema["properties"][ANSWER_FIELD]["type"] == "string"
    state = first["requestState"]
    done = _call(asked, GREETER, inputResponses=_answer("Ada"), requestState=state)
    assert done.result_type == "complete"
    assert "Hello Ada" in done.text and "exited with code 0" in done.text, done.text
    # Taken once: the same state again is a replay.
    replay = _refused(asked, GREETER, inputResponses=_answer("Eve"), requestState=state)
    assert replay == messages.REQUEST_STATE_REPLAYED


def test_each_prompt_is_asked_in_turn(asked: InProcessServer) -> None:
    command = "read -p 'First: ' a; read -p 'Second: ' b; echo \"got $a $b\""
    first = _call(asked, command)
    assert '"First:"' in _asked(first)
    second = _call(asked, command, inputResponses=_answer("one"), requestState=first.request_state)
    assert '"Second:"' in _asked(second)
    assert second.request_state not in (None, first.request_state)
    done = _call(asked, command, inputResponses=_answer("two"), requestState=second.request_state)
    assert "got one two" in done.text


def test_an_answer_to_a_prompt_gone_is_not_typed_into_the_next(asked: InProcessServer) -> None:
    """The user's answer comes after the prompt it answers was answered another way
    (here the model's `bash_input`): it is not typed into the next prompt, which
    is asked in turn."""
    command = "read -p 'First: ' a; read -p 'Second: ' b; echo \"got $a $b\""
    first = _call(asked, command)
    assert '"First:"' in _asked(first)
    typed = msgspec.to_builtins(JobInputArguments(terminal_id="term-1", text="one"))
    by_model = _result(asked, {"name": BASH_INPUT_TOOL, "arguments": typed, "_meta": meta()})
    assert messages.JOB_WAITS.format(terminal_id="term-1", prompt='"Second:"') in by_model.text
    again = _call(asked, command, inputResponses=_answer("late"), requestState=first.request_state)
    assert '"Second:"' in _asked(again)
    done = _call(asked, command, inputResponses=_answer("two"), requestState=again.request_state)
    assert "got one two" in done.text


def test_an_answer_right_after_the_host_typed_one_is_not_typed(asked: InProcessServer) -> None:
    """The host answers the prompt on the terminal, and the user's answer comes
    at once, well within the settle time, before the next prompt could be told:
    the wait ended with the host's answer, so the user's is not typed into
    whatever the command reads next."""
    command = "read -p 'First: ' a; read -p 'Second: ' b; echo \"got $a $b\""
    first = _call(asked, command)
    assert '"First:"' in _asked(first)
    job = TerminalParams(session_id=TOOL_SESSION_ID, terminal_id="term-1")
    host = TerminalWriteParams(session_id=job.session_id, terminal_id=job.terminal_id, data="one\r")
    assert asked.typed(TerminalWriteResult, "terminal/write", host).bytes_written == 4
    late = _call(asked, command, inputResponses=_answer("late"), requestState=first.request_state)
    # Not typed, and said so; or, had the next prompt been told by then (this
    # client held up for the settle time), that one asked in turn.
    if late.result_type == "input_required":
        assert '"Second:"' in _asked(late)
    else:
        assert messages.INPUT_ANSWER_STALE.format(terminal_id="term-1") in late.text, late.text
    second = TerminalWriteParams(
        session_id=job.session_id, terminal_id=job.terminal_id, data="two\r"
    )
    asked.typed(TerminalWriteResult, "terminal/write", second)
    ended = asked.typed(TerminalWaitResult, "terminal/wait_for_exit", job)
    assert ended.exit_code == 0
    output = asked.typed(TerminalOutputResult, "terminal/output", job).output
    assert "got one two" in output and "late" not in output, output


def test_a_forged_or_foreign_state_is_refused(asked: InProcessServer) -> None:
    state = _call(asked, GREETER).request_state
    assert state is not None
    body, _, mac = state.partition(".")
    flipped = mac[:-2] + ("A" if mac[-2] != "A" else "B") + mac[-1]
    for forged in (f"{body}.{flipped}", "not-a-state", f"{body[:-1]}.{mac}", ""):
        refused = _refused(asked, GREETER, inputResponses=_answer("x"), requestState=forged)
        assert refused == messages.REQUEST_STATE_FORGED, forged
    # Another call's arguments: the state is tied to the call it answers.
    other = _refused(asked, "echo other", inputResponses=_answer("x"), requestState=state)
    assert other == messages.REQUEST_STATE_OTHER_CALL
    # Refusals took nothing: the right call still goes on.
    done = _call(asked, GREETER, inputResponses=_answer("Ada"), requestState=state)
    assert "Hello Ada" in done.text


def test_a_declined_answer_stops_the_command(asked: InProcessServer) -> None:
    state = _call(asked, GREETER).request_state
    done = _call(asked, GREETER, inputResponses=_answer("", "decline"), requestState=state)
    assert done.result_type == "complete" and done.is_error
    assert messages.INPUT_DECLINED.format(terminal_id="term-1") in done.text


def test_a_secret_prompt_is_never_put_in_a_form(asked: InProcessServer) -> None:
    done = _call(asked, "read -s -p 'Password: ' p; echo \"${#p}\"")
    assert done.result_type == "complete" and done.input_requests is None
    notice = messages.TOOL_WAITS_FOR_SECRET.format(prompt='"Password:"', terminal_id="term-1")
    assert done.text.endswith(notice)


def test_a_client_that_cannot_ask_gets_the_text(asked: InProcessServer) -> None:
    params = {"name": BASH_TOOL, "arguments": {"command": GREETER}, "_meta": meta()}
    done = _result(asked, params)
    assert done.result_type == "complete" and done.input_requests is None
    notice = messages.TOOL_WAITS_FOR_INPUT.format(prompt='"Name:"', terminal_id="term-1")
    assert done.text.endswith(notice)


def test_an_answer_outside_the_modern_era_is_refused(asked: InProcessServer) -> None:
    params = {"name": BASH_TOOL, "arguments": {"command": "true"}, "requestState": "x"}
    error = asked.error_raw("tools/call", params)
    assert error.code == ErrorCode.INVALID_PARAMS
    assert error.data == messages.REQUEST_STATE_UNEXPECTED


def _on_a_terminal_as(client: RpcClient, client_id: str | None) -> None:
    """A daemon's client named `client_id`, whose tool calls run on a terminal."""
    host = HostOptions(
        client_id=client_id,
        ui=UiSize(cols=100, rows=30),
        settings=ConnectionSettings(bash=BashOverrides(virtual_terminal="on")),
    )
    client.result("initialize", initialize_params(host))


@pytest.mark.parametrize("names", [("ada", "eve"), (None, None)])
def test_a_state_is_its_clients_alone_under_the_daemon(
    daemon: DaemonProcess, names: tuple[str | None, str | None]
) -> None:
    """One key for the daemon, each state bound to the client it was made for;
    connections that name no clientId are each a tenant of their own. Another's
    state is refused, even where it would answer a waiting command of its own."""
    one, other = daemon.connect(), daemon.connect()
    try:
        _on_a_terminal_as(one, names[0])
        _on_a_terminal_as(other, names[1])
        state = _call(one, GREETER).request_state
        assert _call(other, GREETER).request_state is not None
        taken = _refused(other, GREETER, inputResponses=_answer("Eve"), requestState=state)
        assert taken == messages.REQUEST_STATE_OTHER_TENANT
        done = _call(one, GREETER, inputResponses=_answer("Ada"), requestState=state)
        assert "Hello Ada" in done.text
    finally:
        one.close()
        other.close()
