"""The protocol headers of a Streamable HTTP request (`MCP-Protocol-Version`,
and in 2026-07-28 `Mcp-Method` and `Mcp-Name`), checked before its messages
go in (sans I/O).

From 2025-06-18 a client names its revision in `MCP-Protocol-Version` on every
request after `initialize`. A revision this server does not speak is a 400 with
the -32022 a request naming it in `_meta` gets (the revisions served in its
data). Another revision served than the one a session's `initialize` settled is
let through: the spec asks no more, and the official conformance suite sends
one. No header: the session's revision holds, and outside a session the spec's
assumption, 2025-03-26. A 2026-07-28 request also names its revision in
`_meta`: the header must say the same, as `Mcp-Method` must name its method and
`Mcp-Name` the tool, prompt or resource it names (-32020, HeaderMismatch), so
what an intermediary routes on is what the server serves.
"""

from __future__ import annotations

import base64
import binascii

import msgspec

from bashrpc.protocol import messages
from bashrpc.protocol.envelope import ErrorResponse, error_response
from bashrpc.protocol.errors import ErrorCode
from bashrpc.protocol.mcp import (
    ALL_PROTOCOL_VERSIONS,
    PROTOCOL_VERSION_KEY,
    SUPPORTED_PROTOCOL_VERSIONS,
)
from bashrpc.server.daemon.httpframe import HttpRequest
from bashrpc.server.daemon.mcpsession import Message
from bashrpc.server.errors import UnsupportedProtocolVersion
from bashrpc.server.wire.errormap import error_object

HEADER = "mcp-protocol-version"
# 2026-07-28 mirrors the method, and for these methods a name, in headers too.
METHOD_HEADER = "mcp-method"
NAME_HEADER = "mcp-name"
NAME_BEARING = frozenset({"tools/call", "prompts/get", "resources/read"})
# 2026-07-28's HTTP status of an answer that is one of these errors.
ERROR_STATUS: dict[int, int] = {
    ErrorCode.METHOD_NOT_FOUND: 404,
    ErrorCode.UNSUPPORTED_PROTOCOL_VERSION: 400,
    ErrorCode.HEADER_MISMATCH: 400,
}
# A header value that is not plain ASCII comes as `=?base64?...?=`.
BASE64_OPEN, BASE64_CLOSE = "=?base64?", "?="
# What a request without the header speaks when nothing else says (the spec's rule).
ASSUMED_REVISION = "2025-03-26"


class _Meta(msgspec.Struct):
    protocol_version: object = msgspec.field(default=None, name=PROTOCOL_VERSION_KEY)


class _Error(msgspec.Struct):
    code: int


class _Answer(msgspec.Struct):
    error: _Error | None = None


class _Params(msgspec.Struct):
    meta: _Meta | None = msgspec.field(default=None, name="_meta")
    name: object = None
    uri: object = None


def revision(header: str | None, negotiated: str | None) -> str:
    """The revision a request speaks: its header's, else its session's, else the assumed one."""
    return header or negotiated or ASSUMED_REVISION


def refusal(request: HttpRequest, parsed: list[Message]) -> ErrorResponse | None:
    """Why a request's headers are refused (a 400 with this body); None: they are not."""
    header = request.header(HEADER)
    if header is not None and header not in ALL_PROTOCOL_VERSIONS:
        method = next((m.method for m in parsed if m.method is not None), "")
        error = error_object(UnsupportedProtocolVersion(header), method)
        return ErrorResponse(id=None, error=error)
    for message in parsed:
        text = _mismatch(request, message)
        if text is not None:
            return error_response(ErrorCode.HEADER_MISMATCH, text)
    return None


def _params(message: Message) -> _Params | None:
    try:
        return msgspec.json.decode(message.params, type=_Params)
    except msgspec.DecodeError:
        return None  # no params, or not an object


def _named(params: _Params | None) -> str | None:
    """The revision a request's `_meta` names past `initialize`'s (as the
    connection reads it: one of `initialize`'s is of that era); else None."""
    named = None if params is None or params.meta is None else params.meta.protocol_version
    return named if isinstance(named, str) and named not in SUPPORTED_PROTOCOL_VERSIONS else None


def stateless(parsed: list[Message]) -> bool:
    """Whether the POST is of 2026-07-28's era, whose HTTP status follows its answer."""
    return any(_named(_params(message)) is not None for message in parsed)


def answer_status(line: bytes) -> int:
    """The status of a 2026-07-28 request answered by `line`: 404 for a method not
    served, 400 for a revision or headers refused, else 200."""
    try:
        answer = msgspec.json.decode(line, type=_Answer)
    except msgspec.DecodeError:
        return 200
    return 200 if answer.error is None else ERROR_STATUS.get(answer.error.code, 200)


def _mismatch(request: HttpRequest, message: Message) -> str | None:
    """What a 2026-07-28 request's headers say other than its body; None: the
    same (or the request is of `initialize`'s era, which mirrors nothing)."""
    params = _params(message)
    named = _named(params)
    if params is None or named is None:
        return None
    header = request.header(HEADER)
    if header != named:
        if header is None:
            return messages.MCP_HTTP_HEADER_MISSING.format(named=named)
        return messages.MCP_HTTP_HEADER_MISMATCH.format(header=header, named=named)
    mirrored = {METHOD_HEADER: message.method, **_named_by(message.method, params)}
    for name, value in mirrored.items():
        sent = _decoded(request.header(name))
        if sent != value:
            return messages.MCP_HTTP_MIRROR_MISMATCH.format(header=name, sent=sent, value=value)
    return None


def _named_by(method: str | None, params: _Params) -> dict[str, str]:
    """The `Mcp-Name` a method mirrors (a tool's or prompt's name, a resource's URI)."""
    value = params.uri if method == "resources/read" else params.name
    if method not in NAME_BEARING or not isinstance(value, str):
        return {}
    return {NAME_HEADER: value}


def _decoded(value: str | None) -> str | None:
    """A header's value, its base64 form (`=?base64?...?=`) decoded; None when
    absent or not decodable (so it matches no body value)."""
    if value is None or not (value.startswith(BASE64_OPEN) and value.endswith(BASE64_CLOSE)):
        return value
    payload = value[len(BASE64_OPEN) : -len(BASE64_CLOSE)]
    try:
        return base64.b64decode(payload, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
