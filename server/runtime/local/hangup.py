"""Hanging up on an rc capture, and how long it may go on running its EXIT traps
(or, at shutdown, its rc, before the hang-up).

A trap releases what the rc holds (pyenv's lock), so it is never cut short
while it still makes progress: a process of the capture started or ended,
used CPU, or waits for a CPU (a loaded machine delays it, it is not stuck).
One that makes none for `stall` seconds (an rc that ignores the hang-up, a
trap that waits on something that never comes) is given up on, and so is
every capture after `bound` seconds in all, whatever it does.
"""

from __future__ import annotations

import signal

import anyio
import msgspec

from bashrpc.server import clock
from bashrpc.server.runtime.containment import polling, procs
from bashrpc.server.runtime.containment.trackers import Tracker

# How long a capture may make no progress at all before its tree is killed.
HANGUP_STALL_SECONDS = 2.0
# The most a hung-up capture may take, progress or not.
HANGUP_BOUND_SECONDS = 30.0


class Sample(msgspec.Struct, frozen=True):
    """What the capture's processes look like at one moment."""

    # (pid, start time) of each member: a change is a process started or ended.
    members: frozenset[tuple[int, int]]
    # Clock ticks run by the members so far.
    cpu: int
    # Some member is runnable: waiting for a CPU counts as progress.
    runnable: bool


class Progress:
    def __init__(
        self, now: float, stall: float = HANGUP_STALL_SECONDS, bound: float = HANGUP_BOUND_SECONDS
    ) -> None:
        self._stall = stall
        self._end = now + bound
        self._last_progress = now
        self._last: Sample | None = None

    def note(self, now: float, sample: Sample) -> None:
        last = self._last
        moved = last is None or sample.members != last.members or sample.cpu > last.cpu
        if moved or sample.runnable:
            self._last_progress = now
        self._last = sample

    def given_up(self, now: float) -> bool:
        """Past the bound, or no progress for the stall time."""
        return now >= self._end or now >= self._last_progress + self._stall


async def hang_up(tracker: Tracker, spared: set[int] | None = None) -> None:
    """SIGHUP the whole capture (but `spared`), each bash in it running its EXIT
    trap; wait for them all to be gone while they make progress (`Progress`).

    Parents are signalled before their children: a bash whose foreground child
    died of the SIGHUP first would take that for the end of its script, run its
    EXIT trap as at a normal exit, and then be ended mid-trap by its own SIGHUP."""
    procs.signal_all(procs.parents_first(tracker.members() - (spared or set())), signal.SIGHUP)
    await while_progressing(tracker, HANGUP_STALL_SECONDS, HANGUP_BOUND_SECONDS)


async def while_progressing(tracker: Tracker, stall: float, bound: float) -> None:
    """Wait for the tracker's processes to be gone, while they make progress
    (`Progress`, with `stall` and `bound`)."""
    progress = Progress(clock.now(), stall, bound)
    for pause in polling.intervals():
        members = tracker.members()
        if not members:
            return
        now = clock.now()
        progress.note(now, _sample(members))
        if progress.given_up(now):
            return
        await anyio.sleep(pause)


def _sample(members: set[int]) -> Sample:
    infos = [(pid, info) for pid in members if (info := procs.read_stat(pid)) is not None]
    return Sample(
        members=frozenset((pid, info.start) for pid, info in infos),
        cpu=sum(info.cpu for _, info in infos),
        runnable=any(info.state == "R" for _, info in infos),
    )
