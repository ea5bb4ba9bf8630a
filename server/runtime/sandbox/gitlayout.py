"""Where git keeps what it reads: the pointers of its files (`.git` files,
`commondir`, `gitdir`), a submodule's worktree, and the host's own configs."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping

from bashrpc.server.runtime.sandbox import gitconfig

DOT_GIT = ".git"
GITDIR_PREFIX = "gitdir:"
# A `.git` file or `commondir` is a line; anything longer is not one.
POINTER_BYTES = 4096
SYSTEM_CONFIG = "/etc/gitconfig"


def host_configs(env: Mapping[str, str], home: str) -> tuple[str, ...]:
    """The system and global config files git reads, as it finds them."""
    found = []
    if not env.get("GIT_CONFIG_NOSYSTEM"):
        found.append(env.get("GIT_CONFIG_SYSTEM") or SYSTEM_CONFIG)
    if env.get("GIT_CONFIG_GLOBAL"):
        found.append(env["GIT_CONFIG_GLOBAL"])
    else:
        xdg = env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
        found += [os.path.join(xdg, "git", "config"), os.path.join(home, ".gitconfig")]
    return tuple(found)


def common_of(git_dir: str) -> str | None:
    """The common dir a git dir's `commondir` names, resolved; None when it names
    none, or the git dir itself (the placeholder commits make)."""
    pointer = read_pointer(os.path.join(git_dir, "commondir"))
    common = None if pointer is None else os.path.realpath(os.path.join(git_dir, pointer))
    return None if common == git_dir else common


def worktree_of(git_dir: str, own: bool) -> str | None:
    """Where a nested git dir's worktree is: a submodule's `core.worktree`, a linked
    worktree's `gitdir` file's directory."""
    if own:
        found = dict(gitconfig.entries(os.path.join(git_dir, "config"))).get("core.worktree")
    else:
        pointer = read_pointer(os.path.join(git_dir, "gitdir"))
        found = None if pointer is None else os.path.dirname(pointer)
    return None if found is None else os.path.normpath(os.path.join(git_dir, found))


def checkout_link(git_dir: str, worktree: str | None) -> str | None:
    """A submodule's or linked worktree's `.git` file, when it names `git_dir`."""
    if worktree is None:
        return None
    dot = os.path.join(worktree, DOT_GIT)
    target = read_pointer(dot, GITDIR_PREFIX) if file_type(dot) == stat.S_IFREG else None
    if target is None or os.path.realpath(os.path.join(worktree, target)) != git_dir:
        return None
    return dot


def file_type(path: str) -> int | None:
    try:
        return stat.S_IFMT(os.lstat(path).st_mode)
    except OSError:
        return None


def read_pointer(path: str, prefix: str = "") -> str | None:
    """The path a `.git` file (`gitdir: X`) or a `commondir` names, if it is one."""
    try:
        with open(path, "rb") as file:
            text = file.read(POINTER_BYTES).decode(errors="replace").strip()
    except OSError:
        return None
    if not text.startswith(prefix):
        return None
    return text[len(prefix) :].strip() or None
