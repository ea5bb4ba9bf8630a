"""A process that outlives the server just long enough to kill what it left.

It is forked at start into a session of its own, so a SIGKILL to the
server's process group does not reach it, and holds the read end of a pipe
whose only writer is the server. Once in its session it makes the server's
runtime directory, so no directory exists that a SIGKILL at any moment of the
server's start would leave behind. When the server exits for any reason,
SIGKILL included, the pipe reads EOF and the watchdog kills:
- the server's cgroup, which holds every shell's processes, at once; or,
  without cgroups, every process the server reported over the pipe (by pid
  and start time, so a recycled pid is never hit) and every process that
  still carries the server's owner tag, with all their descendants;
then it removes the server's private runtime directory and exits. After a
clean shutdown it finds nothing left to kill.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path

from bashrpc.server import log
from bashrpc.server.runtime.containment import procs
from bashrpc.server.runtime.containment.cgroups import Cgroup

# How long the watchdog keeps killing what keeps appearing (forks in flight).
SWEEP_SECONDS = 2.0
SWEEP_POLL_SECONDS = 0.02
_IGNORED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGPIPE)

_log = log.get("watchdog")


class Watchdog:
    """The server's end: report processes, and close at exit."""

    def __init__(self, pid: int, pipe: int) -> None:
        self.pid = pid
        self._pipe = pipe

    @classmethod
    def start(
        cls, cgroup: Path | None, make_runtime_dir: Callable[[], str], owner_prefix: str
    ) -> tuple[Watchdog, Path]:
        """The watchdog, and the runtime directory it made with `make_runtime_dir`
        (OSError when it could not)."""
        read_end, write_end = os.pipe()
        made_read, made_write = os.pipe()
        os.set_inheritable(write_end, False)
        pid = os.fork()
        if pid == 0:  # the watchdog
            try:
                os.close(write_end)
                os.close(made_read)
                _watch(read_end, made_write, cgroup, make_runtime_dir, owner_prefix)
            finally:
                # What it said (what it killed) goes out before it does.
                log.STDERR.flush(log.EXIT_FLUSH_SECONDS)
                os._exit(0)
        os.close(read_end)
        os.close(made_write)
        try:
            made = _read_all(made_read)
        finally:
            os.close(made_read)
        os.set_blocking(write_end, False)
        watchdog = cls(pid, write_end)
        if not made:
            watchdog.close()
            raise OSError("the watchdog could not make the server's runtime directory")
        return watchdog, Path(os.fsdecode(made))

    def report(self, pid: int, start: int) -> None:
        """A process the server owns (used where there are no cgroups)."""
        try:
            os.write(self._pipe, b"%d %d\n" % (pid, start))
        except (BlockingIOError, BrokenPipeError):
            # A watchdog that is gone or behind costs a record, never a stall.
            pass

    def close(self) -> None:
        """The clean end: the watchdog sweeps (finding nothing) and exits."""
        if self._pipe >= 0:
            os.close(self._pipe)
            self._pipe = -1


def _watch(
    pipe: int,
    made: int,
    cgroup: Path | None,
    make_runtime_dir: Callable[[], str],
    owner_prefix: str,
) -> None:
    os.setsid()
    for sig in _IGNORED_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    try:
        signal.set_wakeup_fd(-1)
    except ValueError:
        pass
    # Out of the server's session: whatever kills the server from here on, the
    # directory is ours to remove. Its path goes back; nothing, if none was made.
    runtime_dir = None
    try:
        runtime_dir = Path(make_runtime_dir())
        os.write(made, os.fsencode(runtime_dir))
    except OSError:
        pass
    finally:
        os.close(made)
    os.closerange(3, pipe)
    os.closerange(pipe + 1, os.sysconf("SC_OPEN_MAX"))
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    reported: dict[int, int] = {}
    pending = b""
    while chunk := _read(pipe):
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        for line in lines:
            pid, _, start = line.partition(b" ")
            reported[int(pid)] = int(start)
    _sweep(cgroup, reported, owner_prefix)
    if runtime_dir is not None:
        remove_runtime_dir(runtime_dir)


def remove_runtime_dir(runtime_dir: Path) -> None:
    """Remove the server's runtime directory, whatever it holds. A shell's own
    directory is unlisted while the shell runs (`shell/process.py`), at any depth
    (a daemon's are under their tenant's); one left by a server that died is
    listed again first, top-down, as the server does at a shell's end. Root lists
    any directory; any other user needs this to remove them.

    Each directory is opened where it was listed, never through a link, and its
    mode changed through that handle: an unconfined command has the user's
    rights, and could swap an entry for a link between its listing and the
    change, to have directories elsewhere opened up."""
    with contextlib.suppress(OSError):
        _list_again(os.open(runtime_dir, _HANDLE))
    shutil.rmtree(runtime_dir, ignore_errors=True)


# A directory as a handle that reads nothing, and is never a link's target.
_HANDLE = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _list_again(top: int) -> None:
    """Make every directory under `top` (a handle, closed here) listable."""
    pending = [top]
    while pending:
        handle = pending.pop()
        try:
            pending += _subdirectories(handle)
        except OSError:
            pass
        finally:
            os.close(handle)


def _subdirectories(handle: int) -> list[int]:
    """Handles of the directories in `handle`'s, once it is listable (0700)."""
    os.chmod(f"/proc/self/fd/{handle}", 0o700)
    listing = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=handle)
    try:
        with os.scandir(listing) as entries:
            names = [entry.name for entry in entries if entry.is_dir(follow_symlinks=False)]
    finally:
        os.close(listing)
    handles = []
    for name in names:
        with contextlib.suppress(OSError):
            # A link put in the directory's place since the listing: ELOOP or ENOTDIR.
            handles.append(os.open(name, _HANDLE, dir_fd=handle))
    return handles


def _read(pipe: int) -> bytes:
    while True:
        try:
            return os.read(pipe, 65536)
        except InterruptedError:
            continue


def _read_all(pipe: int) -> bytes:
    """Everything until its writer closes (a path: one write, well under PIPE_BUF)."""
    data = b""
    while chunk := _read(pipe):
        data += chunk
    return data


def _sweep(cgroup: Path | None, reported: dict[int, int], owner_prefix: str) -> None:
    deadline = time.monotonic() + SWEEP_SECONDS
    group = None if cgroup is None else Cgroup(cgroup)
    killed = 0
    while time.monotonic() < deadline:
        found = _leftovers(reported, owner_prefix)
        if group is not None and group.populated:
            group.kill()
            found.add(-1)
        if not found:
            break
        procs.signal_all(found - {-1}, signal.SIGKILL)
        killed += len(found - {-1})
        time.sleep(SWEEP_POLL_SECONDS)
    if group is not None:
        group.remove()
    if killed:
        _log.warning("killed %d processes the server left behind", killed)


def _leftovers(reported: dict[int, int], owner_prefix: str) -> set[int]:
    scan = procs.Scan()
    roots = {pid for pid, start in reported.items() if scan.live(pid, start)}
    if owner_prefix:
        for pid in procs.all_pids():
            if pid not in roots and (procs.owner_tag(pid) or "").startswith(owner_prefix):
                roots.add(pid)
    return scan.descendants(roots)
