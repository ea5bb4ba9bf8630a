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

A daemon already running was started with its own options. What this
attach's `--sandbox` and `--workspace` ask of it goes in an `initialize` of
the bridge's own, before a byte of the host's: a stricter sandbox tightens
this connection alone (a later `initialize` of the host's may tighten it
further, never loosen it); another workspace, or a looser sandbox, is
refused by the daemon, and the bridge says why, naming the daemon's own
setting, and exits 1.

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
from bashrpc.protocol.client import ClientCore
from bashrpc.protocol.envelope import RequestId, ServerMessage
from bashrpc.protocol.mcp import HostOptions
from bashrpc.protocol.mcpclient import initialize_params
from bashrpc.server import fdio
from bashrpc.server.daemon import socketpath
from bashrpc.server.wire import stdio

# How long a daemon this bridge started may take to listen.
DAEMON_START_SECONDS = 10.0
CONNECT_POLL_SECONDS = 0.02
COPY_BYTES = 256 * 1024
EXIT_FAILURE = 1
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# The bridge's own initialize: its id (answered before a byte of the host's is
# sent, so no id of the host's can clash), and how long the daemon may take.
SETTLE_ID = "bashrpc-attach"
SETTLE_SECONDS = 10.0


def attach(path: Path, daemon_argv: list[str], wanted: HostOptions | None = None) -> int:
    """`wanted`: what this attach's options ask of the daemon (None: nothing)."""
    try:
        sock = _connect_or_start(path, daemon_argv)
    except socketpath.SocketPathError as exc:
        print(messages.CLI_ERROR.format(message=exc), file=sys.stderr)
        return EXIT_FAILURE
    try:
        early = b"" if wanted is None else _settle(sock, wanted, path)
    except socketpath.SocketPathError as exc:
        sock.close()
        print(messages.CLI_ERROR.format(message=exc), file=sys.stderr)
        return EXIT_FAILURE
    fds = stdio.take_over_stdio()
    for signum in STOP_SIGNALS:
        signal.signal(signum, _stop)
    try:
        fdio.write_all_blocking(fds.output, early)
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


def _settle(sock: socket.socket, wanted: HostOptions, path: Path) -> bytes:
    """The bridge's own `initialize`, with `wanted` in it; what the daemon sent
    besides its answer, for the host. SocketPathError when it refuses (its
    reason names its own setting) or does not answer."""
    ident, line = ClientCore().request("initialize", initialize_params(wanted), id=SETTLE_ID)
    sock.settimeout(SETTLE_SECONDS)
    try:
        sock.sendall(line)
        reply, rest = _reply(sock, ident)
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise socketpath.SocketPathError(
            messages.ATTACH_NO_ANSWER.format(path=path, reason=reason)
        ) from None
    finally:
        sock.settimeout(None)
    if reply.error is not None:
        data = reply.error.data
        reason = data if isinstance(data, str) else reply.error.message
        raise socketpath.SocketPathError(messages.ATTACH_REFUSED.format(path=path, reason=reason))
    return rest


def _reply(sock: socket.socket, ident: RequestId) -> tuple[ServerMessage, bytes]:
    """The reply to `ident`; and the bytes read that are not it, in order."""
    pending, others = b"", b""
    while True:
        data = sock.recv(COPY_BYTES)
        if not data:
            raise ConnectionResetError(messages.ATTACH_DAEMON_CLOSED)
        pending += data
        while (end := pending.find(b"\n")) >= 0:
            line, pending = pending[: end + 1], pending[end + 1 :]
            for message in ClientCore.line(line):
                if isinstance(message, ServerMessage) and _answers(message, ident):
                    return message, others + pending
            others += line


def _answers(message: ServerMessage, ident: RequestId) -> bool:
    return message.method is None and message.id == ident


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
