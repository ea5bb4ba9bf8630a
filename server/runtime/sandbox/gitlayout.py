"""Where git keeps what it reads: the pointers of its files (`.git` files,
`commondir`, `gitdir`), a submodule's worktree, and the host's own configs.

Every file is read through `beneath`: a command may have planted any of them."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence

from bashrpc.server.runtime.sandbox import beneath, gitconfig
from bashrpc.server.runtime.sandbox.beneath import Hostile

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


def common_of(git_dir: str, roots: Sequence[str]) -> tuple[str | None, str | None]:
    """(the directory a git dir's `commondir` names, as walked: the git dir itself
    for the placeholder commits make, None when there is none to walk to; what it
    names, as written, None when it names nothing)."""
    try:
        pointer = read_pointer(os.path.join(git_dir, "commondir"), roots)
    except Hostile:
        return None, None  # git takes no common dir from a FIFO or a device either
    if pointer is None:
        return None, None
    return beneath.directory(pointer, roots, base=git_dir), pointer


def worktree_of(git_dir: str, own: bool, roots: Sequence[str]) -> str | None:
    """Where a nested git dir's worktree is: a submodule's `core.worktree`, a linked
    worktree's `gitdir` file's directory."""
    if own:
        try:
            config = gitconfig.entries(os.path.join(git_dir, "config"), roots)
        except gitconfig.Unreadable:
            return None
        found = dict(config).get("core.worktree")
    else:
        try:
            pointer = read_pointer(os.path.join(git_dir, "gitdir"), roots)
        except Hostile:
            return None
        found = None if pointer is None else os.path.dirname(pointer)
    return None if found is None else os.path.normpath(os.path.join(git_dir, found))


def checkout_link(git_dir: str, worktree: str | None, roots: Sequence[str]) -> str | None:
    """A submodule's or linked worktree's `.git` file, when it names `git_dir`."""
    if worktree is None:
        return None
    dot = os.path.join(worktree, DOT_GIT)
    try:
        target = read_pointer(dot, roots, GITDIR_PREFIX) if file_type(dot) == stat.S_IFREG else None
    except Hostile:
        return None
    if target is None or beneath.directory(target, roots, base=worktree) != git_dir:
        return None
    return dot


def links_back(git_dir: str, dot: str, roots: Sequence[str]) -> bool:
    """Whether the host's git made `git_dir` for the checkout whose `.git` file is
    `dot`: a linked worktree's `gitdir` file names it, or a submodule's (or a
    separate git dir's) `core.worktree` names its directory."""
    checkout = os.path.realpath(os.path.dirname(dot))
    for own in (False, True):
        worktree = worktree_of(git_dir, own, roots)
        if worktree is not None and os.path.realpath(worktree) == checkout:
            return True
    return False


def is_git_dir(path: str) -> bool:
    """Whether `path` is a git dir as git tells one: a HEAD file, and objects and
    refs directories or a `commondir` naming where they are."""
    kinds = {name: file_type(os.path.join(path, name)) for name in _GIT_DIR_NAMES}
    if kinds["HEAD"] != stat.S_IFREG:
        return False
    dirs = kinds["objects"] == kinds["refs"] == stat.S_IFDIR
    return dirs or kinds["commondir"] == stat.S_IFREG


_GIT_DIR_NAMES = ("HEAD", "objects", "refs", "commondir")


def file_type(path: str) -> int | None:
    try:
        return stat.S_IFMT(os.lstat(path).st_mode)
    except (OSError, ValueError):
        return None


def read_pointer(path: str, roots: Sequence[str], prefix: str = "") -> str | None:
    """The path a `.git` file (`gitdir: X`) or a `commondir` names, if it is one;
    raises Hostile for what is not a regular file of a line's size."""
    data = beneath.read(path, roots, POINTER_BYTES)
    if data is None or b"\0" in data:
        return None
    text = data.decode(errors="replace").strip()
    if not text.startswith(prefix):
        return None
    return text[len(prefix) :].strip() or None
