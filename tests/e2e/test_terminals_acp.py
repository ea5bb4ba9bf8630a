"""ACP's terminals as the official SDKs send them, on an in-process server: the
`args` they fill in, ACP's error for a terminal that is not there, and ACP's
`$/cancel_request`. Each request is written as an ACP client writes it."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from bashrpc.protocol.envelope import ServerMessage
from bashrpc.protocol.errors import ErrorCode, NoSuchTerminalData
from bashrpc.protocol.terminals import (
    TerminalCreateResult,
    TerminalListParams,
    TerminalListResult,
    TerminalOutputResult,
    TerminalWaitResult,
)
from tests.conftest import SpawnInProcess
from tests.inprocess import InProcessServer
from tests.rpc import error_of, ok_result, wait_until

# Generous: only to catch a hang.
BOUND_SECONDS = 60.0
SESSION = "sess_abc123def456"
RC = "alias greet='echo hello from the rc'\n"
# What the SDKs send for "no arguments": the TypeScript SDK turns `null` into `[]`,
# and the Python SDK's agent sends `[]` itself.
NO_ARGS = {"absent": "", "null": ', "args": null', "empty": ', "args": []'}


def acp_line(ident: str, method: str, params_json: str) -> bytes:
    return (
        f'{{"jsonrpc":"2.0","id":"{ident}","method":"{method}","params":{params_json}}}\n'.encode()
    )


def acp_call(server: InProcessServer, ident: str, method: str, params_json: str) -> ServerMessage:
    server.send_raw(acp_line(ident, method, params_json))
    return server.response(ident, BOUND_SECONDS)


def create(server: InProcessServer, ident: str, command: str, args_json: str) -> str:
    params = (
        f'{{"sessionId":"{SESSION}","command":{msgspec.json.encode(command).decode()}{args_json}}}'
    )
    return ok_result(
        acp_call(server, ident, "terminal/create", params), TerminalCreateResult
    ).terminal_id


def ids(terminal_id: str) -> str:
    return f'{{"sessionId":"{SESSION}","terminalId":"{terminal_id}"}}'


def finished_output(server: InProcessServer, terminal_id: str) -> str:
    waited = acp_call(server, f"wait-{terminal_id}", "terminal/wait_for_exit", ids(terminal_id))
    assert ok_result(waited, TerminalWaitResult).exit_code == 0
    got = acp_call(server, f"out-{terminal_id}", "terminal/output", ids(terminal_id))
    return ok_result(got, TerminalOutputResult).output


@pytest.mark.parametrize("args_json", NO_ARGS.values(), ids=NO_ARGS.keys())
def test_shell_text_runs_in_a_shell_whatever_no_args_it_comes_with(
    server: InProcessServer, args_json: str
) -> None:
    terminal = create(server, "make", "echo one two | tr a-z A-Z", args_json)
    assert finished_output(server, terminal) == "ONE TWO\n"


def test_a_bare_program_name_with_empty_args_runs_as_a_program(
    spawn: SpawnInProcess, tmp_path: Path
) -> None:
    """`greet` is an alias of the rc: shell text finds it, a program of that name
    does not exist."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / ".bashrc").write_text(RC)
    server = spawn()
    as_text = create(server, "text", "greet", NO_ARGS["absent"])
    assert finished_output(server, as_text) == "hello from the rc\n"
    params = f'{{"sessionId":"{SESSION}","command":"greet","args":[]}}'
    refused = error_of(acp_call(server, "program", "terminal/create", params))
    assert refused.code == ErrorCode.INVALID_PARAMS
    assert "greet" in refused.message


def test_an_unknown_or_released_terminal_is_acps_resource_not_found(
    server: InProcessServer,
) -> None:
    terminal = create(server, "make", "true", NO_ARGS["absent"])
    acp_call(server, "release", "terminal/release", ids(terminal))
    for name in ("terminal/output", "terminal/wait_for_exit", "terminal/kill"):
        for missing in (terminal, "term-99"):
            error = error_of(acp_call(server, f"{name}-{missing}", name, ids(missing)))
            assert error.code == ErrorCode.RESOURCE_NOT_FOUND
            assert msgspec.convert(error.data, NoSuchTerminalData).terminal_id == missing


def test_cancel_request_ends_a_waiting_wait_for_exit_and_not_the_job(
    server: InProcessServer,
) -> None:
    terminal = create(server, "make", "exec sleep 300", NO_ARGS["absent"])
    server.send_raw(acp_line("wait", "terminal/wait_for_exit", ids(terminal)))
    # Answered after the wait was read: the cancel finds it in flight.
    ok_result(acp_call(server, "out", "terminal/output", ids(terminal)), TerminalOutputResult)
    server.send_raw(
        b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"wait"}}\n'
    )
    cancelled = error_of(server.response("wait", BOUND_SECONDS))
    assert cancelled.code == ErrorCode.REQUEST_CANCELLED
    listed = server.typed(TerminalListResult, "terminal/list", TerminalListParams())
    assert [t.state for t in listed.terminals] == ["running"]
    acp_call(server, "release", "terminal/release", ids(terminal))
    assert not [c for c in server.owned_commands() if "sleep 300" in c]


def test_a_create_cancelled_while_it_waits_for_readiness_leaves_no_job(
    server: InProcessServer,
) -> None:
    """Nobody learns the id of a job whose create was cancelled: it is released."""
    params = (
        f'{{"sessionId":"{SESSION}","command":"echo up; exec sleep 300",'
        f'"ready":{{"log":"never printed","timeout":{BOUND_SECONDS}}}}}'
    )
    server.send_raw(acp_line("make", "terminal/create", params))
    assert wait_until(
        lambda: bool(
            server.typed(TerminalListResult, "terminal/list", TerminalListParams()).terminals
        ),
        BOUND_SECONDS,
    )
    server.send_raw(
        b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"make"}}\n'
    )
    cancelled = error_of(server.response("make", BOUND_SECONDS))
    assert cancelled.code == ErrorCode.REQUEST_CANCELLED
    listed = server.typed(TerminalListResult, "terminal/list", TerminalListParams())
    assert listed.terminals == []
    assert not [c for c in server.owned_commands() if "sleep 300" in c]
