"""The facts `inputwait` judges, read from /proc for a set of processes: each
one's state, the kernel function and the syscall it sleeps in, and what its
descriptors are. A descriptor is known by its link's text and its fdinfo alone:
nothing a command opened is followed, stat'ed or opened (a FIFO, a device, a
file on a hung FUSE mount, anything a sandboxed command made)."""

from __future__ import annotations

import os
import re
import termios
from collections.abc import Iterable

from bashrpc.server.runtime.containment import procs
from bashrpc.server.runtime.containment.inputwait import Descriptor, Kind, ProcFacts

# The links of terminals: pseudo-terminals' slaves, /dev/tty, the consoles.
_TERMINAL = re.compile(r"^/dev/(pts/\d+|tty\d*|console)$")
_ANON = re.compile(r"^(pipe|socket):\[(\d+)\]$")
_SIGNALFD = "anon_inode:[signalfd]"
# fdinfo's flags are octal; the access mode is their low two bits.
_ACCESS_MODE = 0o3
_READ_ONLY = 0


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def _fdinfo(pid: int, fd: str) -> tuple[bool, int | None]:
    """Whether the descriptor was opened for writing, and its inode."""
    raw = _read(f"/proc/{pid}/fdinfo/{fd}") or b""
    writes, inode = False, None
    for line in raw.splitlines():
        key, _, value = line.partition(b":")
        if key == b"flags":
            writes = int(value.strip(), 8) & _ACCESS_MODE != _READ_ONLY
        elif key == b"ino":
            inode = int(value.strip())
    return writes, inode


def describe(pid: int, fd: str, link: str) -> Descriptor:
    """One descriptor from the text of its /proc link (and fdinfo for pipes)."""
    if _TERMINAL.match(link):
        return Descriptor(int(fd), Kind.TERMINAL)
    if link == _SIGNALFD:
        return Descriptor(int(fd), Kind.SIGNAL)
    anon = _ANON.match(link)
    if anon is not None and anon.group(1) == "socket":
        return Descriptor(int(fd), Kind.SOCKET)
    if anon is None and (not link.startswith("/") or link.startswith("/dev/")):
        return Descriptor(int(fd), Kind.OTHER)
    # A pipe, or a path: a read that sleeps on a path sleeps on a FIFO (a file's
    # read waits for the disk, in state D), so both count as pipes by inode.
    writes, inode = _fdinfo(pid, fd)
    return Descriptor(int(fd), Kind.PIPE, inode, writes)


def descriptors(pid: int) -> tuple[Descriptor, ...]:
    """What a process holds open, by kind; empty once it is gone."""
    base = f"/proc/{pid}/fd"
    try:
        names = os.listdir(base)
    except OSError:
        return ()
    found = []
    for name in names:
        try:
            link = os.readlink(f"{base}/{name}")
        except OSError:
            continue
        found.append(describe(pid, name, link))
    return tuple(found)


def _syscall(pid: int) -> tuple[int | None, int | None]:
    """The syscall a process is blocked in and its first argument."""
    raw = _read(f"/proc/{pid}/syscall")
    if not raw:
        return None, None
    fields = raw.split()
    try:
        number = int(fields[0])
        return (number, int(fields[1], 16)) if number >= 0 else (None, None)
    except (IndexError, ValueError):
        return None, None


def facts(pid: int) -> ProcFacts | None:
    """One process at one look, or None once it is gone."""
    info = procs.read_stat(pid)
    raw_comm = _read(f"/proc/{pid}/comm")
    if info is None or raw_comm is None:
        return None
    wchan = (_read(f"/proc/{pid}/wchan") or b"").decode(errors="replace")
    number, arg0 = _syscall(pid) if info.state == "S" else (None, None)
    fds = descriptors(pid) if info.state == "S" else ()
    program = raw_comm.decode(errors="replace").strip()
    return ProcFacts(pid, info.state, wchan, number, arg0, info.cpu, program, fds, info.sid)


def look(pids: Iterable[int]) -> list[ProcFacts]:
    """The facts of each process still there."""
    return [found for pid in sorted(pids) if (found := facts(pid)) is not None]


# pidfd_getfd(2), the same number on every architecture.
_PIDFD_GETFD = 438


def terminal_modes(pid: int, fd: int) -> int | None:
    """The local modes (lflag) of the terminal a process holds as `fd`, or None.

    The process's own open file is duplicated (pidfd_getfd), never a path
    opened: what the descriptor is cannot make this block, and a descriptor
    that is no terminal just fails the ioctl."""
    libc = procs.libc()
    if libc is None:
        return None
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return None
    try:
        mine = int(libc.syscall(_PIDFD_GETFD, pidfd, fd, 0))
        if mine < 0:
            return None
        try:
            return int(termios.tcgetattr(mine)[3])
        except termios.error:
            return None
        finally:
            os.close(mine)
    finally:
        os.close(pidfd)
