"""jsonrpcserver's dispatching parts, imported without its package `__init__`.

`import jsonrpcserver` runs `jsonrpcserver/__init__.py`, which imports its
`main` and so compiles a jsonschema validator: about 110 ms, nearly half of
this server's startup, for a validator it never uses (msgspec validates the
envelope, see `dispatch`). The modules used here (`codes`, `dispatcher`,
`methods`, `request`, `result`) import none of that. So the package is
registered from its spec without running its `__init__`, and they are
imported from it as usual. In this process, `import jsonrpcserver` then gives
that bare package: import its submodules, as here, never its top level.
"""

from __future__ import annotations

import importlib.util
import sys

_PACKAGE = "jsonrpcserver"


def _register_bare_package() -> None:
    if _PACKAGE in sys.modules:
        return
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or spec.submodule_search_locations is None:
        raise ImportError(f"{_PACKAGE} is not installed as a package")
    sys.modules[_PACKAGE] = importlib.util.module_from_spec(spec)


_register_bare_package()

from jsonrpcserver.codes import ERROR_METHOD_NOT_FOUND  # noqa: E402
from jsonrpcserver.dispatcher import to_response  # noqa: E402
from jsonrpcserver.methods import Methods  # noqa: E402
from jsonrpcserver.request import Request  # noqa: E402
from jsonrpcserver.result import Error, Success  # noqa: E402

__all__ = ["ERROR_METHOD_NOT_FOUND", "Error", "Methods", "Request", "Success", "to_response"]
