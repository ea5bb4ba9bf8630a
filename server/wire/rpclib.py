"""jsonrpcserver, the reply builder, through its public API and loaded off the
startup's critical path.

Its package `__init__` imports `main`, which compiles a jsonschema validator
the server never uses (msgspec validates the envelope, see `dispatch`): about
95 ms on an idle machine (0.29 s measured under load), a large part of the
250 ms startup target. So `preload` imports it on a thread as a serving
process starts, where it overlaps the process's own start and the first
shell's, which wait on processes; the first reply takes the module from
there (Python's import lock makes it wait for an import under way, never see
it half-done). Nothing imports it at module level.

A reply is built with `to_response` and `to_serializable_one`, the steps
`dispatch_to_serializable` itself ends with: dispatching through it, with
its validator and deserializer off, costs about 80 µs a reply here against
10, for an `inspect.signature` binding of a handler that already ran, and
the `bash true` round trip's target is 300 µs in all.
"""

from __future__ import annotations

import functools
import importlib
import threading
from typing import Any, cast

_PACKAGE = "jsonrpcserver"
_preload = threading.Thread(
    target=importlib.import_module, args=(_PACKAGE,), name=f"import {_PACKAGE}", daemon=True
)


def preload() -> None:
    """Start importing jsonrpcserver in the background (once; a no-op after)."""
    if _preload.ident is None:
        _preload.start()


def reply(method: str, request_id: Any, result: Any) -> dict[str, Any]:
    """The JSON-RPC response, as jsonrpcserver serializes it, for a call to
    `method` with `request_id` whose handler gave `result`."""
    library = _library()
    return library.respond(method, request_id, library.Success(result))


def error(method: str, request_id: Any, code: int, message: str, data: Any) -> dict[str, Any]:
    """The JSON-RPC error response, as jsonrpcserver serializes it."""
    library = _library()
    return library.respond(method, request_id, library.Error(code, message, data))


class _Library:
    """The parts used, imported once (after the preload, or by the first reply)."""

    def __init__(self) -> None:
        from jsonrpcserver import Error, Success
        from jsonrpcserver.dispatcher import to_response
        from jsonrpcserver.request import Request
        from jsonrpcserver.response import to_serializable_one

        self.Success = Success
        self.Error = Error
        self._to_response = to_response
        self._request = Request
        self._serialize = to_serializable_one

    def respond(self, method: str, request_id: Any, result: Any) -> dict[str, Any]:
        response = self._to_response(self._request(method, [], request_id), result)
        # A response to a request (never a notification) is one object.
        return cast(dict[str, Any], self._serialize(response))


@functools.cache
def _library() -> _Library:
    return _Library()
