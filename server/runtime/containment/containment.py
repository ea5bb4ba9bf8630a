"""Which processes belong to a shell, and how they all die.

Every shell, PTY command and rc capture gets a Tracker. A tracker answers
"which live processes did this start?" with nothing a command can undo:
- With a cgroup per shell (where one can be created), membership is the
  kernel's: setsid, double forks and `env -i` change nothing. Root may still
  move a process out by writing a `cgroup.procs`, so a kill also walks the
  shell's session and parentage, and takes the server's orphans that no group
  of its own holds (`CgroupTracker.strays`).
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

import os
import signal
from abc import ABC, abstractmethod
from collections.abc import Callable

import anyio

from bashrpc.server.runtime.containment import polling, procs
from bashrpc.server.runtime.containment.cgroups import Cgroup, CgroupRoot
from bashrpc.server.runtime.containment.procs import Scan

# Stopping a tree that keeps forking converges in a few rounds; a fork bomb
# does not, and then the kill proceeds with what was caught.
MAX_STOP_ROUNDS = 8
# The freezer settles in microseconds; this only bounds a pathological case.
FREEZE_SETTLE_SECONDS = 0.5
# A SIGKILLed leader is gone in microseconds; a sandbox's init first kills its
# namespace. This only bounds a leader stuck in the kernel.
LEADER_DEATH_SECONDS = 1.0

Reporter = Callable[[int, int], None]


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
            await polling.repeat_while(self._remaining, self._force)

    def _remaining(self) -> set[int]:
        """What a kill still has to end: its members, as a kill finds them."""
        return self.members()


class CgroupTracker(Tracker):
    """Members are the group's; a kill also takes what left it (see `strays`)."""

    def __init__(self, tag: str, group: Cgroup, owner: Containment) -> None:
        super().__init__(tag)
        self.group = group
        self._owner = owner
        # The leader's session (its own: every child starts in a new one), if known.
        self._session: int | None = None
        # (pid, start time) of every stray seen, the leader first.
        self._strays: dict[int, int] = {}

    def prepare_child(self) -> None:
        self.group.join_from_child()

    can_place = True

    def place(self, pid: int) -> bool:
        return self.group.add(pid)

    def adopt(self, pid: int) -> None:
        info = procs.read_stat(pid)
        if info is not None:
            self._strays[pid] = info.start
            if info.sid == pid:
                self._session = pid

    def members(self, scan: Scan | None = None) -> set[int]:
        return self.group.procs()

    def strays(self, scan: Scan | None = None) -> set[int]:
        """Processes of this tracker outside its group: root may move a process to
        any group. The second net, for kills: the leader's session, everything
        below the leader, the group and what was seen before, and the server's
        orphans that are in no group of its own (`Containment.escaped`)."""
        scan = Scan() if scan is None else scan
        group = self.group.procs()
        seen = {pid for pid, start in list(self._strays.items()) if scan.live(pid, start)}
        found = scan.descendants(group | seen)
        if self._session is not None:
            found |= scan.session(self._session)
        found |= self._owner.escaped(scan)
        found -= group
        for pid in found:
            info = scan.info(pid)
            if info is not None:
                self._strays.setdefault(pid, info.start)
        return found

    def _remaining(self) -> set[int]:
        return self.group.procs() | self.strays()

    async def _stop_all(self, leader: int | None) -> set[int]:
        self.group.freeze(True)
        stopped = stop_rounds(self.strays)
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
        self.group.remove()


class AncestryTracker(Tracker):
    """Without cgroups: the leader is a subreaper, and what was seen is remembered."""

    def __init__(self, tag: str, owner: Containment) -> None:
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


class Containment:
    """Makes trackers: cgroups where they can be made, ancestry otherwise."""

    def __init__(self, root: CgroupRoot | None, report: Reporter | None = None) -> None:
        self.root = root
        # The server's outermost group (a daemon's, around its tenants' roots).
        self.home: Cgroup | None = root
        self._report = report
        self._ancestry: set[AncestryTracker] = set()
        # Children of the server that no tracker may claim (the watchdog).
        self.spare: set[int] = set()

    @property
    def uses_cgroups(self) -> bool:
        return self.root is not None

    def tracker(self, name: str) -> Tracker:
        tag = f"{os.getpid()}.{name}"
        if self.root is not None:
            group = self.root.child(name)
            if group is not None:
                return CgroupTracker(tag, group, self)
        tracker = AncestryTracker(tag, self)
        self._ancestry.add(tracker)
        return tracker

    def report(self, pid: int, start: int) -> None:
        if self._report is not None:
            self._report(pid, start)

    def accounted(self) -> set[int]:
        """The server's children some tracker (or nobody) already answers for."""
        out = set(self.spare)
        for tracker in self._ancestry:
            out |= tracker.seen
        return out

    def unclaimed(self, scan: Scan) -> set[int]:
        """The server's children nobody answers for: orphans re-parented to it. Only
        these are asked for their tag (reading every shell's environment on every
        question made each kill cost O(shells))."""
        return scan.children(os.getpid()) - self.accounted()

    def escaped(self, scan: Scan) -> set[int]:
        """Orphans that left every group of the server's: its children (it is a
        subreaper) in a session not its own, which no tracker answers for and no
        group below its outermost one holds. No command's process stays a member
        that way but by writing a `cgroup.procs` (as root), so any kill takes them."""
        if self.home is None:
            return set()
        own_session = os.getsid(0)
        orphans = set()
        for pid in self.unclaimed(scan):
            info = scan.info(pid)
            if info is not None and not info.zombie and info.sid != own_session:
                orphans.add(pid)
        return orphans - self.home.procs(own=False) if orphans else orphans

    def forget(self, tracker: AncestryTracker) -> None:
        self._ancestry.discard(tracker)

    async def kill_everything(self) -> None:
        """The last sweep at shutdown: every group at once."""
        if self.root is None:
            return
        with anyio.CancelScope(shield=True):
            root = self.root
            await polling.repeat_while(lambda: root.populated, lambda _: root.kill())
            root.remove()
