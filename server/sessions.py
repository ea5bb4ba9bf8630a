"""Sessions: named, persistent shells, and the registry that owns them.

A session keeps one shell alive between commands. A command that arrives
while that shell is busy runs at once in a one-shot shell of the same
configuration, so a slow build never queues a quick `ls`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.abc

from server.shell import Shell, ShellConfig

_shell_names = itertools.count(1)


@dataclass(eq=False)
class Session:
    id: str
    config: ShellConfig
    env: dict[str, str]
    cwd: str
    shell: Shell | None = None
    busy: bool = False
    last_used: float = field(default_factory=anyio.current_time)


class ShellFactory:
    """Starts shells as tasks of a long-lived task group, their owner."""

    def __init__(self, tg: anyio.abc.TaskGroup, runtime_dir: Path) -> None:
        self._tg = tg
        self._dir = runtime_dir
        self.live: set[Shell] = set()

    async def start(self, config: ShellConfig, env: dict[str, str], cwd: str) -> Shell:
        shell = Shell(config, env, cwd, self._dir, f"s{next(_shell_names)}")
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
        return {pid for s in self.live if (pid := s.pid) is not None}


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
