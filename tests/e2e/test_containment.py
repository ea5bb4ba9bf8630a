"""Nothing a command starts outlives its abort, its timeout, its session or the server.

Escapees are found by a unique marker in their command line (`exec -a`), not by
anything in their environment, because `env -i` clears the environment.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from bashrpc.protocol.methods import (
    AbortBashParams,
    BashChunk,
    BashParams,
    SessionCloseParams,
    SessionCloseResult,
)
from tests.conftest import SpawnProcess
from tests.rpc import ServerProcess, cmdline, marked_processes, wait_until
from tests.sandboxing import skip_without_sandbox

# Every case here starts processes of its own: slow (see tests/conftest.py).
pytestmark = pytest.mark.slow

# The kill grace is 2 s; the bound only catches a hang.
GONE_SECONDS = 5.0
# Without cgroups, what a shell started is recorded once a second.
RECORDED_SECONDS = 1.5
MODES = {
    "cgroup": "",
    "ancestry": "[kill]\ncgroups = false\n",
    # Each shell in a PID namespace of its own, which dies with bwrap's init.
    "sandbox": '[sandbox]\nmode = "workspace-write"\n',
}


@pytest.fixture(params=sorted(MODES))
def mode(request: pytest.FixtureRequest) -> str:
    if request.param == "sandbox":
        skip_without_sandbox()
    return str(request.param)


@pytest.fixture
def server(spawn_process: SpawnProcess, tmp_path: Path, mode: str) -> ServerProcess:
    """A server process tracking shells by cgroup, one by ancestry, one sandboxing them."""
    cfg = tmp_path / "containment.toml"
    cfg.write_text(MODES[mode])
    started: ServerProcess = spawn_process("--config", str(cfg), new_session=True)
    return started


# Issue: a killed server's commands must be gone within 3 s.
KILLED_SERVER_SECONDS = 3.0


def escapees(marker: str) -> str:
    """Processes that leave their shell's group, session, parentage and environment."""
    sleeper = f"exec -a {marker} sleep 300"
    return "\n".join(
        [
            # setsid + env -i + a double fork: no group, no session, no tag, no parent.
            f"( setsid env -i bash -c '{sleeper}' & )",
            f"nohup bash -c '{sleeper}' >/dev/null 2>&1 &",
            f"( ( {sleeper} ) & )",
            # A daemon that closed every fd, so it does not even hold the output open.
            f"( exec 0<&- 1>&- 2>&-; setsid env -i bash -c '{sleeper}' 0<&- 1>&- 2>&- & )",
            "echo spawned",
        ]
    )


ESCAPEE_COUNT = 4


def spawn_escapees(server: ServerProcess, marker: str, session: str) -> None:
    assert server.bash(escapees(marker), session_id=session).output == "spawned\n"
    assert wait_until(lambda: len(marked_processes(marker)) == ESCAPEE_COUNT, timeout=5)


def test_escapees_die_when_their_command_is_aborted(server: ServerProcess) -> None:
    marker = f"bashrpc-abort-{uuid.uuid4().hex}"
    ident = server.request("bash", BashParams(command=escapees(marker) + "; sleep 60"))
    server.wait_for(lambda m: m.method == "bash/chunk")
    assert wait_until(lambda: len(marked_processes(marker)) == ESCAPEE_COUNT, timeout=5)
    assert server.abort(request_id=ident)
    assert server.bash_result(ident).cancelled
    assert wait_until(lambda: marked_processes(marker) == [], timeout=GONE_SECONDS)


def test_escapees_die_when_their_command_times_out(server: ServerProcess) -> None:
    marker = f"bashrpc-timeout-{uuid.uuid4().hex}"
    result = server.bash(escapees(marker) + "; sleep 60", timeout=1)
    assert result.timed_out
    assert wait_until(lambda: marked_processes(marker) == [], timeout=GONE_SECONDS)


def test_escapees_die_when_their_session_closes(server: ServerProcess) -> None:
    marker = f"bashrpc-close-{uuid.uuid4().hex}"
    spawn_escapees(server, marker, "doomed")
    other = f"bashrpc-other-{uuid.uuid4().hex}"
    spawn_escapees(server, other, "kept")
    assert server.result(
        "session/close", SessionCloseParams(session_id="doomed")
    ) == SessionCloseResult(closed=True)
    assert wait_until(lambda: marked_processes(marker) == [], timeout=GONE_SECONDS)
    # Another session's processes are not collateral damage.
    assert len(marked_processes(other)) == ESCAPEE_COUNT
    server.result("session/close", SessionCloseParams(session_id="kept"))
    assert wait_until(lambda: marked_processes(other) == [], timeout=GONE_SECONDS)


def test_escapees_of_a_pty_command_die_when_it_ends(server: ServerProcess) -> None:
    marker = f"bashrpc-pty-{uuid.uuid4().hex}"
    assert server.bash(escapees(marker), pty=True).output == "spawned\n"
    assert wait_until(lambda: marked_processes(marker) == [], timeout=GONE_SECONDS)


@pytest.mark.parametrize("target", ["server", "group"])
def test_sigkill_of_the_server_leaves_nothing_running(
    server: ServerProcess, mode: str, target: str
) -> None:
    marker = f"bashrpc-sigkill-{uuid.uuid4().hex}"
    spawn_escapees(server, marker, "default")
    server.request("bash", BashParams(command=f"exec -a {marker} sleep 300", session_id="busy"))
    assert wait_until(lambda: len(marked_processes(marker)) == ESCAPEE_COUNT + 1, timeout=5)
    if mode == "ancestry":
        time.sleep(RECORDED_SECONDS)
    if target == "server":
        os.kill(server.pid, signal.SIGKILL)
    else:
        os.killpg(server.pid, signal.SIGKILL)
    server.proc.wait(timeout=GONE_SECONDS)
    assert wait_until(lambda: marked_processes(marker) == [], timeout=KILLED_SERVER_SECONDS)


def test_exec_client_killed_with_its_group_leaves_nothing(tmp_path: Path) -> None:
    """The repro from the report: `timeout -s KILL 3 bashrpc exec 'exec -a TAG sleep 20'`.
    As `timeout` does, the client runs in a group of its own, which gets the SIGKILL;
    here it comes once the command is seen running, not after a fixed 3 s."""
    marker = f"bashrpc-exec-{uuid.uuid4().hex}"
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path), "HOME": str(tmp_path)}
    command = f"exec -a {marker} sleep 20"
    client = subprocess.Popen(
        [sys.executable, "-m", "bashrpc", "exec", command],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=tmp_path,
        start_new_session=True,
    )
    try:
        # The sleep itself (`exec -a` made the marker its name); the client's own
        # command line carries the marker too.
        sleeping = f"{marker} 20"
        assert wait_until(lambda: sleeping in map(cmdline, marked_processes(marker)), timeout=10)
        os.killpg(client.pid, signal.SIGKILL)
        assert client.wait(timeout=GONE_SECONDS) == -signal.SIGKILL
    finally:
        client.kill()
        client.wait()
    assert wait_until(lambda: marked_processes(marker) == [], timeout=KILLED_SERVER_SECONDS)


def test_aborted_command_runs_nothing_after_the_abort(server: ServerProcess) -> None:
    # The shell survives a TERM it traps, and would then run the next statement.
    ident = server.request(
        "bash", BashParams(command="trap 'true' TERM; echo go; sleep 10; echo done")
    )
    server.wait_for(lambda m: m.method == "bash/chunk")
    server.result("abort_bash", AbortBashParams(request_id=ident))
    result = server.bash_result(ident)
    assert result.cancelled and "done" not in result.output
    timed = server.bash("trap 'true' TERM; sleep 10; echo done", timeout=1)
    assert timed.timed_out and "done" not in timed.output


ROUNDS = 200
# Fifty of each kind at once: a hundred shells killed together, in four rounds.
PARALLEL = 50
LOAD_SETTINGS = f"[sessions]\nmaxShells = {2 * PARALLEL}\n"


@pytest.mark.slow
# The sandbox's kill is its namespace's, checked above; the load is for the trackers.
@pytest.mark.parametrize("mode", ["cgroup", "ancestry"])
def test_two_hundred_timeouts_and_aborts_on_busy_cores(
    spawn_process: SpawnProcess, tmp_path: Path, mode: str
) -> None:
    cfg = tmp_path / "load.toml"
    cfg.write_text(MODES[mode] + LOAD_SETTINGS)
    server: ServerProcess = spawn_process("--config", str(cfg), new_session=True)
    # The burners keep every core busy, at the lowest priority: they take only
    # the time nothing else wants, so the rest of the suite is not slowed.
    code = "import os\nos.nice(19)\nwhile True: pass"
    burners = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(os.cpu_count() or 2)]
    try:
        outputs: list[str] = []
        for start in range(0, ROUNDS, PARALLEL):
            timed = [
                server.request(
                    "bash",
                    BashParams(command="sleep 10; echo done", timeout=1, session_id=f"t{i}"),
                )
                for i in range(PARALLEL)
            ]
            aborted = [
                server.request(
                    "bash", BashParams(command="sleep 10; echo done", session_id=f"a{i}")
                )
                for i in range(PARALLEL)
            ]
            time.sleep(0.3)
            for ident in aborted:
                server.result("abort_bash", AbortBashParams(request_id=ident))
            for ident in timed + aborted:
                result = server.bash_result(ident, timeout=60)
                assert result.cancelled, (start, result)
                outputs.append(result.output)
        chunks = "".join(c.text for c in server.notified("bash/chunk", BashChunk))
        assert len(outputs) == 2 * ROUNDS
        assert not [o for o in outputs if "done" in o]
        assert "done" not in chunks
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
