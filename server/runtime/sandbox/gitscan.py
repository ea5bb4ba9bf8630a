"""Finding the git dirs a sandbox's writable roots reach, and what git reads
for them (`gitguard.py`, whose rules these are), at each shell's start.

From each root's `.git`, then every gitlink of its index whose checkout has a
`.git`, however deep: the index, not `.gitmodules`, says what the host's `git
status` enters. For each, the configs git reads (system, global, repository,
worktree, and their includes, `includeIf` whatever its condition) name what
is kept. No count bounds it, so no command can spend one.

What a command could have written is never followed out of its reach: a
pointer (`gitdir:`, `commondir`) is taken only to a git dir in the roots, or
to one outside them that names this checkout back (which only the host's git
makes); else it is kept as it is, and said. Every file is opened through
`beneath` (a regular file, never blocking, bounded), and the scan has a
deadline: what it cannot read in time keeps its root read-only for the shell.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import stat
import time
from collections.abc import Iterator, Mapping, Sequence

from bashrpc.protocol import messages
from bashrpc.server.runtime.sandbox import beneath, gitconfig, gitguard, gitindex
from bashrpc.server.runtime.sandbox.beneath import Hostile
from bashrpc.server.runtime.sandbox.gitguard import GitDir, Kept, Plan, Survey
from bashrpc.server.runtime.sandbox.gitlayout import (
    DOT_GIT,
    GITDIR_PREFIX,
    checkout_link,
    common_of,
    file_type,
    host_configs,
    is_git_dir,
    links_back,
    read_pointer,
    worktree_of,
)

# Submodule names may hold slashes (`modules/a/b`): how deep `modules/` and
# `worktrees/` are looked into, with commits; deeper is kept read-only.
MAX_DEPTH = 8
# How many git dirs one `modules/` or `worktrees/` may hold to be pinned one by one.
MAX_NESTED = 64
# How deep `include.path` chains are followed (git stops at 10).
MAX_INCLUDE_DEPTH = 10
OBJECT_FORMAT_KEY = "extensions.objectformat"
SHA256 = "sha256"
_LOOKED_AT = (*gitguard.PINNED, *gitguard.WRITTEN_DIRS, *gitguard.NESTED)
# How long one scan may take: past it, every root is kept read-only for the shell.
SCAN_SECONDS = 10.0


class _Expired(Exception):
    """The scan ran past its deadline."""


def prepare(roots: Sequence[str], *, commits: bool = False) -> Plan:
    """The guard's binds for `roots`; with commits, its placeholders made on the host."""
    made = gitguard.plan(scan(roots, commits=commits), roots, commits=commits)
    for path, content in made.placeholders:
        _make(path, content, roots)
    return made


def scan(
    roots: Sequence[str],
    *,
    commits: bool = False,
    env: Mapping[str, str] | None = None,
    seconds: float = SCAN_SECONDS,
) -> Survey:
    found = _Scan(roots, commits, os.environ if env is None else env, seconds)
    try:
        return found.run()
    except _Expired:
        why = [messages.GIT_GUARD_TOO_SLOW.format(root=r, seconds=seconds) for r in roots]
        return Survey(kept=tuple(Kept(r, w) for r, w in zip(roots, why, strict=True)))


class _Scan:
    def __init__(
        self, roots: Sequence[str], commits: bool, env: Mapping[str, str], seconds: float
    ) -> None:
        self.roots = roots
        self.deadline = time.monotonic() + seconds
        self.commits = commits
        self.home = env.get("HOME") or os.path.expanduser("~")
        self.host_configs = host_configs(env, self.home)
        self.dirs: dict[str, GitDir] = {}
        self.kept: list[Kept] = []
        self.refused: list[str] = []
        self.notices: list[str] = []
        # Git dirs whose configs and gitlinks were read.
        self.entered: set[str] = set()

    def run(self) -> Survey:
        for config in self.host_configs:
            self._keep(config, messages.GIT_GUARD_GLOBAL)
        for root in self.roots:
            dot = os.path.join(root, DOT_GIT)
            if os.path.lexists(dot):
                self._checkout(root)
            elif not any(r != root and beneath.within_any(root, [r]) for r in self.roots):
                self._enclosing(root)
        return Survey(
            tuple(self.dirs.values()), tuple(self.kept), tuple(self.refused), tuple(self.notices)
        )

    def _tick(self) -> None:
        if time.monotonic() > self.deadline:
            raise _Expired

    def _enclosing(self, root: str) -> None:
        """A root in a repository, with no `.git` of its own: a command could make
        one, which the host's git then takes for the repository there."""
        directory = os.path.dirname(root)
        while True:
            if os.path.lexists(os.path.join(directory, DOT_GIT)):
                what = messages.GIT_GUARD_ENCLOSED.format(root=root, repository=directory)
                self.refused.append(
                    messages.GIT_GUARD_REFUSED.format(what=what, why=messages.GIT_GUARD_MAY_INIT)
                )
                return
            if directory == os.path.dirname(directory):
                return
            directory = os.path.dirname(directory)

    def _checkout(self, worktree: str, parent: str | None = None) -> None:
        """The repository a checkout's `.git` is, or names."""
        self._tick()
        dot = os.path.join(worktree, DOT_GIT)
        kind = file_type(dot)
        if kind == stat.S_IFDIR:
            self._repository(worktree, dot, link=None, parent=parent)
        elif kind == stat.S_IFREG:
            self._pointer(worktree, dot, parent)
        elif kind == stat.S_IFLNK and is_git_dir(os.path.realpath(dot)):
            # A link to a repository could be replaced: its directory is kept (a
            # root: read-only). One to anything else makes no repository for git.
            self._keep(worktree, messages.GIT_GUARD_DOT_GIT_LINK, named=dot)
        elif kind not in (None, stat.S_IFLNK):
            # A FIFO, a socket, a device: no repository to git; kept as it is.
            self._keep(dot, messages.GIT_GUARD_DOT_GIT_ODD)

    def _pointer(self, worktree: str, dot: str, parent: str | None) -> None:
        """A `.git` file: followed only to a git dir in the roots, or to one the
        host's git made for this checkout; else kept as it is, and said."""
        try:
            pointer = read_pointer(dot, self.roots, GITDIR_PREFIX)
        except Hostile as exc:
            what = messages.GIT_GUARD_HOSTILE.format(detail=exc)
            self._keep(dot, what)
            return
        target = None if pointer is None else beneath.directory(pointer, self.roots, worktree)
        if target is not None and self._trusted(target, dot):
            self._repository(worktree, target, link=dot, parent=parent)
            return
        # Broken, or refused: kept as it is.
        self._keep(dot, messages.GIT_GUARD_GITDIR)
        if pointer is None:
            return
        named = os.path.normpath(os.path.join(worktree, pointer))
        if not os.path.lexists(named):
            self._keep(named, messages.GIT_GUARD_GITDIR)  # in a root: kept from being made
        else:
            notice = messages.GIT_GUARD_POINTER_REFUSED.format(path=dot, target=pointer)
            self.notices.append(notice)

    def _trusted(self, target: str, dot: str) -> bool:
        """Whether a `.git` file's target may be taken as its repository."""
        if not is_git_dir(target):
            return False
        if beneath.within_any(target, self.roots):
            return True
        return links_back(target, dot, self.roots)

    def _repository(
        self, worktree: str, git_dir: str, *, link: str | None, parent: str | None
    ) -> None:
        if git_dir in self.entered:
            return  # a cycle of `.git` files, or two checkouts of one git dir
        self.entered.add(git_dir)
        known = self.dirs.get(git_dir)
        walked, pointer = common_of(git_dir, self.roots)
        common = None if walked == git_dir else walked
        if pointer is not None and (walked is None or not self._common_trusted(git_dir, common)):
            # Its git would use a common dir the guard does not follow: kept read-only
            # whole, and the checkouts its index names kept as ever.
            notice = messages.GIT_GUARD_COMMONDIR_REFUSED.format(path=git_dir, target=pointer)
            self.notices.append(notice)
            self.dirs[git_dir] = GitDir(git_dir, own=True, link=link, sealed=True)
            self._gitlinks(worktree, git_dir, git_dir)
            return
        if known is not None:
            # Found as another's common dir, or under `modules/`: its `.git` file too.
            if link is not None and known.link != link:
                self._keep(link, messages.GIT_GUARD_GITDIR)
        else:
            if common is not None and common not in self.dirs:
                self._describe(common, own=True)
            if common is not None and beneath.within_any(git_dir, [common]):
                parent = common
            elif parent is not None and not beneath.within_any(git_dir, [parent]):
                parent = None
            self._describe(git_dir, own=common is None, link=link, parent=parent)
        self._configs(worktree, git_dir, common or git_dir)
        if self.commits:
            for nested in self._nested(git_dir):
                self.dirs.setdefault(nested.path, nested)
        self._gitlinks(worktree, git_dir, common or git_dir)

    def _common_trusted(self, git_dir: str, common: str | None) -> bool:
        """A common dir (None: the git dir itself) is a git dir; named from a git
        dir a command could write, in the roots (a linked worktree's git dir is in
        its common dir's `worktrees/`)."""
        if common is None:
            return True
        if not is_git_dir(common):
            return False
        return not beneath.within_any(git_dir, self.roots) or beneath.within_any(common, self.roots)

    def _describe(
        self, path: str, *, own: bool, link: str | None = None, parent: str | None = None
    ) -> None:
        found: set[str] = set()
        links: list[tuple[str, str]] = []
        for name in _LOOKED_AT:
            entry = os.path.join(path, name)
            kind = file_type(entry)
            if kind == stat.S_IFLNK and name in gitguard.PINNED:
                target = os.path.realpath(entry)
                links.append((name, target))
                self._keep(target, messages.GIT_GUARD_LINK_TARGET.format(name=name))
            elif kind is not None and kind != stat.S_IFLNK:
                found.add(name)
        self.dirs[path] = GitDir(path, own, frozenset(found), tuple(links), link, parent)

    def _configs(self, worktree: str, git_dir: str, common: str) -> None:
        """What the configs git reads here name: included files (kept, made or not),
        the hooks directory, and programs, relative to the worktree."""
        pending = [(c, 0) for c in self.host_configs]
        pending += [(os.path.join(common, "config"), 0)]
        pending += [(os.path.join(git_dir, "config.worktree"), 0)]
        while pending:
            self._tick()
            config, depth = pending.pop()
            found = gitguard.references(
                self._entries(config),
                config_dir=os.path.dirname(config),
                worktree=worktree,
                home=self.home,
            )
            for key, path in (*found.includes, *found.named):
                self._keep(path, key)
            if depth < MAX_INCLUDE_DEPTH:
                pending += [(path, depth + 1) for _, path in found.includes]

    def _gitlinks(self, worktree: str, git_dir: str, common: str) -> None:
        """Each gitlink's checkout: its repository, when it has a `.git`, else the
        checkout kept from getting one."""
        config = dict(self._entries(os.path.join(common, "config")))
        sha256 = config.get(OBJECT_FORMAT_KEY, "").lower() == SHA256
        index = os.path.join(git_dir, "index")
        try:
            hash_bytes = gitindex.SHA256_BYTES if sha256 else gitindex.SHA1_BYTES
            paths = gitindex.gitlinks(index, hash_bytes, self.roots, self.deadline)
        except gitindex.IndexUnreadable as exc:
            what = messages.GIT_GUARD_INDEX.format(path=index)
            self._keep_root(worktree, what, messages.GIT_GUARD_UNREADABLE.format(detail=exc))
            return
        for path in paths:
            self._tick()
            named = os.path.normpath(os.path.join(worktree, path))
            if not beneath.within_any(named, [worktree]) or named == worktree:
                continue  # not a path git would check out
            # Walked to with no link on the way (git enters none through one).
            checkout = beneath.directory(named, self.roots)
            if checkout is not None and os.path.lexists(os.path.join(checkout, DOT_GIT)):
                self._checkout(checkout, parent=git_dir)
            else:
                self._keep(named, messages.GIT_GUARD_CHECKOUT)

    def _entries(self, config: str) -> tuple[tuple[str, str], ...]:
        """A config's entries; one git would read but the guard cannot keeps its
        root read-only (what it names is unknown)."""
        try:
            return gitconfig.entries(config, self.roots)
        except gitconfig.Unreadable as exc:
            what = messages.GIT_GUARD_CONFIG.format(path=config)
            self._keep_root(config, what, messages.GIT_GUARD_HOSTILE.format(detail=exc))
            return ()

    def _keep_root(self, path: str, what: str, why: str) -> None:
        """The root holding `path` kept read-only whole, saying why."""
        root = max((r for r in self.roots if beneath.within_any(path, [r])), key=len, default=None)
        if root is not None:
            self.kept.append(Kept(root, messages.GIT_GUARD_NAMED.format(path=what, reason=why)))

    def _keep(self, path: str, reason: str, *, named: str | None = None) -> None:
        """`path`, when in a root, bound read-only: itself, or when missing the
        nearest directory that exists, so that nothing can be made there; and
        the directory of a link on the way to it in a root, so that the link
        cannot be pointed elsewhere."""
        resolved = os.path.realpath(path)
        link = beneath.first_link(path, self.roots)
        if link is not None:
            what = messages.GIT_GUARD_NAMED.format(path=named or path, reason=reason)
            self.kept.append(Kept(os.path.dirname(link), what))
        if not beneath.within_any(resolved, self.roots):
            return
        existing = resolved
        while not os.path.lexists(existing):
            existing = os.path.dirname(existing)
        what = messages.GIT_GUARD_NAMED.format(path=named or resolved, reason=reason)
        self.kept.append(Kept(existing, what))

    def _nested(self, parent: str) -> Iterator[GitDir]:
        """With commits: the git dirs under `modules/` and `worktrees/`, which a
        command could point a checkout at. Deeper than MAX_DEPTH, or more than
        MAX_NESTED in one, is kept read-only: more cannot be pinned at a cost
        a shell's start can pay, and a command made them."""
        for kind in gitguard.NESTED:
            directory = os.path.join(parent, kind)
            found = list(
                itertools.islice(self._git_dirs_under(directory, MAX_DEPTH), MAX_NESTED + 1)
            )
            if len(found) > MAX_NESTED:
                self._keep(directory, messages.GIT_GUARD_TOO_MANY)
                continue
            for path in found:
                own = kind == "modules"
                worktree = worktree_of(path, own, self.roots)
                link = checkout_link(path, worktree, self.roots)
                if path not in self.dirs:
                    self._describe(path, own=own, link=link, parent=parent)
                    if worktree is not None:
                        self._configs(worktree, path, parent if not own else path)
                    yield self.dirs[path]
                    yield from self._nested(path)

    def _git_dirs_under(self, directory: str, depth: int) -> Iterator[str]:
        """Directories under `directory` holding a HEAD, not descending into them."""
        try:
            entries = list(os.scandir(directory))
        except OSError:
            return
        for entry in entries:
            self._tick()
            if not entry.is_dir(follow_symlinks=False):
                continue
            if os.path.lexists(os.path.join(entry.path, "HEAD")):
                yield entry.path
            elif depth <= 1:
                self._keep(entry.path, messages.GIT_GUARD_TOO_DEEP)
            else:
                yield from self._git_dirs_under(entry.path, depth - 1)


def _make(path: str, content: str | None, roots: Sequence[str]) -> None:
    """A placeholder, unless something is there already; where the server cannot
    write the git dir, neither can its sandboxes, and nothing is made. Made in the
    git dir as walked to, with no link on the way: never through one."""
    parent, name = os.path.split(path)
    opened = beneath.open_directory(parent, roots)
    if opened is None:
        return
    dir_fd = opened[0]
    try:
        with contextlib.suppress(OSError):
            if content is None:
                os.mkdir(name, 0o755, dir_fd=dir_fd)
                return
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(name, flags, 0o644, dir_fd=dir_fd)
            with open(fd, "w") as file:
                file.write(content)
    finally:
        os.close(dir_fd)
