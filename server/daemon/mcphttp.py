"""The daemon's Streamable HTTP listener (`--listen http://HOST:PORT/PATH`).

MCP's remote transport on one path: a POST carries messages (202 when none is
a request; else the answers, as one JSON body or as an SSE stream that also
carries what the server says meanwhile); a GET opens the server's own stream,
or resumes one from `Last-Event-ID`; a DELETE ends the session. `initialize`
starts a session (`Mcp-Session-Id`), served as a socket's connection is; a
POST with neither is a stateless exchange on a connection of its own.

The gate (`mcpgate`) runs first on every request. The parsing is `httpframe`'s
and the routing `mcpsession`'s; this module only moves bytes. Bounded: a
request's body (`--max-line-bytes`), connections, sessions, each session's
open streams, and a GET stream or session that stays idle.
"""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable

import anyio
import anyio.abc
import msgspec

from bashrpc.protocol import messages
from bashrpc.server import log
from bashrpc.server.daemon import tcppeer
from bashrpc.server.daemon.health import OpenConnections
from bashrpc.server.daemon.httpframe import (
    JSON,
    SSE,
    HttpRequest,
    RequestReader,
    response,
    response_head,
    sse_event,
)
from bashrpc.server.daemon.mcpgate import Gate, Peer, error_body
from bashrpc.server.daemon.mcpsession import Message, Session, Stream, parse_event_id
from bashrpc.server.daemon.wsconfig import ListenAddress
from bashrpc.server.observe.httpwire import HttpError
from bashrpc.server.wire.transport import Transport

MAX_CONNECTIONS = 256
MAX_SESSIONS = 64
MAX_STREAMS_PER_SESSION = 32
# A keep-alive connection that sends no request this long is closed.
REQUEST_WAIT_SECONDS = 60.0
# The server's own stream ends after this long with nothing to send; the client reopens it.
STANDALONE_IDLE_SECONDS = 300.0
# A session with no stream and no request this long ends (its connection as on EOF).
SESSION_IDLE_SECONDS = 1800.0
SWEEP_SECONDS = 5.0
SESSION_HEADER = "Mcp-Session-Id"
RETRY_MS = 1000

_log = log.get("http.mcp")

Serve = Callable[[Transport], Awaitable[None]]


class McpHttpListener(msgspec.Struct, frozen=True):
    address: ListenAddress
    path: str
    sock: socket.socket
    token: str | None
    max_body: int

    def url(self, port: int) -> str:
        host = f"[{self.address.host}]" if ":" in self.address.host else self.address.host
        return f"http://{host}:{port}{self.path}"


class Answer(msgspec.Struct, frozen=True):
    """What a request gets: a whole response, or a stream's events."""

    status: int
    body: bytes = b""
    headers: list[tuple[str, str]] = []
    stream: Stream | None = None
    after: int = 0
    idle: float | None = None


def _refusal(status: int, text: str) -> Answer:
    return Answer(status, error_body(text), [("Content-Type", JSON)])


class Endpoint:
    """Every session of the listener, and what each method does."""

    def __init__(
        self, listener: McpHttpListener, serve_one: Serve, sessions_group: anyio.abc.TaskGroup
    ) -> None:
        self._listener = listener
        self._serve_one = serve_one
        self._group = sessions_group
        self.sessions: dict[str, Session] = {}
        self.loopback = listener.address.loopback
        self.max_body = listener.max_body

    async def answer(self, request: HttpRequest) -> Answer:
        if request.path != self._listener.path:
            return _refusal(404, messages.MCP_HTTP_NOT_FOUND.format(path=self._listener.path))
        if request.method == "POST":
            return await self._post(request)
        session = self._session(request)
        if isinstance(session, Answer):
            return session
        session.last_used = anyio.current_time()
        if request.method == "GET":
            return self._get(request, session)
        if request.method == "DELETE":
            session.end_input()
            return Answer(200)
        answer = _refusal(405, messages.MCP_HTTP_METHOD)
        return msgspec.structs.replace(
            answer, headers=[*answer.headers, ("Allow", "GET, POST, DELETE")]
        )

    def _session(self, request: HttpRequest) -> Session | Answer:
        session_id = request.header("mcp-session-id")
        if session_id is None:
            return _refusal(400, messages.MCP_HTTP_NO_SESSION)
        session = self.sessions.get(session_id)
        if session is None or session.ended:
            return _refusal(404, messages.MCP_HTTP_UNKNOWN_SESSION)
        return session

    async def _post(self, request: HttpRequest) -> Answer:
        content_type = (request.header("content-type") or "").split(";", 1)[0].strip().lower()
        if content_type != JSON:
            return _refusal(415, messages.MCP_HTTP_CONTENT_TYPE)
        sse = request.accepts(SSE)
        if not sse and not request.accepts(JSON):
            return _refusal(406, messages.MCP_HTTP_ACCEPT)
        try:
            raws, parsed = _messages(request.body)
        except msgspec.DecodeError:
            return _refusal(400, messages.MCP_HTTP_NOT_JSON_RPC)
        session = self._post_session(request, parsed)
        if isinstance(session, Answer):
            return session
        session.last_used = anyio.current_time()
        session.withdrawn(parsed)
        if not any(message.is_request for message in parsed):
            await session.deliver(raws)
            if session.id is None:
                session.end_input()
            return Answer(202)
        open_streams = sum(1 for s in session.streams.values() if not s.closed)
        if open_streams >= MAX_STREAMS_PER_SESSION:
            return _refusal(
                429, messages.MCP_HTTP_TOO_MANY_STREAMS.format(limit=MAX_STREAMS_PER_SESSION)
            )
        stream = session.open_stream(parsed, sse)
        await session.deliver(raws)
        headers = [] if session.id is None else [(SESSION_HEADER, session.id)]
        if sse:
            return Answer(200, headers=headers, stream=stream)
        await stream.finished()
        return Answer(200, _json_body(request.body, stream), [*headers, ("Content-Type", JSON)])

    def _post_session(self, request: HttpRequest, parsed: list[Message]) -> Session | Answer:
        if request.header("mcp-session-id") is not None:
            return self._session(request)
        initialize = any(message.method == "initialize" for message in parsed)
        if initialize and len(self.sessions) >= MAX_SESSIONS:
            return _refusal(503, messages.MCP_HTTP_TOO_MANY_SESSIONS.format(limit=MAX_SESSIONS))
        session = Session(registered=initialize)
        if session.id is not None:
            self.sessions[session.id] = session
        self._group.start_soon(self._run, session)
        return session

    async def _run(self, session: Session) -> None:
        """The session's connection, until its input ends or the daemon stops it
        (shielded: a listener that stops taking requests lets it wind down)."""
        try:
            with anyio.CancelScope(shield=True):
                await self._serve_one(session.transport())
        finally:
            session.ended_connection()
            if session.id is not None:
                self.sessions.pop(session.id, None)

    def _get(self, request: HttpRequest, session: Session) -> Answer:
        if not request.accepts(SSE):
            return _refusal(406, messages.MCP_HTTP_ACCEPT)
        headers = [(SESSION_HEADER, session.id or "")]
        last = request.header("last-event-id")
        resumed = None if last is None else parse_event_id(last)
        if resumed is not None and resumed[0] in session.streams:
            return Answer(
                200, headers=headers, stream=session.streams[resumed[0]], after=resumed[1]
            )
        standalone = session.standalone
        if standalone is not None and not standalone.closed and standalone.consumers:
            return _refusal(409, messages.MCP_HTTP_STREAM_OPEN)
        if standalone is None or standalone.closed:
            standalone = session.open_standalone()
        return Answer(200, headers=headers, stream=standalone, idle=STANDALONE_IDLE_SECONDS)

    async def sweep(self) -> None:
        """Ends sessions idle past their bound, and stateless ones once answered."""
        while True:
            await anyio.sleep(SWEEP_SECONDS)
            now = anyio.current_time()
            for session in list(self.sessions.values()):
                if not session.busy and now - session.last_used > SESSION_IDLE_SECONDS:
                    _log.info(messages.MCP_HTTP_SESSION_IDLE)
                    session.end_input()


def _messages(body: bytes) -> tuple[list[bytes], list[Message]]:
    """Each message of a body (one, or a batch) as its bytes and as routing reads it."""
    if body.lstrip()[:1] == b"[":
        raws = [bytes(raw) for raw in msgspec.json.decode(body, type=list[msgspec.Raw])]
    else:
        raws = [bytes(msgspec.json.decode(body, type=msgspec.Raw))]
    if not raws:
        raise msgspec.DecodeError("an empty batch")
    return raws, [msgspec.json.decode(raw, type=Message) for raw in raws]


def _json_body(posted: bytes, stream: Stream) -> bytes:
    """The answers as one JSON body: an array for a batch, else the one answer."""
    answers = [data for _seq, data in stream.snapshot()]
    if posted.lstrip()[:1] == b"[":
        return b"[" + b",".join(answers) + b"]"
    return answers[-1] if answers else b""


def bind(address: ListenAddress) -> socket.socket:
    family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
    return socket.create_server((address.host, address.port), family=family, backlog=128)


async def listen(listener: McpHttpListener, serve_one: Serve) -> None:
    """Serve the listener's socket until cancelled; sessions under way wind down
    on their own (the daemon stops their connections)."""
    port = listener.sock.getsockname()[1]
    gate = Gate(listener.address, port, listener.token)
    served = OpenConnections(MAX_CONNECTIONS)
    sock_listener = await anyio.abc.SocketListener.from_socket(listener.sock)
    async with anyio.create_task_group() as sessions:
        endpoint = Endpoint(listener, serve_one, sessions)
        async with sock_listener, anyio.create_task_group() as connections:
            connections.start_soon(endpoint.sweep)
            log.announce(messages.DAEMON_LISTENING.format(path=listener.url(port)))
            while True:
                stream = await sock_listener.accept()
                scope = anyio.CancelScope()
                served.add(scope)
                connections.start_soon(_connection, stream, scope, served, gate, endpoint)


def _address(stream: anyio.abc.SocketStream, local: bool) -> tuple[str, int]:
    sock: socket.socket = stream.extra(anyio.abc.SocketAttribute.raw_socket)
    found = sock.getsockname() if local else sock.getpeername()
    return str(found[0]), int(found[1])


async def _peer(stream: anyio.abc.SocketStream, loopback: bool) -> Peer:
    host, port = _address(stream, local=False)
    if not loopback:
        return Peer(host, port, own=False)
    ours = _address(stream, local=True)
    peer_address, our_address = tcppeer.address(host, port), tcppeer.address(*ours)
    own = await anyio.to_thread.run_sync(tcppeer.own_unsandboxed, peer_address, our_address)
    return Peer(host, port, own)


async def _connection(
    stream: anyio.abc.SocketStream,
    scope: anyio.CancelScope,
    served: OpenConnections,
    gate: Gate,
    endpoint: Endpoint,
) -> None:
    """One TCP connection: its requests in turn, until one's answer ends it."""
    try:
        with scope:
            async with stream:
                peer = await _peer(stream, endpoint.loopback)
                reader = RequestReader(endpoint.max_body)
                while (request := await _next_request(stream, reader)) is not None:
                    refusal = await gate.refusal(request, peer)
                    if refusal is not None:
                        answer = _refusal(refusal.status, refusal.reason)
                        answer = msgspec.structs.replace(
                            answer, headers=[*answer.headers, *refusal.headers]
                        )
                    else:
                        answer = await endpoint.answer(request)
                    if not await _send(stream, answer, request.keep_alive):
                        return
    except HttpError as exc:
        await _send_quietly(stream, _refusal(exc.status, messages.HTTP_BAD_REQUEST))
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, OSError):
        pass  # the peer left
    finally:
        served.remove(scope)


async def _next_request(
    stream: anyio.abc.SocketStream, reader: RequestReader
) -> HttpRequest | None:
    """The next request, or None when the peer closes or waits too long between them."""
    with anyio.move_on_after(REQUEST_WAIT_SECONDS):
        while (request := reader.next_request()) is None:
            try:
                reader.feed(await stream.receive())
            except anyio.EndOfStream:
                return None
        return request
    return None


async def _send(stream: anyio.abc.SocketStream, answer: Answer, keep_alive: bool) -> bool:
    """Write the answer; whether the connection may carry another request."""
    if answer.stream is None:
        await stream.send(response(answer.status, answer.body, answer.headers, keep_alive))
        return keep_alive
    headers = [*answer.headers, ("Content-Type", SSE)]
    await stream.send(response_head(answer.status, headers, None, keep_alive=False))
    async with anyio.create_task_group() as group:
        group.start_soon(_until_gone, stream, group.cancel_scope)
        await _pump(stream, answer.stream, answer.after, answer.idle)
        group.cancel_scope.cancel()
    return False


async def _until_gone(io: anyio.abc.SocketStream, scope: anyio.CancelScope) -> None:
    """Ends the stream's response once its client closes the connection: a
    client gone is noticed at once, not at the next event (nothing more is
    read from a connection that holds a stream)."""
    try:
        while await io.receive():
            pass
    except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass
    scope.cancel()


async def _pump(io: anyio.abc.SocketStream, stream: Stream, after: int, idle: float | None) -> None:
    """The stream's events after `after`, as they come, until it ends (or, with
    `idle`, until that long passes with none)."""
    stream.consumers += 1
    try:
        await io.send(b"retry: " + str(RETRY_MS).encode() + b"\n\n")
        while True:
            events: list[tuple[int, bytes]] = []
            with anyio.move_on_after(idle if idle is not None else float("inf")):
                events = await stream.wait_after(after)
            if not events:
                return
            await io.send(b"".join(sse_event(stream.event_id(seq), data) for seq, data in events))
            after = events[-1][0]
    finally:
        stream.consumers -= 1


async def _send_quietly(stream: anyio.abc.SocketStream, answer: Answer) -> None:
    try:
        await stream.send(response(answer.status, answer.body, answer.headers, keep_alive=False))
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass
