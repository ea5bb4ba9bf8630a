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

import contextlib
import os
from collections.abc import Awaitable, Callable, Iterator, Mapping

import anyio
import msgspec

from bashrpc.server import clock
from bashrpc.server.runtime.run.deadlines import Deadlines
from bashrpc.server.runtime.run.inputwatch import SETTLE_SECONDS, InputWait
from bashrpc.server.runtime.seam.backend import Backpressure
from bashrpc.server.runtime.sessions.pool import ShellPool
from bashrpc.server.runtime.sessions.session import Session, expand_home


class Workdir(msgspec.Struct, frozen=True):
    """Where a command starts, resolved once, when its turn comes (`of`)."""

    # The request's directory, `~` expanded as the session's shell would: data for
    # the shell's `cd` (a relative one from where the shell stands); None: the
    # session's directory.
    given: str | None
    # Where the command starts, seen from the session's directory at its turn.
    path: str

    @classmethod
    def of(cls, cwd: str | None, session_cwd: str, home: str | None) -> Workdir:
        """The one rule: `~` is the session's HOME, and a relative directory is
        taken from where the session stands."""
        given = None if cwd is None else expand_home(cwd, home)
        return cls(given, _join(session_cwd, given))

    @property
    def absolute(self) -> bool:
        """The request named an absolute directory: where a shell started does not matter."""
        return self.given is not None and os.path.isabs(self.given)

    def from_base(self, base: str) -> str:
        """Where it starts for a program that starts in `base` rather than in the
        session's directory (a new one, which could not enter that)."""
        return _join(base, self.given)


def _join(base: str, given: str | None) -> str:
    return base if given is None else os.path.normpath(os.path.join(base, given))


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
        deadlines: Deadlines,
        one_shot: bool = False,
        on_input: Callable[[InputWait], Awaitable[None]] | None = None,
        settle: float = SETTLE_SECONDS,
    ) -> None:
        self.request_id = request_id
        self.session_id = session_id
        self.command = command
        # As the request gave it: relative to the session's directory; None: that directory.
        self.cwd = cwd
        # Resolved when the command's turn comes (`take_turn`).
        self.workdir: Workdir | None = None
        self.env = env
        self.timeout = timeout
        # Where its timeout is kept while it runs (`arm`).
        self._deadlines = deadlines
        self.feed = feed
        # On a shell of its own, at once, without the session's state (pipes only).
        self.one_shot = one_shot
        self.scope = anyio.CancelScope()
        # Its wait for the session's turn, which an abort ends: it then never runs.
        # Made only for a wait (`give_up`): most commands never wait.
        self._waiting: anyio.CancelScope | None = None
        self.aborted = False
        # Its run is over (set by `arm` alone): an abort now changes nothing.
        self.finished = False
        # Told when a PTY command waits for its person; `input_wait` is the wait
        # until the command moves on (shown by `session/list`).
        self.on_input = on_input
        self.settle = settle
        self.input_wait: InputWait | None = None
        # The job it went on as, once its request was answered before its end
        # (`services/held.py`): its waits name it, for who answers them.
        self.terminal_id: str | None = None

    def typed(self) -> None:
        """Its terminal was typed into: the wait told is over at once, so a second
        answer to it is typed nowhere (its watch tells the next one)."""
        self.input_wait = None

    def abort(self) -> bool:
        if self.finished or self.aborted:
            return False
        self.aborted = True
        if self._waiting is not None:
            self._waiting.cancel()
        self.scope.cancel()
        return True

    def give_up(self) -> anyio.CancelScope:
        """The scope of its wait for the session's turn, made as it must wait;
        cancelled from the start when it was aborted before."""
        if self._waiting is None:
            self._waiting = anyio.CancelScope()
            if self.aborted:
                self._waiting.cancel()
        return self._waiting

    @contextlib.contextmanager
    def arm(self) -> Iterator[anyio.CancelScope]:
        """The scope a runner runs the command in, cancelled by an abort or at the
        deadline; when it ends, the execution is finished, before whatever the
        runner then cleans up (so a late abort cannot turn a timeout into an abort).
        The deadline is the runtime's to keep (`Deadlines`), not the scope's own."""
        try:
            with self.scope:
                if self.timeout is not None:
                    self._deadlines.add(self.scope, clock.now() + self.timeout)
                yield self.scope
        finally:
            self._deadlines.discard(self.scope)
            self.finished = True

    def take_turn(self, session: Session) -> Workdir:
        """The command's turn came: where it starts is settled now, as the session stands."""
        self.workdir = Workdir.of(self.cwd, session.cwd, session.home)
        return self.workdir

    def settled(self) -> Workdir:
        """Where it starts, as `take_turn` settled it."""
        assert self.workdir is not None, "a command runs only in its turn"
        return self.workdir

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
    workdir = execution.settled()
    one_shot = execution.one_shot
    async with pool.leased(session, one_shot=one_shot) as lease:
        with execution.arm():
            await lease.run(
                lambda shell: shell.run(
                    execution.command,
                    # Data for `cd`, never shell text.
                    cwd=workdir.given,
                    env=execution.env,
                    on_output=execution.feed,
                    backpressure=backpressure,
                )
            )
    completion = lease.completion
    return RunResult(
        exit_code=None if completion is None else completion.exit_code,
        timed_out=execution.timed_out,
        cwd=completion.cwd if completion is not None and completion.cwd else session.cwd,
        # A one-shot shell never held the session's state.
        shell_restarted=session.shell_lost and not one_shot,
        # A command that names its own directory does not care where the shell started.
        cwd_fallback=None if workdir.absolute else lease.fallback,
        start_notices=lease.notices,
    )
