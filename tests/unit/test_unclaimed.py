"""Which of the server's children a shell's end may take as its orphans.

Without cgroups, a tracker whose leader ended adopts the server's unclaimed
children: orphans re-parented to the server. A child the server started itself
in its own session (the sandbox's probe, git for the guard) is never one, or an
unrelated shell's end would kill it (a probe so killed said "bwrap could not
create the sandbox: exit -9")."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from bashrpc.server.runtime.containment.procs import Scan
from bashrpc.server.runtime.containment.registry import Containment


@pytest.fixture
def children() -> Iterator[tuple[int, int]]:
    """(a child in our session, a child in a session of its own)."""
    ours = subprocess.Popen(["sleep", "60"], stdin=subprocess.DEVNULL)
    apart = subprocess.Popen(["sleep", "60"], stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        yield ours.pid, apart.pid
    finally:
        for process in (ours, apart):
            process.kill()
            process.wait()


def test_a_child_in_the_servers_own_session_is_nobodys_orphan(
    children: tuple[int, int],
) -> None:
    ours, apart = children
    unclaimed = Containment(None).unclaimed(Scan())
    assert ours not in unclaimed
    assert apart in unclaimed
