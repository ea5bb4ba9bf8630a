"""The server's trackers, made and accounted for in one place: a cgroup per
shell where one can be made, ancestry otherwise; which of the server's children
some tracker already answers for; the pass over /proc that kills starting
together share; and the last sweep at shutdown."""

from __future__ import annotations

import asyncio
import os
import time

import anyio

from bashrpc.server.runtime.containment import polling, procs
from bashrpc.server.runtime.containment.cgroups import CgroupRoot
from bashrpc.server.runtime.containment.procs import Scan
from bashrpc.server.runtime.containment.trackers import (
    SHARED_SCAN_SECONDS,
    AncestryTracker,
    CgroupTracker,
    Reporter,
    Tracker,
)


class Containment:
    """Makes trackers: cgroups where they can be made, ancestry otherwise."""

    def __init__(self, root: CgroupRoot | None, report: Reporter | None = None) -> None:
        self.root = root
        # One pass over /proc for the thorough looks of kills that start together.
        self._shared: tuple[float, Scan] | None = None
        # Whether the loop is still in the turn that made it.
        self._shared_this_turn = False
        # Each tracker's child in a cgroup namespace of its own, where one can be made.
        self.cgroup_namespaces = root is not None and procs.may_administer()
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
        question made each kill cost O(shells)). A child in the server's own session
        is none: no process can join a session, so the server started it itself (the
        sandbox's probe, git for the guard), and a shell that ends never takes it."""
        own = os.getsid(0)
        return {
            pid
            for pid in scan.children(os.getpid()) - self.accounted()
            if (info := scan.info(pid)) is None or info.sid != own
        }

    def shared_scan(self) -> Scan:
        """The view of /proc that the thorough looks of kills share within
        `SHARED_SCAN_SECONDS` of each other, or within the loop's turn that made it:
        fifty shells killed together (a shutdown, a reset of them all) read each
        process once, not fifty times. By time alone, a loaded machine, which makes
        each look slower, made each one a pass of its own: the close of sixty
        shells beside a thousand processes cost 4 s of CPU instead of 0.8 s."""
        now = time.monotonic()
        fresh = self._shared is not None and now - self._shared[0] <= SHARED_SCAN_SECONDS
        if self._shared is None or not (fresh or self._shared_this_turn):
            self._shared = (now, Scan())
            self._shared_this_turn = True
            asyncio.get_running_loop().call_soon(self._turn_over)
        return self._shared[1]

    def _turn_over(self) -> None:
        self._shared_this_turn = False

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
