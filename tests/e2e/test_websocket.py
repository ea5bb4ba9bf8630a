"""The daemon's WebSocket listener, against a real `websockets` client on loopback:
the token, its refusals and their log, a huge frame, a slow reader, a reconnect."""

from __future__ import annotations

import contextlib
import json
import secrets
import signal
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect
from websockets.utils import apply_mask

from bashrpc.protocol.client import result_of
from bashrpc.protocol.mcp import EmptyResult, HostOptions
from bashrpc.protocol.mcpclient import initialize_params
from bashrpc.protocol.methods import AbortBashParams, AbortBashResult, BashParams
from bashrpc.server.daemon.wsthrottle import LOG_BURST
from tests.daemon import DaemonProcess, fresh_socket
from tests.rpc import marked_processes, server_environment, wait_until
from tests.websocket import WebSocketClient, bearer, listening_url, write_token

pytestmark = pytest.mark.slow

# Bounds that only catch a hang.
EXIT_BOUND_SECONDS = 15.0
LOOPBACK = "ws://127.0.0.1:0"
SMALL_LINE_LIMIT = 64 * 1024
# How much the daemon may grow while a client reads nothing of a flood: the
# outbox holds 2 MiB, the library's buffers a few frames; unbounded, `yes`
# would add hundreds of MiB a second.
FLOOD_GROWTH_BOUND_BYTES = 64 * 1024 * 1024
FLOOD_SECONDS = 2.0


class Listener:
    """A daemon with a WebSocket listener, and what a client needs to reach it."""

    def __init__(self, daemon: DaemonProcess, token: str | None) -> None:
        self.daemon = daemon
        self.token = token
        self.url = listening_url(daemon)

    def connect(self, **options: object) -> WebSocketClient:
        return WebSocketClient(self.url, self.token, **options)


StartListener = Callable[..., Listener]


@pytest.fixture
def start_listener(tmp_path: Path) -> Iterator[StartListener]:
    started: list[DaemonProcess] = []

    def start(*args: str, token: str | None = None) -> Listener:
        gate = ["--insecure-loopback"] if token is None else ["--token-file"]
        if token is not None:
            gate.append(str(write_token(tmp_path, token)))
        daemon = DaemonProcess("--listen", LOOPBACK, *gate, *args, tmp=tmp_path)
        started.append(daemon)
        return Listener(daemon, token)

    try:
        yield start
    finally:
        for daemon in started:
            daemon.kill()


def _refusal(url: str, headers: dict[str, str]) -> int:
    with (
        pytest.raises(InvalidStatus) as refused,
        connect(url, additional_headers=headers, open_timeout=EXIT_BOUND_SECONDS),
    ):
        pass
    return refused.value.response.status_code


def test_the_token_holder_is_served(start_listener: StartListener) -> None:
    listener = start_listener(token=secrets.token_hex(16))
    client = listener.connect()
    assert client.bash("echo hi").output == "hi\n"
    # A message with newlines of its own (pretty-printed JSON) is one message.
    client.ws.send(json.dumps({"jsonrpc": "2.0", "id": "pretty", "method": "ping"}, indent=2))
    assert result_of(client.response("pretty"), EmptyResult) == EmptyResult()
    client.close()


def test_a_wrong_or_missing_token_is_refused_and_logged(start_listener: StartListener) -> None:
    token = secrets.token_hex(16)
    listener = start_listener(token=token)
    assert _refusal(listener.url, bearer(token + "x")) == 401
    assert _refusal(listener.url, {}) == 401
    assert _refusal(listener.url, {"Authorization": f"Basic {token}"}) == 401
    # A browser (it always sends an Origin) is refused even with the token.
    assert _refusal(listener.url, {**bearer(token), "Origin": "http://evil.example"}) == 403

    # The daemon's log goes out from a thread of its own: every refusal's line,
    # not only the first, may come after the refusal itself.
    def all_logged() -> bool:
        log = listener.daemon.stderr()
        return "wrong token" in log and log.count("no bearer token") == 2 and "no browser" in log

    assert wait_until(all_logged), listener.daemon.stderr()
    log = listener.daemon.stderr()
    assert "refused a websocket from 127.0.0.1:" in log
    assert "no browser is let in" in log
    assert token not in log
    # The listener goes on serving the holder.
    client = listener.connect()
    assert client.bash("echo still").output == "still\n"
    client.close()


def test_a_frame_over_the_limit_closes_only_its_connection(start_listener: StartListener) -> None:
    listener = start_listener(
        "--max-line-bytes", str(SMALL_LINE_LIMIT), token=secrets.token_hex(16)
    )
    other = listener.connect()
    huge = listener.connect()
    filler = "x" * (SMALL_LINE_LIMIT - 200)
    assert huge.bash(f": {filler}; echo under").output == "under\n"
    huge.ws.send(
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": filler * 2}})
    )
    with pytest.raises(EOFError):
        huge.response(1, timeout=EXIT_BOUND_SECONDS)
    assert huge.ws.close_code == 1009  # message too big
    assert wait_until(lambda: f"over {SMALL_LINE_LIMIT} bytes" in listener.daemon.stderr())
    assert other.bash("echo served").output == "served\n"
    other.close()
    huge.close()


def _rss_bytes(pid: int, field: str = "VmRSS") -> int:
    with open(f"/proc/{pid}/status") as f:
        kib = next(int(line.split()[1]) for line in f if line.startswith(field + ":"))
    return kib * 1024


def _peak_rss_bytes(pid: int) -> int:
    return _rss_bytes(pid, "VmHWM")


# The adversary's messages: 15 MiB of spaces each, deflated to about 15 KiB.
SPACES_BYTES = 15 * 1024 * 1024
COMPRESSED_MESSAGES = 8
# Inflated, one such message alone is 15 MiB (and more once decoded).
INFLATE_GROWTH_BOUND_BYTES = 12 * 1024 * 1024
# What ends a deflated message (RFC 7692 7.2.1): dropped before it is sent.
DEFLATE_TAIL = b"\x00\x00\xff\xff"


def _compressed_text_frame(payload: bytes) -> bytes:
    """A client's final text frame marked compressed (FIN, RSV1), masked (RFC 6455 5.2)."""
    key = secrets.token_bytes(4)
    header = struct.pack("!BBQ", 0x80 | 0x40 | 0x1, 0x80 | 127, len(payload)) + key
    return header + apply_mask(payload, key)


def test_a_compressed_message_is_never_inflated(start_listener: StartListener) -> None:
    listener = start_listener(token=secrets.token_hex(16))
    pid = listener.daemon.proc.pid
    # The client offers permessage-deflate, as the library does by default.
    client = listener.connect(compression="deflate")
    assert client.bash("echo ready").output == "ready\n"
    assert client.ws.response is not None
    assert client.ws.response.headers.get("Sec-WebSocket-Extensions") is None
    before = _peak_rss_bytes(pid)
    # Whatever was agreed, the adversary sends frames marked compressed (RSV1),
    # one deflate stream across them, then a ping to learn they were all read.
    deflate = zlib.compressobj(wbits=-zlib.MAX_WBITS)

    def frame(data: bytes) -> bytes:
        payload = deflate.compress(data) + deflate.flush(zlib.Z_SYNC_FLUSH)
        return _compressed_text_frame(payload.removesuffix(DEFLATE_TAIL))

    ping = json.dumps({"jsonrpc": "2.0", "id": "after", "method": "ping"}).encode()
    with contextlib.suppress(OSError):  # the daemon may close the connection at the first
        for data in [b" " * SPACES_BYTES] * COMPRESSED_MESSAGES + [ping]:
            client.ws.socket.sendall(frame(data))
    with pytest.raises(EOFError):
        client.response("after", timeout=EXIT_BOUND_SECONDS)
    assert _peak_rss_bytes(pid) - before < INFLATE_GROWTH_BOUND_BYTES
    # Only that connection ended.
    other = listener.connect()
    assert other.bash("echo served").output == "served\n"
    other.close()
    client.close()


def _written(pid: int) -> int:
    with open(f"/proc/{pid}/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("wchar:"))


def test_a_slow_reader_holds_the_flood_and_others_are_served(
    start_listener: StartListener,
) -> None:
    listener = start_listener(token=secrets.token_hex(16))
    pid = listener.daemon.proc.pid
    slow, other = listener.connect(), listener.connect()
    slow.keep_chunks = False
    flood = slow.request("bash", BashParams(command="yes ws-flood-marker", session_id="flood"))
    assert wait_until(lambda: slow.chunks_dropped > 0, timeout=EXIT_BOUND_SECONDS)
    slow.pause_reading()
    received = slow.chunks_dropped
    # The daemon's outbox and both ends' buffers fill; past the stall the
    # server skips the chunks (the artifact keeps all), it never queues them.
    before = _rss_bytes(pid)
    time.sleep(FLOOD_SECONDS)
    assert other.bash("echo answered").output == "answered\n"
    time.sleep(FLOOD_SECONDS)
    assert _rss_bytes(pid) - before < FLOOD_GROWTH_BOUND_BYTES
    assert slow.chunks_dropped - received <= 1  # the one being read when it paused
    assert marked_processes("ws-flood-marker")
    # A slow reader's requests are still read: its abort acts while it reads nothing.
    abort = slow.request("abort_bash", AbortBashParams(session_id="flood"))
    assert wait_until(lambda: not marked_processes("ws-flood-marker"), timeout=EXIT_BOUND_SECONDS)
    slow.resume_reading()
    assert result_of(slow.response(abort), AbortBashResult) == AbortBashResult(aborted=True)
    assert slow.bash_result(flood, timeout=EXIT_BOUND_SECONDS * 2).cancelled
    slow.close()
    other.close()


def _introduce(client: WebSocketClient, client_id: str) -> WebSocketClient:
    """Name the connection's client, so its sessions outlive the connection."""
    options = HostOptions(client_id=client_id)
    client.result("initialize", initialize_params(options))
    return client


def test_a_reconnect_finds_the_clients_session(start_listener: StartListener) -> None:
    listener = start_listener(token=secrets.token_hex(16))
    first = _introduce(listener.connect(), "ws-agent")
    first.bash("export KEPT=yes; cd /tmp")
    first.ws.close()  # the connection is gone; the client's sessions stay for the grace
    again = _introduce(listener.connect(), "ws-agent")
    assert again.bash('echo "$KEPT"; pwd').output == "yes\n/tmp\n"
    stranger = _introduce(listener.connect(), "someone-else")
    assert stranger.bash('echo "[$KEPT]"').output == "[]\n"
    again.close()
    stranger.close()


def test_insecure_loopback_serves_without_a_token(start_listener: StartListener) -> None:
    listener = start_listener()
    client = listener.connect()
    assert client.bash("echo open").output == "open\n"
    client.close()


def _start(
    tmp_path: Path, *args: str, python: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    socket_path = fresh_socket(tmp_path)
    done = subprocess.run(
        [
            *(python or [sys.executable, "-m", "bashrpc"]),
            "daemon",
            "--socket",
            str(socket_path),
            *args,
        ],
        capture_output=True,
        text=True,
        env=server_environment(tmp_path),
        timeout=EXIT_BOUND_SECONDS,
    )
    assert not socket_path.exists()  # refused before the socket was taken
    return done


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["--listen", "ws://0.0.0.0:0"], "needs --token-file"),
        (["--listen", "ws://127.0.0.1:0"], "needs --token-file"),
        (["--listen", "ws://0.0.0.0:0", "--insecure-loopback"], "not a loopback address"),
        (["--listen", "wss://127.0.0.1:0", "--insecure-loopback"], "expected ws://HOST:PORT"),
    ],
)
def test_a_listener_without_a_token_refuses_to_start(
    tmp_path: Path, args: list[str], why: str
) -> None:
    done = _start(tmp_path, *args)
    assert done.returncode == 2, done.stderr
    assert why in done.stderr


def test_a_token_file_others_can_read_is_refused(tmp_path: Path) -> None:
    token = write_token(tmp_path, secrets.token_hex(16), mode=0o644)
    done = _start(tmp_path, "--listen", LOOPBACK, "--token-file", str(token))
    assert done.returncode == 2
    assert "others may read it, or the group write it (mode 644)" in done.stderr


def test_without_the_library_listen_says_how_to_get_it(tmp_path: Path) -> None:
    # The interpreter with `websockets` made unimportable, as where it is not installed.
    hide = "import sys; sys.modules['websockets'] = None; import runpy; "
    hide += "sys.argv[0] = 'bashrpc'; runpy.run_module('bashrpc', run_name='__main__')"
    done = _start(
        tmp_path, "--listen", LOOPBACK, "--insecure-loopback", python=[sys.executable, "-c", hide]
    )
    assert done.returncode == 2
    assert "pip install 'bashrpc[ws]'" in done.stderr


def test_sigterm_ends_websocket_connections_and_leaves_no_process(
    start_listener: StartListener,
) -> None:
    listener = start_listener("--stay", token=secrets.token_hex(16))
    client = listener.connect()
    client.bash("exec -a ws-term-mark sleep 300 &")
    running = client.request("bash", BashParams(command="sleep 60"))
    assert wait_until(lambda: marked_processes("ws-term-mark"))
    listener.daemon.proc.send_signal(signal.SIGTERM)
    assert listener.daemon.proc.wait(timeout=EXIT_BOUND_SECONDS) == 0
    assert client.bash_result(running).cancelled
    assert wait_until(lambda: not marked_processes("ws-term-mark"), timeout=5)
    with pytest.raises(EOFError):
        client.next_message(timeout=EXIT_BOUND_SECONDS)
    client.close()
    assert "Traceback" not in listener.daemon.stderr()


def test_a_listener_on_port_0_names_its_port_at_the_default_log_level(
    tmp_path: Path,
) -> None:
    daemon = DaemonProcess(
        "--listen", LOOPBACK, "--insecure-loopback", "--log-level", "WARNING", tmp=tmp_path
    )
    try:
        url = listening_url(daemon)
        assert not url.endswith(":0")
        client = WebSocketClient(url)
        assert client.result("ping") == EmptyResult()
        client.close()
    finally:
        daemon.kill()


WRONG_TOKEN_TRIES = 10
# Each wrong token slows the next try of its peer (0.1 s, doubling, at most
# 1 s): ten tries take 6.5 s; unslowed, well under one.
SLOWED_AT_LEAST_SECONDS = 3.0
# Refusals logged at once; the rest within a budget of one per 10 s.
LOGGED_AT_MOST = LOG_BURST + 1


def test_wrong_tokens_are_slowed_and_logged_a_bounded_number_of_times(
    start_listener: StartListener,
) -> None:
    token = secrets.token_hex(16)
    listener = start_listener(token=token)
    started = time.monotonic()
    statuses = [
        _refusal(listener.url, bearer(f"guess-{index}")) for index in range(WRONG_TOKEN_TRIES)
    ]
    assert time.monotonic() - started >= SLOWED_AT_LEAST_SECONDS
    assert set(statuses) == {401}
    # The holder is still let in (after its turn).
    client = listener.connect()
    assert client.bash("echo holder").output == "holder\n"
    client.close()
    log = listener.daemon.stderr()
    assert 1 <= log.count("refused a websocket") <= LOGGED_AT_MOST, log
