"""Who may use the Streamable HTTP listener, asked of every request.

Against DNS rebinding (a web page whose name resolves to 127.0.0.1): on a
loopback address the `Host` must name loopback and the listener's port, and
an `Origin`, when sent, must be such a host too; elsewhere no `Origin` is let
in at all (no browser, as on the WebSocket listener). Then the peer: on
loopback, a process of the daemon's own uid outside every sandbox (the
kernel's socket table says so, `tcppeer`) needs no token; anyone else needs
the bearer token (the WebSocket listener's rule, constant time, each peer's
wrong tokens slowing its next attempts).
"""

from __future__ import annotations

import anyio
import msgspec

from bashrpc.protocol import messages
from bashrpc.protocol.envelope import error_response
from bashrpc.protocol.errors import ErrorCode
from bashrpc.server import clock, log
from bashrpc.server.daemon.httpframe import HttpRequest
from bashrpc.server.daemon.wsconfig import ListenAddress, bearer_refusal
from bashrpc.server.daemon.wsthrottle import LogBudget, Slowdown

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
AUTHENTICATE = 'Bearer realm="bashrpc"'

_log = log.get("http.mcp")


class Peer(msgspec.Struct, frozen=True):
    """A TCP connection's other end: its address, and whether the kernel says it
    runs under our uid outside every sandbox (loopback only)."""

    host: str
    port: int
    own: bool

    @property
    def principal(self) -> str:
        """Who it is once let in: the daemon's own uid, or the token's holder."""
        return "own-uid" if self.own else "token"


class Refusal(msgspec.Struct, frozen=True):
    status: int
    reason: str
    headers: list[tuple[str, str]] = []


def error_body(text: str) -> bytes:
    return msgspec.json.encode(error_response(ErrorCode.INVALID_REQUEST, text))


def allowed_hosts(address: ListenAddress, port: int) -> frozenset[str]:
    """The `Host` values a loopback listener answers to: each loopback name,
    with its port or without."""
    own = f"[{address.host}]" if ":" in address.host else address.host
    names = {*LOOPBACK_NAMES, own}
    return frozenset({*names, *(f"{name}:{port}" for name in names)})


def rebinding(request: HttpRequest, address: ListenAddress, hosts: frozenset[str]) -> str | None:
    """Why the request's `Host` or `Origin` could come from a web page; None: it can't."""
    origins = request.headers.get("origin", [])
    if not address.loopback:
        return messages.WS_FROM_BROWSER.format(origin=", ".join(origins)) if origins else None
    host = request.header("host")
    if host is None or host.lower() not in hosts:
        return messages.MCP_HTTP_BAD_HOST.format(host=host)
    for origin in origins:
        scheme, sep, rest = origin.lower().partition("://")
        if not sep or scheme not in ("http", "https") or rest.rstrip("/") not in hosts:
            return messages.MCP_HTTP_BAD_ORIGIN.format(origin=origin)
    return None


class Gate:
    def __init__(self, address: ListenAddress, port: int, token: str | None) -> None:
        self._address = address
        self._hosts = allowed_hosts(address, port)
        self._token = token
        self._slowdown = Slowdown()
        self._log_budget = LogBudget()

    async def refusal(self, request: HttpRequest, peer: Peer) -> Refusal | None:
        reason = rebinding(request, self._address, self._hosts)
        if reason is not None:
            return self._refuse(peer, Refusal(403, reason))
        if peer.own:
            return None
        if self._token is None:
            return self._refuse(peer, Refusal(403, messages.MCP_HTTP_NOT_OWN))
        now = clock.now()
        turn = self._slowdown.turn(peer.host, now)
        if turn is None:
            return self._refuse(peer, Refusal(429, messages.WS_TOO_MANY_WRONG))
        await anyio.sleep(max(0.0, turn - now))
        wrong = bearer_refusal(request.headers.get("authorization", []), self._token)
        if wrong is None:
            return None
        self._slowdown.failed(peer.host, clock.now())
        return self._refuse(peer, Refusal(401, wrong, [("WWW-Authenticate", AUTHENTICATE)]))

    def _refuse(self, peer: Peer, refusal: Refusal) -> Refusal:
        left_out = self._log_budget.take(clock.now())
        if left_out is not None:
            shown = f"[{peer.host}]:{peer.port}" if ":" in peer.host else f"{peer.host}:{peer.port}"
            line = messages.MCP_HTTP_REFUSED.format(peer=shown, reason=refusal.reason)
            if left_out:
                line += messages.WS_REFUSALS_LEFT_OUT.format(count=left_out)
            _log.warning(line)
        return refusal
