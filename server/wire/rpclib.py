"""jsonrpcserver, the reply builder: its public functions, its package imported bare.

`import jsonrpcserver` runs its `__init__`, which imports `main` and so
compiles a jsonschema validator the server never uses (msgspec validates the
envelope, see `dispatch`): about 52 ms of CPU. Measured here, spawn to the
first `bash true` result (empty HOME, 15 runs alternating, min / median):
168 / 185 ms with the bare package; 205 / 221 ms importing it whole on a
thread started as the process starts serving; 216 / 244 ms with that thread
started before the server's own imports. The startup's few waits (the first
shell, the rc snapshot) cannot hide it, and the target is 250 ms. So the
package is registered from its spec without running its `__init__`, and the
modules used here (`dispatcher`, `request`, `response`, `result`) import
none of that. In this process, `import jsonrpcserver` then gives that bare
package: import its submodules, as here, never its top level.

A reply is built with `to_response` and `to_serializable_one`, the steps
`dispatch_to_serializable` ends with, so no private field of its oslash
results is read. Dispatching through `dispatch_to_serializable` itself (its
validator and deserializer off) measured about 80 µs a reply against 10,
for an `inspect.signature` binding of a handler that has already run; the
`bash true` round trip's target is 300 µs in all.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any, cast

_PACKAGE = "jsonrpcserver"


def _register_bare_package() -> None:
    if _PACKAGE in sys.modules:
        return
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or spec.submodule_search_locations is None:
        raise ImportError(f"{_PACKAGE} is not installed as a package")
    sys.modules[_PACKAGE] = importlib.util.module_from_spec(spec)


_register_bare_package()

from jsonrpcserver.dispatcher import to_response  # noqa: E402
from jsonrpcserver.request import Request  # noqa: E402
from jsonrpcserver.response import to_serializable_one  # noqa: E402
from jsonrpcserver.result import Error, Success  # noqa: E402


def reply(method: str, request_id: Any, result: Any) -> dict[str, Any]:
    """The JSON-RPC response, as jsonrpcserver serializes it, for a call to
    `method` with `request_id` whose handler gave `result`."""
    return _respond(method, request_id, Success(result))


def error(method: str, request_id: Any, code: int, message: str, data: Any) -> dict[str, Any]:
    """The JSON-RPC error response, as jsonrpcserver serializes it."""
    return _respond(method, request_id, Error(code, message, data))


def _respond(method: str, request_id: Any, result: Any) -> dict[str, Any]:
    response = to_response(Request(method, [], request_id), result)
    # A response to a request (never a notification) is one object.
    return cast(dict[str, Any], to_serializable_one(response))
