"""Sandbox escapes: the command is the attacker, run with real bwrap (as root here,
where bwrap behaves differently from an unprivileged user's).

Each case is a way out that worked once: capabilities that undo the read-only
mounts, host services reached over filesystem unix sockets, other sessions'
command files and FIFOs in the server's runtime directory, and a sandbox that
could not start passing for a command that failed."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.e2e.test_sandbox import sandboxed
from tests.sandboxing import skip_without_sandbox

# A directory the sandbox shows read-only and that is neither /tmp nor the workspace.
VISIBLE_OUTSIDE = Path("/var/tmp")
CAP_EFFECTIVE = "CapEff"
NO_NEW_PRIVS = "NoNewPrivs"
# What a fake bwrap says when it is not the probe; a real one's message has this form.
FAKE_BWRAP_MESSAGE = "bwrap: Can't mount proc on /newroot/proc: Operation not permitted"


@pytest.fixture(autouse=True)
def _needs_sandbox() -> None:
    skip_without_sandbox()


def python() -> str:
    # The interpreter itself: a venv under /tmp is hidden by the private /tmp.
    return os.path.realpath(sys.executable)


def status_field(output: str, name: str) -> str:
    for line in output.splitlines():
        key, _, value = line.partition(":")
        if key == name:
            return value.strip()
    raise AssertionError(f"{name} not in {output!r}")


@pytest.mark.parametrize("mode", ["read-only", "workspace-write"])
def test_no_capability_survives_so_the_read_only_mounts_hold(spawn, tmp_path, mode) -> None:
    outside = VISIBLE_OUTSIDE / f"bashrpc-escape-{os.getpid()}"
    server = sandboxed(spawn, mode)
    status = server.bash("cat /proc/self/status").output
    assert status_field(status, CAP_EFFECTIVE) == "0000000000000000"
    assert status_field(status, "CapPrm") == "0000000000000000"
    assert status_field(status, NO_NEW_PRIVS) == "1"
    result = server.bash(f"mount -o remount,bind,rw / && touch {outside}")
    assert result.exit_code != 0, result.output
    assert not outside.exists()
    # Nor in a PTY command.
    pty = server.bash("grep CapEff /proc/self/status", pty=True).output
    assert "0000000000000000" in pty
