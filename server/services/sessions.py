"""Sessions as the host sees them: open, close, list."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import msgspec

from bashrpc.protocol import messages, paths
from bashrpc.protocol.methods import (
    NetworkConnection,
    NetworkPolicy,
    NetworkRequest,
    RequestId,
    SandboxMode,
)
from bashrpc.server import errors
from bashrpc.server.observe.stats import STATS
from bashrpc.server.runtime.instance import Runtime
from bashrpc.server.runtime.run.inputwatch import InputWait
from bashrpc.server.runtime.sessions import reset
from bashrpc.server.runtime.sessions.session import Session, resolve_path
from bashrpc.server.services import secrets, tightening
from bashrpc.server.services.commands import CommandService
from bashrpc.server.services.fieldchecks import env_fields, reject_nul, reject_unexecable


class SessionView(msgspec.Struct, frozen=True):
    id: str
    busy: bool
    # None until the session's shell has started (or after it died).
    pid: int | None
    cwd: str
    background_jobs: int
    owner: str | None
    # The ids of its commands waiting for their turn, first in line first.
    queued: list[RequestId]
    network: NetworkPolicy | None = None
    # With an allowlist, its last connections.
    connections: list[NetworkConnection] | None = None
    # Its commands that wait for their person now.
    input_waits: list[InputWait] = msgspec.field(default_factory=list)


class SessionReset(msgspec.Struct, frozen=True):
    id: str
    commands_aborted: int
    jobs_ended: int
    cleaned: reset.Cleaned
    cwd: str


class SessionService:
    def __init__(self, runtime: Runtime, commands: CommandService) -> None:
        self._runtime = runtime
        self._commands = commands

    def open(
        self,
        session_id: str | None,
        cwd: str | None,
        env: dict[str, str] | None,
        sandbox_mode: SandboxMode = "off",
        secret_env: Sequence[str] = (),
        network: NetworkRequest | None = None,
    ) -> tuple[str, str]:
        """(id, cwd) of a new session, or of the existing one of that id, unchanged
        but for a stricter sandbox (see `tighten`); `secret_env` names the values of
        `env` its output never shows. `network`: a new session's own, narrower than
        the server's; an existing session's is kept."""
        runtime = self._runtime
        reject_nul({"cwd": cwd, **env_fields(env)})
        session_id = session_id or runtime.sessions.new_id()
        if secret_env:
            secrets.add_env(runtime, session_id, env or {}, secret_env)
        session = runtime.sessions.get(session_id)
        if session is None:
            if env:
                reject_unexecable(runtime.session_env(env), env)
            directory = runtime.workspace
            if cwd is not None:
                directory = self._existing_dir(directory, cwd)
            owner = self._commands.owner
            narrowed = None if network is None else runtime.narrow_network(network)
            session = runtime.new_session(
                session_id, directory, env, sandbox_mode, owner, network=narrowed
            )
        elif network is not None:
            raise errors.InvalidArgument(messages.NETWORK_SESSION_EXISTS.format(session=session_id))
        else:
            self.tighten([session], sandbox_mode)
        return session.id, session.cwd

    def tighten(self, sessions: list[Session], mode: SandboxMode) -> None:
        tightening.tighten(self._runtime, sessions, mode)

    def tighten_all(self, mode: SandboxMode) -> None:
        self.tighten(self._runtime.sessions.all(), mode)

    def check_tighten_all(self, mode: SandboxMode) -> None:
        """Refuse (-32602), changing nothing, what `tighten_all` would refuse."""
        tightening.planned(self._runtime, self._runtime.sessions.all(), mode)

    async def close(self, session_id: str) -> bool:
        """Abort the session's commands and kill its shell and all it started."""
        session = self._runtime.sessions.pop(session_id)
        if session is None:
            return False
        self._commands.abort(session_id=session.id)
        await self._runtime.close_session(session)
        # Its own secrets go with it: a session opened later under its id starts without.
        self._runtime.secrets.forget_session(session.id)
        return True

    async def reset(self, session_id: str | None) -> list[SessionReset]:
        """Hand sessions back clean: abort their commands, kill all they started,
        drop their shells' state, back to the directory each was opened in. One
        session, or (None) every session of this runtime, a daemon tenant's, and
        then its artifacts too."""
        if session_id is None:
            sessions = self._runtime.sessions.all()
        else:
            found = self._runtime.sessions.get(session_id)
            if found is None:
                raise errors.InvalidArgument(messages.NO_SUCH_SESSION.format(session=session_id))
            sessions = [found]
        # Held from now to the answer: what arrives meanwhile waits, then sees them fresh.
        for session in sessions:
            session.hold.take()
        try:
            aborted = {s.id: self._commands.running_count(s.id) for s in sessions}
            for session in sessions:
                self._commands.abort(session_id=session.id)
            async with contextlib.AsyncExitStack() as alone:
                for session in sessions:
                    await alone.enter_async_context(session.hold.alone())
                done = [await self._reset_one(s, aborted[s.id]) for s in sessions]
            if session_id is None:
                # The whole tenant: the next task reads nothing of the last one's output.
                self._runtime.artifacts.clear()
            return done
        finally:
            for session in sessions:
                session.hold.release()

    async def _reset_one(self, session: Session, aborted: int) -> SessionReset:
        jobs = self._runtime.jobs.of_session(session.id)
        await self._runtime.jobs.close_session(session.id)
        cleaned = await reset.reset(self._runtime.pool, session)
        STATS.killed("reset", cleaned.processes)
        return SessionReset(session.id, aborted, len(jobs), cleaned, session.cwd)

    def list(self) -> list[SessionView]:
        sessions = self._runtime.sessions.all()
        jobs = self._runtime.pool.background_jobs(sessions)
        return [
            SessionView(
                id=s.id,
                busy=s.busy,
                pid=None if s.shell is None else s.shell.pid,
                cwd=s.cwd,
                background_jobs=n,
                owner=s.owner,
                queued=[
                    t.request_id for t in s.line.waiting if isinstance(t.request_id, str | int)
                ],
                network=network,
                connections=connections,
                input_waits=self._commands.input_waits(s.id),
            )
            for s, n in zip(sessions, jobs, strict=True)
            for network, connections in [self._runtime.network_view(s)]
        ]

    def _existing_dir(self, base: str, path: str) -> str:
        backend = self._runtime.backend
        # Relative to the workspace, `~` as the server's own HOME.
        resolved = resolve_path(base, path, backend.home(None))
        if backend.directory(resolved) != "dir":
            raise errors.InvalidArgument(
                messages.CWD_NOT_DIRECTORY.format(path=paths.printable(resolved))
            )
        return resolved
