"""The runtime of one server: sessions, the shell pool, artifacts, containment.

It owns the shells' task group and the housekeeping task. `serve` opens one
per process; a test opens one per server it runs in-process.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.abc
import msgspec

from bashrpc.protocol import messages
from bashrpc.protocol.methods import (
    NetworkConnection,
    NetworkMode,
    NetworkPolicy,
    NetworkRequest,
    SandboxMode,
)
from bashrpc.server import log
from bashrpc.server.errors import InvalidArgument
from bashrpc.server.output.artifacts import ArtifactStore
from bashrpc.server.output.secretbook import SecretBook
from bashrpc.server.runtime.containment import procs
from bashrpc.server.runtime.containment.registry import Containment
from bashrpc.server.runtime.jobs.table import JobLimits, JobTable
from bashrpc.server.runtime.local.backend import LocalBackend
from bashrpc.server.runtime.network import rules
from bashrpc.server.runtime.network.gateways import Gateways
from bashrpc.server.runtime.network.rules import pattern_error
from bashrpc.server.runtime.run import env as envmod
from bashrpc.server.runtime.run.deadlines import Deadlines
from bashrpc.server.runtime.run.runners import Execution
from bashrpc.server.runtime.sandbox import mounts
from bashrpc.server.runtime.seam.backend import Backend, BackendFactory, BackendSetup
from bashrpc.server.runtime.seam.egress import Egress
from bashrpc.server.runtime.seam.policy import Policy
from bashrpc.server.runtime.seam.shelltypes import ShellConfig
from bashrpc.server.runtime.sessions.pool import PoolLimits, ShellPool
from bashrpc.server.runtime.sessions.session import Session, SessionRegistry
from bashrpc.server.settings import Settings

HOUSEKEEPING_INTERVAL_SECONDS = 1.0
_log = log.get("runtime")
# Shutdown must finish within a few seconds even with TERM-ignoring children.
SHUTDOWN_GRACE_SECONDS = 1.0


class Options(msgspec.Struct, frozen=True):
    settings: Settings
    workspace: Path
    shell: str
    artifacts_dir: Path
    # Where shells run: the backend made for this runtime; None: this machine's,
    # its processes in the runtime's containment.
    backend: BackendFactory | None = None
    # Room for rc captures at once, shared by the runtimes that take it (a daemon's
    # tenants); None: the runtime makes its own (`snapshot.capture_slots`).
    capture_slots: anyio.CapacityLimiter | None = None


class Runtime:
    def __init__(
        self,
        options: Options,
        runtime_dir: Path,
        containment: Containment,
        shells: anyio.abc.TaskGroup,
        *,
        reap_orphans: bool,
        artifacts_owner: str | None = None,
    ) -> None:
        """`artifacts_owner`: whose artifacts it keeps under the daemon (a tenant's);
        None: the workspace's."""
        settings = options.settings
        self.options = options
        self.settings = settings
        self.containment = containment
        self.sessions = SessionRegistry()
        limits = PoolLimits(
            max_shells=settings.sessions.max_shells,
            idle_seconds=settings.sessions.idle_seconds,
            grace_seconds=settings.kill.grace_seconds,
        )
        snapshot_timeout = settings.bash.snapshot_timeout if settings.bash.snapshot else None
        setup = BackendSetup(runtime_dir, snapshot_timeout)
        self.backend: Backend = (
            LocalBackend(setup, containment, shells, options.capture_slots)
            if options.backend is None
            else options.backend(setup)
        )
        self.pool = ShellPool(shells, runtime_dir, self.sessions, limits, self.backend)
        self.deadlines = Deadlines()
        self.artifacts = ArtifactStore(
            options.artifacts_dir,
            options.workspace,
            settings.artifacts.max_total_bytes,
            settings.artifacts.max_bytes,
            owner=artifacts_owner,
        )
        # Commands running in these sessions, whoever started them (any connection of a tenant).
        self.executions: set[Execution] = set()
        # What no output shows: the server's secret variables, values hosts register.
        secrets = settings.secrets
        self.secrets = SecretBook(
            secrets.env, secrets.patterns, secrets.extra_patterns, server_env=os.environ
        )
        self.jobs = JobTable(
            shells,
            JobLimits(
                per_session=settings.jobs.max_per_session,
                total=settings.jobs.max_total,
                ring_bytes=settings.jobs.ring_bytes,
            ),
            self.backend,
            self.artifacts,
            lambda: self.pool.grace_seconds,
        )
        # Only the process's own runtime may collect every orphan's status.
        self._reap_orphans = reap_orphans
        # The proxies of sessions whose sandbox has a network allowlist.
        self.gateways = Gateways(shells)

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        options: Options,
        runtime_dir: Path,
        containment: Containment,
        *,
        reap_orphans: bool = False,
    ) -> AsyncIterator[Runtime]:
        """A runtime whose shells all die when the block ends, however it ends."""
        async with anyio.create_task_group() as shells:
            runtime = cls(options, runtime_dir, containment, shells, reap_orphans=reap_orphans)
            shells.start_soon(runtime.housekeeping)
            shells.start_soon(runtime.prepare_snapshot)
            try:
                yield runtime
            finally:
                await runtime.wind_down()
                shells.cancel_scope.cancel()

    @property
    def workspace(self) -> str:
        return str(self.options.workspace)

    def sandbox_policy(
        self,
        mode: SandboxMode,
        opened_in: str,
        network: tuple[NetworkMode, Egress] | None = None,
    ) -> Policy | None:
        """A session's policy; `network`: its own (narrower) network, else the
        server's. An allowlist's gateway is not started here (`new_session`)."""
        configured = self.settings.sandbox
        net_mode, egress = network or (configured.net.mode, configured.net.egress)
        policy = mounts.policy(
            mode,
            network=net_mode == "host",
            workspace=self.workspace,
            writable_roots=configured.writable_roots,
            protected_paths=configured.protected_paths,
            git_commits=configured.git_commits,
            opened_in=opened_in,
        )
        if policy is None or not policy.confined or net_mode != "allowlist":
            return policy
        return msgspec.structs.replace(policy, egress=egress)

    def new_session(
        self,
        session_id: str,
        cwd: str,
        env: dict[str, str] | None,
        sandbox_mode: SandboxMode = "off",
        owner: str | None = None,
        network: tuple[NetworkMode, Egress] | None = None,
    ) -> Session:
        session_env = envmod.without_guards(env)
        config = ShellConfig(
            shell=self.options.shell,
            prefix=self.settings.prefix,
            snapshot=None,
            env=tuple(sorted(session_env.items())),
            sandbox=self._with_gateway(session_id, self.sandbox_policy(sandbox_mode, cwd, network)),
        )
        full_env = self._shell_env(session_env)
        session = Session(
            session_id, config, full_env, cwd, self.workspace, opened_in=cwd, owner=owner
        )
        return self.sessions.add(session)

    def _with_gateway(self, session_id: str, policy: Policy | None) -> Policy | None:
        """The policy, its allowlist served by the session's own gateway."""
        if policy is None or policy.egress is None:
            self.gateways.close(session_id)
            return policy
        return msgspec.structs.replace(policy, egress=self.gateways.open(session_id, policy.egress))

    def narrow_network(self, asked: NetworkRequest) -> tuple[NetworkMode, Egress]:
        """A new session's network from what it asked for; InvalidArgument when that
        would widen the server's."""
        net = self.settings.sandbox.net
        lists = None
        if asked.allow is not None or asked.deny is not None or asked.ports is not None:
            lists = Egress(
                allow=tuple(net.allow if asked.allow is None else asked.allow),
                deny=tuple(asked.deny or ()),
                ports=tuple(net.ports if asked.ports is None else asked.ports),
            )
            bad = [(e, why) for e in (*lists.allow, *lists.deny) if (why := pattern_error(e))]
            if bad:
                raise InvalidArgument(
                    messages.NETWORK_BAD_ENTRY.format(
                        field="network", entry=bad[0][0], why=bad[0][1]
                    )
                )
        narrowed = rules.narrow(net.mode, net.egress, asked.mode, lists)
        if isinstance(narrowed, str):
            raise InvalidArgument(narrowed)
        return narrowed

    def network_view(
        self, session: Session
    ) -> tuple[NetworkPolicy, list[NetworkConnection] | None]:
        """What the session's commands may reach, and its last connections."""
        policy = session.config.sandbox
        if policy is None or not policy.confined or policy.network:
            return rules.view("host", None), None
        if policy.egress is None:
            return rules.view("off", None), None
        gateway = self.gateways.get(session.id)
        recent = [] if gateway is None else gateway.connections()
        return rules.view("allowlist", policy.egress), recent

    def network_mark(self, session_id: str) -> int:
        """Where the session's proxy's record stands now (for `refused_hosts`)."""
        gateway = self.gateways.get(session_id)
        return 0 if gateway is None else gateway.mark()

    def refused_hosts(self, session_id: str, mark: int) -> list[str]:
        """The hosts the session's proxy refused since `mark`, each once."""
        gateway = self.gateways.get(session_id)
        return [] if gateway is None else gateway.refused_since(mark)

    def tighten(self, session: Session, mode: SandboxMode) -> None:
        """Put the session under `mode`, stricter than its own: its shell is closed
        with all it started, so the next command's starts confined, and the next
        result says so. The caller makes sure no command of the session runs."""
        policy = self.sandbox_policy(mode, session.opened_in)
        current = session.config.sandbox
        if policy is not None and current is not None and current.confined:
            # The session's network stays as it is: tightening is of the filesystem.
            policy = msgspec.structs.replace(policy, network=current.network, egress=current.egress)
        elif policy is not None:
            policy = self._with_gateway(session.id, policy)
        session.config = msgspec.structs.replace(session.config, sandbox=policy)
        shell = session.drop_shell()
        if shell is not None:
            session.tightened_to = mode
            self.pool.retire(shell)

    def session_env(self, env: dict[str, str] | None) -> dict[str, str]:
        """The environment a new session's shell gets for the caller's `env`."""
        return self._shell_env(envmod.without_guards(env))

    def _shell_env(self, session_env: dict[str, str]) -> dict[str, str]:
        inherited = envmod.excluding(os.environ, self.settings.env_exclude)
        return envmod.build(inherited, self.settings.env_vars, session_env)

    async def prepare_snapshot(self) -> None:
        """Capture the user's rc from startup, for the shells of sessions with no
        environment of their own, so the first command rarely waits on ~/.bashrc."""
        policy = self.sandbox_policy(self.settings.sandbox.mode, self.workspace)
        config = ShellConfig(
            shell=self.options.shell, prefix=None, snapshot=None, env=(), sandbox=policy
        )
        await self.backend.configure(config, self._shell_env({}))

    def session(
        self, session_id: str, sandbox_mode: SandboxMode = "off", owner: str | None = None
    ) -> Session:
        """The named session, created in the workspace on first use (in that sandbox,
        recording `owner` as its opener)."""
        session = self.sessions.get(session_id)
        if session is None:
            session = self.new_session(session_id, self.workspace, None, sandbox_mode, owner)
        return session

    async def close_session(self, session: Session) -> None:
        self.gateways.close(session.id)
        await self.jobs.close_session(session.id)
        if session.shell is not None:
            await self.pool.close(session.shell, self.pool.grace_seconds)
            session.shell = None

    async def housekeeping(self) -> None:
        """Once a second: reap re-parented orphans, record what shells started
        (where that is tracked by ancestry), close idle shells."""
        while True:
            await anyio.sleep(HOUSEKEEPING_INTERVAL_SECONDS)
            try:
                if self._reap_orphans:
                    procs.reap_orphans(self.pool.pids() | self.containment.spare)
                self.pool.note_members()
                await self.pool.evict_idle()
            except Exception:
                # A bug here must not end the server; the next round tries again.
                _log.exception("housekeeping failed")

    async def wind_down(self) -> None:
        """Kill every shell and everything they started (idempotent)."""
        with anyio.CancelScope(shield=True):
            self.gateways.close_all()
            await self.backend.wind_down()
            self.pool.shorten_grace(SHUTDOWN_GRACE_SECONDS)
            await self.jobs.wind_down()
            await self.pool.close_all()
            for session in self.sessions.all():
                session.shell = None
            await self.containment.kill_everything()
