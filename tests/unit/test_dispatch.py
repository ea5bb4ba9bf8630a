"""Typed registration, dispatch and the error map, driven in-process with no I/O."""

from __future__ import annotations

import logging
import subprocess
import sys

import anyio
import msgspec
import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.envelope import Call, ErrorResponse, SuccessResponse
from bashrpc.protocol.errors import ErrorCode, TooManyShellsData
from bashrpc.protocol.mcp import EmptyParams, EmptyResult
from bashrpc.protocol.methods import (
    AbortBashParams,
    AbortBashResult,
    BashChunk,
    PtyOutput,
    SessionListParams,
    SessionListResult,
)
from bashrpc.server import errors
from bashrpc.server.serve import dispatcher
from bashrpc.server.wire.dispatch import Dispatcher
from bashrpc.server.wire.registry import RegistrationError, Registry
from bashrpc.server.wire.replies import encode_notification


def call(method: str, params: bytes = b"", ident: object = 1) -> Call:
    return Call(method, msgspec.Raw(params), ident)  # type: ignore[arg-type]


def make() -> tuple[Dispatcher, Registry]:
    registry = Registry()

    @registry.method("abort_bash")
    def abort(ctx: object, params: AbortBashParams) -> AbortBashResult:
        return AbortBashResult(aborted=params.request_id == "x")

    @registry.method("ping")
    def boom(ctx: object, params: EmptyParams) -> EmptyResult:
        raise ValueError("secret internals\nline two")

    @registry.method("session/list")
    async def nested(ctx: object, params: SessionListParams) -> SessionListResult:
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.sleep, 0)
            raise errors.TooManyShells(7)
        raise AssertionError("the task group re-raises its error")

    return Dispatcher(registry), registry


def answer(dispatcher: Dispatcher, c: Call) -> ErrorResponse | SuccessResponse | None:
    method = dispatcher.lookup(c.method)
    assert method is not None and not method.is_async
    return dispatcher.answer(method, c, None)


def test_typed_params_and_result() -> None:
    reply = answer(make()[0], call("abort_bash", b'{"requestId":"x"}'))
    assert isinstance(reply, SuccessResponse)
    assert reply.result == AbortBashResult(aborted=True) and reply.id == 1


def test_missing_params_decode_as_empty_object() -> None:
    assert isinstance(answer(make()[0], call("abort_bash")), SuccessResponse)


@pytest.mark.parametrize(
    ("params", "data"),
    [
        (b'{"sessionId": 3}', "$.sessionId"),
        (b"[1, 2]", "Expected `object`, got `array`"),
        (b'{"sessionId": "\xff"}', "UTF-8"),
    ],
)
def test_params_that_do_not_decode_are_invalid_params(params: bytes, data: str) -> None:
    reply = answer(make()[0], call("abort_bash", params))
    assert isinstance(reply, ErrorResponse)
    assert reply.error.code == ErrorCode.INVALID_PARAMS and data in reply.error.data


def test_unknown_method() -> None:
    dispatcher = make()[0]
    assert dispatcher.lookup("nope") is None
    reply = dispatcher.not_found(call("nope"))
    assert reply.error.code == ErrorCode.METHOD_NOT_FOUND and reply.error.data == "nope"


def test_a_domain_error_gets_its_code_even_from_inside_a_task_group() -> None:
    dispatcher = make()[0]
    method = dispatcher.lookup("session/list")
    assert method is not None and method.is_async

    async def run() -> ErrorResponse:
        try:
            await method.handler(None, SessionListParams())
        except Exception as exc:
            return dispatcher.failure(call("session/list"), exc)
        raise AssertionError("no error")

    reply = anyio.run(run)
    assert reply.error.code == ErrorCode.TOO_MANY_SHELLS
    assert reply.error.message == messages.TOO_MANY_SHELLS
    assert reply.error.data == TooManyShellsData(live_shells=7)


def test_a_bug_is_one_line_and_its_traceback_goes_to_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.ERROR):
        reply = answer(make()[0], call("ping"))
    assert isinstance(reply, ErrorResponse)
    assert reply.error.code == ErrorCode.INTERNAL_ERROR
    assert reply.error.message == messages.INTERNAL_ERROR
    assert "\n" not in reply.error.data
    assert "Traceback" in caplog.text and "line two" in caplog.text


def test_notifications_get_no_reply() -> None:
    assert answer(make()[0], Call("ping", msgspec.Raw(b""), msgspec.UNSET)) is None


def test_a_method_is_registered_once() -> None:
    registry = make()[1]
    with pytest.raises(RegistrationError, match="twice"):

        @registry.method("ping")
        def again(ctx: object, params: EmptyParams) -> EmptyResult:
            return EmptyResult()

    other = Registry()

    @other.method("ping")
    def elsewhere(ctx: object, params: EmptyParams) -> EmptyResult:
        return EmptyResult()

    with pytest.raises(RegistrationError, match="two surfaces"):
        Dispatcher(registry, other)


def test_a_handler_must_take_the_protocols_params_type() -> None:
    registry = Registry()
    with pytest.raises(RegistrationError, match="AbortBashParams"):

        @registry.method("abort_bash")
        def wrong(ctx: object, params: EmptyParams) -> None: ...

    with pytest.raises(RegistrationError, match="not in the protocol"):

        @registry.method("made/up")
        def unknown(ctx: object, params: EmptyParams) -> None: ...


def test_a_handler_must_return_the_protocols_result_type() -> None:
    registry = Registry()
    with pytest.raises(RegistrationError, match="AbortBashResult"):

        @registry.method("abort_bash")
        def wrong(ctx: object, params: AbortBashParams) -> EmptyResult:
            return EmptyResult()

    with pytest.raises(RegistrationError, match="answers None"):

        @registry.method("notifications/initialized")
        def replies(ctx: object, params: EmptyParams) -> EmptyResult:
            return EmptyResult()


def test_every_method_of_the_protocol_has_a_handler() -> None:
    dispatcher().check_complete()
    with pytest.raises(RegistrationError, match=r"no handler for .*tools/call"):
        make()[0].check_complete()


def test_only_notifications_the_protocol_declares_are_sent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    chunk = BashChunk(request_id=1, session_id="s", seq=0, text="hi", skipped=0)
    assert encode_notification("bash/chunk", chunk) is not None
    with caplog.at_level(logging.ERROR, logger="bashrpc"):
        assert encode_notification("bash/chunks", chunk) is None
        assert encode_notification("pty/output", chunk) is None
    assert encode_notification("pty/output", PtyOutput(request_id=1, seq=0, data="x")) is not None
    assert sum("not in the protocol" in r.getMessage() for r in caplog.records) == 2


def test_the_server_never_imports_jsonschema() -> None:
    """jsonrpcserver's package __init__ compiles a jsonschema validator (~110 ms of
    startup) the server never uses; `rpclib` imports the parts it does use without it."""
    code = "import sys, server.serve; print('jsonschema' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == "False\n"
