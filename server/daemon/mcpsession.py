"""One Streamable HTTP session: the connection behind it, and its streams.

A session is one `Connection` (the daemon's, as for a socket or a WebSocket)
over a transport made here: each POSTed message becomes a line of its input,
and each line it writes is routed to a stream. A response goes to the stream
of the POST that carried its request; a progress notification to the stream
of the request that named its token; anything else to the GET stream when
one is open, else to the newest POST stream still open, else nowhere. A POST
stream ends once each request it carried is answered.

A stream keeps its events, bounded in bytes (the oldest dropped first), after
its HTTP response is gone: a client that lost it asks again with
`Last-Event-ID` and is sent what came after. The routing is sans-I/O; only
`wait_after` waits.
"""

from __future__ import annotations

import collections
import secrets

import anyio
import anyio.abc
import msgspec
from msgspec import UNSET, UnsetType

from bashrpc.server.wire.transport import Transport
from bashrpc.server.wire.wstransport import NEWLINE, as_line

# A stream's events kept for a client that resumes; past it the oldest go.
STREAM_KEEP_BYTES = 4 << 20
# Ended streams kept for resumption, per session; the oldest are forgotten.
KEPT_STREAMS = 16
# Messages POSTed that the connection has not read yet, before a POST waits.
INBOX_MESSAGES = 64
PROGRESS = "notifications/progress"
CANCELLED = "notifications/cancelled"

Id = int | str | None
NO_PARAMS = msgspec.Raw(b"null")


class ProgressMeta(msgspec.Struct):
    progressToken: int | str | None = None


class RequestParams(msgspec.Struct):
    meta: ProgressMeta | None = msgspec.field(default=None, name="_meta")


class ProgressParams(msgspec.Struct):
    progressToken: int | str | None = None


class CancelledParams(msgspec.Struct):
    requestId: int | str | None = None


class CancelledNotification(msgspec.Struct):
    params: CancelledParams
    jsonrpc: str = "2.0"
    method: str = CANCELLED


class _Settled(msgspec.Struct):
    protocolVersion: str | None = None


class InitializeAnswer(msgspec.Struct):
    """What routing reads of the answer to `initialize`: the revision it settled."""

    result: _Settled | None = None


class Message(msgspec.Struct):
    """What routing reads of a JSON-RPC message, either way."""

    id: Id | UnsetType = UNSET
    method: str | None = None
    params: msgspec.Raw = msgspec.field(default_factory=lambda: NO_PARAMS)

    @property
    def is_request(self) -> bool:
        return self.method is not None and self.id is not UNSET


def id_key(value: Id | UnsetType) -> bytes:
    return msgspec.json.encode(value)


def progress_token(message: Message, shape: type[msgspec.Struct]) -> bytes | None:
    try:
        params = msgspec.json.decode(message.params, type=shape)
    except msgspec.DecodeError:
        return None  # no params, or not an object: no token
    token = params.progressToken if isinstance(params, ProgressParams) else None
    if isinstance(params, RequestParams) and params.meta is not None:
        token = params.meta.progressToken
    return None if token is None else id_key(token)


class Stream:
    """One SSE stream's events (or a JSON reply's, `sse` False), numbered."""

    def __init__(self, number: int, pending: set[bytes], sse: bool) -> None:
        self.number = number
        self.pending = pending
        self.sse = sse
        self.closed = False
        # Every event written out to the end: nothing left for a client to resume.
        self.delivered = False
        self.consumers = 0
        self.answers: set[int] = set()
        self._events: collections.deque[tuple[int, bytes]] = collections.deque()
        self._bytes = 0
        self._next = 1
        self._changed = anyio.Event()

    def event_id(self, seq: int) -> str:
        return f"{self.number}-{seq}"

    def put(self, data: bytes, answer: bool = False) -> None:
        """One more event; `answer`: it answers a request (a resuming reader that
        gets one has what it came for)."""
        if answer:
            self.answers.add(self._next)
        self._events.append((self._next, data))
        self._next += 1
        self._bytes += len(data)
        while self._bytes > STREAM_KEEP_BYTES and len(self._events) > 1:
            self._bytes -= len(self._events.popleft()[1])
        self._wake()

    def close(self) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def snapshot(self) -> list[tuple[int, bytes]]:
        return list(self._events)

    async def finished(self) -> None:
        while not self.closed:
            await self._changed.wait()

    async def wait_after(self, seq: int) -> list[tuple[int, bytes]]:
        """The events after `seq`, waiting for one; [] once the stream has ended."""
        while True:
            events = [event for event in self._events if event[0] > seq]
            if events or self.closed:
                return events
            await self._changed.wait()


def parse_event_id(text: str) -> tuple[int, int] | None:
    number, dash, seq = text.partition("-")
    if not dash or not number.isdigit() or not seq.isdigit():
        return None
    return int(number), int(seq)


class Router(anyio.abc.ByteSendStream):
    """The connection's output: each line to the stream it belongs on."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._partial = b""

    async def send(self, item: bytes) -> None:
        *lines, self._partial = (self._partial + item).split(NEWLINE)
        for line in lines:
            self._session.route(line)

    async def aclose(self) -> None:
        """The session ends its streams when its connection ends."""


class Session:
    """One session's input, streams and routes; `registered` False: a stateless
    exchange, ended once its POST is answered, whose connection is `owner`'s
    (a tenant key)."""

    def __init__(self, registered: bool, owner: str | None = None) -> None:
        self.id = secrets.token_urlsafe(24) if registered else None
        self.owner = None if registered else owner
        self.last_used = 0.0
        self.ended = False
        # Set once the connection is gone: what a held stream waits for.
        self.gone = anyio.Event()
        self._inbox_send, self._inbox = anyio.create_memory_object_stream[bytes](INBOX_MESSAGES)
        self.streams: dict[int, Stream] = {}
        self.standalone: Stream | None = None
        self._numbers = 0
        self._by_request: dict[bytes, Stream] = {}
        self._by_token: dict[bytes, Stream] = {}
        self._initialize: set[bytes] = set()
        self.dropped = 0
        # The revision `initialize` settled (read from its answer); None before.
        self.revision: str | None = None

    def transport(self) -> Transport:
        return Transport(self._inbox, Router(self), owner=self.owner)

    def open_stream(self, messages: list[Message], sse: bool) -> Stream:
        """A stream for the requests among `messages`, routed to before they go in."""
        self._numbers += 1
        requests = [message for message in messages if message.is_request]
        stream = Stream(self._numbers, {id_key(m.id) for m in requests}, sse)
        for message in requests:
            self._by_request[id_key(message.id)] = stream
            if message.method == "initialize":
                self._initialize.add(id_key(message.id))
            token = progress_token(message, RequestParams)
            if token is not None and sse:
                self._by_token[token] = stream
        self._keep(stream)
        return stream

    def open_standalone(self) -> Stream:
        self._numbers += 1
        self.standalone = Stream(self._numbers, set(), sse=True)
        self._keep(self.standalone)
        return self.standalone

    def _keep(self, stream: Stream) -> None:
        self.streams[stream.number] = stream
        for done in [s for s in self.streams.values() if s.delivered and s.consumers == 0]:
            del self.streams[done.number]
        ended = [s for s in self.streams.values() if s.closed and s.consumers == 0]
        for old in ended[: max(0, len(ended) - KEPT_STREAMS)]:
            del self.streams[old.number]

    def withdrawn(self, messages: list[Message]) -> None:
        """Requests the client cancels get no answer: their streams stop waiting."""
        for message in messages:
            if message.method != CANCELLED:
                continue
            try:
                params = msgspec.json.decode(message.params, type=CancelledParams)
            except msgspec.DecodeError:
                continue
            key = id_key(params.requestId)
            stream = self._by_request.pop(key, None)
            if stream is not None:
                stream.pending.discard(key)
                if not stream.pending:
                    self._close(stream)

    async def abandon(self, stream: Stream) -> None:
        """The client of an exchange outside a session left before its answers:
        its requests are cancelled (closing the stream is the cancel in 2026-07-28,
        and with no session nobody could resume it)."""
        if stream.closed:
            return
        raws = [
            msgspec.json.encode(
                CancelledNotification(CancelledParams(msgspec.json.decode(key, type=Id)))
            )
            for key in stream.pending
        ]
        # In before the withdrawal, which ends a stateless exchange's input.
        await self.deliver(raws)
        self.withdrawn([msgspec.json.decode(raw, type=Message) for raw in raws])

    async def deliver(self, raws: list[bytes]) -> None:
        """The POSTed messages, in order, into the connection's input."""
        try:
            for raw in raws:
                await self._inbox_send.send(as_line(raw))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the connection ended: its streams end too

    def route(self, line: bytes) -> None:
        try:
            message = msgspec.json.decode(line, type=Message)
        except msgspec.DecodeError:
            message = Message()
        stream = self._stream_for(message)
        if stream is None:
            self.dropped += 1
            return
        is_answer = message.method is None and message.id is not UNSET
        stream.put(line, is_answer)
        if not is_answer:
            return  # the stream waits on
        key = id_key(message.id)
        if key in self._initialize:
            self._initialize.discard(key)
            self._settled(line)
        if key in stream.pending:
            stream.pending.discard(key)
            self._by_request.pop(key, None)
            if not stream.pending:
                self._close(stream)

    def _settled(self, line: bytes) -> None:
        try:
            answer = msgspec.json.decode(line, type=InitializeAnswer)
        except msgspec.DecodeError:
            return  # not a result that names a revision: none settled
        if answer.result is not None and answer.result.protocolVersion is not None:
            self.revision = answer.result.protocolVersion

    def _stream_for(self, message: Message) -> Stream | None:
        if message.method is None and message.id is not UNSET:
            found = self._by_request.get(id_key(message.id))
            if found is not None:
                return found
        if message.method == PROGRESS:
            token = progress_token(message, ProgressParams)
            found = None if token is None else self._by_token.get(token)
            if found is not None and not found.closed:
                return found
        if self.standalone is not None and not self.standalone.closed:
            return self.standalone
        open_sse = [s for s in self.streams.values() if s.sse and not s.closed]
        return open_sse[-1] if open_sse else None

    def _close(self, stream: Stream) -> None:
        stream.close()
        for token in [t for t, s in self._by_token.items() if s is stream]:
            del self._by_token[token]
        if self.id is None and all(s.closed for s in self.streams.values()):
            self.end_input()  # a stateless exchange, answered

    def end_input(self) -> None:
        """No more input: the connection winds down as on EOF."""
        self._inbox_send.close()

    def ended_connection(self) -> None:
        """The connection is gone: every stream ends."""
        self.ended = True
        self.gone.set()
        self._inbox_send.close()
        self._inbox.close()
        for stream in self.streams.values():
            stream.close()

    @property
    def busy(self) -> bool:
        return any(not s.closed or s.consumers for s in self.streams.values())
