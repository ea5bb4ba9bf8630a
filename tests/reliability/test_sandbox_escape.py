"""Sandbox escapes: the command is the attacker, run with real bwrap (as root here,
where bwrap behaves differently from an unprivileged user's).

Each case is a way out that worked once: capabilities that undo the read-only
mounts, host services reached over filesystem unix sockets, other sessions'
command files and FIFOs in the server's runtime directory, and a sandbox that
could not start passing for a command that failed."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bashrpc.protocol.errors import ErrorCode
from bashrpc.protocol.methods import BashParams, SandboxMode, SessionOpenParams
from bashrpc.server import rundir
from bashrpc.server.runtime.sandbox import bwrap
from tests.conftest import SpawnInProcess, SpawnProcess
from tests.e2e.test_sandbox import connect, sandboxed
from tests.rpc import ServerProcess
from tests.sandboxing import skip_without_sandbox

# A directory the sandbox shows read-only and that is neither /tmp nor the workspace.
VISIBLE_OUTSIDE = Path("/var/tmp")
CAP_EFFECTIVE = "CapEff"
NO_NEW_PRIVS = "NoNewPrivs"
# What a fake bwrap says when it is not the probe; a real one's message has this form.
FAKE_BWRAP_MESSAGE = "bwrap: Creating new namespace failed: Operation not permitted"


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
def test_no_capability_survives_so_the_read_only_mounts_hold(
    spawn: SpawnInProcess, mode: SandboxMode
) -> None:
    outside = VISIBLE_OUTSIDE / f"bashrpc-escape-{os.getpid()}"
    server = sandboxed(spawn, mode)
    status = server.bash("cat /proc/self/status").output
    assert status_field(status, CAP_EFFECTIVE) == "0000000000000000"
    assert status_field(status, "CapPrm") == "0000000000000000"
    assert status_field(status, NO_NEW_PRIVS) == "1"
    result = server.bash(f"mount -o remount,bind,rw / && touch {outside}")
    assert result.exit_code != 0, result.output
    assert not outside.exists()
    # A shell that ends is still a command's exit, not a sandbox that failed to start.
    assert server.bash("exit 3").exit_code == 3
    # Nor in a PTY command.
    pty = server.bash("grep CapEff /proc/self/status", pty=True).output
    assert "0000000000000000" in pty
    # bwrap's stderr is the server's to read; the command's is still the terminal.
    assert server.bash("echo on-stderr >&2", pty=True).output.strip() == "on-stderr"


@pytest.fixture
def host_service() -> Iterator[Path]:
    """A host service on a unix socket at a path the sandbox can see, outside its roots."""
    if not VISIBLE_OUTSIDE.is_dir():
        pytest.skip(f"{VISIBLE_OUTSIDE} is missing")
    path = VISIBLE_OUTSIDE / f"bashrpc-escape-{os.getpid()}.sock"
    path.unlink(missing_ok=True)
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        sock.listen()
        try:
            yield path
        finally:
            path.unlink(missing_ok=True)


def unix_connect(path: str) -> str:
    """A command that connects to a unix socket; prints `connected` or the error's name."""
    code = (
        "import socket\n"
        f"try: s = socket.socket(socket.AF_UNIX); s.connect({path!r}); print('connected')\n"
        "except OSError as e: print(type(e).__name__)"
    )
    return f'{python()} -c "{code}"'


def test_host_unix_sockets_are_refused_with_the_network_off(
    spawn: SpawnInProcess, host_service: Path, listener: int
) -> None:
    server = sandboxed(spawn, "read-only")
    # Refused as TCP to the host's loopback is.
    assert server.bash(connect(listener)).output == "ConnectionRefusedError\n"
    assert server.bash(unix_connect(str(host_service))).output == "PermissionError\n"
    assert server.bash(unix_connect(str(host_service)), pty=True).output.strip() == (
        "PermissionError"
    )
    # A connected pair still works: pipelines of programs that talk over one do.
    pair = "import socket; a, b = socket.socketpair(); a.send(b'ok'); print(b.recv(2).decode())"
    assert server.bash(f'{python()} -c "{pair}"').output == "ok\n"
    # With the network on, the host's sockets are the host's.
    shared = sandboxed(spawn, "read-only", "network = true\n")
    assert shared.bash(unix_connect(str(host_service))).output == "connected\n"


@pytest.fixture
def listener() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


@pytest.mark.parametrize("mode", ["read-only", "workspace-write"])
def test_a_shell_sees_only_its_own_runtime_directory(
    spawn: SpawnInProcess, tmp_path: Path, mode: SandboxMode
) -> None:
    # The in-process server's runtime directory is inside its workspace: visible,
    # as the server's is wherever TMPDIR points outside /tmp.
    server = sandboxed(spawn, mode)
    server.result("session/open", SessionOpenParams(session_id="other"))
    assert server.bash("echo other-session-secret", session_id="other").exit_code == 0
    runtime = next(tmp_path.glob("bashrpc-test-*"))
    assert len(list(runtime.iterdir())) >= 2
    own = server.bash('dirname "$__bashrpc_in"').output.strip()
    assert Path(own).parent == runtime
    # Its own directory, and the rc snapshot it was given (read-only): nothing else.
    snapshot = server.bash('echo "${BASHRPC_SNAPSHOT:-}"').output.strip()
    seen = {Path(own).name} | ({Path(snapshot).name} if snapshot else set())
    assert set(server.bash(f"ls -A {runtime}").output.split()) == seen
    # The shell's own protocol still works, and so does the rc snapshot's file.
    assert server.bash("echo still").output == "still\n"


def _another_sessions_command_file(server: ServerProcess) -> Path:
    """Where another session's command file is, asked of that session (its
    directory is unlisted, even to the server's own user); then a command of it
    with a value in its env, which that file now holds."""
    server.result("session/open", SessionOpenParams(session_id="other"))
    path = Path(server.bash('echo "$__bashrpc_in"', session_id="other").output.strip())
    secret = server.bash("echo ok", session_id="other", env={"SECRET": "other-value"})
    assert secret.output == "ok\n"
    assert path.is_file(), "the other session's command file is there"
    return path


def _own_directory(server: ServerProcess) -> Path:
    """The default session's shell directory (whose files it may open by name, not list)."""
    return Path(server.bash('dirname "$__bashrpc_in"').output.strip())


def _assert_others_out_of_reach(
    server: ServerProcess, runtime: Path, own_dir: Path, other: Path
) -> None:
    """Another session's command file is in the runtime directory, and neither its
    name nor what it holds reaches this session's shell."""
    assert other.parent.parent == runtime and other.parent != own_dir
    found = server.bash(f"ls -AR {runtime}; cat {runtime}/*/*.in | tr -d '\\0'").output
    assert own_dir.name in found
    assert "other-value" not in found and other.name not in found


def test_the_runtime_directory_stays_hidden_wherever_tmpdir_is(
    spawn_process: SpawnProcess, tmp_path: Path
) -> None:
    """The real server, its TMPDIR outside /tmp: another session's command file is
    out of reach, so its command text and env values are too."""
    if not VISIBLE_OUTSIDE.is_dir():
        pytest.skip(f"{VISIBLE_OUTSIDE} is missing")
    tmpdir = Path(tempfile.mkdtemp(prefix="bashrpc-escape-", dir=VISIBLE_OUTSIDE))
    server = None
    try:
        server = spawn_process("--sandbox", "read-only", env={"TMPDIR": str(tmpdir)})
        other = _another_sessions_command_file(server)
        own_dir = _own_directory(server)
        (runtime,) = tmpdir.glob("bashrpc-*")
        assert own_dir.parent == runtime
        _assert_others_out_of_reach(server, runtime, own_dir, other)
    finally:
        # Ended first, the server removes its runtime directory itself: its shells'
        # directories are unlisted, which only root could remove from here.
        if server is not None:
            server.close()
        shutil.rmtree(tmpdir, ignore_errors=True)


@pytest.mark.parametrize("place", ["XDG_RUNTIME_DIR", "/dev/shm"])
def test_the_runtime_directory_in_memory_is_hidden_too(
    spawn_process: SpawnProcess, tmp_path: Path, place: str
) -> None:
    """With no TMPDIR the runtime directory goes to memory (`rundir.py`): under the
    user's XDG_RUNTIME_DIR, else /dev/shm, which bwrap's own /dev covers in the
    confined modes. The shell's protocol works there, and another session's
    command file stays out of reach."""
    private = tmp_path / "xdg"
    private.mkdir(mode=0o700)
    env = {"TMPDIR": "", "XDG_RUNTIME_DIR": str(private) if place == "XDG_RUNTIME_DIR" else ""}
    expected = str(private) if place == "XDG_RUNTIME_DIR" else rundir.SHARED_MEMORY
    if rundir.base(env) != expected:
        pytest.skip(f"{place} is not usable here (noexec, or not shared and sticky)")
    server = spawn_process("--sandbox", "read-only", env=env)
    other = _another_sessions_command_file(server)
    own_dir = _own_directory(server)
    runtime = own_dir.parent
    assert runtime.parent == Path(expected) and runtime.name.startswith("bashrpc-")
    _assert_others_out_of_reach(server, runtime, own_dir, other)
    server.close()
    assert not runtime.exists(), "the runtime directory is removed at the end"


def test_a_sandbox_that_cannot_start_answers_with_bwraps_message(
    spawn: SpawnInProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = bwrap.probe()[0]
    assert real is not None
    fake = tmp_path / "fakebin"
    fake.mkdir()
    # Passes the probe (its command is `true`), fails every later start.
    (fake / "bwrap").write_text(
        "#!/bin/sh\n"
        f'for last; do :; done; [ "$last" = true ] && exec {real} "$@"\n'
        f"echo '{FAKE_BWRAP_MESSAGE}' >&2; exit 1\n"
    )
    (fake / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    bwrap.probe.cache_clear()
    try:
        server = sandboxed(spawn, "workspace-write")
        error = server.error("bash", BashParams(command="echo hi"))
        assert error.code == ErrorCode.SANDBOX_UNAVAILABLE
        assert error.data == FAKE_BWRAP_MESSAGE
        assert FAKE_BWRAP_MESSAGE in error.message
        assert FAKE_BWRAP_MESSAGE in server.stderr()
        # Nothing was left running, and the next call says the same.
        assert (
            server.error("bash", BashParams(command="echo hi")).code
            == ErrorCode.SANDBOX_UNAVAILABLE
        )
        # A PTY command's sandbox too.
        error = server.error("bash", BashParams(command="echo hi", pty=True))
        assert error.code == ErrorCode.SANDBOX_UNAVAILABLE
        assert error.data == FAKE_BWRAP_MESSAGE
        assert server.owned_processes() == []
    finally:
        bwrap.probe.cache_clear()


# Every descriptor of bwrap's stderr a command could reach: the shell's saved
# stderr, the shell's through /proc, and the namespace's init (bwrap itself).
START_LOG_WRITERS = [">&12", ">/proc/$PPID/fd/12", ">/proc/1/fd/2", ">/proc/$PPID/fd/2"]


@pytest.mark.parametrize("mode", ["read-only", "full"])
@pytest.mark.parametrize("writer", START_LOG_WRITERS)
def test_a_command_cannot_pass_for_a_sandbox_that_failed_to_start(
    spawn: SpawnInProcess, mode: SandboxMode, writer: str
) -> None:
    """bwrap's stderr says why a sandbox did not start; a command that writes a
    line like bwrap's there and dies is still a command that ran and failed."""
    server = sandboxed(spawn, mode)
    fake = f"echo '{FAKE_BWRAP_MESSAGE}' {writer} 2>/dev/null; echo ran; exit 3"
    for pty in (False, True):
        result = server.bash(fake, pty=pty)
        assert result.exit_code == 3, result
        assert "ran" in result.output
    # A shell killed in the middle of it too.
    result = server.bash(f"{fake.removesuffix('exit 3')}kill -9 $$")
    assert result.exit_code == 137 and "ran" in result.output, result
    assert FAKE_BWRAP_MESSAGE not in server.stderr()
