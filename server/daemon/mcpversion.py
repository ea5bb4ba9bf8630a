"""The `MCP-Protocol-Version` header of a Streamable HTTP request, checked
before its messages go in (sans I/O).

From 2025-06-18 a client names its revision in this header on every request
after `initialize`. A revision this server does not speak is a 400 with the
-32022 a request naming it in `_meta` gets (the revisions served in its data);
in a session, another revision than the one `initialize` settled is a 400 too.
No header: the session's revision holds, and outside a session the spec's
assumption, 2025-03-26. A 2026-07-28 request also names its revision in
`_meta`: the header must say the same (-32020, HeaderMismatch), so what an
intermediary routes on is what the server serves.
"""

from __future__ import annotations

import msgspec

from bashrpc.protocol import messages
from bashrpc.protocol.envelope import ErrorResponse, error_response
from bashrpc.protocol.errors import ErrorCode
from bashrpc.protocol.mcp import (
    ALL_PROTOCOL_VERSIONS,
    PROTOCOL_VERSION_KEY,
    SUPPORTED_PROTOCOL_VERSIONS,
)
from bashrpc.server.daemon.mcpsession import Message
from bashrpc.server.errors import UnsupportedProtocolVersion
from bashrpc.server.wire.errormap import error_object

HEADER = "mcp-protocol-version"
# What a request without the header speaks when nothing else says (the spec's rule).
ASSUMED_REVISION = "2025-03-26"


class _Meta(msgspec.Struct):
    protocol_version: object = msgspec.field(default=None, name=PROTOCOL_VERSION_KEY)


class _Params(msgspec.Struct):
    meta: _Meta | None = msgspec.field(default=None, name="_meta")


def revision(header: str | None, negotiated: str | None) -> str:
    """The revision a request speaks: its header's, else its session's, else the assumed one."""
    return header or negotiated or ASSUMED_REVISION


def refusal(header: str | None, parsed: list[Message]) -> ErrorResponse | None:
    """Why a request's header is refused (a 400 with this body); None: it is not."""
    if header is not None and header not in ALL_PROTOCOL_VERSIONS:
        method = next((m.method for m in parsed if m.method is not None), "")
        error = error_object(UnsupportedProtocolVersion(header), method)
        return ErrorResponse(id=None, error=error)
    for named in (_named(message) for message in parsed):
        if named is not None and named != header:
            text = (
                messages.MCP_HTTP_HEADER_MISSING.format(named=named)
                if header is None
                else messages.MCP_HTTP_HEADER_MISMATCH.format(header=header, named=named)
            )
            return error_response(ErrorCode.HEADER_MISMATCH, text)
    return None


def _named(message: Message) -> str | None:
    """The revision a request's `_meta` names, if it names one past `initialize`'s
    (as the connection reads it: one of `initialize`'s is of that era)."""
    try:
        params = msgspec.json.decode(message.params, type=_Params)
    except msgspec.DecodeError:
        return None  # no params, or not an object: nothing named
    named = None if params.meta is None else params.meta.protocol_version
    return named if isinstance(named, str) and named not in SUPPORTED_PROTOCOL_VERSIONS else None
