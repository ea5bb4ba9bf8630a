"""The facts `inputwait` judges, read from /proc for a set of processes: each
one's state, the kernel function and the syscall it sleeps in, and what its
descriptors are. Descriptors are looked at through /proc's own links (stat and
lstat), never opened, so a FIFO or a device a command made costs nothing."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable

from bashrpc.server.runtime.containment import procs
from bashrpc.server.runtime.containment.inputwait import Descriptor, Kind, ProcFacts

# Character devices that are terminals: the pseudo-terminals' slaves, the
# virtual consoles, /dev/tty and /dev/console (a PTY's master, 5:2, is not).
_PTS_MAJORS = range(136, 144)
_TTY_MAJOR = 4
_ALT_TTY_MAJOR, _ALT_TTY_MINORS = 5, (0, 1)


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def _kind(path: str, mode: int, rdev: int) -> Kind:
    if stat.S_ISFIFO(mode):
        return Kind.PIPE
    if stat.S_ISSOCK(mode):
        return Kind.SOCKET
    if stat.S_ISCHR(mode):
        major, minor = os.major(rdev), os.minor(rdev)
        if major in _PTS_MAJORS or major == _TTY_MAJOR:
            return Kind.TERMINAL
        if major == _ALT_TTY_MAJOR and minor in _ALT_TTY_MINORS:
            return Kind.TERMINAL
        return Kind.OTHER
    try:
        if os.readlink(path) == "anon_inode:[signalfd]":
            return Kind.SIGNAL
    except OSError:
        pass
    return Kind.OTHER


def descriptors(pid: int) -> tuple[Descriptor, ...]:
    """What a process holds open, by kind; empty once it is gone."""
    base = f"/proc/{pid}/fd"
    try:
        names = os.listdir(base)
    except OSError:
        return ()
    found = []
    for name in names:
        path = f"{base}/{name}"
        try:
            link = os.lstat(path)
            target = os.stat(path)
        except OSError:
            continue
        kind = _kind(path, target.st_mode, target.st_rdev)
        inode = target.st_ino if kind is Kind.PIPE else None
        found.append(Descriptor(int(name), kind, inode, bool(link.st_mode & stat.S_IWUSR)))
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
