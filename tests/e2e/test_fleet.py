"""What a fleet's orchestrator asks of the daemon: HTTP probes, metrics with
bounded labels, and `server/stats`, through the real `bashrpc daemon` and a
real HTTP client (the standard library's)."""

from __future__ import annotations

import http.client
import json
import re
import secrets
import signal
import socket
import threading
from pathlib import Path
from urllib.parse import urlsplit

from bashrpc.protocol.methods import BashParams, ServerStatsParams, ServerStatsResult
from tests.daemon import DaemonProcess
from tests.e2e.conftest import SpawnDaemon
from tests.rpc import wait_until
from tests.websocket import bearer, write_token

_LISTENING = re.compile(r"probes and metrics on (http://\S+)")
HANG_SECONDS = 30.0


class Http:
    """GETs to the daemon's --http, one connection each, as a kubelet probes."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        assert parts.hostname is not None and parts.port is not None
        self.host, self.port = parts.hostname, parts.port

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=HANG_SECONDS)
        try:
            connection.request("GET", path, headers=headers or {})
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()


def http_of(daemon: DaemonProcess) -> Http:
    found: list[str] = []

    def logged() -> bool:
        found[:] = _LISTENING.findall(daemon.stderr())
        return bool(found)

    assert wait_until(logged, timeout=HANG_SECONDS), daemon.stderr()
    return Http(found[0])


def config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "bashrpc.toml"
    path.write_text(text)
    return str(path)


def metric(text: str, name: str) -> float:
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    assert found is not None, name
    return float(found.group(1))


def test_livez_answers_while_the_loop_turns(spawn_daemon: SpawnDaemon) -> None:
    status, body = http_of(spawn_daemon("--http", "127.0.0.1:0")).get("/livez")
    assert (status, json.loads(body)) == (200, {"live": True})


def test_readyz_is_200_with_no_reasons_when_ready(spawn_daemon: SpawnDaemon) -> None:
    probes = http_of(spawn_daemon("--http", "127.0.0.1:0"))
    for path in ("/readyz", "/v1/health"):
        status, body = probes.get(path)
        assert (status, json.loads(body)) == (200, {"ready": True, "reasons": []})


def test_an_unknown_path_is_404_and_a_post_405(spawn_daemon: SpawnDaemon) -> None:
    probes = http_of(spawn_daemon("--http", "127.0.0.1:0"))
    assert probes.get("/nope")[0] == 404
    connection = http.client.HTTPConnection(probes.host, probes.port, timeout=HANG_SECONDS)
    connection.request("POST", "/readyz", body=b"x")
    assert connection.getresponse().status == 405
    connection.close()


def test_readyz_is_503_while_draining_after_sigterm(
    spawn_daemon: SpawnDaemon, tmp_path: Path
) -> None:
    daemon = spawn_daemon("--http", "127.0.0.1:0", "--config", config(tmp_path, DRAIN))
    probes = http_of(daemon)
    client = daemon.connect()
    marker = tmp_path / "started"
    ident = client.request("bash", BashParams(command=f"touch {marker}; sleep 3; echo done"))
    assert wait_until(marker.exists, timeout=HANG_SECONDS)
    daemon.proc.send_signal(signal.SIGTERM)

    def draining() -> bool:
        status, body = probes.get("/readyz")
        return status == 503 and json.loads(body)["reasons"][0]["code"] == "draining"

    assert wait_until(draining, timeout=HANG_SECONDS)
    # The running command finishes in the drain, then the daemon exits.
    assert client.bash_result(ident, timeout=HANG_SECONDS).output == "done\n"
    assert daemon.proc.wait(HANG_SECONDS) == 0


DRAIN = "[server]\ndrainSeconds = 60\n"


def test_readyz_is_503_when_the_configured_sandbox_cannot_start(
    spawn_daemon: SpawnDaemon, tmp_path: Path
) -> None:
    settings = config(tmp_path, '[sandbox]\nmode = "workspace-write"\n')
    # No bwrap on this daemon's PATH: the sandbox it is configured for cannot start.
    daemon = spawn_daemon(
        "--http", "127.0.0.1:0", "--config", settings, env={"PATH": "/nonexistent"}
    )
    status, body = http_of(daemon).get("/readyz")
    assert status == 503
    [reason] = json.loads(body)["reasons"]
    assert reason["code"] == "sandbox" and "bwrap is not installed" in reason["message"]


def test_readyz_is_503_while_the_rc_capture_fails(
    spawn_daemon: SpawnDaemon, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    # Killed before its EXIT trap can write the snapshot.
    (home / ".bashrc").write_text("kill -9 $$\n")
    daemon = spawn_daemon("--http", "127.0.0.1:0")
    probes = http_of(daemon)
    # A tenant's runtime captures the rc when the first connection makes it.
    client = daemon.connect()
    client.bash("true")

    def failing() -> bool:
        status, body = probes.get("/readyz")
        return status == 503 and json.loads(body)["reasons"][0]["code"] == "rc_capture"

    assert wait_until(failing, timeout=HANG_SECONDS)
    text = probes.get("/metrics")[1]
    assert metric(text.decode(), "bashrpc_rc_capture_failures_total") >= 1
    client.close()


def test_a_non_loopback_http_needs_the_token(spawn_daemon: SpawnDaemon, tmp_path: Path) -> None:
    daemon = spawn_daemon("--http", "0.0.0.0:0")
    assert daemon.proc.wait(HANG_SECONDS) == 2
    assert "needs --token-file" in daemon.stderr()


def test_with_a_token_every_path_needs_it(spawn_daemon: SpawnDaemon, tmp_path: Path) -> None:
    token = secrets.token_hex(32)
    token_file = write_token(tmp_path, token)
    probes = http_of(spawn_daemon("--http", "127.0.0.1:0", "--token-file", str(token_file)))
    for path in ("/livez", "/readyz", "/metrics"):
        assert probes.get(path)[0] == 401
        assert probes.get(path, bearer("wrong-token-wrong-token"))[0] == 401
        assert probes.get(path, bearer(token))[0] == 200


def test_open_probes_let_a_kubelet_probe_but_metrics_still_need_the_token(
    spawn_daemon: SpawnDaemon, tmp_path: Path
) -> None:
    token = secrets.token_hex(32)
    path = write_token(tmp_path, token)
    daemon = spawn_daemon("--http", "0.0.0.0:0", "--token-file", str(path), "--http-open-probes")
    probes = http_of(daemon)
    probes.host = "127.0.0.1"
    assert probes.get("/livez")[0] == 200 and probes.get("/readyz")[0] == 200
    assert probes.get("/metrics")[0] == 401
    assert probes.get("/metrics", bearer(token))[0] == 200


def _series(text: str) -> set[str]:
    return {line.rsplit(" ", 1)[0] for line in text.splitlines() if not line.startswith("#")}


def test_metrics_keep_their_label_sets_under_32_connections_and_1000_commands(
    spawn_daemon: SpawnDaemon,
) -> None:
    daemon = spawn_daemon("--http", "127.0.0.1:0")
    probes = http_of(daemon)
    errors: list[BaseException] = []
    exit_codes: list[int | None] = []

    def connection(commands: list[str]) -> None:
        try:
            client = daemon.connect()
            for command in commands:
                # No deadline of the command's own: one counts its shell's start, and
                # under load an `exit 3` would end timed out, not failed.
                exit_codes.append(client.bash(command).exit_code)
            client.close()
        except BaseException as exc:  # reported below, in the test's own thread
            errors.append(exc)

    kinds = ["true", "echo out", "exit 3", "sleep 0.2"]
    threads = [threading.Thread(target=connection, args=([kinds[i % 4]] * 2,)) for i in range(32)]
    for thread in threads:
        thread.start()
    assert wait_until(lambda: daemon_connections(probes) >= 8, timeout=HANG_SECONDS)
    during = probes.get("/metrics")[1].decode()
    _join(threads, HANG_SECONDS)
    assert errors == []
    assert sorted(exit_codes, key=str) == [0] * 48 + [3] * 16
    before = probes.get("/metrics")[1].decode()
    assert metric(before, "bashrpc_commands_started_total") == 64
    assert metric(before, 'bashrpc_commands_finished_total{outcome="failed"}') == 16
    assert _series(during) == _series(before)
    threads = [
        threading.Thread(target=connection, args=([f"echo {i}-{j}" for j in range(250)],))
        for i in range(4)
    ]
    for thread in threads:
        thread.start()
    _join(threads, HANG_SECONDS * 4)
    assert errors == []
    after = probes.get("/metrics")[1].decode()
    assert metric(after, "bashrpc_commands_started_total") == 1064
    assert _series(after) == _series(before)


def _join(threads: list[threading.Thread], timeout: float) -> None:
    """Every thread ended: the figures are read after the last command, not beside it."""
    for thread in threads:
        thread.join(timeout)
    assert not [thread for thread in threads if thread.is_alive()]


def daemon_connections(probes: Http) -> float:
    return metric(probes.get("/metrics")[1].decode(), "bashrpc_connections")


def test_server_stats_gives_the_same_figures_as_metrics(spawn_daemon: SpawnDaemon) -> None:
    daemon = spawn_daemon("--http", "127.0.0.1:0")
    probes = http_of(daemon)
    client = daemon.connect()
    client.bash("echo hello")
    client.bash("false")
    stats = client.typed(ServerStatsResult, "server/stats", ServerStatsParams())
    text = probes.get("/metrics")[1].decode()
    assert stats.connections == 1 == metric(text, "bashrpc_connections")
    assert stats.tenants == 1 == metric(text, "bashrpc_tenants")
    assert stats.sessions == 1 == metric(text, "bashrpc_sessions")
    assert stats.shells == 1 == metric(text, "bashrpc_shells")
    assert stats.commands_started == 2 == metric(text, "bashrpc_commands_started_total")
    assert stats.commands_finished.ok == 1 and stats.commands_finished.failed == 1
    assert stats.output_bytes == len("hello\n") == metric(text, "bashrpc_output_bytes_total")
    client.close()


def idle_connections(probes: Http, count: int) -> list[socket.socket]:
    """Connections that send nothing, as a slow or hostile peer holds them."""
    return [socket.create_connection((probes.host, probes.port)) for _ in range(count)]


def still_open(sock: socket.socket) -> bool:
    """Neither answered nor closed by the server (nothing to read yet)."""
    try:
        sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:
        return True
    except OSError:
        pass  # reset: closed
    return False


def test_idle_connections_never_keep_a_probe_waiting(spawn_daemon: SpawnDaemon) -> None:
    """40 peers that send nothing (more than the places for answers) hold no place:
    /livez is answered while they are all still waiting for their heads."""
    probes = http_of(spawn_daemon("--http", "127.0.0.1:0"))
    idle = idle_connections(probes, 40)
    try:
        status, body = probes.get("/livez")
        assert (status, json.loads(body)) == (200, {"live": True})
        assert all(still_open(sock) for sock in idle)  # not waited out: overtaken
    finally:
        for sock in idle:
            sock.close()


def test_a_flood_of_idle_connections_is_bounded_and_probes_still_answer(
    spawn_daemon: SpawnDaemon,
) -> None:
    """Past the bound on heads being read, each new connection closes the one that
    has waited longest, so a flood costs a bounded set and a probe gets through."""
    probes = http_of(spawn_daemon("--http", "127.0.0.1:0"))
    flood = idle_connections(probes, 600)
    try:
        assert probes.get("/livez")[0] == 200
        assert probes.get("/readyz")[0] == 200
        # The oldest were closed at once, long before their heads' deadline.
        assert wait_until(lambda: not still_open(flood[0]), timeout=2.0)
        assert sum(still_open(sock) for sock in flood) < 600 - 100
    finally:
        for sock in flood:
            sock.close()


def test_a_head_over_8_kib_is_431(spawn_daemon: SpawnDaemon) -> None:
    probes = http_of(spawn_daemon("--http", "127.0.0.1:0"))
    status, _ = probes.get("/livez", headers={"X-Pad": "a" * 9000})
    assert status == 431
    status, _ = probes.get("/livez", headers={"X-Pad": "a" * 7000})
    assert status == 200
