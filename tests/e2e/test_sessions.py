"""The user's shell setup (rc snapshot) and the lifecycle of sessions' shells."""

from __future__ import annotations

import stat
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.errors import ErrorCode
from bashrpc.protocol.methods import BashParams, SessionOpenParams
from bashrpc.server.runtime.containment import procs
from bashrpc.server.runtime.local import snapshot
from bashrpc.server.runtime.seam import noterminal
from tests.conftest import SpawnInProcess, SpawnProcess
from tests.rpc import ServerProcess, marked_processes, process_gone, wait_until

# The rc capture's deadline, shortened here; the bound only catches a hang.
SNAPSHOT_TIMEOUT = "[bash]\nsnapshotTimeout = 1\n"
SNAPSHOT_BOUND_SECONDS = 1 + 10

RC = r"""
alias ll='echo "aliased ll"'
greet() { printf '<%s>' "$@"; echo " it's \"quoted\" \$HOME"; }
_hidden() { :; }
grep() { echo "shadowed grep"; }
alias ls='echo shadowed ls'
shopt -s globstar
set -o noclobber
export PATH="$HOME/rc-bin:$PATH"
"""


def write_rc(tmp: Path, text: str) -> None:
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    (home / ".bashrc").write_text(text)


def test_the_next_command_sees_the_users_shell(spawn: SpawnInProcess, tmp_path: Path) -> None:
    write_rc(tmp_path, RC)
    server = spawn()
    out = server.bash(
        "ll; greet a 'b c'; shopt -q globstar && echo globstar;"
        ' [[ -o noclobber ]] && echo noclobber; p=${PATH#*:}; echo "${PATH%%:*} ${p%%:*}"'
    ).output
    assert out == (
        f'aliased ll\n<a><b c> it\'s "quoted" $HOME\nglobstar\nnoclobber\n'
        f"{noterminal.FOLDER} {tmp_path}/home/rc-bin\n"
    )
    # Names starting with _ and shadows of common tools are not carried over.
    listed = server.bash("type -t _hidden || echo no-hidden; echo x | grep -c x; ls /dev/null")
    assert listed.output == "no-hidden\n1\n/dev/null\n"
    assert server.stderr() == ""


def test_snapshot_file_is_private_and_removed_at_exit(
    spawn_process: SpawnProcess, tmp_path: Path
) -> None:
    write_rc(tmp_path, RC)
    private_tmp = tmp_path / "tmpdir"
    private_tmp.mkdir()
    server = spawn_process(env={"TMPDIR": str(private_tmp)})
    snapshot = Path(server.bash('printf %s "$BASHRPC_SNAPSHOT"').output)
    assert stat.S_IMODE(snapshot.stat().st_mode) == 0o600
    assert stat.S_IMODE(snapshot.parent.stat().st_mode) == 0o700
    assert "greet ()" in snapshot.read_text()
    assert server.close() == 0
    assert not snapshot.exists() and list(private_tmp.iterdir()) == []


def test_snapshot_can_be_turned_off(spawn: SpawnInProcess, tmp_path: Path) -> None:
    write_rc(tmp_path, RC)
    server = spawn("[bash]\nsnapshot = false\n")
    assert "command not found" in server.bash("ll").output


def test_set_e_in_the_rc_is_not_carried_over(spawn: SpawnInProcess, tmp_path: Path) -> None:
    write_rc(tmp_path, "set -e\nset -u\nalias ok='echo ok'\n")
    server = spawn()
    first = server.bash("false; echo after-false")
    assert first.output == "after-false\n" and first.exit_code == 0
    pid = server.sessions()["default"].pid
    assert server.bash("ok").output == "ok\n"
    assert server.sessions()["default"].pid == pid


@pytest.mark.parametrize(
    ("name", "rc"),
    [
        ("echoes", "echo 'hello from rc'; printf 'noise\\n' >&2\nalias mark='echo marked'\n"),
        ("reads", "read -r line; read -r -p 'prompt? ' other\nalias mark='echo marked'\n"),
        ("exits", "alias mark='echo marked'\nexit 1\n"),
        ("loops", "while :; do :; done\n"),
        ("fancy prompt", "PS1='`date` $(whoami) \\u@\\h \\w'\nPROMPT_COMMAND='echo prompt'\n"),
    ],
)
def test_a_hostile_rc_never_breaks_the_server(
    spawn: SpawnInProcess, tmp_path: Path, name: str, rc: str
) -> None:
    write_rc(tmp_path, rc)
    server = spawn(SNAPSHOT_TIMEOUT)
    started = time.monotonic()
    result = server.bash("echo works", wait=SNAPSHOT_BOUND_SECONDS)
    assert time.monotonic() - started < SNAPSHOT_BOUND_SECONDS
    assert result.output == "works\n" and result.exit_code == 0
    assert server.bash("echo again").output == "again\n"
    if name == "loops":
        warnings = [line for line in server.stderr().splitlines() if "WARNING" in line]
        assert len(warnings) == 1 and "did not finish" in warnings[0]
    if "alias mark" in rc:
        assert server.bash("mark").output == "marked\n"
    assert "hello from rc" not in result.output and "prompt" not in result.output


def test_a_setup_over_the_bound_is_left_out(
    spawn: SpawnInProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the capture dumps is read bounded: past the bound, shells start
    without it, and one warning says why."""
    monkeypatch.setattr(snapshot, "MAX_SNAPSHOT_BYTES", 64 * 1024)
    big = "x" * (128 * 1024)
    write_rc(tmp_path, f"big() {{ : {big}; }}\nalias mark='echo marked'\n")
    server = spawn()
    assert "command not found" in server.bash("mark").output
    warnings = [line for line in server.stderr().splitlines() if "WARNING" in line]
    assert len(warnings) == 1 and messages.SNAPSHOT_TOO_LARGE.split("{")[0] in warnings[0]


def test_least_recently_used_shell_is_evicted(spawn: SpawnInProcess, tmp_path: Path) -> None:
    server = spawn("[sessions]\nmaxShells = 2\n")
    pids: dict[str, int] = {}
    for session in ("a", "b", "c"):
        server.bash("true", session_id=session)
        pid = server.sessions()[session].pid
        assert pid is not None
        pids[session] = pid
    assert wait_until(lambda: process_gone(pids["a"]))
    listed = {name: info.pid for name, info in server.sessions().items()}
    assert listed == {"a": None, "b": pids["b"], "c": pids["c"]}
    # Session a still works: it gets a fresh shell, evicting b, now the least recent,
    # and says its old shell's state is gone.
    result = server.bash("echo back", session_id="a")
    assert result.output == f"{messages.SHELL_RESTARTED}\nback\n" and result.shell_restarted
    assert wait_until(lambda: process_gone(pids["b"]))


def test_too_many_live_shells(spawn: SpawnInProcess, tmp_path: Path) -> None:
    server = spawn("[sessions]\nmaxShells = 1\n")
    busy = [server.request("bash", BashParams(command="sleep 3", session_id=s)) for s in ("a", "b")]
    time.sleep(0.5)
    error = server.error("bash", BashParams(command="true", session_id="c"))
    assert error.code == ErrorCode.TOO_MANY_SHELLS
    assert error.message == messages.TOO_MANY_SHELLS
    for ident in busy:
        assert server.bash_result(ident).exit_code == 0
    assert server.bash("echo ok", session_id="c").output == "ok\n"


def test_idle_shell_is_closed(spawn: SpawnInProcess, tmp_path: Path) -> None:
    server = spawn("[sessions]\nidleSeconds = 1\n")
    server.bash("export KEPT=1")
    pid = server.sessions()["default"].pid
    assert pid is not None
    assert wait_until(lambda: process_gone(pid), timeout=10)
    assert server.sessions()["default"].pid is None
    assert server.bash('echo "[$KEPT]"').output == f"{messages.SHELL_RESTARTED}\n[]\n"


def test_shell_with_background_jobs_survives_idle_eviction(
    spawn: SpawnInProcess, tmp_path: Path
) -> None:
    server = spawn("[sessions]\nidleSeconds = 1\n")
    server.bash("sleep 300 &")
    server.bash("true", session_id="plain")
    plain = server.sessions()["plain"].pid
    assert plain is not None
    assert wait_until(lambda: process_gone(plain), timeout=10)
    time.sleep(1.5)
    kept = server.sessions()["default"]
    assert kept.pid is not None and not process_gone(kept.pid)
    assert kept.background_jobs == 1


def test_pty_commands_see_the_users_shell_too(spawn: SpawnInProcess, tmp_path: Path) -> None:
    write_rc(tmp_path, RC)
    server = spawn()
    out = server.bash("ll; [[ -o noclobber ]] && echo noclobber", pty=True).output
    assert out == "aliased ll\nnoclobber\n"


SESSION_LIST_SESSIONS = 60
SESSION_LIST_CALLS = 5
SESSION_LIST_ROUNDS = 4
# A call may cost this many reads of all of /proc, measured on the spot (the 60 trees
# walked cost about 2 here); one scan per session would cost about 60 of them.
SESSION_LIST_FULL_SCANS_ALLOWED = 20


def full_proc_scan_seconds() -> float:
    """The CPU time of reading every process's stat once, the best of a few tries:
    the unit a call's cost is judged in, as fast or as slow as this machine is now."""
    tries = []
    for _ in range(SESSION_LIST_ROUNDS):
        before = time.process_time()
        for pid in procs.all_pids():
            procs.read_stat(pid)
        tries.append(time.process_time() - before)
    return min(tries)


@pytest.mark.parametrize("tracking", ["", "[kill]\ncgroups = false\n"], ids=["cgroup", "ancestry"])
def test_session_list_scans_once_per_call(spawn: SpawnInProcess, tracking: str) -> None:
    server = spawn("[sessions]\nmaxShells = 64\n" + tracking)
    for i in range(SESSION_LIST_SESSIONS):
        server.bash("sleep 300 &" if i % 2 else "true", session_id=f"s{i}")
    jobs = {name: info.background_jobs for name, info in server.sessions().items()}
    assert all(jobs[f"s{i}"] == i % 2 for i in range(SESSION_LIST_SESSIONS))
    # In-process, the server's CPU time is this process's. The best of a few rounds:
    # a collection of this process's garbage or a busy host inflates one round, and
    # a scan per session would show in every round.
    rounds = []
    for _ in range(SESSION_LIST_ROUNDS):
        before = time.process_time()
        for _ in range(SESSION_LIST_CALLS):
            server.sessions()
        rounds.append((time.process_time() - before) / SESSION_LIST_CALLS)
    unit = full_proc_scan_seconds()
    assert min(rounds) < SESSION_LIST_FULL_SCANS_ALLOWED * unit, (rounds, unit)


@pytest.mark.parametrize("tracking", ["", "[kill]\ncgroups = false\n"], ids=["cgroup", "ancestry"])
def test_what_the_rc_starts_dies_with_its_capture(
    spawn_process: SpawnProcess, tmp_path: Path, tracking: str
) -> None:
    """The capture is in its tracker before the rc runs a line, so an agent the rc
    starts (and detaches) is killed with it, never left running. A process of its
    own: a detached agent outlives the capture's shell, and only a subreaper
    server gets it back in ancestry mode."""
    marker = f"bashrpc-rc-{uuid.uuid4().hex}"
    agent = f"(setsid bash -c 'exec -a {marker} sleep 300' &)"
    write_rc(tmp_path, f"{agent}\nalias mark='echo marked'\n")
    cfg = tmp_path / "tracking.toml"
    cfg.write_text(tracking)
    server = spawn_process("--config", str(cfg))
    assert server.bash("mark").output == "marked\n"  # the capture has finished
    assert wait_until(lambda: marked_processes(marker) == [], timeout=5)


# An rc that holds a lock while it runs, and lets go of it in its EXIT trap, as
# pyenv's rehash does: killed outright, it would leave the lock behind for good.
LOCKING_RC = 'trap \'rm -f "$HOME/lock"\' EXIT; touch "$HOME/lock"; sleep 100\n'


def test_an_rc_given_up_on_runs_its_exit_trap(spawn: SpawnInProcess, tmp_path: Path) -> None:
    write_rc(tmp_path, LOCKING_RC)
    server = spawn("[bash]\nsnapshotTimeout = 0.3\n")
    lock = tmp_path / "home" / "lock"
    assert wait_until(lock.exists, timeout=SNAPSHOT_BOUND_SECONDS)
    # The first command waits for the capture to be given up on.
    assert server.bash("echo works", wait=SNAPSHOT_BOUND_SECONDS).output == "works\n"
    assert not lock.exists()


# A trap that forks and takes a while, as on a loaded machine: it still runs out.
SLOW_TRAP_RC = 'trap \'sleep 1; rm -f "$HOME/lock"\' EXIT; touch "$HOME/lock"; sleep 100\n'


@pytest.mark.parametrize("rc", [LOCKING_RC, SLOW_TRAP_RC], ids=["quick-trap", "slow-trap"])
def test_an_rc_cut_short_by_shutdown_runs_its_exit_trap(
    spawn_process: SpawnProcess, tmp_path: Path, rc: str
) -> None:
    write_rc(tmp_path, rc)
    lock = tmp_path / "home" / "lock"
    server = spawn_process()
    assert wait_until(lock.exists, timeout=SNAPSHOT_BOUND_SECONDS)
    assert server.close() == 0
    assert not lock.exists()


# An rc that sleeps: at the end there is nothing in it to let finish.
SLEEPING_RC = 'touch "$HOME/started"; sleep 30\n'
# The end's wait for a capture that makes no progress (a few hundred ms), 10x;
# below the 5 s a progressing capture may take, which it once always got.
SLEEPING_RC_EXIT_BOUND_SECONDS = 3.0


def test_a_sleeping_rc_does_not_hold_up_the_end(tmp_path: Path) -> None:
    """The end lets a capture finish only while it makes progress: a user whose
    rc sleeps does not wait seconds for every server's exit."""
    write_rc(tmp_path, SLEEPING_RC)
    server = ServerProcess(tmp=tmp_path)
    try:
        started = tmp_path / "home" / "started"
        assert wait_until(started.exists, timeout=SNAPSHOT_BOUND_SECONDS)
        begun = time.monotonic()
        assert server.close(timeout=CLOSE_BOUND_SECONDS) == 0
        assert time.monotonic() - begun < SLEEPING_RC_EXIT_BOUND_SECONDS
    finally:
        server.kill()


# Servers shut down at once, so that some are preempted between the signals of
# one hang-up: the shell must hold its SIGHUP before its foreground child can
# die of one, or it takes the child's death for the end of its script, runs
# its EXIT trap as at a normal exit, and the SIGHUP then ends it mid-trap.
PARALLEL_CAPTURES = 12
# The captures must still be running when the servers are told to end, however
# slowly twelve servers start on a busy machine: no deadline of their own.
NO_DEADLINE = "[bash]\nsnapshotTimeout = 600\n"
# Only catches a hang: the servers' start, and their end (each trap takes 1 s).
PARALLEL_BOUND_SECONDS = 120.0


def test_captures_hung_up_at_once_all_finish_their_exit_traps(tmp_path: Path) -> None:
    config = tmp_path / "no-deadline.toml"
    config.write_text(NO_DEADLINE)
    servers: list[ServerProcess] = []
    try:
        for index in range(PARALLEL_CAPTURES):
            tmp = tmp_path / f"s{index}"
            tmp.mkdir()
            write_rc(tmp, SLOW_TRAP_RC)
            servers.append(ServerProcess("--config", str(config), tmp=tmp))
        locks = [server.tmp / "home" / "lock" for server in servers]
        assert wait_until(lambda: all(lock.exists() for lock in locks), PARALLEL_BOUND_SECONDS)
        for server in servers:
            assert server.proc.stdin is not None
            server.proc.stdin.close()
        for server in servers:
            assert server.close(timeout=PARALLEL_BOUND_SECONDS) == 0
        assert [lock for lock in locks if lock.exists()] == []
    finally:
        for server in servers:
            server.kill()


# pyenv's rehash, in a process of its own as `pyenv init -` runs it: it takes its
# lock, and only then sets the trap that lets go of it. A signal between the two
# (here a second wide) leaves the lock behind, whatever the trap. The window is
# work, as pyenv's is (forks, CPU): an rc that sleeps there cannot be told from
# one that sleeps for good, which the end does not wait for.
BUSY_SECOND = (
    "end=$((${EPOCHREALTIME/./} + 1000000)); while ((${EPOCHREALTIME/./} < end)); do :; done"
)
UNGUARDED_LOCK_RC = (
    'bash -c \'( set -o noclobber; : > "$HOME/lock" ) || exit 1; ' + BUSY_SECOND + ";"
    ' trap "rm -f \\"\\$HOME/lock\\"" EXIT; sleep 0.3\'\n'
    "alias mark='echo marked'\n"
)
# How long after the lock is taken each server is told to end (its stdin closed).
CLOSE_DELAYS = (0.0, 0.2, 0.5, 0.9, 1.2)
# Only catches a hang: a start, the rc's 1.3 s, the end.
CLOSE_BOUND_SECONDS = 60.0


def locks_left(
    tmp_path: Path,
    rc: Callable[[Path], str],
    lock: str,
    delays: Sequence[float],
    *,
    after_lock: bool,
) -> list[float]:
    """The delays (after the lock is taken, or after the start) at which a server
    told to end (its stdin closed) left the rc's lock behind. `rc` makes the rc
    for a server's directory; `lock` is relative to it."""
    left = []
    for index, delay in enumerate(delays):
        tmp = tmp_path / f"s{index}"
        tmp.mkdir()
        write_rc(tmp, rc(tmp))
        held = tmp / lock
        server = ServerProcess(tmp=tmp)
        try:
            if after_lock:
                assert wait_until(held.exists, timeout=CLOSE_BOUND_SECONDS)
            time.sleep(delay)
            assert server.close(timeout=CLOSE_BOUND_SECONDS) == 0
        finally:
            server.kill()
        if held.exists():
            left.append(delay)
    return left


def test_a_server_told_to_end_lets_the_rc_let_go_of_its_lock(tmp_path: Path) -> None:
    """Whenever the end comes, the rc capture is let finish, not signalled in a
    window the rc left unguarded."""

    def rc(tmp: Path) -> str:
        return UNGUARDED_LOCK_RC

    assert locks_left(tmp_path, rc, "home/lock", CLOSE_DELAYS, after_lock=True) == []


def test_a_request_aborted_while_it_waits_for_the_capture_leaves_it_running(
    spawn: SpawnInProcess, tmp_path: Path
) -> None:
    """The capture is the server's, not the request's that first needed it: aborted
    in the rc's unguarded window, the request leaves the rc to finish."""
    write_rc(tmp_path, UNGUARDED_LOCK_RC)
    lock = tmp_path / "home" / "lock"
    server = spawn()
    assert server.bash("mark", wait=CLOSE_BOUND_SECONDS).output == "marked\n"
    lock.unlink(missing_ok=True)
    # A new environment: a capture of its own, started by this request.
    server.result("session/open", SessionOpenParams(session_id="env", env={"A": "1"}))
    waiting = server.request("bash", BashParams(command="mark", session_id="env"))
    assert wait_until(lock.exists, timeout=CLOSE_BOUND_SECONDS)
    assert server.abort(session_id="env")
    assert server.bash_result(waiting).cancelled
    assert wait_until(lambda: not lock.exists(), timeout=CLOSE_BOUND_SECONDS)
    assert server.bash("mark", session_id="env").output == "marked\n"


PYENV = Path.home() / ".pyenv"
# When each server is told to end, after its start: while pyenv's rehash runs.
PYENV_CLOSE_DELAYS = tuple(round(0.1 * step, 1) for step in range(1, 10))


def pyenv_rc(tmp: Path) -> str:
    """A real ~/.bashrc's pyenv lines, on a root of the test's own: its versions
    and plugins are the user's (read only), its shims, and so its lock, the test's."""
    root = tmp / "pyenv-root"
    root.mkdir()
    for shared in ("versions", "plugins"):
        if (PYENV / shared).is_dir():
            (root / shared).symlink_to(PYENV / shared)
    return (
        f'export PYENV_ROOT="{root}"\n'
        f'export PATH="{PYENV}/bin:$PYENV_ROOT/shims:$PATH"\n'
        'eval "$(pyenv init -)"\n'
        'eval "$(pyenv virtualenv-init -)"\n'
    )


@pytest.mark.skipif(not (PYENV / "bin" / "pyenv").exists(), reason="pyenv is not installed")
def test_a_server_told_to_end_leaves_no_pyenv_lock(tmp_path: Path) -> None:
    lock = "pyenv-root/shims/.pyenv-shim"
    assert locks_left(tmp_path, pyenv_rc, lock, PYENV_CLOSE_DELAYS, after_lock=False) == []
