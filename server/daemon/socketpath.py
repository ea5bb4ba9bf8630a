"""The daemon's unix socket on disk: its private directory, the one-daemon lock,
a stale socket replaced, and the peer check.

Only one daemon may serve a path. It holds an exclusive `flock` on
`PATH.lock` for as long as it lives; the kernel drops the lock when the
process dies, however it dies. So a second daemon fails to take the lock
and says who holds it, and a socket file with no lock holder is stale (its
daemon died) and is unlinked and bound afresh: a live daemon is never
hijacked, a dead one never blocks.

The directory is the first gate: it must be ours and 0700 (it is created so
when missing), and the socket is bound under a umask that makes it 0600.
The second gate is the kernel's word on who connected (`SO_PEERCRED`): a
peer of another uid is refused, root's included. `attach` checks the same
two gates from its side before it sends a byte: the directory is its own
and 0700, and the listener runs as its uid. So another user who made
`/tmp/bashrpc-UID` first (with no `XDG_RUNTIME_DIR`) gets nothing.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import stat
import struct
from pathlib import Path

import msgspec

from bashrpc.protocol import messages

SOCKET_NAME = "daemon.sock"
LOCK_SUFFIX = ".lock"
LOG_SUFFIX = ".log"
# Group and others: no access to the directory or the socket.
PRIVATE_DIR_MODE = 0o700
SOCKET_UMASK = 0o177
_PEERCRED_FORMAT = "3i"
# A pidfd of the peer, as it was at connect (Linux 6.5); 77 where Python has no name for it.
SO_PEERPIDFD = getattr(socket, "SO_PEERPIDFD", 77)


class SocketPathError(Exception):
    """The socket path can't be served or reached safely; the text says why."""


class Peer(msgspec.Struct, frozen=True):
    pid: int
    uid: int
    gid: int


def default_path() -> Path:
    """`$XDG_RUNTIME_DIR/bashrpc/daemon.sock`, else `/tmp/bashrpc-UID/daemon.sock`."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = Path(runtime) / "bashrpc" if runtime else Path(f"/tmp/bashrpc-{os.getuid()}")
    return base / SOCKET_NAME


def lock_path(path: Path) -> Path:
    return path.with_name(path.name + LOCK_SUFFIX)


def log_path(path: Path) -> Path:
    """Where `attach` sends the stderr of a daemon it starts."""
    return path.with_name(path.name + LOG_SUFFIX)


def private_dir(directory: Path) -> None:
    """Create `directory` 0700, or check that it is ours and 0700 already."""
    try:
        directory.mkdir(mode=PRIVATE_DIR_MODE, parents=True)
    except FileExistsError:
        pass
    info = os.lstat(directory)
    if not stat.S_ISDIR(info.st_mode):
        raise SocketPathError(messages.DAEMON_DIR_NOT_DIRECTORY.format(path=directory))
    if info.st_uid != os.getuid():
        raise SocketPathError(
            messages.DAEMON_DIR_NOT_OURS.format(path=directory, owner=info.st_uid, ours=os.getuid())
        )
    if stat.S_IMODE(info.st_mode) & 0o077:
        mode = f"{stat.S_IMODE(info.st_mode):o}"
        raise SocketPathError(messages.DAEMON_DIR_OPEN.format(path=directory, mode=mode))


def take_lock(path: Path) -> int:
    """The fd holding the one-daemon lock of `path` (kept open for the daemon's
    life); the holder's pid is written in the lock file."""
    fd = os.open(lock_path(path), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise SocketPathError(
            messages.DAEMON_ALREADY_RUNNING.format(path=path, pid=holder)
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def holder_pid(path: Path) -> int | None:
    """The pid of the daemon that holds `path`'s lock now, if one does."""
    try:
        fd = os.open(lock_path(path), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        text = os.pread(fd, 32, 0).decode(errors="replace").strip()
        return int(text) if text.isdigit() else None
    else:
        return None
    finally:
        os.close(fd)


def bind(path: Path) -> socket.socket:
    """A listening socket at `path`, 0600; call with the lock held, so whatever
    socket file is there already is a dead daemon's and may go. It is bound
    under a name of its own and renamed into place once listening, so a client
    that finds the path can always connect."""
    try:
        if not stat.S_ISSOCK(os.lstat(path).st_mode):
            raise SocketPathError(messages.DAEMON_PATH_NOT_SOCKET.format(path=path))
    except FileNotFoundError:
        pass
    staging = path.with_name(f"{path.name}.{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(staging)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(SOCKET_UMASK)
    try:
        sock.bind(str(staging))
        sock.listen(socket.SOMAXCONN)
        os.rename(staging, path)
    except OSError as exc:
        sock.close()
        with contextlib.suppress(OSError):
            os.unlink(staging)
        raise SocketPathError(
            messages.DAEMON_CANNOT_BIND.format(path=path, reason=exc.strerror)
        ) from None
    finally:
        os.umask(old)
    return sock


def peer(sock: socket.socket) -> Peer:
    """Who is at the other end, as the kernel says."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize(_PEERCRED_FORMAT))
    pid, uid, gid = struct.unpack(_PEERCRED_FORMAT, raw)
    return Peer(pid, uid, gid)


def sandboxed(sock: socket.socket, peer: Peer) -> bool:
    """Whether the peer runs in a pid namespace below ours, as every sandbox does
    (bwrap's `--unshare-pid`): a sandboxed command of our own uid must not drive
    the daemon that confined it. The kernel's word, which no command can change:
    the namespaces the peer's pid is in (`NSpid`). They are read through a pidfd
    of the peer (`SO_PEERPIDFD`, Linux 6.5), so a pid reused since the connect is
    never asked; older kernels are asked by the pid. A peer whose pid we cannot
    see (pid 0) is in no namespace below ours. One we cannot read is refused."""
    if peer.pid == 0:
        return False
    depth = namespace_depth("/proc/self/status")
    try:
        pidfd = sock.getsockopt(socket.SOL_SOCKET, SO_PEERPIDFD)
    except OSError:
        return namespace_depth(f"/proc/{peer.pid}/status") != depth
    try:
        return namespace_depth(f"/proc/self/fdinfo/{pidfd}") != depth
    finally:
        os.close(pidfd)


def namespace_depth(path: str) -> int:
    """How many pid namespaces the process a /proc file describes is in, seen from
    ours (0 when it is gone, or not there)."""
    try:
        with open(path, "rb") as f:
            for line in f:
                if line.startswith(b"NSpid:"):
                    pids = line.split()[1:]
                    return 0 if pids[:1] in ([b"0"], [b"-1"]) else len(pids)
    except OSError:
        return 0
    return 0


def connect_ours(path: Path) -> socket.socket | None:
    """`connect`, by the daemon's own rules: the directory is ours and 0700, and
    what answers runs as our uid (so a socket another user set up first is
    refused before a byte is sent to it)."""
    private_dir(path.parent)
    sock = connect(path)
    if sock is None:
        return None
    listener = peer(sock)
    if listener.uid != os.getuid():
        sock.close()
        raise SocketPathError(
            messages.ATTACH_PEER_NOT_OURS.format(path=path, uid=listener.uid, ours=os.getuid())
        )
    return sock


def connect(path: Path) -> socket.socket | None:
    """A connected socket to the daemon at `path`, or None when none listens there."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
    except OSError as exc:
        sock.close()
        if exc.errno in (errno.ENOENT, errno.ECONNREFUSED):
            return None
        raise SocketPathError(
            messages.DAEMON_CANNOT_CONNECT.format(path=path, reason=exc.strerror)
        ) from None
    return sock
