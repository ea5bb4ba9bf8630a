"""MCP's two eras on one connection, decided per request.

A request whose `_meta` names a revision without `initialize` (2026-07-28) is
of the modern era: its revision is checked (-32022 naming every revision
served when it is not one of them), the methods that revision removed answer
-32601, and its result says its kind (`resultType`), who answered (`_meta`'s
serverInfo) and, when a client may cache it, for how long. Any other request
is of the `initialize` era and is answered as before. `server/discover`,
which the modern era must have, is here too.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from bashrpc.protocol import __version__, messages
from bashrpc.protocol.icons import icons
from bashrpc.protocol.mcp import (
    ALL_PROTOCOL_VERSIONS,
    MODERN_PROTOCOL_VERSIONS,
    REMOVED_IN_MODERN,
    SERVER_NAME,
    SUPPORTED_PROTOCOL_VERSIONS,
    TASKS_EXTENSION,
    Cacheable,
    CallToolResult,
    DiscoverResult,
    EmptyParams,
    EmptyResult,
    Icon,
    Implementation,
    Result,
    ResultMeta,
    ServerCapabilities,
    Task,
    TaskMetadata,
    ToolsCallParams,
    task_v2,
)
from bashrpc.protocol.mcp import METHODS as MCP_METHODS
from bashrpc.server.connection import RequestContext
from bashrpc.server.errors import RemovedMethod, UnsupportedProtocolVersion
from bashrpc.server.services.api import Services
from bashrpc.server.services.tool import args
from bashrpc.server.wire.registry import Registry

DISCOVER = "server/discover"
# The methods whose requests may be of either era (initialize is of the old one).
_EITHER_ERA = frozenset(MCP_METHODS) - {"initialize"}

methods = Registry(answers_after_eof=False)
Ctx = RequestContext[Services]


@methods.method(DISCOVER)
def discover(ctx: Ctx, params: EmptyParams) -> DiscoverResult:
    """Every revision served; the capabilities a modern request gets (tasks as
    that era's extension)."""
    return DiscoverResult(
        supported_versions=list(ALL_PROTOCOL_VERSIONS),
        capabilities=ServerCapabilities(extensions={TASKS_EXTENSION: {}}),
        instructions=messages.SERVER_INSTRUCTIONS,
    )


def revision(method: str, params: object) -> str | None:
    """The modern revision a request names; None: a request of the `initialize` era."""
    meta = getattr(params, "meta", None)
    version = None if meta is None else meta.protocol_version
    if not isinstance(version, str) or version in SUPPORTED_PROTOCOL_VERSIONS:
        return MODERN_PROTOCOL_VERSIONS[0] if method == DISCOVER else None
    if version not in MODERN_PROTOCOL_VERSIONS:
        raise UnsupportedProtocolVersion(version)
    if method in REMOVED_IN_MODERN:
        raise RemovedMethod(method, version)
    if isinstance(params, ToolsCallParams):
        # Tasks are that era's extension, and the server chooses which calls
        # run as one: for a client that declares it, those the model asked to
        # run in the background (the same job, polled as a task).
        backgrounded = params.wants_tasks and args.asks_background(params)
        params.task = TaskMetadata() if backgrounded else None
    return version


def stamp(method: str, result: Any, modern: str | None) -> Any:
    """The result as the request's era has it."""
    if modern is None or not isinstance(result, Result):
        return result
    if method == "tasks/cancel":
        # The extension's cancel answers nothing but that it was done.
        result = EmptyResult()
    elif isinstance(result, Task):
        result = task_v2(result)
    elif isinstance(result, CallToolResult) and result.task is not None:
        created = task_v2(result.task)
        created.result_type = "task"
        return _with_server(created)
    elif isinstance(result, CallToolResult) and result.request_state is not None:
        result.result_type = "input_required"
        return _with_server(result)
    result.result_type = "complete"
    # The icons once, where a client learns who the server is (not on every result).
    return _with_server(result, icons(modern) if method == DISCOVER else None)


def _with_server(result: Result, shown: list[Icon] | None = None) -> Result:
    """Who answered (with `shown`, its icons), and for a listing, for how long a
    client may keep it."""
    meta = result.meta if isinstance(result.meta, ResultMeta) else ResultMeta()
    meta.server_info = Implementation(name=SERVER_NAME, version=__version__, icons=shown)
    result.meta = meta
    if isinstance(result, Cacheable):
        # Per client (its tenant's artifacts, its settings); refetched each time.
        result.cache_scope, result.ttl_ms = "private", 0
    return result


def wrap(name: str, handler: Callable[..., Any]) -> Callable[..., Any]:
    """`handler` deciding its request's era; sync or async as it was."""
    if name not in _EITHER_ERA:
        return handler
    if inspect.iscoroutinefunction(handler):

        async def modern_async(ctx: Any, params: Any) -> Any:
            era = revision(name, params)
            return stamp(name, await handler(ctx, params), era)

        return functools.wraps(handler)(modern_async)

    def modern(ctx: Any, params: Any) -> Any:
        era = revision(name, params)
        return stamp(name, handler(ctx, params), era)

    return functools.wraps(handler)(modern)
