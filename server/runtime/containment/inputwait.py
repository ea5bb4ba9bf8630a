"""Whether a command waits for a person, from what the kernel says of its
processes (pure): no text is read, so no prompt wording fools it.

A command waits when none of its processes runs, at least one is blocked
reading its terminal (or polling it, as full-screen programs do), and none
sleeps on something that will end by itself: a timer, a lock, the network,
the disk, or a pipe another of its own processes writes. A shell waiting for
its child, or a process in a signal wait, says nothing either way.
`procfacts.py` takes the facts from /proc; the poller that asks for a settle
time of the same answer is the runner's (`run/inputwatch.py`).
"""

from __future__ import annotations

import enum
import platform

import msgspec

# Syscall numbers by machine: the reads (fd first), and the waits on many fds.
_READS = {
    "x86_64": {0, 17, 19, 295},  # read, pread64, readv, preadv
    "aarch64": {63, 65, 67, 69},
}
_POLLS = {
    "x86_64": {7, 23, 232, 270, 271, 281, 441},  # poll, select, epoll_wait, pselect6, ppoll...
    "aarch64": {22, 72, 73, 441},
}
_WRITES = {"x86_64": {1, 18, 20, 296}, "aarch64": {64, 66, 68, 70}}  # write, pwrite64, writev...
_LOCKS = {"x86_64": {73, 202}, "aarch64": {32, 98}}  # flock, futex
_SLEEPS = {"x86_64": {35, 230}, "aarch64": {101, 115}}  # nanosleep, clock_nanosleep
# wait4, waitid, pause, rt_sigsuspend, rt_sigtimedwait: a child or a signal decides.
_WAITS = {"x86_64": {61, 247, 34, 130, 128}, "aarch64": {260, 95, 133, 137}}


class Kind(enum.Enum):
    """What one descriptor is, as its /proc/PID/fd link names it."""

    TERMINAL = "terminal"
    PIPE = "pipe"
    # A signalfd: reading it is waiting for a signal (bwrap's init does).
    SIGNAL = "signal"
    SOCKET = "socket"
    OTHER = "other"


class Descriptor(msgspec.Struct, frozen=True):
    fd: int
    kind: Kind
    # A pipe's (or FIFO's) inode: who else holds it open for writing.
    inode: int | None = None
    writes: bool = False


class ProcFacts(msgspec.Struct, frozen=True):
    """One process, at one look."""

    pid: int
    # /proc/PID/stat's state: R running, S sleeping, D disk, T stopped, Z zombie.
    state: str
    # The kernel function it sleeps in ("" when running or unknown).
    wchan: str
    # The syscall it is blocked in and its first argument; None when it is in none.
    syscall: int | None
    arg0: int | None
    cpu: int
    program: str
    fds: tuple[Descriptor, ...] = ()
    # Its session: a daemon the command started (gpg-agent) has one of its own.
    sid: int = 0


class Activity(enum.Enum):
    """What one process is doing, for the verdict."""

    BUSY = "busy"  # runs, or sleeps on what will end by itself
    INPUT = "input"  # blocked on its terminal
    NEUTRAL = "neutral"  # waits on a child or a signal: its children decide


class Verdict(msgspec.Struct, frozen=True):
    """A look at a whole command: who waits for input, if it does."""

    waiting: bool
    pid: int | None = None
    program: str | None = None
    # All processes' CPU time: a wait that holds across looks never adds to it.
    cpu: int = 0
    # The asking process's descriptor of the terminal it waits on (its own: a
    # program may run another on a terminal of its own, as `su -P` does).
    terminal_fd: int | None = None


def _machine() -> str:
    machine = platform.machine()
    return machine if machine in _READS else "x86_64"


MACHINE = _machine()


class Pipes(msgspec.Struct, frozen=True):
    """Who of the command holds each pipe (by inode) open, for writing and for
    reading; and the pipes its person writes (a background job's stdin), which
    are its terminal."""

    writers: dict[int, set[int]]
    readers: dict[int, set[int]]
    inputs: frozenset[int] = frozenset()

    @classmethod
    def of(cls, procs: list[ProcFacts], inputs: frozenset[int] = frozenset()) -> Pipes:
        pipes = cls({}, {}, inputs)
        for proc in procs:
            for d in proc.fds:
                if d.kind is Kind.PIPE and d.inode is not None:
                    side = pipes.writers if d.writes else pipes.readers
                    side.setdefault(d.inode, set()).add(proc.pid)
        return pipes

    def person(self, d: Descriptor) -> bool:
        """Whether `d` is the read side of a pipe its person writes."""
        return d.kind is Kind.PIPE and not d.writes and d.inode in self.inputs

    def others(self, side: dict[int, set[int]], d: Descriptor | None, pid: int) -> bool:
        """Whether another process of the command holds that side of `d`'s pipe."""
        if d is None or d.kind is not Kind.PIPE or d.inode is None:
            return False
        return bool(side.get(d.inode, set()) - {pid})


def activity(proc: ProcFacts, pipes: Pipes) -> Activity:
    """One process's part, given who of the command holds which pipe."""
    if proc.state in ("Z", "X", "T", "t"):
        return Activity.NEUTRAL
    if proc.state != "S" or proc.syscall is None:
        return Activity.BUSY
    target = next((d for d in proc.fds if d.fd == proc.arg0), None)
    if proc.syscall in _READS[MACHINE]:
        return _reading(proc, target, pipes)
    if proc.syscall in _WRITES[MACHINE] and pipes.others(pipes.readers, target, proc.pid):
        # Held up by a reader of its own command (a pager): that one decides.
        return Activity.NEUTRAL
    if proc.syscall in _POLLS[MACHINE]:
        return _polling(proc, pipes)
    if proc.syscall in _LOCKS[MACHINE] or proc.syscall in _SLEEPS[MACHINE]:
        return Activity.BUSY
    if proc.syscall in _WAITS[MACHINE]:
        return Activity.NEUTRAL
    return Activity.BUSY


def _reading(proc: ProcFacts, target: Descriptor | None, pipes: Pipes) -> Activity:
    if target is None:
        return Activity.BUSY
    if target.kind is Kind.TERMINAL or pipes.person(target):
        return Activity.INPUT
    if target.kind is Kind.SIGNAL:
        return Activity.NEUTRAL
    # Fed by another of the command's processes: that one decides.
    return Activity.NEUTRAL if pipes.others(pipes.writers, target, proc.pid) else Activity.BUSY


def _polling(proc: ProcFacts, pipes: Pipes) -> Activity:
    """A program polling many descriptors (a REPL, a full-screen program): it waits
    for a person when its terminal is among them and nothing else could wake it
    (no socket, no pipe another of its processes writes)."""
    kinds = {d.kind for d in proc.fds}
    asked = Kind.TERMINAL in kinds or any(pipes.person(d) for d in proc.fds)
    if not asked or Kind.SOCKET in kinds:
        return Activity.BUSY
    fed = any(not d.writes and pipes.others(pipes.writers, d, proc.pid) for d in proc.fds)
    return Activity.BUSY if fed else Activity.INPUT


def verdict(procs: list[ProcFacts], inputs: frozenset[int] = frozenset()) -> Verdict:
    """The command's state at one look: waiting when one reads its terminal, or a
    pipe its person writes (`inputs`, by inode: a job's stdin), the deepest such
    process naming it (the program, not its shell), and none is busy, but for
    daemons it started (another session, no terminal) sleeping on their clients:
    they serve the command, which waits for its person."""
    pipes = Pipes.of(procs, inputs)
    cpu = sum(p.cpu for p in procs)
    parts = [(proc, activity(proc, pipes)) for proc in procs]
    readers = [proc for proc, part in parts if part is Activity.INPUT]
    if not readers:
        return Verdict(False, cpu=cpu)
    asking = max(readers, key=lambda proc: proc.pid)
    if any(part is Activity.BUSY and not _daemon(proc, asking.sid) for proc, part in parts):
        return Verdict(False, cpu=cpu)
    return Verdict(True, asking.pid, asking.program, cpu, _terminal_fd(asking))


def _terminal_fd(proc: ProcFacts) -> int | None:
    """The terminal it reads, or the first it holds (when it polls)."""
    read = next((d for d in proc.fds if d.fd == proc.arg0), None)
    if read is not None and read.kind is Kind.TERMINAL:
        return read.fd
    return next((d.fd for d in proc.fds if d.kind is Kind.TERMINAL), None)


def _daemon(proc: ProcFacts, sid: int) -> bool:
    """A sleeping process of another session than the asking one, without a terminal."""
    return (
        proc.state == "S" and proc.sid != sid and not any(d.kind is Kind.TERMINAL for d in proc.fds)
    )
