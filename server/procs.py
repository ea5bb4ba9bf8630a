"""Finding and killing process trees, and reaping orphans.

A command can escape its shell's process group (``setsid``) and even its
parentage (a double fork). The server makes itself a child subreaper, so such
orphans are re-parented to it instead of to init; every process a shell
starts carries an owner tag in its environment, so an orphan can still be
traced back to the shell that started it.
"""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Callable, Iterable

import anyio

from server import log

PR_SET_CHILD_SUBREAPER = 36
OWNER_ENV = "BASHRPC_OWNER"
KILL_POLL_SECONDS = 0.02

_log = log.get("procs")


def become_subreaper() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _read_stat(pid: int) -> tuple[int, int, int, str] | None:
    """(ppid, pgid, sid, state) of a process, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: split after the last ')'.
    fields = raw[raw.rfind(b")") + 2 :].split()
    return int(fields[1]), int(fields[2]), int(fields[3]), fields[0].decode()


def snapshot() -> dict[int, tuple[int, int, int, str]]:
    table: dict[int, tuple[int, int, int, str]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            info = _read_stat(int(name))
            if info is not None:
                table[int(name)] = info
    return table


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


def tree(roots: Iterable[int], groups: Iterable[int] = ()) -> set[int]:
    """Every live process under ``roots``, plus members of the sessions/groups given."""
    table = snapshot()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _pgid, _sid, _state) in table.items():
        children.setdefault(ppid, []).append(pid)
    group_set = set(groups)
    found: set[int] = set()
    if group_set:
        for pid, (_ppid, pgid, sid, _state) in table.items():
            if pgid in group_set or sid in group_set:
                found.add(pid)
    stack = [p for p in roots if p in table] + list(found)
    while stack:
        pid = stack.pop()
        for child in children.get(pid, ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    found.update(p for p in roots if p in table)
    found.discard(os.getpid())
    return {p for p in found if table.get(p, (0, 0, 0, "Z"))[3] != "Z"}


def owned_tree(leader: int, tag: str | None) -> set[int]:
    """A session leader's live processes, plus orphans that carry its owner tag.

    The leader's session and group catch descendants that are still attached;
    the tag catches double-forked ones, re-parented to this server.
    """
    orphans = {p for p in direct_children() if tag is not None and owner_tag(p) == tag}
    return tree({leader} | orphans, groups=(leader,))


def descendants() -> set[int]:
    """Every live process below this server."""
    return tree([os.getpid()])


def signal_all(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def alive(pids: Iterable[int]) -> set[int]:
    out = set()
    for pid in pids:
        info = _read_stat(pid)
        if info is not None and info[3] != "Z":
            out.add(pid)
    return out


async def terminate(
    pids: set[int], grace_seconds: float, rescan: Callable[[], set[int]] | None = None
) -> None:
    """SIGTERM, wait up to the grace period, then SIGKILL whatever is left.

    ``rescan`` returns the current tree, so that processes forked during the
    grace period are caught too.
    """

    def current() -> set[int]:
        return alive(pids) | (rescan() if rescan is not None else set())

    if not pids:
        return
    signal_all(pids, signal.SIGTERM)
    with anyio.move_on_after(grace_seconds):
        while survivors := current():
            pids |= survivors
            await anyio.sleep(KILL_POLL_SECONDS)
    while survivors := current():
        pids |= survivors
        signal_all(survivors, signal.SIGKILL)
        await anyio.sleep(KILL_POLL_SECONDS)


def reap_orphans(known: set[int]) -> int:
    """Collect exit statuses of re-parented orphans so they do not stay zombies.

    ``known`` are children whose status the event loop collects itself.
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
