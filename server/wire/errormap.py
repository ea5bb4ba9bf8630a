"""The one place where errors become JSON-RPC error objects.

Domain code raises the plain exceptions of `bashrpc.server.errors`; this table gives
each its code, its message (from `bashrpc.protocol.messages`) and its data. Anything
not in the table is a bug: -32603, one line on the wire, the traceback on
stderr.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

import msgspec

from bashrpc.protocol import invalidparams, messages
from bashrpc.protocol.envelope import ErrorObject
from bashrpc.protocol.errors import (
    ArtifactNotFoundData,
    ErrorCode,
    NoSuchPtyData,
    NoSuchTerminalData,
    ResumeGapData,
    TooManyJobsData,
    TooManyShellsData,
    UnsupportedVersionData,
)
from bashrpc.protocol.mcp import ALL_PROTOCOL_VERSIONS, CancelledOutput
from bashrpc.server import errors, log

_log = log.get("errors")


def _invalid(exc: errors.InvalidArgument, params: bytes | None) -> ErrorObject:
    message = exc.message or messages.invalid_params(invalidparams.reason(exc.detail, params))
    return ErrorObject(ErrorCode.INVALID_PARAMS, message, exc.detail)


def _undecodable(exc: msgspec.DecodeError, params: bytes | None) -> ErrorObject:
    """Params that do not decode into their Struct: `data` is msgspec's text, naming the
    field; the message says it in words, with the value sent."""
    message = messages.invalid_params(invalidparams.reason(str(exc), params))
    return ErrorObject(ErrorCode.INVALID_PARAMS, message, str(exc))


def _artifact(exc: errors.ArtifactNotFound) -> ErrorObject:
    return ErrorObject(
        ErrorCode.RESOURCE_NOT_FOUND,
        messages.artifact_not_found(exc.artifact_id, exc.available),
        ArtifactNotFoundData(available=messages.newest_ids(exc.available), uri=exc.uri),
    )


def _cancelled(exc: errors.RequestCancelled) -> ErrorObject:
    data = None if exc.output is None else CancelledOutput(output=exc.output)
    return ErrorObject(ErrorCode.REQUEST_CANCELLED, messages.REQUEST_CANCELLED, data)


def _over_budget(exc: errors.OverBudget) -> str:
    if exc.size > exc.budget:
        return messages.REQUEST_OVER_WHOLE_BUDGET.format(size=exc.size, budget=exc.budget)
    return messages.REQUEST_OVER_BUDGET.format(size=exc.size, held=exc.held, budget=exc.budget)


_TABLE: dict[type[BaseException], Callable[[Any], ErrorObject]] = {
    errors.TooManyShells: lambda exc: ErrorObject(
        ErrorCode.TOO_MANY_SHELLS, messages.TOO_MANY_SHELLS, TooManyShellsData(exc.live)
    ),
    errors.ArtifactNotFound: _artifact,
    errors.SandboxUnavailable: lambda exc: ErrorObject(
        ErrorCode.SANDBOX_UNAVAILABLE, exc.message, exc.detail
    ),
    errors.NoSuchPty: lambda exc: ErrorObject(
        ErrorCode.NO_SUCH_PTY,
        messages.NO_SUCH_PTY.format(request_id=exc.request_id),
        NoSuchPtyData(exc.request_id),
    ),
    errors.NoSuchTerminal: lambda exc: ErrorObject(
        ErrorCode.RESOURCE_NOT_FOUND,
        messages.NO_SUCH_TERMINAL.format(terminal_id=exc.terminal_id),
        NoSuchTerminalData(exc.terminal_id),
    ),
    errors.TooManyJobs: lambda exc: ErrorObject(
        ErrorCode.TOO_MANY_JOBS,
        messages.TOO_MANY_JOBS,
        TooManyJobsData(exc.live, exc.limit, exc.session_id),
    ),
    errors.OverBudget: lambda exc: ErrorObject(ErrorCode.SERVER_BUSY, _over_budget(exc)),
    errors.ServerBusy: lambda _exc: ErrorObject(ErrorCode.SERVER_BUSY, messages.SERVER_BUSY),
    errors.ShuttingDown: lambda _exc: ErrorObject(ErrorCode.SHUTTING_DOWN, messages.SHUTTING_DOWN),
    errors.RequestCancelled: _cancelled,
    errors.UnsupportedProtocolVersion: lambda exc: ErrorObject(
        ErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
        messages.UNSUPPORTED_PROTOCOL_VERSION.format(
            requested=exc.requested, supported=", ".join(ALL_PROTOCOL_VERSIONS)
        ),
        UnsupportedVersionData(exc.requested, list(ALL_PROTOCOL_VERSIONS)),
    ),
    errors.RemovedMethod: lambda exc: ErrorObject(
        ErrorCode.METHOD_NOT_FOUND,
        messages.REMOVED_METHOD.format(method=exc.method, revision=exc.revision),
        exc.method,
    ),
    errors.ResumeGap: lambda exc: ErrorObject(
        ErrorCode.RESUME_GAP,
        messages.RESUME_GAP.format(
            request_id=exc.request_id,
            missed=exc.missed,
            after_seq=exc.after_seq,
            first_kept=exc.first_kept,
        ),
        ResumeGapData(first_kept=exc.first_kept, missed=exc.missed),
    ),
}
# Those whose error quotes the request's params.
_WITH_PARAMS: dict[type[BaseException], Callable[[Any, bytes | None], ErrorObject]] = {
    errors.InvalidArgument: _invalid,
    msgspec.DecodeError: _undecodable,
}


def error_object(exc: BaseException, method: str, params: bytes | None = None) -> ErrorObject:
    """The wire error for an exception a request ended with; `params` are its raw params."""
    for kind in type(exc).__mro__:
        quoting = _WITH_PARAMS.get(kind)
        if quoting is not None:
            return quoting(exc, params)
        mapper = _TABLE.get(kind)
        if mapper is not None:
            return mapper(exc)
    _log.error("method %s failed:\n%s", method, "".join(traceback.format_exception(exc)))
    return ErrorObject(ErrorCode.INTERNAL_ERROR, messages.INTERNAL_ERROR, summary(exc))


def summary(exc: BaseException) -> str:
    """A bug's one line on the wire (its traceback goes to stderr)."""
    return f"{type(exc).__name__}: {exc}".splitlines()[0]


def sole(exc: BaseException) -> BaseException:
    """What a task group raised, unwrapped when it holds one exception."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc
