"""Encoding what goes out, where a failure must never take the server down."""

from __future__ import annotations

import traceback

import msgspec

from bashrpc.protocol import messages
from bashrpc.protocol.envelope import (
    ErrorResponse,
    Notification,
    SuccessResponse,
    encode,
    error_response,
)
from bashrpc.protocol.errors import ErrorCode
from bashrpc.server import log
from bashrpc.server.wire.errormap import summary
from bashrpc.server.wire.registry import NOTIFICATION_TYPES

_log = log.get("replies")


def encode_reply(reply: ErrorResponse | SuccessResponse) -> bytes:
    """A reply that cannot be encoded becomes -32603 for its request, not a crash."""
    try:
        return encode(reply)
    except Exception as exc:
        _log.error("reply to %r not encodable:\n%s", reply.id, traceback.format_exc())
        failed = error_response(
            ErrorCode.INTERNAL_ERROR, messages.INTERNAL_ERROR, reply.id, summary(exc)
        )
        return encode(failed)


def encode_batch(replies: list[ErrorResponse | SuccessResponse]) -> bytes:
    return b"[" + b",".join(encode_reply(r).rstrip(b"\n") for r in replies) + b"]\n"


def encode_notification(method: str, params: msgspec.Struct) -> bytes | None:
    """The line, or None (and the reason on stderr) when it cannot be encoded, or
    is not a notification the protocol declares with these params."""
    declared = NOTIFICATION_TYPES.get(method)
    if declared is None or type(params) is not declared:
        _log.error("notification %s with %s not sent: not in the protocol", method, type(params))
        return None
    try:
        return encode(Notification(method=method, params=params))
    except Exception:
        _log.error("notification %s not sent:\n%s", method, traceback.format_exc())
        return None
