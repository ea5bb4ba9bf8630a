"""A session handed back clean (`session/reset`): every process it started
killed, its shell's state dropped, its directory back where it was opened.

Its environment needs no restoring: what a command exports lives in the
shell, which is gone; the next command's shell starts from the session's
own variables, in `opened_in`. A confined shell's private /tmp is a tmpfs
of its own mount namespace, emptied by the same kill; its entries are
counted first, through /proc/PID/root of a process inside it.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import PurePosixPath

import msgspec

from bashrpc.server.runtime.sandbox.mounts import PRIVATE_TMP
from bashrpc.server.runtime.seam.policy import Policy
from bashrpc.server.runtime.sessions.pool import ShellPool
from bashrpc.server.runtime.sessions.session import Session


class Cleaned(msgspec.Struct, frozen=True):
    processes: int
    tmp_entries: int


def private_tmp_entries(pids: set[int], policy: Policy) -> int:
    """Entries of the private /tmp seen by the first of these processes that lives
    in a mount namespace other than the server's; 0 when none can be read. The
    host's directories bound over it (a root under /tmp) are not counted."""
    bound = {_first_below_tmp(path) for path in (*policy.writable_roots, *policy.shown)}
    ours = _mount_namespace("self")
    for pid in sorted(pids):
        if _mount_namespace(str(pid)) in (None, ours):
            continue  # bwrap's outer process, or gone: it sees the host's /tmp
        with contextlib.suppress(OSError):
            return len(set(os.listdir(f"/proc/{pid}/root{PRIVATE_TMP}")) - bound)
    return 0


def _first_below_tmp(path: str) -> str | None:
    """`/tmp/a/b` -> `a`: the entry of /tmp a bound path hangs from."""
    parts = PurePosixPath(path).relative_to("/").parts
    return parts[1] if len(parts) > 1 and "/" + parts[0] == PRIVATE_TMP else None


def _mount_namespace(pid: str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return None


async def reset(pool: ShellPool, session: Session) -> Cleaned:
    """Kill the session's shell and all it started; the caller aborted its commands."""
    processes = tmp_entries = 0
    shell = session.drop_shell()
    if shell is not None:
        tree = pool.backend.processes(shell)
        processes = len(tree)
        if session.config.sandbox is not None and session.config.sandbox.confined:
            tmp_entries = private_tmp_entries(tree, session.config.sandbox)
        await pool.close(shell, pool.grace_seconds)
    session.cwd = session.opened_in
    # The host asked for the loss: no result need tell it again.
    session.shell_lost = False
    session.tightened_to = None
    return Cleaned(processes=processes, tmp_entries=tmp_entries)
