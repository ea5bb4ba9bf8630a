"""What the surfaces may ask of the runtime, in one place."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

from bashrpc.protocol.methods import SandboxMode
from bashrpc.protocol.terminals import TerminalExited
from bashrpc.server import errors
from bashrpc.server.observe.stats import Gauges
from bashrpc.server.output.artifacts import ArtifactStore
from bashrpc.server.runtime.instance import Runtime
from bashrpc.server.runtime.jobs.job import Job
from bashrpc.server.runtime.run.ptylane import PtyLane
from bashrpc.server.runtime.seam.backend import DirKind
from bashrpc.server.services import secrets
from bashrpc.server.services.commands import CommandService
from bashrpc.server.services.jobs import JobService, wire_status
from bashrpc.server.services.resumable import Resumables
from bashrpc.server.services.sessions import SessionService
from bashrpc.server.services.streams import Notify
from bashrpc.server.settings import Settings


class Services:
    def __init__(self, runtime: Runtime, owner: str | None = None) -> None:
        """`owner`: the clientId recorded on the sessions these services open."""
        self._runtime = runtime
        self.commands = CommandService(runtime, owner)
        self.sessions = SessionService(runtime, self.commands)
        self.jobs = JobService(runtime, self.commands)
        self.artifacts: ArtifactStore = runtime.artifacts
        self.settings: Settings = runtime.settings
        self.workspace = runtime.workspace
        # Requests a client may resume elsewhere (a daemon's clientId); None: none are kept.
        self.resumables: Resumables | None = None
        self._tell: Callable[[Job], Awaitable[None]] | None = None
        # Whom what is sealed for this client is bound to (`requestState`): its
        # clientId, else these services alone (a connection naming none, under the
        # daemon, is a tenant of its own).
        self.principal = f"client:{owner}" if owner is not None else f"own:{os.urandom(16).hex()}"

    def attached(self, notify: Notify) -> None:
        """A connection serves these services: it hears `terminal/exited` of the
        owner's jobs from now on, and of those that ended while none listened."""

        async def tell(job: Job) -> None:
            status = wire_status(job.exit)
            assert status is not None
            notice = TerminalExited(
                session_id=job.session_id, terminal_id=job.id, exit_status=status
            )
            await notify("terminal/exited", notice)

        self.detached()
        self._tell = tell
        self.jobs.listen(tell)

    def detached(self) -> None:
        """The connection is gone, or serves other services now (idempotent)."""
        if self._tell is not None:
            self.jobs.unlisten(self._tell)
            self._tell = None

    def pty(self, request_id: Any) -> PtyLane:
        """A PTY request's lane, for input, resize and screen: this connection's
        own, else (under the daemon) a running one of its client's, begun on
        another connection, maybe one that was cut."""
        try:
            return self.commands.pty(request_id)
        except errors.NoSuchPty:
            lane = None if self.resumables is None else self.resumables.lane(request_id)
            if lane is None:
                raise
            return lane

    def add_secrets(self, named: list[tuple[str, str]], session_id: str | None) -> int:
        """`secrets/add`: values no later output shows (of one session, when named)."""
        return secrets.add(self._runtime, named, session_id)

    def home(self, session_id: str, sandbox_mode: SandboxMode) -> str | None:
        """The HOME a session's commands see, for `~` in paths (creating the session
        as its first command would)."""
        session = self._runtime.session(session_id, sandbox_mode, self.commands.owner)
        return self._runtime.backend.home(session.env)

    def directory(self, path: str) -> DirKind:
        """What is at `path` where commands run."""
        return self._runtime.backend.directory(path)

    def gauges(self) -> Gauges:
        """What is alive in this process now: for a stdio server, its one
        connection and runtime (the daemon's services see all of its own)."""
        return runtime_gauges([self._runtime], connections=1, tenants=0)

    def tighten_all(self, mode: SandboxMode) -> None:
        """Every session these services see under `mode` (see `SessionService`)."""
        self.sessions.tighten_all(mode)

    async def wind_down(self) -> None:
        """Abort every command, then kill every process (idempotent)."""
        self.commands.abort()
        await self._runtime.wind_down()

    async def shut_down(self) -> None:
        """`shutdown`: every session's processes killed (idempotent)."""
        await self._runtime.wind_down()


def runtime_gauges(
    runtimes: list[Runtime], *, connections: int, tenants: int, replay_bytes: int = 0
) -> Gauges:
    queued = sum(len(s.line.waiting) for rt in runtimes for s in rt.sessions.all())
    return Gauges(
        connections=connections,
        tenants=tenants,
        sessions=sum(len(rt.sessions.all()) for rt in runtimes),
        shells=sum(rt.pool.count for rt in runtimes),
        commands_running=sum(len(rt.executions) for rt in runtimes) - queued,
        commands_queued=queued,
        jobs=sum(rt.jobs.running_count for rt in runtimes),
        replay_bytes=replay_bytes,
    )
