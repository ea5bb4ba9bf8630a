"""Test clients for the daemon: `bashrpc attach` to a daemon of its own, and
raw connections to a daemon's socket."""

from __future__ import annotations

import glob
import itertools
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, TypeVar

from bashrpc.protocol.mcp import HostOptions
from bashrpc.protocol.mcpclient import initialize_params
from bashrpc.server.daemon import socketpath
from tests.rpc import (
    RpcClient,
    ServerProcess,
    owned_processes,
    process_gone,
    server_environment,
    wait_until,
)

_sockets = itertools.count(1)
DAEMON_STOP_SECONDS = 10.0

C = TypeVar("C", bound=RpcClient)


def introduce(client: C, client_id: str | None, scope: str | None = None) -> C:
    """Name the connection's client (None: none) and the scope it joins, so its
    sessions and requests outlive the connection."""
    client.result("initialize", initialize_params(HostOptions(client_id=client_id, scope=scope)))
    return client


def fresh_socket(tmp: Path) -> Path:
    """A socket path in a private directory of its own: a daemon no other case shares."""
    return tmp / f"daemon-{next(_sockets)}" / socketpath.SOCKET_NAME


def daemon_pid(path: Path, timeout: float = 10.0) -> int:
    """The pid of the daemon serving `path`, once one does."""
    pid: int | None = None

    def found() -> bool:
        nonlocal pid
        pid = socketpath.holder_pid(path)
        return pid is not None

    assert wait_until(found, timeout), f"no daemon at {path}"
    assert pid is not None
    return pid


class DaemonProcess:
    """`bashrpc daemon` itself, on a socket of its own."""

    def __init__(
        self,
        *args: str,
        tmp: Path,
        socket_path: Path | None = None,
        env: dict[str, str] | None = None,
        launcher: tuple[str, ...] = (),
    ) -> None:
        """`launcher`: what runs the daemon (`setpriv --reuid ...`), before its argv."""
        self.socket_path = socket_path or fresh_socket(tmp)
        self.stderr_path = tmp / f"daemon-stderr-{id(self)}.log"
        argv = [*launcher, sys.executable, "-m", "bashrpc", "daemon"]
        argv += ["--socket", str(self.socket_path)]
        argv += ["--artifacts-dir", str(tmp / "artifacts"), "--log-level", "INFO", *args]
        with open(self.stderr_path, "wb") as stderr:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=server_environment(tmp, env),
                cwd=tmp,
            )

    def wait_listening(self) -> DaemonProcess:
        assert wait_until(self.socket_path.exists), self.stderr()
        return self

    def connect(self) -> SocketClient:
        return SocketClient(self.wait_listening().socket_path)

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def owned_processes(self) -> list[int]:
        return owned_processes(self.proc.pid)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def stop_daemon(path: Path) -> None:
    """SIGTERM the daemon serving `path` (if any), SIGKILL it if it lingers."""
    pid = socketpath.holder_pid(path)
    if pid is None:
        return
    os.kill(pid, signal.SIGTERM)
    if not wait_until(lambda: process_gone(pid), timeout=DAEMON_STOP_SECONDS):
        os.kill(pid, signal.SIGKILL)


class AttachProcess(ServerProcess):
    """`bashrpc attach` as a host runs it; it starts the daemon behind it."""

    def __init__(self, *args: str, tmp: Path, socket_path: Path | None = None, **kw: Any) -> None:
        # A daemon on a socket of its own is this bridge's, and is stopped with it.
        self.owns_daemon = socket_path is None
        self.socket_path = socket_path or fresh_socket(tmp)
        super().__init__("attach", "--socket", str(self.socket_path), *args, tmp=tmp, **kw)

    _daemon_pid: int | None = None

    @property
    def server_pid(self) -> int:
        """The daemon behind this bridge (found once: it may exit later)."""
        if self._daemon_pid is None:
            self._daemon_pid = daemon_pid(self.socket_path)
        return self._daemon_pid

    @property
    def artifacts_dir(self) -> Path:
        """The artifacts of this bridge's connection: its own tenant's directory
        (named at random), the one beside the workspace's."""
        found = list(self.artifacts_root.glob(glob.escape(self._workspace_dir.name) + ".*"))
        assert len(found) == 1, found
        return found[0]

    @artifacts_dir.setter
    def artifacts_dir(self, path: Path) -> None:
        self._workspace_dir = path

    def stderr(self) -> str:
        """The bridge's stderr, then the log of the daemon it started."""
        log = self.socket_path.with_name(self.socket_path.name + ".log")
        return super().stderr() + (log.read_text(errors="replace") if log.exists() else "")

    def owned_processes(self) -> list[int]:
        """Processes started through the daemon behind this bridge."""
        return owned_processes(self.server_pid)

    def kill(self) -> None:
        super().kill()
        if self.owns_daemon:
            stop_daemon(self.socket_path)


class SocketClient(RpcClient):
    """A raw connection to a daemon's socket."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))
        self._start_reading()

    def _read(self) -> None:
        pending = b""
        try:
            while self._reading.wait() and (data := self.sock.recv(1 << 20)):
                pending += data
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    self._received(line + b"\n")
        except OSError:
            pass
        self._ended()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def cut(self) -> None:
        """The stream is gone at once, as when a launcher dies, with no request to
        end. (shutdown first: a bare close would wait for the reader thread's recv.)"""
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        self._reading.set()  # a paused reader reads on to the end
        self._reader.join(DAEMON_STOP_SECONDS)
        self.sock.close()
