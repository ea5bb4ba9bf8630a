"""What the far end of a remote byte stream does to the server: a client that
freezes without EOF, a stream that is a terminal, SIGTERM with a grace period.
Each needs the real process and its real stdio."""

from __future__ import annotations

import time

import pytest

from tests.rpc import ServerProcess, owned_processes, wait_until

pytestmark = pytest.mark.slow

CLIENT_TIMEOUT_SECONDS = 2.0
# Generous: only a hang fails it (the exit comes about a second after the timeout).
EXIT_BOUND_SECONDS = CLIENT_TIMEOUT_SECONDS + 10.0
COMMAND = "sleep 300 & setsid sleep 301 & sleep 302"


def start_command(server: ServerProcess) -> object:
    ident = server.request("bash", {"command": COMMAND})
    assert wait_until(lambda: len(server.owned_processes()) >= 3)
    return ident


def test_a_silent_client_is_taken_for_gone(spawn_process) -> None:
    server = spawn_process("--client-timeout", str(CLIENT_TIMEOUT_SECONDS))
    ident = start_command(server)
    sent = time.monotonic()
    # stdin stays open: no EOF comes, only silence.
    assert server.proc.wait(timeout=EXIT_BOUND_SECONDS) == 0
    assert time.monotonic() - sent >= CLIENT_TIMEOUT_SECONDS
    assert server.bash_result(ident, timeout=1).cancelled
    assert "no input from the client for 2 s" in server.stderr()
    assert wait_until(lambda: owned_processes(server.pid) == [], timeout=5)


def test_a_client_that_pings_is_alive(spawn_process) -> None:
    server = spawn_process("--client-timeout", str(CLIENT_TIMEOUT_SECONDS))
    start_command(server)
    until = time.monotonic() + 2 * CLIENT_TIMEOUT_SECONDS
    while time.monotonic() < until:
        assert server.result("ping", {}) == {}
        time.sleep(CLIENT_TIMEOUT_SECONDS / 3)
    assert server.proc.poll() is None
    assert server.bash("echo alive").output == "alive\n"


def test_client_timeout_from_the_settings(spawn_process, tmp_path) -> None:
    config = tmp_path / "server.toml"
    config.write_text(f"[server]\nclientTimeout = {CLIENT_TIMEOUT_SECONDS}\n")
    server = spawn_process("--config", str(config))
    assert server.bash("echo hi").output == "hi\n"
    assert server.proc.wait(timeout=EXIT_BOUND_SECONDS) == 0


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
def test_a_bad_client_timeout_is_a_usage_error(spawn_process, value: str) -> None:
    server = spawn_process("--client-timeout", value)
    assert server.proc.wait(timeout=EXIT_BOUND_SECONDS) == 2
    assert "--client-timeout" in server.stderr()
