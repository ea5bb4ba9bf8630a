"""The pool that keeps shells from piling up.

Shells cost memory and processes, so the pool bounds them: past
`max_shells`, starting a shell first closes the least recently used idle
one. A shell whose background jobs are still running (a dev server, a
watcher) is spared, both from that and from the idle timeout, until the
hard limit of twice `max_shells`; beyond it, with no idle shell to close,
the request is refused (TooManyShells). A one-shot PTY command holds a
terminal and a shell, so it counts toward the same limits.

Its shells come from the runtime's backend (see `seam/backend.py`). A runner
holds one for a command's whole life in `async with leased(...)` (a shell)
or `async with pty_leased(...)` (a program on a terminal): the lease starts
what is missing, runs the command once more on a fresh shell when the old one
was found dead, closes what must not be used again, and tells a sandbox that
never started from a command that failed. Nothing else touches the pool's
shells or its children.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path

import anyio
import anyio.abc
import msgspec

from bashrpc.protocol import messages
from bashrpc.server import clock, log
from bashrpc.server.errors import SandboxUnavailable, TooManyShells
from bashrpc.server.runtime.seam.backend import (
    Backend,
    LaunchLog,
    PtyHandle,
    PtySpec,
    ShellHandle,
)
from bashrpc.server.runtime.seam.shelltypes import Completion, ShellConfig, ShellDied
from bashrpc.server.runtime.sessions.session import Session, SessionRegistry
from bashrpc.server.settings import (
    DEFAULT_IDLE_SECONDS,
    DEFAULT_KILL_GRACE_SECONDS,
    DEFAULT_MAX_SHELLS,
)

HARD_LIMIT_FACTOR = 2

_shell_names = itertools.count(1)
_log = log.get("pool")


def _shell_died(exc: BaseException) -> bool:
    """ShellDied, alone or as the one error of the shell's task group."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return isinstance(exc, ShellDied)


class ShellLease:
    """A session's shell for one command, for an `async with` block
    (`ShellPool.leased`): `run` takes it (started when there is none) and, when
    it was found dead between commands, runs the command once more on a fresh
    one. A class, not a generator: a command takes one, and an async
    generator's context manager costs the loop's bookkeeping of the generator too."""

    def __init__(self, pool: ShellPool, session: Session, one_shot: bool) -> None:
        self._pool = pool
        self._session = session
        self._one_shot = one_shot
        self.shell: ShellHandle | None = None
        self.completion: Completion | None = None
        # (directory, workspace) when a new shell could not start in the session's directory.
        self.fallback: tuple[str, str] | None = None
        # A new shell's start notices (`ShellHandle.start_notices`); none for one in use.
        self.notices: tuple[str, ...] = ()

    async def run(self, command: Callable[[ShellHandle], Awaitable[Completion]]) -> Completion:
        """`command` on the shell (`ShellHandle.run`), once more on a fresh shell
        when the one taken had been killed between commands."""
        try:
            return await self._once(command)
        except ShellDied:
            return await self._once(command)

    async def _once(self, command: Callable[[ShellHandle], Awaitable[Completion]]) -> Completion:
        shell = self.shell = await self._pool._lease(self, self._session, self._one_shot)
        try:
            self.completion = await command(shell)
        except ShellDied:
            await self._pool._give_back(self._session, shell, died=True)
            raise
        return self.completion

    async def __aenter__(self) -> ShellLease:
        return self

    async def __aexit__(self, failed: type[BaseException] | None, *_: object) -> None:
        """A spent shell closed, once the block ended without an error; the
        session's last use noted however it ended, and the directory the command
        ended in taken."""
        session = self._session
        try:
            if failed is None and self.spent:
                assert self.shell is not None
                died = self.completion is not None and self.completion.shell_died
                with anyio.CancelScope(shield=True):
                    await self._pool._give_back(session, self.shell, died=died)
        finally:
            session.last_used = clock.now()
        done = self.completion
        if failed is None and done is not None and done.cwd is not None and not self._one_shot:
            session.cwd = done.cwd

    @property
    def spent(self) -> bool:
        """Its shell must not run another command: the command was killed, the
        shell died under it, or it was a one-shot."""
        done = self.completion
        return self.shell is not None and (done is None or done.shell_died or self._one_shot)


class PtyLease:
    """A program on a terminal for one command, inside `ShellPool.pty_leased`."""

    def __init__(self, program: PtyHandle) -> None:
        self.program = program
        # What `wait` saw before any kill: a failure may be a sandbox that never started.
        self.exit_code: int | None = None

    async def wait(self) -> int:
        self.exit_code = await self.program.wait()
        return self.exit_code


class PoolLimits(msgspec.Struct, frozen=True):
    max_shells: int = DEFAULT_MAX_SHELLS
    idle_seconds: float = DEFAULT_IDLE_SECONDS
    grace_seconds: float = DEFAULT_KILL_GRACE_SECONDS

    @property
    def hard_limit(self) -> int:
        return self.max_shells * HARD_LIMIT_FACTOR


class ShellPool:
    """Starts shells as tasks of a long-lived task group (their owner) and bounds them."""

    def __init__(
        self,
        tg: anyio.abc.TaskGroup,
        runtime_dir: Path,
        sessions: SessionRegistry,
        limits: PoolLimits,
        backend: Backend,
    ) -> None:
        self._tg = tg
        self.backend = backend
        # The kill grace in use; shutdown shortens it.
        self.grace_seconds = limits.grace_seconds
        # PTY programs, whose exit status their lease collects.
        self.child_pids: set[int] = set()
        self._dir = runtime_dir
        self._sessions = sessions
        self.limits = limits
        self.live: set[ShellHandle] = set()
        # One-shot PTY commands running now: each holds a terminal and a shell.
        self.pty_runs = 0

    @property
    def runtime_dir(self) -> Path:
        """Every shell's directory is in it."""
        return self._dir

    @property
    def count(self) -> int:
        return len(self.live) + self.pty_runs

    @contextlib.asynccontextmanager
    async def pty_slot(self) -> AsyncIterator[None]:
        """Room for one PTY command under the same limits as shells (-32001 beyond)."""
        await self._make_room()
        self.pty_runs += 1
        try:
            yield
        finally:
            self.pty_runs -= 1

    def leased(self, session: Session, *, one_shot: bool) -> ShellLease:
        """A shell for one command of `session` (its caller holds the session's
        turn), or for `one_shot` one of its own, for an `async with` block's life;
        after it, a spent shell is closed and the session takes the directory the
        command ended in. A sandbox that never started is raised as SandboxUnavailable."""
        return ShellLease(self, session, one_shot)

    async def _lease(self, lease: ShellLease, session: Session, one_shot: bool) -> ShellHandle:
        """The shell a command of `session` runs on: the session's own (started
        anew when there is none or it died), or for `one_shot` a shell of its own."""
        if not one_shot and session.shell is not None and not session.shell.dead:
            return session.shell
        if not one_shot and session.shell is not None:
            # Died between commands.
            dead = session.drop_shell()
            assert dead is not None
            await self.close(dead, 0)
        cwd, fallback = session.start_dir(self.backend)
        lease.fallback = fallback or lease.fallback
        shell = await self.start(session.config, session.env, cwd)
        lease.notices = shell.start_notices or lease.notices
        if not one_shot:
            session.shell = shell
            session.cwd = cwd
        return shell

    async def _give_back(self, session: Session, shell: ShellHandle, *, died: bool) -> None:
        """Close a leased shell that must not run another command; when it died
        because its sandbox never started, raise bwrap's words."""
        failure = await self.start_failure(shell.start_log) if died else None
        await self.close(shell, self.grace_seconds)
        if session.shell is shell:
            session.drop_shell()
        if failure is not None:
            raise failure from None

    @contextlib.asynccontextmanager
    async def pty_leased(
        self, session: Session, spec: Callable[[ShellConfig], PtySpec]
    ) -> AsyncIterator[PtyLease]:
        """A program on a terminal for one command of `session`, made from
        `spec` of the session's configuration (PtyStartFailed when it cannot
        start), under the same limits as shells; closed after the block, and a
        failure that was a sandbox that never started raised as SandboxUnavailable."""
        async with self.pty_slot():
            config = await self.backend.configure(session.config, session.env)
            lease = PtyLease(await self.backend.pty(spec(config)))
            program = lease.program
            pid = program.pid
            assert pid is not None
            self.child_pids.add(pid)
            try:
                yield lease
            finally:
                self.child_pids.discard(pid)
                program.close()
                session.last_used = clock.now()
            failed = lease.exit_code
            if failed and (failure := await self.start_failure(program.start_log)) is not None:
                raise failure

    async def start(self, config: ShellConfig, env: dict[str, str], cwd: str) -> ShellHandle:
        await self._make_room()
        config = await self.backend.configure(config, env)
        shell = self.backend.shell(config, env, cwd, f"s{next(_shell_names)}")
        if shell.start_log is not None:
            # Read here, for as long as the shell holds it: nothing blocks on it.
            self._tg.start_soon(shell.start_log.collect)
        try:
            await self._serve(shell)
        except BaseException as exc:
            failure = await self.start_failure(shell.start_log) if _shell_died(exc) else None
            if failure is None:
                raise
            raise failure from None
        return shell

    async def _serve(self, shell: ShellHandle) -> None:
        self.live.add(shell)
        try:
            await self._tg.start(shell.serve)
        except BaseException:
            self.live.discard(shell)
            raise
        finally:
            if shell.start_log is not None:
                shell.start_log.started()

    async def start_failure(self, log: LaunchLog | None) -> SandboxUnavailable | None:
        """For a shell or PTY command found dead: when its sandbox never started,
        bwrap's words (`log`), logged.

        Only bwrap's own lines count, and bwrap writes none once its command runs."""
        said = None if log is None else await log.bwrap_message()
        if said is None:
            return None
        reason = messages.SANDBOX_BWRAP_FAILED.format(detail=said)
        message = messages.SANDBOX_UNAVAILABLE.format(reason=reason)
        _log.error(message)
        return SandboxUnavailable(message, detail=said)

    def shorten_grace(self, seconds: float) -> None:
        """Shutdown: a kill from now on waits at most `seconds` for its shell to go."""
        self.grace_seconds = min(self.grace_seconds, seconds)

    async def close_all(self) -> None:
        """Every shell closed at once (the runtime's wind-down)."""
        async with anyio.create_task_group() as tg:
            for shell in list(self.live):
                tg.start_soon(self.close, shell, self.grace_seconds)

    def retire(self, shell: ShellHandle) -> None:
        """Close a shell its session let go of, in the pool's task group: the caller,
        which cannot wait, has already made sure no command runs on it."""
        self._tg.start_soon(self.close, shell, self.grace_seconds)

    async def close(self, shell: ShellHandle, grace_seconds: float) -> None:
        try:
            await shell.close(grace_seconds)
        finally:
            self.live.discard(shell)

    def pids(self) -> set[int]:
        """Children whose exit status someone here collects: shells, PTY programs,
        and the backend's own (the orphan reaper leaves them alone)."""
        pids = {pid for s in self.live if (pid := s.pid) is not None} | self.child_pids
        return pids | self.backend.pids()

    def note_members(self) -> None:
        """Record what every shell has started so far."""
        self.backend.note_members(list(self.live))

    def background_jobs(self, sessions: Sequence[Session]) -> list[int]:
        """For each session, the processes its idle shell started that still run
        (0 without an idle shell): one look for them all."""
        shells = [s.idle_shell for s in sessions]
        counts = iter(self.backend.background_jobs([s for s in shells if s is not None]))
        return [0 if shell is None else next(counts) for shell in shells]

    def _idle_sessions(self) -> list[Session]:
        idle = [s for s in self._sessions.all() if s.shell is not None and not s.busy]
        return sorted(idle, key=lambda s: s.last_used)

    async def _evict(self, session: Session, why: str) -> None:
        shell = session.drop_shell()
        if shell is None:
            return
        _log.info("closing the shell of session %r (%s)", session.id, why)
        await self.close(shell, self.grace_seconds)

    async def _make_room(self) -> None:
        if self.count < self.limits.max_shells:
            return
        idle = self._idle_sessions()
        jobs = self.background_jobs(idle)
        victim = next((s for s, n in zip(idle, jobs, strict=True) if n == 0), None)
        if victim is None and self.count < self.limits.hard_limit:
            return
        if victim is None and idle:
            victim = idle[0]
        if victim is None:
            raise TooManyShells(self.count)
        await self._evict(victim, "least recently used")

    async def evict_idle(self) -> None:
        """Close shells idle for longer than the limit, unless their jobs still run."""
        now = clock.now()
        stale = [s for s in self._idle_sessions() if now - s.last_used >= self.limits.idle_seconds]
        if not stale:
            return
        for session, jobs in zip(stale, self.background_jobs(stale), strict=True):
            if jobs == 0:
                await self._evict(session, "idle")
