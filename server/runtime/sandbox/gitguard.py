"""What the host's git runs must not be a confined command's to change (pure).

The host runs git in the workspace later (`git status`, `git commit`, an
editor's background `git`), and git runs what its git dirs say: hooks, and
the commands of config keys (`core.fsmonitor`, `core.hooksPath`,
`core.sshCommand`, `core.pager`, `diff.*.textconv`, `filter.*`, `include.path`
and the rest). So in workspace-write, every git dir a writable root's git
reaches is bound so that what decides those stays as the host had it:

- Each git dir in a root is bound over itself, with every directory between it
  and the one it is nested in (`modules/`, `worktrees/`): a mount point cannot
  be renamed, so `mv .git .git-old` and a fresh `.git` fail, and so does
  moving `.git/modules` aside.
- In it, `config`, `config.worktree`, `commondir`, `gitdir` and `hooks` are
  bound read-only. Those missing are made first (`PLACEHOLDERS`): a name must
  exist to be covered, and one a command could create would be read (a
  `commondir` pointing at a copy with a planted config, say).
- A git dir's own root stays writable otherwise: git makes `index.lock`,
  `HEAD.lock`, `packed-refs.lock` and `COMMIT_EDITMSG` there and renames them
  over `index`, `HEAD`, `packed-refs`, so a read-only root fails every commit.
- A pinned entry that is a symlink (a `.git/hooks` linked to a tracked
  `.githooks/`) cannot be covered: a mount follows the link, and the link itself
  could be replaced. That git dir is bound read-only, with `objects/`, `refs/` and
  `logs/` writable again; its target, when in a root, is bound read-only too.
  Commits there fail (`index.lock`): the price of a link nothing can pin.
- What the config names in a root is bound read-only too, with every directory
  down to it bound over itself: the `core.hooksPath` directory (made when
  missing: husky's `.husky/_` before its install), files the config includes
  (made empty when missing), and the program of a command key
  (`diff.pdf.textconv = ./tools/pdf2txt`).
- A `.git` file in a root (a linked worktree, a submodule's checkout) is bound
  read-only, so it keeps naming its git dir. That git dir, when outside the roots,
  is bound writable (its `HEAD`, `index`), pinned as above; the common dir it
  names stays read-only but for `objects/`, `refs/` and `logs/`.
- bwrap binds a directory without what is mounted inside it, so the order is
  kept such that no bind uncovers an earlier one (`_settled`).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence

import msgspec

# What git reads in a git dir to decide what it runs, or which git dir it uses.
PINNED = ("config", "config.worktree", "commondir", "gitdir", "hooks")
# Made on the host when missing, so they can be pinned, each harmless as made:
# `commondir` naming the git dir itself, empty configs, no hooks. None: a directory.
PLACEHOLDERS: dict[str, str | None] = {
    "config": "",
    "config.worktree": "",
    "commondir": ".\n",
    "hooks": None,
}
# Read only in a repository's (or a submodule's) own git dir: a linked worktree's
# takes them from its common dir, so none is made there.
OWN_READS = ("config", "commondir", "hooks")
# What a commit, a checkout and a fetch write in a git dir kept read-only.
WRITTEN_DIRS = ("objects", "refs", "logs")
# Where a git dir keeps others: submodules' and linked worktrees'.
NESTED = ("modules", "worktrees")
# Config keys (as `git config --list` spells them) naming other config files, the
# hooks directory, and a command whose program git runs (alias: a `!` one).
INCLUDE_KEY = re.compile(r"^include(if\..*)?\.path$")
HOOKS_KEY = "core.hookspath"
COMMAND_KEY = re.compile(
    r"^(core\.(fsmonitor|sshcommand|pager|editor|askpass)|sequence\.editor"
    r"|gpg\.(.+\.)?program|credential\.(.+\.)?helper|diff\.external"
    r"|diff\..+\.(textconv|command)|merge\..+\.driver|filter\..+\.(clean|smudge|process)"
    r"|pager\..+|alias\..+|interactive\.difffilter)$"
)


class GitDir(msgspec.Struct, frozen=True):
    """A git dir as the scan found it: absolute, resolved paths."""

    path: str
    # A repository's or submodule's own (config, hooks, objects), or else a linked
    # worktree's (HEAD, index, commondir, gitdir).
    own: bool
    # Which of PINNED, WRITTEN_DIRS and NESTED exist in it, not as symlinks.
    found: frozenset[str] = frozenset()
    # PINNED entries that are symlinks, with where they point.
    links: tuple[tuple[str, str], ...] = ()
    # The `.git` file naming it, in a root: a linked worktree's, a submodule checkout's.
    link: str | None = None
    # The git dir it is nested in (`modules/`, `worktrees/`), when it is.
    parent: str | None = None
    # What its config names (`references`), absolute and resolved: programs that
    # exist, and config files it includes and hooks directories, there or not.
    referenced: tuple[str, ...] = ()
    includes: tuple[str, ...] = ()
    hooks_dirs: tuple[str, ...] = ()


class References(msgspec.Struct, frozen=True):
    includes: tuple[str, ...] = ()
    programs: tuple[str, ...] = ()
    hooks_dirs: tuple[str, ...] = ()


def references(
    pairs: Sequence[tuple[str, str]], *, config_dir: str, worktree: str | None, home: str
) -> References:
    """What one config file's entries name: included files (relative to the file),
    hooks directories and programs (relative to the worktree, where git runs them;
    when there is none, only absolute ones count)."""
    includes, programs, hooks = [], [], []
    for key, value in pairs:
        value = home + value[1:] if value.startswith("~/") else value
        if INCLUDE_KEY.match(key):
            includes += _resolved(value, config_dir)
        elif key == HOOKS_KEY:
            hooks += _resolved(value, worktree)
        elif COMMAND_KEY.match(key):
            programs += _resolved(_program(value.removeprefix("!")), worktree)
    return References(tuple(includes), tuple(programs), tuple(hooks))


def _program(command: str) -> str:
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    first = words[0] if words else ""
    return first if "/" in first else ""


def _resolved(path: str, worktree: str | None) -> list[str]:
    if not path or (worktree is None and not os.path.isabs(path)):
        return []
    return [os.path.normpath(os.path.join(worktree or "/", path))]


class Bind(msgspec.Struct, frozen=True):
    """A path bound over itself, in order: later binds cover earlier ones."""

    path: str
    writable: bool


class Plan(msgspec.Struct, frozen=True):
    binds: tuple[Bind, ...] = ()
    # (path, content) to make on the host before the sandbox starts; None: a directory.
    placeholders: tuple[tuple[str, str | None], ...] = ()


def plan(dirs: Sequence[GitDir], roots: Sequence[str]) -> Plan:
    """The binds that keep `dirs` (parents before the dirs nested in them) as the
    host has them, for a sandbox whose writable roots are `roots`."""
    binds: list[Bind] = []
    placeholders: list[tuple[str, str | None]] = []
    for git_dir in dirs:
        binds += _pins(git_dir, roots, placeholders)
        made: dict[str, str | None] = {p: None for p in git_dir.hooks_dirs}
        made.update((path, "") for path in git_dir.includes)
        for path in (*made, *git_dir.referenced):
            root = _root_of(path, roots)
            if root is None or any(_within(path, b.path) for b in binds if not b.writable):
                continue  # outside the roots, or read-only already (`.git/hooks/x`)
            if path in made:
                # Made when missing, or the command could make it: an empty config, no hooks.
                placeholders.append((path, made[path]))
            binds += [Bind(d, writable=True) for d in _between(root, path)]
            binds.append(Bind(path, writable=False))
    return Plan(_settled(binds), tuple(placeholders))


def _settled(binds: Sequence[Bind]) -> tuple[Bind, ...]:
    """`binds` as bwrap must be given them: it binds a directory without what is
    mounted inside it, so a bind of a directory again (a second submodule's way
    down through `modules/`) would uncover what was bound in it. A writable one
    already bound is left out; any other is followed by the binds inside it again."""
    out: list[Bind] = []
    for bind in binds:
        if bind.writable and any(done.path == bind.path for done in out):
            continue
        inside = [done for done in out if done.path != bind.path and _within(done.path, bind.path)]
        out += [bind, *inside]
    return tuple(out)


def _pins(
    git_dir: GitDir, roots: Sequence[str], placeholders: list[tuple[str, str | None]]
) -> list[Bind]:
    binds = []
    if git_dir.link is not None:
        # A submodule's checkout keeps its `.git` file, and cannot be moved aside.
        root = _root_of(git_dir.link, roots)
        between = [] if root is None else _between(root, git_dir.link)
        binds += [*(Bind(d, writable=True) for d in between), Bind(git_dir.link, writable=False)]
    if within_any(git_dir.path, roots):
        binds += [Bind(path, writable=True) for path in _chain(git_dir)]
    elif git_dir.link is not None:
        binds.append(Bind(git_dir.path, writable=True))
    else:
        # Outside the roots, a linked worktree's common dir: read-only, but for
        # what a commit writes there. Bound, so it is there even under /tmp.
        return [*binds, Bind(git_dir.path, writable=False), *_written(git_dir)]
    if git_dir.links:
        binds += [Bind(git_dir.path, writable=False), *_written(git_dir)]
        targets = (target for _, target in git_dir.links if within_any(target, roots))
        return binds + [Bind(target, writable=False) for target in targets]
    for name in PINNED:
        path = os.path.join(git_dir.path, name)
        if name in git_dir.found:
            binds.append(Bind(path, writable=False))
        elif name in PLACEHOLDERS and (git_dir.own or name not in OWN_READS):
            placeholders.append((path, PLACEHOLDERS[name]))
            binds.append(Bind(path, writable=False))
    return binds


def _root_of(path: str, roots: Sequence[str]) -> str | None:
    return max((r for r in roots if _within(path, r)), key=len, default=None)


def _between(root: str, path: str) -> list[str]:
    """The directories strictly between `root` and `path`, outermost first."""
    parts = os.path.relpath(path, root).split(os.sep)[:-1]
    return [os.path.join(root, *parts[: i + 1]) for i in range(len(parts))]


def _chain(git_dir: GitDir) -> list[str]:
    """The git dir and every directory between it and its parent: each bound over
    itself, so none can be renamed away with the pinned ones inside."""
    if git_dir.parent is None or not _within(git_dir.path, git_dir.parent):
        return [git_dir.path]
    parts = os.path.relpath(git_dir.path, git_dir.parent).split(os.sep)
    return [os.path.join(git_dir.parent, *parts[: i + 1]) for i in range(len(parts))]


def _written(git_dir: GitDir) -> list[Bind]:
    return [
        Bind(os.path.join(git_dir.path, name), writable=True)
        for name in WRITTEN_DIRS
        if name in git_dir.found
    ]


def protected(roots: Sequence[str]) -> tuple[str, ...]:
    """What a command may not write in `roots`, as far as the denial notice goes:
    the pinned names of each root's own `.git`."""
    return tuple(os.path.join(root, ".git", name) for root in roots for name in PINNED)


def within_any(path: str, roots: Sequence[str]) -> bool:
    return any(_within(path, root) for root in roots)


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")
