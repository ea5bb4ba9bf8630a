"""Who is at the other end of a loopback TCP connection, in the kernel's words.

TCP carries no credentials, but on this machine the peer's socket is a row of
`/proc/net/tcp` (or `tcp6`): the row whose local address is the peer's and
whose remote address is ours holds the uid that made the socket and its inode
(`ss -e` shows the same). The inode names the process holding it (a
`socket:[INODE]` link in its fd table), whose pid namespace tells whether a
sandbox made it: a sandboxed command of our uid is not our uid's client.
"""

from __future__ import annotations

import collections
import ipaddress
import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import msgspec

from bashrpc.server.daemon import socketpath

TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
UID_COLUMN = 7
INODE_COLUMN = 9
# The process scan stops here: a machine with more is asked no further.
MAX_PROCESSES = 65536
REMEMBERED_HOLDERS = 8

Address = tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]


class SocketOwner(msgspec.Struct, frozen=True):
    uid: int
    inode: int


def _unmapped(
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def address(host: str, port: int) -> Address:
    return _unmapped(ipaddress.ip_address(host.split("%", 1)[0])), port


def decode_address(text: str) -> Address:
    """`0100007F:1F90` (IPv4) or 32 hex digits (IPv6): 32-bit words in the
    kernel's byte order (little-endian here), then the port in hex."""
    host, _, port = text.partition(":")
    raw = bytes.fromhex(host)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    ip = ipaddress.IPv4Address(words) if len(words) == 4 else ipaddress.IPv6Address(words)
    return _unmapped(ip), int(port, 16)


def find_owner(table: str, peer: Address, ours: Address) -> SocketOwner | None:
    """The uid and inode of the row for the peer's end of the connection."""
    for line in table.splitlines()[1:]:
        fields = line.split()
        if len(fields) <= INODE_COLUMN:
            continue
        try:
            if decode_address(fields[1]) == peer and decode_address(fields[2]) == ours:
                return SocketOwner(int(fields[UID_COLUMN]), int(fields[INODE_COLUMN]))
        except ValueError:
            continue
    return None


def owner(peer: Address, ours: Address) -> SocketOwner | None:
    """The peer's socket's owner, from both tables (blocking: run off the loop)."""
    for path in TABLES:
        try:
            table = Path(path).read_text()
        except OSError:
            continue
        found = find_owner(table, peer, ours)
        if found is not None:
            return found
    return None


class Holders:
    """Which process holds a socket: the processes found last are asked first (a
    client reconnects, over and over), then every process in /proc."""

    def __init__(self, remembered: int = REMEMBERED_HOLDERS) -> None:
        self._recent: collections.deque[str] = collections.deque(maxlen=remembered)

    def pid(self, inode: int) -> int | None:
        """(blocking: run off the loop)"""
        target = f"socket:[{inode}]"
        recent = list(self._recent)
        for count, name in enumerate(itertools.chain(recent, _pids())):
            if count >= MAX_PROCESSES:
                return None
            if _holds(name, target):
                if name in self._recent:
                    self._recent.remove(name)
                self._recent.append(name)
                return int(name)
        return None


def _pids() -> Iterator[str]:
    return (entry.name for entry in os.scandir("/proc") if entry.name.isdigit())


def _holds(pid: str, target: str) -> bool:
    try:
        fds = os.scandir(f"/proc/{pid}/fd")
    except OSError:
        return False
    with fds:
        for fd in fds:
            try:
                if os.readlink(fd.path) == target:
                    return True
            except OSError:
                continue
    return False


HOLDERS = Holders()


def own_unsandboxed(peer: Address, ours: Address) -> bool:
    """Whether the peer runs under our uid, outside every sandbox."""
    found = owner(peer, ours)
    if found is None or found.uid != os.getuid():
        return False
    pid = HOLDERS.pid(found.inode)
    if pid is None:
        return False
    depth = socketpath.namespace_depth("/proc/self/status")
    return socketpath.namespace_depth(f"/proc/{pid}/status") == depth
