"""A process that leaves its shell's cgroup still dies with it, by each kill path.

As root with the sandbox off, a command may write its pid into the root
cgroup's `cgroup.procs`: `cgroup.kill` of its shell's group misses it then. The
kills also take the shell's session, its parentage and its cgroup namespace (which
no move changes), so it dies anyway; and they take nothing of another's.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.methods import BashParams, SessionCloseParams, SessionResetParams
from bashrpc.protocol.terminals import (
    TerminalCreateParams,
    TerminalCreateResult,
    TerminalEmptyResult,
    TerminalParams,
)
from bashrpc.server.runtime.containment import cgroups
from tests.conftest import SpawnInProcess, SpawnProcess
from tests.rpc import ServerProcess, marked_processes, wait_until

pytestmark = pytest.mark.slow

# The kill grace is 2 s; the bound only catches a hang.
GONE_SECONDS = 10.0
STARTED_SECONDS = 10.0
SESSION = "escaping"


def root_procs() -> Path:
    """The root cgroup's `cgroup.procs`, where this machine lets a test write it."""
    mount = cgroups.cgroup2_mount()
    if os.geteuid() != 0 or mount is None or cgroups.own_cgroup() is None:
        pytest.skip("leaving a cgroup for the root one needs root and cgroup v2")
    return mount / "cgroup.procs"


def escapes(marker: str) -> str:
    """Two processes that leave the shell's cgroup for the root one: a child of the
    shell in its session, and a double-forked one in a session of its own with an
    empty environment (no parent, no session, no tag, no group)."""
    # Quoted apart, so that no shell's command line carries the marker whole.
    head, _, tail = marker.rpartition("-")
    leave = f'echo $$ > {root_procs()}; exec -a {head}"-{tail}" sleep 300'

    return f"bash -c '{leave}' & ( setsid env -i bash -c '{leave}' & ); echo spawned"


ESCAPED = 2


def started(marker: str) -> bool:
    """Both escapees run: in the root cgroup, or, where the shell's cgroup namespace
    is a boundary the kernel enforces (`nsdelegate`), refused and still in their group."""
    found = marked_processes(marker)
    escaped = not delegates()
    return len(found) == ESCAPED and all(cgroup(pid) == "/" for pid in found) == escaped


def cgroup(pid: int) -> str | None:
    """A process's cgroup v2, as this process sees it."""
    try:
        text = Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return None
    return next((line[3:] for line in text.splitlines() if line.startswith("0::")), None)


def delegates() -> bool:
    """Whether cgroup v2 is mounted with `nsdelegate`: then no process may move
    itself to a group outside its cgroup namespace."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            _, _, right = line.partition(" - ")
            fields = right.split()
            if fields[:1] == ["cgroup2"]:
                return "nsdelegate" in fields[-1].split(",")
    return False


def by_abort(server: ServerProcess, marker: str) -> None:
    ident = server.request("bash", BashParams(command=escapes(marker) + "; sleep 300"))
    assert wait_until(lambda: started(marker), STARTED_SECONDS)
    assert server.abort(request_id=ident)
    assert server.bash_result(ident).cancelled


def _terminal(server: ServerProcess, marker: str) -> TerminalParams:
    params = TerminalCreateParams(session_id=SESSION, command=escapes(marker) + "; sleep 300")
    created = server.typed(TerminalCreateResult, "terminal/create", params, GONE_SECONDS)
    assert wait_until(lambda: started(marker), STARTED_SECONDS)
    return TerminalParams(session_id=SESSION, terminal_id=created.terminal_id)


def by_terminal_kill(server: ServerProcess, marker: str) -> None:
    terminal = _terminal(server, marker)
    server.typed(TerminalEmptyResult, "terminal/kill", terminal, GONE_SECONDS)


def by_terminal_release(server: ServerProcess, marker: str) -> None:
    terminal = _terminal(server, marker)
    server.typed(TerminalEmptyResult, "terminal/release", terminal, GONE_SECONDS)


def _in_session(server: ServerProcess, marker: str) -> None:
    assert server.bash(escapes(marker), session_id=SESSION).output == "spawned\n"
    assert wait_until(lambda: started(marker), STARTED_SECONDS)


def by_session_reset(server: ServerProcess, marker: str) -> None:
    _in_session(server, marker)
    server.result("session/reset", SessionResetParams(session_id=SESSION))


def by_session_close(server: ServerProcess, marker: str) -> None:
    _in_session(server, marker)
    server.result("session/close", SessionCloseParams(session_id=SESSION))


KILLS: dict[str, Callable[[ServerProcess, str], None]] = {
    "abort_bash": by_abort,
    "terminal/kill": by_terminal_kill,
    "terminal/release": by_terminal_release,
    "session/reset": by_session_reset,
    "session/close": by_session_close,
}


# A stdio server, and a daemon (its tenants' groups nested in its own) behind a bridge.
BOTH = pytest.mark.parametrize("transport", ["stdio", "attach"], indirect=True)


@BOTH
@pytest.mark.parametrize("kill", sorted(KILLS))
def test_a_process_that_left_the_cgroup_dies_with_its_command(
    spawn_process: SpawnProcess, kill: str
) -> None:
    root_procs()
    server = spawn_process()
    marker = f"bashrpc-escape-{uuid.uuid4().hex}"
    KILLS[kill](server, marker)
    assert wait_until(lambda: marked_processes(marker) == [], GONE_SECONDS), kill
    assert server.bash("echo alive").output == "alive\n"


def test_a_shell_has_a_cgroup_namespace_of_its_own(spawn_process: SpawnProcess) -> None:
    root_procs()
    server = spawn_process()
    seen = server.bash("readlink /proc/self/ns/cgroup; cat /proc/self/cgroup").output
    namespace, _, groups = seen.partition("\n")
    assert namespace != os.readlink(f"/proc/{server.server_pid}/ns/cgroup"), seen
    # Its own group is the root of what it sees.
    assert "0::/\n" in groups, seen


@BOTH
def test_a_process_that_moved_into_the_group_around_the_shells_dies_with_its_session(
    spawn_process: SpawnProcess,
) -> None:
    """Not the root group but the one around the shells' (the server's, or a daemon
    tenant's): in the server's tree, yet in no shell's group."""
    mount = root_procs().parent
    if delegates():
        pytest.skip("the kernel refuses the move here (nsdelegate): the case above holds")
    server = spawn_process()
    shell = int(server.bash("echo $$", session_id=SESSION).output)
    own = cgroup(shell)
    assert own is not None
    around = (mount / own.lstrip("/")).parent
    marker = f"bashrpc-escape-{uuid.uuid4().hex}"
    head, _, tail = marker.rpartition("-")
    leave = f'echo $$ > {around}/cgroup.procs; exec -a {head}"-{tail}" sleep 300'
    server.bash(f"( setsid env -i bash -c '{leave}' & )", session_id=SESSION)
    moved = f"/{around.relative_to(mount)}"
    assert wait_until(lambda: [cgroup(p) for p in marked_processes(marker)] == [moved])
    server.result("session/close", SessionCloseParams(session_id=SESSION))
    assert wait_until(lambda: marked_processes(marker) == [], GONE_SECONDS)


def test_a_kill_takes_no_process_of_another_server_or_of_the_host(
    spawn: SpawnInProcess, tmp_path: Path
) -> None:
    """Two servers in one process (whose cgroup may be the root one, where an
    escaped process would sit too): what one kills is its own commands' only, not
    the other's shell, nor a process of the host's in a session of its own."""
    root_procs()
    a, b = spawn(), spawn()
    shell = a.bash("echo $$", session_id=SESSION).output
    go = tmp_path / "go"
    waiting = a.request(
        "bash",
        BashParams(command=f"until [ -e {go} ]; do sleep 0.05; done; echo finished"),
    )
    host = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        running = tmp_path / "running"
        ident = b.request("bash", BashParams(command=f"touch {running}; sleep 300"))
        assert wait_until(running.exists, STARTED_SECONDS)
        assert b.abort(request_id=ident)
        assert b.bash_result(ident).cancelled
        assert b.bash("echo $$", session_id=SESSION).output
        b.result("session/reset", SessionResetParams(session_id=SESSION))
        assert host.poll() is None
        go.touch()
        assert a.bash_result(waiting).output == "finished\n"
        after = a.bash("echo $$", session_id=SESSION).output
        assert messages.SHELL_RESTARTED not in after and after == shell
    finally:
        host.kill()
        host.wait()
