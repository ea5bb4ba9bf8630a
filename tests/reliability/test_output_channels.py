"""A program left running cannot write into a later command's output.

The attacker, started by one command and left running, learns where its own
output goes and, every 50 ms, opens every output channel of its shell it can
name (the names a shell's FIFOs take, and whatever the directory lists) and
writes forged text. The later commands' results must hold their own output
alone. Real bwrap, the host as root and as uid 65534, in `read-only` and
`workspace-write`, and with the sandbox `off`, where it opens the names alone
(there a command of the user's may read the directory and race the moment
before a channel is unlinked: no sandbox, no boundary)."""

from __future__ import annotations

import pytest

from tests.githost import Host, host
from tests.rpc import wait_until
from tests.sandboxing import skip_without_sandbox

__all__ = ["host"]

MODES = ("off", "read-only", "workspace-write")
FORGED = "FORGED"
LATER_COMMANDS = 4
# Names a shell's output FIFOs could take: `<shell>.<n>.out`, n from 1.
NAMED = 40


def attacker(listing: bool) -> str:
    """Shell text starting the attacker in the background, its output nowhere."""
    targets = '"$base".$i.out' + (' "$dir"/*.out' if listing else "")
    loop = (
        f"while :; do for i in $(seq 1 {NAMED}); do for f in {targets}; do"
        f' [ -p "$f" ] && printf \'{FORGED}\\n\' 2>/dev/null > "$f"; done; done;'
        " sleep 0.05; done"
    )
    return (
        # Its own output channel, as a child sees it (a sandboxed shell is not
        # dumpable: its /proc/PID/fd is closed to the command).
        "{ mine=$(readlink /proc/self/fd/9); } 9>&1; mine=${mine% (deleted)}; dir=${mine%/*};"
        " base=${mine%.*.out};"
        f" ( {loop} ) >/dev/null 2>&1 </dev/null & echo started"
    )


@pytest.fixture(autouse=True)
def _needs_sandbox() -> None:
    skip_without_sandbox()


@pytest.mark.parametrize("mode", MODES)
def test_a_program_left_running_writes_into_no_later_result(host: Host, mode: str) -> None:
    workspace = host.base / "ws"
    host.write(workspace / "README", "")
    server = host.serve(workspace, mode)
    # What it writes while its own command is current is that command's output.
    assert server.bash(attacker(listing=mode != "off")).output.startswith("started\n")
    outputs = [server.bash(f"sleep 0.3; echo real{n}").output for n in range(LATER_COMMANDS)]
    assert outputs == [f"real{n}\n" for n in range(LATER_COMMANDS)]


# Only catches a hang: the watchdog sweeps once the server is gone.
SWEEP_BOUND_SECONDS = 30.0


def test_a_killed_servers_unlisted_shell_directories_are_removed(host: Host) -> None:
    """A shell's directory is unlisted while it runs; a SIGKILLed server's
    watchdog still removes it, as uid 65534 too (no capability reads past it)."""
    workspace, tmpdir = host.base / "ws", host.base / "tmp"
    host.write(workspace / "README", "")
    host.write(tmpdir / "kept", "")
    server = host.serve(workspace, "read-only", env={"TMPDIR": str(tmpdir)})
    assert server.bash("echo up").output == "up\n"
    server.proc.kill()
    assert wait_until(lambda: [p.name for p in tmpdir.iterdir()] == ["kept"], SWEEP_BOUND_SECONDS)
