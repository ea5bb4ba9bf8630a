"""Background jobs: processes a session started that run on after the request.

A job is one program (a `bash -c` text, or a program with its arguments) in
its session's directory, environment and sandbox, started by the backend
(`Backend.job`), which keeps its whole tree, so a kill takes setsid escapees
too. Its stdout and stderr go, merged and sanitized, into a ring of bounded
size (`OutputRing`) and into an artifact that keeps them all; its stdin is a
pipe the host may write to and close. When its program exits, what it left
running is killed, and its owner is told (`JobTable.listen`), or told on its
next connection when none listens now.

The jobs of a runtime live in its task group, like its shells: under the
daemon they outlive a cut connection for as long as the tenant does, and
the runtime's wind-down (shutdown, `exit`, SIGTERM, a grace run out) kills
them all. Limits per session and per runtime come from the `jobs` settings.
How a job's state moves is `state`'s table.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Protocol

import anyio
import anyio.abc
import msgspec

from bashrpc.protocol import messages
from bashrpc.protocol.terminals import JobState
from bashrpc.server import clock, errors, log
from bashrpc.server.output.artifacts import ArtifactWriter
from bashrpc.server.output.redact import Redactor, TableSource
from bashrpc.server.output.ring import OutputRing
from bashrpc.server.output.sanitize import Sanitizer
from bashrpc.server.pulse import Pulse
from bashrpc.server.runtime.jobs.state import Event, ExitStatus, exit_status, step
from bashrpc.server.runtime.run import inputwatch
from bashrpc.server.runtime.seam import drain
from bashrpc.server.runtime.seam.backend import (
    Backend,
    InputLook,
    InputWait,
    JobLaunch,
    ProcessHandle,
)

_log = log.get("jobs")
# What of a job's newest output may hold its prompt: the last line, within this.
PROMPT_BYTES = 4096


class OnTerminal(Protocol):
    """A job's program on a terminal (a request's PTY command gone on as a job)."""

    def waiting(self) -> InputWait | None:
        """What it waits for from its person now, if anything."""
        ...

    async def echoes(self) -> bool:
        """Whether its terminal echoes what is typed (a secret must not be typed then)."""
        ...


class JobSpec(msgspec.Struct, frozen=True):
    """One program ready to start as a job."""

    launch: JobLaunch
    # What the host asked to run, for listings.
    command: str
    # ACP's outputByteLimit: what `terminal/output` returns at most.
    output_limit: int | None = None
    # Whether its end is told to its owner with `terminal/exited` (the model's jobs
    # are told of otherwise, in a tool result).
    announce: bool = True
    # What its output never shows; None: nothing is redacted.
    secrets: TableSource | None = None
    # How long its processes must sit blocked on its stdin before a wait is told
    # (`input.settleSeconds`); None: not watched.
    settle: float | None = None

    @property
    def cwd(self) -> str:
        return self.launch.cwd


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
        self._sanitizer = Sanitizer()
        self._redactor = None if spec.secrets is None else Redactor(spec.secrets)
        self._changed = Pulse()
        self._process: ProcessHandle | None = None
        # Its terminal, when it runs on one (what it is typed goes there).
        self.terminal: OnTerminal | None = None
        self._last_data = clock.now()
        self._last_input = 0.0
        # The wait its watch told, while it lasts (a job on pipes).
        self._told: InputWait | None = None
        self._eof = anyio.Event()
        # Set once the job's process and tree are gone and its files closed.
        self.done = anyio.Event()

    @property
    def pid(self) -> int | None:
        if self._process is None or self.exit is not None:
            return None
        return self._process.pid

    @property
    def stdin_open(self) -> bool:
        return self._process is not None and self._process.input_open

    def listens(self, port: int) -> bool:
        """Whether one of its own processes listens on this TCP port."""
        return self._process is not None and self.exit is None and self._process.listens(port)

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

    async def start(self, backend: Backend) -> None:
        """Spawn; raises OSError (or SandboxUnavailable) when it cannot start."""
        self._process = await backend.job(self.spec.launch)

    def take(self, process: ProcessHandle, terminal: OnTerminal) -> None:
        """A program that runs already on a terminal (see `JobTable.adopt`)."""
        self._process, self.terminal = process, terminal

    @property
    def input_wait(self) -> InputWait | None:
        """What it waits for from its person now, while it runs (only a program on
        a terminal is watched)."""
        if self.exited.is_set():
            return None
        return self._told if self.terminal is None else self.terminal.waiting()

    async def echoes(self) -> bool:
        """Whether what it is typed shows in its output (a pipe echoes nothing)."""
        return self.terminal is not None and await self.terminal.echoes()

    async def run(self, grace: Callable[[], float]) -> None:
        """Pump its output and await its exit; then kill what it left and close up."""
        process = self._process
        assert process is not None
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._pump, process)
                settle = self.spec.settle
                if settle is not None and self.terminal is None:
                    tg.start_soon(self._watch_input, process, settle)
                status = await process.wait()
                await drain.until_quiet(self._eof, lambda: self._last_data)
                self._ended(exit_status(status))
                self.close_stdin()
                with anyio.CancelScope(shield=True):
                    await process.kill(grace())
                    with anyio.move_on_after(drain.POST_KILL_SECONDS):
                        await self._eof.wait()
                tg.cancel_scope.cancel()
        finally:
            self._finish()

    async def _pump(self, process: ProcessHandle) -> None:
        try:
            while True:
                data = await process.read()
                if not data:
                    return
                self._last_data = clock.now()
                self._take(self._clean(self._sanitizer.feed(data)))
        finally:
            self._eof.set()

    # -- its waits for its person (a job on pipes: its stdin) -------------

    @property
    def last_data(self) -> float:
        return self._last_data

    @property
    def last_input(self) -> float:
        return self._last_input

    async def _watch_input(self, process: ProcessHandle, settle: float) -> None:
        """Keep `input_wait` as its processes stand, its prompt the output's last line."""

        async def tell(look: InputLook, prompt: str, since: str) -> None:
            self._told = InputWait(
                None, self.session_id, prompt, False, since, look.pid, look.program, self.id
            )
            self.poke()

        def ended() -> None:
            self._told = None
            self.poke()

        async def prompt() -> str:
            tail = self.ring.newest(PROMPT_BYTES).data.decode("utf-8", "replace")
            return inputwatch.last_line(tail.split("\n"))

        await inputwatch.watch(_Looked(self, process), settle, tell, ended, prompt)

    def _clean(self, sanitized: bytes) -> bytes:
        """Sanitized bytes without their secrets (the ring and the artifact see none)."""
        return sanitized if self._redactor is None else self._redactor.feed(sanitized)

    def _take(self, clean: bytes) -> None:
        if clean:
            self.ring.add(clean)
            if self.artifact is not None:
                self.artifact.write(clean)
            self.poke()

    def _ended(self, status: ExitStatus) -> None:
        """Its program's end, kept; the state moves with it unless the job was
        released first (then nobody may ask of it any more)."""
        self.exit = status
        if self.state != "released":
            self.move("exit")

    def _finish(self) -> None:
        """Close its process's pipes and free its place, finish its artifact: once, as
        `run` ends."""
        if self._process is not None:
            self._process.close()
        self._take(self._clean(self._sanitizer.finish()))
        if self._redactor is not None:
            self._take(self._redactor.finish())
        if self.artifact is not None:
            self.artifact.close()
        if self.exit is None:
            # Ended by the runtime's end before its exit was seen.
            self._ended(ExitStatus(None, signal.Signals.SIGKILL.name))
        self.exited.set()
        self.done.set()
        self.poke()

    async def kill(self, grace_seconds: float) -> None:
        """Kill its program first, then its whole tree; it stays listed, exited."""
        if self.state == "running":
            self.move("kill")
        if self._process is not None:
            await self._process.kill(grace_seconds)

    async def write(self, data: bytes) -> int:
        """Write to its stdin; InvalidArgument when it is closed (or the reader is gone)."""
        if not self.stdin_open:
            raise errors.InvalidArgument(messages.JOB_STDIN_CLOSED.format(terminal_id=self.id))
        assert self._process is not None
        self._last_input = clock.now()
        try:
            await self._process.write(data)
        except (BrokenPipeError, anyio.ClosedResourceError):
            self.close_stdin()
            raise errors.InvalidArgument(
                messages.JOB_STDIN_CLOSED.format(terminal_id=self.id)
            ) from None
        # The wait told is answered: over at once, not at its watch's next look,
        # so a second answer to it is typed nowhere. (On a terminal, its lane
        # ends it as it writes.)
        if self._told is not None:
            self._told = None
            self.poke()
        return len(data)

    def close_stdin(self) -> None:
        if self.stdin_open:
            assert self._process is not None
            self._process.close_input()
            self.poke()


class _Looked:
    """A job as its watch sees it (`inputwatch.Watched`)."""

    def __init__(self, job: Job, process: ProcessHandle) -> None:
        self._job = job
        self._process = process

    @property
    def last_data(self) -> float:
        return self._job.last_data

    @property
    def last_input(self) -> float:
        return self._job.last_input

    def input_look(self) -> InputLook:
        return self._process.input_look()
