"""Background jobs as the surfaces see them: start, read, wait, kill, release, stdin, list.

One service under ACP's `terminal/*`, `bash`'s `background` and
`backgroundAfter`, and the model's job tools. A job runs in its session's
directory, environment and sandbox (`jobs.JobSpec`); shell text runs as
`bash -c` with the user's rc snapshot replayed and the configured prefix, as
a PTY command does; a program with arguments runs as given. What ends a job
is told to its owner (`listen`): at once, or on the owner's next connection.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable

import anyio

from bashrpc.protocol import messages, paths
from bashrpc.protocol.methods import NeedsInput, SandboxMode
from bashrpc.protocol.terminals import (
    OutputGap,
    Readiness,
    ReadyOutcome,
    TerminalExitStatus,
    TerminalInfo,
    TerminalOutputResult,
)
from bashrpc.server import errors
from bashrpc.server.runtime.instance import Runtime
from bashrpc.server.runtime.jobs.job import Job, JobSpec
from bashrpc.server.runtime.jobs.readiness import wait_ready
from bashrpc.server.runtime.jobs.state import ExitStatus
from bashrpc.server.runtime.run import env as envmod
from bashrpc.server.runtime.seam.backend import JobLaunch
from bashrpc.server.runtime.sessions.session import Session, resolve_path
from bashrpc.server.services import secrets, tightening
from bashrpc.server.services.commands import CommandService
from bashrpc.server.services.fieldchecks import env_fields, reject_nul, reject_unexecable
from bashrpc.server.services.held import Hold
from bashrpc.server.services.streams import needs_input

# How a job's end reaches its owner's connection.
TellExit = Callable[[Job], Awaitable[None]]
# A program's name or path and nothing else: no space, quote, expansion, glob,
# operator or redirection, and no `=` or `~`, which a shell would read.
PROGRAM_NAME = re.compile(r"[A-Za-z0-9_./+,:@%-]+")


def runs_in_shell(command: str, args: list[str] | None) -> bool:
    """Whether `command` is shell text: without `args`, or with `[]` unless it is a
    bare program name (ACP's SDKs send `[]` for "no arguments": the TypeScript one
    turns `null` into it)."""
    return args is None or (not args and PROGRAM_NAME.fullmatch(command) is None)


def wire_status(status: ExitStatus | None) -> TerminalExitStatus | None:
    if status is None:
        return None
    return TerminalExitStatus(exit_code=status.code, signal=status.signal)


def end_line(job: Job) -> str:
    """A job's end in one line, for the model's next tool result."""
    command = job.spec.command
    if len(command) > messages.JOB_COMMAND_SHOWN_CHARS:
        command = command[: messages.JOB_COMMAND_SHOWN_CHARS - 3] + "..."
    status = job.exit
    assert status is not None
    if status.code is not None:
        return messages.JOB_EXITED_CODE.format(
            terminal_id=job.id, command=command, code=status.code
        )
    return messages.JOB_EXITED_SIGNAL.format(
        terminal_id=job.id, command=command, signal=status.signal
    )


class JobStart:
    """What to start: from `terminal/create`, or from a `bash` request."""

    def __init__(
        self,
        session_id: str,
        command: str,
        *,
        args: list[str] | None = None,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        output_limit: int | None = None,
        sandbox: SandboxMode = "off",
        field_prefix: str = "",
        secret_env: list[str] | None = None,
        redact: bool = True,
    ) -> None:
        self.session_id = session_id
        self.command = command
        self.args = None if runs_in_shell(command, args) else args
        self.env = env or {}
        self.cwd = cwd
        self.output_limit = output_limit
        self.secret_env = tuple(secret_env or ())
        self.redact = redact
        self.sandbox = sandbox
        self.field_prefix = field_prefix


class JobService:
    def __init__(self, runtime: Runtime, commands: CommandService) -> None:
        self._runtime = runtime
        self._commands = commands

    @property
    def owner(self) -> str | None:
        return self._commands.owner

    async def start(self, what: JobStart, *, announce: bool = True) -> Job:
        """A job started now, in its session (created on first use); `announce`:
        its end is sent as `terminal/exited` (the model's jobs are told otherwise)."""
        runtime = self._runtime
        reject_nul(
            {
                "command": what.command,
                "cwd": what.cwd,
                **{f"args[{i}]": a for i, a in enumerate(what.args or [])},
                **env_fields(what.env),
            },
            what.field_prefix,
        )
        session = runtime.session(what.session_id, what.sandbox, self.owner)
        tightening.tighten(runtime, [session], what.sandbox)
        extra = envmod.without_guards(what.env)
        if extra:
            reject_unexecable({**session.env, **extra}, extra, what.field_prefix)
        # After any reset of the session, and in it until the job table has it.
        async with session.hold.entering():
            spec = await self._spec(what, session, extra, announce)
            try:
                return await runtime.jobs.start(session.id, self.owner, spec)
            except (FileNotFoundError, PermissionError) as exc:
                raise errors.InvalidArgument(
                    messages.JOB_CANNOT_START.format(command=what.command, reason=exc.strerror)
                ) from None

    def adopt(
        self,
        hold: Hold,
        command: str,
        cwd: str | None,
        *,
        announce: bool,
    ) -> Job | None:
        """A request's command that waits for its person, going on as a job of its
        session (`services/held.py`); TooManyJobs past the limits. None when the
        session was closed meanwhile: the close ends the command, and its session
        is not made again for it."""
        runtime = self._runtime
        session = runtime.sessions.get(hold.session_id)
        if session is None:
            return None
        workdir = session.cwd if cwd is None else resolve_path(session.cwd, cwd, session.home)
        launch = JobLaunch(command, None, session.config, workdir, {})
        spec = JobSpec(launch, command, announce=announce)
        job = runtime.jobs.adopt(session.id, self.owner, spec, hold, hold)
        hold.changed = job.poke
        hold.named(job.id)
        return job

    async def _spec(
        self, what: JobStart, session: Session, extra: dict[str, str], announce: bool
    ) -> JobSpec:
        """The job in the session's directory, environment and configuration as they are now."""
        cwd = self._workdir(session.cwd, session.home, what.cwd)
        env = {**session.env, **extra}
        env.update(envmod.GUARDS)
        config = session.config
        if what.args is None:
            # Shell text replays the rc snapshot first, as a terminal's command does.
            config = await self._runtime.pool.backend.configure(config, session.env)
            shown = what.command
        else:
            shown = " ".join([what.command, *what.args])
        launch = JobLaunch(what.command, what.args, config, cwd, env)
        table = None
        if what.redact:
            table = secrets.table_for(self._runtime, session, extra, what.secret_env)
        return JobSpec(
            launch,
            shown,
            output_limit=what.output_limit,
            announce=announce,
            secrets=table,
            settle=self._runtime.settings.input.settle_seconds,
        )

    def _workdir(self, base: str, home: str | None, cwd: str | None) -> str:
        directory = base if cwd is None else resolve_path(base, cwd, home)
        if self._runtime.backend.directory(directory) != "dir":
            raise errors.InvalidArgument(
                messages.CWD_NOT_DIRECTORY.format(path=paths.printable(directory))
            )
        return directory

    async def ready(self, job: Job, readiness: Readiness) -> ReadyOutcome:
        """Wait until the job is ready as asked, it exits, or the time is up. A
        wait cut short (its request cancelled) releases the job: its id was
        never told, so nobody else could (nor after any other failure)."""
        began = time.monotonic()
        backend = self._runtime.pool.backend
        try:
            if readiness.log is not None:
                # Refused here if it is not a pattern at all; searched off the loop.
                compile_pattern(readiness.log)
            state, matched = await wait_ready(
                job, readiness.log, readiness.port, readiness.timeout, backend
            )
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.release(job)
            raise
        return ReadyOutcome(
            state=state, seconds=round(time.monotonic() - began, 3), matched=matched
        )

    def job(self, session_id: str | None, terminal_id: str) -> Job:
        return self._runtime.jobs.get(session_id, terminal_id)

    def output(self, job: Job, after_offset: int | None) -> TerminalOutputResult:
        ring = job.ring
        gap = None
        if after_offset is None:
            piece = ring.newest(job.spec.output_limit)
            truncated = piece.start > 0
        else:
            piece = ring.after(after_offset)
            truncated = piece.missed_from is not None
            if piece.missed_from is not None:
                if job.artifact is not None:
                    job.artifact.flush()
                gap = OutputGap(
                    from_offset=piece.missed_from,
                    to_offset=piece.start,
                    artifact_id=job.artifact_id,
                )
        return TerminalOutputResult(
            output=piece.data.decode("utf-8", "replace"),
            truncated=truncated,
            next_offset=piece.end,
            exit_status=wire_status(job.exit) if job.exited.is_set() else None,
            gap=gap,
            needs_input=_told(job),
        )

    async def wait(self, job: Job) -> ExitStatus:
        await job.exited.wait()
        assert job.exit is not None
        return job.exit

    async def kill(self, job: Job) -> None:
        await job.kill(self._runtime.pool.grace_seconds)
        await job.exited.wait()

    async def release(self, job: Job) -> None:
        await self._runtime.jobs.release(job)

    def info(self, session_id: str | None) -> list[TerminalInfo]:
        return [
            TerminalInfo(
                terminal_id=job.id,
                session_id=job.session_id,
                command=job.spec.command,
                state=job.state,
                pid=job.pid,
                total_bytes=job.ring.total,
                kept_from=job.ring.kept_from,
                stdin_open=job.stdin_open,
                exit_status=wire_status(job.exit) if job.exited.is_set() else None,
                artifact_id=job.artifact_id,
                needs_input=_told(job),
            )
            for job in self._runtime.jobs.of_session(session_id)
        ]

    def listen(self, tell: TellExit) -> list[Job]:
        """`tell` hears of this owner's jobs that end; returns those that ended unheard."""
        return self._runtime.jobs.listen(self.owner, tell)

    def unlisten(self, tell: TellExit) -> None:
        self._runtime.jobs.unlisten(self.owner, tell)

    def jobs(self, session_id: str) -> list[Job]:
        """The session's jobs, running or ended, not yet released."""
        return self._runtime.jobs.of_session(session_id)


def _told(job: Job) -> NeedsInput | None:
    wait = job.input_wait
    return None if wait is None else needs_input(wait)


def compile_pattern(text: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except re.error as exc:
        raise errors.InvalidArgument(
            messages.BAD_READY_PATTERN.format(pattern=text, reason=exc)
        ) from None
