"""`bashrpc exec --via LAUNCHER`: the same client, with the server started through
a byte-stream launcher. The launcher here is a script that runs the server
somewhere else (another directory, another HOME, so another artifacts store),
as ssh or `podman exec -i` would; ssh itself is tried where it reaches
localhost."""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.rpc import marked_processes, server_environment, wait_until

pytestmark = pytest.mark.slow

EXIT_BOUND_SECONDS = 20.0
VIA_EXEC = [sys.executable, "-m", "bashrpc", "exec", "--via"]
LAUNCHER = """#!/bin/sh
cd "$REMOTE_ROOT" && HOME="$REMOTE_ROOT/home" XDG_STATE_HOME= PATH="$REMOTE_BIN:$PATH" exec "$@"
"""


class Remote:
    """A launcher script, the far side's directory, and the local environment."""

    def __init__(self, tmp: Path) -> None:
        self.root = tmp / "remote"
        (self.root / "home").mkdir(parents=True)
        (self.root / "sub").mkdir()
        self.launcher = tmp / "launch"
        self.launcher.write_text(LAUNCHER)
        self.launcher.chmod(0o755)
        self.local = tmp / "local"
        self.local.mkdir()
        self.env = {
            **server_environment(tmp),
            "XDG_STATE_HOME": str(tmp / "local-state"),
            "REMOTE_ROOT": str(self.root),
            # Where the console script is: the far side runs `bashrpc` from its PATH.
            "REMOTE_BIN": str(Path(sys.executable).parent),
        }

    def exec(self, *args: str, start_new_session: bool = False) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [*VIA_EXEC, str(self.launcher), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self.env,
            cwd=self.local,
            start_new_session=start_new_session,
        )

    def run(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        proc = self.exec(*args)
        out, err = proc.communicate(timeout=EXIT_BOUND_SECONDS)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.fixture
def remote(tmp_path: Path) -> Remote:
    return Remote(tmp_path)


def test_output_status_and_the_reprint_hint_go_through_the_launcher(remote: Remote) -> None:
    done = remote.run("seq 1 100000; exit 3")
    expected = subprocess.run(["seq", "1", "100000"], capture_output=True).stdout
    assert done.returncode == 3 and done.stdout == expected
    found = re.search(r"artifact://1 \(([^)]*)\)", done.stderr.decode())
    assert found is not None, done.stderr
    argv = shlex.split(found.group(1))
    assert argv == [str(remote.launcher), "bashrpc", "artifact", "1"]
    # The hint, run as shown, prints it again from the far side's store.
    shown = subprocess.run(argv, capture_output=True, env=remote.env, cwd=remote.local)
    assert shown.returncode == 0 and shown.stdout == expected
    assert not (remote.local / "local-state").exists()


def test_gaps_are_filled_over_the_wire(remote: Remote) -> None:
    """A slow local reader makes the stream skip; the rest comes through
    `artifact/read` from the far side, not from a local disk."""
    proc = remote.exec("seq 1 2000000")
    assert proc.stdout is not None
    first = proc.stdout.read(1)
    time.sleep(4)  # twice the 2 s after which the server skips chunks
    rest = proc.stdout.read()
    assert proc.wait(timeout=EXIT_BOUND_SECONDS) == 0
    expected = subprocess.run(["seq", "1", "2000000"], capture_output=True).stdout
    assert hashlib.sha256(first + rest).digest() == hashlib.sha256(expected).digest()


def test_timeout_and_ctrl_c_through_the_launcher(remote: Remote) -> None:
    assert remote.run("--timeout", "1", "sleep 30").returncode == 124
    marker = f"bashrpc-via-{uuid.uuid4().hex}"
    proc = remote.exec(f"echo started; exec -a {marker} sleep 60", start_new_session=True)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"started\n"
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=EXIT_BOUND_SECONDS) == 130
    assert wait_until(lambda: marked_processes(marker) == [], timeout=EXIT_BOUND_SECONDS)


def test_cwd_is_the_far_sides(remote: Remote) -> None:
    """`sub` exists only on the far side: it is not resolved here."""
    done = remote.run("--workspace", "sub", "pwd")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{remote.root / 'sub'}\n".encode()


@pytest.mark.parametrize(
    "launcher", ["ssh -t host", "docker exec -it box", "''", "/nonexistent/launcher -i"]
)
def test_a_launcher_that_forces_a_terminal_or_is_empty_is_a_usage_error(
    remote: Remote, launcher: str
) -> None:
    done = subprocess.run(
        [*VIA_EXEC, launcher, "true"],
        capture_output=True,
        env=remote.env,
        timeout=EXIT_BOUND_SECONDS,
    )
    assert done.returncode == 2 and done.stderr.startswith(b"bashrpc: --via:"), done.stderr


def _ssh_reaches_localhost() -> bool:
    try:
        done = subprocess.run(
            ["ssh", "-T", "-oBatchMode=yes", "-oConnectTimeout=3", "localhost", "true"],
            capture_output=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@pytest.mark.skipif(not _ssh_reaches_localhost(), reason="no ssh to localhost on this machine")
def test_through_real_ssh(tmp_path: Path) -> None:
    """The remote command goes to ssh as one string for the far shell to parse, so
    the quotes in the command and the launcher's own words both survive it."""
    remote_path = f"{Path(sys.executable).parent}:/usr/bin:/bin"
    launcher = f"ssh -T -oBatchMode=yes localhost env PATH={remote_path}"
    command = 'echo "it\'s $PWD"'
    done = subprocess.run(
        [*VIA_EXEC, launcher, "--workspace", str(tmp_path), command],
        capture_output=True,
        env=server_environment(tmp_path),
        timeout=EXIT_BOUND_SECONDS,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"it's {tmp_path}\n".encode()


def test_a_far_side_without_bashrpc_on_its_path_is_told_the_env_path_form(
    tmp_path: Path,
) -> None:
    """Non-interactive ssh gets a short PATH: `bashrpc` in ~/.local/bin is not on it."""
    launcher = tmp_path / "bare"
    launcher.write_text('#!/bin/sh\nPATH=/usr/bin:/bin exec "$@"\n')
    launcher.chmod(0o755)
    done = subprocess.run(
        [*VIA_EXEC, str(launcher), "true"],
        capture_output=True,
        env=server_environment(tmp_path),
        timeout=EXIT_BOUND_SECONDS,
    )
    assert done.returncode == 2, done.stderr
    said = done.stderr.decode()
    assert "bashrpc: --via:" in said and f"{launcher} env PATH=" in said, said
