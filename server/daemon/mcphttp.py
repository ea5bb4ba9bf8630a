"""The daemon's Streamable HTTP listener (`--listen http://HOST:PORT/PATH`):
MCP's remote transport on one path, the socket loop.

The gate (`mcpgate`) reads every request's head before a byte of its body is
kept. The parsing is `httpframe`'s, what each request gets `mcpendpoint`'s and
the routing `mcpsession`'s; this module only moves bytes. Bounded: a
request's body (`--max-line-bytes`), connections, sessions, each session's
open streams, and a GET stream or session that stays idle.
"""

from __future__ import annotations

import socket

import anyio
import anyio.abc
import msgspec

from bashrpc.protocol import messages
from bashrpc.server import log
from bashrpc.server.daemon import mcpheaders, tcppeer
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
from bashrpc.server.daemon.mcpendpoint import Answer, Endpoint, Serve, refusal
from bashrpc.server.daemon.mcpgate import Gate, Peer
from bashrpc.server.daemon.mcpsession import Stream
from bashrpc.server.daemon.wsconfig import ListenAddress
from bashrpc.server.observe.httpwire import HttpError

MAX_CONNECTIONS = 256
# How long a stopping listener waits for the daemon to end its sessions.
CLOSE_BOUND_SECONDS = 30.0
# A keep-alive connection that sends no request this long is closed.
REQUEST_WAIT_SECONDS = 60.0
# How long a refused connection's unread bytes are read and dropped before the close.
LINGER_SECONDS = 2.0
RETRY_MS = 1000
# How long a 2026-07-28 request's response head waits for its first event, to
# tell an error with a status of its own (404, 400) from an answer that streams.
FIRST_EVENT_WAIT_SECONDS = 5.0
HTTP_ERRORS = {
    411: messages.MCP_HTTP_CHUNKED,
    413: messages.MCP_HTTP_TOO_BIG,
    431: messages.HTTP_TOO_BIG,
}


class McpHttpListener(msgspec.Struct, frozen=True):
    address: ListenAddress
    path: str
    sock: socket.socket
    token: str | None
    max_body: int

    def url(self, port: int) -> str:
        host = f"[{self.address.host}]" if ":" in self.address.host else self.address.host
        return f"http://{host}:{port}{self.path}"


def bind(address: ListenAddress) -> socket.socket:
    family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
    return socket.create_server((address.host, address.port), family=family, backlog=128)


async def listen(listener: McpHttpListener, serve_one: Serve) -> None:
    """Serve the listener's socket until cancelled; then take no new connection,
    and let those open go on (bounded) until the daemon has stopped every
    session, so a draining daemon's answers still reach their clients."""
    port = listener.sock.getsockname()[1]
    gate = Gate(listener.address, port, listener.token)
    served = OpenConnections(MAX_CONNECTIONS)
    sock_listener = await anyio.abc.SocketListener.from_socket(listener.sock)
    async with anyio.create_task_group() as sessions:
        endpoint = Endpoint(listener.path, serve_one, sessions)
        async with anyio.create_task_group() as connections:
            try:
                async with sock_listener:
                    connections.start_soon(endpoint.sweep)
                    log.announce(messages.DAEMON_LISTENING.format(path=listener.url(port)))
                    while True:
                        stream = await sock_listener.accept()
                        scope = anyio.CancelScope()
                        served.add(scope)
                        connections.start_soon(
                            _connection, stream, scope, served, gate, endpoint, listener
                        )
            finally:
                with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_BOUND_SECONDS):
                    await endpoint.all_ended()
                served.cancel_all()


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
    listener: McpHttpListener,
) -> None:
    """One TCP connection, until it ends; a request refused, or bytes that can't
    be one, are answered with their status before the close."""
    try:
        # Shielded from the listener's end (see `listen`); its own scope drops it.
        with anyio.CancelScope(shield=True), scope:
            async with stream:
                try:
                    answer = await _requests(stream, gate, endpoint, listener)
                except HttpError as exc:
                    text = HTTP_ERRORS.get(exc.status, messages.HTTP_BAD_REQUEST)
                    answer = refusal(exc.status, text)
                if answer is not None:
                    await _send_quietly(stream, answer)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, OSError):
        pass  # the peer left
    finally:
        served.remove(scope)


async def _requests(
    stream: anyio.abc.SocketStream, gate: Gate, endpoint: Endpoint, listener: McpHttpListener
) -> Answer | None:
    """The connection's requests in turn, each head through the gate before its
    body is read; the refusal that ends the connection, if one does."""
    peer = await _peer(stream, listener.address.loopback)
    reader = RequestReader(listener.max_body)
    while (head := await _read(stream, reader, head_only=True)) is not None:
        refused = await gate.refusal(head, peer)
        if refused is not None:
            answer = refusal(refused.status, refused.reason)
            return msgspec.structs.replace(answer, headers=[*answer.headers, *refused.headers])
        request = await _read(stream, reader, head_only=False)
        if request is None:
            return None
        answer = await endpoint.answer(request, peer.principal)
        if not await _send(stream, answer, request.keep_alive):
            return None
    return None


async def _read(
    stream: anyio.abc.SocketStream, reader: RequestReader, head_only: bool
) -> HttpRequest | None:
    """The next request's head (`head_only`) or the whole request, once come;
    None when the peer closes, or waits too long."""
    ready = reader.next_head if head_only else reader.next_request
    with anyio.move_on_after(REQUEST_WAIT_SECONDS):
        while (found := ready()) is None:
            try:
                reader.feed(await stream.receive())
            except anyio.EndOfStream:
                return None
        return found
    return None


async def _send(stream: anyio.abc.SocketStream, answer: Answer, keep_alive: bool) -> bool:
    """Write the answer; whether the connection may carry another request."""
    if answer.stream is None:
        await stream.send(response(answer.status, answer.body, answer.headers, keep_alive))
        return keep_alive
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(_until_gone, stream, group.cancel_scope)
            refused = await _refused_at_once(answer) if answer.stateless else None
            if refused is not None:
                headers = [*answer.headers, ("Content-Type", JSON)]
                await stream.send(response(refused[0], refused[1], headers, keep_alive=False))
            else:
                headers = [*answer.headers, ("Content-Type", SSE)]
                await stream.send(response_head(answer.status, headers, None, keep_alive=False))
                await _pump(stream, answer.stream, answer)
            group.cancel_scope.cancel()
    finally:
        if answer.abandons is not None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_BOUND_SECONDS):
                await answer.abandons.abandon(answer.stream)
    return False


async def _refused_at_once(answer: Answer) -> tuple[int, bytes] | None:
    """A 2026-07-28 request's status and answer when its only event is an error
    with a status of its own (a method not served: 404); None: it streams.
    Waits for the stream's first event before any byte of the response, a
    moment only: an error is answered at once, and a quiet call's client must
    not wait long for its response head."""
    assert answer.stream is not None
    events: list[tuple[int, bytes]] = []
    with anyio.move_on_after(FIRST_EVENT_WAIT_SECONDS):
        events = await answer.stream.wait_after(0)
    if len(events) != 1 or not answer.stream.closed:
        return None
    status = mcpheaders.answer_status(events[0][1])
    if status == 200:
        return None
    answer.stream.delivered = True
    return status, events[0][1]


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


async def _pump(io: anyio.abc.SocketStream, stream: Stream, answer: Answer) -> None:
    """The stream's events after `answer.after`, as they come, until it ends (or,
    with `answer.idle`, until that long passes with none)."""
    after, answered = answer.after, False
    stream.consumers += 1
    try:
        retry = f"retry: {RETRY_MS}\n".encode()
        primer = f"id: {stream.event_id(after)}\ndata: \n".encode() if answer.prime else b""
        await io.send(primer + retry + b"\n")
        while True:
            events: list[tuple[int, bytes]] = []
            with anyio.move_on_after(_seconds(answer.idle)):
                events = await stream.wait_after(after)
            if not events:
                stream.delivered = stream.closed
                if answer.hold is not None and stream.closed and not answered:
                    with anyio.move_on_after(_seconds(answer.idle)):
                        await answer.hold.wait()
                return
            await io.send(b"".join(sse_event(stream.event_id(seq), data) for seq, data in events))
            after = events[-1][0]
            answered = answered or any(seq in stream.answers for seq, _ in events)
    finally:
        stream.consumers -= 1


def _seconds(idle: float | None) -> float:
    return float("inf") if idle is None else idle


async def _send_quietly(stream: anyio.abc.SocketStream, answer: Answer) -> None:
    """The answer to what could not be read, then a lingering close: what the
    peer still sends is read and dropped a moment, so the close does not reset
    the connection (and lose the answer) over unread bytes."""
    try:
        await stream.send(response(answer.status, answer.body, answer.headers, keep_alive=False))
        await stream.send_eof()
        with anyio.move_on_after(LINGER_SECONDS):
            while await stream.receive():
                pass
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, OSError):
        pass
