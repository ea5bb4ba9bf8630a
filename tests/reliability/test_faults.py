"""Faults real agents hit: killed shells, stubborn and escaping processes,
vanishing clients, full disks and fork storms. Nothing may be lost or left running."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.methods import BashParams, SessionCloseParams, SessionCloseResult
from bashrpc.server.output.artifactids import COUNTER_NAME
from tests.conftest import SpawnProcess
from tests.rpc import (
    ServerProcess,
    live_pids,
    logged,
    owned_processes,
    proc_stat,
    process_gone,
    server_environment,
    wait_until,
)

# Every case here starts processes of its own: slow (see tests/conftest.py).
pytestmark = pytest.mark.slow

GRACE_SECONDS = 2.0


@pytest.fixture
def server(process: ServerProcess) -> ServerProcess:
    """Faults of the process: killed shells and clients, closed pipes, the subreaper."""
    return process


@pytest.fixture
def spawn(spawn_process: SpawnProcess) -> SpawnProcess:
    return spawn_process


# Exits take 0.1-0.2 s; the bound only catches a hang.
EXIT_BOUND_SECONDS = 30.0


def assert_all_gone(server_pid: int) -> None:
    assert wait_until(lambda: owned_processes(server_pid) == [], timeout=5)


def test_shell_killed_from_outside_mid_command(server: ServerProcess) -> None:
    server.bash("true")
    pid = server.sessions()["default"].pid
    assert pid is not None
    ident = server.request("bash", BashParams(command="echo started; sleep 30"))
    server.wait_for(lambda m: m.method == "bash/chunk")
    os.kill(pid, 9)
    result = server.bash_result(ident, timeout=EXIT_BOUND_SECONDS)
    assert result.exit_code == 137 and result.shell_restarted
    assert result.output == f"{messages.SHELL_RESTARTED}\nstarted\n"
    assert server.bash("echo next").output == "next\n"
    assert wait_until(lambda: not [c for c in server.owned_commands() if "sleep 30" in c])


def test_term_ignoring_grandchild_holding_the_pipe(server: ServerProcess) -> None:
    command = "bash -c 'trap \"\" TERM; sleep 300' & sleep 60"
    started = time.monotonic()
    result = server.bash(command, timeout=2)
    elapsed = time.monotonic() - started
    # Well before the 60 s the command would take; generous for a loaded machine.
    assert result.timed_out and elapsed < 2 + GRACE_SECONDS + 10
    assert_all_gone(server.server_pid)
    assert server.bash("echo fine").output == "fine\n"


ESCAPES = {
    "double fork": "(setsid sleep 300 &)",
    "nohup": "nohup sleep 301 >/dev/null 2>&1 &",
    "disown": "sleep 302 & disown",
}


def test_escaped_processes_die_with_their_session(server: ServerProcess) -> None:
    for name, command in ESCAPES.items():
        server.bash(command, session_id=name)
    assert wait_until(lambda: len(server.owned_processes()) >= 2 * len(ESCAPES))
    for name in ESCAPES:
        assert server.result("session/close", SessionCloseParams(session_id=name)) == (
            SessionCloseResult(closed=True)
        )
    assert_all_gone(server.server_pid)


def test_escaped_processes_die_at_shutdown(server: ServerProcess) -> None:
    server.bash("\n".join(ESCAPES.values()))
    assert wait_until(lambda: len(server.owned_processes()) >= 4)
    assert server.close(timeout=EXIT_BOUND_SECONDS) == 0
    assert_all_gone(server.server_pid)


def test_stdin_closed_mid_command(server: ServerProcess) -> None:
    ident = server.request("bash", BashParams(command="sleep 300 & setsid sleep 301 & sleep 60"))
    time.sleep(0.3)
    assert server.close(timeout=EXIT_BOUND_SECONDS) == 0
    assert server.bash_result(ident, timeout=1).cancelled
    assert_all_gone(server.server_pid)


CLIENT_SCRIPT = """
import subprocess, sys, time
from bashrpc.protocol.client import ClientCore
from bashrpc.protocol.methods import BashParams
server = subprocess.Popen(
    [sys.executable, "-m", "bashrpc", "--artifacts-dir", sys.argv[1]],
    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
)
command = "sleep 300 & setsid sleep 301 & echo hi; sleep 60"
server.stdin.write(ClientCore().request("bash", BashParams(command=command))[1])
server.stdin.flush()
server.stdout.readline()
print(server.pid, flush=True)
time.sleep(60)
"""


def test_client_killed_mid_command(tmp_path: Path) -> None:
    # The client owns the server's pipes; SIGKILL it and the server must see EOF.
    client = subprocess.Popen(
        [sys.executable, "-c", CLIENT_SCRIPT, str(tmp_path / "a")],
        stdout=subprocess.PIPE,
        cwd=Path(__file__).parents[2],
    )
    assert client.stdout is not None
    server_pid = int(client.stdout.readline())
    assert owned_processes(server_pid)
    client.kill()
    client.wait()
    assert wait_until(lambda: process_gone(server_pid), timeout=EXIT_BOUND_SECONDS)
    assert_all_gone(server_pid)


def test_stdout_closed_mid_command(server: ServerProcess) -> None:
    server.request(
        "bash", BashParams(command="sleep 300 & while :; do echo spam; sleep 0.01; done")
    )
    server.wait_for(lambda m: m.method == "bash/chunk")
    assert server.proc.stdout is not None
    server.proc.stdout.close()
    assert server.proc.wait(timeout=EXIT_BOUND_SECONDS) == 0
    assert_all_gone(server.server_pid)


def test_artifacts_on_a_full_disk(spawn: SpawnProcess, tmp_path: Path) -> None:
    limit = 200 * 1024

    def small_disk() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    server = spawn(preexec_fn=small_disk)
    result = server.bash("seq 1 200000")
    assert result.truncated and result.artifact_id is None
    assert result.output.endswith("199999\n200000\n") and result.total_lines == 200000
    assert logged(server, "could not be written")
    # No partial artifact left; the id counter stays, as it must.
    assert [p.name for p in server.artifacts_dir.iterdir()] == [COUNTER_NAME]
    assert server.bash("echo carries on").output == "carries on\n"


def test_unusable_artifacts_directory(spawn: SpawnProcess, tmp_path: Path) -> None:
    # Root ignores permission bits, so the directory is made impossible instead.
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    server = spawn("--artifacts-dir", str(blocker / "artifacts"))
    result = server.bash("seq 1 100000")
    assert result.truncated and result.artifact_id is None
    assert result.output.endswith("100000\n")
    assert logged(server, "unusable")
    assert server.bash("echo ok").output == "ok\n"


def test_fork_storm_leaves_no_zombies(server: ServerProcess) -> None:
    result = server.bash("for i in $(seq 500); do (sleep 0.2 &) ; done; echo forked")
    assert result.output == "forked\n"

    def zombies() -> list[int]:
        return [pid for pid in live_pids() if proc_stat(pid) == ("Z", server.server_pid)]

    # The orphans were re-parented to the server (its subreaper), died after
    # 0.2 s, and must have been reaped by it since.
    time.sleep(0.5)
    assert wait_until(lambda: zombies() == [], timeout=10)
    assert not process_gone(server.server_pid)


# Servers killed as their runtime directory appears: on the code before the fix,
# between one in twenty and one in seven of them left it behind (2 cores).
STARTUP_KILLS = 40
SWEEP_BOUND_SECONDS = 30.0
# Well inside the moment before the watchdog is away (a fork, about 1 ms here).
POLL_SECONDS = 0.0002


def test_a_server_killed_as_it_starts_leaves_no_runtime_directory(tmp_path: Path) -> None:
    """SIGKILL to the server's process group the moment its runtime directory
    appears, before it has served anything: the directory is its watchdog's
    from its making, so the watchdog (in a session of its own) removes it."""
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    env = server_environment(tmp_path, {"TMPDIR": str(runtime)})
    for _ in range(STARTUP_KILLS):
        server = subprocess.Popen(
            [sys.executable, "-m", "bashrpc"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        assert wait_until(lambda: os.listdir(runtime), SWEEP_BOUND_SECONDS, POLL_SECONDS)
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
        assert wait_until(lambda: not os.listdir(runtime), SWEEP_BOUND_SECONDS), os.listdir(runtime)
