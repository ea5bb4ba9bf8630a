"""Owners and their runtimes: the sessions a daemon keeps between connections.

A tenant is one owner's runtime (sessions, shells, artifacts), in a cgroup of
its own nested in the daemon's. The owner is the `clientId` a connection
gives in `initialize`, or, without one, the connection itself; a Streamable
HTTP request outside any session (2026-07-28 has none) is its principal's. Its artifacts
are its own too: a directory beside the workspace's, named for its key (kept
when it ends, as a clientId may come back), or for a connection's own
tenant a random one, removed when the tenant ends. A connection
is a view onto its owner's tenant: it lists and drives that tenant's
sessions only, unless it opts in to a shared scope (`initialize`'s `scope`):
then its tenant is the scope's, shared by every connection naming it,
whatever their owners. When its last connection goes, a tenant of a
`clientId` or a scope lives on for the detach grace (`grace.Grace`), so a
reconnect finds its shells with their variables and directory; a
connection's own tenant has no one to come back and ends at once.

Requests a client may resume (`resumable.Resumables`) are kept per clientId,
also in a scope: ids are each client's own, and only it may attach to them.
What they hold is bounded across all tenants (`[daemon] resumeBudgetBytes`),
and their number per tenant (`maxKeptRequests`). Named tenants are bounded
too (`maxClients`): a new one past the cap ends the one detached longest
ago, and is refused when every one has a connection.

A clientId is a name, not a credential: every connection the daemon admits
(its uid's, or the token holder's) may name any clientId and so take up its
sessions and requests.

Each tenant is kept by one task of the daemon's (`keep`), which winds the
runtime down (every process killed) when the grace runs out or the daemon
stops. The runtime's shells run in the daemon's group for tenants, so a
tenant can be made at once when `initialize` names its owner.
"""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Callable
from pathlib import Path

import anyio
import anyio.abc
import msgspec

from bashrpc.protocol import messages
from bashrpc.server import clock, errors
from bashrpc.server.daemon.grace import Grace
from bashrpc.server.observe.stats import Gauges
from bashrpc.server.output.keptbudget import KeptBudget, RecordCount
from bashrpc.server.pulse import Pulse
from bashrpc.server.runtime.containment.registry import Containment
from bashrpc.server.runtime.instance import Options, Runtime
from bashrpc.server.runtime.local.snapshot import capture_slots
from bashrpc.server.serve import Guard
from bashrpc.server.services.api import Services
from bashrpc.server.services.resumable import Resumables

CLIENT_PREFIX = "client:"
SCOPE_PREFIX = "scope:"
# The tenant of requests outside any session (MCP 2026-07-28 over Streamable
# HTTP): their principal's, so one request's artifacts, tasks and shell are
# there for the next.
PRINCIPAL_PREFIX = "principal:"


def tenant_key(client_id: str | None, scope: str | None) -> str | None:
    """The tenant a connection's `initialize` names: a scope's over its client's;
    None for a connection's own."""
    if scope is not None:
        return SCOPE_PREFIX + scope
    return None if client_id is None else CLIENT_PREFIX + client_id


class Tenant:
    def __init__(
        self,
        key: str,
        runtime: Runtime,
        runtime_dir: Path,
        grace: float,
        budget: KeptBudget | None = None,
        max_kept: int | None = None,
    ) -> None:
        self.key = key
        self.runtime = runtime
        self.runtime_dir = runtime_dir
        self.grace = Grace(grace)
        self._changed = Pulse()
        self.ending = False
        # Each client's requests, for `bash/attach` from its next connection.
        self._resumables: dict[str, Resumables] = {}
        self._budget = KeptBudget() if budget is None else budget
        self._count = RecordCount() if max_kept is None else RecordCount(max_kept)

    @property
    def named(self) -> bool:
        """Named by a clientId, a scope or a principal: it outlives its connections."""
        return self.key.startswith((CLIENT_PREFIX, SCOPE_PREFIX, PRINCIPAL_PREFIX))

    @property
    def replay_bytes(self) -> int:
        """Output held for resumes by every client of this tenant."""
        return sum(r.bytes_held for r in self._resumables.values())

    def resumables(self, client_id: str | None) -> Resumables | None:
        """The client's records here; None for a connection that named no client."""
        if client_id is None:
            return None
        found = self._resumables.get(client_id)
        if found is None:
            found = self._resumables[client_id] = Resumables(self._budget, self._count)
        return found

    def release_all(self) -> None:
        """The tenant is gone: its records no longer count against the budget."""
        for resumables in self._resumables.values():
            for record in list(resumables.records.values()):
                resumables.drop(record)

    def attach(self) -> None:
        self.grace.attach()
        self._poke()

    def detach(self) -> None:
        self.grace.detach(clock.now())
        self._poke()

    def end(self) -> None:
        """End now, whoever is attached (the daemon stops)."""
        self.ending = True
        self._poke()

    def _poke(self) -> None:
        self._changed.fire()

    async def until_gone(self) -> None:
        """Until the grace has run out with no connection back, or `end`."""
        while not self.ending:
            deadline = self.grace.deadline()
            if deadline is None:
                await self._changed.wait()
                continue
            with anyio.move_on_at(deadline):
                await self._changed.wait()
            if self.grace.expired(clock.now()):
                return


class TenantServices(Services):
    """What one connection may ask of its tenant's runtime. Its end aborts the
    commands it started; the shells are the tenant's, and outlive it, unless
    the host says `shutdown`: then the tenant ends with them, but for a shared
    scope's, whose sessions are not this host's alone: they wait for the grace."""

    def __init__(
        self, tenant: Tenant, gauges: Callable[[], Gauges], client_id: str | None = None
    ) -> None:
        super().__init__(tenant.runtime, client_id)
        self._tenant = tenant
        self._gauges = gauges
        self.resumables = tenant.resumables(client_id)

    def gauges(self) -> Gauges:
        """The daemon's, all tenants together: figures are the process's."""
        return self._gauges()

    async def wind_down(self) -> None:
        self.commands.abort()

    async def shut_down(self) -> None:
        if self._tenant.key.startswith(SCOPE_PREFIX):
            return
        await super().shut_down()
        self._tenant.end()


class Tenants:
    def __init__(
        self, options: Options, guard: Guard, shells: anyio.abc.TaskGroup, grace: float
    ) -> None:
        # Its tenants capture the rc no more at once than its one process should.
        self._options = msgspec.structs.replace(options, capture_slots=capture_slots())
        self._guard = guard
        self._shells = shells
        self._grace = grace
        self._names = 0
        self.all: dict[str, Tenant] = {}
        daemon = options.settings.daemon
        self.budget = KeptBudget(daemon.resume_budget_bytes)
        self._max_kept = daemon.max_kept_requests
        self._max_clients = daemon.max_clients

    def get(self, key: str | None) -> Tenant:
        """The tenant of `key` (made if none; see `tenant_key`), or a new one of a
        connection's own."""
        if key is not None and key in self.all:
            return self.all[key]
        if key is not None:
            self._make_room()
        self._names += 1
        name = f"t{self._names}"
        runtime_dir = self._guard.runtime_dir / name
        runtime_dir.mkdir(mode=0o700)
        runtime = Runtime(
            self._options,
            runtime_dir,
            self._containment(name),
            self._shells,
            reap_orphans=False,
            # A connection's own tenant keeps its artifacts where no other one looks.
            artifacts_owner=key or f"connection-{secrets.token_hex(8)}",
        )
        grace = self._grace if key else 0.0
        tenant = Tenant(key or name, runtime, runtime_dir, grace, self.budget, self._max_kept)
        self.all[tenant.key] = tenant
        self._shells.start_soon(self.keep, tenant)
        return tenant

    def _make_room(self) -> None:
        """Below `maxClients` named tenants, ending the one detached longest ago
        if need be; refused (-32602) when every one has a connection."""
        named = [t for t in self.all.values() if t.named and not t.ending]
        if len(named) < self._max_clients:
            return
        detached = [t for t in named if t.grace.detached_at is not None]
        if not detached:
            raise errors.InvalidArgument(
                messages.DAEMON_TOO_MANY_CLIENTS.format(limit=self._max_clients)
            )
        min(detached, key=lambda t: t.grace.detached_at or 0.0).end()

    def _containment(self, name: str) -> Containment:
        """A tenant's own: a cgroup inside the daemon's (killed with it), or
        ancestry tracking reported to the daemon's watchdog."""
        guard = self._guard
        root = None if guard.cgroup_root is None else guard.cgroup_root.nested(name)
        containment = Containment(root, None if root else guard.watchdog.report)
        containment.spare = guard.containment.spare
        return containment

    async def keep(self, tenant: Tenant) -> None:
        runtime = tenant.runtime
        try:
            async with anyio.create_task_group() as chores:
                chores.start_soon(runtime.housekeeping)
                chores.start_soon(runtime.prepare_snapshot)
                await tenant.until_gone()
                chores.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                self.all.pop(tenant.key, None)
                tenant.release_all()
                await runtime.wind_down()
                if not tenant.named:
                    runtime.artifacts.discard()
                shutil.rmtree(tenant.runtime_dir, ignore_errors=True)

    def end_all(self) -> None:
        for tenant in list(self.all.values()):
            tenant.end()
