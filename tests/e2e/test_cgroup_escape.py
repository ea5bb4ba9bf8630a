"""A process that leaves its shell's cgroup still dies with it, by each kill path.

As root with the sandbox off, a command may write its pid into the root
cgroup's `cgroup.procs`: `cgroup.kill` of its shell's group misses it then. The
kills also walk the process tree (the shell's session and parentage, and
orphans that left both and every group of the server's), so it dies anyway.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from bashrpc.protocol.methods import BashParams, SessionCloseParams, SessionResetParams
from bashrpc.protocol.terminals import (
    TerminalCreateParams,
    TerminalCreateResult,
    TerminalEmptyResult,
    TerminalParams,
)
from bashrpc.server.runtime.containment import cgroups
from tests.conftest import SpawnProcess
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
    leave = f'echo $$ > {root_procs()} && exec -a {head}"-{tail}" sleep 300'

    return f"bash -c '{leave}' & ( setsid env -i bash -c '{leave}' & ); echo spawned"


ESCAPED = 2


def started(marker: str) -> bool:
    """Both escapees run, out of every cgroup of the server's."""
    found = marked_processes(marker)
    return len(found) == ESCAPED and all(_in_root_cgroup(pid) for pid in found)


def _in_root_cgroup(pid: int) -> bool:
    try:
        return "0::/\n" in Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
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
