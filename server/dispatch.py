"""Method dispatch: jsonrpcserver's method table behind msgspec-typed handlers.

jsonrpcserver 5 does the method lookup, method-not-found and the result/error
envelopes. It is wrapped rather than used whole because it validates with
jsonschema (slow), cannot split batches per member, and binds params by
Python signature without checking types. So the envelope is parsed and
batches are split in `protocol.envelope`; each call reaches jsonrpcserver with
its raw params in the context, and the adapter decodes them with msgspec into
the method's own Struct. Handlers never see a dict.
"""

from __future__ import annotations

import traceback
from collections.abc import Awaitable, Callable
from typing import Any, cast

import msgspec
from jsonrpcserver import Error, InvalidParams, Success
from jsonrpcserver.async_dispatcher import call as call_method
from jsonrpcserver.codes import ERROR_METHOD_NOT_FOUND
from jsonrpcserver.dispatcher import to_response
from jsonrpcserver.methods import Methods
from jsonrpcserver.request import Request
from jsonrpcserver.response import to_serializable_one
from jsonrpcserver.sentinels import NOID

from protocol import messages
from protocol.envelope import Call, ErrorObject, ErrorResponse, SuccessResponse
from protocol.errors import ErrorCode
from server import log

Handler = Callable[[Call, Any], Awaitable[Any]]

_log = log.get("dispatch")
_EMPTY_PARAMS = b"{}"


class RpcError(Exception):
    """Raised by a handler to answer with a specific JSON-RPC error."""

    def __init__(self, code: ErrorCode, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


def _sole(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _adapt(name: str, handler: Handler, params_type: type[msgspec.Struct]) -> Callable[..., Any]:
    decode = msgspec.json.Decoder(params_type).decode

    async def method(call: Call) -> Any:
        try:
            params = decode(call.params or _EMPTY_PARAMS)
        except msgspec.DecodeError as invalid:
            # A type mismatch, or bytes that are not JSON (invalid UTF-8 in a string).
            return InvalidParams(str(invalid))
        try:
            result = await handler(call, params)
        except Exception as raised:
            # A handler's task group wraps what its body raised; look inside.
            cause = _sole(raised)
            if isinstance(cause, RpcError):
                return Error(int(cause.code), cause.message, cause.data)
            _log.error("method %s failed:\n%s", name, traceback.format_exc())
            summary = f"{type(cause).__name__}: {cause}".splitlines()[0]
            return Error(int(ErrorCode.INTERNAL_ERROR), messages.INTERNAL_ERROR, summary)
        return Success(result)

    method.__name__ = name
    return method


class Dispatcher:
    def __init__(self) -> None:
        self._methods: Methods = {}

    def register(self, name: str, params_type: type[msgspec.Struct], handler: Handler) -> None:
        self._methods[name] = _adapt(name, handler, params_type)

    def __contains__(self, name: str) -> bool:
        return name in self._methods

    async def dispatch(self, call: Call) -> ErrorResponse | SuccessResponse | None:
        """Run one call; None for notifications, which are never answered."""
        ident = NOID if call.is_notification else call.reply_id
        request = Request(call.method, [], ident)
        method = self._methods.get(call.method)
        if method is None:
            result = Error(ERROR_METHOD_NOT_FOUND, messages.METHOD_NOT_FOUND, call.method)
        else:
            # jsonrpcserver's own dispatch_request would first bind the params to
            # the method's signature with inspect, which costs ~50 us a call and
            # proves nothing here: every adapter takes exactly the context.
            result = await call_method(request, call, method)
        if call.is_notification:
            return None
        reply = cast(dict[str, Any], to_serializable_one(to_response(request, result)))
        if "error" in reply:
            err = reply["error"]
            return ErrorResponse(
                id=reply["id"], error=ErrorObject(err["code"], err["message"], err.get("data"))
            )
        return SuccessResponse(id=reply["id"], result=reply["result"])
