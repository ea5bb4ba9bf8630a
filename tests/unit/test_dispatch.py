"""The dispatcher wrapped around jsonrpcserver, driven in-process."""

from __future__ import annotations

import logging

import anyio
import msgspec
import pytest

from protocol import messages
from protocol.envelope import Call, ErrorResponse, SuccessResponse
from protocol.errors import ErrorCode
from protocol.methods import AbortBashParams, AbortBashResult, Params
from server.dispatch import Dispatcher, RpcError


class Empty(Params):
    pass


def call(method: str, params: bytes = b"", ident: object = 1) -> Call:
    return Call(method, msgspec.Raw(params), ident)  # type: ignore[arg-type]


def run(dispatcher: Dispatcher, c: Call) -> ErrorResponse | SuccessResponse | None:
    return anyio.run(dispatcher.dispatch, c)


def make() -> Dispatcher:
    d = Dispatcher()

    async def abort(c: Call, p: AbortBashParams) -> AbortBashResult:
        return AbortBashResult(aborted=p.request_id == "x")

    async def boom(c: Call, p: Empty) -> None:
        raise ValueError("secret internals\nline two")

    async def refuse(c: Call, p: Empty) -> None:
        raise RpcError(ErrorCode.ARTIFACT_NOT_FOUND, "nope", {"available": []})

    async def nested(c: Call, p: Empty) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.sleep, 0)
            raise RpcError(ErrorCode.TOO_MANY_SHELLS, "too many")

    d.register("nested", Empty, nested)
    d.register("abort_bash", AbortBashParams, abort)
    d.register("boom", Empty, boom)
    d.register("refuse", Empty, refuse)
    return d


def test_typed_params_and_result() -> None:
    reply = run(make(), call("abort_bash", b'{"requestId":"x"}'))
    assert isinstance(reply, SuccessResponse)
    assert reply.result == AbortBashResult(aborted=True) and reply.id == 1


def test_missing_params_decode_as_empty_object() -> None:
    reply = run(make(), call("abort_bash"))
    assert isinstance(reply, SuccessResponse)


def test_wrong_param_type_is_invalid_params_with_path() -> None:
    reply = run(make(), call("abort_bash", b'{"sessionId": 3}'))
    assert isinstance(reply, ErrorResponse)
    assert reply.error.code == ErrorCode.INVALID_PARAMS
    assert "$.sessionId" in reply.error.data


def test_positional_params_are_invalid_params() -> None:
    reply = run(make(), call("abort_bash", b"[1, 2]"))
    assert isinstance(reply, ErrorResponse) and reply.error.code == ErrorCode.INVALID_PARAMS


def test_unknown_method() -> None:
    reply = run(make(), call("nope"))
    assert isinstance(reply, ErrorResponse) and reply.error.code == ErrorCode.METHOD_NOT_FOUND


def test_handler_error_code_passes_through() -> None:
    reply = run(make(), call("refuse"))
    assert isinstance(reply, ErrorResponse)
    assert (reply.error.code, reply.error.message, reply.error.data) == (
        ErrorCode.ARTIFACT_NOT_FOUND,
        "nope",
        {"available": []},
    )


def test_crash_is_one_line_internal_error_and_traceback_goes_to_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.ERROR):
        reply = run(make(), call("boom"))
    assert isinstance(reply, ErrorResponse)
    assert reply.error.code == ErrorCode.INTERNAL_ERROR
    assert reply.error.message == messages.INTERNAL_ERROR
    assert "\n" not in reply.error.data
    assert "Traceback" in caplog.text and "line two" in caplog.text


def test_notifications_get_no_reply() -> None:
    import msgspec as m

    assert run(make(), Call("boom", m.Raw(b""), m.UNSET)) is None


def test_error_raised_inside_a_task_group_keeps_its_code() -> None:
    reply = run(make(), call("nested"))
    assert isinstance(reply, ErrorResponse)
    assert (reply.error.code, reply.error.message) == (ErrorCode.TOO_MANY_SHELLS, "too many")
