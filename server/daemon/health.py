"""The daemon's HTTP probes and metrics (`bashrpc daemon --http HOST:PORT`).

`/livez` is answered by the event loop itself, so an answer proves it turns.
`/readyz` (and `/v1/health`, agent-sandbox's name) says 503 with its reasons
while the daemon drains or stops, when its configured sandbox cannot start,
or while the rc capture fails. `/metrics` is the Prometheus text of the same
figures as `server/stats` (the `metrics` extra).

A port of its own, not the WebSocket listener's: a probe never passes the
upgrade path, and each listener's rules stay separate. Loopback by default;
any other address needs the token (`--token-file`), compared in constant
time, for every path, unless `--http-open-probes` lets the kubelet's
`httpGet` (which cannot send a secret) read `/livez` and `/readyz`: those
carry only fixed words, never an id, a command, a path or a figure.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from urllib.parse import urlsplit

import anyio
import anyio.abc
import msgspec

from bashrpc.protocol import messages
from bashrpc.protocol.health import HttpProblem, Liveness, Readiness
from bashrpc.protocol.methods import ServerStatsResult
from bashrpc.server import log
from bashrpc.server.daemon.wsconfig import ListenAddress, ListenError, bearer_refusal, ip_host
from bashrpc.server.observe import httpwire, prometheus
from bashrpc.server.observe.httpwire import HttpError, Request

# A probe sends its head at once; a peer that dawdles longer is dropped.
HEAD_TIMEOUT_SECONDS = 5.0
# Connections served at once. Past it, a new one closes the one that has been there
# longest: a flood of peers that send nothing holds a bounded set (no task, no fd
# more), and a probe, which sends its head at once, is answered before its turn comes.
MAX_CONNECTIONS = 128
# A wrong token is answered this late: guesses cost the guesser time.
REFUSAL_DELAY_SECONDS = 0.25
PROBE_PATHS = ("/livez", "/readyz", "/v1/health")
JSON = "application/json"

_log = log.get("http")


def parse_address(text: str) -> ListenAddress:
    """`HOST:PORT`, HOST an IP address (IPv6 in brackets) or `localhost`."""
    bad = ListenError(messages.HTTP_BAD_ADDRESS.format(address=text))
    try:
        parts = urlsplit("//" + text)
        port, host = parts.port, parts.hostname
    except ValueError:
        raise bad from None
    if host is None or port is None or parts.path or parts.query or parts.username:
        raise bad
    return ListenAddress(ip_host(host, bad), port)


def check_start(address: ListenAddress, token: str | None, open_probes: bool) -> None:
    if not address.loopback and token is None:
        raise ListenError(messages.HTTP_NO_TOKEN.format(host=address.host))
    if open_probes and (address.loopback or token is None):
        raise ListenError(messages.HTTP_PROBES_OPEN_LOOPBACK)


def bind(address: ListenAddress) -> socket.socket:
    family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
    return socket.create_server((address.host, address.port), family=family, backlog=64)


class HttpListener(msgspec.Struct, frozen=True):
    """`--http`, bound before the daemon starts."""

    sock: socket.socket
    token: str | None
    open_probes: bool


class Probes:
    """What each path answers (no I/O of its own)."""

    def __init__(
        self,
        token: str | None,
        open_probes: bool,
        readiness: Callable[[], Readiness],
        figures: Callable[[], ServerStatsResult],
    ) -> None:
        self._token = token
        self._open_probes = open_probes
        self._readiness = readiness
        self._figures = figures

    def refusal(self, request: Request) -> str | None:
        """Why the request may not be answered; None: it may."""
        if self._token is None or (self._open_probes and request.path in PROBE_PATHS):
            return None
        return bearer_refusal(request.headers.get("authorization", []), self._token)

    def answer(self, request: Request) -> bytes:
        head_only = request.method == "HEAD"
        if request.method not in ("GET", "HEAD"):
            return _problem(405, messages.HTTP_METHOD)
        if request.path == "/livez":
            body = msgspec.json.encode(Liveness(live=True))
            return httpwire.response(200, body, JSON, head_only=head_only)
        if request.path in ("/readyz", "/v1/health"):
            readiness = self._readiness()
            status = 200 if readiness.ready else 503
            body = msgspec.json.encode(readiness)
            return httpwire.response(status, body, JSON, head_only=head_only)
        if request.path == "/metrics":
            if not prometheus.available():
                return _problem(501, messages.HTTP_NO_METRICS)
            body = prometheus.render(self._figures)
            return httpwire.response(200, body, prometheus.CONTENT_TYPE, head_only=head_only)
        return _problem(404, messages.HTTP_NOT_FOUND)


def _problem(status: int, text: str) -> bytes:
    return httpwire.response(status, msgspec.json.encode(HttpProblem(error=text)), JSON)


async def serve_http(sock: socket.socket, probes: Probes) -> None:
    """Answer probes on `sock` until cancelled: one request per connection."""
    listener = await anyio.abc.SocketListener.from_socket(sock)
    served = OpenConnections(MAX_CONNECTIONS)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    _log.info(messages.HTTP_LISTENING.format(address=shown))
    async with listener, anyio.create_task_group() as connections:
        while True:
            stream = await listener.accept()
            scope = anyio.CancelScope()
            served.add(scope)
            connections.start_soon(_one, stream, scope, served, probes)


class OpenConnections:
    """The connections being served, oldest first, each by the scope that drops
    it: past the bound, a new one drops the one that has been there longest."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._scopes: dict[anyio.CancelScope, None] = {}

    def add(self, scope: anyio.CancelScope) -> None:
        if len(self._scopes) >= self._limit:
            oldest = next(iter(self._scopes))
            self.remove(oldest)
            oldest.cancel()
        self._scopes[scope] = None

    def remove(self, scope: anyio.CancelScope) -> None:
        self._scopes.pop(scope, None)


async def _one(
    stream: anyio.abc.SocketStream,
    scope: anyio.CancelScope,
    served: OpenConnections,
    probes: Probes,
) -> None:
    try:
        with scope:
            async with stream:
                await stream.send(await _respond(stream, probes))
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass  # the peer left: nothing to answer
    finally:
        served.remove(scope)


async def _respond(stream: anyio.abc.SocketStream, probes: Probes) -> bytes:
    """The answer to the head `stream` sends: read whole (bounded in size and
    time) before anything else, then answered at once, with no place to wait
    for: every answer is computed on the loop."""
    data = b""
    try:
        with anyio.fail_after(HEAD_TIMEOUT_SECONDS):
            while not httpwire.head_complete(data):
                data += await stream.receive(httpwire.MAX_HEAD_BYTES - len(data))
        request = httpwire.parse(data)
    except HttpError as exc:
        text = messages.HTTP_TOO_BIG if exc.status == 431 else messages.HTTP_BAD_REQUEST
        return _problem(exc.status, text)
    except (TimeoutError, anyio.EndOfStream):
        return _problem(400, messages.HTTP_BAD_REQUEST)
    if probes.refusal(request) is not None:
        await anyio.sleep(REFUSAL_DELAY_SECONDS)
        return _problem(401, messages.HTTP_UNAUTHORIZED)
    return probes.answer(request)
