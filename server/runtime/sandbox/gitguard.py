"""What the host's git runs must not be a confined command's to change (pure).

The host runs git in the workspace later (`git status`, `git commit`, an
editor's background `git`), and git runs what its git dirs and configs say:
hooks, and the commands of config keys (`core.fsmonitor`, `core.sshCommand`,
`diff.*.textconv`, `filter.*`...). The scan (`gitscan.py`) finds every git dir
a root's git reaches and each path git reads for them; this decides the binds.

Read-only git metadata (the default, as in Codex): every git dir is bound
read-only whole, with what is nested in it, and nothing is made on the host.
A `.git` file, a gitlink's checkout with no `.git` (the host's `git status`
enters it once it has one) and what a config names in a root are read-only
too; a path missing is kept from being made by its nearest existing directory.

Commits (`gitCommits`): git makes `index.lock`, `HEAD.lock` and the like in
the git dir and renames them over `index` and `HEAD`, so the git dir stays
writable, and a name there can be kept from being made only by making it
first (`PLACEHOLDERS`), then binding it read-only, with every directory down
to it bound over itself (a mount point cannot be renamed). Those files stay:
libgit2 cannot open a repository with `commondir`. A pinned name that is a
symlink cannot be covered: that git dir is read-only but for `objects/`,
`refs/` and `logs/`.

What no bind but the root's can keep keeps that root read-only for the shell
(which starts, told why), never skipped; nothing else in that root is bound.
bwrap binds a directory without what is mounted inside it, so the binds are
ordered such that none uncovers an earlier one (`_settled`).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence

import msgspec

from bashrpc.protocol import messages
from bashrpc.server.runtime.sandbox.beneath import within_any

# What git reads in a git dir to decide what it runs, or which git dir it uses.
PINNED = ("config", "config.worktree", "commondir", "gitdir", "hooks")
# Made on the host when missing (commits only), so they can be pinned, each
# harmless as made: `commondir` naming the git dir itself, empty configs, no hooks.
# None: a directory.
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
    # Its `commondir` names what the guard does not follow: read-only whole.
    sealed: bool = False


class Kept(msgspec.Struct, frozen=True):
    """A path git reads, in a writable root, to keep as the host has it."""

    # What is bound read-only: the path itself, or its nearest existing directory.
    path: str
    # What git reads there, and why (`messages.GIT_GUARD_NAMED`), for a refusal.
    what: str


class Survey(msgspec.Struct, frozen=True):
    """What the scan found: git dirs (parents before those nested in them), paths
    to keep, and what no bind can keep (each a message), which refuses the shell."""

    git_dirs: tuple[GitDir, ...] = ()
    kept: tuple[Kept, ...] = ()
    refused: tuple[str, ...] = ()
    # What the shell's start is told: pointers not followed.
    notices: tuple[str, ...] = ()


class References(msgspec.Struct, frozen=True):
    includes: tuple[tuple[str, str], ...] = ()
    # (key, path) pairs: the program of a command key, the hooks directory.
    named: tuple[tuple[str, str], ...] = ()


def references(
    pairs: Sequence[tuple[str, str]], *, config_dir: str, worktree: str | None, home: str
) -> References:
    """What one config file's entries name: included files (relative to the file),
    hooks directories and programs (relative to the worktree, where git runs them;
    when there is none, only absolute ones count)."""
    includes, named = [], []
    for key, value in pairs:
        value = home + value[1:] if value.startswith("~/") else value
        if INCLUDE_KEY.match(key):
            includes += [(key, p) for p in _resolved(value, config_dir)]
        elif key == HOOKS_KEY:
            named += [(key, p) for p in _resolved(value, worktree)]
        elif COMMAND_KEY.match(key):
            named += [(key, p) for p in _resolved(_program(value.removeprefix("!")), worktree)]
    return References(tuple(includes), tuple(named))


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
    # (path, content) to make on the host before the sandbox starts (commits only);
    # None: a directory.
    placeholders: tuple[tuple[str, str | None], ...] = ()
    # Why the shell cannot start (a root inside a repository).
    refused: str | None = None
    # What the guard did that the shell's start is told: roots kept read-only
    # (what only they could keep), pointers not followed.
    notices: tuple[str, ...] = ()


def plan(survey: Survey, roots: Sequence[str], *, commits: bool = False) -> Plan:
    """The binds that keep what `survey` found as the host has it, for a sandbox
    whose writable roots are `roots`.

    What only a root could keep (a `.git` that is a link, a missing include's
    directory, a config or an index the scan could not read) keeps that root
    read-only whole for the shell, which starts, told why: a command cannot
    refuse every later shell on its root by planting one."""
    if survey.refused:
        return Plan(refused=survey.refused[0])
    sealed = {k.path: k.what for k in survey.kept if k.path in roots}
    kept = [k for k in survey.kept if not within_any(k.path, list(sealed))]
    open_roots = [r for r in roots if r not in sealed]
    binds: list[Bind] = [Bind(root, writable=False) for root in sealed]
    placeholders: list[tuple[str, str | None]] = []
    for git_dir in survey.git_dirs:
        if within_any(git_dir.path, list(sealed)) or (
            git_dir.link is not None and within_any(git_dir.link, list(sealed))
        ):
            continue  # read-only with its root
        if git_dir.link is not None:
            binds += _kept(git_dir.link, open_roots, binds)
        if commits and not git_dir.sealed:
            binds += _pins(git_dir, open_roots, placeholders, binds)
        else:
            binds += _kept(git_dir.path, open_roots, binds)
    for item in kept:
        binds += _kept(item.path, open_roots, binds)
    notices = [
        messages.GIT_GUARD_SEALED.format(root=root, what=what) for root, what in sealed.items()
    ]
    said = tuple(dict.fromkeys((*survey.notices, *notices)))
    return Plan(_settled(binds), tuple(placeholders), notices=said)


def _kept(path: str, roots: Sequence[str], binds: Sequence[Bind]) -> list[Bind]:
    """`path` bound read-only with the way down to it, unless it is read-only already.

    Outside any writable mount it is bound all the same: it is there then even
    under the sandbox's private /tmp."""
    mount = _mounted_at(path, roots, binds)
    if mount is None:
        return [Bind(path, writable=False)]
    top, writable = mount
    if not writable:
        return []
    return [*_way_down(top, path), Bind(path, writable=False)]


def _mounted_at(path: str, roots: Sequence[str], binds: Sequence[Bind]) -> tuple[str, bool] | None:
    """The innermost mount holding `path` (the last bound, of equals): its path,
    and whether it is writable."""
    mounts = [(r, True) for r in roots] + [(b.path, b.writable) for b in binds]
    holding = [(i, m) for i, m in enumerate(mounts) if _within(path, m[0])]
    if not holding:
        return None
    return max(holding, key=lambda item: (len(item[1][0]), item[0]))[1]


def _way_down(root: str, path: str) -> list[Bind]:
    """Every directory strictly between `root` and `path`, each bound over itself:
    a mount point cannot be renamed, so none is moved aside with what is kept in it."""
    parts = os.path.relpath(path, root).split(os.sep)[:-1]
    return [Bind(os.path.join(root, *parts[: i + 1]), writable=True) for i in range(len(parts))]


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
    git_dir: GitDir,
    roots: Sequence[str],
    placeholders: list[tuple[str, str | None]],
    earlier: Sequence[Bind],
) -> list[Bind]:
    """Commits: the git dir writable, what decides what git runs in it read-only."""
    binds: list[Bind] = []
    parent_writable = git_dir.parent is not None and any(
        b.path == git_dir.parent and b.writable for b in earlier
    )
    root = _root_of(git_dir.path, roots)
    if root is not None or parent_writable:
        if root is not None and git_dir.parent is None:
            binds += _way_down(root, git_dir.path)
        binds += [Bind(path, writable=True) for path in _chain(git_dir)]
    elif git_dir.link is not None:
        binds.append(Bind(git_dir.path, writable=True))
    else:
        # Outside the roots, a linked worktree's common dir: read-only, but for
        # what a commit writes there. Bound, so it is there even under /tmp.
        return [*binds, Bind(git_dir.path, writable=False), *_written(git_dir)]
    if git_dir.links:
        return [*binds, Bind(git_dir.path, writable=False), *_written(git_dir)]
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


def protected(roots: Sequence[str], *, commits: bool) -> tuple[str, ...]:
    """What a command may not write in `roots`, as far as the denial notice goes:
    each root's `.git`, or with commits its pinned names."""
    names = PINNED if commits else ("",)
    return tuple(os.path.normpath(os.path.join(r, ".git", n)) for r in roots for n in names)


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")
