"""No way back to the daemon from a sandbox it started: with the network on (no
socket filter), as root and as uid 65534, a command finds neither the daemon's
socket, its directory nor its token file, and a connection it makes anyway (to
the socket linked into its workspace) is refused, though its uid is the daemon's.
And a capture of the rc whose tenant ends before it starts never starts; one that
fails costs a warning, never the daemon."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.methods import ServerStatsParams, ServerStatsResult
from bashrpc.server.daemon import socketpath
from tests.daemon import AttachProcess, DaemonProcess, introduce
from tests.githost import AS_NOBODY, USERS, Host
from tests.rpc import logged, wait_until
from tests.sandboxing import skip_without_sandbox

pytestmark = pytest.mark.slow

TOKEN = "a-token-no-sandbox-may-read-0123456789"
# Sends a request, then says what came back: "closed" when the daemon hung up.
PROBE = """\
import socket, sys
try:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(20)
    s.connect(sys.argv[1])
    s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"session/list"}\\n')
    data = s.recv(100)
    print("reply:", repr(data) if data else "closed")
except (BrokenPipeError, ConnectionResetError):
    print("reply: closed")
except OSError as exc:
    print("reply:", type(exc).__name__)
"""
# How the warning of a failed rc capture starts.
FAILED = messages.SNAPSHOT_FAILED.partition("{")[0]


@pytest.fixture(params=USERS)
def host(request: pytest.FixtureRequest) -> Iterator[Host]:
    """A user's directory outside /tmp (which a sandbox has its own of), so the host's
    read-only / would show the daemon's files there."""
    skip_without_sandbox()
    user = str(request.param)
    if user == "nobody" and os.geteuid() != 0:
        pytest.skip("running a daemon as uid 65534 needs root")
    base = Path(tempfile.mkdtemp(prefix="bashrpc-daemon-sandbox-", dir="/var/tmp"))
    base.chmod(0o755)
    try:
        yield Host(user, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def host_daemon(
    host: Host, settings: str, *args: str, env: dict[str, str] | None = None
) -> DaemonProcess:
    """`bashrpc daemon` as the host's user, with `settings`, on the workspace `ws`."""
    host.write(host.base / "settings.toml", settings)
    return DaemonProcess(
        *("--config", str(host.base / "settings.toml"), "--workspace", str(host.base / "ws")),
        *args,
        tmp=host.base,
        env=env,
        launcher=AS_NOBODY if host.user == "nobody" else (),
    )


def host_client(host: Host, daemon: DaemonProcess) -> AttachProcess:
    """A host of the daemon's user connected to it (a peer of another uid is refused)."""
    launcher = AS_NOBODY if host.user == "nobody" else ()
    return AttachProcess(
        tmp=host.base, socket_path=daemon.wait_listening().socket_path, launcher=launcher
    )


@pytest.mark.parametrize(
    ("mode", "network"),
    [("read-only", True), ("workspace-write", True), ("workspace-write", False), ("full", True)],
)
def test_a_sandboxed_command_cannot_reach_the_daemon(host: Host, mode: str, network: bool) -> None:
    workspace = host.base / "ws"
    host.write(workspace / "probe.py", PROBE)
    host.write(host.base / "secret" / "token", TOKEN + "\n", mode=0o600)
    settings = f'[sandbox]\nmode = "{mode}"\nnetwork = {str(network).lower()}\n'
    daemon = host_daemon(
        host,
        settings,
        *("--http", "127.0.0.1:0", "--token-file", str(host.base / "secret" / "token")),
    )
    client = None
    try:
        daemon.wait_listening()
        # Another way to the socket than its own path: a second name in the workspace.
        os.link(daemon.socket_path, workspace / "back.sock")
        client = host_client(host, daemon)
        sock = daemon.socket_path
        seen = client.bash(
            f"ls -A {sock.parent}; test -e {sock} && echo socket-seen; "
            f"cat {host.base}/secret/token; python3 probe.py back.sock",
            timeout=60,
        ).output
        assert "daemon.sock" not in seen and "socket-seen" not in seen, seen
        assert TOKEN not in seen, seen
        if network:
            assert "reply: closed" in seen, seen
            assert wait_until(lambda: "refused a connection from pid" in daemon.stderr())
            assert "inside a sandbox" in daemon.stderr()
        else:
            # No unix socket at all: the filter refuses to make one.
            assert "reply: PermissionError" in seen, seen
        # The host's own connection is served as before.
        assert client.bash("echo alive").output == "alive\n"
    finally:
        if client is not None:
            client.kill()
        daemon.kill()


def test_a_peer_in_a_pid_namespace_below_ours_is_told_apart(tmp_path: Path) -> None:
    """Both ways of asking: through the peer's pidfd, and by its pid (kernels
    before 6.5), for a peer in a sandbox and for one beside the daemon."""
    skip_without_sandbox()
    path = tmp_path / "peer.sock"
    connect = (
        f"import socket; s = socket.socket(socket.AF_UNIX); s.connect({str(path)!r}); s.recv(1)"
    )
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(path))
        listener.listen()
        for argv, inside in (
            (["bwrap", "--dev-bind", "/", "/", "--unshare-pid", "--die-with-parent"], True),
            ([], False),
        ):
            peer = subprocess.Popen([*argv, "/usr/bin/python3", "-c", connect])
            try:
                conn, _ = listener.accept()
                with conn:
                    found = socketpath.peer(conn)
                    assert socketpath.sandboxed(conn, found) is inside
                    by_pid = socketpath.namespace_depth(f"/proc/{found.pid}/status")
                    assert (by_pid != socketpath.namespace_depth("/proc/self/status")) is inside
            finally:
                peer.kill()
                peer.wait()


@pytest.mark.parametrize("mode", ["read-only", "workspace-write", "full"])
def test_a_client_that_names_itself_runs_commands_with_its_rc(host: Host, mode: str) -> None:
    """The connection's own tenant ends as the connection names its client, while
    that tenant's first capture still waits for the sandbox's probe: a capture
    then started in the cgroup the tenant's end had removed, its child failed
    before exec, and the daemon died. The client's own tenant captures the rc."""
    host.write(host.base / "ws" / "README", "")
    host.write(host.home / ".bashrc", "alias mark='echo marked'\n")
    daemon = host_daemon(host, f'[sandbox]\nmode = "{mode}"\n')
    client = host_client(host, daemon)
    try:
        introduce(client, "alice")
        assert client.bash("mark").output == "marked\n", daemon.stderr()
        assert daemon.proc.poll() is None
        assert FAILED not in daemon.stderr()
        # The daemon's runtime directory, above the tenant's and the shell's own.
        runtime = Path(client.bash('dirname "$__bashrpc_in"').output.strip()).parents[1]
        assert runtime.name.startswith("bashrpc-"), runtime
    finally:
        client.kill()
        daemon.kill()
    # Killed (SIGKILL), its watchdog removes that directory, unlisted shells and all.
    assert wait_until(lambda: not runtime.exists()), sorted(map(str, runtime.rglob("*")))


def test_a_capture_that_fails_costs_a_warning_not_the_daemon(host: Host) -> None:
    """An rc that takes the file its snapshot was to be written to (the sandbox off,
    so it can) fails the capture: one warning, counted, shells without the setup,
    and the daemon serves on."""
    runtime = host.base / "runtime"
    host.write(runtime / "README", "")
    host.write(host.base / "ws" / "README", "")
    taken = f'for d in {runtime}/bashrpc-*/t*/; do : > "$d"snapshot-1.sh; done\n'
    host.write(host.home / ".bashrc", taken + "alias mark='echo marked'\n")
    daemon = host_daemon(host, '[sandbox]\nmode = "off"\n', env={"TMPDIR": str(runtime)})
    first = host_client(host, daemon)
    second = None
    try:
        assert first.bash("type mark || echo none").output.endswith("none\n")
        stats = first.typed(ServerStatsResult, "server/stats", ServerStatsParams())
        assert stats.rc_capture_failures == 1
        assert logged(daemon, FAILED), daemon.stderr()
        assert daemon.stderr().count(FAILED) == 1, daemon.stderr()
        second = host_client(host, daemon)
        assert second.bash("echo alive").output == "alive\n"
        assert daemon.proc.poll() is None
    finally:
        for client in (first, second):
            if client is not None:
                client.kill()
        daemon.kill()
