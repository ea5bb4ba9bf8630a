"""What the Streamable HTTP listener answers, request by request (no socket here).

A POST carries messages: 202 when none is a request; else the answers, as one
JSON body or as an SSE stream that also carries what the server says about
those requests meanwhile. A GET opens the session's own stream, or resumes one
from `Last-Event-ID`; a DELETE ends the session. `initialize` starts a session
(`Mcp-Session-Id`), served as a socket's connection is; a POST with neither is
a stateless exchange on a connection of its own, ended once answered.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
import anyio.abc
import msgspec

from bashrpc.protocol import messages
from bashrpc.server import clock, log
from bashrpc.server.daemon import mcpheaders
from bashrpc.server.daemon.httpframe import JSON, SSE, HttpRequest
from bashrpc.server.daemon.mcpgate import error_body
from bashrpc.server.daemon.mcpsession import Message, Session, Stream, parse_event_id
from bashrpc.server.daemon.tenants import PRINCIPAL_PREFIX
from bashrpc.server.wire.transport import Transport

# Sessions, and stateless exchanges under way, each a connection of the daemon.
MAX_SESSIONS = 64
MAX_STREAMS_PER_SESSION = 32
# The server's own stream ends after this long with nothing to send; the client reopens it.
STANDALONE_IDLE_SECONDS = 300.0
# A session with no stream and no request this long ends (its connection as on EOF).
SESSION_IDLE_SECONDS = 1800.0
SWEEP_SECONDS = 5.0
SESSION_HEADER = "Mcp-Session-Id"
# The first revision whose clients take an event with no data (a priming event).
PRIMING_REVISION = "2025-11-25"

_log = log.get("http.mcp")

Serve = Callable[[Transport], Awaitable[None]]


class Answer(msgspec.Struct, frozen=True):
    """What a request gets: a whole response, or a stream's events."""

    status: int
    body: bytes = b""
    headers: list[tuple[str, str]] = []
    stream: Stream | None = None
    after: int = 0
    idle: float | None = None
    # Open the stream with an event that has an id and no data (SEP-1699), so a
    # client cut before the first real event can still resume it.
    prime: bool = False
    # Outside a session: the stream's requests are this session's to cancel
    # when its client leaves before their answers (`Session.abandon`).
    abandons: Session | None = None
    # A 2026-07-28 request: an answer that is an error with a status of its own
    # (`mcpheaders.answer_status`) goes as that status and JSON, not in a stream.
    stateless: bool = False
    # A resumed stream that ends without having given this GET an answer stays
    # open until this is set (or `idle` passes): an SSE client reconnects at
    # once a GET that ends without an answer, again and again.
    hold: anyio.Event | None = None


def primes(revision: str) -> bool:
    """Whether a client of `revision` takes a priming event (dates order as text)."""
    return revision >= PRIMING_REVISION


def refusal(status: int, text: str) -> Answer:
    return Answer(status, error_body(text), [("Content-Type", JSON)])


def header_refusal(request: HttpRequest, parsed: list[Message]) -> Answer | None:
    """A 400 for protocol headers the request may not carry (`mcpheaders`)."""
    error = mcpheaders.refusal(request, parsed)
    if error is None:
        return None
    return Answer(400, msgspec.json.encode(error), [("Content-Type", JSON)])


class Endpoint:
    """Every session of the listener, and what each method does."""

    def __init__(self, path: str, serve_one: Serve, sessions_group: anyio.abc.TaskGroup) -> None:
        self._path = path
        self._serve_one = serve_one
        self._group = sessions_group
        self.sessions: dict[str, Session] = {}
        self._running = 0
        self._none_running = anyio.Event()

    async def answer(self, request: HttpRequest, principal: str) -> Answer:
        """`principal`: who the gate let in; the tenant of requests outside a session."""
        if request.path != self._path:
            return refusal(404, messages.MCP_HTTP_NOT_FOUND.format(path=self._path))
        if request.method == "POST":
            return await self._post(request, principal)
        session = self._session(request)
        if isinstance(session, Answer):
            return session
        refused = header_refusal(request, [])
        if refused is not None:
            return refused
        session.last_used = clock.now()
        if request.method == "GET":
            return self._get(request, session)
        if request.method == "DELETE":
            session.end_input()
            return Answer(200)
        answer = refusal(405, messages.MCP_HTTP_METHOD)
        return msgspec.structs.replace(
            answer, headers=[*answer.headers, ("Allow", "GET, POST, DELETE")]
        )

    def _session(self, request: HttpRequest) -> Session | Answer:
        session_id = request.header("mcp-session-id")
        if session_id is None:
            return refusal(400, messages.MCP_HTTP_NO_SESSION)
        session = self.sessions.get(session_id)
        if session is None or session.ended:
            return refusal(404, messages.MCP_HTTP_UNKNOWN_SESSION)
        return session

    async def _post(self, request: HttpRequest, principal: str) -> Answer:
        content_type = (request.header("content-type") or "").split(";", 1)[0].strip().lower()
        if content_type != JSON:
            return refusal(415, messages.MCP_HTTP_CONTENT_TYPE)
        sse = request.accepts(SSE)
        if not sse and not request.accepts(JSON):
            return refusal(406, messages.MCP_HTTP_ACCEPT)
        try:
            raws, parsed = _messages(request.body)
        except msgspec.DecodeError:
            return refusal(400, messages.MCP_HTTP_NOT_JSON_RPC)
        session = self._post_session(request, parsed, principal)
        if isinstance(session, Answer):
            return session
        session.last_used = clock.now()
        session.withdrawn(parsed)
        if not any(message.is_request for message in parsed):
            await session.deliver(raws)
            if session.id is None:
                session.end_input()
            return Answer(202)
        open_streams = sum(1 for s in session.streams.values() if not s.closed)
        if open_streams >= MAX_STREAMS_PER_SESSION:
            return refusal(
                429, messages.MCP_HTTP_TOO_MANY_STREAMS.format(limit=MAX_STREAMS_PER_SESSION)
            )
        stream = session.open_stream(parsed, sse)
        await session.deliver(raws)
        headers = [] if session.id is None else [(SESSION_HEADER, session.id)]
        stateless = mcpheaders.stateless(parsed)
        if sse:
            revision = mcpheaders.revision(request.header(mcpheaders.HEADER), session.revision)
            abandons = session if session.id is None else None
            return Answer(
                200,
                headers=headers,
                stream=stream,
                prime=primes(revision),
                abandons=abandons,
                stateless=stateless,
            )
        await stream.finished()
        stream.delivered = True
        body = _json_body(request.body, stream)
        status = mcpheaders.answer_status(body) if stateless else 200
        return Answer(status, body, [*headers, ("Content-Type", JSON)])

    def _post_session(
        self, request: HttpRequest, parsed: list[Message], principal: str
    ) -> Session | Answer:
        """The session a POST goes to (a new one, unless it names one), or its refusal."""
        if request.header("mcp-session-id") is not None:
            found = self._session(request)
            if isinstance(found, Answer):
                return found
            return header_refusal(request, parsed) or found
        refused = header_refusal(request, parsed)
        if refused is not None:
            return refused
        if self._running >= MAX_SESSIONS:
            return refusal(503, messages.MCP_HTTP_TOO_MANY_SESSIONS.format(limit=MAX_SESSIONS))
        registered = any(message.method == "initialize" for message in parsed)
        session = Session(registered, owner=PRINCIPAL_PREFIX + principal)
        if session.id is not None:
            self.sessions[session.id] = session
        self._running += 1
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
            self._running -= 1
            if not self._running:
                self._none_running.set()
                self._none_running = anyio.Event()

    async def all_ended(self) -> None:
        """Once no session's connection runs."""
        while self._running:
            await self._none_running.wait()

    def _get(self, request: HttpRequest, session: Session) -> Answer:
        if not request.accepts(SSE):
            return refusal(406, messages.MCP_HTTP_ACCEPT)
        headers = [(SESSION_HEADER, session.id or "")]
        last = request.header("last-event-id")
        resumed = None if last is None else parse_event_id(last)
        if resumed is not None and resumed[0] in session.streams:
            return Answer(
                200,
                headers=headers,
                stream=session.streams[resumed[0]],
                after=resumed[1],
                idle=STANDALONE_IDLE_SECONDS,
                hold=session.gone,
            )
        standalone = session.standalone
        if standalone is not None and not standalone.closed and standalone.consumers:
            return refusal(409, messages.MCP_HTTP_STREAM_OPEN)
        if standalone is None or standalone.closed:
            standalone = session.open_standalone()
        return Answer(200, headers=headers, stream=standalone, idle=STANDALONE_IDLE_SECONDS)

    async def sweep(self) -> None:
        """Ends sessions idle past their bound (stateless ones end once answered)."""
        while True:
            await anyio.sleep(SWEEP_SECONDS)
            now = clock.now()
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
