"""The process table as /proc shows it, and signals to processes (Linux).

A pid alone does not name a process for long: once a process is reaped its
pid can be handed out again. The pair (pid, start time) does, which is what
every record kept across scans holds.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable
from dataclasses import dataclass

from server import log

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
# Every process started through the server inherits this variable. It is only
# a hint (a command can clear its environment): ownership never rests on it.
OWNER_ENV = "BASHRPC_OWNER"
KILL_POLL_SECONDS = 0.02

_log = log.get("procs")
_libc: ctypes.CDLL | None = None


@dataclass(frozen=True, slots=True)
class ProcInfo:
    ppid: int
    pgid: int
    sid: int
    state: str
    # Clock ticks after boot: with the pid, it names one process for good.
    start: int

    @property
    def zombie(self) -> bool:
        return self.state in ("Z", "X")


ProcTable = dict[int, ProcInfo]


def prctl(option: int, arg: int) -> bool:
    """Call prctl(2); also safe in a child between fork and exec."""
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
        return bool(_libc.prctl(option, arg, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def become_subreaper() -> bool:
    """Orphans below us are re-parented to us instead of to init."""
    return prctl(PR_SET_CHILD_SUBREAPER, 1)


def read_stat(pid: int) -> ProcInfo | None:
    """A process's stat line, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
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
        )
    except (IndexError, ValueError):
        return None


def chain(pid: int, length: int) -> list[int]:
    """`pid` and its first-born descendants, `length` processes at most: a wrapper and
    what it runs. The eldest child is taken, so an orphan adopted later is not."""
    found = [pid]
    while len(found) < length:
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                children = [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            break
        born = {c: info.start for c in children if (info := read_stat(c)) is not None}
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


def snapshot() -> ProcTable:
    """Every process on the machine, in one pass over /proc."""
    table: ProcTable = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            info = read_stat(int(name))
            if info is not None:
                table[int(name)] = info
    return table


class Scan:
    """One pass over /proc, shared by everyone who asks in the same moment."""

    def __init__(self) -> None:
        self.table = snapshot()
        self._tags: dict[int, str | None] | None = None

    def orphan_tags(self) -> dict[int, str | None]:
        """This process's children with the owner tag each carries, read once."""
        if self._tags is None:
            self._tags = {pid: owner_tag(pid) for pid in direct_children() if pid in self.table}
        return self._tags


def descendants(roots: Iterable[int], table: ProcTable) -> set[int]:
    """Live processes among `roots` and below them."""
    children: dict[int, list[int]] = {}
    for pid, info in table.items():
        children.setdefault(info.ppid, []).append(pid)
    found: set[int] = set()
    stack = [p for p in roots if p in table]
    while stack:
        pid = stack.pop()
        if pid in found:
            continue
        found.add(pid)
        stack.extend(children.get(pid, ()))
    found.discard(os.getpid())
    return {p for p in found if not table[p].zombie}


def direct_children(pid: int | None = None) -> set[int]:
    """Children of a process (default: this one), from every thread's list."""
    pid = os.getpid() if pid is None else pid
    out: set[int] = set()
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                out.update(int(p) for p in f.read().split())
        except OSError:
            continue
    return out


def owner_tag(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = f.read()
    except OSError:
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
