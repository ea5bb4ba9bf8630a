"""JSON-RPC 2.0 envelopes: decoding one framed line into calls, encoding replies.

Params stay raw here (``msgspec.Raw``) and are decoded later into the method's
own Struct, so a request pays for one typed decode of its params and nothing
more. Batches are split here, member by member, because the spec wants an
error per bad member, not one for the whole batch.
"""

from __future__ import annotations

from typing import Any

import msgspec

from bashrpc.protocol import messages
from bashrpc.protocol.errors import ErrorCode

RequestId = str | int
JSONRPC_VERSION = "2.0"


class _Envelope(msgspec.Struct):
    jsonrpc: str
    method: str
    params: msgspec.Raw = msgspec.Raw(b"")
    id: RequestId | msgspec.UnsetType | None = msgspec.UNSET


class _IdOnly(msgspec.Struct):
    id: Any = None


class Call(msgspec.Struct, frozen=True):
    """One valid request or notification. ``id`` is UNSET for notifications."""

    method: str
    params: msgspec.Raw
    id: RequestId | msgspec.UnsetType | None

    @property
    def is_notification(self) -> bool:
        return self.id is msgspec.UNSET

    @property
    def reply_id(self) -> RequestId | None:
        """The id a reply carries (notifications get none, so None here)."""
        return None if isinstance(self.id, msgspec.UnsetType) else self.id


class ErrorObject(msgspec.Struct, omit_defaults=True):
    code: int
    message: str
    data: Any = None


class ErrorResponse(msgspec.Struct, kw_only=True):
    jsonrpc: str = JSONRPC_VERSION
    id: RequestId | None
    error: ErrorObject


class SuccessResponse(msgspec.Struct, kw_only=True):
    jsonrpc: str = JSONRPC_VERSION
    id: RequestId | None
    result: Any


class Notification(msgspec.Struct, kw_only=True):
    jsonrpc: str = JSONRPC_VERSION
    method: str
    params: Any


class Rejected(msgspec.Struct, frozen=True):
    """A line or batch member that cannot be dispatched, with its ready reply."""

    response: ErrorResponse


Incoming = Call | Rejected

_decode_any = msgspec.json.Decoder().decode
_decode_envelope = msgspec.json.Decoder(_Envelope).decode
_decode_id = msgspec.json.Decoder(_IdOnly).decode
_decode_batch = msgspec.json.Decoder(list[msgspec.Raw]).decode


def error_response(
    code: ErrorCode, message: str, id: RequestId | None = None, data: Any = None
) -> ErrorResponse:
    return ErrorResponse(id=id, error=ErrorObject(int(code), message, data))


def parse_line(line: bytes) -> tuple[list[Incoming], bool]:
    """Decode one line into calls and rejections; the flag tells a batch."""
    try:
        return _parse_line(line)
    except RecursionError:
        return [
            Rejected(
                error_response(
                    ErrorCode.INVALID_REQUEST,
                    messages.INVALID_REQUEST,
                    data=messages.NESTING_TOO_DEEP,
                )
            )
        ], False


def _parse_line(line: bytes) -> tuple[list[Incoming], bool]:
    bad_utf8 = _invalid_utf8_at(line)
    if bad_utf8 is not None:
        return [_unparsable(messages.INVALID_UTF8.format(offset=bad_utf8))], False
    head = line.lstrip()[:1]
    if head == b"[":
        try:
            members = _decode_batch(line)
        except msgspec.DecodeError as exc:
            return [_parse_failure(exc)], False
        if not members:
            return [
                Rejected(
                    error_response(
                        ErrorCode.INVALID_REQUEST,
                        messages.INVALID_REQUEST,
                        data=messages.EMPTY_BATCH,
                    )
                )
            ], False
        return [_parse_member(bytes(m)) for m in members], True
    if head != b"{":
        # Not an object at all: still distinguish bad JSON from valid non-requests.
        try:
            _decode_any(line)
        except msgspec.DecodeError as exc:
            return [_parse_failure(exc)], False
        return [
            Rejected(error_response(ErrorCode.INVALID_REQUEST, messages.INVALID_REQUEST))
        ], False
    return [_parse_member(line)], False


def _invalid_utf8_at(line: bytes) -> int | None:
    """Where the line stops being UTF-8, or None.

    msgspec checks only the strings it decodes, and it skips unknown members and
    keeps params raw, so an invalid byte there would pass. ASCII, which is what
    most encoders write, costs one scan that allocates nothing (0.09 ms a MB);
    any other line costs a decode (0.4-3.5 ms a MB, against 2.4-5.3 ms for its
    parse and params)."""
    if line.isascii():
        return None
    try:
        line.decode()
    except UnicodeDecodeError as exc:
        return exc.start
    return None


def _parse_failure(exc: msgspec.DecodeError) -> Rejected:
    return _unparsable(str(exc))


def _unparsable(detail: str) -> Rejected:
    return Rejected(error_response(ErrorCode.PARSE_ERROR, messages.PARSE_ERROR, data=detail))


def _parse_member(raw: bytes) -> Incoming:
    try:
        env = _decode_envelope(raw)
    except msgspec.ValidationError as exc:
        return Rejected(
            error_response(
                ErrorCode.INVALID_REQUEST,
                messages.INVALID_REQUEST,
                _salvage_id(raw),
                str(exc),
            )
        )
    except msgspec.DecodeError as exc:
        # Inside a batch the members were already valid JSON; at top level this
        # is a plain parse error.
        return _parse_failure(exc)
    ident = None if env.id is msgspec.UNSET else env.id
    if env.jsonrpc != JSONRPC_VERSION:
        return Rejected(
            error_response(
                ErrorCode.INVALID_REQUEST,
                messages.INVALID_REQUEST,
                ident,
                messages.ENVELOPE_JSONRPC,
            )
        )
    params = env.params
    if params and bytes(params).lstrip()[:1] not in (b"{", b"["):
        return Rejected(
            error_response(
                ErrorCode.INVALID_REQUEST,
                messages.INVALID_REQUEST,
                ident,
                messages.PARAMS_NOT_STRUCTURED,
            )
        )
    return Call(env.method, params, env.id)


def _salvage_id(raw: bytes) -> RequestId | None:
    """Echo the id of an invalid request when it is itself a valid id."""
    try:
        ident = _decode_id(raw).id
    except msgspec.DecodeError:
        return None
    if isinstance(ident, (str, int)) and not isinstance(ident, bool):
        return ident
    return None


_encoder = msgspec.json.Encoder()


def encode(message: msgspec.Struct) -> bytes:
    return _encoder.encode(message) + b"\n"


class ServerMessage(msgspec.Struct):
    """Anything a server writes, as a client decodes it before looking closer."""

    jsonrpc: str
    method: str | None = None
    # Raw stays empty when the member is absent; a JSON null is Raw(b"null").
    params: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    # UNSET when absent (a notification); None when the server wrote null.
    id: RequestId | msgspec.UnsetType | None = msgspec.UNSET
    result: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    error: ErrorObject | None = None


class Request(msgspec.Struct, kw_only=True):
    """A request as a client writes it; without an id it is a notification."""

    jsonrpc: str = JSONRPC_VERSION
    id: RequestId | msgspec.UnsetType | None = msgspec.UNSET
    method: str
    params: Any = msgspec.UNSET
