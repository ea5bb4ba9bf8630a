"""A background job's program on this machine: spawned in its sandbox with a
tracker of its own (a cgroup, or ancestry), so a kill takes its whole tree,
setsid escapees included; its stdout and stderr merged on one pipe, its stdin
a pipe the job's owner writes to and closes.

What becomes of its output (the ring, the artifact) and its state is the
job's (`runtime/jobs/`); this is only the process.
"""

from __future__ import annotations

import itertools
import os
import subprocess

import anyio

from bashrpc.server import fdio
from bashrpc.server.runtime.containment import child, inputwait, procfacts, procs
from bashrpc.server.runtime.containment.registry import Containment
from bashrpc.server.runtime.containment.trackers import Tracker
from bashrpc.server.runtime.local import listeners
from bashrpc.server.runtime.sandbox import bwrap
from bashrpc.server.runtime.seam.backend import InputLook, JobLaunch
from bashrpc.server.runtime.shell.protocol import SNAPSHOT_ENV, one_shot

READ_CHUNK_BYTES = 64 * 1024

_job_names = itertools.count(1)


def job_argv(launch: JobLaunch) -> tuple[list[str], dict[str, str]]:
    """The program's argv, and the variables it needs beyond the launch's own:
    shell text runs as a terminal's command does (`one_shot`)."""
    if launch.args is not None:
        return [launch.command, *launch.args], {}
    config = launch.config
    text, needs = one_shot(launch.command, config.prefix, config.snapshot)
    return [config.shell, "-c", text], needs


class LocalJobProcess:
    def __init__(
        self,
        process: subprocess.Popen[bytes],
        tracker: Tracker,
        stdin: int,
        stdout: int,
        *,
        sandboxed: bool,
        pids: set[int],
    ) -> None:
        self._process = process
        self._tracker = tracker
        self._stdin: int | None = stdin
        self._stdout: int | None = stdout
        self._sandboxed = sandboxed
        self._exited = False
        self._closed = False
        # The backend's children that someone awaits (the orphan reaper spares them).
        self._pids = pids
        pids.add(self.pid)

    @classmethod
    async def start(
        cls, launch: JobLaunch, containment: Containment, runtime_dir: str, pids: set[int]
    ) -> LocalJobProcess:
        """Spawned; OSError (or SandboxUnavailable) when it cannot start. Its pid is
        in `pids` at once, so no orphan reaper collects its status."""
        argv, needs = job_argv(launch)
        # The rc snapshot the text replays, which a sandbox must show it.
        snapshot = needs.get(SNAPSHOT_ENV)
        wrapped = await bwrap.wrap(
            argv,
            launch.config.sandbox,
            cwd=launch.cwd,
            read_only_files=[] if snapshot is None else [snapshot],
            runtime_dir=runtime_dir,
        )
        tracker = containment.tracker(f"job{next(_job_names)}")
        stdin_read, stdin_write = os.pipe2(os.O_CLOEXEC)
        out_read, out_write = os.pipe2(os.O_CLOEXEC)
        try:
            process = child.spawn(
                wrapped.argv,
                tracker=tracker,
                env={**launch.env, **needs, procs.OWNER_ENV: tracker.tag},
                cwd=launch.cwd,
                stdin=stdin_read,
                stdout=out_write,
                stderr=out_write,
                pass_fds=wrapped.pass_fds,
            )
        except BaseException:
            for fd in (stdin_write, out_read):
                os.close(fd)
            tracker.release()
            raise
        finally:
            wrapped.close()
            os.close(stdin_read)
            os.close(out_write)
        os.set_blocking(stdin_write, False)
        os.set_blocking(out_read, False)
        sandboxed = launch.config.sandbox is not None
        return cls(process, tracker, stdin_write, out_read, sandboxed=sandboxed, pids=pids)

    @property
    def pid(self) -> int:
        return int(self._process.pid)

    @property
    def input_open(self) -> bool:
        return self._stdin is not None

    async def read(self) -> bytes:
        if self._stdout is None:
            return b""
        return await fdio.read(self._stdout, READ_CHUNK_BYTES)

    async def write(self, data: bytes) -> None:
        if self._stdin is None:
            raise anyio.ClosedResourceError
        await fdio.write_all(self._stdin, data)

    def close_input(self) -> None:
        fd, self._stdin = self._stdin, None
        if fd is not None:
            try:
                anyio.notify_closing(fd)
            except RuntimeError:
                pass
            os.close(fd)

    def listens(self, port: int) -> bool:
        return listeners.listening(self._tracker.members(), port)

    def input_look(self) -> InputLook:
        """The kernel's view of its processes (`inputwait`), its stdin the pipe its
        person writes; a pipe echoes nothing, so no wait here is told secret."""
        if self._stdin is None or self._exited:
            return InputLook(False)
        stdin = frozenset({os.fstat(self._stdin).st_ino})
        found = inputwait.verdict(procfacts.look(self._tracker.members()), stdin)
        return InputLook(found.waiting, found.pid, found.program, False, found.cpu)

    async def wait(self) -> int | None:
        status = await child.wait_status(self.pid)
        # Collected here: Popen must not wait for it again.
        self._process.returncode = 0
        self._exited = True
        self._tracker.leader_exited()
        return status

    async def kill(self, grace_seconds: float) -> None:
        leader = None if self._exited else self.pid
        if leader is not None and self._sandboxed:
            leader = procs.sandbox_init(leader)
        await self._tracker.kill(leader, grace_seconds)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.close_input()
        fd, self._stdout = self._stdout, None
        if fd is not None:
            anyio.notify_closing(fd)
            os.close(fd)
        self._tracker.release()
        self._pids.discard(self.pid)
