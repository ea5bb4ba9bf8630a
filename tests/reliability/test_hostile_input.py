"""Hostile or odd input, driven into the real server.

Property: whatever arrives, every request carrying a usable id is answered
exactly once with a valid JSON-RPC response, nothing else reaches stdout,
and the server stays up (a sentinel request after each example is answered).
"""

from __future__ import annotations

import collections
import itertools
import json
import time
import weakref
from typing import Any, Literal

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bashrpc.protocol import mcp, messages, methods, terminals
from bashrpc.protocol.client import result_of
from bashrpc.protocol.envelope import ErrorObject, Request, RequestId, ServerMessage, encode
from bashrpc.protocol.errors import ErrorCode
from bashrpc.protocol.mcp import (
    BashToolArguments,
    CallToolResult,
    CancelRequestParams,
    EmptyResult,
    ToolsCallParams,
)
from bashrpc.protocol.methods import AbortBashParams, BashParams, BashResult, SessionListResult
from tests.inprocess import InProcessServer
from tests.rpc import ServerProcess, error_of, wait_until

# Examples per property; the figures in docs/development.md count them. A property with a
# thousand examples takes seconds, so those are `slow`: every full run has them.
EXAMPLES = {
    "random bytes": 1000,
    "random JSON": 1000,
    "random params": 1000,
    "random methods": 500,
    "mixed batches": 500,
    "ids of every type": 500,
}


def prop(name: str) -> settings:
    """One server serves all of a property's examples: that it stays up is the point."""
    return settings(
        max_examples=EXAMPLES[name],
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        derandomize=True,
        database=None,
    )


# Methods answered inline (so their replies precede the sentinel's) and safe to
# call with anything: nothing here runs a command or stops the server.
SAFE_METHODS = [
    "session/list",
    "abort_bash",
    "artifact/read",
    "ping",
    "tools/list",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "pty/screen",
    "pty/input",
    "initialize",
    "notifications/cancelled",
    "$/cancel_request",
    "terminal/output",
    "terminal/list",
    "terminal/close_stdin",
]
UNSAFE_METHODS = {"exit", "shutdown", "bash", "tools/call", "session/close", "session/open"}
# Every name the protocol declares: any other is -32601, whatever its params.
DECLARED_METHODS = {
    *methods.METHODS,
    *methods.NOTIFICATIONS_FROM_CLIENT,
    *mcp.METHODS,
    *mcp.NOTIFICATIONS_FROM_CLIENT,
    *terminals.METHODS,
    *terminals.NOTIFICATIONS_FROM_CLIENT,
}
REPLY_BOUND_SECONDS = 10.0
# What `ping` answers, as the server writes it.
EMPTY_RESULT = msgspec.Raw(b"{}")

_sentinels = itertools.count()
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


def usable_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


class Reply(msgspec.Struct, forbid_unknown_fields=True):
    """A valid JSON-RPC reply, member by member: an id that is usable or null, and
    a result or an error object (a null error is none). Decoding is the check."""

    jsonrpc: Literal["2.0"]
    id: RequestId | None
    # Empty when absent; a null result is Raw(b"null").
    result: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    error: ErrorObject | msgspec.UnsetType = msgspec.UNSET


_decode_message = msgspec.json.Decoder(ServerMessage).decode
_decode_reply = msgspec.json.Decoder(Reply).decode
_decode_members = msgspec.json.Decoder(list[msgspec.Raw]).decode
# Per server, how many of its lines an exchange has checked.
_checked: weakref.WeakKeyDictionary[InProcessServer, int] = weakref.WeakKeyDictionary()


def valid_reply(raw: bytes) -> Reply:
    try:
        reply = _decode_reply(raw)
    except msgspec.ValidationError as exc:
        raise AssertionError(f"not a valid reply ({exc}): {raw!r}") from None
    assert bool(reply.result) != (reply.error is not msgspec.UNSET), raw
    return reply


def replies_in(line: bytes, sentinel: str) -> list[Reply]:
    """The replies one line from the server carries, each checked; a notification
    and the sentinel's reply carry none."""
    if line.lstrip().startswith(b"["):
        members = _decode_members(line)
        assert members, line
        return [valid_reply(bytes(member)) for member in members]
    message = _decode_message(line)
    if message.method is not None or message.id == sentinel:
        return []
    return [valid_reply(line)]


def error_code(reply: Reply) -> int | None:
    return None if isinstance(reply.error, msgspec.UnsetType) else reply.error.code


def exchange(server: InProcessServer, lines: list[bytes], expected_ids: list[Any]) -> list[Reply]:
    """Send lines then a sentinel; once every expected id is answered, return the
    replies (but the sentinel's) that the server wrote since the last exchange.

    Each line is checked as the server wrote it (a batch's reply is one array);
    a reply that comes later is checked in the next exchange."""
    sentinel = f"sentinel-{next(_sentinels)}"
    first = _checked.get(server, 0)
    payload = b"".join(line + b"\n" for line in lines)
    payload += encode(Request(id=sentinel, method="ping"))
    server.send_raw(payload)
    server.response(sentinel, timeout=REPLY_BOUND_SECONDS)

    def replies_since() -> list[Reply]:
        return [reply for line in server.raw_lines[first:] for reply in replies_in(line, sentinel)]

    def answered(replies: list[Reply], ident: Any) -> int:
        return sum(reply.id == ident and type(reply.id) is type(ident) for reply in replies)

    def all_answered() -> bool:
        replies = replies_since()
        return all(answered(replies, i) for i in expected_ids)

    # Batches are answered from their own task, possibly after the sentinel.
    wait_until(all_answered, timeout=REPLY_BOUND_SECONDS)
    end = len(server.raw_lines)
    replies = [
        reply for line in server.raw_lines[first:end] for reply in replies_in(line, sentinel)
    ]
    _checked[server] = end
    for ident in expected_ids:
        assert answered(replies, ident) == 1, (ident, replies)
    assert server.garbage == []
    return replies


@pytest.mark.slow
@prop("random bytes")
@given(st.lists(st.binary(max_size=200), min_size=1, max_size=5))
def test_random_bytes(server: InProcessServer, chunks: list[bytes]) -> None:
    # Newlines inside the bytes make more lines; any may be JSON by chance.
    exchange(server, [c.replace(b"\n", b" ") for c in chunks], [])


@pytest.mark.slow
@prop("random JSON")
@given(json_values)
def test_random_json(server: InProcessServer, value: Any) -> None:
    expected = []
    if isinstance(value, dict):
        value = {k: v for k, v in value.items() if k != "method" or v not in UNSAFE_METHODS}
        if usable_id(value.get("id")) and not (
            "method" in value and value.get("jsonrpc") == "2.0" and "id" not in value
        ):
            value["id"] = f"random-{next(_sentinels)}"
            expected.append(value["id"])
    exchange(server, [json.dumps(value).encode()], expected)


@pytest.mark.slow
@prop("random params")
@given(st.sampled_from(SAFE_METHODS), json_values)
def test_valid_envelopes_with_random_params(
    server: InProcessServer, method: str, params: Any
) -> None:
    ident = f"params-{next(_sentinels)}"
    request = {"jsonrpc": "2.0", "id": ident, "method": method, "params": params}
    [reply] = exchange(server, [json.dumps(request).encode()], [ident])
    code = error_code(reply)
    if not isinstance(params, (dict, list)):
        assert code == ErrorCode.INVALID_REQUEST
    elif code is not None:
        assert code in {int(c) for c in ErrorCode}
        assert code != ErrorCode.INTERNAL_ERROR, reply


@prop("random methods")
@given(st.text(max_size=40).filter(lambda m: m not in UNSAFE_METHODS))
def test_random_method_names(server: InProcessServer, method: str) -> None:
    ident = f"method-{next(_sentinels)}"
    request = {"jsonrpc": "2.0", "id": ident, "method": method}
    [reply] = exchange(server, [json.dumps(request).encode()], [ident])
    if method not in DECLARED_METHODS:
        assert error_code(reply) == ErrorCode.METHOD_NOT_FOUND


@pytest.mark.slow
@prop("mixed batches")
@given(
    st.lists(
        st.one_of(
            st.builds(
                lambda m: {"jsonrpc": "2.0", "method": m, "id": None},
                st.sampled_from(SAFE_METHODS),
            ),
            st.builds(lambda m: {"jsonrpc": "2.0", "method": m}, st.sampled_from(SAFE_METHODS)),
            json_values,
        ),
        min_size=1,
        max_size=8,
    )
)
def test_batches_of_mixed_members(server: InProcessServer, members: list[Any]) -> None:
    expected = []
    for member in members:
        if isinstance(member, dict):
            # Any JSON may stand where a method's name goes (a list is no key).
            if isinstance(name := member.get("method"), str) and name in UNSAFE_METHODS:
                member["method"] = "ping"
            if "id" in member or "method" not in member:
                member["id"] = f"batch-{next(_sentinels)}"
                expected.append(member["id"])
    exchange(server, [json.dumps(members).encode()], expected)


@pytest.mark.slow
@prop("ids of every type")
@given(json_values)
def test_ids_of_every_json_type(server: InProcessServer, ident: Any) -> None:
    request = {"jsonrpc": "2.0", "id": ident, "method": "ping"}
    expected = [ident] if usable_id(ident) else []
    replies = exchange(server, [json.dumps(request).encode()], expected)
    assert len(replies) == 1
    if usable_id(ident):
        assert replies[0] == Reply(jsonrpc="2.0", id=ident, result=EMPTY_RESULT)
    elif ident is None:
        assert replies[0] == Reply(jsonrpc="2.0", id=None, result=EMPTY_RESULT)
    else:
        assert replies[0].id is None
        assert error_code(replies[0]) == ErrorCode.INVALID_REQUEST


# -- hand-written cases --------------------------------------------------------


def test_a_100_mib_line(server: InProcessServer) -> None:
    line = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"' + b"y" * (100 << 20) + b'"}}'
    server.send_raw(line + b"\n")
    reply = server.next_message()
    assert reply.error == ErrorObject(
        code=ErrorCode.INVALID_REQUEST, message=messages.MESSAGE_TOO_LARGE
    )
    assert server.result("ping") == EmptyResult()


def test_last_line_without_newline_at_eof(server: InProcessServer) -> None:
    server.send_raw(b'{"jsonrpc":"2.0","id":"last","method":"session/list"}')
    assert server.close() == 0
    # Decoding is the check: the reply is a session list.
    result_of(server.response("last", timeout=1), SessionListResult)


def test_invalid_utf8_and_nul_bytes(server: InProcessServer) -> None:
    server.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"p\xffing"}\n')
    assert error_of(server.next_message()).code == ErrorCode.PARSE_ERROR
    server.send_raw(b'{"jsonrpc":"2.0",\x00"id":2,"method":"ping"}\n')
    assert error_of(server.next_message()).code == ErrorCode.PARSE_ERROR
    error = server.error("bash", BashParams(command="echo \u0000"))
    assert error.code == ErrorCode.INVALID_PARAMS
    assert server.result("ping") == EmptyResult()


def test_deeply_nested_json(server: InProcessServer) -> None:
    depth = 100_000
    server.send_raw(b"[" * depth + b"]" * depth + b"\n")
    assert error_of(server.next_message()).code == ErrorCode.INVALID_REQUEST
    nested = b'{"jsonrpc":"2.0","id":7,"method":"ping","params":' + b"[" * depth + b"]" * depth
    server.send_raw(nested + b"}\n")
    assert server.next_message().error is not None
    assert server.result("ping") == EmptyResult()


def test_duplicate_in_flight_ids(server: InProcessServer) -> None:
    for session in ("a", "b"):
        server.request(
            "bash", BashParams(command=f"sleep 0.3; echo {session}", session_id=session), id=5
        )
    outputs = sorted(server.bash_result(5).output for _ in range(2))
    assert outputs == ["a\n", "b\n"]


# The head start the aborts give each wave adapts to the machine: a command takes
# about a millisecond when idle, far longer under load.
FIRST_HEAD_START_SECONDS = 0.01
MAX_HEAD_START_SECONDS = 5.0
RACE_ROUNDS, RACE_WAVE = 1000, 50  # waves stay well under the in-flight limit
# Beyond the 1000 rounds, waves go on (adapting) until both outcomes were seen.
MAX_EXTRA_WAVES = 20


def _race_wave(server: ServerProcess, idents: list[str], head_start: float) -> dict[str, int]:
    """Queue `idents` on one shell, abort them all after `head_start`; count the outcomes."""
    arguments = msgspec.Raw(msgspec.json.encode(BashToolArguments(command="echo x")))
    for i, ident in enumerate(idents):
        if i % 2:
            server.request("bash", BashParams(command="echo x"), id=ident)
        else:
            server.request(
                "tools/call", ToolsCallParams(name="bash", arguments=arguments), id=ident
            )
    time.sleep(head_start)
    for i, ident in enumerate(idents):
        if i % 2:
            server.request("abort_bash", AbortBashParams(request_id=ident))
        else:
            # The LSP cancel, which is answered (MCP's own gets no response).
            server.notify("$/cancelRequest", CancelRequestParams(id=ident))
    outcomes = {"completed": 0, "cancelled": 0}
    for i, ident in enumerate(idents):
        reply = server.response(ident, timeout=60)
        if reply.error is not None:
            assert reply.error.code == ErrorCode.REQUEST_CANCELLED
            outcomes["cancelled"] += 1
            continue
        if i % 2:
            result = result_of(reply, BashResult)
            if result.cancelled:
                outcomes["cancelled"] += 1
                continue
            text = result.output
        else:
            text = result_of(reply, CallToolResult).text
        # A command run after an aborted one is on a new shell, and says so.
        assert text in ("x\n", f"{messages.SHELL_RESTARTED}\nx\n"), text
        outcomes["completed"] += 1
    return outcomes


@pytest.mark.slow
def test_aborts_and_cancels_racing_completion(process: ServerProcess) -> None:
    """Each wave queues its commands on one shell and aborts them all after a head
    start: by then some have completed, one is running and the rest wait, so the
    aborts race every stage. The head start adapts (doubled after a wave where
    none completed, halved after one where none was cancelled), so both outcomes
    occur however loaded the machine is. What holds under any schedule: every
    request is answered exactly once, and no command outlives its race. (A process,
    not in-process: each abort of a running command restarts the shell, and a fork
    of the test process costs far more than one of the server.)"""
    server = process
    outcomes = {"completed": 0, "cancelled": 0}
    head_start, sent = FIRST_HEAD_START_SECONDS, 0
    while sent < RACE_ROUNDS or (
        not all(outcomes.values()) and sent < RACE_ROUNDS + MAX_EXTRA_WAVES * RACE_WAVE
    ):
        idents = [f"race-{i}" for i in range(sent, sent + RACE_WAVE)]
        wave = _race_wave(server, idents, head_start)
        sent += RACE_WAVE
        for outcome, count in wave.items():
            outcomes[outcome] += count
        if not wave["completed"]:
            head_start = min(max(head_start * 2, FIRST_HEAD_START_SECONDS), MAX_HEAD_START_SECONDS)
        elif not wave["cancelled"]:
            head_start /= 2
    assert sum(outcomes.values()) == sent
    assert outcomes["completed"] and outcomes["cancelled"], (outcomes, head_start)
    assert server.bash("echo healthy").output == "healthy\n"
    # Every request was answered once: the races, and each abort_bash.
    replies = collections.Counter(
        json.dumps(m.id) for m in server.messages if m.method is None and m.id is not msgspec.UNSET
    )
    assert [ident for ident, count in replies.items() if count != 1] == []
    assert sum(1 for ident in replies if ident.startswith('"race-')) == sent
    assert len(replies) == sent + sent // 2 + 1  # the races, the abort_bash, echo healthy
    # Only the sessions' idle shells are left: no command outlived its race.
    assert all("--noprofile --norc" in c for c in server.owned_commands())
    assert server.garbage == []
