"""Background jobs: processes a session started that run on after the request.

A job is one program (a `bash -c` text, or a program with its arguments) in
its session's directory, environment and sandbox, with a tracker of its own
(a cgroup, or ancestry), so a kill takes its whole tree, setsid escapees
included. Its stdout and stderr go, merged and sanitized, into a ring of
bounded size (`OutputRing`) and into an artifact that keeps them all; its
stdin is a pipe the host may write to and close. When its program exits,
what it left running is killed, and its owner is told (`JobTable.listen`),
or told on its next connection when none listens now.

The jobs of a runtime live in its task group, like its shells: under the
daemon they outlive a cut connection for as long as the tenant does, and
the runtime's wind-down (shutdown, `exit`, SIGTERM, a grace run out) kills
them all. Limits per session and per runtime come from the `jobs` settings.
How a job's state moves is `jobstate`'s table.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
from collections.abc import Callable

import anyio
import anyio.abc
import msgspec

from bashrpc.protocol import messages
from bashrpc.protocol.terminals import JobState
from bashrpc.server import errors, fdio, log
from bashrpc.server.output.artifacts import ArtifactWriter
from bashrpc.server.output.outputring import OutputRing
from bashrpc.server.output.sanitize import Sanitizer
from bashrpc.server.pulse import Pulse
from bashrpc.server.runtime.containment import child, procs
from bashrpc.server.runtime.containment.containment import Containment, Tracker
from bashrpc.server.runtime.jobs.jobstate import Event, ExitStatus, exit_status, step
from bashrpc.server.runtime.sandbox import bwrap
from bashrpc.server.runtime.sandbox.sandbox import Policy
from bashrpc.server.runtime.seam import drain

READ_CHUNK_BYTES = 64 * 1024

_log = log.get("jobs")
_job_names = itertools.count(1)


class JobSpec(msgspec.Struct, frozen=True):
    """One program ready to start as a job."""

    argv: list[str]
    # What the host asked to run, for listings.
    command: str
    cwd: str
    env: dict[str, str]
    sandbox: Policy | None = None
    # Files the program reads that a sandbox must show it (the rc snapshot).
    read_only_files: tuple[str, ...] = ()
    # ACP's outputByteLimit: what `terminal/output` returns at most.
    output_limit: int | None = None


class Job:
    def __init__(
        self,
        terminal_id: str,
        session_id: str,
        owner: str | None,
        spec: JobSpec,
        ring_bytes: int,
        artifact: ArtifactWriter | None,
    ) -> None:
        self.id = terminal_id
        self.session_id = session_id
        # The clientId that started it (None on stdio): whom its end is told to.
        self.owner = owner
        self.spec = spec
        self.state: JobState = "running"
        self.ring = OutputRing(ring_bytes)
        self.artifact = artifact
        self.exit: ExitStatus | None = None
        self.exited = anyio.Event()
        # Whether its end is told with `terminal/exited` (the model's jobs: in a tool result).
        self.announce = True
        # Whether a tool result has told the model of its end yet.
        self.told_model = False
        # The model's own cursor, for the tool that reads new output.
        self.model_cursor = 0
        self._sanitizer = Sanitizer()
        self._changed = Pulse()
        self._process: subprocess.Popen[bytes] | None = None
        self._tracker: Tracker | None = None
        self._stdin: int | None = None
        self._stdout: int | None = None
        self._last_data = anyio.current_time()
        self._eof = anyio.Event()
        # Set once the job's process and tree are gone and its files closed.
        self.done = anyio.Event()

    @property
    def pid(self) -> int | None:
        if self._process is None or self.exit is not None:
            return None
        return int(self._process.pid)

    @property
    def stdin_open(self) -> bool:
        return self._stdin is not None

    @property
    def artifact_id(self) -> int | None:
        return None if self.artifact is None or self.artifact.failed else self.artifact.id

    def move(self, event: Event) -> None:
        self.state = step(self.state, event)
        self.poke()

    def poke(self) -> None:
        self._changed.fire()

    async def changed(self) -> None:
        """Until new output, or a change of state."""
        await self._changed.wait()

    # -- the process ------------------------------------------------------

    async def start(self, containment: Containment, runtime_dir: str, pids: set[int]) -> None:
        """Spawn; raises OSError (or SandboxUnavailable) when it cannot start. Its pid
        goes into `pids` at once, so no orphan reaper collects its status."""
        spec = self.spec
        launch = await bwrap.wrap(
            spec.argv,
            spec.sandbox,
            cwd=spec.cwd,
            read_only_files=list(spec.read_only_files),
            runtime_dir=runtime_dir,
        )
        tracker = containment.tracker(f"job{next(_job_names)}")
        stdin_read, stdin_write = os.pipe2(os.O_CLOEXEC)
        out_read, out_write = os.pipe2(os.O_CLOEXEC)
        try:
            self._process = child.spawn(
                launch.argv,
                tracker=tracker,
                env={**spec.env, procs.OWNER_ENV: tracker.tag},
                cwd=spec.cwd,
                stdin=stdin_read,
                stdout=out_write,
                stderr=out_write,
                pass_fds=launch.pass_fds,
            )
        except BaseException:
            for fd in (stdin_write, out_read):
                os.close(fd)
            tracker.release()
            raise
        finally:
            launch.close()
            os.close(stdin_read)
            os.close(out_write)
        pids.add(int(self._process.pid))
        self._tracker = tracker
        os.set_blocking(stdin_write, False)
        os.set_blocking(out_read, False)
        self._stdin, self._stdout = stdin_write, out_read

    async def run(self, grace: Callable[[], float], pids: set[int]) -> None:
        """Pump its output and await its exit; then kill what it left and close up.
        `pids` (where the reaper looks) has its pid from the spawn on; it leaves here."""
        assert self._process is not None and self._tracker is not None
        pid = int(self._process.pid)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._pump)
                status = await child.wait_status(pid)
                self._process.returncode = 0
                self._tracker.leader_exited()
                await drain.until_quiet(self._eof, lambda: self._last_data)
                self.exit = exit_status(status)
                self.move("exit")
                self.close_stdin()
                with anyio.CancelScope(shield=True):
                    await self._tracker.kill(None, grace())
                    with anyio.move_on_after(drain.POST_KILL_SECONDS):
                        await self._eof.wait()
                tg.cancel_scope.cancel()
        finally:
            pids.discard(pid)
            self._finish()

    async def _pump(self) -> None:
        assert self._stdout is not None
        try:
            while True:
                data = await fdio.read(self._stdout, READ_CHUNK_BYTES)
                if not data:
                    return
                self._last_data = anyio.current_time()
                self._take(self._sanitizer.feed(data))
        finally:
            self._eof.set()

    def _take(self, clean: bytes) -> None:
        if clean:
            self.ring.add(clean)
            if self.artifact is not None:
                self.artifact.write(clean)
            self.poke()

    def _finish(self) -> None:
        """Close its pipes, finish its artifact, free its tracker (idempotent)."""
        self.close_stdin()
        if self._stdout is not None:
            self._take(self._sanitizer.finish())
            anyio.notify_closing(self._stdout)
            os.close(self._stdout)
            self._stdout = None
        if self.artifact is not None:
            self.artifact.close()
        if self._tracker is not None:
            self._tracker.release()
        if self.exit is None:
            # Ended by the runtime's end before its exit was seen.
            self.exit = ExitStatus(None, signal.Signals.SIGKILL.name)
            if self.state in ("running", "killing"):
                self.move("exit")
        self.exited.set()
        self.done.set()
        self.poke()

    async def kill(self, grace_seconds: float) -> None:
        """Kill its program first, then its whole tree; it stays listed, exited."""
        if self.state == "running":
            self.move("kill")
        tracker, process = self._tracker, self._process
        if tracker is None or process is None:
            return
        leader = None if self.exit is not None else int(process.pid)
        if leader is not None and self.spec.sandbox is not None:
            leader = procs.sandbox_init(leader)
        await tracker.kill(leader, grace_seconds)

    async def write(self, data: bytes) -> int:
        """Write to its stdin; InvalidArgument when it is closed (or the reader is gone)."""
        fd = self._stdin
        if fd is None:
            raise errors.InvalidArgument(messages.JOB_STDIN_CLOSED.format(terminal_id=self.id))
        try:
            await fdio.write_all(fd, data)
        except (BrokenPipeError, anyio.ClosedResourceError):
            self.close_stdin()
            raise errors.InvalidArgument(
                messages.JOB_STDIN_CLOSED.format(terminal_id=self.id)
            ) from None
        return len(data)

    def close_stdin(self) -> None:
        fd, self._stdin = self._stdin, None
        if fd is not None:
            try:
                anyio.notify_closing(fd)
            except RuntimeError:
                pass
            os.close(fd)
            self.poke()
