"""Starting a child process that dies with the server, and awaiting its exit.

Children are started with subprocess and set up before they run a line of
their own: they get SIGKILL when the server dies (PR_SET_PDEATHSIG), and their
tracker places them (in a cgroup, or as a subreaper).

That setup is a Python function between fork and exec, which makes subprocess
fork the whole server and wait while the child runs Python: about 2.4 ms of
the event loop per child here. A child that runs nothing before it reads its
input (a shell waiting for its bootstrap), with a tracker that can place it
from outside (a cgroup) and asks nothing of the child itself (no cgroup
namespace, which only the child can make), skips it: util-linux's `setpriv --pdeathsig KILL`
sets the signal and execs the program, the server moves the pid into the
cgroup before it writes a byte, and subprocess uses vfork (about 0.2 ms).

Their exit is awaited on a pidfd, so no thread waits per child.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any

import anyio

from bashrpc.server.runtime.containment import procs
from bashrpc.server.runtime.containment.containment import Tracker

# Waiting for exit where pidfds are missing (kernels before 5.3).
EXIT_POLL_SECONDS = 0.02
# The status of a child that someone else collected, as if SIGKILLed.
LOST_STATUS = 128 + signal.SIGKILL
# `setpriv ... true` takes a millisecond; this only bounds a broken install.
PROBE_SECONDS = 5.0
# Ignored by Python itself at startup; subprocess and the PTY setup restore them.
PYTHON_IGNORED_SIGNALS = frozenset({signal.SIGPIPE, signal.SIGXFSZ})


def _ignored(signum: int, frame: object) -> None:
    """Stands in for SIG_IGN: the server still shrugs the signal off, and exec
    resets a caught signal to its default, where it keeps an ignored one ignored."""


def clear_inherited_signals() -> None:
    """Commands start with default signals, whatever the server's parent left it.

    exec keeps ignored signals ignored and the blocked ones blocked, and a
    non-interactive bash cannot even trap a signal that was ignored when it
    started. A command would inherit perf's ignored SIGUSR2, or a blocked
    SIGWINCH that keeps a PTY program from ever seeing a resize. So the server
    unblocks every signal and turns each inherited ignore into a handler that
    does nothing. Call it in the main thread before any other thread starts:
    a thread takes its mask from the one that created it.
    """
    signal.pthread_sigmask(signal.SIG_SETMASK, ())
    for sig in signal.valid_signals() - PYTHON_IGNORED_SIGNALS:
        try:
            if signal.getsignal(sig) == signal.SIG_IGN:
                signal.signal(sig, _ignored)
        except (OSError, ValueError):
            pass  # SIGKILL and SIGSTOP, or a signal Python may not handle


def child_setup(tracker: Tracker) -> Callable[[], None]:
    """What a child runs between fork and exec."""
    parent = os.getpid()

    def setup() -> None:
        procs.prctl(procs.PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            # The server died before the line above took effect.
            os._exit(1)
        tracker.prepare_child()

    return setup


def spawn(
    argv: Sequence[str],
    *,
    tracker: Tracker,
    env: Mapping[str, str],
    cwd: str | os.PathLike[str] | None = None,
    stdin: int | IO[Any] | None = subprocess.DEVNULL,
    stdout: int | IO[Any] | None = subprocess.DEVNULL,
    stderr: int | IO[Any] | None = subprocess.DEVNULL,
    pass_fds: Sequence[int] = (),
    waits_for_input: bool = False,
) -> subprocess.Popen[bytes]:
    """Start the child in a session of its own; raises OSError when it cannot start.

    `waits_for_input`: the child runs nothing before it reads stdin, so it may be
    placed once it runs (see the module's docstring).
    """
    cheap = waits_for_input and tracker.can_place and not tracker.needs_setup
    setpriv = pdeathsig_wrapper() if cheap else None
    if setpriv is not None:
        argv = [setpriv, "--pdeathsig", "KILL", "--", *argv]
    process = subprocess.Popen(
        list(argv),
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        cwd=cwd,
        env=dict(env),
        pass_fds=tuple(pass_fds),
        start_new_session=True,
        preexec_fn=None if setpriv else child_setup(tracker),
    )
    if setpriv is not None and not tracker.place(process.pid):
        process.kill()
        process.wait()
        raise OSError(f"could not place process {process.pid} in its tracker")
    tracker.adopt(process.pid)
    return process


@functools.cache
def pdeathsig_wrapper() -> str | None:
    """setpriv, where it has --pdeathsig (util-linux 2.33 and later); asked once."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    try:
        probe = subprocess.run(
            [setpriv, "--pdeathsig", "KILL", "--", "true"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=PROBE_SECONDS,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return setpriv if probe.returncode == 0 else None


async def wait(process: subprocess.Popen[bytes]) -> int:
    """The exit status (128+N for a signal); cancellable, and collects the child."""
    if process.returncode is not None:
        return process.returncode
    code = await wait_pid(process.pid)
    process.returncode = code
    return code


async def wait_pid(pid: int) -> int:
    """Await a child's exit by pid (128+N for a signal); cancellable."""
    status = await wait_status(pid)
    if status is None:
        # Collected elsewhere: it ended, but how is lost.
        return LOST_STATUS
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


async def wait_status(pid: int) -> int | None:
    """Await a child's exit by pid: its raw wait status, None when someone else
    collected it; cancellable."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        pidfd = -1
    try:
        while True:
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                return None
            if done:
                return status
            if pidfd >= 0:
                await anyio.wait_readable(pidfd)
            else:
                await anyio.sleep(EXIT_POLL_SECONDS)
    finally:
        if pidfd >= 0:
            anyio.notify_closing(pidfd)
            os.close(pidfd)
