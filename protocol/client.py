"""The client side of the protocol, sans I/O: request lines out, server messages in.

A client's transport (a pipe, a socket, an in-memory stream) writes the bytes
`ClientCore` hands it and feeds it the bytes it reads. The core numbers the
requests and frames and decodes what comes back; `Replies` keeps replies by
id for a client that waits on several at once. Blocking, threads and timeouts
stay with the transport, so the exec CLI, the bench and the tests share this
and differ only in how they wait.
"""

from __future__ import annotations

import collections
import itertools
from typing import TypeVar

import msgspec

from bashrpc.protocol import mcp, methods, terminals
from bashrpc.protocol.envelope import ErrorObject, Request, RequestId, ServerMessage, encode
from bashrpc.protocol.framing import LineFramer, Oversized

__all__ = [
    "RESULT_TYPES",
    "ClientCore",
    "ErrorReply",
    "Received",
    "Replies",
    "Unparsable",
    "notification_params",
    "reply_key",
    "result_of",
]

T = TypeVar("T")

# A server line may carry a whole artifact page or a big batch reply; anything
# past this is a server bug, reported as Unparsable rather than held.
CLIENT_MAX_LINE_BYTES = 256 * 1024 * 1024

# Method name -> the Struct its result decodes into (None: it answers null).
RESULT_TYPES: dict[str, type[msgspec.Struct] | None] = {
    name: result
    for table in (methods.METHODS, mcp.METHODS, terminals.METHODS)
    for name, (_, result) in table.items()
}

_decode_message = msgspec.json.Decoder(ServerMessage).decode
_decode_batch = msgspec.json.Decoder(list[ServerMessage]).decode


class ErrorReply(Exception):
    """An error reply where a result was expected; `error` is the server's own."""

    def __init__(self, error: ErrorObject) -> None:
        super().__init__(f"{error.code}: {error.message}")
        self.error = error


class Unparsable(msgspec.Struct, frozen=True):
    """A line from the server that is not a JSON-RPC message: always a server bug."""

    line: bytes
    reason: str


Received = ServerMessage | Unparsable

ReplyKey = tuple[type, RequestId]


def reply_key(ident: object) -> ReplyKey | None:
    """How replies are matched: equal ids of the same JSON type (1 is not 1.0 or
    true). None for what cannot be an id at all."""
    if isinstance(ident, bool) or not isinstance(ident, (str, int)):
        return None
    return (type(ident), ident)


def result_of(message: ServerMessage, kind: type[T]) -> T:
    """A reply's result decoded into `kind`; an error reply raises ErrorReply."""
    if message.error is not None:
        raise ErrorReply(message.error)
    return msgspec.json.decode(message.result, type=kind)


def notification_params(message: ServerMessage, kind: type[T]) -> T:
    """A notification's params decoded into `kind`."""
    return msgspec.json.decode(message.params, type=kind)


class ClientCore:
    """One connection's client state: the next id and the framer."""

    def __init__(self, max_line_bytes: int = CLIENT_MAX_LINE_BYTES) -> None:
        self._ids = itertools.count(1)
        self._framer = LineFramer(max_line_bytes)

    def request(
        self,
        method: str,
        params: msgspec.Struct | msgspec.UnsetType = msgspec.UNSET,
        id: RequestId | None = None,
    ) -> tuple[RequestId, bytes]:
        """The id (the next number unless given) and the line that asks for `method`."""
        ident = next(self._ids) if id is None else id
        return ident, encode(Request(id=ident, method=method, params=params))

    def notification(
        self, method: str, params: msgspec.Struct | msgspec.UnsetType = msgspec.UNSET
    ) -> bytes:
        return encode(Request(method=method, params=params))

    def feed(self, data: bytes) -> list[Received]:
        """What the bytes read so far complete, in order."""
        return [m for frame in self._framer.feed(data) for m in self._messages(frame)]

    def end(self) -> list[Received]:
        """The server closed its output: a last line without a newline still counts."""
        return [m for frame in self._framer.close() for m in self._messages(frame)]

    def _messages(self, frame: bytes | Oversized) -> list[Received]:
        if isinstance(frame, Oversized):
            return [Unparsable(b"", f"a line of {frame.size} bytes, past the client's limit")]
        return self.line(frame)

    @staticmethod
    def line(line: bytes) -> list[Received]:
        """The messages of one whole line, for transports that frame for
        themselves: one, or a batch's replies in the order the server wrote them."""
        try:
            if line.lstrip()[:1] == b"[":
                return list(_decode_batch(line))
            return [_decode_message(line)]
        except msgspec.DecodeError as exc:
            return [Unparsable(line, str(exc))]


class Replies:
    """Replies received and not yet taken, by id, for a client that waits on
    several requests at once. A lookup, not a scan of everything received (the
    hostile-input properties receive thousands)."""

    def __init__(self) -> None:
        self._waiting: dict[ReplyKey, collections.deque[ServerMessage]] = {}

    def put(self, message: ServerMessage) -> bool:
        """Keep `message` if it is a reply with an id; whether it was kept."""
        key = None if message.method is not None else reply_key(message.id)
        if key is None:
            return False
        self._waiting.setdefault(key, collections.deque()).append(message)
        return True

    def take(self, ident: object) -> ServerMessage | None:
        """The first reply to `ident` kept and not yet taken, or None."""
        key = reply_key(ident)
        if key is None:
            return None
        waiting = self._waiting.get(key)
        if not waiting:
            return None
        message = waiting.popleft()
        if not waiting:
            del self._waiting[key]
        return message
