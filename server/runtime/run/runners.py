"""Running one command on its session's persistent shell, and what both
runners share: the execution and the result (the PTY runner is
`ptyrunner.py`; the records of one command are listed in `__init__.py`).

Both runners hand the command's bytes to a `feed` callback, stop on the
execution's cancel scope or on the deadline, and leave nothing behind that
should not outlive the command: an aborted pipe command takes its shell
with it, a PTY command takes everything it started. What the bytes mean is
the caller's business.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

import anyio
import msgspec

from bashrpc.server.runtime.seam.backend import Backpressure, ShellHandle
from bashrpc.server.runtime.seam.shelltypes import Completion, ShellDied
from bashrpc.server.runtime.sessions.pool import ShellPool
from bashrpc.server.runtime.sessions.sessions import Session, expand_home, resolve_path


class Execution:
    """One command for a runner: what to run, where, for how long, where its
    bytes go; and, as whoever may abort it sees it, the scope an abort or the
    deadline cancels."""

    def __init__(
        self,
        request_id: object,
        session_id: str,
        command: str,
        *,
        cwd: str | None,
        env: Mapping[str, str],
        timeout: float | None,
        feed: Callable[[bytes], None],
        one_shot: bool = False,
    ) -> None:
        self.request_id = request_id
        self.session_id = session_id
        self.command = command
        # Relative to the session's directory; None: that directory.
        self.cwd = cwd
        self.env = env
        self.timeout = timeout
        self.feed = feed
        # On a shell of its own, at once, without the session's state (pipes only).
        self.one_shot = one_shot
        self.scope = anyio.CancelScope()
        # Its wait for the session's turn, which an abort ends: it then never runs.
        self.waiting = anyio.CancelScope()
        self.aborted = False
        self.finished = False

    def abort(self) -> bool:
        if self.finished or self.aborted:
            return False
        self.aborted = True
        self.waiting.cancel()
        self.scope.cancel()
        return True

    def arm(self) -> anyio.CancelScope:
        """The scope a runner runs in: cancelled by an abort, or at the deadline."""
        if self.timeout is not None:
            self.scope.deadline = anyio.current_time() + self.timeout
        return self.scope

    def workdir(self, session: Session) -> str:
        """The directory the command starts in, `~` expanded as the session's shell would."""
        if self.cwd is None:
            return session.cwd
        return resolve_path(session.cwd, self.cwd, session.home)

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
    # What a new shell's sandbox did at its start (the git guard's notices).
    start_notices: tuple[str, ...] = ()

    @property
    def killed(self) -> bool:
        return self.exit_code is None and self.start_error is None


async def on_pipes(
    pool: ShellPool,
    session: Session,
    execution: Execution,
    backpressure: Backpressure | None = None,
) -> RunResult:
    """On the session's shell (its caller holds the session's turn), or on a
    one-shot shell of its own when the execution asks for one."""
    command, cwd, env, feed = execution.command, execution.cwd, execution.env, execution.feed
    if cwd is not None:
        # Data for `cd`, never shell text: `~` is expanded here, as on a PTY.
        cwd = expand_home(cwd, session.home)
    one_shot = execution.one_shot
    shell: ShellHandle | None = None
    completion: Completion | None = None
    fallback: tuple[str, str] | None = None
    notices: tuple[str, ...] = ()
    try:
        with execution.arm():
            for attempt in range(2):
                lease = await pool.lease(session, one_shot=one_shot)
                shell, fallback = lease.shell, lease.fallback or fallback
                notices = lease.notices or notices
                try:
                    completion = await shell.run(
                        command, cwd=cwd, env=env, on_output=feed, backpressure=backpressure
                    )
                    break
                except ShellDied:
                    # Killed between commands: a fresh shell takes the command.
                    failure = await pool.start_failure(shell.start_log)
                    await pool.discard(session, shell)
                    if failure is not None:
                        raise failure from None
                    if attempt:
                        raise
        execution.finished = True
        with anyio.CancelScope(shield=True):
            if shell is not None and (completion is None or completion.shell_died or one_shot):
                died = completion is not None and completion.shell_died
                failure = await pool.start_failure(shell.start_log) if died else None
                await pool.discard(session, shell)
                if failure is not None:
                    raise failure
    finally:
        execution.finished = True
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
        start_notices=notices,
    )
