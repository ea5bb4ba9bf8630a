"""Where the server's runtime directory is made: in memory when the machine offers it.

Every command takes a FIFO from this directory and leaves its status fields and
an unlink there. On a disk's file system each is a journal entry on the
command's path; on a tmpfs, a few microseconds less per command (bench.ab,
`true` p50: 7% less). `TMPDIR`, when set, is the user's choice and wins. Then
`$XDG_RUNTIME_DIR` (the user's own, made for FIFOs and sockets, a tmpfs under
systemd), then `/dev/shm`. A place mounted `noexec` is passed over: the
sandbox runs an execute-only copy of the shell from this directory
(`sandbox/sealed.py`); Docker mounts `/dev/shm` so.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Mapping

SHARED_MEMORY = "/dev/shm"


def base(environ: Mapping[str, str] = os.environ, shared: str = SHARED_MEMORY) -> str:
    """The directory the runtime directory is made in."""
    if environ.get("TMPDIR"):
        return tempfile.gettempdir()
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if runtime and _own_private(runtime) and _usable(runtime):
        return runtime
    if _sticky_shared(shared) and _usable(shared):
        return shared
    return tempfile.gettempdir()


def make(environ: Mapping[str, str] = os.environ) -> str:
    """A new private (0700) directory of a random name in `base()`."""
    return tempfile.mkdtemp(prefix="bashrpc-", dir=base(environ))


def _own_private(path: str) -> bool:
    """Ours alone, as the XDG specification requires of it (owned, mode 0700)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and st.st_mode & 0o077 == 0


def _sticky_shared(path: str) -> bool:
    """A shared directory as `/tmp` is: sticky, so no one removes what we make."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and bool(st.st_mode & stat.S_ISVTX)


def _usable(path: str) -> bool:
    """Writable by us, and mounted so that a program in it may run."""
    try:
        flags = os.statvfs(path).f_flag
    except OSError:
        return False
    return not flags & (os.ST_NOEXEC | os.ST_RDONLY) and os.access(path, os.W_OK | os.X_OK)
