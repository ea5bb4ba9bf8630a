"""Which processes belong to a shell, and how they all die.

Every shell, PTY command and rc capture gets a Tracker. A tracker answers
"which live processes did this start?" with nothing a command can undo:
- With a cgroup per shell (where one can be created), membership is the
  kernel's: setsid, double forks and `env -i` change nothing. Root may still
  move a process out by writing a `cgroup.procs`, so a kill also walks the
  shell's session and parentage, and takes what is in its child's cgroup
  namespace but not in its group (`CgroupTracker.strays`).
- Otherwise the shell is made a child subreaper, so while it lives every
  process it started stays below it. When it dies, its orphans are
  re-parented to the server (a subreaper too), and the tracker claims the
  server's children that nothing accounts for. Everything seen is recorded
  by (pid, start time), so a recycled pid is never taken for a member. The
  one gap: two leaders dying at the same moment may claim each other's
  orphans, which then die with the first of them to be killed.

Killing always stops the shell first, so an aborted command cannot run one
more statement: the whole group is frozen (or every member SIGSTOPped),
the shell is SIGKILLed (a sandboxed one by its namespace's init) and awaited,
the rest get SIGTERM and are resumed to act on it, and whatever is still
alive after the grace period gets SIGKILL.
"""

from __future__ import annotations

import itertools
import os
import signal
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Protocol

import anyio

from bashrpc.server.runtime.containment import polling, procs
from bashrpc.server.runtime.containment.cgroups import Cgroup
from bashrpc.server.runtime.containment.procs import Scan

# Stopping a tree that keeps forking converges in a few rounds; a fork bomb
# does not, and then the kill proceeds with what was caught.
MAX_STOP_ROUNDS = 8
# The freezer settles in microseconds; this only bounds a pathological case.
FREEZE_SETTLE_SECONDS = 0.5
# Kills that start together (a shutdown) share the pass over /proc that finds a
# shell's session and what left its group; each look lists /proc again and reads
# only the processes born since (`Scan.session`, `Scan.in_cgroup_namespace`).
SHARED_SCAN_SECONDS = 0.05
# A SIGKILLed leader is gone in microseconds; a sandbox's init first kills its
# namespace. This only bounds a leader stuck in the kernel.
LEADER_DEATH_SECONDS = 1.0

Reporter = Callable[[int, int], None]


class Owner(Protocol):
    """What a tracker asks of the registry that made it (`registry.Containment`)."""

    cgroup_namespaces: bool

    def shared_scan(self) -> Scan: ...

    def unclaimed(self, scan: Scan) -> set[int]: ...

    def report(self, pid: int, start: int) -> None: ...

    def forget(self, tracker: AncestryTracker) -> None: ...


def stop_rounds(found: Callable[[], set[int]]) -> set[int]:
    """SIGSTOP what `found` returns, again and again until it finds nothing new
    (forks in flight), or `MAX_STOP_ROUNDS` went by; who was stopped."""
    stopped: set[int] = set()
    for _ in range(MAX_STOP_ROUNDS):
        fresh = found() - stopped
        if not fresh:
            break
        procs.signal_all(fresh, signal.SIGSTOP)
        stopped |= fresh
    return stopped


class Tracker(ABC):
    """The processes one shell (or PTY command, or rc capture) started."""

    def __init__(self, tag: str) -> None:
        # Also exported as OWNER_ENV: a hint for humans and for the fallback.
        self.tag = tag

    @abstractmethod
    def prepare_child(self) -> None:
        """Runs in the child between fork and exec: only plain syscalls here."""

    # Whether `place` works: a subreaper has to ask for it itself.
    can_place = False
    # Whether the child must run `prepare_child` even so: what it makes there (a
    # cgroup namespace) no one can make for it from outside.
    needs_setup = False

    def place(self, pid: int) -> bool:
        """Put a process that already runs in the tracker, from outside it."""
        return False

    def adopt(self, pid: int) -> None:  # noqa: B027 - optional hook
        """The leader's pid, once it is known."""

    def leader_exited(self) -> None:  # noqa: B027 - optional hook
        """The leader is gone (and collected): take in what it left behind."""

    @abstractmethod
    def members(self, scan: Scan | None = None) -> set[int]:
        """Live processes of this tracker, the leader included if alive."""

    @abstractmethod
    async def _stop_all(self, leader: int | None) -> set[int]:
        """Stop every member, the leader first; return who was stopped."""

    @abstractmethod
    def _resume(self, pids: set[int]) -> None: ...

    @abstractmethod
    def _force(self, members: set[int]) -> None:
        """SIGKILL every remaining member (`members`, as just found)."""

    def release(self) -> None:  # noqa: B027 - optional hook
        """Free what the tracker holds (its cgroup) once everything is dead."""

    async def kill(self, leader: int | None, grace_seconds: float) -> None:
        """Kill everything: the leader at once, the rest after a TERM and a grace period."""
        with anyio.CancelScope(shield=True):
            stopped = await self._stop_all(leader)
            if not stopped:
                return
            if leader is not None and leader in stopped:
                procs.signal_all([leader], signal.SIGKILL)
                # The rest stay stopped until the leader is dead: a sandbox's init
                # takes its namespace with it, and nothing there may run a line more.
                await polling.until(lambda: not procs.alive([leader]), LEADER_DEATH_SECONDS)
            rest = stopped - {leader}
            procs.signal_all(rest, signal.SIGTERM)
            self._resume(stopped)
            await polling.until(lambda: not self._remaining(), grace_seconds if rest else 0)
            await polling.repeat_while(lambda: self._remaining(thorough=True), self._force)

    def _remaining(self, *, thorough: bool = False) -> set[int]:
        """What a kill still has to end: its members, as a kill finds them; looked
        for `thorough`ly before it gives up on them, cheaply while it waits."""
        return self.members()


class CgroupTracker(Tracker):
    """Members are the group's; a kill also takes what left it (see `strays`)."""

    def __init__(self, tag: str, group: Cgroup, owner: Owner) -> None:
        super().__init__(tag)
        self.group = group
        self._owner = owner
        self.needs_setup = owner.cgroup_namespaces
        # The leader's session (its own: every child starts in a new one), as the
        # leader's (pid, start time), while it may have members.
        self._session: tuple[int, int] | None = None
        # (pid, start time) of every stray seen, the leader first.
        self._strays: dict[int, int] = {}
        # The leader's cgroup namespace (its number), held open (see `adopt`).
        self._namespace: int | None = None
        self._namespace_fd: int | None = None

    def prepare_child(self) -> None:
        self.group.join_from_child()
        if self.needs_setup:
            # Its group is the root of what it sees of cgroups; where cgroup v2 is
            # mounted with nsdelegate, no write to a cgroup.procs takes it out.
            procs.unshare(procs.CLONE_NEWCGROUP)

    can_place = True

    def place(self, pid: int) -> bool:
        return self.group.add(pid)

    def adopt(self, pid: int) -> None:
        """Record the leader, its session and its cgroup namespace: a mark of its
        own that every process it starts keeps, whatever group it moves to."""
        info = procs.read_stat(pid)
        if info is None:
            return
        self._strays[pid] = info.start
        if info.sid == pid:
            self._session = (pid, info.start)
        if self.needs_setup and self._namespace_fd is None:
            self._namespace_fd = procs.hold_cgroup_namespace(pid, info.start)
            if self._namespace_fd is not None:
                self._namespace = os.fstat(self._namespace_fd).st_ino

    def members(self, scan: Scan | None = None) -> set[int]:
        return self.group.procs()

    def strays(self, *, thorough: bool = False) -> set[int]:
        """Processes of this tracker outside its group: root may move a process to
        any group. The second net, for kills: everything below the group and what
        was seen before (the leader first); `thorough`ly, also the leader's session
        and its cgroup namespace (`_outside`), which kills ask while stopping and
        at the end, not on every poll.

        Leaving the group, the session, the parentage and the environment keeps
        the cgroup namespace, so an escaped process is this tracker's alone: no
        other shell's, tenant's or server's kill takes it, nor anything that is not
        a command's. Where no namespace can be made (without CAP_SYS_ADMIN), only
        a group's owner may move a process out, and then only to another group
        it owns: within a delegated subtree (a non-root server under systemd),
        such a process is found by its session and parentage only. A process
        that makes a cgroup namespace of its own before it leaves is found so too."""
        scan = Scan()
        group = self.group.procs()
        seen = self._seen(scan)
        if thorough:
            seen |= self._outside(self._owner.shared_scan())
        found = scan.descendants(group | seen) - group
        for pid in found:
            info = scan.info(pid)
            if info is not None:
                self._strays.setdefault(pid, info.start)
        return found

    def _outside(self, shared: Scan) -> set[int]:
        """The processes of the leader's session and of its cgroup namespace. A
        session that has no member left is over for good (no process joins one):
        it is forgotten, and its number, once handed out again, names nothing of
        this tracker's."""
        found: set[int] = set()
        if self._session is not None:
            members = shared.session(*self._session)
            if not members:
                self._session = None
            found |= members
        if self._namespace is not None:
            found |= shared.in_cgroup_namespace(self._namespace)
        return found

    def _remaining(self, *, thorough: bool = False) -> set[int]:
        """While the kill waits, its group and the strays it stopped: a walk of
        their trees on every poll of every kill cost seconds when fifty shells
        were killed together. The look before it gives up walks them."""
        if thorough:
            return self.group.procs() | self.strays(thorough=True)
        return self.group.procs() | self._seen(Scan())

    def _seen(self, scan: Scan) -> set[int]:
        """The strays seen before that still live (the same processes: pid and start)."""
        return {pid for pid, start in list(self._strays.items()) if scan.live(pid, start)}

    async def _stop_all(self, leader: int | None) -> set[int]:
        self.group.freeze(True)
        # Thorough once: what the later rounds look for is below what it found.
        looks = itertools.chain([True], itertools.repeat(False))
        stopped = stop_rounds(lambda: self.strays(thorough=next(looks)))
        with anyio.move_on_after(FREEZE_SETTLE_SECONDS):
            while self.group.populated and not self.group.frozen:
                await anyio.sleep(0.001)
        return self.group.procs() | procs.alive(stopped)

    def _resume(self, pids: set[int]) -> None:
        self.group.freeze(False)
        procs.signal_all(pids - self.group.procs(), signal.SIGCONT)

    def _force(self, members: set[int]) -> None:
        self.group.kill()
        procs.signal_all(members, signal.SIGKILL)

    def release(self) -> None:
        # Once closed, the namespace's number may come to name another's.
        if self._namespace_fd is not None:
            os.close(self._namespace_fd)
        self._namespace_fd = self._namespace = None
        self.group.remove()


class AncestryTracker(Tracker):
    """Without cgroups: the leader is a subreaper, and what was seen is remembered."""

    def __init__(self, tag: str, owner: Owner) -> None:
        super().__init__(tag)
        # (pid, start time) of every member ever seen, the leader first.
        self._seen: dict[int, int] = {}
        self._owner = owner
        self.leader: int | None = None

    def prepare_child(self) -> None:
        procs.become_subreaper()

    def adopt(self, pid: int) -> None:
        self.leader = pid
        info = procs.read_stat(pid)
        if info is not None:
            self._remember(pid, info.start)

    def leader_exited(self) -> None:
        scan = Scan()
        for pid in self._owner.unclaimed(scan):
            info = scan.info(pid)
            if info is not None:
                self._remember(pid, info.start)
        self.members(scan)

    @property
    def seen(self) -> set[int]:
        return set(self._seen)

    def _remember(self, pid: int, start: int) -> None:
        if self._seen.get(pid) != start:
            self._seen[pid] = start
            self._owner.report(pid, start)

    def members(self, scan: Scan | None = None) -> set[int]:
        scan = Scan() if scan is None else scan
        roots: set[int] = set()
        for pid, start in list(self._seen.items()):
            info = scan.info(pid)
            if info is None or info.start != start:
                # Gone: forgotten, so the record holds only what may still be a member.
                del self._seen[pid]
            elif not info.zombie:
                roots.add(pid)
        # Orphans that kept their environment are traced by their tag.
        roots |= {pid for pid in self._owner.unclaimed(scan) if scan.tag(pid) == self.tag}
        found = scan.descendants(roots)
        for pid in found:
            info = scan.info(pid)
            if info is not None:
                self._remember(pid, info.start)
        return found

    async def _stop_all(self, leader: int | None) -> set[int]:
        if leader is not None:
            procs.signal_all([leader], signal.SIGSTOP)
        stopped = stop_rounds(self.members)
        return procs.alive(stopped | self.members())

    def _resume(self, pids: set[int]) -> None:
        procs.signal_all(pids, signal.SIGCONT)

    def _force(self, members: set[int]) -> None:
        procs.signal_all(members, signal.SIGKILL)

    def release(self) -> None:
        self._owner.forget(self)
