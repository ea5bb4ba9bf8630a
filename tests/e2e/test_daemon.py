"""`bashrpc daemon`: many connections on one socket, its gates, its lock, its exit."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.errors import ErrorCode
from bashrpc.protocol.mcp import ConnectionSettings, HostOptions, SandboxOverrides
from bashrpc.protocol.mcpclient import initialize_params
from bashrpc.protocol.methods import BashParams
from tests.daemon import introduce
from tests.e2e.conftest import SpawnDaemon
from tests.rpc import marked_processes, request_line, server_environment, wait_until

pytestmark = pytest.mark.slow

# A bound that only catches a hang.
EXIT_BOUND_SECONDS = 15.0
NOBODY = 65534


def test_connections_at_once_each_with_its_own_sessions(spawn_daemon: SpawnDaemon) -> None:
    daemon = spawn_daemon()
    first, second = daemon.connect(), daemon.connect()
    assert first.bash("export MINE=first; cd /; echo ok").output == "ok\n"
    assert second.bash('echo "[$MINE]"; pwd').output == f"[]\n{daemon.socket_path.parents[1]}\n"
    assert first.bash('echo "$MINE"; pwd').output == "first\n/\n"
    first.close()
    second.close()


def test_a_connection_that_ends_takes_its_processes_and_only_its_own(
    spawn_daemon: SpawnDaemon,
) -> None:
    daemon = spawn_daemon()
    leaving, staying = daemon.connect(), daemon.connect()
    leaving.bash("exec -a daemon-leaving-mark sleep 300 &")
    staying.bash("exec -a daemon-staying-mark sleep 300 &")
    assert wait_until(lambda: marked_processes("daemon-leaving-mark"))
    assert wait_until(lambda: marked_processes("daemon-staying-mark"))
    leaving.close()
    assert wait_until(lambda: not marked_processes("daemon-leaving-mark"), timeout=10)
    assert marked_processes("daemon-staying-mark")
    assert staying.bash("echo still").output == "still\n"
    staying.close()
    assert wait_until(lambda: not marked_processes("daemon-staying-mark"), timeout=10)
    assert daemon.proc.poll() is None  # the daemon itself goes on


def test_socket_is_0600_in_a_0700_directory(spawn_daemon: SpawnDaemon) -> None:
    daemon = spawn_daemon().wait_listening()
    assert stat.S_IMODE(os.stat(daemon.socket_path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(daemon.socket_path.parent).st_mode) == 0o700


def test_a_directory_others_can_enter_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    done = _run_daemon(tmp_path, "--socket", str(shared / "d.sock"))
    assert done.returncode == 1
    assert "is mode 755: others may reach the socket" in done.stderr
    assert not (shared / "d.sock").exists()


def test_a_directory_of_another_owner_is_refused_for_that_reason(tmp_path: Path) -> None:
    taken = tmp_path / "taken"
    taken.mkdir(mode=0o700)
    os.chown(taken, NOBODY, NOBODY)
    done = _run_daemon(tmp_path, "--socket", str(taken / "d.sock"))
    assert done.returncode == 1
    assert f"belongs to uid {NOBODY}, not to us (uid {os.getuid()})" in done.stderr
    assert "mode" not in done.stderr
    assert not (taken / "d.sock").exists()


def test_a_second_daemon_on_the_path_fails_and_the_first_serves_on(
    spawn_daemon: SpawnDaemon, tmp_path: Path
) -> None:
    daemon = spawn_daemon().wait_listening()
    client = daemon.connect()
    done = _run_daemon(tmp_path, "--socket", str(daemon.socket_path))
    assert done.returncode == 1
    assert f"another daemon (pid {daemon.proc.pid}) is serving" in done.stderr
    assert client.bash("echo alive").output == "alive\n"
    assert daemon.connect().bash("echo new").output == "new\n"


def test_a_stale_socket_is_replaced(spawn_daemon: SpawnDaemon) -> None:
    dead = spawn_daemon().wait_listening()
    dead.proc.send_signal(signal.SIGKILL)
    dead.proc.wait()
    assert dead.socket_path.exists()  # left behind, with no daemon holding the lock
    daemon = spawn_daemon(socket_path=dead.socket_path)
    assert wait_until(lambda: "daemon listening" in daemon.stderr()), daemon.stderr()
    assert daemon.connect().bash("echo fresh").output == "fresh\n"


def test_a_peer_of_another_uid_is_refused_and_logged(spawn_daemon: SpawnDaemon) -> None:
    daemon = spawn_daemon().wait_listening()
    # Open the first gate (the modes) on purpose, so only the peer check stands.
    daemon.socket_path.parent.chmod(0o755)
    daemon.socket_path.chmod(0o666)
    # The pytest directories above it are private: reach the socket's own directory
    # through an fd opened before dropping root (dumpable again, so /proc/self is ours).
    probe = (
        "import ctypes, os, socket, sys\n"
        "d = os.open(os.path.dirname(sys.argv[1]), os.O_PATH)\n"
        f"os.setgid({NOBODY}); os.setuid({NOBODY})\n"
        "ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "s.connect(f'/proc/self/fd/{d}/' + os.path.basename(sys.argv[1]))\n"
        "s.settimeout(10)\n"
        "try:\n"
        '    s.sendall(b\'{"jsonrpc":"2.0","id":1,"method":"session/list"}\\n\')\n'
        "    print(repr(s.recv(100)))\n"
        "except (BrokenPipeError, ConnectionResetError):\n    print(repr(b''))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(daemon.socket_path)],
        capture_output=True,
        text=True,
        timeout=EXIT_BOUND_SECONDS,
    )
    assert done.stdout.strip() == "b''", done.stderr
    assert wait_until(lambda: f"uid {NOBODY}: not our uid" in daemon.stderr())


def test_an_idle_daemon_exits_after_its_last_connection(spawn_daemon: SpawnDaemon) -> None:
    daemon = spawn_daemon("--idle-exit", "1")
    client = daemon.connect()
    client.bash("true")
    assert daemon.proc.poll() is None
    client.close()
    assert daemon.proc.wait(timeout=EXIT_BOUND_SECONDS) == 0
    assert "--idle-exit" in daemon.stderr()


def test_sigterm_ends_every_connection_and_leaves_no_process(spawn_daemon: SpawnDaemon) -> None:
    daemon = spawn_daemon("--stay")
    clients = [daemon.connect() for _ in range(2)]
    for client in clients:
        client.bash("exec -a daemon-term-mark sleep 300 &")
    running = clients[0].request("bash", BashParams(command="sleep 60"))
    assert wait_until(lambda: len(marked_processes("daemon-term-mark")) == 2)
    daemon.proc.send_signal(signal.SIGTERM)
    assert daemon.proc.wait(timeout=EXIT_BOUND_SECONDS) == 0
    assert clients[0].bash_result(running).cancelled
    assert wait_until(lambda: daemon.owned_processes() == [], timeout=5)
    assert not marked_processes("daemon-term-mark")
    assert not daemon.socket_path.exists()


def _run_daemon(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bashrpc", "daemon", *args],
        capture_output=True,
        text=True,
        env=server_environment(tmp_path),
        timeout=EXIT_BOUND_SECONDS,
    )


def test_a_client_finds_its_sessions_after_a_reconnect_and_others_do_not(
    spawn_daemon: SpawnDaemon,
) -> None:
    daemon = spawn_daemon()
    first = introduce(daemon.connect(), "agent-1")
    first.bash("export KEPT=yes; cd /tmp; exec -a daemon-kept-mark sleep 300 &")
    first.bash("true", session_id="second")
    first.close()
    again = introduce(daemon.connect(), "agent-1")
    assert set(again.sessions()) == {"default", "second"}
    assert again.bash('echo "$KEPT"; pwd').output == "yes\n/tmp\n"
    assert marked_processes("daemon-kept-mark")
    stranger = introduce(daemon.connect(), "agent-2")
    assert stranger.sessions() == {}
    assert stranger.bash('echo "[$KEPT]"').output == "[]\n"
    anonymous = daemon.connect()  # no initialize: a view of its own, never another's
    assert anonymous.sessions() == {}
    for client in (again, stranger, anonymous):
        client.close()


def test_a_refused_initialize_leaves_the_connection_where_it_was(
    spawn_daemon: SpawnDaemon,
) -> None:
    """An initialize refused because it would tighten a busy session of the
    client it names changes nothing: the connection keeps its own sessions and
    host options, and sees none of that client's."""
    daemon = spawn_daemon()
    owner = introduce(daemon.connect(), "busy-owner")
    ident = owner.request("bash", BashParams(command="echo started; sleep 30", session_id="work"))
    owner.wait_for(lambda m: m.method == "bash/chunk")
    other = daemon.connect()
    assert other.bash("echo mine", session_id="own").output == "mine\n"
    strict = ConnectionSettings(sandbox=SandboxOverrides(mode="read-only"))
    refused = initialize_params(HostOptions(client_id="busy-owner", settings=strict))
    error = other.error("initialize", refused)
    assert error.code == ErrorCode.INVALID_PARAMS
    assert error.data == messages.SANDBOX_TIGHTEN_BUSY.format(session="work", mode="read-only")
    assert set(other.sessions()) == {"own"}
    assert other.bash("echo still; exit 3", session_id="own").exit_code == 3
    assert owner.abort(request_id=ident)
    for client in (owner, other):
        client.close()


def test_past_the_grace_a_clients_sessions_are_closed(spawn_daemon: SpawnDaemon) -> None:
    daemon = spawn_daemon("--detach-grace", "1")
    first = introduce(daemon.connect(), "brief")
    first.bash("export KEPT=yes; exec -a daemon-grace-mark sleep 300 &")
    assert wait_until(lambda: marked_processes("daemon-grace-mark"))
    first.close()
    assert wait_until(lambda: not marked_processes("daemon-grace-mark"), timeout=10)
    again = introduce(daemon.connect(), "brief")
    assert again.sessions() == {}
    assert again.bash('echo "[$KEPT]"').output == "[]\n"
    again.close()


def test_an_idle_daemon_waits_for_a_detached_clients_grace(spawn_daemon: SpawnDaemon) -> None:
    daemon = spawn_daemon("--idle-exit", "0", "--detach-grace", "3")
    client = introduce(daemon.connect(), "late")
    client.bash("true")
    client.close()
    started = time.monotonic()
    assert daemon.proc.wait(timeout=EXIT_BOUND_SECONDS) == 0
    assert time.monotonic() - started >= 2.5  # the sessions held it for their grace
    assert daemon.owned_processes() == []


def test_shutdown_ends_a_clients_sessions_for_good(spawn_daemon: SpawnDaemon) -> None:
    daemon = spawn_daemon()
    first = introduce(daemon.connect(), "done")
    first.bash("export KEPT=yes; exec -a daemon-done-mark sleep 300 &")
    reply = first.call("shutdown")
    assert reply.error is None and bytes(reply.result) == b"null"
    assert wait_until(lambda: not marked_processes("daemon-done-mark"), timeout=10)
    first.close()
    again = introduce(daemon.connect(), "done")
    assert again.sessions() == {}
    again.close()


def test_a_file_that_is_not_a_socket_is_never_replaced(tmp_path: Path) -> None:
    directory = tmp_path / "private"
    directory.mkdir(mode=0o700)
    precious = directory / "d.sock"
    precious.write_text("keep me")
    done = _run_daemon(tmp_path, "--socket", str(precious))
    assert done.returncode == 1
    assert "is not a socket" in done.stderr
    assert precious.read_text() == "keep me"


def test_a_clients_running_command_lives_on_past_a_cut(
    spawn_daemon: SpawnDaemon, tmp_path: Path
) -> None:
    daemon = spawn_daemon()
    finished = tmp_path / "finished"
    first = introduce(daemon.connect(), "rollout")
    first.bash("export KEPT=yes; cd /tmp")
    first.request("bash", BashParams(command=f"sleep 2; echo done > {finished}; export LATER=1"))
    assert wait_until(lambda: first.sessions()["default"].state == "busy")
    first.cut()
    again = introduce(daemon.connect(), "rollout")
    assert wait_until(lambda: finished.exists(), timeout=20)
    assert wait_until(lambda: again.sessions()["default"].state == "idle")
    # Nothing was aborted: the shell that ran it is the one that holds the state.
    assert again.bash('echo "$KEPT $LATER"; pwd').output == "yes 1\n/tmp\n"
    again.close()


def test_a_cut_connection_of_its_own_aborts_its_command(
    spawn_daemon: SpawnDaemon, tmp_path: Path
) -> None:
    daemon = spawn_daemon()
    finished = tmp_path / "finished"
    anonymous = daemon.connect()
    anonymous.request(
        "bash", BashParams(command=f"exec -a daemon-own-mark sleep 3; touch {finished}")
    )
    assert wait_until(lambda: marked_processes("daemon-own-mark"))
    anonymous.cut()
    assert wait_until(lambda: not marked_processes("daemon-own-mark"), timeout=10)
    time.sleep(3.5)
    assert not finished.exists()


def test_a_detached_command_dies_with_its_sessions_at_the_end_of_the_grace(
    spawn_daemon: SpawnDaemon,
) -> None:
    daemon = spawn_daemon("--detach-grace", "1")
    client = introduce(daemon.connect(), "short")
    client.request("bash", BashParams(command="exec -a daemon-detached-mark sleep 300"))
    assert wait_until(lambda: marked_processes("daemon-detached-mark"))
    client.cut()
    assert wait_until(lambda: not marked_processes("daemon-detached-mark"), timeout=10)
    assert wait_until(lambda: daemon.owned_processes() == [], timeout=5)


def test_pipelined_requests_take_turns_in_the_session_over_the_daemon(
    spawn_daemon: SpawnDaemon,
) -> None:
    """Written at once without waiting, from two connections of one client: each
    request runs in the session's shell after the ones before it, in arrival order."""
    daemon = spawn_daemon()
    first = introduce(daemon.connect(), "pipeliner")
    second = introduce(daemon.connect(), "pipeliner")
    first.bash("mkdir -p sub")
    commands = ["sleep 0.5; cd sub", "X=hello", 'pwd; echo "X=$X"', "echo one >> order.txt"]
    first.send_raw(
        b"".join(
            request_line(f"p{n}", "bash", BashParams(command=command))
            for n, command in enumerate(commands, 1)
        )
    )
    assert wait_until(lambda: len(first.sessions()["default"].queued or []) == 3)
    # Another connection's request to the session waits behind them all.
    later = second.request("bash", BashParams(command="echo two >> order.txt; pwd"))
    results = [first.bash_result(f"p{n}") for n in range(1, 5)]
    assert [r.exit_code for r in results] == [0, 0, 0, 0]
    workspace = daemon.socket_path.parents[1]
    assert results[2].output == f"{workspace}/sub\nX=hello\n"
    assert second.bash_result(later).output == f"{workspace}/sub\n"
    assert (workspace / "sub" / "order.txt").read_text() == "one\ntwo\n"
    first.close()
    second.close()


def test_a_cut_connection_is_not_logged_as_the_daemon_shutting_down(
    spawn_daemon: SpawnDaemon,
) -> None:
    """At the default log level, a client that goes away is no news."""
    daemon = spawn_daemon("--log-level", "WARNING").wait_listening()
    client = daemon.connect()
    client.request("bash", BashParams(command="seq 1 300000"))
    client.wait_for(lambda m: m.method == "bash/chunk")
    client.cut()
    witness = daemon.connect()
    assert witness.bash("echo alive").output == "alive\n"
    witness.close()
    assert "shutting down" not in daemon.stderr()
    assert "stdout" not in daemon.stderr()


def test_a_client_past_the_cap_ends_the_one_detached_longest_or_is_refused(
    spawn_daemon: SpawnDaemon, tmp_path: Path
) -> None:
    config = tmp_path / "clients.toml"
    config.write_text("[daemon]\nmaxClients = 1\n")
    daemon = spawn_daemon("--config", str(config)).wait_listening()
    alice = introduce(daemon.connect(), "alice")
    alice.bash("export MINE=alice")
    # Every kept client has a connection: a new one is refused, and says why.
    bob = daemon.connect()
    error = bob.error("initialize", initialize_params(HostOptions(client_id="bob")))
    assert error.code == ErrorCode.INVALID_PARAMS
    assert "maxClients" in error.message + str(error.data)
    bob.close()
    alice.close()  # detached: her sessions wait for the grace
    carol = introduce(daemon.connect(), "carol")
    assert carol.bash("echo in").output == "in\n"
    carol.close()
    # Alice's place went to carol: her shell, and what it held, are gone.
    back = introduce(daemon.connect(), "alice")
    assert back.bash('echo "[$MINE]"').output == "[]\n"
    back.close()


BUDGET_BYTES = 1024 * 1024


def padded(size: int) -> BashParams:
    """A `bash` request of about `size` bytes: a no-op with a long argument."""
    return BashParams(command=": " + "a" * size, session_id="budget")


def test_waiting_requests_count_against_the_daemons_budget(
    spawn_daemon: SpawnDaemon, tmp_path: Path
) -> None:
    """What waits for a session's turn is held in memory: its bytes count against
    `[daemon] resumeBudgetBytes` across every connection, and one that would pass
    it is refused at once, with the budget named; a finished one gives its room back."""
    config = tmp_path / "budget.toml"
    config.write_text(f"[daemon]\nresumeBudgetBytes = {BUDGET_BYTES}\n")
    daemon = spawn_daemon("--config", str(config))
    first = introduce(daemon.connect(), "budget")
    second = introduce(daemon.connect(), "budget")
    blocker = first.request("bash", BashParams(command="sleep 60", session_id="budget"))
    waiting = [first.request("bash", padded(300_000)) for _ in range(3)]
    assert wait_until(lambda: len(first.sessions()["budget"].queued or []) == 3)
    # 3 x 300 kB wait; 300 kB more from another connection would pass 1 MiB.
    refused = second.error("bash", padded(300_000))
    assert refused.code == ErrorCode.SERVER_BUSY
    assert "resumeBudgetBytes" in refused.message and str(BUDGET_BYTES) in refused.message
    # One request over the budget on its own is refused as clearly.
    alone = second.error("bash", padded(BUDGET_BYTES + 1))
    assert alone.code == ErrorCode.SERVER_BUSY and str(BUDGET_BYTES) in alone.message
    assert first.abort(request_id=blocker)
    first.response(blocker)
    assert [first.bash_result(ident).exit_code for ident in waiting] == [0, 0, 0]
    # Their bytes are free again.
    assert second.bash(": " + "a" * 300_000, session_id="budget").exit_code == 0
    first.close()
    second.close()
