"""Typed method registration: a decorator that rejects duplicate names.

A handler is a module-level function `(ctx, params) -> result`. It is either
a plain `def`, which runs on the reader and cannot await, or an `async def`,
which always runs as a task of its own; nothing else decides where a method
runs. An `async def` may also name an `admit` step, a plain function
`(ctx, params) -> None` run on the reader the moment the request is accepted,
before any later request is read: what must take effect in the order
requests arrive (a PTY that input may already be sent to, a write's place in
line) happens there. It may raise, and the request is then answered at once.
The params and result types come from the protocol's tables, and the
handler's annotations must name those same types, so a handler cannot drift
from the published schema; `check_complete` holds the whole table to the
protocol's list of methods, and `NOTIFICATION_TYPES` is what the server may
send.

A surface also says whether its requests are still answered once the input
has ended (see `Registry`).
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

from bashrpc.protocol import mcp, methods, terminals

F = TypeVar("F", bound=Callable[..., Any])

# Every method and client notification the protocol defines, with its params type.
PARAMS_TYPES: dict[str, type[msgspec.Struct]] = {
    **{name: params for name, (params, _result) in methods.METHODS.items()},
    **{name: params for name, (params, _result) in mcp.METHODS.items()},
    **{name: params for name, (params, _result) in terminals.METHODS.items()},
    **methods.NOTIFICATIONS_FROM_CLIENT,
    **mcp.NOTIFICATIONS_FROM_CLIENT,
    **terminals.NOTIFICATIONS_FROM_CLIENT,
}

# What a handler returns: a method's result type; None for a notification, or a
# method whose reply carries no result.
RESULT_TYPES: dict[str, type | None] = {
    **{name: result for name, (_params, result) in methods.METHODS.items()},
    **{name: result for name, (_params, result) in mcp.METHODS.items()},
    **{name: result for name, (_params, result) in terminals.METHODS.items()},
    **dict.fromkeys(methods.NOTIFICATIONS_FROM_CLIENT),
    **dict.fromkeys(mcp.NOTIFICATIONS_FROM_CLIENT),
    **dict.fromkeys(terminals.NOTIFICATIONS_FROM_CLIENT),
}
# Every notification the server may send, with its params type.
NOTIFICATION_TYPES: dict[str, type[msgspec.Struct]] = {
    **methods.NOTIFICATIONS_FROM_SERVER,
    **mcp.NOTIFICATIONS_FROM_SERVER,
    **terminals.NOTIFICATIONS_FROM_SERVER,
}


class RegistrationError(Exception):
    pass


class Method(msgspec.Struct, frozen=True):
    name: str
    params: type[msgspec.Struct]
    handler: Callable[..., Any]
    is_async: bool
    decode: Callable[[bytes], Any]
    answers_after_eof: bool
    admit: Callable[[Any, Any], None] | None = None


class Registry:
    """The methods of one surface.

    `answers_after_eof`: whether a request this surface runs still gets its
    reply and notifications after the client has closed the server's input.
    MCP's stdio shutdown is the client closing its side and waiting for the
    exit; it reads nothing more (the 1.x SDK client fails on any message
    then), so the MCP surfaces say False. A host of the native methods may
    close stdin and read on, so those say True."""

    def __init__(self, *, answers_after_eof: bool = True) -> None:
        self.methods: dict[str, Method] = {}
        self.answers_after_eof = answers_after_eof

    def method(
        self, name: str, admit: Callable[[Any, Any], None] | None = None
    ) -> Callable[[F], F]:
        def register(handler: F) -> F:
            if name in self.methods:
                raise RegistrationError(f"method {name!r} is registered twice")
            if name not in PARAMS_TYPES:
                raise RegistrationError(f"method {name!r} is not in the protocol's tables")
            params = PARAMS_TYPES[name]
            hints = typing.get_type_hints(handler)
            annotated = hints.get("params")
            if annotated is not params:
                raise RegistrationError(
                    f"{handler.__qualname__} takes {annotated!r}; {name!r} sends {params.__name__}"
                )
            result = RESULT_TYPES[name]
            returns = hints.get("return")
            if returns is not (type(None) if result is None else result):
                raise RegistrationError(
                    f"{handler.__qualname__} returns {returns!r}; {name!r} answers {result!r}"
                )
            is_async = inspect.iscoroutinefunction(handler)
            if admit is not None and not is_async:
                raise RegistrationError(f"method {name!r} answers on the reader: no admit step")
            self.methods[name] = Method(
                name=name,
                params=params,
                handler=handler,
                is_async=is_async,
                decode=msgspec.json.Decoder(params).decode,
                answers_after_eof=self.answers_after_eof,
                admit=admit,
            )
            return handler

        return register


def merge(*registries: Registry) -> dict[str, Method]:
    """One table from several surfaces; a name in two of them is an error."""
    table: dict[str, Method] = {}
    for registry in registries:
        for name, method in registry.methods.items():
            if name in table:
                raise RegistrationError(f"method {name!r} is registered by two surfaces")
            table[name] = method
    return table


def check_complete(table: dict[str, Method]) -> None:
    """Every method and client notification of the protocol has its handler."""
    missing = sorted(set(PARAMS_TYPES) - set(table))
    if missing:
        raise RegistrationError(f"no handler for {', '.join(missing)}")
