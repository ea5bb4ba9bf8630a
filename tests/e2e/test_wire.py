"""The JSON-RPC wire, over the real server's stdin and stdout."""

from __future__ import annotations

import json
import time

import msgspec

from bashrpc.protocol import messages
from bashrpc.protocol.client import ClientCore, result_of
from bashrpc.protocol.envelope import ErrorObject, RequestId, ServerMessage
from bashrpc.protocol.errors import ErrorCode
from bashrpc.protocol.mcp import EmptyResult, ToolsCallParams
from bashrpc.protocol.methods import (
    AbortBashParams,
    AbortBashResult,
    BashParams,
    BashResult,
    PtyInputParams,
    PtyOutput,
    SessionListResult,
)
from tests.conftest import SpawnInProcess
from tests.inprocess import InProcessServer
from tests.rpc import error_of, wait_until

# How long a batch's one reply line may take to come back.
BATCH_REPLY_SECONDS = 30.0


def send_json(server: InProcessServer, value: object) -> None:
    """Any JSON value as one line: the hand-made requests these tests are about."""
    server.send_raw(json.dumps(value).encode() + b"\n")


def batch_reply(
    server: InProcessServer, timeout: float = BATCH_REPLY_SECONDS
) -> list[ServerMessage]:
    """The first batch reply the server wrote, as the one array it is (the client
    hands its members on one by one)."""

    def batch_line() -> bytes | None:
        return next((line for line in server.raw_lines if line.lstrip().startswith(b"[")), None)

    assert wait_until(lambda: batch_line() is not None, timeout=timeout), "no batch reply"
    line = batch_line()
    assert line is not None
    members = ClientCore.line(line)
    assert all(isinstance(m, ServerMessage) for m in members), members
    return [m for m in members if isinstance(m, ServerMessage)]


def test_parse_error_has_null_id(server: InProcessServer) -> None:
    server.send_raw(b'{"jsonrpc":"2.0","id":1,"method":\n')
    reply = server.next_message()
    assert reply.id is None
    assert error_of(reply).code == ErrorCode.PARSE_ERROR


def test_invalid_request(server: InProcessServer) -> None:
    send_json(server, {"jsonrpc": "1.0", "id": 5, "method": "bash"})
    reply = server.response(5)
    assert error_of(reply).code == ErrorCode.INVALID_REQUEST


def test_method_not_found(server: InProcessServer) -> None:
    err = server.error("no/such/method")
    assert err.code == ErrorCode.METHOD_NOT_FOUND
    assert err.message == messages.METHOD_NOT_FOUND


def test_invalid_params_names_the_field(server: InProcessServer) -> None:
    err = server.error_raw("bash", {"command": 5})
    assert err.code == ErrorCode.INVALID_PARAMS
    assert "$.command" in err.data
    err = server.error_raw("bash", {"command": "true", "colour": "blue"})
    assert "colour" in err.data
    err = server.error_raw("bash", {})
    assert "command" in err.data


def test_invalid_params_message_says_what_and_where(server: InProcessServer) -> None:
    """Clients show the message, not `data`: the message names the field and the value.
    Params of the wrong shape go out raw; a tool call is well-typed up to its
    arguments, which are the tool's own JSON."""
    cases: list[tuple[str, msgspec.Struct | dict[str, object], str]] = [
        ("bash", {"command": "x", "timeout": "30"}, 'timeout: expected a number or null, got "30"'),
        ("bash", {"command": 5}, "command: expected a string, got 5"),
        ("bash", {}, "command: required field missing"),
        (
            "bash",
            BashParams(command="a\u0000b"),
            'command: expected a string without NUL characters, got "a\\u0000b"',
        ),
        ("artifact/read", {"id": "7"}, 'id: expected an integer, got "7"'),
        ("session/open", {"sandbox": "open"}, "sandbox: invalid enum value 'open'"),
        (
            "tools/call",
            ToolsCallParams(name="bash", arguments=msgspec.Raw(b'{"command":["ls"]}')),
            'command: expected a string, got ["ls"]',
        ),
        ("tools/call", ToolsCallParams(name="python"), "unknown tool: python"),
        (
            "initialize",
            {"protocolVersion": "1", "initializationOptions": {"toolNames": "read"}},
            'initializationOptions.toolNames: expected an array, got "read"',
        ),
    ]
    for method, params, reason in cases:
        if isinstance(params, msgspec.Struct):
            err = server.error(method, params)
        else:
            err = server.error_raw(method, params)
        assert err.code == ErrorCode.INVALID_PARAMS
        assert err.message == messages.invalid_params(reason), (method, params)
        assert err.data


def test_env_names_must_be_identifiers(server: InProcessServer) -> None:
    for bad in ["A;B", "1X", "$(touch x)", "A B", ""]:
        err = server.error("bash", BashParams(command="true", env={bad: "1"}))
        assert err.code == ErrorCode.INVALID_PARAMS
        assert "env" in err.data
    assert not (server.tmp / "x").exists()


def test_nul_in_command_is_invalid_params(server: InProcessServer) -> None:
    err = server.error("bash", BashParams(command="echo a\u0000b"))
    assert err.code == ErrorCode.INVALID_PARAMS
    assert err.data == messages.FIELD_HAS_NUL.format(field="command")


def test_huge_line_is_refused_and_the_next_request_is_served(server: InProcessServer) -> None:
    big = b'{"jsonrpc":"2.0","id":1,"method":"bash","params":{"command":"' + b"x" * (
        20 * 1024 * 1024
    )
    server.send_raw(big + b'"}}\n')
    reply = server.next_message()
    assert reply.id is None
    assert error_of(reply) == ErrorObject(
        code=ErrorCode.INVALID_REQUEST, message=messages.MESSAGE_TOO_LARGE
    )
    assert server.bash("echo still here").output == "still here\n"


def test_line_limit_is_configurable(spawn: SpawnInProcess) -> None:
    server = spawn("maxLineBytes = 2048")
    server.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"ping","x":"' + b"y" * 3000 + b'"}\n')
    assert error_of(server.next_message()).message == messages.MESSAGE_TOO_LARGE
    assert server.bash("echo ok").output == "ok\n"


def test_unicode_line_separators_are_data(server: InProcessServer) -> None:
    result = server.bash("printf '%s' 'a\u2028b\u2029c'")
    assert result.output == "a\u2028b\u2029c"


def test_crlf_framing_and_blank_lines(server: InProcessServer) -> None:
    server.send_raw(
        b'\r\n\n{"jsonrpc":"2.0","id":"crlf","method":"bash","params":{"command":"echo ok"}}\r\n'
    )
    assert server.bash_result("crlf").output == "ok\n"


def test_batch_answers_each_member_and_skips_notifications(server: InProcessServer) -> None:
    batch = [
        {"jsonrpc": "2.0", "id": "a", "method": "bash", "params": {"command": "echo A"}},
        {"jsonrpc": "2.0", "id": "b", "method": "nope"},
        7,
        {"jsonrpc": "2.0", "method": "session/list"},
        {"jsonrpc": "2.0", "id": "c", "method": "session/list"},
    ]
    send_json(server, batch)
    reply = batch_reply(server)
    by_id = {r.id: r for r in reply}
    assert len(reply) == 4
    assert result_of(by_id["a"], BashResult).output == "A\n"
    assert error_of(by_id["b"]).code == ErrorCode.METHOD_NOT_FOUND
    assert error_of(by_id[None]).code == ErrorCode.INVALID_REQUEST
    result_of(by_id["c"], SessionListResult)  # raises unless it is a session list


def test_empty_batch_and_notification_only_batch(server: InProcessServer) -> None:
    server.send_raw(b"[]\n")
    assert error_of(server.next_message()).code == ErrorCode.INVALID_REQUEST
    send_json(server, [{"jsonrpc": "2.0", "method": "session/list"}])
    server.request("session/list", id="after")
    reply = server.next_message()
    assert reply.id == "after"  # the notification-only batch got no reply


def test_notifications_are_never_answered(server: InProcessServer) -> None:
    server.notify("no/such/method")
    send_json(server, {"jsonrpc": "2.0", "method": "bash", "params": {"command": 5}})
    server.request("session/list", id=1)
    assert server.next_message().id == 1


def test_ids_keep_their_type(server: InProcessServer) -> None:
    idents: list[RequestId] = ["1", 1, "", -5, 2**53]
    for ident in idents:
        server.request("session/list", id=ident)
        reply = server.next_message()
        assert reply.id == ident and type(reply.id) is type(ident)


def test_batch_members_count_as_requests_in_flight(spawn: SpawnInProcess) -> None:
    server = spawn("[sessions]\nmaxShells = 4\n")
    batch = [
        {
            "jsonrpc": "2.0",
            "id": i,
            "method": "bash",
            # A session each: one session's commands would take turns.
            "params": {"command": "sleep 2", "pty": True, "sessionId": f"s{i}"},
        }
        for i in range(300)
    ]
    send_json(server, batch)
    reply = batch_reply(server, timeout=60)
    assert len(reply) == 300
    codes = [r.error.code if r.error is not None else 0 for r in reply]
    # 256 in flight at most; of those, PTYs count toward the hard shell limit (2 x 4).
    assert codes.count(ErrorCode.SERVER_BUSY) >= 300 - 256
    assert 1 <= codes.count(0) <= 8
    assert codes.count(ErrorCode.TOO_MANY_SHELLS) >= 256 - 8
    assert server.result("ping") == EmptyResult()


def test_invalid_utf8_in_a_string_or_a_key_is_a_parse_error(server: InProcessServer) -> None:
    for line in (
        b'{"jsonrpc":"2.0","id":3,"method":"bash","params":{"command":"echo \xff"}}\n',
        b'{"jsonrpc":"2.0","id":4,"method":"ping","params":{},"x\xff":1}\n',
    ):
        server.send_raw(line)
        reply = server.next_message()
        assert reply.id is None and error_of(reply).code == ErrorCode.PARSE_ERROR
    assert "Traceback" not in server.stderr()
    assert server.bash("echo fine").output == "fine\n"


def test_pty_input_never_stalls_the_reader(server: InProcessServer) -> None:
    ident = server.request(
        "bash", BashParams(command="stty raw -echo; echo ready; sleep 20", pty=True)
    )
    server.receive_until(
        lambda: any(o.request_id == ident for o in server.notified("pty/output", PtyOutput)),
        timeout=10,
    )
    server.request("pty/input", PtyInputParams(request_id=ident, data="x" * 200_000))
    started = time.monotonic()
    assert server.result("ping", timeout=5) == EmptyResult()
    assert server.result(
        "abort_bash", AbortBashParams(request_id=ident), timeout=5
    ) == AbortBashResult(aborted=True)
    assert time.monotonic() - started < 5
    assert server.bash_result(ident, timeout=10).cancelled


# `_meta` values of types nothing here can use: each is ignored, as unknown keys are.
ODD_META = {"traceparent": 5, "tracestate": ["x"], "progressToken": {"a": 1}, "editor": None}
ODD_META_CALLS: dict[str, dict[str, object]] = {
    "ping": {},
    "bash": {"command": "echo meta-ok"},
    "session/list": {},
    "terminal/list": {},
    "server/stats": {},
    "tools/call": {"name": "bash", "arguments": {"command": "echo meta-ok"}},
}


def test_meta_values_of_an_unusable_type_are_ignored_on_every_method(
    server: InProcessServer,
) -> None:
    """MCP's `_meta` is open metadata: what the server cannot use is never a -32602."""
    for method, params in ODD_META_CALLS.items():
        reply = server.call_raw(method, {**params, "_meta": ODD_META})
        assert reply.error is None, (method, reply.error)
