"""From a call to its handler's params, and from its outcome to a reply.

jsonrpcserver builds the responses: a handler's outcome becomes its
`Success` or `Error`, serialized as it serializes them (see `rpclib`, which
imports its package without the jsonschema validator it never uses). It is used around
our own steps rather than whole: its jsonschema validation costs ~0.2 ms a
request and repeats msgspec's typed decoding, it answers a batch with one
bad member with a single error, and it binds params by Python signature
without checking types. So the envelope is parsed and batches are split in
`bashrpc.protocol.envelope`, params are decoded once by msgspec into the
method's Struct, and each method is looked up once per name in a plain dict.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from bashrpc.protocol import messages
from bashrpc.protocol.envelope import Call, ErrorObject, ErrorResponse, SuccessResponse
from bashrpc.protocol.errors import ErrorCode
from bashrpc.server.wire import rpclib
from bashrpc.server.wire.errormap import error_object, sole
from bashrpc.server.wire.registry import Method, Registry, check_complete, merge

Reply = ErrorResponse | SuccessResponse
_EMPTY_PARAMS = b"{}"


# What may wrap each handler (a span around it, say): (method name, handler) -> handler.
Wrap = Callable[[str, Callable[..., Any]], Callable[..., Any]]


class Dispatcher:
    def __init__(self, *registries: Registry, wrap: Wrap | None = None) -> None:
        self._typed: dict[str, Method] = merge(*registries)
        if wrap is not None:
            self._typed = {
                name: msgspec.structs.replace(m, handler=wrap(name, m.handler))
                for name, m in self._typed.items()
            }

    def check_complete(self) -> None:
        """Every method the protocol declares has a handler here (RegistrationError)."""
        check_complete(self._typed)

    def lookup(self, name: str) -> Method | None:
        return self._typed.get(name)

    def params(self, method: Method, call: Call) -> Any:
        """The call's params as the method's Struct; msgspec errors name the field."""
        return method.decode(call.params or _EMPTY_PARAMS)

    def success(self, call: Call, result: Any) -> SuccessResponse:
        response = rpclib.reply(call.method, call.reply_id, result)
        return SuccessResponse(id=response["id"], result=response["result"])

    def failure(self, call: Call, exc: BaseException) -> ErrorResponse:
        error = error_object(sole(exc), call.method, call.params)
        return _error(call, error.code, error.message, error.data)

    def not_found(self, call: Call) -> ErrorResponse:
        return _error(call, ErrorCode.METHOD_NOT_FOUND, messages.METHOD_NOT_FOUND, call.method)

    def answer(self, method: Method, call: Call, ctx: Any) -> Reply | None:
        """Run a plain handler now; None for notifications, which get no reply."""
        try:
            result = method.handler(ctx, self.params(method, call))
        except Exception as exc:
            reply: Reply = self.failure(call, exc)
        else:
            reply = self.success(call, result)
        return None if call.is_notification else reply


def _error(call: Call, code: int, message: str, data: Any) -> ErrorResponse:
    response = rpclib.error(call.method, call.reply_id, code, message, data)
    error = response["error"]
    return ErrorResponse(
        id=response["id"], error=ErrorObject(error["code"], error["message"], error.get("data"))
    )
