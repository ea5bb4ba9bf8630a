"""The git guard does no harm: git, libgit2 (pygit2), dulwich and isomorphic-git read
the repositories a sandboxed session reaches the same before, during and after
it (the server SIGKILLed at the end), and no file in them is made or changed.

Three layouts: a repository with a submodule, a linked worktree with a
submodule, a repository with an include."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import dulwich.porcelain
import dulwich.repo
import pygit2
import pytest

from tests.githost import Host, host
from tests.node import node_modules
from tests.reliability.test_sandbox_git import linked_worktree, with_submodules
from tests.sandboxing import skip_without_sandbox

__all__ = ["host"]

ISOGIT_VIEW = Path(__file__).parents[1] / "node" / "isogit_view.cjs"
NODE_SECONDS = 60
# Rewritten by the host's own `git status` (its stat cache), not by the guard.
REFRESHED = "index"


@pytest.fixture(autouse=True)
def _needs_sandbox() -> None:
    skip_without_sandbox()


@pytest.fixture(autouse=True)
def _any_owner() -> Iterator[None]:
    """The readers run here, as root, on repositories that may be nobody's:
    libgit2 would refuse one of another owner (git's `safe.directory`)."""
    pygit2.option(pygit2.enums.Option.SET_OWNER_VALIDATION, 0)
    try:
        yield
    finally:
        pygit2.option(pygit2.enums.Option.SET_OWNER_VALIDATION, 1)


def files(*trees: Path) -> dict[str, str]:
    """Every file under `trees` (git dirs included), with its content's digest."""
    found = {}
    for tree in trees:
        for directory, _, names in os.walk(tree):
            for name in names:
                path = os.path.join(directory, name)
                if os.path.islink(path) or name == REFRESHED:
                    found[path] = "" if name == REFRESHED else os.readlink(path)
                else:
                    found[path] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return found


def git_view(host: Host, checkout: Path) -> dict[str, str]:
    asked = {
        "rev-parse": ("rev-parse", "HEAD", "--git-dir", "--git-common-dir", "--show-toplevel"),
        "refs": ("for-each-ref",),
        "config": ("config", "--list", "--show-origin"),
        "status": ("status", "--porcelain=v2", "--branch"),
        "worktrees": ("worktree", "list", "--porcelain"),
        "objects": ("count-objects", "-v"),
        "submodules": ("submodule", "status", "--recursive"),
    }
    return {name: host.ok(checkout, *args) for name, args in asked.items()}


def pygit2_view(checkout: Path) -> object:
    repo = pygit2.Repository(str(checkout))
    return {
        "head": str(repo.head.target),
        "refs": sorted(repo.references),
        "config": sorted((entry.name, entry.value) for entry in repo.config),
        "status": sorted((path, int(flags)) for path, flags in repo.status().items()),
        "worktrees": sorted(repo.list_worktrees()),
        "submodules": sorted(repo.listall_submodules()),
    }


def dulwich_view(checkout: Path) -> object:
    with dulwich.repo.Repo(str(checkout)) as repo:
        config = repo.get_config()
        return {
            "head": repo.head().decode(),
            "refs": sorted(ref.decode() for ref in repo.get_refs()),
            "config": [(s, sorted(config.items(s))) for s in config.sections()],
            "status": repr(dulwich.porcelain.status(repo)),
            "worktrees": repr(dulwich.porcelain.worktree_list(repo)),
        }


def isogit_view(checkout: Path, git_dir: Path) -> dict[str, object]:
    done = subprocess.run(
        ["node", str(ISOGIT_VIEW), str(checkout), str(git_dir)],
        env={**os.environ, "NODE_PATH": str(node_modules())},
        capture_output=True,
        text=True,
        timeout=NODE_SECONDS,
        check=True,
    )
    found: dict[str, object] = json.loads(done.stdout)
    assert "error" not in found, found
    return found


def views(host: Host, checkouts: dict[Path, Path]) -> dict[str, object]:
    """What each reader reads in each checkout (with its git dir), and the files."""
    seen: dict[str, object] = {"files": files(host.base / "repo", *checkouts)}
    for checkout, git_dir in checkouts.items():
        seen[f"git {checkout}"] = git_view(host, checkout)
        seen[f"pygit2 {checkout}"] = pygit2_view(checkout)
        seen[f"dulwich {checkout}"] = dulwich_view(checkout)
        seen[f"isomorphic-git {checkout}"] = isogit_view(checkout, git_dir)
    return seen


def submodule(host: Host) -> tuple[Path, dict[Path, Path]]:
    repo = with_submodules(host, ("lib",))
    return repo, {repo: repo / ".git", repo / "lib": repo / ".git" / "modules" / "lib"}


def worktree_with_submodule(host: Host) -> tuple[Path, dict[Path, Path]]:
    main, worktree = linked_worktree(host)
    admin = main / ".git" / "worktrees" / "worktree"
    return worktree, {
        main: main / ".git",
        # isomorphic-git has no linked worktrees (`commondir`): it reads the common dir.
        worktree: main / ".git",
        worktree / "lib": admin / "modules" / "lib",
    }


def include(host: Host) -> tuple[Path, dict[Path, Path]]:
    repo = host.repo("repo")
    host.write(repo / "team.gitconfig", "[user]\n\tname = team\n")
    host.ok(repo, "config", "include.path", "../team.gitconfig")
    host.ok(repo, "config", "includeIf.gitdir:nowhere/.path", "../conf/absent.gitconfig")
    (repo / "conf").mkdir()
    return repo, {repo: repo / ".git"}


LAYOUTS: dict[str, Callable[[Host], tuple[Path, dict[Path, Path]]]] = {
    "submodule": submodule,
    "linked worktree with a submodule": worktree_with_submodule,
    "include": include,
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_every_reader_reads_the_same_before_during_and_after(host: Host, layout: str) -> None:
    """The host's git runs as the host's user (root, or nobody); the others here."""
    workspace, checkouts = LAYOUTS[layout](host)
    before = views(host, checkouts)
    server = host.serve(workspace, "workspace-write")
    result = server.bash("git status --short; git log --oneline | wc -l; touch made.txt")
    assert result.exit_code == 0, result.output
    (workspace / "made.txt").unlink()
    during = views(host, checkouts)
    server.kill()
    after = views(host, checkouts)
    assert during == before
    assert after == before
