"""The network a confined command may reach through the session's proxy, as the
value a policy carries (what it means is `runtime/network/rules.py`'s)."""

from __future__ import annotations

import msgspec

# The ports a name may be reached on when the settings name none.
DEFAULT_PORTS = (80, 443)
# Connections one session's commands may hold open through the proxy at once.
DEFAULT_MAX_CONNECTIONS = 64
# Seconds a connection may pass no byte either way before the proxy closes it.
DEFAULT_IDLE_SECONDS = 300.0


class Egress(msgspec.Struct, frozen=True):
    """An allowlist: names (exact, or `*.` for subdomains only) and literal
    addresses a command may reach, on `ports`; `deny` wins over `allow`."""

    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    ports: tuple[int, ...] = DEFAULT_PORTS
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    idle_seconds: float = DEFAULT_IDLE_SECONDS
    # The gateway (the session's proxy) that serves this policy's sandboxes: a
    # key the runtime registers, never a setting.
    gateway: str = ""
