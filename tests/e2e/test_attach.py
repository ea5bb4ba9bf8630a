"""`bashrpc attach`: the stdio bridge to the daemon, and the daemon it starts."""

from __future__ import annotations

import hashlib
import signal
import subprocess
from pathlib import Path

import pytest

from bashrpc.protocol.methods import BashParams
from bashrpc.server.daemon import socketpath
from tests.daemon import AttachProcess, SocketClient
from tests.rpc import process_gone

pytestmark = pytest.mark.slow

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
    assert "must be ours and mode 700" in bridge.stderr()
