"""The gitlinks (submodule entries) of a git index, read from the file itself.

The host's `git status` enters every gitlink whose checkout has a `.git`, and
runs that repository's `core.fsmonitor`: the git guard must know them all, and
`.gitmodules` (the workspace's, anyone's to write) need not list them. Read
here, not through `git ls-files`, which would itself read the repository's
config and could run its fsmonitor.

Formats 2, 3 and 4 (prefix-compressed paths), and a split index's shared part.
"""

from __future__ import annotations

import math
import mmap
import os
import struct
import time
from collections.abc import Sequence

from bashrpc.server.runtime.sandbox import beneath
from bashrpc.server.runtime.sandbox.beneath import Oversized

SIGNATURE = b"DIRC"
VERSIONS = (2, 3, 4)
GITLINK_MODE = 0o160000
MODE_TYPE_MASK = 0o170000
# ctime, mtime (seconds, nanoseconds each), dev, ino, mode, uid, gid, size.
STAT_BYTES = 40
MODE_OFFSET = 24
NAME_LENGTH_MASK = 0x0FFF
EXTENDED_FLAG = 0x4000
# A split index names its shared part (`sharedindex.<hex>`) in this extension.
LINK_EXTENSION = b"link"
HEADER = struct.Struct(">4sII")
SHA1_BYTES = 20
SHA256_BYTES = 32
# Flags and the shortest name with its end: no entry is smaller than its stat,
# hash and these.
MIN_NAME_BYTES = 4
# How many entries are read between looks at the deadline.
DEADLINE_EVERY = 4096
# Larger than any index git writes for a checkout a person works in.
INDEX_BYTES = 2 * 1024 * 1024 * 1024
# How many indexes' gitlinks are kept (the oldest go first).
CACHED = 64
_READ: dict[tuple[str, int, int, int, int], tuple[str, ...]] = {}


class IndexUnreadable(Exception):
    """The index is there but not one this reader knows: its gitlinks are unknown."""


def gitlinks(
    path: str,
    hash_bytes: int = SHA1_BYTES,
    roots: Sequence[str] = (),
    deadline: float = math.inf,
) -> tuple[str, ...]:
    """The gitlink paths of the index at `path` (none when there is no index, or
    it is no regular file: git reads none from a FIFO or a device); an unchanged
    index (a monorepo's runs to many megabytes) is read once, mapped, not copied.
    A link is followed, as git does. Not read whole by `deadline` (monotonic):
    IndexUnreadable."""
    try:
        fd = beneath.open_followed(path, roots, INDEX_BYTES)
    except Oversized as exc:
        raise IndexUnreadable(str(exc)) from exc
    if fd is None:
        return ()
    try:
        info = os.fstat(fd)
        key = (path, hash_bytes, info.st_mtime_ns, info.st_size, info.st_ino)
        found = _READ.get(key)
        if found is None:
            found = _READ[key] = _read(fd, info.st_size, path, hash_bytes, roots, deadline)
            if len(_READ) > CACHED:
                _READ.pop(next(iter(_READ)))
        return found
    finally:
        os.close(fd)


def _read(
    fd: int, size: int, path: str, hash_bytes: int, roots: Sequence[str], deadline: float
) -> tuple[str, ...]:
    if size < HEADER.size:
        return ()  # git reads no entry from it either
    try:
        with mmap.mmap(fd, size, prot=mmap.PROT_READ) as data:
            found, shared = _parse(data, hash_bytes, deadline)
    except OSError as exc:
        raise IndexUnreadable(str(exc)) from exc
    if shared is not None:
        name = os.path.join(os.path.dirname(path), f"sharedindex.{shared}")
        found += gitlinks(name, hash_bytes, roots, deadline)
    return tuple(dict.fromkeys(found))


def _parse(
    data: mmap.mmap, hash_bytes: int, deadline: float = math.inf
) -> tuple[tuple[str, ...], str | None]:
    signature, version, count = HEADER.unpack_from(data)
    if signature != SIGNATURE or version not in VERSIONS:
        return (), None  # git refuses it ("bad signature"): it enters no gitlink
    if count * (STAT_BYTES + hash_bytes + MIN_NAME_BYTES) > len(data):
        raise IndexUnreadable("truncated")
    offset = HEADER.size
    previous = b""
    found: list[str] = []
    try:
        for entry in range(count):
            if entry % DEADLINE_EVERY == 0 and time.monotonic() > deadline:
                raise IndexUnreadable("not read by the scan's deadline")
            start = offset
            (mode,) = struct.unpack_from(">I", data, offset + MODE_OFFSET)
            offset += STAT_BYTES + hash_bytes
            (flags,) = struct.unpack_from(">H", data, offset)
            offset += 2
            if flags & EXTENDED_FLAG and version >= 3:
                offset += 2
            if version == 4:
                strip, offset = _varint(data, offset)
                end = _nul(data, offset)
                name = previous[: len(previous) - strip] + data[offset:end]
                offset = end + 1
            else:
                end = _nul(data, offset)
                name = data[offset:end]
                # Padded with 1 to 8 NULs to a multiple of 8 bytes.
                offset = start + ((end - start) // 8 + 1) * 8
            previous = name
            if mode & MODE_TYPE_MASK == GITLINK_MODE:
                found.append(os.fsdecode(name))
        shared = None
        while offset + 8 <= len(data) - hash_bytes:
            signature, size = struct.unpack_from(">4sI", data, offset)
            if signature == LINK_EXTENSION:
                named = data[offset + 8 : offset + 8 + hash_bytes]
                # All zeros: no shared part.
                shared = named.hex() if named.strip(b"\0") else None
            offset += 8 + size
    except (struct.error, ValueError, IndexError) as exc:
        raise IndexUnreadable("truncated") from exc
    return tuple(found), shared


def _nul(data: mmap.mmap, offset: int) -> int:
    end = data.find(b"\0", offset)
    if end < 0:
        raise ValueError("no end to a path")
    return end


def _varint(data: mmap.mmap, offset: int) -> tuple[int, int]:
    """git's offset encoding (varint.c): each continuation adds one before shifting."""
    byte = data[offset]
    offset += 1
    value = byte & 0x7F
    while byte & 0x80:
        byte = data[offset]
        offset += 1
        value = ((value + 1) << 7) | (byte & 0x7F)
    return value, offset
