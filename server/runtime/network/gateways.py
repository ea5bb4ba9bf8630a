"""A runtime's gateways: one per session whose sandbox has an allowlist, in the
runtime's task group, closed with the session (and with the runtime)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio.abc

from bashrpc.server.observe.stats import STATS
from bashrpc.server.runtime.network import resolver as resolvers
from bashrpc.server.runtime.seam.egress import Egress

if TYPE_CHECKING:
    from bashrpc.server.runtime.network.gateway import Gateway
    from bashrpc.server.runtime.network.proxy import Record


class Gateways:
    def __init__(self, group: anyio.abc.TaskGroup) -> None:
        self._group = group
        self._by_session: dict[str, Gateway] = {}

    def open(self, session_id: str, egress: Egress) -> Egress:
        """The session's gateway, started (a new one for a new policy); the policy
        as its sandboxes carry it, naming the gateway."""
        # Here: a server whose sandboxes have no allowlist never loads the proxy.
        from bashrpc.server.runtime.network.gateway import Gateway

        self.close(session_id)
        gateway = Gateway(egress, resolvers.current(), _count)
        self._by_session[session_id] = gateway
        self._group.start_soon(gateway.run)
        return gateway.egress

    def get(self, session_id: str) -> Gateway | None:
        return self._by_session.get(session_id)

    def close(self, session_id: str) -> None:
        gateway = self._by_session.pop(session_id, None)
        if gateway is not None:
            gateway.close()

    def close_all(self) -> None:
        for session_id in list(self._by_session):
            self.close(session_id)


def _count(record: Record) -> None:
    STATS.network_connection(
        allowed=record.allowed, sent=record.bytes_out, received=record.bytes_in
    )
