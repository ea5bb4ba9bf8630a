"""Reading a git config file's entries, as git itself reads them, for the git
guard: which paths in the workspace its commands and hooks directory name.

git parses its own syntax (quoting, continuation lines, case rules), so the
guard never misreads a key; an unchanged file is parsed once. The file is
opened here (`beneath`: a regular file, never blocking) and handed to git as
its stdin: a planted FIFO or device is never opened by anyone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence

from bashrpc.server.runtime.sandbox import beneath
from bashrpc.server.runtime.sandbox.beneath import Oversized

# How long git may take to list one config file.
LIST_SECONDS = 2.0
# Larger than any config a person writes: a bigger one is not read, and is unknown.
CONFIG_BYTES = 16 * 1024 * 1024
# How many files' entries are kept (the oldest go first).
CACHED = 256
_LISTED: dict[tuple[str, int, int, int], tuple[tuple[str, str], ...]] = {}


class Unreadable(Exception):
    """A config git would read whole that the guard cannot: what it names is unknown."""


def entries(path: str, roots: Sequence[str] = ()) -> tuple[tuple[str, str], ...]:
    """(key, value) pairs of the config file at `path`, its includes not followed;
    none when it is missing, git is not there to read it, or it is no regular file
    (git reads nothing from a FIFO or a device). A link is followed, as git does.
    Raises Unreadable for a file too large or too slow to list."""
    try:
        fd = beneath.open_followed(path, roots, CONFIG_BYTES)
    except Oversized as exc:
        raise Unreadable(str(exc)) from exc
    if fd is None:
        return ()
    try:
        info = os.fstat(fd)
        return _listed(path, info.st_mtime_ns, info.st_size, info.st_ino, fd)
    finally:
        os.close(fd)


def _listed(
    path: str, mtime_ns: int, size: int, inode: int, fd: int
) -> tuple[tuple[str, str], ...]:
    """The file's entries, listed once while it is unchanged."""
    key = (path, mtime_ns, size, inode)
    found = _LISTED.get(key)
    if found is None:
        found = _LISTED[key] = _list(fd)
        if len(_LISTED) > CACHED:
            _LISTED.pop(next(iter(_LISTED)))
    return found


def _list(fd: int) -> tuple[tuple[str, str], ...]:
    git = shutil.which("git")
    if git is None:
        return ()
    try:
        done = subprocess.run(
            [git, "config", "--no-includes", "--file", "-", "--null", "--list"],
            stdin=fd,
            # Not the server's directory: git would find the workspace's repository
            # there, and read its planted HEAD or commondir.
            cwd="/",
            capture_output=True,
            timeout=LIST_SECONDS,
            env={"PATH": os.environ.get("PATH", ""), "GIT_CONFIG_NOSYSTEM": "1"},
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise Unreadable(f"git took over {LIST_SECONDS:g} s to read it") from exc
    except OSError:
        return ()
    if done.returncode != 0:
        return ()
    pairs = []
    for item in done.stdout.decode(errors="surrogateescape").split("\0"):
        if item:
            key, _, value = item.partition("\n")
            pairs.append((key, value))
    return tuple(pairs)
