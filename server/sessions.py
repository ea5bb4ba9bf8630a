"""Sessions, and the pool that keeps their shells from piling up.

A session keeps one shell alive between commands. A command that arrives
while that shell is busy runs at once in a one-shot shell of the same
configuration, so a slow build never queues a quick `ls`.

Shells cost memory and processes, so the pool bounds them: past
`max_shells`, starting a shell first closes the least recently used idle
one. A shell whose background jobs are still running (a dev server, a
watcher) is spared, both from that and from the idle timeout, until the
hard limit of twice `max_shells`; beyond it, with no idle shell to close,
the request is refused with -32001.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import anyio
import anyio.abc

from protocol import messages
from protocol.errors import ErrorCode
from server import log, procs
from server.containment import Containment
from server.dispatch import RpcError
from server.procs import ProcTable
from server.shell import Shell, ShellConfig
from server.snapshot import SnapshotStore

DEFAULT_MAX_SHELLS = 32
DEFAULT_IDLE_SECONDS = 900.0
HARD_LIMIT_FACTOR = 2

_shell_names = itertools.count(1)
_log = log.get("sessions")


def expand_home(path: str, home: str | None) -> str:
    """`~` and `~/...` as the session's shell would expand them (`~user` too)."""
    if path == "~" or path.startswith("~/"):
        return path if home is None else home + path[1:]
    return os.path.expanduser(path)


def resolve_path(base: str, path: str, home: str | None) -> str:
    """`path` as a command would reach it from `base`, with `~` expanded, normalized."""
    return os.path.normpath(os.path.join(base, expand_home(path, home)))


class TooManyShells(RpcError):
    def __init__(self, live: int) -> None:
        super().__init__(ErrorCode.TOO_MANY_SHELLS, messages.TOO_MANY_SHELLS, {"liveShells": live})


@dataclass(eq=False)
class Session:
    id: str
    config: ShellConfig
    env: dict[str, str]
    cwd: str
    shell: Shell | None = None
    busy: bool = False
    last_used: float = field(default_factory=anyio.current_time)

    @property
    def home(self) -> str | None:
        return self.env.get("HOME")

    def background_jobs(self, table: ProcTable | None = None) -> int:
        """Processes the idle shell started that are still running."""
        if self.shell is None or self.busy or self.shell.dead:
            return 0
        return len(self.shell.tree(table) - {self.shell.pid})


class SessionRegistry:
    def __init__(self) -> None:
        self._sessions: dict[str, Session] = {}
        self._anonymous = itertools.count(1)

    def get(self, session_id: str) -> Session | None:
        return self._sessions.get(session_id)

    def add(self, session: Session) -> Session:
        self._sessions[session.id] = session
        return session

    def pop(self, session_id: str) -> Session | None:
        return self._sessions.pop(session_id, None)

    def new_id(self) -> str:
        while True:
            candidate = f"session-{next(self._anonymous)}"
            if candidate not in self._sessions:
                return candidate

    def all(self) -> list[Session]:
        return list(self._sessions.values())


@dataclass(frozen=True, slots=True)
class PoolLimits:
    max_shells: int = DEFAULT_MAX_SHELLS
    idle_seconds: float = DEFAULT_IDLE_SECONDS
    grace_seconds: float = 2.0

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
        snapshots: SnapshotStore | None,
        containment: Containment,
    ) -> None:
        self._tg = tg
        self.containment = containment
        self._dir = runtime_dir
        self._sessions = sessions
        self.limits = limits
        self.snapshots = snapshots
        self.live: set[Shell] = set()
        # One-shot PTY commands running now: each holds a terminal and a shell.
        self.pty_runs = 0

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

    async def with_snapshot(self, config: ShellConfig, env: dict[str, str]) -> ShellConfig:
        """The configuration with the user's rc snapshot filled in, when there is one."""
        if self.snapshots is not None and config.snapshot is None:
            snapshot = await self.snapshots.get(config.shell, env)
            if snapshot is not None:
                config = replace(config, snapshot=str(snapshot))
        return config

    async def start(self, config: ShellConfig, env: dict[str, str], cwd: str) -> Shell:
        await self._make_room()
        config = await self.with_snapshot(config, env)
        name = f"s{next(_shell_names)}"
        shell = Shell(config, env, cwd, self._dir, name, self.containment.tracker(name))
        self.live.add(shell)
        try:
            await self._tg.start(shell.serve)
        except BaseException:
            self.live.discard(shell)
            raise
        return shell

    async def close(self, shell: Shell, grace_seconds: float) -> None:
        try:
            await shell.close(grace_seconds)
        finally:
            self.live.discard(shell)

    def pids(self) -> set[int]:
        """Shells and snapshot makers: children whose exit status anyio collects."""
        pids = {pid for s in self.live if (pid := s.pid) is not None}
        if self.snapshots is not None:
            pids |= self.snapshots.pids
        return pids

    def process_table(self) -> ProcTable | None:
        """One scan of /proc for many shells' trees, where trees need one."""
        return None if self.containment.uses_cgroups else procs.snapshot()

    def note_members(self) -> None:
        """Record what every shell has started so far (ancestry tracking only)."""
        table = self.process_table()
        if table is not None:
            for shell in list(self.live):
                shell.tree(table)

    def _idle_sessions(self) -> list[Session]:
        idle = [s for s in self._sessions.all() if s.shell is not None and not s.busy]
        return sorted(idle, key=lambda s: s.last_used)

    async def _evict(self, session: Session, why: str) -> None:
        shell = session.shell
        if shell is None:
            return
        session.shell = None
        _log.info("closing the shell of session %r (%s)", session.id, why)
        await self.close(shell, self.limits.grace_seconds)

    async def _make_room(self) -> None:
        if self.count < self.limits.max_shells:
            return
        idle = self._idle_sessions()
        table = self.process_table()
        victim = next((s for s in idle if s.background_jobs(table) == 0), None)
        if victim is None and self.count < self.limits.hard_limit:
            return
        if victim is None and idle:
            victim = idle[0]
        if victim is None:
            raise TooManyShells(self.count)
        await self._evict(victim, "least recently used")

    async def evict_idle(self) -> None:
        """Close shells idle for longer than the limit, unless their jobs still run."""
        now = anyio.current_time()
        table: ProcTable | None = None
        for session in self._idle_sessions():
            if now - session.last_used < self.limits.idle_seconds:
                break
            if table is None:
                table = self.process_table()
            if session.background_jobs(table) == 0:
                await self._evict(session, "idle")
