"""What the far end of a remote byte stream does to the server: a client that
freezes without EOF, a stream that is a terminal, SIGTERM with a grace period.
Each needs the real process and its real stdio."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path

import msgspec
import pytest

from bashrpc.protocol.client import ClientCore, Received, Unparsable, notification_params, result_of
from bashrpc.protocol.envelope import RequestId, ServerMessage
from bashrpc.protocol.errors import ErrorCode
from bashrpc.protocol.mcp import EmptyParams, EmptyResult
from bashrpc.protocol.methods import BashChunk, BashParams, BashResult, ServerDraining
from tests.conftest import SpawnProcess
from tests.rpc import ServerProcess, owned_processes, server_environment, wait_until

pytestmark = pytest.mark.slow

CLIENT_TIMEOUT_SECONDS = 2.0
# Generous: only a hang fails it (the exit comes about a second after the timeout).
EXIT_BOUND_SECONDS = CLIENT_TIMEOUT_SECONDS + 10.0
COMMAND = "sleep 300 & setsid sleep 301 & sleep 302"


def start_command(server: ServerProcess) -> RequestId:
    ident = server.request("bash", BashParams(command=COMMAND))
    assert wait_until(lambda: len(server.owned_processes()) >= 3)
    return ident


def test_a_silent_client_is_taken_for_gone(spawn_process: SpawnProcess) -> None:
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


def test_a_client_that_pings_is_alive(spawn_process: SpawnProcess) -> None:
    server = spawn_process("--client-timeout", str(CLIENT_TIMEOUT_SECONDS))
    start_command(server)
    until = time.monotonic() + 2 * CLIENT_TIMEOUT_SECONDS
    while time.monotonic() < until:
        assert server.result("ping", EmptyParams()) == EmptyResult()
        time.sleep(CLIENT_TIMEOUT_SECONDS / 3)
    assert server.proc.poll() is None
    # In a session of its own: the default one's command still runs.
    assert server.bash("echo alive", session_id="other").output == "alive\n"


def test_client_timeout_from_the_settings(spawn_process: SpawnProcess, tmp_path: Path) -> None:
    config = tmp_path / "server.toml"
    config.write_text(f"[server]\nclientTimeout = {CLIENT_TIMEOUT_SECONDS}\n")
    server = spawn_process("--config", str(config))
    assert server.bash("echo hi").output == "hi\n"
    assert server.proc.wait(timeout=EXIT_BOUND_SECONDS) == 0


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
def test_a_bad_client_timeout_is_a_usage_error(spawn_process: SpawnProcess, value: str) -> None:
    server = spawn_process("--client-timeout", value)
    assert server.proc.wait(timeout=EXIT_BOUND_SECONDS) == 2
    assert "--client-timeout" in server.stderr()


def _read_replies(
    fd: int, ids: set[int], timeout: float
) -> tuple[list[Received], dict[RequestId | None, ServerMessage]]:
    """What a terminal's master side carries until every id in `ids` is answered:
    each line as the client decodes it (a blank one, or one cut short, is
    Unparsable), and the replies by id."""
    data = b""
    received: list[Received] = []
    replies: dict[RequestId | None, ServerMessage] = {}
    deadline = time.monotonic() + timeout
    while set(replies) != ids and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            data += os.read(fd, 1 << 16)
            *lines, data = data.split(b"\n")
            for line in lines:
                for message in ClientCore.line(line + b"\n"):
                    received.append(message)
                    if (
                        isinstance(message, ServerMessage)
                        and not isinstance(message.id, msgspec.UnsetType)
                        and (message.result or message.error is not None)
                    ):
                        replies[message.id] = message
    if data:
        received.append(Unparsable(data, "a line without its newline"))
    return received, replies


def test_a_terminal_for_stdio_is_put_in_raw_mode(tmp_path: Path) -> None:
    """As under `kubectl exec -it` or `ssh -tt`: no echo, no 4095-byte line limit,
    no line editing of a DEL byte, and no log line in the protocol stream."""
    (tmp_path / "home").mkdir()
    # A failing rc: the server's warning about it must stay off the terminal.
    (tmp_path / "home" / ".bashrc").write_text("exit 3\n")
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bashrpc", "--artifacts-dir", str(tmp_path / "artifacts")],
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
        core = ClientCore()
        commands = {1: "exit 3", 2: long_command, 3: delete_command}
        wire = b"".join(
            core.request("bash", BashParams(command=command), id=ident)[1]
            for ident, command in commands.items()
        )
        assert b"\x7f" in wire
        os.write(master, wire)
        received, replies = _read_replies(master, set(commands), timeout=30)
        # Every line is the server's: no echo of a request, no log line.
        assert all(isinstance(m, ServerMessage) and m.method != "bash" for m in received), received
        assert result_of(replies[1], BashResult).exit_code == 3
        assert result_of(replies[2], BashResult).output == f"{len(long_text) + 1}\n"
        assert result_of(replies[3], BashResult).output == "4\n"
        # The terminal gets its own settings back once the server is done with it.
        before = termios.tcgetattr(slave)
        os.write(master, core.notification("exit"))
        assert proc.wait(timeout=EXIT_BOUND_SECONDS) == 0
        assert termios.tcgetattr(slave)[3] & termios.ECHO and not before[3] & termios.ECHO
    finally:
        proc.kill()
        proc.wait()
        os.close(master)
        os.close(slave)
    assert wait_until(lambda: owned_processes(proc.pid) == [], timeout=5)


DRAIN_SECONDS = 3.0


def test_sigterm_drains_running_commands(spawn_process: SpawnProcess) -> None:
    """SIGTERM with a drain: a notification, no new commands, the running ones
    finish if they can, the rest are aborted with their results, then the exit."""
    server = spawn_process("--drain-seconds", str(DRAIN_SECONDS))
    quick = server.request("bash", BashParams(command="sleep 1; echo finished", session_id="a"))
    slow = server.request("bash", BashParams(command="echo partial; sleep 300", session_id="b"))
    server.wait_for(
        lambda m: m.method == "bash/chunk" and notification_params(m, BashChunk).request_id == slow
    )
    signalled = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    notice = server.wait_for(lambda m: m.method == "server/draining")
    assert notification_params(notice, ServerDraining) == ServerDraining(seconds=DRAIN_SECONDS)
    refused = server.error("bash", BashParams(command="echo new", session_id="c"))
    assert refused.code == ErrorCode.SHUTTING_DOWN
    assert server.result("ping", EmptyParams()) == EmptyResult()
    finished = server.bash_result(quick, timeout=EXIT_BOUND_SECONDS)
    assert finished.output == "finished\n" and finished.exit_code == 0
    aborted = server.bash_result(slow, timeout=DRAIN_SECONDS + EXIT_BOUND_SECONDS)
    assert aborted.cancelled and aborted.output.endswith("partial\n")
    assert time.monotonic() - signalled >= DRAIN_SECONDS
    assert server.proc.wait(timeout=EXIT_BOUND_SECONDS) == 0
    assert wait_until(lambda: owned_processes(server.pid) == [], timeout=5)


def test_a_drain_ends_when_the_commands_do(spawn_process: SpawnProcess) -> None:
    server = spawn_process("--drain-seconds", "300")
    ident = server.request("bash", BashParams(command="echo started; sleep 0.5; echo finished"))
    server.wait_for(lambda m: m.method == "bash/chunk")
    server.proc.send_signal(signal.SIGTERM)
    result = server.bash_result(ident, timeout=EXIT_BOUND_SECONDS)
    assert result.output == "started\nfinished\n" and not result.cancelled
    assert server.proc.wait(timeout=EXIT_BOUND_SECONDS) == 0


def test_a_second_sigterm_cuts_the_drain_short(spawn_process: SpawnProcess) -> None:
    server = spawn_process("--drain-seconds", "300")
    ident = server.request("bash", BashParams(command="echo partial; sleep 300"))
    server.wait_for(lambda m: m.method == "bash/chunk")
    server.proc.send_signal(signal.SIGTERM)
    server.wait_for(lambda m: m.method == "server/draining")
    server.proc.send_signal(signal.SIGTERM)
    assert server.bash_result(ident, timeout=EXIT_BOUND_SECONDS).cancelled
    assert server.proc.wait(timeout=EXIT_BOUND_SECONDS) == 0


# Three times the client timeout: only pings keep the server from taking the client for gone.
PINGED_COMMAND_SECONDS = 3


def test_exec_pings_a_server_with_a_client_timeout(tmp_path: Path) -> None:
    """`bashrpc exec --client-timeout T` pings at a third of T, so a command
    longer than T runs to its end."""
    command = f"sleep {PINGED_COMMAND_SECONDS}; echo done"
    done = subprocess.run(
        [sys.executable, "-m", "bashrpc", "exec", "--client-timeout", "1", command],
        capture_output=True,
        env=server_environment(tmp_path),
        cwd=tmp_path,
        # Only a hang's bound: ten times the command (12 s was exceeded at a load of 12).
        timeout=10 * PINGED_COMMAND_SECONDS,
    )
    assert (done.returncode, done.stdout) == (0, b"done\n"), done.stderr
