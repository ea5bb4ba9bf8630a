"""What the surfaces may ask of the runtime, in one place."""

from __future__ import annotations

from typing import Any

from bashrpc.protocol.methods import SandboxMode
from bashrpc.server import errors
from bashrpc.server.output.artifacts import ArtifactStore
from bashrpc.server.runtime.run.ptylane import PtyLane
from bashrpc.server.runtime.runtime import Runtime
from bashrpc.server.runtime.seam.backend import DirKind
from bashrpc.server.services.commands import CommandService
from bashrpc.server.services.resumable import Resumables
from bashrpc.server.services.sessions import SessionService
from bashrpc.server.settings import Settings


class Services:
    def __init__(self, runtime: Runtime, owner: str | None = None) -> None:
        """`owner`: the clientId recorded on the sessions these services open."""
        self._runtime = runtime
        self.commands = CommandService(runtime, owner)
        self.sessions = SessionService(runtime, self.commands)
        self.artifacts: ArtifactStore = runtime.artifacts
        self.settings: Settings = runtime.settings
        self.workspace = runtime.workspace
        # Requests a client may resume elsewhere (a daemon's clientId); None: none are kept.
        self.resumables: Resumables | None = None

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

    def home(self, session_id: str, sandbox_mode: SandboxMode) -> str | None:
        """The HOME a session's commands see, for `~` in paths (creating the session
        as its first command would)."""
        session = self._runtime.session(session_id, sandbox_mode, self.commands.owner)
        return self._runtime.backend.home(session.env)

    def directory(self, path: str) -> DirKind:
        """What is at `path` where commands run."""
        return self._runtime.backend.directory(path)

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
