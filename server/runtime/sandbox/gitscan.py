"""Finding the git dirs a sandbox's writable roots reach, and making what the
guard pins (`gitguard.py`, whose rules these are) before the sandbox starts.

Done at each shell's start, since the layout changes: a repository made or a
submodule added after the last start is guarded from the next one.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator, Sequence

import msgspec

from bashrpc.server.runtime.sandbox import gitconfig, gitguard
from bashrpc.server.runtime.sandbox.gitguard import GitDir, Plan

DOT_GIT = ".git"
GITDIR_PREFIX = "gitdir:"
# A `.git` file or `commondir` is a line; anything longer is not one.
POINTER_BYTES = 4096
# Submodule names may hold slashes (`modules/a/b`), and submodules nest
# (`modules/a/modules/b`): how deep a scan goes, and how many it takes.
MAX_DEPTH = 8
MAX_NESTED = 256
# How deep `include.path` chains are followed (git stops at 10).
MAX_INCLUDE_DEPTH = 10
# The config files of a git dir: a linked worktree's has its worktree config alone.
OWN_CONFIGS = ("config", "config.worktree")
LINKED_CONFIGS = ("config.worktree",)
_LOOKED_AT = (*gitguard.PINNED, *gitguard.WRITTEN_DIRS, *gitguard.NESTED)


def prepare(roots: Sequence[str]) -> Plan:
    """The guard's binds for `roots`, with its placeholders made on the host."""
    made = gitguard.plan(scan(roots), roots)
    for path, content in made.placeholders:
        _make(path, content)
    return made


def scan(roots: Sequence[str]) -> list[GitDir]:
    """Each root's git dir (and, for a `.git` file, the common dir it names, first),
    then the submodules' and linked worktrees' git dirs nested in those in a root;
    parents before the dirs nested in them."""
    found: dict[str, GitDir] = {}
    for root in roots:
        for git_dir in _of_root(root):
            known = found.get(git_dir.path)
            if known is not None:
                if git_dir.link is not None and known.link is None:
                    found[git_dir.path] = msgspec.structs.replace(known, link=git_dir.link)
                continue
            found[git_dir.path] = git_dir
            if gitguard.within_any(git_dir.path, roots):
                for nested in _nested(git_dir):
                    found.setdefault(nested.path, nested)
    return list(found.values())


def _of_root(root: str) -> Iterator[GitDir]:
    dot = os.path.join(root, DOT_GIT)
    kind = _kind(dot)
    if kind == stat.S_IFDIR:
        yield _described(os.path.realpath(dot), own=True, worktree=root)
    elif kind == stat.S_IFREG:
        target = _pointer(dot, GITDIR_PREFIX)
        if target is None or not os.path.isdir(target := os.path.join(root, target)):
            return
        target = os.path.realpath(target)
        pointer = _pointer(os.path.join(target, "commondir"))
        common = None if pointer is None else os.path.realpath(os.path.join(target, pointer))
        if common is not None:
            yield _described(common, own=True, worktree=root)
        parent = common if common is not None and gitguard.within_any(target, [common]) else None
        yield _described(target, own=common is None, link=dot, parent=parent, worktree=root)


def _nested(parent: GitDir) -> Iterator[GitDir]:
    """Depth first, parents first; at most MAX_NESTED in all."""
    pending = [parent]
    count = 0
    while pending:
        outer = pending.pop()
        for kind in gitguard.NESTED:
            if kind not in outer.found:
                continue
            for path in _git_dirs_under(os.path.join(outer.path, kind), MAX_DEPTH):
                count += 1
                if count > MAX_NESTED:
                    return
                own = kind == "modules"
                worktree = _worktree(path, own)
                link = _checkout_link(path, worktree)
                git_dir = _described(path, own=own, parent=outer.path, worktree=worktree, link=link)
                yield git_dir
                pending.append(git_dir)


def _git_dirs_under(directory: str, depth: int) -> Iterator[str]:
    """Directories under `directory` holding a HEAD, not descending into them."""
    if depth == 0:
        return
    try:
        entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
    except OSError:
        return
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False):
            continue
        if os.path.lexists(os.path.join(entry.path, "HEAD")):
            yield entry.path
        else:
            yield from _git_dirs_under(entry.path, depth - 1)


def _worktree(git_dir: str, own: bool) -> str | None:
    """Where a nested git dir's worktree is: a submodule's `core.worktree`, a linked
    worktree's `gitdir` file's directory."""
    if own:
        found = dict(gitconfig.entries(os.path.join(git_dir, "config"))).get("core.worktree")
    else:
        pointer = _pointer(os.path.join(git_dir, "gitdir"))
        found = None if pointer is None else os.path.dirname(pointer)
    return None if found is None else os.path.normpath(os.path.join(git_dir, found))


def _checkout_link(git_dir: str, worktree: str | None) -> str | None:
    """A submodule's or linked worktree's `.git` file, when it names `git_dir`."""
    if worktree is None:
        return None
    dot = os.path.join(worktree, DOT_GIT)
    target = _pointer(dot, GITDIR_PREFIX) if _kind(dot) == stat.S_IFREG else None
    if target is None or os.path.realpath(os.path.join(worktree, target)) != git_dir:
        return None
    return dot


def _references(git_dir: str, own: bool, worktree: str | None) -> gitguard.References:
    """What the git dir's config files, and those they include, name (resolved)."""
    home = os.path.expanduser("~")
    pending = [(os.path.join(git_dir, n), 0) for n in (OWN_CONFIGS if own else LINKED_CONFIGS)]
    includes: list[str] = []
    programs: list[str] = []
    hooks: list[str] = []
    while pending:
        config, depth = pending.pop()
        pairs = gitconfig.entries(config)
        found = gitguard.references(
            pairs, config_dir=os.path.dirname(config), worktree=worktree, home=home
        )
        includes += found.includes
        programs += found.programs
        hooks += found.hooks_dirs
        if depth < MAX_INCLUDE_DEPTH:
            pending += [(path, depth + 1) for path in found.includes]
    return gitguard.References(
        includes=tuple(map(os.path.realpath, includes)),
        programs=tuple(os.path.realpath(p) for p in programs if os.path.lexists(p)),
        hooks_dirs=tuple(map(os.path.realpath, hooks)),
    )


def _described(
    path: str,
    *,
    own: bool,
    link: str | None = None,
    parent: str | None = None,
    worktree: str | None = None,
) -> GitDir:
    found: set[str] = set()
    links: list[tuple[str, str]] = []
    for name in _LOOKED_AT:
        entry = os.path.join(path, name)
        kind = _kind(entry)
        if kind == stat.S_IFLNK and name in gitguard.PINNED:
            links.append((name, os.path.realpath(entry)))
        elif kind is not None and kind != stat.S_IFLNK:
            found.add(name)
    named = _references(path, own, worktree)
    return GitDir(
        path,
        own,
        frozenset(found),
        tuple(links),
        link,
        parent,
        referenced=named.programs,
        includes=named.includes,
        hooks_dirs=named.hooks_dirs,
    )


def _kind(path: str) -> int | None:
    try:
        return stat.S_IFMT(os.lstat(path).st_mode)
    except OSError:
        return None


def _pointer(path: str, prefix: str = "") -> str | None:
    """The path a `.git` file (`gitdir: X`) or a `commondir` names, if it is one."""
    try:
        with open(path, "rb") as file:
            text = file.read(POINTER_BYTES).decode(errors="replace").strip()
    except OSError:
        return None
    if not text.startswith(prefix):
        return None
    return text[len(prefix) :].strip() or None


def _make(path: str, content: str | None) -> None:
    """A placeholder, unless something is there already; where the server cannot
    write the git dir, neither can its sandboxes, and nothing is made."""
    with contextlib.suppress(OSError):
        if content is None:
            os.makedirs(path, exist_ok=True)
            return
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        with open(fd, "w") as file:
            file.write(content)
