"""Whether some processes listen on a TCP port, read from /proc.

A readiness wait asks whether the job's own processes listen on a port, not
whether anything does: another program's listener must not make the job
ready. A socket is theirs when one of them holds it (`/proc/PID/fd` links to
`socket:[INODE]`), and it listens on the port when the TCP table of its
network namespace (`/proc/PID/net/tcp` and `tcp6`, the kernel's, whatever
namespace a sandbox gave it) lists that inode in state LISTEN with that
local port.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable

_SOCKET = "socket:["
# `st` of a listening socket in /proc/net/tcp.
_LISTEN = "0A"
_TABLES = ("tcp", "tcp6")


def listening(pids: Iterable[int], port: int) -> bool:
    """Whether one of `pids` holds a socket listening on `port`."""
    tables: dict[str, set[str]] = {}
    for pid in pids:
        held = _sockets(pid)
        if not held:
            continue
        namespace = _namespace(pid)
        if namespace not in tables:
            tables[namespace] = _listeners(pid, port)
        if held & tables[namespace]:
            return True
    return False


def _sockets(pid: int) -> set[str]:
    """The inodes of the sockets the process holds."""
    directory = f"/proc/{pid}/fd"
    try:
        names = os.listdir(directory)
    except OSError:
        return set()
    inodes = set()
    for name in names:
        with contextlib.suppress(OSError):
            target = os.readlink(f"{directory}/{name}")
            if target.startswith(_SOCKET):
                inodes.add(target[len(_SOCKET) : -1])
    return inodes


def _namespace(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return f"pid:{pid}"


def _listeners(pid: int, port: int) -> set[str]:
    """The inodes of the sockets listening on `port` in the process's namespace."""
    inodes = set()
    for table in _TABLES:
        try:
            with open(f"/proc/{pid}/net/{table}", encoding="ascii") as rows:
                lines = rows.readlines()[1:]
        except OSError:
            continue
        for line in lines:
            # sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            fields = line.split()
            if len(fields) > 9 and fields[3] == _LISTEN and _port(fields[1]) == port:
                inodes.add(fields[9])
    return inodes


def _port(address: str) -> int:
    """`0100007F:1F90` -> 8080."""
    return int(address.rpartition(":")[2], 16)
