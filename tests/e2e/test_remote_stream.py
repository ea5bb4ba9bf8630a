"""What the far end of a remote byte stream does to the server: a client that
freezes without EOF, a stream that is a terminal, SIGTERM with a grace period.
Each needs the real process and its real stdio."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import termios
import time

import pytest

from protocol.errors import ErrorCode
from tests.rpc import ServerProcess, owned_processes, server_environment, wait_until

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
    # Taken before the request is written: the server's silence starts after it.
    sent = time.monotonic()
    ident = start_command(server)
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


def _read_replies(fd: int, ids: set[int], timeout: float) -> tuple[list[bytes], dict]:
    """Lines from a terminal's master side until every id in `ids` is answered."""
    data = b""
    replies: dict = {}
    deadline = time.monotonic() + timeout
    while set(replies) != ids and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            data += os.read(fd, 1 << 16)
            for line in data.splitlines(keepends=True):
                message = json.loads(line) if line.endswith(b"\n") else {}
                if "id" in message and ("result" in message or "error" in message):
                    replies[message["id"]] = message
    return data.splitlines(keepends=True), replies


def test_a_terminal_for_stdio_is_put_in_raw_mode(tmp_path) -> None:
    """As under `kubectl exec -it` or `ssh -tt`: no echo, no 4095-byte line limit,
    no line editing of a DEL byte, and no log line in the protocol stream."""
    (tmp_path / "home").mkdir()
    # A failing rc: the server's warning about it must stay off the terminal.
    (tmp_path / "home" / ".bashrc").write_text("exit 3\n")
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "server", "--artifacts-dir", str(tmp_path / "artifacts")],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=server_environment(tmp_path),
        cwd=tmp_path,
        start_new_session=True,
    )
    try:
        assert wait_until(lambda: not termios.tcgetattr(slave)[3] & termios.ECHO)
        long_text = "y" * (100 * 1024)
        long_command = f"echo {long_text} | wc -c"
        # Raw DEL, legal in JSON: a line discipline would erase the `b` with it.
        delete_command = "printf %s 'ab\x7fc' | wc -c"
        requests = [
            {"jsonrpc": "2.0", "id": 1, "method": "bash", "params": {"command": "exit 3"}},
            {"jsonrpc": "2.0", "id": 2, "method": "bash", "params": {"command": long_command}},
            {"jsonrpc": "2.0", "id": 3, "method": "bash", "params": {"command": delete_command}},
        ]
        wire = b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in requests)
        assert b"\x7f" in wire
        os.write(master, wire)
        lines, replies = _read_replies(master, {1, 2, 3}, timeout=30)
        # Every line is the server's: no echo of a request, no log line.
        assert all(json.loads(line).get("method") != "bash" for line in lines)
        assert replies[1]["result"]["exitCode"] == 3
        assert replies[2]["result"]["output"] == f"{len(long_text) + 1}\n"
        assert replies[3]["result"]["output"] == "4\n"
        # The terminal gets its own settings back once the server is done with it.
        before = termios.tcgetattr(slave)
        os.write(master, b'{"jsonrpc":"2.0","method":"exit"}\n')
        assert proc.wait(timeout=EXIT_BOUND_SECONDS) == 0
        assert termios.tcgetattr(slave)[3] & termios.ECHO and not before[3] & termios.ECHO
    finally:
        proc.kill()
        proc.wait()
        os.close(master)
        os.close(slave)
    assert wait_until(lambda: owned_processes(proc.pid) == [], timeout=5)


DRAIN_SECONDS = 3.0


def test_sigterm_drains_running_commands(spawn_process) -> None:
    """SIGTERM with a drain: a notification, no new commands, the running ones
    finish if they can, the rest are aborted with their results, then the exit."""
    server = spawn_process("--drain-seconds", str(DRAIN_SECONDS))
    quick = server.request("bash", {"command": "sleep 1; echo finished", "sessionId": "a"})
    slow = server.request("bash", {"command": "echo partial; sleep 300", "sessionId": "b"})
    server.wait_for(lambda m: m.get("method") == "bash/chunk" and m["params"]["requestId"] == slow)
    signalled = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    notice = server.wait_for(lambda m: m.get("method") == "server/draining")
    assert notice["params"] == {"seconds": DRAIN_SECONDS}
    refused = server.call("bash", {"command": "echo new", "sessionId": "c"})
    assert refused["error"]["code"] == ErrorCode.SHUTTING_DOWN
    assert server.result("ping", {}) == {}
    finished = server.bash_result(quick, timeout=EXIT_BOUND_SECONDS)
    assert finished.output == "finished\n" and finished.exit_code == 0
    aborted = server.bash_result(slow, timeout=DRAIN_SECONDS + EXIT_BOUND_SECONDS)
    assert aborted.cancelled and aborted.output.endswith("partial\n")
    assert time.monotonic() - signalled >= DRAIN_SECONDS
    assert server.proc.wait(timeout=EXIT_BOUND_SECONDS) == 0
    assert wait_until(lambda: owned_processes(server.pid) == [], timeout=5)


def test_a_drain_ends_when_the_commands_do(spawn_process) -> None:
    server = spawn_process("--drain-seconds", "300")
    ident = server.request("bash", {"command": "echo started; sleep 0.5; echo finished"})
    server.wait_for(lambda m: m.get("method") == "bash/chunk")
    server.proc.send_signal(signal.SIGTERM)
    result = server.bash_result(ident, timeout=EXIT_BOUND_SECONDS)
    assert result.output == "started\nfinished\n" and not result.cancelled
    assert server.proc.wait(timeout=EXIT_BOUND_SECONDS) == 0


def test_a_second_sigterm_cuts_the_drain_short(spawn_process) -> None:
    server = spawn_process("--drain-seconds", "300")
    ident = server.request("bash", {"command": "echo partial; sleep 300"})
    server.wait_for(lambda m: m.get("method") == "bash/chunk")
    server.proc.send_signal(signal.SIGTERM)
    server.wait_for(lambda m: m.get("method") == "server/draining")
    server.proc.send_signal(signal.SIGTERM)
    assert server.bash_result(ident, timeout=EXIT_BOUND_SECONDS).cancelled
    assert server.proc.wait(timeout=EXIT_BOUND_SECONDS) == 0


def test_exec_pings_a_server_with_a_client_timeout(tmp_path) -> None:
    """`bashrpc exec --client-timeout T` pings at a third of T, so a command
    longer than T runs to its end."""
    done = subprocess.run(
        [sys.executable, "-m", "server", "exec", "--client-timeout", "1", "sleep 3; echo done"],
        capture_output=True,
        env=server_environment(tmp_path),
        cwd=tmp_path,
        timeout=EXIT_BOUND_SECONDS,
    )
    assert (done.returncode, done.stdout) == (0, b"done\n"), done.stderr
