"""The git scan on real repositories made with the host's git: what it finds, and
what it makes before a sandbox starts."""

from __future__ import annotations

from pathlib import Path

from bashrpc.server.runtime.sandbox import gitscan
from tests.reliability.test_sandbox_git import host_git, make_repo


def test_a_repository_with_a_nested_submodule_and_a_linked_worktree(tmp_path: Path) -> None:
    library = make_repo(tmp_path / "library")
    repo = make_repo(tmp_path / "repo")
    assert host_git(repo, "submodule", "add", "-q", str(library), "deps/lib").returncode == 0
    assert host_git(repo, "worktree", "add", "-q", str(tmp_path / "side")).returncode == 0
    found = {d.path: d for d in gitscan.scan([str(repo)])}
    git = repo / ".git"
    assert list(found) == [str(git), str(git / "modules/deps/lib"), str(git / "worktrees/side")]
    module = found[str(git / "modules/deps/lib")]
    assert module.own and module.parent == str(git) and "config" in module.found
    # Its checkout's `.git` file, which names it, is pinned with it.
    assert module.link == str(repo / "deps/lib/.git")
    assert not found[str(git / "worktrees/side")].own


def test_a_linked_worktree_as_the_root(tmp_path: Path) -> None:
    main = make_repo(tmp_path / "main")
    side = tmp_path / "side"
    assert host_git(main, "worktree", "add", "-q", str(side)).returncode == 0
    common, admin = gitscan.scan([str(side)])
    assert common.path == str(main / ".git") and common.link is None
    assert admin.path == str(main / ".git/worktrees/side") and admin.link == str(side / ".git")
    assert admin.parent == common.path


def test_prepare_makes_the_placeholders_and_git_still_works(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    assert host_git(repo, "config", "core.hooksPath", ".husky/_").returncode == 0
    plan = gitscan.prepare([str(repo)])
    assert (repo / ".git/commondir").read_text() == ".\n"
    assert (repo / ".git/config.worktree").read_text() == ""
    assert (repo / ".husky/_").is_dir()
    assert host_git(repo, "commit", "-q", "--allow-empty", "-m", "after").returncode == 0
    # A second start finds them there, and binds the same.
    again = gitscan.prepare([str(repo)])
    assert again.binds == plan.binds and len(again.placeholders) < len(plan.placeholders)


def test_not_a_repository_and_a_broken_pointer_give_nothing(tmp_path: Path) -> None:
    assert gitscan.scan([str(tmp_path)]) == []
    (tmp_path / ".git").write_text("gitdir: /nowhere/at/all\n")
    assert gitscan.prepare([str(tmp_path)]).binds == ()
