"""Running one command: on its session's persistent shell, or on a PTY.

Both runners hand the command's bytes to a `feed` callback, stop on the
execution's cancel scope or on the deadline, and leave nothing behind that
should not outlive the command: an aborted pipe command takes its shell
with it, a PTY command takes everything it started. What the bytes mean is
the caller's business.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Mapping

import anyio
import msgspec

from server.runtime import drain, procs, sandbox
from server.runtime import env as envmod
from server.runtime.channels import Backpressure
from server.runtime.pool import ShellPool
from server.runtime.pty import PtyRun
from server.runtime.ptylane import PtyLane
from server.runtime.sessions import Session, expand_home, resolve_path
from server.runtime.shell import Shell
from server.runtime.shellproto import SNAPSHOT_ENV, SOURCE_SNAPSHOT
from server.runtime.shelltypes import Completion, ShellDied
from server.runtime.startlog import StartLog

# How long a killed PTY program's exit status is awaited before giving up.
PTY_EXIT_WAIT_SECONDS = 1.0
# In a sandbox, bwrap's stderr is a pipe (its StartLog); the command's goes back to the PTY.
PTY_STDERR_TO_TERMINAL = "exec 2>&1; "

_pty_names = itertools.count(1)


class Execution:
    """A running command, as seen by whoever may abort it."""

    def __init__(self, request_id: object, session_id: str) -> None:
        self.request_id = request_id
        self.session_id = session_id
        self.scope = anyio.CancelScope()
        self.aborted = False
        self.finished = False

    def abort(self) -> bool:
        if self.finished or self.aborted:
            return False
        self.aborted = True
        self.scope.cancel()
        return True

    def arm(self, timeout: float | None) -> anyio.CancelScope:
        """The scope a runner runs in: cancelled by an abort, or at the deadline."""
        if timeout is not None:
            self.scope.deadline = anyio.current_time() + timeout
        return self.scope

    @property
    def timed_out(self) -> bool:
        return self.scope.cancelled_caught and not self.aborted


class RunResult(msgspec.Struct, frozen=True):
    # None when the command was killed (abort, timeout) or never started.
    exit_code: int | None
    timed_out: bool
    # Where the command ended: the shell's directory, or the PTY's.
    cwd: str | None
    # Why a PTY program could not start; None when it started.
    start_error: str | None = None
    # The session's shell state was lost (this command's shell ended, or the one
    # before it did) and no result has said so yet.
    shell_restarted: bool = False
    # The directory a new shell could not enter (gone, or not in its sandbox), and
    # the workspace it started in instead.
    cwd_fallback: tuple[str, str] | None = None

    @property
    def killed(self) -> bool:
        return self.exit_code is None and self.start_error is None


class RunRequest(msgspec.Struct, frozen=True):
    """One command for a runner: what to run, where, for how long, where its bytes go."""

    command: str
    # Relative to the session's directory; None: that directory.
    cwd: str | None
    env: Mapping[str, str]
    timeout: float | None
    feed: Callable[[bytes], None]
    execution: Execution

    def workdir(self, session: Session) -> str:
        """The directory the command starts in, `~` expanded as the session's shell would."""
        if self.cwd is None:
            return session.cwd
        return resolve_path(session.cwd, self.cwd, session.home)


async def on_pipes(
    pool: ShellPool,
    session: Session,
    request: RunRequest,
    backpressure: Backpressure | None = None,
) -> RunResult:
    """On the session's shell; on a one-shot shell when that one is busy."""
    command, cwd, env, execution = request.command, request.cwd, request.env, request.execution
    if cwd is not None:
        # Data for `cd`, never shell text: `~` is expanded here, as on a PTY.
        cwd = expand_home(cwd, session.home)
    one_shot = session.busy
    shell: Shell | None = None
    completion: Completion | None = None
    fallback: tuple[str, str] | None = None
    if not one_shot:
        session.busy = True
    try:
        with execution.arm(request.timeout):
            for attempt in range(2):
                shell, missed = await _acquire(pool, session, one_shot)
                fallback = missed or fallback
                try:
                    completion = await shell.run(
                        command, cwd=cwd, env=env, on_output=request.feed, backpressure=backpressure
                    )
                    break
                except ShellDied:
                    # Killed between commands: a fresh shell takes the command.
                    failure = await pool.start_failure(shell.start_log)
                    await _discard(pool, session, shell, one_shot)
                    if failure is not None:
                        raise failure from None
                    if attempt:
                        raise
        execution.finished = True
        with anyio.CancelScope(shield=True):
            if shell is not None and (completion is None or completion.shell_died or one_shot):
                died = completion is not None and completion.shell_died
                failure = await pool.start_failure(shell.start_log) if died else None
                await _discard(pool, session, shell, one_shot)
                if failure is not None:
                    raise failure
    finally:
        execution.finished = True
        if not one_shot:
            session.busy = False
        session.last_used = anyio.current_time()
    if completion is not None and completion.cwd is not None and not one_shot:
        session.cwd = completion.cwd
    return RunResult(
        exit_code=None if completion is None else completion.exit_code,
        timed_out=execution.timed_out,
        cwd=completion.cwd if completion is not None and completion.cwd else session.cwd,
        # A one-shot shell never held the session's state.
        shell_restarted=session.shell_lost and not one_shot,
        # A command that names its own directory does not care where the shell started.
        cwd_fallback=None if cwd is not None and os.path.isabs(cwd) else fallback,
    )


async def _acquire(
    pool: ShellPool, session: Session, one_shot: bool
) -> tuple[Shell, tuple[str, str] | None]:
    """The shell to run on, and (directory, workspace) when a new one could not
    start in the session's directory."""
    if not one_shot and session.shell is not None and not session.shell.dead:
        return session.shell, None
    if not one_shot and session.shell is not None:
        # Died between commands.
        dead = session.drop_shell()
        assert dead is not None
        await pool.close(dead, 0)
    cwd, fallback = session.start_dir()
    shell = await pool.start(session.config, session.env, cwd)
    if not one_shot:
        session.shell = shell
        session.cwd = cwd
    return shell, fallback


async def _discard(pool: ShellPool, session: Session, shell: Shell, one_shot: bool) -> None:
    await pool.close(shell, pool.grace_seconds)
    if not one_shot and session.shell is shell:
        session.drop_shell()


class Terminal(msgspec.Struct, frozen=True):
    cols: int
    rows: int


async def on_pty(
    pool: ShellPool, session: Session, request: RunRequest, lane: PtyLane
) -> RunResult:
    """A one-shot `bash -c` on a PTY, under the same limits as shells.

    It starts at the lane's size (a resize may come before the spawn), opens
    the lane to input once spawned and closes it when the program is gone.
    Whatever it leaves running, background jobs included, is killed at the end.
    """
    try:
        return await _on_pty(pool, session, request, lane)
    finally:
        lane.close()


async def _on_pty(
    pool: ShellPool, session: Session, request: RunRequest, lane: PtyLane
) -> RunResult:
    command, execution = request.command, request.execution
    async with pool.pty_slot():
        if session.config.prefix:
            command = f"{session.config.prefix} {command}"
        fallback = None
        if request.cwd is not None and os.path.isabs(expand_home(request.cwd, session.home)):
            workdir = request.workdir(session)
        else:
            base, fallback = session.start_dir()
            workdir = base if request.cwd is None else resolve_path(base, request.cwd, session.home)
        full_env = envmod.for_terminal(session.env, request.env)
        config = await pool.with_snapshot(session.config, session.env)
        if config.snapshot is not None:
            # On its own line, so the command is parsed after the snapshot's aliases exist.
            full_env[SNAPSHOT_ENV] = config.snapshot
            command = f"{SOURCE_SNAPSHOT}\n{command}"
        if session.config.sandbox is not None:
            command = PTY_STDERR_TO_TERMINAL + command
        # Before the tracker: a sandbox that cannot start fails with nothing made.
        launch = await sandbox.wrap(
            [session.config.shell, "-c", command],
            session.config.sandbox,
            cwd=workdir,
            read_only_files=[config.snapshot] if config.snapshot else [],
            new_session=False,
            runtime_dir=str(pool.runtime_dir),
        )
        tracker = pool.containment.tracker(f"pty{next(_pty_names)}")
        full_env[procs.OWNER_ENV] = tracker.tag
        run = PtyRun(
            launch.argv,
            pass_fds=launch.pass_fds,
            cwd=workdir,
            env=full_env,
            cols=lane.cols,
            rows=lane.rows,
            on_output=request.feed,
            tracker=tracker,
            start_log=StartLog() if session.config.sandbox is not None else None,
        )
        start_error = _start(run, launch)
        if start_error is not None:
            if run.start_log is not None:
                run.start_log.close()
            tracker.release()
            execution.finished = True
            return RunResult(
                exit_code=None,
                timed_out=False,
                cwd=workdir,
                start_error=start_error,
                cwd_fallback=fallback,
            )
        try:
            exit_code, timed_out = await _drive(pool, run, request.timeout, execution, lane)
        finally:
            execution.finished = True
            run.close()
            session.last_used = anyio.current_time()
        if exit_code and (failure := await pool.start_failure(run.start_log)) is not None:
            raise failure
        return RunResult(
            exit_code=exit_code, timed_out=timed_out, cwd=workdir, cwd_fallback=fallback
        )


def _start(run: PtyRun, launch: sandbox.Launch) -> str | None:
    """Start the PTY program; why it could not, or None."""
    try:
        run.start()
    except Exception as exc:  # ptyprocess re-raises the child's error as any type
        return str(exc)
    finally:
        launch.close()
    return None


async def _drive(
    pool: ShellPool, run: PtyRun, timeout: float | None, execution: Execution, lane: PtyLane
) -> tuple[int | None, bool]:
    pid = run.pid
    assert pid is not None
    pool.child_pids.add(pid)
    lane.open(run)
    exit_code: int | None = None
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(run.pump)
            if run.start_log is not None:
                tg.start_soon(run.start_log.collect)
            with execution.arm(timeout):
                exit_code = await run.wait()
                await drain.until_quiet(run.eof, lambda: run.last_data)
            execution.finished = True
            lane.close()
            await run.kill(pool.grace_seconds)
            with anyio.move_on_after(drain.POST_KILL_SECONDS):
                await run.eof.wait()
            tg.cancel_scope.cancel()
        if exit_code is None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(PTY_EXIT_WAIT_SECONDS):
                await run.wait()
    finally:
        pool.child_pids.discard(pid)
    return exit_code, execution.timed_out
