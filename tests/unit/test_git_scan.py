"""The git scan on real repositories made with the host's git: what it finds, and
(with commits only) what it makes before a sandbox starts."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from bashrpc.protocol import messages
from bashrpc.server.runtime.sandbox import beneath, gitguard, gitindex, gitscan
from bashrpc.server.runtime.sandbox.gitguard import Survey
from tests.githost import Host

NO_HOST_CONFIG = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "HOME": "/"}


def host_of(tmp_path: Path) -> Host:
    base = tmp_path / "host"
    base.mkdir()
    return Host("root", base)


def scan(roots: list[Path], commits: bool = False) -> Survey:
    return gitscan.scan([str(r) for r in roots], commits=commits, env=NO_HOST_CONFIG)


def test_a_repository_with_a_nested_submodule_and_a_linked_worktree(tmp_path: Path) -> None:
    host = host_of(tmp_path)
    library = host.repo("library")
    repo = host.repo("repo")
    host.ok(repo, "submodule", "add", "-q", str(library), "deps/lib")
    host.ok(repo, "worktree", "add", "-q", str(host.base / "side"))
    git = repo / ".git"
    found = {d.path: d for d in scan([repo]).git_dirs}
    # By default the submodule is found through the index's gitlink and its `.git` file.
    assert list(found) == [str(git), str(git / "modules/deps/lib")]
    module = found[str(git / "modules/deps/lib")]
    assert module.own and module.parent == str(git)
    assert module.link == str(repo / "deps/lib/.git")
    # With commits, what `modules/` and `worktrees/` hold is scanned too.
    with_commits = {d.path: d for d in scan([repo], commits=True).git_dirs}
    assert list(with_commits) == [
        str(git),
        str(git / "modules/deps/lib"),
        str(git / "worktrees/side"),
    ]
    assert not with_commits[str(git / "worktrees/side")].own


def test_a_linked_worktree_as_the_root(tmp_path: Path) -> None:
    host = host_of(tmp_path)
    main = host.repo("main")
    side = host.base / "side"
    host.ok(main, "worktree", "add", "-q", str(side))
    common, admin = scan([side]).git_dirs
    assert common.path == str(main / ".git") and common.link is None
    assert admin.path == str(main / ".git/worktrees/side") and admin.link == str(side / ".git")
    assert admin.parent == common.path


def test_by_default_nothing_is_made(tmp_path: Path) -> None:
    host = host_of(tmp_path)
    repo = host.repo("repo")
    host.ok(repo, "config", "core.hooksPath", ".husky/_")
    (repo / ".husky").mkdir()
    before = sorted(p for p in repo.rglob("*"))
    made = gitscan.prepare([str(repo)])
    assert made.placeholders == () and sorted(repo.rglob("*")) == before
    # The hooks directory is missing: its nearest directory is kept instead.
    assert made.binds[-1].path == str(repo / ".husky") and not made.binds[-1].writable


def test_with_commits_the_placeholders_are_made_and_git_still_works(tmp_path: Path) -> None:
    host = host_of(tmp_path)
    repo = host.repo("repo")
    host.ok(repo, "config", "core.hooksPath", ".husky/_")
    (repo / ".husky").mkdir()
    plan = gitscan.prepare([str(repo)], commits=True)
    assert (repo / ".git/commondir").read_text() == ".\n"
    assert (repo / ".git/config.worktree").read_text() == ""
    host.ok(repo, "commit", "-q", "--allow-empty", "-m", "after")
    # A second start finds them there, and binds the same.
    again = gitscan.prepare([str(repo)], commits=True)
    assert again.binds == plan.binds and len(again.placeholders) <= len(plan.placeholders)


def test_not_a_repository_and_a_broken_pointer(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    assert scan([root]) == Survey()
    (root / ".git").write_text("gitdir: /nowhere/at/all\n")
    # The broken `.git` file is kept as it is; what it names is outside the root.
    kept = scan([root]).kept
    assert [k.path for k in kept] == [str(root / ".git")]


def test_a_root_inside_a_repository_is_refused(tmp_path: Path) -> None:
    host = host_of(tmp_path)
    repo = host.repo("repo")
    package = repo / "packages" / "app"
    package.mkdir(parents=True)
    (refused,) = scan([package]).refused
    what = messages.GIT_GUARD_ENCLOSED.format(root=package, repository=repo)
    assert refused == messages.GIT_GUARD_REFUSED.format(what=what, why=messages.GIT_GUARD_MAY_INIT)
    # Inside another root, it is that root's.
    assert scan([repo, package]).refused == ()


def test_a_global_config_in_a_root_is_kept(tmp_path: Path) -> None:
    host = host_of(tmp_path)
    repo = host.repo("repo")
    (host.home / ".gitconfig").write_text("[core]\n\thooksPath = .hooks\n")
    (repo / ".hooks").mkdir()
    env = {"HOME": str(host.home), "GIT_CONFIG_NOSYSTEM": "1", "XDG_CONFIG_HOME": "/nowhere"}
    survey = gitscan.scan([str(repo), str(host.home)], env=env)
    kept = {k.path for k in survey.kept}
    assert {str(host.home / ".gitconfig"), str(repo / ".hooks")} <= kept


def test_gitlinks_are_read_from_the_index_in_every_format(tmp_path: Path) -> None:
    host = host_of(tmp_path)
    library = host.repo("library")
    repo = host.repo("repo")
    for path in ("a/one", "a/two", "b"):
        host.ok(repo, "submodule", "add", "-q", str(library), path)
    (repo / "file").write_text("")
    host.ok(repo, "add", "file")
    index = str(repo / ".git" / "index")
    for version in ("2", "3", "4"):
        host.ok(repo, "update-index", "--index-version", version)
        assert gitindex.gitlinks(index) == ("a/one", "a/two", "b")
    host.ok(repo, "update-index", "--split-index")
    assert gitindex.gitlinks(index) == ("a/one", "a/two", "b")
    # One git refuses too reads as none; a truncated one keeps the root read-only.
    (repo / ".git" / "index").write_bytes(b"DIRC\0\0\0\x09")
    assert scan([repo]).kept == ()
    (repo / ".git" / "index").write_bytes(b"DIRC\0\0\0\x02\0\0\0\x01" + bytes(30))
    assert [k.path for k in scan([repo]).kept] == [str(repo)]


def test_a_git_that_is_a_symlink_in_a_root_keeps_the_root_read_only(tmp_path: Path) -> None:
    """A `.git` symlink could be replaced: only its directory, the root, could keep it."""
    host = host_of(tmp_path)
    repo = host.repo("repo")
    root = host.base / "root"
    root.mkdir()
    (root / ".git").symlink_to(repo / ".git")
    made = gitguard.plan(scan([root]), [str(root)])
    what = messages.GIT_GUARD_NAMED.format(
        path=root / ".git", reason=messages.GIT_GUARD_DOT_GIT_LINK
    )
    assert made.refused is None and made.binds == (gitguard.Bind(str(root), writable=False),)
    assert made.notices == (messages.GIT_GUARD_SEALED.format(root=root, what=what),)


def test_a_git_that_is_a_fifo_is_kept_as_it_is(tmp_path: Path) -> None:
    """Nothing is opened; the FIFO is bound read-only over itself, and the reason
    names what it is (it once said "a .git that is a symlink")."""
    root = tmp_path / "root"
    root.mkdir()
    os.mkfifo(root / ".git")
    (kept,) = scan([root]).kept
    assert kept.path == str(root / ".git")
    assert kept.what == messages.GIT_GUARD_NAMED.format(
        path=root / ".git", reason=messages.GIT_GUARD_DOT_GIT_ODD
    )


def test_a_pointer_out_of_the_roots_is_not_followed(tmp_path: Path) -> None:
    """A `.git` file naming another repository outside the roots (no way back to
    this checkout): kept as it is, said, and nothing made in what it names."""
    host = host_of(tmp_path)
    other = host.repo("other")
    root = host.base / "root"
    root.mkdir()
    (root / ".git").write_text(f"gitdir: {other}/.git\n")
    before = sorted((other / ".git").iterdir())
    survey = scan([root], commits=True)
    assert survey.git_dirs == () and [k.path for k in survey.kept] == [str(root / ".git")]
    assert survey.notices == (
        messages.GIT_GUARD_POINTER_REFUSED.format(path=root / ".git", target=f"{other}/.git"),
    )
    made = gitscan.prepare([str(root)], commits=True)
    assert made.placeholders == () and sorted((other / ".git").iterdir()) == before
    assert all(beneath.within_any(b.path, [str(root)]) for b in made.binds)


def test_a_commondir_out_of_the_roots_keeps_the_git_dir_read_only(tmp_path: Path) -> None:
    host = host_of(tmp_path)
    other = host.repo("other")
    repo = host.repo("repo")
    (repo / ".git" / "commondir").write_text(f"{other}/.git\n")
    (found,) = scan([repo], commits=True).git_dirs
    assert found.path == str(repo / ".git") and found.sealed
    made = gitscan.prepare([str(repo)], commits=True)
    assert made.binds == (gitguard.Bind(str(repo / ".git"), writable=False),)
    # Nothing to walk to (a link in the root), said with what it names as written.
    (repo / "away").symlink_to(other / ".git")
    (repo / ".git" / "commondir").write_text("../away\n")
    survey = scan([repo], commits=True)
    assert [d.sealed for d in survey.git_dirs] == [True]
    assert survey.notices == (
        messages.GIT_GUARD_COMMONDIR_REFUSED.format(path=repo / ".git", target="../away"),
    )


def test_a_link_on_the_way_to_what_a_config_names_is_kept(tmp_path: Path) -> None:
    """An include that is a link in the root: its target is kept, and so is the
    link's directory, or the link could be pointed at a planted file."""
    host = host_of(tmp_path)
    repo = host.repo("repo")
    (repo / "conf" / "real").mkdir(parents=True)
    (repo / "conf" / "real" / "team.gitconfig").write_text("")
    (repo / "conf" / "team.gitconfig").symlink_to("real/team.gitconfig")
    host.ok(repo, "config", "include.path", "../conf/team.gitconfig")
    kept = {k.path for k in scan([repo]).kept}
    assert kept == {str(repo / "conf"), str(repo / "conf/real/team.gitconfig")}


def test_an_index_is_read_in_bounded_time(tmp_path: Path) -> None:
    """A header claiming more entries than the file could hold is cut at once; a
    read past the scan's deadline stops (and the root is kept read-only)."""
    host = host_of(tmp_path)
    repo = host.repo("repo")
    (repo / "file").write_text("")
    host.ok(repo, "add", "file")
    index = repo / ".git" / "index"
    with pytest.raises(gitindex.IndexUnreadable, match="deadline"):
        gitindex.gitlinks(str(index), deadline=0.0)
    index.write_bytes(b"DIRC\0\0\0\x02\xff\xff\xff\xff" + bytes(1 << 16))
    with pytest.raises(gitindex.IndexUnreadable, match="truncated"):
        gitindex.gitlinks(str(index))
    assert [k.path for k in gitscan.scan([str(repo)], seconds=0.0).kept] == [str(repo)]


PLANTED = ("fifo", "sparse", "zero")


def plant(kind: str, path: Path) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero":
        path.symlink_to("/dev/zero")
    else:
        with path.open("wb") as sparse:
            sparse.truncate(1 << 30)


@pytest.mark.parametrize("name", ["index", "HEAD", "config", "commondir"])
@pytest.mark.parametrize("kind", PLANTED)
def test_a_planted_file_costs_the_scan_nothing(tmp_path: Path, kind: str, name: str) -> None:
    """A FIFO, a `/dev/zero` link or a sparse gigabyte where git expects a small
    file: the start's scan is over at once (once it never returned), and no shell
    is refused for it."""
    host = host_of(tmp_path)
    repo = host.repo("repo")
    planted = repo / ".git" / name
    planted.unlink(missing_ok=True)
    plant(kind, planted)
    for commits in (False, True):
        began = time.monotonic()
        made = gitscan.prepare([str(repo)], commits=commits)
        assert time.monotonic() - began < 2.0 and made.refused is None
