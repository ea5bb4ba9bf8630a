"""`bashrpc attach`: the stdio bridge to the daemon, and the daemon it starts."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bashrpc.protocol.mcpclient import initialize_params
from bashrpc.protocol.methods import BashParams
from bashrpc.server.daemon import socketpath
from tests.daemon import AttachProcess, SocketClient
from tests.githost import Host, as_nobody, host, nobody_interpreter
from tests.rpc import process_gone, server_environment, wait_until
from tests.sandboxing import skip_without_sandbox

pytestmark = pytest.mark.slow
__all__ = ["host"]

EXIT_BOUND_SECONDS = 15.0


def test_attach_starts_a_daemon_that_outlives_it(tmp_path: Path, socket_path: Path) -> None:
    bridge = AttachProcess(tmp=tmp_path, socket_path=socket_path)
    try:
        assert bridge.bash("echo through").output == "through\n"
        daemon = bridge.server_pid
        assert daemon != bridge.pid
        assert bridge.close(timeout=EXIT_BOUND_SECONDS) == 0
    finally:
        bridge.kill()
    assert not process_gone(daemon)
    # The next bridge reaches the same daemon.
    again = AttachProcess(tmp=tmp_path, socket_path=socket_path)
    try:
        assert again.server_pid == daemon
        assert again.bash("echo again").output == "again\n"
    finally:
        again.kill()


def test_bridges_starting_at_once_share_one_daemon(tmp_path: Path, socket_path: Path) -> None:
    bridges = [AttachProcess(tmp=tmp_path, socket_path=socket_path) for _ in range(4)]
    try:
        for index, bridge in enumerate(bridges):
            assert bridge.bash(f"echo {index}").output == f"{index}\n"
        assert len({bridge.server_pid for bridge in bridges}) == 1
        # Any daemon that lost the race said so, and nothing else.
        log = socket_path.with_name(socket_path.name + ".log").read_text()
        assert all("another daemon" in line for line in log.splitlines()), log
    finally:
        for bridge in bridges:
            bridge.kill()


def test_a_large_output_crosses_the_bridge_whole(tmp_path: Path, socket_path: Path) -> None:
    bridge = AttachProcess(tmp=tmp_path, socket_path=socket_path)
    try:
        ident = bridge.request("bash", BashParams(command="seq 1 300000"))
        result = bridge.bash_result(ident, timeout=60)
        streamed = "".join(chunk.text for chunk in bridge.chunks_for(ident)).encode()
        expected = subprocess.run(["seq", "1", "300000"], capture_output=True).stdout
        assert hashlib.sha256(streamed).hexdigest() == hashlib.sha256(expected).hexdigest()
        assert result.exit_code == 0
    finally:
        bridge.kill()


def test_a_killed_bridge_ends_only_its_connection(tmp_path: Path, socket_path: Path) -> None:
    bridge = AttachProcess(tmp=tmp_path, socket_path=socket_path)
    try:
        bridge.bash("true")
        daemon = bridge.server_pid
        bridge.proc.send_signal(signal.SIGKILL)
        bridge.proc.wait()
        other = SocketClient(socket_path)
        assert other.bash("echo served").output == "served\n"
        other.close()
        assert not process_gone(daemon)
        assert socketpath.holder_pid(socket_path) == daemon
    finally:
        bridge.kill()


def test_no_daemon_and_none_can_start_is_one_clear_line(tmp_path: Path) -> None:
    shared = tmp_path / "open"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    bridge = AttachProcess(tmp=tmp_path, socket_path=shared / "d.sock")
    assert bridge.proc.wait(timeout=EXIT_BOUND_SECONDS) == 1
    assert "is mode 755: others may reach the socket" in bridge.stderr()


# Another local user's listener: bound by root in the directory given, then run
# as the stranger from `listen()` on (the kernel gives a client the listener's
# credentials as they were at `listen()`). It answers with a forged result and
# records a line for each connection, then every byte it receives.
STRANGER_LISTENER = r"""
import os, socket, sys
path, record, uid = sys.argv[1], sys.argv[2], int(sys.argv[3])
out = open(record, "wb", buffering=0)
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.bind(path)
os.chmod(path, 0o777)
os.setgid(uid)
os.setuid(uid)
sock.listen()
print("listening", flush=True)
while True:
    conn, _ = sock.accept()
    out.write(b"connected\n")
    try:
        conn.sendall(b'{"jsonrpc":"2.0","id":1,"result":{"output":"forged"}}\n')
        while data := conn.recv(65536):
            out.write(data)
    except OSError:
        pass
    conn.close()
"""
NOBODY = 65534
SECRET = "attach-secret-value"


@pytest.fixture
def stranger(tmp_path: Path) -> Iterator[Callable[[Path], Path]]:
    """Start a stranger's listener at a path; what it received is in the file returned."""
    started: list[subprocess.Popen[str]] = []

    def start(path: Path) -> Path:
        record = tmp_path / f"received-{len(started)}"
        listener = subprocess.Popen(
            [sys.executable, "-c", STRANGER_LISTENER, str(path), str(record), str(NOBODY)],
            stdout=subprocess.PIPE,
            text=True,
        )
        started.append(listener)
        assert listener.stdout is not None and listener.stdout.readline() == "listening\n"
        return record

    yield start
    for listener in started:
        listener.kill()
        listener.wait()


def _refused(bridge: AttachProcess) -> str:
    """The bridge was given a request with a secret; it must end at once, with
    one line on stderr and nothing on stdout."""
    bridge.request("bash", BashParams(command="true", env={"TOKEN": SECRET}))
    assert bridge.proc.wait(timeout=EXIT_BOUND_SECONDS) == 1
    stderr = bridge.stderr().strip()
    assert len(stderr.splitlines()) == 1, stderr
    with pytest.raises(EOFError):
        bridge.next_message(timeout=EXIT_BOUND_SECONDS)
    assert bridge.raw_lines == []
    return stderr


def test_attach_refuses_a_directory_another_user_made(
    tmp_path: Path, stranger: Callable[[Path], Path]
) -> None:
    taken = tmp_path / "taken"
    taken.mkdir(mode=0o700)
    os.chown(taken, NOBODY, NOBODY)
    received = stranger(taken / socketpath.SOCKET_NAME)
    bridge = AttachProcess(tmp=tmp_path, socket_path=taken / socketpath.SOCKET_NAME)
    try:
        line = _refused(bridge)
    finally:
        bridge.kill()
    assert f"belongs to uid {NOBODY}, not to us (uid {os.getuid()})" in line
    assert received.read_bytes() == b""  # not even connected to


def test_attach_refuses_a_listener_of_another_uid(
    tmp_path: Path, socket_path: Path, stranger: Callable[[Path], Path]
) -> None:
    socket_path.parent.mkdir(mode=0o700)
    received = stranger(socket_path)
    bridge = AttachProcess(tmp=tmp_path, socket_path=socket_path)
    try:
        line = _refused(bridge)
    finally:
        bridge.kill()
    assert f"runs as uid {NOBODY}, not as us (uid {os.getuid()}); sent it nothing" in line
    assert received.read_bytes() == b"connected\n"
    assert SECRET not in received.read_text()


class HostDaemon:
    """`bashrpc daemon` run as the host's user in its workspace `ws`, and bridges
    to it as that user (uid 65534 runs the interpreter it may run)."""

    def __init__(self, host: Host) -> None:
        for name in ("ws", "artifacts", "sock"):
            host.write(host.base / name / ".keep", "")
        (host.base / "sock").chmod(0o700)
        self.host = host
        self.workspace = host.base / "ws"
        self.socket = host.base / "sock" / socketpath.SOCKET_NAME
        nobody = host.user == "nobody"
        self._interpreter = nobody_interpreter() if nobody else (sys.executable,)
        self._preexec_fn = as_nobody if nobody else None
        argv = [*self._interpreter, "-m", "bashrpc", "daemon", "--stay"]
        argv += ["--socket", str(self.socket), "--artifacts-dir", str(host.base / "artifacts")]
        self.proc = subprocess.Popen(
            argv,
            cwd=self.workspace,
            env=server_environment(host.base),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=self._preexec_fn,
        )
        # Listening: no bridge starts a daemon of its own.
        if not wait_until(self.socket.exists, timeout=EXIT_BOUND_SECONDS):
            self.stop()
            raise AssertionError(f"no daemon listening at {self.socket}")

    def bridge(self, *args: str) -> AttachProcess:
        return AttachProcess(
            *args,
            tmp=self.host.base,
            socket_path=self.socket,
            cwd=self.workspace,
            interpreter=self._interpreter,
            preexec_fn=self._preexec_fn,
        )

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=EXIT_BOUND_SECONDS)
        finally:
            self.proc.kill()
            self.proc.wait()


def test_attach_to_a_running_daemon_tightens_its_own_connections_sandbox(host: Host) -> None:
    """The daemon was started with no sandbox; a later bridge asks for read-only:
    its connection gets it (a tightening through `initialize`), the first keeps its own."""
    skip_without_sandbox()
    daemon = HostDaemon(host)
    bridges: list[AttachProcess] = []
    try:
        first = daemon.bridge()
        bridges.append(first)
        strict = daemon.bridge("--sandbox", "read-only")
        bridges.append(strict)
        assert strict.server_pid == first.server_pid == daemon.proc.pid
        result = strict.bash("touch made-read-only")
        assert result.exit_code != 0, result.output
        assert not (daemon.workspace / "made-read-only").exists()
        # A later initialize of the host's keeps it: asking for none is no loosening.
        strict.result("initialize", initialize_params())
        assert strict.bash("touch made-read-only").exit_code != 0
        assert first.bash("touch made-by-first").exit_code == 0
        assert (daemon.workspace / "made-by-first").exists()
    finally:
        for bridge in bridges:
            bridge.kill()
        daemon.stop()


def test_attach_refuses_what_the_running_daemon_cannot_tighten_to(
    tmp_path: Path, socket_path: Path
) -> None:
    """Another workspace, or a looser sandbox, than the running daemon's: one line
    naming the daemon's own setting, exit 1, and not a byte bridged."""
    skip_without_sandbox()
    other = tmp_path / "other"
    other.mkdir()
    first = AttachProcess("--sandbox", "read-only", tmp=tmp_path, socket_path=socket_path)
    bridges = [first]
    try:
        assert first.bash("true").exit_code == 0
        elsewhere = AttachProcess("--workspace", str(other), tmp=tmp_path, socket_path=socket_path)
        bridges.append(elsewhere)
        assert elsewhere.proc.wait(timeout=EXIT_BOUND_SECONDS) == 1
        said = elsewhere.stderr()
        assert str(tmp_path.resolve()) in said and str(other) in said, said
        looser = AttachProcess("--sandbox", "off", tmp=tmp_path, socket_path=socket_path)
        bridges.append(looser)
        assert looser.proc.wait(timeout=EXIT_BOUND_SECONDS) == 1
        assert "'read-only'" in looser.stderr(), looser.stderr()
        # The daemon's own workspace, named, is no change.
        same = AttachProcess("--workspace", str(tmp_path), tmp=tmp_path, socket_path=socket_path)
        bridges.append(same)
        assert same.bash("pwd").output == f"{tmp_path.resolve()}\n"
    finally:
        for bridge in bridges:
            bridge.kill()
