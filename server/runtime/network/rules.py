"""What an allowlist allows (pure): names matched before resolving, addresses
checked after, and a session's narrowing of the server's policy.

A name is matched exactly, or by a `*.` pattern that matches subdomains only:
`*.example.com` matches `a.example.com` and `a.b.example.com`, never
`example.com`, `evilexample.com` or `example.com.evil.net`. Names compare
lowercase with one trailing dot dropped. An IP literal is reached only when
that literal is listed, and a name that resolves to a loopback, link-local
(cloud metadata included), private, shared, multicast, unspecified or other
non-global address is refused unless that literal address is listed: the
host's own services stay out of reach whatever a name's records say.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from typing import Literal

import msgspec

from bashrpc.protocol import messages
from bashrpc.protocol.methods import NetworkMode, NetworkPolicy
from bashrpc.server.runtime.seam.egress import Egress

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# From the narrowest to the widest.
MODES: tuple[NetworkMode, ...] = ("off", "allowlist", "host")
WILDCARD = "*."
MAX_NAME = 253
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?\Z")

Reason = Literal[
    "allowed",
    "denied",
    "not-allowed",
    "port",
    "address",
    "invalid",
    # Decided by the proxy, past the rules: no address, no connection, a TLS
    # server name or a Host header that names another host, a malformed request.
    "unresolved",
    "unreachable",
    "sni",
    "smuggled",
    "malformed",
]


class Decision(msgspec.Struct, frozen=True):
    """Whether a connection may go out, and why: the rule that decided
    (`deny`'s entry, or the allow entry that matched), if one did."""

    allowed: bool
    reason: Reason
    rule: str | None = None


def literal(host: str) -> IpAddress | None:
    """`host` as an IP address, when it is one (IPv6 with or without brackets)."""
    text = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def normalize(host: str) -> str | None:
    """A host name lowercase without its trailing dot, or an IP literal in its
    canonical form; None when it is neither (empty labels, bad characters)."""
    address = literal(host)
    if address is not None:
        return str(address)
    name = host.lower()
    name = name[:-1] if name.endswith(".") else name
    if not name or len(name) > MAX_NAME or not name.isascii():
        return None
    if not all(_LABEL.match(label) for label in name.split(".")):
        return None
    return name


def pattern_error(entry: str) -> str | None:
    """Why `entry` is no allow or deny entry (None when it is one)."""
    body = entry[len(WILDCARD) :] if entry.startswith(WILDCARD) else entry
    if "*" in body:
        return messages.NETWORK_PATTERN_WILDCARD
    normal = normalize(body)
    if normal is None:
        return messages.NETWORK_PATTERN_BAD
    if entry.startswith(WILDCARD) and (literal(body) is not None or "." not in normal):
        return messages.NETWORK_PATTERN_SHORT
    return None


def normalize_pattern(entry: str) -> str:
    """An entry as it is matched: lowercase, without a trailing dot."""
    if entry.startswith(WILDCARD):
        return WILDCARD + (normalize(entry[len(WILDCARD) :]) or "")
    return normalize(entry) or entry


def matches(pattern: str, host: str) -> bool:
    """Whether the normalized `host` is matched by the normalized `pattern`."""
    if pattern.startswith(WILDCARD):
        return literal(host) is None and host.endswith(pattern[1:])
    return pattern == host


def _first_match(patterns: Sequence[str], host: str) -> str | None:
    return next((p for p in patterns if matches(normalize_pattern(p), host)), None)


def decide_name(egress: Egress, host: str, port: int) -> Decision:
    """The decision on what a client asked for, before any resolving."""
    name = normalize(host)
    if name is None:
        return Decision(False, "invalid")
    denied = _first_match(egress.deny, name)
    if denied is not None:
        return Decision(False, "denied", denied)
    allowed = _first_match(egress.allow, name)
    if allowed is None:
        return Decision(False, "not-allowed")
    if port not in egress.ports:
        return Decision(False, "port", allowed)
    return Decision(True, "allowed", allowed)


def special(address: IpAddress) -> bool:
    """Loopback, link-local, private, shared, multicast, unspecified, reserved:
    anything that is not a global unicast address."""
    return not address.is_global or address.is_multicast


def decide_address(egress: Egress, address: IpAddress) -> Decision:
    """The decision on an address a name resolved to (or a listed literal)."""
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    address = mapped or address
    if not special(address):
        return Decision(True, "allowed")
    if _first_match(egress.allow, str(address)) is not None:
        return Decision(True, "allowed", str(address))
    return Decision(False, "address", str(address))


def covers(outer: str, inner: str) -> bool:
    """Whether every host `inner` matches is matched by `outer` (both normalized)."""
    if inner.startswith(WILDCARD):
        return outer.startswith(WILDCARD) and (inner == outer or inner.endswith(outer[1:]))
    return matches(outer, inner)


def narrow(
    mode: NetworkMode,
    egress: Egress,
    asked_mode: NetworkMode,
    asked: Egress | None,
) -> tuple[NetworkMode, Egress] | str:
    """A session's policy from the server's and what the session asked for, or
    why it cannot have it: a session may narrow the server's policy, never widen it.

    `asked` None keeps the server's lists; otherwise its `allow` entries must each
    fall within the server's (when the server has an allowlist), its `deny`
    entries are added to the server's, and its ports must be the server's or fewer."""
    if MODES.index(asked_mode) > MODES.index(mode):
        return messages.NETWORK_WIDER_MODE.format(asked=asked_mode, mode=mode)
    if asked_mode != "allowlist" or asked is None:
        return asked_mode, egress
    if mode == "allowlist":
        server = [normalize_pattern(p) for p in egress.allow]
        wider = [p for p in asked.allow if not any(covers(s, normalize_pattern(p)) for s in server)]
        if wider:
            return messages.NETWORK_WIDER_ALLOW.format(entries=", ".join(wider))
        extra_ports = sorted(set(asked.ports) - set(egress.ports))
        if extra_ports:
            return messages.NETWORK_WIDER_PORTS.format(ports=", ".join(map(str, extra_ports)))
    deny = tuple(dict.fromkeys((*egress.deny, *asked.deny)))
    return asked_mode, msgspec.structs.replace(
        egress, allow=asked.allow, deny=deny, ports=asked.ports
    )


def view(mode: NetworkMode, egress: Egress | None) -> NetworkPolicy:
    """A policy as `initialize` and `session/list` show it."""
    if mode != "allowlist" or egress is None:
        return NetworkPolicy(mode=mode)
    return NetworkPolicy(
        mode=mode, allow=list(egress.allow), deny=list(egress.deny), ports=list(egress.ports)
    )
