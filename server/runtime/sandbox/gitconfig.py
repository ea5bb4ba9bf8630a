"""Reading a git config file's entries, as git itself reads them, for the git
guard: which paths in the workspace its commands and hooks directory name.

git parses its own syntax (quoting, continuation lines, case rules), so the
guard never misreads a key; an unchanged file is parsed once.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess

# How long git may take to list one config file.
LIST_SECONDS = 5.0


def entries(path: str) -> tuple[tuple[str, str], ...]:
    """(key, value) pairs of the config file at `path`, its includes not followed;
    none when it is missing or git is not there to read it."""
    try:
        info = os.stat(path)
    except OSError:
        return ()
    return _listed(path, info.st_mtime_ns, info.st_size, info.st_ino)


@functools.lru_cache(maxsize=256)
def _listed(path: str, mtime_ns: int, size: int, inode: int) -> tuple[tuple[str, str], ...]:
    git = shutil.which("git")
    if git is None:
        return ()
    try:
        done = subprocess.run(
            [git, "config", "--file", path, "--null", "--list"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=LIST_SECONDS,
            env={"PATH": os.environ.get("PATH", ""), "GIT_CONFIG_NOSYSTEM": "1"},
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ()
    if done.returncode != 0:
        return ()
    pairs = []
    for item in done.stdout.decode(errors="surrogateescape").split("\0"):
        if item:
            key, _, value = item.partition("\n")
            pairs.append((key, value))
    return tuple(pairs)
