"""The process table as /proc shows it, and signals to processes (Linux).

A pid alone does not name a process for long: once a process is reaped its
pid can be handed out again. The pair (pid, start time) does, which is what
every record kept across scans holds.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable

import msgspec

from bashrpc.server import log

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
CLONE_NEWCGROUP = 0x02000000
# The bit of CAP_SYS_ADMIN in a capability mask: what unshare(CLONE_NEWCGROUP) needs.
CAP_SYS_ADMIN_BIT = 21
# Every process started through the server inherits this variable. It is only
# a hint (a command can clear its environment): ownership never rests on it.
OWNER_ENV = "BASHRPC_OWNER"

_log = log.get("procs")
_libc: ctypes.CDLL | None = None


class ProcInfo(msgspec.Struct, frozen=True):
    ppid: int
    pgid: int
    sid: int
    state: str
    # Clock ticks after boot: with the pid, it names one process for good.
    start: int
    # Clock ticks it has run (user and system): grows while it makes progress.
    cpu: int = 0

    @property
    def zombie(self) -> bool:
        return self.state in ("Z", "X")


def _c() -> ctypes.CDLL | None:
    """The C library, loaded once (in the server, before any fork needs it)."""
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    return _libc


def libc() -> ctypes.CDLL | None:
    """The C library, for a syscall Python does not wrap."""
    return _c()


def prctl(option: int, arg: int) -> bool:
    """Call prctl(2); also safe in a child between fork and exec."""
    libc = _c()
    return libc is not None and bool(libc.prctl(option, arg, 0, 0, 0) == 0)


def unshare(flags: int) -> bool:
    """Call unshare(2); also safe in a child between fork and exec."""
    libc = _c()
    return libc is not None and bool(libc.unshare(flags) == 0)


def may_administer() -> bool:
    """Whether this process has CAP_SYS_ADMIN (in its user namespace)."""
    raw = _read_proc("self/status") or b""
    for line in raw.splitlines():
        if line.startswith(b"CapEff:"):
            return bool(int(line.split()[1], 16) >> CAP_SYS_ADMIN_BIT & 1)
    return False


def cgroup_namespace(pid: int | str) -> int | None:
    """The number (inode) that names a process's cgroup namespace, or None once it
    is gone. A namespace's number may name another once it is freed: see
    `hold_cgroup_namespace`."""
    try:
        return os.stat(f"/proc/{pid}/ns/cgroup").st_ino
    except OSError:
        return None


def hold_cgroup_namespace(pid: int, start: int) -> int | None:
    """An open handle on the cgroup namespace of the process (pid, `start`), where it
    has one of its own (not this process's). While the handle is open the namespace
    lives, so its number names no other; None when the process is gone."""
    try:
        fd = os.open(f"/proc/{pid}/ns/cgroup", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    info = read_stat(pid)
    # Read after the open: the handle is that process's, not a recycled pid's.
    if info is None or info.start != start or os.fstat(fd).st_ino == cgroup_namespace("self"):
        os.close(fd)
        return None
    return fd


def become_subreaper() -> bool:
    """Orphans below us are re-parented to us instead of to init."""
    return prctl(PR_SET_CHILD_SUBREAPER, 1)


def _read_proc(path: str) -> bytes | None:
    """A file under /proc, or None once what it describes is gone."""
    try:
        with open(f"/proc/{path}", "rb") as f:
            return f.read()
    except OSError:
        return None


def read_stat(pid: int) -> ProcInfo | None:
    """A process's stat line, or None once it is gone."""
    raw = _read_proc(f"{pid}/stat")
    if raw is None:
        return None
    # The command name may hold spaces and parentheses: split after the last ')'.
    fields = raw[raw.rfind(b")") + 2 :].split()
    try:
        return ProcInfo(
            ppid=int(fields[1]),
            pgid=int(fields[2]),
            sid=int(fields[3]),
            state=fields[0].decode(),
            start=int(fields[19]),
            cpu=int(fields[11]) + int(fields[12]),
        )
    except (IndexError, ValueError):
        return None


def chain(pid: int, length: int) -> list[int]:
    """`pid` and its first-born descendants, `length` processes at most: a wrapper and
    what it runs. The eldest child is taken, so an orphan adopted later is not."""
    found = [pid]
    while len(found) < length:
        born = {c: info.start for c in direct_children(pid) if (info := read_stat(c)) is not None}
        if not born:
            break
        pid = min(born, key=lambda c: (born[c], c))
        found.append(pid)
    return found


# bwrap, then its init: pid 1 of the namespace, whose death kills all in it.
SANDBOX_INIT_DEPTH = 2


def sandbox_init(bwrap_pid: int) -> int:
    """The process to kill first in a sandbox: its namespace's init, or bwrap itself
    while the init is not there yet (or no more)."""
    return chain(bwrap_pid, SANDBOX_INIT_DEPTH)[-1]


# The kernel's per-task children lists need CONFIG_PROC_CHILDREN (every major
# distribution sets it); without them, trees are found from each process's parent.
CHILDREN_LISTS = os.path.exists(f"/proc/self/task/{os.getpid()}/children")


def all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


class Scan:
    """/proc as one moment's view, read only as far as someone asks.

    A tree is walked down the kernel's per-task children lists, so its cost is
    its size, not the machine's: fifty shells killed at once used to read every
    /proc entry a few times each. Whatever is read is kept, so many trees
    asked about together share one view. The children lists may miss a child
    that forks or exits during the read; callers that must catch everything
    stop the tree and ask again, which they do anyway to catch new forks.
    """

    def __init__(self) -> None:
        self._stats: dict[int, ProcInfo | None] = {}
        self._children: dict[int, set[int]] = {}
        self._tags: dict[int, str | None] = {}
        self._indexed = False
        self._namespace_of: dict[int, int | None] = {}

    def info(self, pid: int) -> ProcInfo | None:
        if pid not in self._stats:
            self._stats[pid] = read_stat(pid)
        return self._stats[pid]

    def live(self, pid: int, start: int | None = None) -> bool:
        """Running (not a zombie), and the same process if its start time is given."""
        info = self.info(pid)
        return info is not None and not info.zombie and start in (None, info.start)

    def children(self, pid: int) -> set[int]:
        if not CHILDREN_LISTS:
            self._index_by_parent()
            return self._children.get(pid, set())
        if pid not in self._children:
            self._children[pid] = direct_children(pid)
        return self._children[pid]

    def _index_by_parent(self) -> None:
        """Every process's parent, in one pass over /proc (no children lists)."""
        if self._indexed:
            return
        self._indexed = True
        for pid in all_pids():
            info = self.info(pid)
            if info is not None:
                self._children.setdefault(info.ppid, set()).add(pid)

    def descendants(self, roots: Iterable[int]) -> set[int]:
        """Live processes among `roots` and below them, this one excepted."""
        found: set[int] = set()
        stack = [p for p in roots if self.info(p) is not None]
        while stack:
            pid = stack.pop()
            if pid in found:
                continue
            found.add(pid)
            stack.extend(c for c in self.children(pid) if self.info(c) is not None)
        found.discard(os.getpid())
        return {p for p in found if self.live(p)}

    def session(self, sid: int, leader_start: int) -> set[int]:
        """Live processes of the session that the process (`sid`, `leader_start`)
        made: a whole /proc pass, so only kills ask. A session's number is its
        leader's pid, free again once the session is over: while the pid names
        another process, the session is over and that process's is another's."""
        leader = self.info(sid)
        if leader is not None and leader.start != leader_start:
            return set()
        found: set[int] = set()
        for pid in all_pids():
            info = self.info(pid)
            if info is not None and info.sid == sid and not info.zombie:
                found.add(pid)
        return found

    def in_cgroup_namespace(self, namespace: int) -> set[int]:
        """Live processes of the cgroup namespace `namespace` (its number). Each ask
        lists /proc again and reads the namespace of the pids it has not read: one
        scan serves looks over a while (`Containment.shared_scan`), and an escapee born
        since the first, whose parent is gone, is found too. Pids are handed out in
        turn, so one read stays the same process's for far longer than that while."""
        pids = all_pids()
        for pid in pids:
            if pid not in self._namespace_of:
                self._namespace_of[pid] = cgroup_namespace(pid)
        return {pid for pid in pids if self._namespace_of[pid] == namespace and self.live(pid)}

    def tag(self, pid: int) -> str | None:
        if pid not in self._tags:
            self._tags[pid] = owner_tag(pid)
        return self._tags[pid]


def direct_children(pid: int | None = None) -> set[int]:
    """Children of a process (default: this one), from every thread's list."""
    pid = os.getpid() if pid is None else pid
    if not CHILDREN_LISTS:
        return Scan().children(pid)
    out: set[int] = set()
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        out.update(int(p) for p in (_read_proc(f"{pid}/task/{tid}/children") or b"").split())
    return out


def owner_tag(pid: int) -> str | None:
    environ = _read_proc(f"{pid}/environ")
    if environ is None:
        return None
    key = OWNER_ENV.encode() + b"="
    for entry in environ.split(b"\0"):
        if entry.startswith(key):
            return entry[len(key) :].decode(errors="replace")
    return None


def signal_all(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def parents_first(pids: Iterable[int]) -> list[int]:
    """`pids` ordered so that each comes before its descendants among them: a
    signal then reaches a shell before any child it waits for can die of it."""
    wanted = set(pids)
    parent = {pid: info.ppid for pid in wanted if (info := read_stat(pid)) is not None}

    def depth(pid: int) -> int:
        seen = 0
        while (pid := parent.get(pid, 0)) in wanted and seen < len(wanted):
            seen += 1
        return seen

    return sorted(wanted, key=depth)


def alive(pids: Iterable[int]) -> set[int]:
    out = set()
    for pid in pids:
        info = read_stat(pid)
        if info is not None and not info.zombie:
            out.add(pid)
    return out


def reap_orphans(known: set[int]) -> int:
    """Collect exit statuses of re-parented orphans so they do not stay zombies.

    ``known`` are children whose status someone else collects.
    """
    reaped = 0
    for pid in direct_children():
        if pid in known:
            continue
        try:
            done, _status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue
        if done:
            reaped += 1
    return reaped
