"""How the proxy turns a name into addresses, and an address into where it
dials: the host's resolver, or a fixed mapping that only code can install (the
tests present servers on loopback under allowed names and global addresses,
dialled on loopback). No setting, flag, variable or wire field reaches it, so
nothing a command or a client sends can change what a name resolves to."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Mapping
from typing import Protocol

import anyio

from bashrpc.server.runtime.network.rules import IpAddress


class Resolver(Protocol):
    async def resolve(self, name: str, port: int) -> list[IpAddress]:
        """The name's addresses (empty when it has none); raises OSError on failure."""
        ...

    def dial(self, address: IpAddress, port: int) -> tuple[str, int]:
        """Where a connection to an allowed (address, port) goes."""
        ...


class SystemResolver:
    """getaddrinfo, as every other program on the host resolves."""

    async def resolve(self, name: str, port: int) -> list[IpAddress]:
        found = await anyio.getaddrinfo(name, port, type=socket.SOCK_STREAM)
        addresses = (ipaddress.ip_address(info[4][0]) for info in found)
        return list(dict.fromkeys(addresses))

    def dial(self, address: IpAddress, port: int) -> tuple[str, int]:
        return str(address), port


class MappedResolver:
    """Names to addresses, fixed; any other name does not resolve."""

    def __init__(
        self,
        mapping: Mapping[str, str | list[str]],
        routes: Mapping[tuple[str, int], tuple[str, int]] | None = None,
    ) -> None:
        self.mapping = {
            name.lower().rstrip("."): [ipaddress.ip_address(a) for a in _listed(value)]
            for name, value in mapping.items()
        }
        self.routes = {
            (str(ipaddress.ip_address(a)), p): to for (a, p), to in (routes or {}).items()
        }

    async def resolve(self, name: str, port: int) -> list[IpAddress]:
        return list(self.mapping.get(name, []))

    def dial(self, address: IpAddress, port: int) -> tuple[str, int]:
        return self.routes.get((str(address), port), (str(address), port))


def _listed(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else value


_installed: Resolver | None = None


def current() -> Resolver:
    """The resolver gateways made from now on use: the host's, unless code (a
    test's) installed another."""
    return _installed or SystemResolver()


def install(resolver: Resolver | None) -> None:
    """Use `resolver` for gateways made from now on (None: the host's again)."""
    global _installed
    _installed = resolver
