"""`bashrpc attach`: stdio to the daemon's socket and back, as a launcher's target.

A host talks to it exactly as to `bashrpc` on stdio: its bytes go to the
daemon's socket unchanged, and the daemon's come back. When none is running
it starts the daemon first, detached (a session of its own, stdin and stdout
on /dev/null, stderr to `PATH.log`), and waits for its socket. Two bridges
starting at once may both start one: the daemon's lock lets one serve, the
other says so in the log and exits, and both bridges reach the winner.

It trusts no stranger: before a byte goes to the socket, its directory must
be its own and 0700, and what listens must run as its uid (`SO_PEERCRED`),
by the daemon's own rules (`socketpath.connect_ours`); otherwise it says
why in one line and exits 1.

The end of stdin is passed on as a half-close, so the daemon winds the
connection down as a stdio server does on EOF and the replies still come
back; the bridge ends when the daemon closes its side. Stopped by a signal
(exit status 0, as a stdio server) or killed, the bridge's socket closes,
and the daemon takes the connection for gone.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from bashrpc.protocol import messages
from bashrpc.server import fdio
from bashrpc.server.daemon import socketpath
from bashrpc.server.wire import stdio

# How long a daemon this bridge started may take to listen.
DAEMON_START_SECONDS = 10.0
CONNECT_POLL_SECONDS = 0.02
COPY_BYTES = 256 * 1024
EXIT_FAILURE = 1
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def attach(path: Path, daemon_argv: list[str]) -> int:
    try:
        sock = _connect_or_start(path, daemon_argv)
    except socketpath.SocketPathError as exc:
        print(messages.CLI_ERROR.format(message=exc), file=sys.stderr)
        return EXIT_FAILURE
    fds = stdio.take_over_stdio()
    for signum in STOP_SIGNALS:
        signal.signal(signum, _stop)
    try:
        _bridge(fds.input, fds.output, sock)
    except _Stopped:
        pass  # as a stdio server stops on these: cleanly, status 0
    finally:
        sock.close()
        stdio.restore_stdio(fds)
    return 0


class _Stopped(Exception):
    """A stop signal arrived."""


def _stop(signum: int, frame: object) -> None:
    raise _Stopped


def _connect_or_start(path: Path, daemon_argv: list[str]) -> socket.socket:
    sock = socketpath.connect_ours(path)
    if sock is not None:
        return sock
    log_path = socketpath.log_path(path)
    log_fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    with open(log_fd, "ab") as log_file:
        daemon = subprocess.Popen(
            [*daemon_argv, "--socket", str(path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log_file,
            start_new_session=True,
        )
    deadline = time.monotonic() + DAEMON_START_SECONDS
    while time.monotonic() < deadline:
        sock = socketpath.connect_ours(path)
        if sock is not None:
            return sock
        daemon.poll()  # one that lost the race to another is collected
        time.sleep(CONNECT_POLL_SECONDS)
    raise socketpath.SocketPathError(
        messages.ATTACH_NO_DAEMON.format(
            path=path, seconds=messages.format_seconds(DAEMON_START_SECONDS), log=log_path
        )
    )


def _bridge(stdin: int, stdout: int, sock: socket.socket) -> None:
    """Copy both ways until the daemon closes its side (or stdout breaks)."""
    upstream = threading.Thread(target=_copy_up, args=(stdin, sock), daemon=True)
    upstream.start()
    while True:
        try:
            data = sock.recv(COPY_BYTES)
        except OSError:
            return
        if not data:
            return
        try:
            fdio.write_all_blocking(stdout, data)
        except OSError:
            return  # the host is gone: closing the socket tells the daemon


def _copy_up(stdin: int, sock: socket.socket) -> None:
    try:
        while data := os.read(stdin, COPY_BYTES):
            sock.sendall(data)
    except OSError:
        pass
    try:
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass
