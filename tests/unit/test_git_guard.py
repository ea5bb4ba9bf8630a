"""The git guard's rules: which git dirs are bound how, and what is made first."""

from __future__ import annotations

from bashrpc.server.runtime.sandbox.gitguard import Bind, GitDir, Plan, plan, references

ROOT = "/work/app"
GIT = f"{ROOT}/.git"
OWN_FOUND = frozenset({"config", "hooks", "objects", "refs", "logs", "modules"})


def writable(plan_: Plan) -> list[str]:
    return [b.path for b in plan_.binds if b.writable]


def read_only(plan_: Plan) -> list[str]:
    return [b.path for b in plan_.binds if not b.writable]


def test_a_repository_is_pinned_in_place_and_its_missing_pointers_made() -> None:
    made = plan([GitDir(GIT, own=True, found=OWN_FOUND)], [ROOT])
    assert made.binds[0] == Bind(GIT, writable=True)
    assert read_only(made) == [
        f"{GIT}/{n}" for n in ("config", "config.worktree", "commondir", "hooks")
    ]
    assert dict(made.placeholders) == {f"{GIT}/config.worktree": "", f"{GIT}/commondir": ".\n"}


def test_nested_git_dirs_pin_every_directory_down_to_them() -> None:
    module = GitDir(f"{GIT}/modules/a/b", own=True, found=frozenset({"config"}), parent=GIT)
    made = plan([GitDir(GIT, own=True, found=OWN_FOUND), module], [ROOT])
    chain = [f"{GIT}/modules", f"{GIT}/modules/a", f"{GIT}/modules/a/b"]
    assert writable(made) == [GIT, *chain]
    assert f"{GIT}/modules/a/b/config" in read_only(made)
    # A submodule's own git dir has hooks of its own: made when missing.
    assert (f"{GIT}/modules/a/b/hooks", None) in made.placeholders


def test_a_symlinked_pin_leaves_the_git_dir_read_only_but_for_what_commits_write() -> None:
    linked = GitDir(
        GIT, own=True, found=OWN_FOUND - {"hooks"}, links=(("hooks", f"{ROOT}/.githooks"),)
    )
    made = plan([linked], [ROOT])
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
        found=frozenset({"commondir", "gitdir", "logs"}),
        link=f"{ROOT}/.git",
        parent=common,
    )
    made = plan([GitDir(common, own=True, found=OWN_FOUND), admin], [ROOT])
    assert made.binds == (
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
    # Only the worktree config is made: a linked worktree's git dir reads no other.
    assert made.placeholders == ((f"{common}/worktrees/app/config.worktree", ""),)


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
    assert found.includes == (f"{ROOT}/team.gitconfig", "/home/me/shared.gitconfig")
    assert found.hooks_dirs == (f"{ROOT}/.husky/_",)
    assert found.programs == (f"{ROOT}/tools/pdf2txt", f"{ROOT}/scripts/st.sh")
    # With no worktree known (a nested git dir's), only absolute paths count.
    assert references(pairs, config_dir=GIT, worktree=None, home="/h").hooks_dirs == ()


def test_what_the_config_names_in_a_root_is_pinned_with_the_way_down() -> None:
    git_dir = GitDir(
        GIT,
        own=True,
        found=OWN_FOUND,
        referenced=(f"{ROOT}/tools/bin/tc", "/usr/bin/less"),
        includes=(f"{ROOT}/team.gitconfig",),
        hooks_dirs=(f"{GIT}/my-hooks",),
    )
    made = plan([git_dir], [ROOT])
    # The git dir is bound already: not again over its pins.
    assert made.binds[-5:] == (
        Bind(f"{GIT}/my-hooks", writable=False),
        Bind(f"{ROOT}/team.gitconfig", writable=False),
        Bind(f"{ROOT}/tools", writable=True),
        Bind(f"{ROOT}/tools/bin", writable=True),
        Bind(f"{ROOT}/tools/bin/tc", writable=False),
    )
    assert [b.path for b in made.binds].count(GIT) == 1
    assert (f"{GIT}/my-hooks", None) in made.placeholders
    assert (f"{ROOT}/team.gitconfig", "") in made.placeholders
    assert "/usr/bin/less" not in [b.path for b in made.binds]


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
    watchman = GitDir(
        GIT, own=True, found=OWN_FOUND, referenced=(f"{GIT}/hooks/fsmonitor-watchman",)
    )
    made = plan([watchman, *modules], [ROOT])
    assert uncovered(made.binds) == []
    # The hooks stay read-only: the program inside them is not a reason to bind them writable.
    assert Bind(f"{GIT}/hooks", writable=True) not in made.binds
