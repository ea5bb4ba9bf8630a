"""Sandbox escapes through git: a confined command (workspace-write, real bwrap and
real git, the host as root and as uid 65534) tries to plant what the host's git
runs later, a `core.fsmonitor` or a hook; then the host's own `git status` and
`git commit` run, and must run nothing.

Each vector runs with read-only git metadata (the default) and with
`gitCommits`, and with the sandbox `off` (as root): there it plants, so the
check sees a planted payload when one gets through."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.envelope import ErrorObject
from bashrpc.protocol.methods import BashResult
from tests.githost import Host, host
from tests.sandboxing import skip_without_sandbox

__all__ = ["host"]

COMMITS = "gitCommits = true\n"


class Setup(msgspec.Struct, frozen=True):
    """How the attacking command runs: unconfined (where it plants), or in
    workspace-write with read-only git metadata (the default) or commits."""

    mode: str
    settings: str = ""

    @property
    def off(self) -> bool:
        return self.mode == "off"


SETUPS = {
    "off": Setup("off"),
    "read-only git": Setup("workspace-write"),
    "commits": Setup("workspace-write", COMMITS),
}


@pytest.fixture(autouse=True)
def _needs_sandbox() -> None:
    skip_without_sandbox()


@pytest.fixture(params=sorted(SETUPS))
def setup(request: pytest.FixtureRequest, host: Host) -> Setup:
    """Each setup; unconfined as root only, where it shows the vector plants."""
    if request.param == "off" and host.user != "root":
        pytest.skip("the unconfined control runs once, as root")
    return SETUPS[request.param]


@pytest.fixture(params=["read-only git", "commits"])
def confined(request: pytest.FixtureRequest) -> Setup:
    return SETUPS[request.param]


def output(result: BashResult | ErrorObject) -> str:
    return result.output if isinstance(result, BashResult) else result.message


def refused(result: BashResult | ErrorObject) -> bool:
    prefix = messages.GIT_GUARD_REFUSED.split("{", 1)[0]
    return isinstance(result, ErrorObject) and prefix in result.message


def test_a_renamed_git_dir_and_a_fresh_one(host: Host, setup: Setup) -> None:
    """`mv .git .git-old` and a fresh `.git` with a chosen config."""
    repo = host.repo("repo")
    command = (
        "mv .git .git-old; git init -q .; "
        f"git config core.fsmonitor '{host.payload()}'; "
        "git config user.email a@example.com; git config user.name a"
    )
    result = host.attack(repo, setup.mode, command, setup.settings)
    assert host.planted(repo) is setup.off, output(result)
    assert (repo / ".git-old").exists() is setup.off


def test_a_commondir_pointed_at_a_planted_copy(host: Host, setup: Setup) -> None:
    """`.git/commondir` naming a copy of the git dir with a planted config."""
    repo = host.repo("repo")
    command = (
        "cp -r .git copy; "
        f"git --git-dir=copy config core.fsmonitor '{host.payload()}'; "
        'rm -f .git/commondir; echo "$PWD/copy" > .git/commondir'
    )
    result = host.attack(repo, setup.mode, command, setup.settings)
    assert host.planted(repo) is setup.off, output(result)


def test_a_hooks_symlink_replaced_by_a_directory(host: Host, setup: Setup) -> None:
    """`.git/hooks` a symlink to a tracked `.githooks/`: the command replaces the
    link with a directory of its own, or writes the link's target."""
    repo = host.repo("repo")
    (repo / ".githooks").mkdir()
    hooks = repo / ".git" / "hooks"
    for child in hooks.iterdir():
        child.unlink()
    hooks.rmdir()
    hooks.symlink_to("../.githooks")
    host.write(repo / ".githooks" / "README", "")
    command = (
        f"{host.hooks()} plant .githooks/post-commit; "
        "rm -rf .git/hooks; mkdir .git/hooks; plant .git/hooks/pre-commit"
    )
    result = host.attack(repo, setup.mode, command, setup.settings)
    assert host.planted(repo) is setup.off, output(result)
    assert hooks.is_symlink() is not setup.off


def with_submodules(host: Host, names: tuple[str, ...] = ("lib", "zlib")) -> Path:
    library = host.repo("library")
    repo = host.repo("repo")
    for name in names:
        host.ok(repo, "submodule", "add", "-q", str(library), name)
    host.ok(repo, "commit", "-q", "-m", "submodules")
    return repo


def test_a_submodules_config_and_hooks(host: Host, setup: Setup) -> None:
    """A submodule's `.git/modules/<name>/config` and hooks, written in place or in
    a fresh `modules/` after moving the old one aside; its checkout's `.git` file
    pointed at a planted copy, in place or in a fresh checkout."""
    repo = with_submodules(host)
    module = ".git/modules/lib"
    payload = host.payload()
    command = (
        f"git --git-dir={module} config core.fsmonitor '{payload}'; "
        f"{host.hooks()} plant {module}/hooks/pre-commit; "
        f"mv .git/modules .git/moved && cp -r .git/moved .git/modules && "
        f"git --git-dir={module} config core.fsmonitor '{payload}'; "
        f"cp -r {module} planted; git config --file planted/config core.worktree $PWD/lib; "
        f"git config --file planted/config core.fsmonitor '{payload}'; "
        'echo "gitdir: $PWD/planted" > lib/.git; '
        'mv lib lib-old; mkdir -p lib; echo "gitdir: $PWD/planted" > lib/.git'
    )
    result = host.attack(repo, setup.mode, command, setup.settings)
    assert host.planted(repo, "lib") is setup.off, output(result)


def test_the_scan_has_no_budget_to_spend(host: Host, setup: Setup) -> None:
    """Issue vector 4: 257 decoy git dirs in `.git/modules`, named before the real
    submodule (as a shell with a writable `modules/` could leave them), once left
    the real one unscanned."""
    repo = with_submodules(host, ("zlib",))
    for i in range(257):
        host.write(repo / ".git" / "modules" / f"a{i:03}" / "HEAD", "ref: refs/heads/main\n")
    module = ".git/modules/zlib"
    command = (
        f"git --git-dir={module} config core.fsmonitor '{host.payload()}'; "
        f"{host.hooks()} plant {module}/hooks/pre-commit"
    )
    result = host.attack(repo, setup.mode, command, setup.settings)
    assert host.planted(repo, "zlib") is setup.off, output(result)


def test_a_submodule_checkout_without_a_git_gets_one(host: Host, setup: Setup) -> None:
    """A gitlink whose checkout is empty (cloned without its submodules): a `.git`
    made there is entered by the host's `git status`, which runs its fsmonitor."""
    source = with_submodules(host, ("lib",))
    repo = host.base / "clone"
    host.ok(host.base, "clone", "-q", str(source), str(repo))
    assert list((repo / "lib").iterdir()) == []
    command = f"cd lib && git init -q && git config core.fsmonitor '{host.payload()}'"
    result = host.attack(repo, setup.mode, command, setup.settings)
    assert host.planted(repo) is setup.off, output(result)


def linked_worktree(host: Host) -> tuple[Path, Path]:
    """A repository with a submodule, and a linked worktree of it with the
    submodule checked out (its git dir under `.git/worktrees/<wt>/modules/`)."""
    main = with_submodules(host, ("lib",))
    worktree = host.base / "worktree"
    host.ok(main, "worktree", "add", "-q", "-b", "side", str(worktree))
    host.ok(worktree, "submodule", "update", "-q", "--init")
    return main, worktree


def test_a_linked_worktree_workspace(host: Host, confined: Setup) -> None:
    """A workspace whose `.git` is a file: its `.git` file and its git dir's
    pointers stay as they are (unconfined, the rewrites break the host's git
    before anything is planted: no control)."""
    main, worktree = linked_worktree(host)
    pointer = (worktree / ".git").read_text()
    admin = main / ".git" / "worktrees" / "worktree"
    payload = host.payload()
    command = (
        f"echo 'gitdir: {host.base}/elsewhere' > .git; "
        f"echo {host.base}/elsewhere > {admin}/commondir; "
        f"git config --worktree core.fsmonitor '{payload}'; "
        f"echo '[core]fsmonitor = {payload}' > {admin}/config.worktree"
    )
    result = host.attack(worktree, confined.mode, command, confined.settings)
    assert (worktree / ".git").read_text() == pointer
    assert (admin / "commondir").read_text() == "../..\n"
    host.ok(main, "config", "extensions.worktreeConfig", "true")
    assert not host.planted(worktree), output(result)


def test_a_linked_worktrees_submodule(host: Host, setup: Setup) -> None:
    """Issue vector 3: a linked worktree keeps its submodules' git dirs in
    `<main>/.git/worktrees/<wt>/modules/<name>`, which was bound writable."""
    main, worktree = linked_worktree(host)
    module = main / ".git" / "worktrees" / "worktree" / "modules" / "lib"
    assert module.is_dir()
    command = (
        f"git --git-dir={module} config core.fsmonitor '{host.payload()}'; "
        f"{host.hooks()} plant {module}/hooks/pre-commit"
    )
    result = host.attack(worktree, setup.mode, command, setup.settings)
    assert host.planted(worktree, "lib") is setup.off, output(result)


def test_a_separate_git_dir_outside_the_workspace(host: Host, setup: Setup) -> None:
    """`git init --separate-git-dir`: the workspace's `.git` file names a git dir
    outside the roots."""
    repo = host.base / "repo"
    host.write(repo / "README", "")
    host.ok(host.base, "init", "-q", "--separate-git-dir", str(host.base / "store.git"), str(repo))
    host.ok(repo, "commit", "-q", "--allow-empty", "-m", "first")
    host.ok(repo, "config", "user.email", "agent@example.com")
    payload = host.payload()
    command = (
        f"git config core.fsmonitor '{payload}'; "
        f"cp -r {host.base}/store.git planted.git; "
        f"git --git-dir=planted.git config core.fsmonitor '{payload}'; "
        'echo "gitdir: $PWD/planted.git" > .git'
    )
    result = host.attack(repo, setup.mode, command, setup.settings)
    assert host.planted(repo) is setup.off, output(result)


def test_an_include_in_a_missing_directory(host: Host, setup: Setup) -> None:
    """Issue vector 5: `include.path = conf/local.gitconfig`, `conf/` missing:
    nothing can keep it but the root itself, which the shell gets read-only,
    its result saying why (a refusal would let a command deny every later shell)."""
    repo = host.repo("repo")
    host.ok(repo, "config", "include.path", "../conf/local.gitconfig")
    command = (
        f"mkdir conf; printf '[core]\\n\\tfsmonitor = {host.payload()}\\n' > conf/local.gitconfig"
    )
    result = host.attack(repo, setup.mode, command, setup.settings)
    assert isinstance(result, BashResult), output(result)
    if not setup.off:
        what = messages.GIT_GUARD_NAMED.format(
            path=f"{repo}/conf/local.gitconfig", reason="include.path"
        )
        assert messages.GIT_GUARD_SEALED.format(root=repo, what=what) in result.output
        assert "Read-only file system" in result.output
    assert host.planted(repo) is setup.off


def test_a_relative_hooks_path_in_the_global_config(host: Host, setup: Setup) -> None:
    """Issue vector 6: `core.hooksPath = .hooks` in the user's `~/.gitconfig`, relative
    to the worktree: the workspace's `.hooks/` must be kept."""
    repo = host.repo("repo")
    host.write(repo / ".hooks" / "README", "")
    host.write(host.home / ".gitconfig", "[core]\n\thooksPath = .hooks\n")
    command = (
        f"{host.hooks()} plant .hooks/pre-commit; "
        "mv .hooks .moved; mkdir .hooks; plant .hooks/pre-commit"
    )
    result = host.attack(repo, setup.mode, command, setup.settings)
    assert host.planted(repo) is setup.off, output(result)


def test_a_workspace_inside_a_repository(host: Host, setup: Setup) -> None:
    """Issue vector 7: a workspace in a repository (a monorepo's package), with no
    `.git` of its own, could `git init` one, whose fsmonitor the host's git runs:
    the shell is refused."""
    repo = host.repo("repo")
    package = repo / "packages" / "app"
    host.write(package / "README", "")
    command = f"git init -q . && git config core.fsmonitor '{host.payload()}'"
    result = host.attack(package, setup.mode, command, setup.settings)
    assert refused(result) is not setup.off, output(result)
    assert host.planted(package) is setup.off


# What the host's config names in the workspace, and how the command rewrites it.
CONFIG_NAMED = {
    "hooksPath": (
        ("core.hooksPath", ".husky/_"),
        "{hooks} plant .husky/_/pre-commit; mv .husky .moved; mkdir -p .husky/_; "
        "plant .husky/_/pre-commit",
    ),
    "include": (
        ("include.path", "../team.gitconfig"),
        "printf '[core]\\n\\tfsmonitor = {payload}\\n' >> team.gitconfig",
    ),
    "missing include": (
        ("include.path", "../conf/local.gitconfig"),
        "printf '[core]\\n\\tfsmonitor = {payload}\\n' >> conf/local.gitconfig",
    ),
    "program in the hooks": (
        ("core.fsmonitor", ".git/hooks/fsmonitor-watchman"),
        "{hooks} plant .git/hooks/pre-commit",
    ),
    "program": (
        ("core.fsmonitor", "./tools/fsmonitor"),
        "{hooks} plant tools/fsmonitor; rm -f tools/fsmonitor; plant tools/fsmonitor",
    ),
}


@pytest.mark.parametrize("named", sorted(CONFIG_NAMED))
def test_what_the_config_names_in_the_workspace(host: Host, setup: Setup, named: str) -> None:
    """The config is read-only, but what it names in the workspace must be too: a
    hooks directory not made yet (husky's `.husky/_` before its install), an
    included config file (there or not), a command's program."""
    repo = host.repo("repo")
    (key, value), command = CONFIG_NAMED[named]
    host.write(repo / "team.gitconfig", "")
    host.write(repo / ".husky" / "pre-commit", "")
    (repo / "conf").mkdir()
    for program in (repo / "tools" / "fsmonitor", repo / ".git" / "hooks" / "fsmonitor-watchman"):
        host.write(program, "#!/bin/sh\nexit 1\n", 0o755)
    host.ok(repo, "config", key, value)
    text = command.format(hooks=host.hooks(), payload=host.payload())
    result = host.attack(repo, setup.mode, text, setup.settings)
    assert host.planted(repo) is setup.off, output(result)


def test_git_metadata_is_read_only_by_default(host: Host) -> None:
    """Reading works; a commit fails, saying why, and the host's repository is as it was."""
    repo = host.repo("repo")
    head = host.ok(repo, "rev-parse", "HEAD")
    server = host.serve(repo, "workspace-write")
    assert server.bash("git log --format=%s").output == "first\n"
    result = server.bash("echo a > a.txt && git add a.txt")
    assert result.exit_code != 0 and "Read-only file system" in result.output
    assert result.sandbox_denied
    assert host.ok(repo, "rev-parse", "HEAD") == head


def test_git_commits_work_with_the_setting(host: Host) -> None:
    repo = host.repo("repo")
    server = host.serve(repo, "workspace-write", COMMITS)
    result = server.bash(
        "echo a > a.txt && git add a.txt && git commit -q -m inside && "
        "git checkout -q -b topic && git rev-parse --abbrev-ref HEAD"
    )
    assert result.output == "topic\n" and result.exit_code == 0
    assert host.ok(repo, "log", "--format=%s", "topic").split() == ["inside", "first"]
    assert host.ok(repo, "status", "--porcelain") == ""


def test_git_commits_in_a_linked_worktree_with_the_setting(host: Host) -> None:
    main, worktree = linked_worktree(host)
    server = host.serve(worktree, "workspace-write", COMMITS)
    result = server.bash("echo b > b.txt && git add b.txt && git commit -q -m in-worktree")
    assert result.exit_code == 0, result.output
    assert host.ok(main, "log", "--format=%s", "side").split()[0] == "in-worktree"
