"""A child started by `child.spawn` is placed before it runs a command and dies with
its parent, on both ways of starting it (setpriv and vfork, or a setup between fork
and exec). The parent is a process of its own here, so that it can be SIGKILLed."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bashrpc.server.runtime.containment.cgroups import Cgroup
from tests.rpc import process_gone, wait_until

# Every case here starts processes of its own: slow (see tests/conftest.py).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
GONE_SECONDS = 5.0

# Starts a shell as the server does, makes it busy (a foreground sleep: without
# PDEATHSIG it would outlive us), then reports its pid and whether its tracker
# holds it, and waits to be killed.
PARENT = """
import os, sys, time
from bashrpc.server.runtime.containment import child
from bashrpc.server.runtime.containment.cgroups import CgroupRoot
from bashrpc.server.runtime.containment.registry import Containment

root = CgroupRoot.create()
tracker = Containment(root).tracker("spawned")
r, w = os.pipe()
shell = child.spawn(
    ["bash", "--noprofile", "--norc"],
    tracker=tracker, env=os.environ, stdin=r, waits_for_input=sys.argv[1] == "input",
)
os.write(w, b"sleep 300\\n")
time.sleep(0.2)
placed = shell.pid in tracker.members()
print(shell.pid, placed, child.pdeathsig_wrapper() is not None, root.path, flush=True)
time.sleep(300)
"""


@pytest.mark.parametrize("how", ["input", "setup"])
def test_a_spawned_shell_is_tracked_and_dies_with_its_parent(how: str) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, how], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        assert parent.stdout is not None
        pid, tracked, wrapped, group = parent.stdout.readline().split()
        assert tracked == "True" and wrapped == "True"
        assert not process_gone(int(pid))
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    try:
        assert wait_until(lambda: process_gone(int(pid)), GONE_SECONDS)
    finally:
        # The orphaned sleep (nobody's business here) goes with the group.
        leftovers = Cgroup(Path(group))
        leftovers.kill()
        assert wait_until(lambda: not leftovers.populated, GONE_SECONDS)
        leftovers.remove()
