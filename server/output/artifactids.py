"""Artifact ids that never repeat within a workspace.

Numbering from the highest file on disk is not enough: once the total cap
has deleted every artifact of a workspace, the next server would start at 1
again and an old `artifact://1` would silently name another output. So each
workspace directory keeps the next id in a small file, read and advanced
under an exclusive `flock` (servers may share a workspace), and the file is
created with O_EXCL, which also steps over ids taken by anything that did
not use the counter. The counter is advanced before its id's file exists,
so a crash between the two loses an id, never repeats one.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from bashrpc.server.output.artifactroot import SUFFIX

# Not an artifact name (`artifactroot.ARTIFACT_NAME`), so scans and eviction never see it.
COUNTER_NAME = "next-id"
# Ids found taken in a row before giving up (a directory full of strangers' files).
MAX_TAKEN_IN_A_ROW = 1000
_COUNTER_READ_BYTES = 32
_PRIVATE_MODE = 0o600


class IdsExhausted(Exception):
    """Every id tried was taken."""


def create(directory: Path, at_least: int) -> tuple[int, int]:
    """(id, fd) of a new, empty artifact file, opened for writing: the counter's
    next id, or `at_least` when that is higher. The lock is held for a few
    syscalls, so a server waiting on another's waits microseconds.

    Raises OSError when the directory or the counter is unusable."""
    # O_NONBLOCK: a FIFO planted under the counter's name must not hang the server.
    counter = os.open(
        directory / COUNTER_NAME,
        os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
        _PRIVATE_MODE,
    )
    try:
        fcntl.flock(counter, fcntl.LOCK_EX)
        candidate = max(_stored(counter), at_least)
        for _ in range(MAX_TAKEN_IN_A_ROW):
            _store(counter, candidate + 1)
            try:
                fd = os.open(
                    directory / f"{candidate}{SUFFIX}",
                    os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                    _PRIVATE_MODE,
                )
            except FileExistsError:
                candidate += 1
                continue
            return candidate, fd
        raise IdsExhausted
    finally:
        # Closing the file releases the lock.
        os.close(counter)


def _stored(counter: int) -> int:
    text = os.pread(counter, _COUNTER_READ_BYTES, 0).strip()
    return int(text) if text.isdigit() else 0


def _store(counter: int, next_id: int) -> None:
    data = f"{next_id}\n".encode()
    os.pwrite(counter, data, 0)
    os.ftruncate(counter, len(data))
