"""How a sandbox's listener reaches the proxy: made inside, handed out.

The sandbox has a network namespace of its own with loopback alone. Before its
command runs, a small program in it (this module's `HELPER`, run by the host's
Python, under the same seccomp filter as the command) binds 127.0.0.1:PORT
there, sends that listening socket out over a socket pair the server made (no
unix socket is made inside, which the filter refuses anyway), waits for the
server's word, closes its end, and execs the command. The server accepts on the
listener from outside: every connection a command makes to the proxy's port is
accepted by the server itself, with no relay and no way to reach another
session's proxy (each listener lives in its own sandbox's namespace).

The server trusts nothing it receives: the descriptor must be a listening TCP
socket, and the sender's pid (the kernel's, from SCM_CREDENTIALS) gives a
pidfd, so the listener is dropped when the sandbox's command ends.
"""

from __future__ import annotations

import array
import functools
import os
import pathlib
import socket
import stat
import sys

import anyio
import msgspec

# The proxy's address in every sandbox with an allowlist (their namespaces are
# their own: the port is the same in each, and no command has bound it first).
PROXY_HOST = "127.0.0.1"
PROXY_PORT = 3128
PROXY_URL = f"http://{PROXY_HOST}:{PROXY_PORT}"
SOCKS_URL = f"socks5h://{PROXY_HOST}:{PROXY_PORT}"
BACKLOG = 128
# How long a sandbox may take to hand its listener out.
HANDOFF_SECONDS = 30.0
NO_PROXY = "localhost,127.0.0.1,::1"
# Where a system's own Python is, should the server's be out of the user's reach.
SYSTEM_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3")

# Only `_socket` is imported (`socket` would cost its start some 6 ms more): the
# helper runs before every sandboxed shell, PTY command and job.
HELPER = """\
import os, sys, _socket as S
os.environ.update(%(environment)r)
fd, port, backlog = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
s = S.socket(S.AF_INET, S.SOCK_STREAM)
s.bind(("127.0.0.1", port))
s.listen(backlog)
c = S.socket(fileno=fd)
c.sendmsg([b"L"], [(S.SOL_SOCKET, S.SCM_RIGHTS, s.fileno().to_bytes(4, sys.byteorder))])
if c.recv(1) != b"G":
    sys.exit(125)
c.close()
s.close()
os.execvp(sys.argv[4], sys.argv[4:])
"""


def _helper() -> str:
    return HELPER % {"environment": dict(environment())}


def environment() -> list[tuple[str, str]]:
    """What points a sandbox's programs at the proxy: curl, wget, git, pip, npm,
    cargo and most others read the conventional variables (curl and wget read
    `http_proxy` lowercase only; npm and cargo also read their own)."""
    pairs = [
        ("HTTP_PROXY", PROXY_URL),
        ("HTTPS_PROXY", PROXY_URL),
        ("ALL_PROXY", SOCKS_URL),
        ("NO_PROXY", NO_PROXY),
    ]
    pairs += [(name.lower(), value) for name, value in pairs]
    pairs += [
        ("npm_config_proxy", PROXY_URL),
        ("npm_config_https_proxy", PROXY_URL),
        ("CARGO_HTTP_PROXY", PROXY_URL),
        # Node's own fetch reads the variables only when asked to.
        ("NODE_USE_ENV_PROXY", "1"),
    ]
    return pairs


class Pair(msgspec.Struct):
    """The two ends of one handoff: the sandbox's (passed to bwrap) and ours."""

    inside: int
    outside: socket.socket


def pair() -> Pair:
    outside, inside = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    outside.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    inside.set_inheritable(True)
    return Pair(inside.detach(), outside)


def helper_argv(inside: int, command: list[str]) -> list[str]:
    """`command`, preceded by the helper that hands the listener out."""
    helper = [interpreter(), "-I", "-S", "-c", _helper()]
    return [*helper, str(inside), str(PROXY_PORT), str(BACKLOG), *command]


@functools.cache
def interpreter() -> str:
    """A Python 3 the sandbox's user can run (the helper needs only `_socket`): the
    server's own, unless a directory on its way is closed to them (as a
    root-only pyenv's is to uid 65534), then the system's."""
    for candidate in (sys.executable, *SYSTEM_PYTHONS):
        if _reachable(os.path.realpath(candidate)):
            return candidate
    return sys.executable


def _reachable(path: str) -> bool:
    uid = os.geteuid()
    try:
        steps = [path, *(str(p) for p in pathlib.PurePath(path).parents)]
        return all(
            (found := os.stat(step)).st_uid == uid or bool(found.st_mode & stat.S_IXOTH)
            for step in steps
        )
    except OSError:
        return False


class Listener(msgspec.Struct):
    """A sandbox's listening socket, and a pidfd of the process that made it."""

    sock: socket.socket
    pidfd: int

    def close(self) -> None:
        self.sock.close()
        os.close(self.pidfd)


async def receive(outside: socket.socket) -> Listener | None:
    """The listener a sandbox hands out, checked; None if it sends none in time or
    anything else (the sandbox then has no way out at all)."""
    outside.setblocking(False)
    with outside, anyio.move_on_after(HANDOFF_SECONDS):
        await anyio.wait_readable(outside)
        return _accept_handoff(outside)
    return None


def _accept_handoff(outside: socket.socket) -> Listener | None:
    fds = array.array("i")
    creds = socket.CMSG_SPACE(12)
    try:
        data, ancillary, _flags, _ = outside.recvmsg(1, socket.CMSG_SPACE(4 * 4) + creds)
    except OSError:
        return None
    pid = None
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
        elif level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
            pid = int.from_bytes(payload[:4], sys.byteorder)
    received = [socket.socket(fileno=fd) for fd in fds]
    listener = received[0] if len(received) == 1 and data == b"L" else None
    for extra in received:
        if extra is not listener:
            extra.close()
    if listener is None or pid is None or not _listening_tcp(listener):
        if listener is not None:
            listener.close()
        return None
    try:
        pidfd = os.pidfd_open(pid)
        outside.send(b"G")
    except OSError:
        listener.close()
        return None
    listener.setblocking(False)
    return Listener(listener, pidfd)


def _listening_tcp(sock: socket.socket) -> bool:
    return (
        sock.family == socket.AF_INET
        and sock.type == socket.SOCK_STREAM
        and sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 1
    )
