"""How a sandbox's listener reaches the proxy: made in its namespace from outside.

The sandbox has a network namespace of its own with loopback alone. bwrap is
asked to say its sandbox's pid (`--info-fd`) and to wait, its sandbox set up,
before it runs the command (`--block-fd`). Meanwhile a child forked from the
server joins that sandbox's network namespace (and its user namespace, where
bwrap made one) by pidfd, binds 127.0.0.1:PORT there, sends the listening
socket back and exits; then the sandbox is let go. No program starts inside for
it (a Python start per sandbox cost some 20-45 ms; the fork costs 2-5), nothing
inside runs before the listener exists, and the server accepts on it from
outside: every connection a command makes to the proxy's port is accepted by
the server itself, with no relay and no way to reach another session's proxy.

What the server reads from bwrap is bwrap's own (no command has run yet); the
listener is checked all the same, and dropped when the sandbox's init ends (a
pidfd). A sandbox whose listener cannot be made runs with no way out at all.
"""

from __future__ import annotations

import array
import contextlib
import ctypes
import functools
import os
import signal
import socket
from collections.abc import Callable

import anyio
import anyio.to_thread
import msgspec

# The proxy's address in every sandbox with an allowlist (their namespaces are
# their own: the port is the same in each, and no command has bound it first).
PROXY_HOST = "127.0.0.1"
PROXY_PORT = 3128
PROXY_URL = f"http://{PROXY_HOST}:{PROXY_PORT}"
SOCKS_URL = f"socks5h://{PROXY_HOST}:{PROXY_PORT}"
BACKLOG = 128
# How long a sandbox may take to say its pid, and the listener to be made.
HANDOFF_SECONDS = 30.0
NO_PROXY = "localhost,127.0.0.1,::1"
# bwrap's info is a small JSON object; more is not bwrap's.
INFO_MAX_BYTES = 4096
_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER = 0x10000000
# A listener may be bound before the sandbox's loopback is up.
_IP_FREEBIND = getattr(socket, "IP_FREEBIND", 15)


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


class Ends(msgspec.Struct):
    """The two pipes of one handoff: bwrap's ends (`inside`, passed to it: where it
    writes its info, where it waits) and the server's (`info`, `release`)."""

    inside: tuple[int, int]
    info: int
    release: int

    def close(self) -> None:
        """The server's ends: a sandbox still waiting is let go, with no way out."""
        for fd in (self.info, self.release):
            with contextlib.suppress(OSError):
                os.close(fd)


def ends() -> Ends:
    info_read, info_write = os.pipe2(os.O_CLOEXEC)
    block_read, block_write = os.pipe2(os.O_CLOEXEC)
    os.set_inheritable(info_write, True)
    os.set_inheritable(block_read, True)
    return Ends((info_write, block_read), info_read, block_write)


def bwrap_args(handoff: Ends) -> list[str]:
    """bwrap's options for a sandbox whose listener is made from outside: its
    info, its wait, and the variables that point at the proxy."""
    info, block = handoff.inside
    args = ["--info-fd", str(info), "--block-fd", str(block)]
    for name, value in environment():
        args += ["--setenv", name, value]
    return args


class Listener(msgspec.Struct):
    """A sandbox's listening socket, and a pidfd of the sandbox's init."""

    sock: socket.socket
    pidfd: int

    def close(self) -> None:
        self.sock.close()
        os.close(self.pidfd)


class _Info(msgspec.Struct):
    child_pid: int = msgspec.field(name="child-pid")


async def receive(handoff: Ends) -> Listener | None:
    """The sandbox's listener, made in its namespaces, then the sandbox let go;
    None if bwrap says no pid in time or the listener cannot be made (the
    sandbox then has no way out at all)."""
    try:
        with anyio.move_on_after(HANDOFF_SECONDS):
            pid = await _child_pid(handoff.info)
            if pid is not None:
                return await anyio.to_thread.run_sync(_listener_of, pid, abandon_on_cancel=True)
        return None
    finally:
        with contextlib.suppress(OSError):
            os.write(handoff.release, b"G")
        handoff.close()


async def _child_pid(fd: int) -> int | None:
    """The sandbox's pid, from bwrap's info (None at its end without one)."""
    os.set_blocking(fd, False)
    data = b""
    while len(data) < INFO_MAX_BYTES:
        await anyio.wait_readable(fd)
        try:
            chunk = os.read(fd, INFO_MAX_BYTES)
        except BlockingIOError:
            continue
        if not chunk:
            return None
        data += chunk
        with contextlib.suppress(msgspec.DecodeError):
            return msgspec.json.decode(data, type=_Info).child_pid
    return None


def _listener_of(pid: int) -> Listener | None:
    """A listener bound in `pid`'s network namespace by a forked child (a thread
    cannot join a user namespace), and a pidfd of `pid`."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return None
    try:
        # A process in the server's own network (bwrap's word aside) is no
        # sandbox: a listener there would take the host's connections.
        own = _namespace(pid, "net") != _namespace("self", "net")
        sock = (
            _made_in(pidfd, _namespace(pid, "user") != _namespace("self", "user")) if own else None
        )
    except OSError:
        sock = None
    if sock is None or not _listening_tcp(sock):
        if sock is not None:
            sock.close()
        os.close(pidfd)
        return None
    sock.setblocking(False)
    return Listener(sock, pidfd)


def _namespace(pid: int | str, kind: str) -> int:
    """Which namespace of `kind` a process is in (bwrap gives a sandbox a user
    namespace of its own but as root, and always a network one)."""
    return os.stat(f"/proc/{pid}/ns/{kind}").st_ino


def _made_in(pidfd: int, user: bool) -> socket.socket | None:
    """The listener, from a forked child. The child exits only once this end is
    closed, so its pidfd is taken while it surely lives (the server's reaper may
    collect it once it ends, and its pid be reused)."""
    setns = _libc().setns  # looked up before the fork: a child must not dlopen
    ours, theirs = socket.socketpair()
    with theirs:
        forked = os.fork()
        if forked == 0:  # pragma: no cover - the child's coverage is not collected
            # Its copy of our end would keep it from seeing the end of ours.
            ours.close()
            _child(setns, pidfd, user, theirs)
    with ours:
        forked_fd = os.pidfd_open(forked)
        try:
            ours.settimeout(HANDOFF_SECONDS)
            try:
                data, fds, _flags, _ = socket.recv_fds(ours, 1, 1)
            except TimeoutError:
                # Stuck: it goes (the pidfd names it, whatever its pid is by now).
                signal.pidfd_send_signal(forked_fd, signal.SIGKILL)
                data, fds = b"", []
        finally:
            os.close(forked_fd)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(forked, 0)
    received = [socket.socket(fileno=fd) for fd in fds]
    if data == b"L" and len(received) == 1:
        return received[0]
    for sock in received:
        sock.close()
    return None


def _child(setns: Callable[[int, int], int], pidfd: int, user: bool, back: socket.socket) -> None:
    """In the forked child: join the sandbox's namespaces, listen, send, exit."""
    code = 1
    try:
        flags = _CLONE_NEWNET | (_CLONE_NEWUSER if user else 0)
        if setns(pidfd, flags) == 0:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.IPPROTO_IP, _IP_FREEBIND, 1)
            sock.bind((PROXY_HOST, PROXY_PORT))
            sock.listen(BACKLOG)
            fds = array.array("i", [sock.fileno()])
            back.sendmsg([b"L"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
            code = 0
    finally:
        with contextlib.suppress(BaseException):
            if code:
                back.send(b"N")
            # Until the server closes its end: it holds this child's pidfd by then.
            back.recv(1)
        os._exit(code)


@functools.cache
def _libc() -> ctypes.CDLL:
    """setns(2), which Python's os has from 3.12 only."""
    return ctypes.CDLL(None, use_errno=True)


def _listening_tcp(sock: socket.socket) -> bool:
    return (
        sock.family == socket.AF_INET
        and sock.type == socket.SOCK_STREAM
        and sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 1
    )
