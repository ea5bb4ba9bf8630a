"""Faults against the daemon: connections that come and go by the thousand,
clients that vanish mid-stream, hostile bytes on the socket."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from bashrpc.protocol.errors import ErrorCode
from bashrpc.protocol.methods import BashParams
from tests.daemon import DaemonProcess, SocketClient
from tests.rpc import wait_until

pytestmark = pytest.mark.slow

CYCLES = 1000
# Every 25th cycle runs a command (a shell starts and dies); the rest only connect,
# send a line, or vanish without a word.
COMMAND_EVERY = 25
# A bound that only catches a hang.
CYCLES_BOUND_SECONDS = 600.0


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[DaemonProcess]:
    started = DaemonProcess("--stay", tmp=tmp_path).wait_listening()
    yield started
    started.kill()


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_a_thousand_connections_leak_no_fd_and_no_process(daemon: DaemonProcess) -> None:
    warm = daemon.connect()
    assert warm.bash("echo warm").output == "warm\n"
    warm.close()
    assert wait_until(lambda: daemon.owned_processes() == [])
    baseline = open_fds(daemon.proc.pid)
    for cycle in range(CYCLES):
        if cycle % COMMAND_EVERY == 0:
            client = daemon.connect()
            assert client.bash(f"echo {cycle}").output == f"{cycle}\n"
            client.close()
            continue
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(str(daemon.socket_path))
            if cycle % 3 == 1:
                sock.sendall(b'{"jsonrpc":"2.0","id":1,"method":"session/list"}\n')
            elif cycle % 3 == 2:
                sock.sendall(b"\xff not json\n")
            # else: gone without a word
    assert wait_until(lambda: daemon.owned_processes() == [], timeout=10)
    assert wait_until(lambda: open_fds(daemon.proc.pid) <= baseline, timeout=10), (
        open_fds(daemon.proc.pid),
        baseline,
    )
    assert daemon.connect().bash("echo after").output == "after\n"


def test_a_client_that_vanishes_mid_stream_takes_only_its_command(
    daemon: DaemonProcess,
) -> None:
    staying = daemon.connect()
    vanishing = daemon.connect()
    vanishing.request("bash", BashParams(command="exec -a daemon-vanish-mark yes"))
    vanishing.wait_for(lambda m: m.method == "bash/chunk")
    # Gone at once, with unread output in flight (shutdown first: a bare close would
    # wait for the reader thread's recv).
    vanishing.sock.shutdown(socket.SHUT_RDWR)
    vanishing.sock.close()
    assert wait_until(lambda: daemon.owned_processes() == [], timeout=10)
    assert staying.bash("echo fine").output == "fine\n"
    staying.close()
    assert daemon.proc.poll() is None


def test_hostile_bytes_on_the_socket_are_answered_and_the_daemon_stays(
    daemon: DaemonProcess,
) -> None:
    client: SocketClient = daemon.connect()
    client.send_raw(b'\x00\xff{]\n[]\n{"jsonrpc":"2.0","id":7,"method":"nope"}\n')
    reply = client.wait_for(lambda m: m.id == 7)
    assert reply.error is not None
    assert reply.error.code == ErrorCode.METHOD_NOT_FOUND
    assert client.bash("echo ok").output == "ok\n"
    client.close()
