"""The git guard's rules: which git dirs are bound how, and what is made first."""

from __future__ import annotations

from bashrpc.protocol import messages
from bashrpc.server.runtime.sandbox.gitguard import (
    Bind,
    GitDir,
    Kept,
    Plan,
    Survey,
    plan,
    references,
)

ROOT = "/work/app"
GIT = f"{ROOT}/.git"
OWN_FOUND = frozenset({"config", "hooks", "objects", "refs", "logs", "modules"})


def writable(plan_: Plan) -> list[str]:
    return [b.path for b in plan_.binds if b.writable]


def read_only(plan_: Plan) -> list[str]:
    return [b.path for b in plan_.binds if not b.writable]


def surveyed(*dirs: GitDir, kept: tuple[Kept, ...] = ()) -> Survey:
    return Survey(dirs, kept)


def test_by_default_a_git_dir_is_read_only_whole_and_nothing_is_made() -> None:
    module = GitDir(f"{GIT}/modules/lib", own=True, parent=GIT, link=f"{ROOT}/lib/.git")
    made = plan(surveyed(GitDir(GIT, own=True, found=OWN_FOUND), module), [ROOT])
    # The submodule's git dir is inside the one already read-only: not bound again.
    assert made.binds == (
        Bind(GIT, writable=False),
        Bind(f"{ROOT}/lib", writable=True),
        Bind(f"{ROOT}/lib/.git", writable=False),
    )
    assert made.placeholders == () and made.refused is None


def test_with_commits_a_repository_is_pinned_in_place_and_its_missing_pointers_made() -> None:
    made = plan(surveyed(GitDir(GIT, own=True, found=OWN_FOUND)), [ROOT], commits=True)
    assert made.binds[0] == Bind(GIT, writable=True)
    assert read_only(made) == [
        f"{GIT}/{n}" for n in ("config", "config.worktree", "commondir", "hooks")
    ]
    assert dict(made.placeholders) == {f"{GIT}/config.worktree": "", f"{GIT}/commondir": ".\n"}


def test_with_commits_nested_git_dirs_pin_every_directory_down_to_them() -> None:
    module = GitDir(f"{GIT}/modules/a/b", own=True, found=frozenset({"config"}), parent=GIT)
    made = plan(surveyed(GitDir(GIT, own=True, found=OWN_FOUND), module), [ROOT], commits=True)
    chain = [f"{GIT}/modules", f"{GIT}/modules/a", f"{GIT}/modules/a/b"]
    assert writable(made) == [GIT, *chain]
    assert f"{GIT}/modules/a/b/config" in read_only(made)
    # A submodule's own git dir has hooks of its own: made when missing.
    assert (f"{GIT}/modules/a/b/hooks", None) in made.placeholders


def test_with_commits_a_symlinked_pin_leaves_the_git_dir_read_only_but_for_what_commits_write() -> (
    None
):
    linked = GitDir(
        GIT, own=True, found=OWN_FOUND - {"hooks"}, links=(("hooks", f"{ROOT}/.githooks"),)
    )
    kept = (Kept(f"{ROOT}/.githooks", "x"),)
    made = plan(surveyed(linked, kept=kept), [ROOT], commits=True)
    assert made.binds == (
        Bind(GIT, writable=True),
        Bind(GIT, writable=False),
        Bind(f"{GIT}/objects", writable=True),
        Bind(f"{GIT}/refs", writable=True),
        Bind(f"{GIT}/logs", writable=True),
        Bind(f"{ROOT}/.githooks", writable=False),
    )
    assert made.placeholders == ()


def test_a_linked_worktree_outside_keeps_the_host_repository_read_only() -> None:
    common = "/src/repo/.git"
    admin = GitDir(
        f"{common}/worktrees/app",
        own=False,
        found=frozenset({"commondir", "gitdir", "logs", "modules"}),
        link=f"{ROOT}/.git",
        parent=common,
    )
    module = GitDir(f"{common}/worktrees/app/modules/lib", own=True, parent=admin.path)
    dirs = surveyed(GitDir(common, own=True, found=OWN_FOUND), admin, module)
    assert plan(dirs, [ROOT]).binds == (
        Bind(common, writable=False),
        Bind(f"{ROOT}/.git", writable=False),
    )
    made = plan(dirs, [ROOT], commits=True)
    assert made.binds[:9] == (
        Bind(common, writable=False),
        Bind(f"{common}/objects", writable=True),
        Bind(f"{common}/refs", writable=True),
        Bind(f"{common}/logs", writable=True),
        Bind(f"{ROOT}/.git", writable=False),
        Bind(f"{common}/worktrees/app", writable=True),
        Bind(f"{common}/worktrees/app/config.worktree", writable=False),
        Bind(f"{common}/worktrees/app/commondir", writable=False),
        Bind(f"{common}/worktrees/app/gitdir", writable=False),
    )
    # The worktree's submodule: its way down from the worktree's git dir kept too.
    assert Bind(f"{common}/worktrees/app/modules", writable=True) in made.binds
    assert Bind(f"{module.path}/config", writable=False) in made.binds


def test_references_read_includes_hooks_and_programs() -> None:
    pairs = [
        ("include.path", "../team.gitconfig"),
        ("includeif.gitdir:~/x/.path", "~/shared.gitconfig"),
        ("core.hookspath", ".husky/_"),
        ("diff.pdf.textconv", "./tools/pdf2txt --layout"),
        ("alias.st", "!scripts/st.sh -s"),
        ("alias.co", "checkout"),
        ("core.pager", "less -R"),
        ("core.fsmonitor", "true"),
        ("user.name", "./not/a/command"),
    ]
    found = references(pairs, config_dir=GIT, worktree=ROOT, home="/home/me")
    assert found.includes == (
        ("include.path", f"{ROOT}/team.gitconfig"),
        ("includeif.gitdir:~/x/.path", "/home/me/shared.gitconfig"),
    )
    assert found.named == (
        ("core.hookspath", f"{ROOT}/.husky/_"),
        ("diff.pdf.textconv", f"{ROOT}/tools/pdf2txt"),
        ("alias.st", f"{ROOT}/scripts/st.sh"),
    )
    # With no worktree known (a nested git dir's), only absolute paths count.
    assert references(pairs, config_dir=GIT, worktree=None, home="/h").named == ()


def test_what_is_kept_in_a_root_is_bound_with_the_way_down() -> None:
    kept = (
        Kept(f"{GIT}/my-hooks", "hooks"),
        Kept(f"{ROOT}/tools/bin/tc", "program"),
        Kept("/usr/bin/less", "program"),
    )
    made = plan(surveyed(GitDir(GIT, own=True, found=OWN_FOUND), kept=kept), [ROOT])
    assert made.binds == (
        Bind(GIT, writable=False),
        Bind(f"{ROOT}/tools", writable=True),
        Bind(f"{ROOT}/tools/bin", writable=True),
        Bind(f"{ROOT}/tools/bin/tc", writable=False),
        Bind("/usr/bin/less", writable=False),
    )


def test_what_only_the_root_itself_could_keep_keeps_the_root_read_only() -> None:
    """The shell starts, told why; nothing in that root is bound writable again."""
    what = messages.GIT_GUARD_NAMED.format(path=f"{ROOT}/conf/x", reason="include.path")
    module = GitDir(f"{GIT}/modules/lib", own=True, parent=GIT, link=f"{ROOT}/lib/.git")
    dirs = surveyed(GitDir(GIT, own=True, found=OWN_FOUND), module, kept=(Kept(ROOT, what),))
    for commits in (False, True):
        made = plan(dirs, [ROOT, "/work/other"], commits=commits)
        assert made.refused is None and made.placeholders == ()
        assert made.binds == (Bind(ROOT, writable=False),)
        assert made.notices == (messages.GIT_GUARD_SEALED.format(root=ROOT, what=what),)
    assert plan(Survey(refused=("no",)), [ROOT]).refused == "no"


def test_a_git_dir_whose_commondir_is_not_followed_is_read_only_whole() -> None:
    made = plan(surveyed(GitDir(GIT, own=True, sealed=True)), [ROOT], commits=True)
    assert made.binds == (Bind(GIT, writable=False),) and made.placeholders == ()


def uncovered(binds: tuple[Bind, ...]) -> list[str]:
    """Paths bound read-only that end up writable, as bwrap mounts them: a bind of a
    directory comes without what was mounted inside it."""
    mounted: dict[str, bool] = {}
    for bind in binds:
        inside = [p for p in mounted if p.startswith(bind.path + "/")]
        for path in inside:
            del mounted[path]
        mounted[bind.path] = bind.writable

    def writable(path: str) -> bool:
        covering = [p for p in mounted if path == p or path.startswith(p + "/")]
        return mounted[max(covering, key=len)] if covering else True

    return [b.path for b in binds if not b.writable and writable(b.path)]


def test_no_bind_uncovers_an_earlier_one() -> None:
    modules = [
        GitDir(f"{GIT}/modules/{name}", own=True, found=frozenset({"config"}), parent=GIT)
        for name in ("a", "b")
    ]
    kept = (Kept(f"{GIT}/hooks/fsmonitor-watchman", "program"),)
    dirs = surveyed(GitDir(GIT, own=True, found=OWN_FOUND), *modules, kept=kept)
    for commits in (False, True):
        made = plan(dirs, [ROOT], commits=commits)
        assert uncovered(made.binds) == []
        # The hooks stay read-only: the program inside them is not a reason to bind them writable.
        assert Bind(f"{GIT}/hooks", writable=True) not in made.binds
