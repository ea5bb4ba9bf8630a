"""The daemon's Streamable HTTP listener over raw HTTP: sessions, streams and
their resumption, the protocol version header, who may connect, what the
listener refuses. The official SDKs' clients run their script over it at every
revision in `test_mcp_sdk_eras.py`.
"""

from __future__ import annotations

import base64

# The forked client of another uid cannot import what it needs once it is that
# user (the interpreter's library may be unreadable to it): loaded here first.
import encodings.idna  # noqa: F401
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from bashrpc.protocol import messages
from tests.daemon import DaemonProcess
from tests.rpc import wait_until
from tests.websocket import WebSocketClient, listening_url, write_token

pytestmark = pytest.mark.slow

HANG_SECONDS = 60
LOOPBACK = "http://127.0.0.1:0/mcp"
TOKEN = "t0ken-for-the-http-listener"
NOBODY = 65534
SMALL_LINE_LIMIT = 64 * 1024
DAEMON = (sys.executable, "-m", "bashrpc", "daemon")
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
VERSION = "MCP-Protocol-Version"
UNSUPPORTED = -32022
MISMATCH = -32020


class HttpDaemon:
    def __init__(self, daemon: DaemonProcess) -> None:
        self.daemon = daemon
        self.url = listening_url(daemon, "http")


StartDaemon = Callable[..., HttpDaemon]


@pytest.fixture
def start_daemon(tmp_path: Path) -> Iterator[StartDaemon]:
    started: list[DaemonProcess] = []

    def start(*args: str) -> HttpDaemon:
        daemon = DaemonProcess("--listen", LOOPBACK, *args, tmp=tmp_path)
        started.append(daemon)
        return HttpDaemon(daemon)

    try:
        yield start
    finally:
        for daemon in started:
            daemon.kill()


def post(url: str, body: object, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """One POST as a plain HTTP client sends it; the status and the body."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.netloc, timeout=HANG_SECONDS)
    sent = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    connection.request("POST", parts.path, json.dumps(body), {**sent, **(headers or {})})
    answer = connection.getresponse()
    return answer.status, answer.read()


def post_as(uid: int, url: str, headers: dict[str, str]) -> int:
    """The status a POST of `initialize` gets from a process of `uid` (forked, so
    no interpreter needs to be readable by that user)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            status, _ = post(url, INITIALIZE, headers)
            os.write(write, str(status).encode())
        except BaseException as exc:  # what the parent is told instead of a status
            os.write(write, repr(exc).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as answer:
        status_text = answer.read()
    os.waitpid(pid, 0)
    assert status_text.isdigit(), status_text
    return int(status_text)


def test_a_session_ends_with_delete_and_is_then_unknown(start_daemon: StartDaemon) -> None:
    listener = start_daemon()
    parts = urlsplit(listener.url)
    connection = http.client.HTTPConnection(parts.netloc, timeout=HANG_SECONDS)
    connection.request(
        "POST",
        parts.path,
        json.dumps(INITIALIZE),
        {"Content-Type": "application/json", "Accept": "application/json"},
    )
    answer = connection.getresponse()
    assert (
        answer.status == 200
        and json.loads(answer.read())["result"]["serverInfo"]["name"] == "bashrpc"
    )
    session = answer.getheader("Mcp-Session-Id")
    assert session
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    headers = {"Mcp-Session-Id": session, "Accept": "application/json"}
    assert post(listener.url, ping, headers) == (200, b'{"jsonrpc":"2.0","id":2,"result":{}}')
    notification = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert post(listener.url, notification, headers) == (202, b"")
    connection.request("DELETE", parts.path, headers={"Mcp-Session-Id": session})
    deleted = connection.getresponse()
    deleted.read()
    assert deleted.status == 200
    assert wait_until(lambda: post(listener.url, ping, headers)[0] == 404)


def test_the_own_uid_needs_no_token_and_another_uid_needs_the_right_one(
    start_daemon: StartDaemon, tmp_path: Path
) -> None:
    if os.getuid() != 0:
        pytest.skip("a client of another uid needs root to start it")
    listener = start_daemon("--token-file", str(write_token(tmp_path, TOKEN)))
    assert post(listener.url, INITIALIZE)[0] == 200
    assert post_as(NOBODY, listener.url, {}) == 401
    assert post_as(NOBODY, listener.url, {"Authorization": f"Bearer {TOKEN}x"}) == 401
    assert post_as(NOBODY, listener.url, {"Authorization": f"Bearer {TOKEN}"}) == 200
    assert wait_until(lambda: messages.WS_WRONG_TOKEN in listener.daemon.stderr())
    assert TOKEN not in listener.daemon.stderr()


def test_without_a_token_only_the_own_uid_is_let_in(start_daemon: StartDaemon) -> None:
    if os.getuid() != 0:
        pytest.skip("a client of another uid needs root to start it")
    listener = start_daemon()
    assert post_as(NOBODY, listener.url, {"Authorization": f"Bearer {TOKEN}"}) == 403
    assert post(listener.url, INITIALIZE)[0] == 200


def test_a_rebinding_host_or_a_foreign_origin_is_refused(start_daemon: StartDaemon) -> None:
    listener = start_daemon()
    port = urlsplit(listener.url).port
    assert post(listener.url, INITIALIZE, {"Host": "evil.example"})[0] == 403
    assert post(listener.url, INITIALIZE, {"Origin": "http://evil.example"})[0] == 403
    assert post(listener.url, INITIALIZE, {"Origin": f"http://localhost:{port}"})[0] == 200


def test_a_non_loopback_listener_without_a_token_does_not_start(tmp_path: Path) -> None:
    run = subprocess.run(
        [*DAEMON, "--socket", str(tmp_path / "d" / "s"), "--listen", "http://0.0.0.0:0/mcp"],
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
    )
    assert run.returncode == 2
    assert (
        messages.MCP_HTTP_NO_TOKEN.format(url="http://0.0.0.0:0/mcp", host="0.0.0.0") in run.stderr
    )


def initialized_session(url: str, revision: str = "2025-06-18") -> str:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.netloc, timeout=HANG_SECONDS)
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    initialize = {**INITIALIZE, "params": {**INITIALIZE["params"], "protocolVersion": revision}}  # type: ignore[dict-item]
    connection.request("POST", parts.path, json.dumps(initialize), headers)
    answer = connection.getresponse()
    answer.read()
    session = answer.getheader("Mcp-Session-Id")
    assert answer.status == 200 and session
    return session


def sse_events(answer: http.client.HTTPResponse) -> Iterator[tuple[str | None, bytes]]:
    """Each event's id and data, as they come."""
    event_id, data = None, b""
    while line := answer.fp.readline():
        if line.startswith(b"id: "):
            event_id = line[4:].strip().decode()
        elif line.startswith(b"data: "):
            data = line[6:].strip()
        elif line == b"\n" and data:
            yield event_id, data
            event_id, data = None, b""


def streamed_call(
    url: str, session: str, call_id: int, command: str
) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    """A `bash` call POSTed with a progress token, answered as an SSE stream."""
    parts = urlsplit(url)
    call = {
        "jsonrpc": "2.0",
        "id": call_id,
        "method": "tools/call",
        "params": {
            "name": "bash",
            "arguments": {"command": command},
            "_meta": {"progressToken": "t"},
        },
    }
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Mcp-Session-Id": session,
    }
    connection = http.client.HTTPConnection(parts.netloc, timeout=HANG_SECONDS)
    connection.request("POST", parts.path, json.dumps(call), headers)
    answer = connection.getresponse()
    assert answer.getheader("Content-Type") == "text/event-stream"
    return connection, answer


def test_a_stream_lost_mid_call_resumes_from_its_last_event_id(start_daemon: StartDaemon) -> None:
    listener = start_daemon()
    session = initialized_session(listener.url)
    parts = urlsplit(listener.url)
    first, answer = streamed_call(listener.url, session, 2, "echo one; sleep 1; echo two")
    last_id, data = next(sse_events(answer))
    assert last_id is not None and b"notifications/progress" in data
    first.close()  # lost before the answer
    again = http.client.HTTPConnection(parts.netloc, timeout=HANG_SECONDS)
    resume = {"Accept": "text/event-stream", "Mcp-Session-Id": session, "Last-Event-ID": last_id}
    again.request("GET", parts.path, headers=resume)
    resumed = again.getresponse()
    assert resumed.status == 200
    events = list(sse_events(resumed))
    assert last_id not in [event_id for event_id, _ in events]
    final = json.loads(events[-1][1])
    assert final["id"] == 2 and final["result"]["content"][0]["text"] == "one\ntwo\n"


def test_a_sandboxed_process_of_the_own_uid_is_not_let_in_without_a_token(
    start_daemon: StartDaemon,
) -> None:
    bwrap, curl = shutil.which("bwrap"), shutil.which("curl")
    if bwrap is None or curl is None:
        pytest.skip("needs bwrap and curl")
    listener = start_daemon()
    port = urlsplit(listener.url).port
    argv = [curl, "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", listener.url]
    argv += ["-H", "Content-Type: application/json", "-H", "Accept: application/json"]
    argv += ["-H", f"Host: 127.0.0.1:{port}", "--data", json.dumps(INITIALIZE)]
    plain = subprocess.run(argv, capture_output=True, text=True, timeout=HANG_SECONDS)
    assert plain.stdout == "200"
    # The shape of every sandbox here: a pid namespace of its own, the network shared.
    sandbox = [bwrap, "--dev-bind", "/", "/", "--unshare-pid", "--proc", "/proc", "--"]
    confined = subprocess.run(
        [*sandbox, *argv], capture_output=True, text=True, timeout=HANG_SECONDS
    )
    assert confined.stdout == "403", confined.stderr


def test_a_body_over_the_bound_is_refused_and_the_listener_serves_on(
    start_daemon: StartDaemon,
) -> None:
    listener = start_daemon("--max-line-bytes", str(SMALL_LINE_LIMIT))
    huge = {**INITIALIZE, "padding": "x" * SMALL_LINE_LIMIT}
    status, body = post(listener.url, huge)
    assert status == 413 and messages.MCP_HTTP_TOO_BIG.encode() in body
    assert post(listener.url, INITIALIZE)[0] == 200


def test_one_daemon_serves_websocket_and_streamable_http_side_by_side(
    start_daemon: StartDaemon,
) -> None:
    listener = start_daemon("--listen", "ws://127.0.0.1:0", "--insecure-loopback")
    assert post(listener.url, INITIALIZE)[0] == 200
    client = WebSocketClient(listening_url(listener.daemon, "ws"))
    try:
        assert client.result("ping") is not None
    finally:
        client.close()


@pytest.mark.parametrize(
    ("revision", "primed"), [("2025-11-25", True), ("2025-06-18", False), ("2025-03-26", False)]
)
def test_a_client_of_2025_11_25_gets_a_priming_event_first(
    start_daemon: StartDaemon, revision: str, primed: bool
) -> None:
    listener = start_daemon()
    session = initialized_session(listener.url, revision)
    parts = urlsplit(listener.url)
    connection = http.client.HTTPConnection(parts.netloc, timeout=HANG_SECONDS)
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Mcp-Session-Id": session,
    }
    if revision >= "2025-06-18":  # the revisions whose clients send the header
        headers[VERSION] = revision
    ping = {"jsonrpc": "2.0", "id": 5, "method": "ping"}
    connection.request("POST", parts.path, json.dumps(ping), headers)
    answer = connection.getresponse()
    assert answer.status == 200
    first_event = b"".join(iter(lambda: answer.fp.readline(), b"\n"))
    assert (b"data: \n" in first_event and b"id: " in first_event) is primed
    assert b"retry: " in first_event


def test_a_draining_daemon_still_answers_a_running_call_on_its_stream(
    start_daemon: StartDaemon,
) -> None:
    listener = start_daemon("--drain-seconds", "20")
    session = initialized_session(listener.url)
    _, answer = streamed_call(listener.url, session, 3, "echo begun; sleep 2; echo done")
    events = sse_events(answer)
    assert b"notifications/progress" in next(events)[1]  # the command runs
    listener.daemon.proc.send_signal(signal.SIGTERM)
    final = json.loads(list(events)[-1][1])
    assert final["id"] == 3 and final["result"]["content"][0]["text"] == "begun\ndone\n"
    assert listener.daemon.proc.wait(HANG_SECONDS) == 0


def test_a_request_without_a_session_is_answered_on_a_connection_of_its_own(
    start_daemon: StartDaemon,
) -> None:
    listener = start_daemon()
    ping = {"jsonrpc": "2.0", "id": 9, "method": "ping"}
    parts = urlsplit(listener.url)
    connection = http.client.HTTPConnection(parts.netloc, timeout=HANG_SECONDS)
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    connection.request("POST", parts.path, json.dumps([ping]), headers)
    answer = connection.getresponse()
    assert answer.status == 200 and answer.getheader("Mcp-Session-Id") is None
    assert json.loads(answer.read()) == [{"jsonrpc": "2.0", "id": 9, "result": {}}]


def test_resuming_a_stream_that_ended_holds_the_get_open_until_the_session_ends(
    start_daemon: StartDaemon,
) -> None:
    """A client resumes a stream it lost whose requests are answered or cancelled:
    it gets what came after its last event, and the GET stays open (an SSE client
    reconnects a GET that ends, and would ask again and again)."""
    listener = start_daemon()
    session = initialized_session(listener.url)
    first, answer = streamed_call(listener.url, session, 4, "echo one; sleep 60")
    last_id, _ = next(sse_events(answer))
    assert last_id is not None
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 4}}
    assert post(listener.url, cancel, {"Mcp-Session-Id": session})[0] == 202
    first.close()
    parts = urlsplit(listener.url)
    again = http.client.HTTPConnection(parts.netloc, timeout=3)
    resume = {"Accept": "text/event-stream", "Mcp-Session-Id": session, "Last-Event-ID": last_id}
    again.request("GET", parts.path, headers=resume)
    resumed = again.getresponse()
    assert resumed.status == 200
    with pytest.raises(TimeoutError):
        list(sse_events(resumed))  # held open, nothing more to say
    ender = http.client.HTTPConnection(parts.netloc, timeout=HANG_SECONDS)
    ender.request("DELETE", parts.path, headers={"Mcp-Session-Id": session})
    assert ender.getresponse().status == 200


def test_a_session_holds_a_bounded_number_of_open_streams(start_daemon: StartDaemon) -> None:
    from bashrpc.server.daemon.mcpendpoint import MAX_STREAMS_PER_SESSION

    listener = start_daemon()
    session = initialized_session(listener.url)
    held = [
        streamed_call(listener.url, session, 100 + n, "sleep 60")
        for n in range(MAX_STREAMS_PER_SESSION)
    ]
    try:
        status, body = post(
            listener.url, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"Mcp-Session-Id": session}
        )
        assert status == 429, body
        assert str(MAX_STREAMS_PER_SESSION).encode() in body
    finally:
        for connection, _ in held:
            connection.close()
        ender = http.client.HTTPConnection(urlsplit(listener.url).netloc, timeout=HANG_SECONDS)
        ender.request("DELETE", urlsplit(listener.url).path, headers={"Mcp-Session-Id": session})
        assert ender.getresponse().status == 200


def version_error(url: str, body: object, headers: dict[str, str]) -> tuple[int, int | None]:
    """The status a POST gets, and the JSON-RPC error code of its body when it has one."""
    status, answer = post(url, body, {"Accept": "application/json", **headers})
    decoded = json.loads(answer) if answer else None
    error = decoded.get("error") if isinstance(decoded, dict) else None
    return status, None if error is None else error["code"]


def test_the_protocol_version_header_must_be_a_revision_served(
    start_daemon: StartDaemon,
) -> None:
    """A session's requests name a revision served, or none (the negotiated one
    holds); an unknown one is a 400, in a session or before one."""
    listener = start_daemon()
    session = initialized_session(listener.url)
    ping = {"jsonrpc": "2.0", "id": 3, "method": "ping"}
    in_session = {"Mcp-Session-Id": session}
    assert version_error(listener.url, ping, in_session)[0] == 200
    assert version_error(listener.url, ping, {**in_session, VERSION: "2025-06-18"})[0] == 200
    for wrong in ("2099-01-01", "not-a-version", "2000-01-01"):
        for headers in (in_session, {}):
            assert version_error(listener.url, ping, {**headers, VERSION: wrong}) == (
                400,
                UNSUPPORTED,
            )
    # Served, if not the one this session settled: let through (the conformance
    # suite sends one).
    assert version_error(listener.url, ping, {**in_session, VERSION: "2025-03-26"})[0] == 200
    parts = urlsplit(listener.url)
    connection = http.client.HTTPConnection(parts.netloc, timeout=HANG_SECONDS)
    stream = {**in_session, "Accept": "text/event-stream", VERSION: "2099-01-01"}
    connection.request("GET", parts.path, headers=stream)
    assert connection.getresponse().status == 400


def test_a_2026_request_names_its_revision_in_the_header_as_in_its_meta(
    start_daemon: StartDaemon,
) -> None:
    listener = start_daemon()
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    listing = {"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {"_meta": meta}}
    mirrored = {VERSION: "2026-07-28", "Mcp-Method": "tools/list"}
    assert version_error(listener.url, listing, mirrored)[0] == 200
    assert version_error(listener.url, listing, {**mirrored, VERSION: "2025-11-25"}) == (
        400,
        MISMATCH,
    )
    assert version_error(listener.url, listing, {"Mcp-Method": "tools/list"}) == (400, MISMATCH)
    # The method and the name the body carries are mirrored in headers too.
    assert version_error(listener.url, listing, {VERSION: "2026-07-28"}) == (400, MISMATCH)
    call = {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "tools/call",
        "params": {"name": "bash", "arguments": {"command": "echo hi"}, "_meta": meta},
    }
    calling = {VERSION: "2026-07-28", "Mcp-Method": "tools/call"}
    assert version_error(listener.url, call, {**calling, "Mcp-Name": "bash"})[0] == 200
    encoded = "=?base64?" + base64.b64encode(b"bash").decode() + "?="
    assert version_error(listener.url, call, {**calling, "Mcp-Name": encoded})[0] == 200
    assert version_error(listener.url, call, {**calling, "Mcp-Name": "python"}) == (400, MISMATCH)
    assert version_error(listener.url, call, calling) == (400, MISMATCH)


@pytest.mark.parametrize("accept", ["application/json", "application/json, text/event-stream"])
def test_a_2026_request_for_a_method_not_served_is_a_404(
    start_daemon: StartDaemon, accept: str
) -> None:
    """2026-07-28 over HTTP: a method the server does not implement is 404 with
    -32601 (so a client tells it from a legacy server's 404), as JSON even to a
    client that takes SSE; a method served is answered as before."""
    listener = start_daemon()
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    for method, status in (("ping", 404), ("no/such", 404), ("tools/list", 200)):
        body = {"jsonrpc": "2.0", "id": 6, "method": method, "params": {"_meta": meta}}
        headers = {VERSION: "2026-07-28", "Mcp-Method": method, "Accept": accept}
        answered, answer = post(listener.url, body, headers)
        assert answered == status, answer
        if status == 404:
            assert json.loads(answer)["error"]["code"] == -32601
