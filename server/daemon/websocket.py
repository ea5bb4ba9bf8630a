"""The daemon's optional WebSocket listener (`--listen ws://HOST:PORT`).

Each upgraded connection is served by the daemon as a socket connection is:
its own `Connection`, its own `initialize`, tenants by `clientId`. The gate
runs before the upgrade: a request with an `Origin` header (a browser) gets
403, one without the bearer token 401, and each refusal is logged with the
peer's address and the reason, never the token. A peer's wrong tokens slow
its next attempts, and refusals are logged within a budget (`wsthrottle`).
The library's limits stay: a message over `max_size` (the server's
`max_line_bytes`) closes the connection with 1009; at most `max_queue`
frames wait unread before it stops reading the socket; `send` waits above
`write_limit`; pings every 20 s. permessage-deflate is off: 0.1 MiB on the
wire would otherwise become a 15 MiB message in memory, and a frame marked
compressed is a protocol error (1002), never inflated.
TLS is not here: a router or a sidecar terminates it.
"""

from __future__ import annotations

import asyncio
import http
import logging
import socket
from collections.abc import Awaitable, Callable

import anyio
import msgspec
from websockets.asyncio.server import ServerConnection, serve
from websockets.frames import CloseCode
from websockets.http11 import Request, Response

from bashrpc.protocol import messages
from bashrpc.server import clock, log
from bashrpc.server.daemon.wsconfig import ListenAddress, bearer_refusal
from bashrpc.server.daemon.wsthrottle import LogBudget, Slowdown
from bashrpc.server.wire.transport import Transport
from bashrpc.server.wire.wstransport import websocket_transport

# How long a stopping daemon waits for its WebSocket connections' handlers.
CLOSE_BOUND_SECONDS = 30.0
LISTEN_BACKLOG = 128
AUTHENTICATE = 'Bearer realm="bashrpc"'

_log = log.get("websocket")
# The library's own log says every open and close at INFO; its warnings are enough.
_library_log = log.get("websocket.library")

Serve = Callable[[Transport], Awaitable[None]]


class WebSocketListener(msgspec.Struct, frozen=True):
    address: ListenAddress
    sock: socket.socket
    token: str | None
    max_size: int


def bind(address: ListenAddress) -> socket.socket:
    """The listening socket, bound before the daemon starts: a port in use is a
    plain error, and port 0 has its real number to log."""
    family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
    return socket.create_server((address.host, address.port), family=family, backlog=LISTEN_BACKLOG)


def _peer(connection: ServerConnection) -> str:
    try:
        host, port = connection.remote_address[:2]
    except (TypeError, ValueError):
        return "an unknown peer"
    return f"{host}:{port}"


def _host(connection: ServerConnection) -> str:
    """The peer's address without its port: what its wrong tokens are counted by."""
    try:
        return str(connection.remote_address[0])
    except (TypeError, IndexError):
        return ""


class Gate:
    """Before the upgrade: no browser, and only the token's holder (when there
    is a token), each peer's attempts slowed by its wrong tokens."""

    def __init__(self, token: str | None) -> None:
        self._token = token
        self._slowdown = Slowdown()
        self._log_budget = LogBudget()

    async def __call__(self, connection: ServerConnection, request: Request) -> Response | None:
        origin = request.headers.get_all("Origin")
        if origin:
            reason = messages.WS_FROM_BROWSER.format(origin=", ".join(origin))
            return self._refuse(connection, http.HTTPStatus.FORBIDDEN, reason)
        if self._token is None:
            return None
        host = _host(connection)
        turn = self._slowdown.turn(host, clock.now())
        if turn is None:
            reason = messages.WS_TOO_MANY_WRONG
            return self._refuse(connection, http.HTTPStatus.TOO_MANY_REQUESTS, reason)
        await asyncio.sleep(max(0.0, turn - clock.now()))
        refusal = bearer_refusal(request.headers.get_all("Authorization"), self._token)
        if refusal is None:
            return None
        self._slowdown.failed(host, clock.now())
        response = self._refuse(connection, http.HTTPStatus.UNAUTHORIZED, refusal)
        response.headers["WWW-Authenticate"] = AUTHENTICATE
        return response

    def _refuse(
        self, connection: ServerConnection, status: http.HTTPStatus, reason: str
    ) -> Response:
        left_out = self._log_budget.take(clock.now())
        if left_out is not None:
            line = messages.WS_REFUSED.format(peer=_peer(connection), reason=reason)
            if left_out:
                line += messages.WS_REFUSALS_LEFT_OUT.format(count=left_out)
            _log.warning(line)
        return connection.respond(status, reason + "\n")


async def listen(listener: WebSocketListener, serve_one: Serve) -> None:
    """Serve upgraded connections through `serve_one` until cancelled; then stop
    taking new ones and wait (bounded) for those under way to wind down."""

    async def handler(websocket: ServerConnection) -> None:
        await serve_one(websocket_transport(websocket))
        sent = websocket.protocol.close_sent
        if sent is not None and sent.code == CloseCode.MESSAGE_TOO_BIG:
            peer = _peer(websocket)
            _log.warning(messages.WS_TOO_BIG.format(peer=peer, limit=listener.max_size))

    if _library_log.getEffectiveLevel() < logging.WARNING:
        _library_log.setLevel(logging.WARNING)
    server = await serve(
        handler,
        sock=listener.sock,
        process_request=Gate(listener.token),
        max_size=listener.max_size,
        compression=None,
        logger=_library_log,
    )
    port = listener.sock.getsockname()[1]
    # Port 0 lets the system choose: only this line tells which it chose.
    log.announce(messages.DAEMON_LISTENING.format(path=listener.address.url(port)))
    try:
        await anyio.sleep_forever()
    finally:
        with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_BOUND_SECONDS):
            # Each connection is told to stop by the daemon, and ends as on EOF.
            server.close(close_connections=False)
            await server.wait_closed()
